"""The MCP adapter in process: who may claim which session, error shapes, the log line.

The peer is the official SDK's in-memory `mcp.Client`, connected to the adapter's
low-level Server; `identify` stands in for the transport and says who the caller is.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from actors import RuntimeConfig, ToolModule, open_runtime
from actors.modules import planning
from actors.server import McpAdapter, stdio_caller
from actors.server.mcp._adapter import loggable
from actors.store import MemoryStore
from protocol import Caller, ContextPolicy

from .._mcp_helpers import text_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


def waiting_module(entered: trio.Event, release: trio.Event) -> ToolModule[None]:
    """A module with one async tool that sets `entered`, then waits for `release`."""
    module: ToolModule[None] = ToolModule("waiting", lambda _context: None)

    @module.tool
    async def wait(state: None) -> str:
        """Wait until released."""
        entered.set()
        await release.wait()
        return "released"

    return module


@asynccontextmanager
async def client_as(
    caller: Caller,
    *modules: ToolModule[Any],
    store: MemoryStore | None = None,
    allow_end_session: bool = False,
) -> AsyncIterator[Client]:
    """An in-memory SDK client whose every request comes from `caller`."""
    async with open_runtime(modules or [planning], store=store) as runtime:
        adapter = McpAdapter(
            runtime, identify=lambda _ctx: caller, allow_end_session=allow_end_session
        )
        async with Client(adapter.server) as client:
            yield client


ALPHA = Caller("token-1", tenant="alpha")
ALPHA_CONNECTION = Caller("token-1", tenant="alpha", transport_session="t1")
STDIO = stdio_caller("connection-private")
HTTP_ANONYMOUS = Caller("anonymous")  # an HTTP client without Mcp-Session-Id or tenant


class TestUnknownTools:
    @pytest.mark.parametrize(
        "arguments",
        [
            {"__sessionId": "beta/s"},  # outside the caller's tenant
            {"__sessionId": 7},  # bad context
            {"__sessionid": "alpha"},  # unknown context field
            {},
        ],
    )
    async def test_an_unknown_tool_is_invalid_params_whatever_the_context(
        self, arguments: dict[str, Any]
    ) -> None:
        """The name is resolved first: the error does not depend on the session or arguments."""
        async with client_as(ALPHA) as client:
            with pytest.raises(MCPError, match=r"unknown tool 'nope__tool'") as caught:
                await client.call_tool("nope__tool", arguments)
        assert caught.value.error.code == -32602


class TestDefaultSession:
    async def test_a_shared_transport_without_a_session_is_refused(self) -> None:
        """Over HTTP without Mcp-Session-Id or tenant, a call naming no session is an error."""
        async with client_as(HTTP_ANONYMOUS) as client:
            result = await client.call_tool("planning__create_goal", {"goal": "mine"})
            named = await client.call_tool(
                "planning__create_goal", {"goal": "mine", "__sessionId": "s1"}
            )
        assert result.is_error
        assert text_of(result).startswith(
            "this call names no session, and without an Mcp-Session-Id every client"
        )
        assert not named.is_error

    async def test_a_tenant_token_without_a_session_uses_its_own_bucket(self) -> None:
        """A tenant caller's default session is inside its tenant, shared only by itself."""
        async with client_as(ALPHA) as client:
            await client.call_tool("planning__create_goal", {"goal": "alpha's"})
            seen = await client.call_tool("planning__list_goals", {"__sessionId": "alpha/default"})
        assert "alpha's" in text_of(seen)

    async def test_the_stdio_parent_lands_in_its_connections_session(self) -> None:
        """Invariant 11: never 'default', which every server on one store would share."""
        store = MemoryStore()
        async with client_as(STDIO, store=store) as client:
            await client.call_tool("planning__create_goal", {"goal": "parent's"})
            seen = await client.call_tool(
                "planning__list_goals", {}, meta={"sessionId": "connection-private"}
            )
            shared = await client.call_tool(
                "planning__list_goals", {}, meta={"sessionId": "default"}
            )
        assert "parent's" in text_of(seen)
        assert text_of(shared) == "No goals yet."

    async def test_an_adapter_told_nothing_gives_its_client_a_private_session(self) -> None:
        """Without `identify`, calls naming no session share one session of this adapter's own."""
        store = MemoryStore()
        async with open_runtime([planning], store=store) as runtime:
            first, second = McpAdapter(runtime), McpAdapter(runtime)
            async with Client(first.server) as one, Client(second.server) as other:
                await one.call_tool("planning__create_goal", {"goal": "one's"})
                again = await one.call_tool("planning__list_goals", {})
                seen = await other.call_tool("planning__list_goals", {})
                shared = await other.call_tool(
                    "planning__list_goals", {}, meta={"sessionId": "default"}
                )
        assert "one's" in text_of(again)
        assert text_of(seen) == "No goals yet."
        assert text_of(shared) == "No goals yet."

    async def test_a_transport_session_is_the_default(self) -> None:
        """An older-era HTTP client lands in its Mcp-Session-Id."""
        async with client_as(Caller("anonymous", transport_session="abc")) as client:
            await client.call_tool("planning__create_goal", {"goal": "conn"})
            seen = await client.call_tool("planning__list_goals", {"__sessionId": "abc"})
        assert "conn" in text_of(seen)


