"""Notes per session, written for FastMCP 4 as its docs teach: the "before" of a port.

``notes.py`` beside it is the same server on mcp-actors; docs/getting-started/
coming-from-fastmcp.md sets the two side by side. Run it with FastMCP's Python.
"""

from dataclasses import dataclass
from typing import Annotated

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError
from pydantic import Field

# --8<-- [start:tools]
mcp = FastMCP("notes")
NOTES: dict[str, list[str]] = {}  # each session's notes, by its ctx.session_id


@mcp.tool
def add_note(
    text: Annotated[str, Field(min_length=1, max_length=200, description="The note.")],
    ctx: Context,
) -> int:
    """Add a note; returns how many there are."""
    notes = NOTES.setdefault(ctx.session_id, [])
    notes.append(text)
    return len(notes)


@mcp.tool
def list_notes(ctx: Context) -> list[str]:
    """This session's notes, oldest first."""
    return NOTES.get(ctx.session_id, [])


@mcp.tool
def word_count(text: str) -> int:
    """How many words a text has (a tool that keeps nothing)."""
    return len(text.split())


# --8<-- [end:tools]
# --8<-- [start:ask]
@dataclass
class Confirm:
    confirm: bool


@mcp.tool
async def clear_notes(ctx: Context) -> str:
    """Delete every note, once the user confirms."""
    notes = NOTES.get(ctx.session_id, [])
    if not notes:
        return "There are no notes to delete."
    answer = await ctx.elicit(f"Delete all {len(notes)} notes?", Confirm)
    if answer.action != "accept" or not answer.data.confirm:
        await ctx.info("the user kept the notes")
        return "Nothing was deleted."
    del NOTES[ctx.session_id]
    await ctx.info(f"deleted {len(notes)} notes")
    return f"Deleted {len(notes)} notes."


# --8<-- [end:ask]
# --8<-- [start:show]
@mcp.resource("notes://note/{number}", mime_type="text/plain")
def one_note(number: str, ctx: Context) -> str:
    """One note of this session, by its number from 1."""
    notes = NOTES.get(ctx.session_id, [])
    if not number.isdigit() or not 1 <= int(number) <= len(notes):
        raise ResourceError(f"there is no note {number!r}; there are {len(notes)}")
    return notes[int(number) - 1]


@mcp.prompt
def review(ctx: Context, focus: str = "open questions") -> str:
    """Ask the model to review this session's notes."""
    listed = "\n".join(f"- {text}" for text in NOTES.get(ctx.session_id, []))
    return f"Review these notes, looking for {focus}:\n{listed or '(no notes yet)'}"


# --8<-- [end:show]
if __name__ == "__main__":
    mcp.run(show_banner=False)  # stdio
