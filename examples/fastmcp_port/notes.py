"""The notes of ``fastmcp_notes.py``, ported to mcp-actors: the "after" of a port.

Serve it with ``mcp-actors serve --module examples/fastmcp_port/notes.py``.
docs/getting-started/coming-from-fastmcp.md sets the two side by side.
"""

from dataclasses import dataclass
from typing import Annotated

import attrs
from pydantic import Field

from actors import Ask, Log, ToolError, ToolModule


# --8<-- [start:tools]
@attrs.define
class Notes:
    items: list[str] = attrs.Factory(list)


# One Notes per session, stored; namespaced=False keeps FastMCP's names (add_note).
notes = ToolModule("notes", Notes, durable=True, namespaced=False)


@notes.tool
def add_note(
    state: Notes,
    text: Annotated[str, Field(min_length=1, max_length=200, description="The note.")],
) -> int:
    """Add a note; returns how many there are."""
    state.items.append(text)
    return len(state.items)


@notes.tool(read_only=True)
def list_notes(state: Notes) -> list[str]:
    """This session's notes, oldest first."""
    return state.items


@notes.tool
def word_count(text: str) -> int:
    """How many words a text has (a tool that keeps nothing)."""
    return len(text.split())


# --8<-- [end:tools]
# --8<-- [start:ask]
@dataclass
class Confirm:
    confirm: bool


@notes.tool
async def clear_notes(state: Notes, ask: Ask, log: Log) -> str:
    """Delete every note, once the user confirms."""
    if not state.items:
        return "There are no notes to delete."
    answer = await ask.user(f"Delete all {len(state.items)} notes?", Confirm)
    if answer.data is None or not answer.data.confirm:  # None: declined or cancelled
        log.info("the user kept the notes")
        return "Nothing was deleted."
    deleted, state.items = len(state.items), []
    log.info(f"deleted {deleted} notes")
    return f"Deleted {deleted} notes."


# --8<-- [end:ask]
# --8<-- [start:show]
@notes.resource("notes://note/{number}", mime_type="text/plain")
def one_note(state: Notes, number: str) -> str:
    """One note of this session, by its number from 1."""
    if not number.isdigit() or not 1 <= int(number) <= len(state.items):
        raise ToolError(f"there is no note {number!r}; there are {len(state.items)}")
    return state.items[int(number) - 1]


@notes.prompt
def review(state: Notes, focus: str = "open questions") -> str:
    """Ask the model to review this session's notes."""
    listed = "\n".join(f"- {text}" for text in state.items)
    return f"Review these notes, looking for {focus}:\n{listed or '(no notes yet)'}"


# --8<-- [end:show]
