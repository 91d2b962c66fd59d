"""A mistyped tool, prompt, resource URI or template is refused with the names it is likely
a typo of, closest first.

The suggestion comes before the list of known tools (or prompts), which is cut at twenty
names: the one a caller meant may not be among those shown.
"""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from actors import (
    ToolModule,
    UnknownPromptError,
    UnknownResourceError,
    UnknownToolError,
    open_runtime,
)
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


# ---- prompts, resources, resource templates ------------------------------------------------


def notes() -> ToolModule[None]:
    """A module with a prompt, a resource and a resource template, to mistype."""
    module: ToolModule[None] = ToolModule("notes", lambda _context: None)

    @module.resource("notes://all")
    def all_notes(state: None) -> str:
        """Every note."""
        return ""

    @module.resource("notes://note/{number}")
    def one_note(state: None, number: str) -> str:
        """One note, by its number."""
        return number

    @module.prompt
    def review(state: None) -> str:
        """Review the notes."""
        return "review"

    return module


async def refusal(typed: str, kind: str) -> str:
    """The message refusing `typed` as a prompt, a resource's URI or a template to complete."""
    meta = {"sessionId": "s"}
    async with open_runtime([notes()]) as runtime:
        ask = {
            "prompt": lambda: runtime.get_prompt(typed, meta=meta),
            "uri": lambda: runtime.read_resource(typed, meta=meta),
            "template": lambda: runtime.complete(typed, "number", "", meta=meta),
        }[kind]
        with pytest.raises((UnknownPromptError, UnknownResourceError)) as raised:
            await ask()
        assert runtime.statistics().calls == 0  # refused before anything ran
    return str(raised.value)


@pytest.mark.parametrize(
    ("typed", "kind", "meant", "then"),
    [
        ("notes__reveiw", "prompt", "notes__review", "known prompts: notes__review"),
        ("notes://al", "uri", "notes://all", "resources/list and resources/templates/list"),
        ("notes://note/{numbr}", "template", "notes://note/{number}", "see resources/templates"),
    ],
)
async def test_a_typo_of_a_prompt_uri_or_template_names_the_one_it_is_near(
    typed: str, kind: str, meant: str, then: str
) -> None:
    """The guess between the refusal and where to look, as for tools."""
    message = await refusal(typed, kind)
    assert f"{typed!r}; did you mean {meant!r}? {then}" in message


@pytest.mark.parametrize(
    ("typed", "kind"),
    [
        ("notes__nope", "prompt"),
        ("notes://none", "uri"),
        ("notes://nota/7", "uri"),  # near only the template, whose text is no URI to read
        ("x://{y}", "template"),
    ],
)
async def test_a_prompt_uri_or_template_near_none_suggests_none(typed: str, kind: str) -> None:
    message = await refusal(typed, kind)
    assert typed in message
    assert "did you mean" not in message


async def test_the_mcp_error_for_an_unknown_prompt_carries_the_suggestion() -> None:
    async with open_runtime([notes()]) as runtime:
        adapter = McpAdapter(runtime, identify=lambda _ctx: stdio_caller("c"))
        async with Client(adapter.server) as client:
            with pytest.raises(MCPError) as raised:
                await client.get_prompt("notes__reveiw")
    assert "did you mean 'notes__review'?" in raised.value.error.message
