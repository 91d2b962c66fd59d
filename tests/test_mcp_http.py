"""``python -m actors serve --http``: Streamable HTTP, with the official SDK client as the peer."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import httpx2
import pytest
import trio
from mcp import types
from mcp.shared.exceptions import MCPError

from ._mcp_helpers import SERVE, Era, http_server, service_of, texts

if TYPE_CHECKING:
    from pathlib import Path

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]
ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
ALPHA, BETA, GATEWAY = "alpha-token-5f1c", "beta-token-9e2d0", "gateway-token-77aa"
TOKENS = ("--token", f"{ALPHA}=alpha", "--token", f"{BETA}=beta", "--token", GATEWAY)


class TestTenants:
    @ERAS
    async def test_a_tenant_token_reaches_only_its_own_sessions(self, era: Era) -> None:
        """alpha works in alpha/…; naming beta's session is refused with an error result."""
        async with http_server(*TOKENS) as server:
            async with server.session(BETA, era) as beta:
                await beta.call_tool(
                    "planning__create_goal", {"goal": "beta's secret", "__sessionId": "beta/s"}
                )
            async with server.session(ALPHA, era) as alpha:
                mine = await alpha.call_tool(
                    "planning__create_goal", {"goal": "alpha's", "__sessionId": "alpha/s"}
                )
                theirs = await alpha.call_tool("planning__list_goals", {"__sessionId": "beta/s"})
                by_meta = await alpha.call_tool(
                    "planning__list_goals", {}, meta={"sessionId": "beta"}
                )
                prefix = await alpha.call_tool("planning__list_goals", {"__sessionId": "alphabet"})
            log = server.log.text()
        assert not mine.is_error
        assert service_of(mine)["serverName"] == "planning"  # item _meta survives HTTP
        assert theirs.is_error
        assert texts(theirs).startswith("session 'beta/s' is outside tenant 'alpha' of this token")
        assert by_meta.is_error
        assert prefix.is_error  # 'alphabet' is not 'alpha/…'
        assert "beta's secret" not in texts(theirs)
        assert "outcome=outside_tenant" in log

    async def test_a_call_naming_no_session_stays_in_the_tenant(self) -> None:
        """Without a session, a tenant token lands in alpha/<Mcp-Session-Id>, per connection."""
        async with http_server(*TOKENS) as server:
            async with server.session(ALPHA) as first:
                await first.call_tool("planning__create_goal", {"goal": "first connection"})
                again = texts(await first.call_tool("planning__list_goals", {}))
            async with server.session(ALPHA) as second:
                other = texts(await second.call_tool("planning__list_goals", {}))
            async with server.session(ALPHA, "modern") as modern:
                await modern.call_tool("planning__create_goal", {"goal": "modern"})
            log = server.log.text()
        assert "first connection" in again
        assert "first connection" not in other
        assert "tools/call planning__create_goal session='alpha/" in log
        assert "session='alpha/default'" in log  # the modern era has no transport session

    async def test_a_gateway_token_may_address_any_session(self, tmp_path: Path) -> None:
        """A token bound to no tenant is a trusted gateway; every caller sees the same tools."""
        tokens = tmp_path / "tokens.txt"
        tokens.write_text(f"# operator tokens\n{ALPHA}=alpha\n\n{GATEWAY}  # the gateway\n")
        async with http_server("--tokens-file", str(tokens)) as server:
            async with server.session(ALPHA) as alpha:
                await alpha.call_tool(
                    "planning__create_goal", {"goal": "g", "__sessionId": "alpha"}
                )
                alpha_tools = (await alpha.list_tools()).tools
            async with server.session(GATEWAY) as gateway:
                seen = texts(
                    await gateway.call_tool("planning__list_goals", {"__sessionId": "alpha"})
                )
                gateway_tools = (await gateway.list_tools()).tools
        assert "g1: g" in seen
        assert alpha_tools == gateway_tools


