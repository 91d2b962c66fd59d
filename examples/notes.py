"""A tool module of your own: notes per session and assistant, kept in a store.

Serve it with ``mcp-actors serve --module examples.notes:notes`` from the
project root (docs/guides/modules.md teaches how to write one).
"""

from typing import Annotated

import attrs

from actors import Durable, ToolError, ToolModule
from protocol import Scope


@attrs.define
class Notes:
    items: list[str] = attrs.field(factory=list)


notes = ToolModule(
    "notes", lambda context: Notes(), scope=Scope.SESSION_ASSISTANT, durable=Durable(Notes)
)


@notes.tool
def add_note(state: Notes, text: Annotated[str, "The note."], pinned: bool = False) -> dict:
    """Add a note; returns how many there are."""
    if not text.strip():
        raise ToolError("Error: text must not be empty")
    state.items.append(text)
    return {"count": len(state.items)}


@notes.tool(read_only=True)
def count_notes(state: Notes) -> dict:
    """How many notes there are."""
    return {"count": len(state.items)}