class TestLogLine:
    @pytest.mark.parametrize(
        "name",
        [
            "planning__list_goals\n2026-01-01 INFO actors.mcp: tools/call forged outcome=ok",
            "x session='victim' outcome=ok",
            "\x1b[2Jclear",
            "a" * 5000,
        ],
    )
    async def test_a_hostile_tool_name_cannot_forge_a_log_record(
        self, name: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The name is escaped: one record, one line, no raw control characters or fields."""
        caplog.set_level(logging.INFO, logger="actors.mcp")
        async with client_as(STDIO) as client:
            with pytest.raises(MCPError):
                await client.call_tool(name, {"__sessionId": "s"})
        (record,) = [r for r in caplog.records if r.name == "actors.mcp"]
        message = record.getMessage()
        assert "\n" not in message
        assert "\x1b" not in message
        assert message.count(" outcome=") == 1
        assert "session='victim'" not in message
        assert len(message) < 400
        assert message.startswith(f"tools/call {loggable(name)} session=? ")
        assert "outcome=unknown_tool" in message

    def test_plain_names_are_logged_as_they_are(self) -> None:
        """Ordinary tool names stay readable; anything else is percent-encoded and cut."""
        assert loggable("planning__create_goal") == "planning__create_goal"
        assert loggable("builtin.planning__create_goal") == "builtin.planning__create_goal"
        assert loggable("a b") == "a%20b"
        assert loggable("x\ny'") == "x%0Ay%27"
        assert loggable("é" * 200) == "%C3%A9" * 128 + "…"

    async def test_a_cancelled_call_is_logged_with_its_context(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The caller going away still leaves a line that says whose call it was."""
        caplog.set_level(logging.INFO, logger="actors.mcp")
        entered, release = trio.Event(), trio.Event()
        async with client_as(STDIO, waiting_module(entered, release)) as client:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    await client.call_tool(
                        "waiting__wait", {}, meta={"sessionId": "s1", "assistantId": "a1"}
                    )

                nursery.start_soon(call)
                await entered.wait()  # the call runs: the caller goes away now
                nursery.cancel_scope.cancel()
            release.set()  # the call, which went on without its caller, may end now
        # Leaving the client ends the connection, which cancels the call if its
        # cancellation notification has not already done so.
        (line,) = [r.getMessage() for r in caplog.records if "outcome=cancelled" in r.getMessage()]
        assert "session='s1' assistant='a1' thread=-" in line


class TestEndSession:
    async def test_it_is_not_listed_nor_served_unless_enabled(self) -> None:
        """Off by default: a model cannot end a session; the name is an unknown tool."""
        store = MemoryStore()
        async with client_as(ALPHA_CONNECTION, store=store) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            await client.call_tool("planning__create_goal", {"goal": "g"})
            with pytest.raises(MCPError, match=r"unknown tool 'session__end'") as caught:
                await client.call_tool("session__end", {})
            kept = await client.call_tool("planning__list_goals", {})
        assert "session__end" not in listed
        assert caught.value.error.code == -32602
        assert "g" in text_of(kept)

    async def test_ending_its_own_session_deletes_its_state(self) -> None:
        """Enabled, session__end stops the caller's own session and deletes what is stored."""
        store = MemoryStore()
        async with client_as(ALPHA_CONNECTION, store=store, allow_end_session=True) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            await client.call_tool("planning__create_goal", {"goal": "g"})
            await client.call_tool("planning__create_goal", {"goal": "k", "__sessionId": "alpha/k"})
            ended = await client.call_tool("session__end", {})
            after = await client.call_tool("planning__list_goals", {})
            kept = await client.call_tool("planning__list_goals", {"__sessionId": "alpha/k"})
        assert "session__end" in listed
        assert not ended.is_error
        assert ended.structured_content == {"sessionId": "alpha/t1", "deleted": 1}
        assert text_of(after) == "No goals yet."
        assert "k" in text_of(kept)

    @pytest.mark.parametrize("caller", [ALPHA_CONNECTION, STDIO], ids=["tenant", "stdio"])
    async def test_a_session_it_names_cannot_be_ended(self, caller: Caller) -> None:
        """Not even one the caller may use: only the connection's own session ends."""
        store = MemoryStore()
        async with client_as(caller, store=store, allow_end_session=True) as client:
            k = {"sessionId": "alpha/k"}  # named by the host: the stdio model could not
            await client.call_tool("planning__create_goal", {"goal": "k"}, meta=k)
            refused = await client.call_tool("session__end", {}, meta=k)
            kept = await client.call_tool("planning__list_goals", {}, meta=k)
        own = caller.default_session(ContextPolicy())
        assert refused.is_error
        assert text_of(refused) == (
            f"session__end ends only this connection's own session ({own!r}), not 'alpha/k'; "
            "call it without a session id"
        )
        assert "k" in text_of(kept)

    async def test_another_tenants_session_cannot_be_ended(self) -> None:
        """The tenant rule holds: naming beta's session is refused and beta keeps its state."""
        store = MemoryStore()
        beta = Caller("token-2", tenant="beta")
        async with client_as(beta, store=store) as client:
            await client.call_tool("planning__create_goal", {"goal": "b", "__sessionId": "beta/s"})
        async with client_as(ALPHA, store=store, allow_end_session=True) as client:
            refused = await client.call_tool("session__end", {"__sessionId": "beta/s"})
        async with client_as(beta, store=store) as client:
            kept = await client.call_tool("planning__list_goals", {"__sessionId": "beta/s"})
        assert refused.is_error
        assert text_of(refused).startswith("session 'beta/s' is outside tenant 'alpha'")
        assert "b" in text_of(kept)

    async def test_arguments_are_refused(self) -> None:
        """It takes no arguments: a model's stray argument changes nothing."""
        async with client_as(
            ALPHA_CONNECTION, store=MemoryStore(), allow_end_session=True
        ) as client:
            await client.call_tool("planning__create_goal", {"goal": "g"})
            refused = await client.call_tool("session__end", {"all": True})
            kept = await client.call_tool("planning__list_goals", {})
        assert refused.is_error
        assert text_of(refused) == "session__end takes no arguments, got 'all'"
        assert "g" in text_of(kept)

    @pytest.mark.parametrize(
        "caller",
        [
            Caller("token-1", tenant="alpha"),  # a 2026-era client: no Mcp-Session-Id
            Caller("anonymous"),
            stdio_caller(None),  # the stdio parent under --require-session
        ],
        ids=["tenant", "anonymous", "stdio"],
    )
    async def test_naming_no_session_is_refused_under_the_strict_policy(
        self, caller: Caller
    ) -> None:
        """Like any call that names no session under --require-session: refused; 'default' kept."""
        strict = RuntimeConfig(policy=ContextPolicy(require_session=True))
        async with open_runtime([planning], strict, store=MemoryStore()) as runtime:
            await runtime.call_tool(
                "planning__create_goal", {"goal": "kept", "__sessionId": "default"}
            )
            adapter = McpAdapter(runtime, identify=lambda _ctx: caller, allow_end_session=True)
            async with Client(adapter.server) as client:
                ended = await client.call_tool("session__end", {})
            listed = await runtime.call_tool("planning__list_goals", {"__sessionId": "default"})
        assert ended.is_error
        assert "kept" in listed.first_text