class TestRefusals:
    async def test_a_request_without_a_valid_token_gets_401(self) -> None:
        """No token or a wrong one: HTTP 401 with WWW-Authenticate; the SDK client gets the text."""
        async with http_server(*TOKENS) as server:
            async with httpx2.AsyncClient() as http:
                missing = await http.post(server.url, json={})
                wrong = await http.post(
                    server.url, json={}, headers={"Authorization": f"Bearer {ALPHA}x"}
                )
            # Raised during the handshake, inside the SDK client's task groups.
            refused = pytest.RaisesGroup(
                pytest.RaisesExc(MCPError, match="bearer token is required"),
                flatten_subgroups=True,
            )
            with refused:
                async with server.session("not-a-token"):
                    pass
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert wrong.status_code == 401

    async def test_a_foreign_origin_gets_403(self) -> None:
        """A browser page from elsewhere is refused; loopback and --allow-origin ones are not."""
        allowed = "https://app.example"
        async with http_server("--allow-origin", allowed) as server:
            async with httpx2.AsyncClient() as http:
                statuses = {
                    origin: (await http.post(server.url, json={}, headers={"Origin": origin}))
                    for origin in (
                        "http://evil.example",
                        "http://localhost.evil.example:80",
                        "http://localhost:3000",
                        allowed,
                    )
                }
        assert statuses["http://evil.example"].status_code == 403
        assert "'http://evil.example' is not allowed" in statuses["http://evil.example"].text
        assert statuses["http://localhost.evil.example:80"].status_code == 403
        assert statuses["http://localhost:3000"].status_code != 403
        assert statuses[allowed].status_code != 403

    async def test_an_oversized_body_is_refused_and_serving_goes_on(self) -> None:
        """A body over --max-request-bytes gets 413, surfaced by the SDK client; serving goes on."""
        async with http_server("--max-request-bytes", "8192") as server:
            async with server.session() as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("planning__create_goal", {"goal": "x" * 20_000})
                after = await client.call_tool("planning__create_goal", {"goal": "small"})
        assert "at most 8192 bytes" in raised.value.message
        assert not after.is_error

    async def test_an_unknown_tool_is_a_jsonrpc_error(self) -> None:
        """-32602 over HTTP too."""
        async with http_server() as server:
            async with server.session() as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("nothing__here", {})
        assert raised.value.code == types.INVALID_PARAMS

    async def test_a_public_bind_without_tokens_refuses_to_start(self) -> None:
        """0.0.0.0 without --token or --insecure: a clear message and exit code 2, nothing bound."""
        result = await trio.run_process(
            [*SERVE, "--http", "0.0.0.0:0"], capture_stderr=True, check=False
        )
        assert result.returncode == 2
        assert b"refusing to serve on 0.0.0.0 without tokens" in result.stderr


class TestSessions:
    async def test_one_client_uses_many_sessions_concurrently(self) -> None:
        """Twenty sessions over one connection at once; each sees exactly its own goals."""
        seen: dict[str, str] = {}
        async with http_server() as server, server.session() as client:

            async def work(session: str) -> None:
                for number in range(3):
                    await client.call_tool(
                        "planning__create_goal",
                        {"goal": f"{session}-{number}"},
                        meta={"sessionId": session},
                    )
                listed = await client.call_tool("planning__list_goals", {"__sessionId": session})
                seen[session] = texts(listed)

            async with trio.open_nursery() as nursery:
                for index in range(20):
                    nursery.start_soon(work, f"s{index}")
        for session, text in seen.items():
            lines = [line for line in text.splitlines() if line.startswith("- ")]
            assert [line.split(": ", 1)[1] for line in lines] == [
                f"{session}-{n}" for n in range(3)
            ]

    async def test_without_tokens_each_connection_defaults_to_its_own_session(self) -> None:
        """Mcp-Session-Id is the default session of an older-era client that names none."""
        async with http_server() as server:
            async with server.session() as first:
                await first.call_tool("planning__create_goal", {"goal": "mine"})
                own = texts(await first.call_tool("planning__list_goals", {}))
            async with server.session() as second:
                other = texts(await second.call_tool("planning__list_goals", {}))
        assert "mine" in own
        assert "mine" not in other


async def test_sigterm_stops_the_http_server_with_exit_code_0() -> None:
    """A signal shuts the server down cleanly, even with a client connected."""
    async with http_server() as server, server.session() as client:
        await client.call_tool("planning__create_goal", {"goal": "g"})
        server.process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            code = await server.process.wait()
        assert code == 0, server.log.text()
        assert "SIGTERM received: shutting down" in server.log.text()
