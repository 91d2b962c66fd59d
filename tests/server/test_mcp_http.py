"""``python -m actors serve --http`` as a process: one smoke test, and what only a process shows.

The official Python SDK client (``ClientSession`` over ``streamable_http_client``) drives a
real server in both protocol eras: the 2025-11-25 handshake (an ``Mcp-Session-Id``, the
default session of calls that name none, DELETEd when the client closes) and 2026-07-28
(``server/discover``, no HTTP session: a call names its session in ``_meta``). Resources,
prompts, completions and the rest of the catalog over HTTP, in both eras, are in
`tests/server/test_mcp_catalog.py`.

The gate's rules (Origin, Host, tokens, body size, sessions per token) and the
tenant rules are tested in process, against the same app, in
`tests/server/test_http_gate.py`; hostile traffic on the wire in
`tests/server/test_mcp_http_limits.py`.
"""

from __future__ import annotations

import signal
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
from mcp import ClientSession, types
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from protocol import HANDLE_REQUIRED

from .._mcp_helpers import (
    SERVE,
    Era,
    anonymous_and_foreign,
    http_server,
    sdk_http_session,
    service_of,
    status_in_session,
    texts,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import httpx2

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]
ALPHA, GATEWAY = "Zq9#xK2pLw7Vn4Rt3sYbT0uQ", "hB1vR8mC4nW6eK2jL9pX5tZ0"
APP = "https://app.example"


async def test_a_server_with_a_tokens_file_serves_refuses_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """The docs' tokens file and client (guides/tenants.md): tools listed, a tenant's call
    served, foreign requests refused, and SIGTERM with a client still connected exits 0."""
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(
        "# operators' tokens\n"
        f"{ALPHA}=alpha   # a '#' inside a token is part of it\n"
        "\n"
        f"{GATEWAY}         # a gateway: any session\n"
    )
    async with http_server("--tokens-file", str(tokens), "--allow-origin", APP) as server:
        async with server.session(ALPHA, headers={"Origin": APP}) as alpha:
            listed = {tool.name for tool in (await alpha.list_tools()).tools}
            meta = {"sessionId": "alpha/conversation-1"}
            created = await alpha.call_tool("planning__create_goal", {"goal": "Ship"}, meta=meta)
            mine = await alpha.call_tool("planning__list_goals", {}, meta=meta)
            theirs = await alpha.call_tool("planning__list_goals", {"__sessionId": "beta/s"})
            anonymous, foreign = await anonymous_and_foreign(server.url, GATEWAY)
            server.process.send_signal(signal.SIGTERM)
            with trio.fail_after(15):
                code = await server.process.wait()
        log = server.log.text()
    assert {"planning__create_goal", "content_store__search_content"} <= listed
    assert "session__end" not in listed  # the operator's to enable
    assert not created.is_error
    assert service_of(created)["serverName"] == "planning"  # item _meta survives HTTP
    assert "g1: Ship" in texts(mine)
    assert theirs.is_error
    assert texts(theirs).startswith("session 'beta/s' is outside tenant 'alpha' of this token")
    assert anonymous.status_code == 401
    assert foreign.status_code == 403
    assert code == 0, log
    assert "tokens: 1 gateway(s), tenant 'alpha': 1" in log
    assert "outcome=outside_tenant" in log
    assert "SIGTERM received: shutting down" in log
    assert "Traceback" not in log


async def test_a_public_bind_without_tokens_refuses_to_start() -> None:
    """0.0.0.0 without --token or --insecure: a clear message and exit code 2, nothing bound."""
    result = await trio.run_process(
        [*SERVE, "--http", "0.0.0.0:0"], capture_stderr=True, check=False
    )
    assert result.returncode == 2
    assert b"refusing to serve on 0.0.0.0 without tokens" in result.stderr


NO_SESSION = (
    "this call names no session, and without an Mcp-Session-Id every client of this server "
    "would share one; name it in _meta.sessionId (or the __sessionId argument)"
)


