"""`actors.testing.connect`: the official SDK client over the real protocol, in memory.

What a module's own tests use (docs/guides/testing.md): each test here checks
that what the client sees is what a host sees from ``mcp-actors serve``.
"""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from actors import open_runtime
from actors.modules import planning
from actors.testing import connect
from protocol import Caller

from .._mcp_helpers import text_of


class TestModules:
    @pytest.mark.parametrize("mode", ["auto", "legacy"])
    async def test_a_module_is_listed_and_called_as_a_host_would(self, mode: str) -> None:
        """Tools as listed, a result as it crosses the wire, in either protocol era."""
        async with connect(planning, mode=mode) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            created = await client.call_tool("planning__create_goal", {"goal": "Ship"})
            seen = await client.call_tool("planning__list_goals", {})
        assert "planning__create_goal" in listed
        assert "session__end" not in listed
        assert not created.is_error
        assert text_of(seen) == "Goals (1):\n- g1: Ship"

    async def test_each_connection_is_a_session_of_its_own(self) -> None:
        """Two clients on one runtime that name no session see nothing of each other."""
        async with open_runtime([planning]) as runtime:
            async with connect(runtime) as one, connect(runtime) as other:
                await one.call_tool("planning__create_goal", {"goal": "one's"})
                mine = await one.call_tool("planning__list_goals", {})
                theirs = await other.call_tool("planning__list_goals", {})
            sessions = {info.key.context.session_id for info in runtime.actors()}
        assert "one's" in text_of(mine)
        assert text_of(theirs) == "No goals yet."
        assert len(sessions) == 2
        assert all(session.startswith("connection-") for session in sessions)

    async def test_refusals_arrive_as_a_host_gets_them(self) -> None:
        """Bad arguments: an isError result the model reads; an unknown tool: -32602."""
        async with connect([planning]) as client:
            bad = await client.call_tool("planning__create_goal", {"goal": 3})
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("planning__nope", {})
        assert bad.is_error
        assert "$.goal: expected a string" in text_of(bad)
        assert unknown.value.error.code == -32602


class TestCallers:
    async def test_a_tenants_client_reaches_only_its_tenant(self) -> None:
        async with connect([planning], caller=Caller("token-1", tenant="alpha")) as client:
            mine = await client.call_tool(
                "planning__create_goal", {"goal": "g", "__sessionId": "alpha/1"}
            )
            theirs = await client.call_tool("planning__list_goals", {"__sessionId": "beta/1"})
        assert not mine.is_error
        assert theirs.is_error
        assert text_of(theirs).startswith("session 'beta/1' is outside tenant 'alpha'")

    async def test_session_end_is_listed_only_when_allowed(self) -> None:
        async with connect([planning], allow_end_session=True) as client:
            await client.call_tool("planning__create_goal", {"goal": "g"})
            ended = await client.call_tool("session__end", {})
            after = await client.call_tool("planning__list_goals", {})
        assert not ended.is_error
        assert text_of(after) == "No goals yet."
