"""A tool module of your own: notes per session and assistant, kept in a store.

Serve it with ``mcp-actors serve --module examples.notes:notes`` from the
project root (docs/guides/modules.md teaches how to write one). Besides its
tools, it shows a host the notes of the caller's conversation as resources
(``notes://all``, ``notes://note/{number}``), offers a prompt to review them,
logs to the client, and asks the user before it deletes anything.
"""

from typing import Annotated

import attrs

from actors import Ask, Log, Scope, ToolError, ToolModule


@attrs.define
class Notes:
    items: list[str] = attrs.field(factory=list)


notes = ToolModule("notes", Notes, scope=Scope.SESSION_ASSISTANT, durable=True)


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


@notes.tool(destructive=True, idempotent=True)
async def clear_notes(state: Notes, ask: Ask, log: Log) -> str:
    """Delete every note, once the user confirms."""
    if not state.items:
        return "There are no notes to delete."
    form = {"type": "object", "properties": {"confirm": {"type": "boolean", "title": "Delete?"}}}
    answer = await ask.user(f"Delete all {len(state.items)} notes?", form)
    if not (answer.accepted and answer.content and answer.content.get("confirm")):
        log.info("the user kept the notes")
        return "Nothing was deleted."
    deleted, state.items = len(state.items), []
    log.warning(f"deleted {deleted} notes")
    return f"Deleted {deleted} notes."


@notes.resource("notes://all", title="Notes", mime_type="text/markdown")
def all_notes(state: Notes) -> str:
    """Every note of this conversation, one per line."""
    return "\n".join(f"{number}. {text}" for number, text in enumerate(state.items, 1))


@notes.resource("notes://note/{number}", title="A note", mime_type="text/plain")
def one_note(state: Notes, number: Annotated[str, "The note's number, from 1."]) -> str:
    """One note of this conversation, by its number."""
    if not number.isdigit() or not 1 <= int(number) <= len(state.items):
        raise ToolError(f"there is no note {number!r}; there are {len(state.items)}")
    return state.items[int(number) - 1]


@notes.completion("notes://note/{number}", "number")
def note_numbers(state: Notes, typed: str) -> list[str]:
    """The numbers of this conversation's notes that start with what was typed."""
    numbers = (str(number) for number in range(1, len(state.items) + 1))
    return [number for number in numbers if number.startswith(typed)]


@notes.prompt(title="Review the notes")
def review(state: Notes, focus: Annotated[str, "What to look for."] = "open questions") -> str:
    """Ask the model to review this conversation's notes."""
    listed = "\n".join(f"- {text}" for text in state.items) or "(no notes yet)"
    return f"Review these notes, looking for {focus}:\n{listed}"
