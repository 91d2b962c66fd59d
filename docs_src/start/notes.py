"""Notes kept per conversation: the tool module of the tutorial."""

# --8<-- [start:state]
from typing import Annotated

import attrs

from actors import Scope, ToolError, ToolModule


@attrs.define
class Notes:
    items: list[str] = attrs.field(factory=list)


notes = ToolModule("notes", Notes, scope=Scope.SESSION, durable=True)
# --8<-- [end:state]


# --8<-- [start:tools]
@notes.tool
def add_note(state: Notes, text: Annotated[str, "The note."]) -> dict[str, int]:
    """Add a note; returns how many there are."""
    if not text.strip():
        message = "text must not be empty"
        raise ToolError(message)
    state.items.append(text)
    return {"count": len(state.items)}


@notes.tool(read_only=True)
def list_notes(state: Notes) -> str:
    """The notes, one per line."""
    if not state.items:
        return "No notes yet."
    return "\n".join(f"- {item}" for item in state.items)


# --8<-- [end:tools]
