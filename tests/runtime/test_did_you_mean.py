"""A mistyped tool name is refused with the names it is likely a typo of, closest first.

The suggestion comes before the list of known tools, which is cut at twenty names: the
tool a caller meant may not be among those shown.
"""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from actors import UnknownToolError, open_runtime
from actors.modules import planning
from actors.server import McpAdapter, stdio_caller

KNOWN = "known tools: planning__add_todo, "


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("planing__create_goal", "'planning__create_goal'"),  # a letter missing
        ("planning_create_goal", "'planning__create_goal'"),  # one underscore for two
        ("create_gaol", "'create_goal'"),  # letters swapped in the bare name
        ("planning__make_todo", "'planning__mark_todo' or 'planning__add_todo'"),  # two near
    ],
)
async def test_a_typo_names_the_tools_it_is_near(typed: str, meant: str) -> None:
    """Each tool once, in the caller's spelling (bare, namespaced), before the known tools."""
    async with open_runtime([planning]) as runtime:
        with pytest.raises(UnknownToolError) as raised:
            await runtime.call_tool(typed, {"__sessionId": "s"})
    assert str(raised.value).startswith(f"unknown tool {typed!r}; did you mean {meant}? {KNOWN}")


@pytest.mark.parametrize("typed", ["planning__nope", "zzz"])
async def test_a_name_near_no_tool_suggests_none(typed: str) -> None:
    """A shared ``planning__`` prefix alone is no likeness: no guess, only the known tools."""
    async with open_runtime([planning]) as runtime:
        with pytest.raises(UnknownToolError) as raised:
            await runtime.call_tool(typed, {"__sessionId": "s"})
    assert str(raised.value).startswith(f"unknown tool {typed!r}; {KNOWN}")


async def test_the_mcp_error_for_an_unknown_tool_carries_the_suggestion() -> None:
    async with open_runtime([planning]) as runtime:
        adapter = McpAdapter(runtime, identify=lambda _ctx: stdio_caller("c"))
        async with Client(adapter.server) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("planing__create_goal", {})
    assert "did you mean 'planning__create_goal'?" in raised.value.error.message