class Wire:
    """What one client's HTTP traffic showed: its Mcp-Session-Id, and each request's answer."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.answers: list[tuple[str, int]] = []
        """(method, status) of every HTTP request, in order."""

    async def saw(self, response: httpx2.Response) -> None:
        self.session_id = response.headers.get("mcp-session-id") or self.session_id
        self.answers.append((response.request.method, response.status_code))


@asynccontextmanager
async def sdk_client(url: str, era: Era, wire: Wire) -> AsyncIterator[ClientSession]:
    """The SDK's client of `url` in `era`, its HTTP traffic noted in `wire`; closing it
    DELETEs its HTTP session, if it has one."""
    async with create_mcp_http_client() as http:
        http.event_hooks["response"].append(wire.saw)
        async with sdk_http_session(url, http, era) as session:
            yield session


class TestTheSdkClientInBothEras:
    async def test_a_handshake_session_is_served_and_deleted_when_the_client_closes(
        self,
    ) -> None:
        """initialize, ping, tools/list, a call's text, a tool's refusal (isError), an unknown
        tool (-32602), in the session's own state; closing sends DELETE, and the session is
        gone: a request naming it gets 404."""
        wire = Wire()
        async with http_server("--state", "memory") as server:
            async with sdk_client(server.url, "legacy", wire) as client:
                version, info = client.protocol_version, client.server_info
                pinged = await client.send_ping()
                listed = {tool.name for tool in (await client.list_tools()).tools}
                created = await client.call_tool("planning__create_goal", {"goal": "Learn Rust"})
                goals = await client.call_tool("planning__list_goals", {})
                refused = await client.call_tool("planning__create_goal", {"goal": " "})
                with pytest.raises(MCPError) as unknown:
                    await client.call_tool("planning__nope", {})
            assert wire.session_id is not None
            after = await status_in_session(server.url, wire.session_id)
        assert version == "2025-11-25"
        assert info is not None
        assert info.name == "mcp-actors"
        assert isinstance(pinged, types.EmptyResult)
        assert {"planning__create_goal", "playbook_store__create_playbook"} <= listed
        assert texts(created) == "Created goal g1: Learn Rust"
        assert texts(goals) == "Goals (1):\n- g1: Learn Rust"
        assert refused.is_error
        assert texts(refused) == "Error: goal must not be empty"
        assert unknown.value.code == types.INVALID_PARAMS
        assert unknown.value.message.startswith("unknown tool 'planning__nope'; known tools:")
        assert wire.answers[-1] == ("DELETE", 200)
        assert after == 404

    @pytest.mark.parametrize(
        ("handles", "nameless_told"), [("--handles", HANDLE_REQUIRED), ("--no-handles", NO_SESSION)]
    )
    async def test_a_2026_era_client_names_its_session_and_each_session_is_its_own(
        self, handles: str, nameless_told: str
    ) -> None:
        """server/discover (no Mcp-Session-Id); tools/list; a call naming no session is an
        error result that changes nothing (with handles on, the default, it is told to start
        a conversation); calls naming one are served in it alone, refusals and unknown tools
        as in the handshake era; ping is not a 2026 method; nothing to DELETE."""
        wire = Wire()
        alice, bob = {"sessionId": "alice/1"}, {"sessionId": "bob/1"}
        async with http_server("--state", "memory", handles) as server:
            async with sdk_client(server.url, "modern", wire) as client:
                version = client.protocol_version
                with pytest.raises(MCPError) as pinged:
                    await client.send_ping()
                listed = {tool.name for tool in (await client.list_tools()).tools}
                nameless = await client.call_tool("planning__create_goal", {"goal": "lost"})
                created = await client.call_tool(
                    "planning__create_goal", {"goal": "Learn Rust"}, meta=alice
                )
                bobs = await client.call_tool("planning__list_goals", {}, meta=bob)
                alices = await client.call_tool("planning__list_goals", {}, meta=alice)
                refused = await client.call_tool("planning__create_goal", {"goal": ""}, meta=bob)
                with pytest.raises(MCPError) as unknown:
                    await client.call_tool("planning__nope", {}, meta=alice)
        assert version == "2026-07-28"
        assert pinged.value.code == types.METHOD_NOT_FOUND
        assert "planning__list_goals" in listed
        assert nameless.is_error
        assert texts(nameless) == nameless_told
        assert texts(created) == "Created goal g1: Learn Rust"
        assert texts(bobs) == "No goals yet."
        assert texts(alices) == "Goals (1):\n- g1: Learn Rust"
        assert refused.is_error
        assert texts(refused) == "Error: goal must not be empty"
        assert unknown.value.code == types.INVALID_PARAMS
        assert unknown.value.message.startswith("unknown tool 'planning__nope'")
        assert wire.session_id is None
        assert "DELETE" not in {method for method, _ in wire.answers}
