"""A durable state class that changed shape, read through migrations."""

# --8<-- [start:migrations]
import tempfile

import attrs
import trio

from actors import Durable, StateUnreadableError, ToolModule, open_runtime
from actors.store import open_store


# The first version of the module stored notes as plain strings (schema 1).
@attrs.define
class NotesV1:
    notes: list[str] = attrs.field(factory=list)


notes_v1 = ToolModule("notes", NotesV1, durable=True)


@notes_v1.tool
def add(state: NotesV1, text: str) -> str:
    """Add a note."""
    state.notes.append(text)
    return "added"


@attrs.define
class Note:
    body: str
    tags: list[str] = attrs.field(factory=list)


@attrs.define
class Notes:
    notes: list[Note] = attrs.field(factory=list)


def tags_added(old: dict) -> dict:  # schema 1 → 2: every note gets tags
    return {**old, "notes": [{"text": text, "tags": []} for text in old["notes"]]}


def text_renamed(old: dict) -> dict:  # schema 2 → 3: "text" is now "body"
    notes = [{"body": note["text"], "tags": note["tags"]} for note in old["notes"]]
    return {**old, "notes": notes}


notes = ToolModule(
    "notes", Notes, durable=Durable(schema=3, migrations={1: tags_added, 2: text_renamed})
)
# --8<-- [end:migrations]


@notes.tool(read_only=True)
def show(state: Notes) -> str:
    """The notes and their tags."""
    return "\n".join(f"{note.body} {note.tags}" for note in state.notes)


# --8<-- [start:unreadable]
# The class changed, but its schema was not raised: schema 1 blobs do not fit it.
unchanged = ToolModule("notes", Notes, durable=True)


@unchanged.tool(read_only=True)
def count(state: Notes) -> str:
    """How many notes there are."""
    return str(len(state.notes))


# --8<-- [end:unreadable]


async def main(url: str) -> None:
    async with open_store(url) as store:
        async with open_runtime([notes_v1], store=store) as runtime:
            added = {"text": "buy milk", "__sessionId": "s1"}
            await runtime.call_tool("notes__add", added)
        async with open_runtime([unchanged], store=store) as runtime:
            # --8<-- [start:refused]
            try:
                await runtime.call_tool("notes__count", {"__sessionId": "s1"})
            except StateUnreadableError as error:
                print(error)
            # --8<-- [end:refused]
        async with open_runtime([notes], store=store) as runtime:
            shown = await runtime.call_tool("notes__show", {"__sessionId": "s1"})
            print(shown.first_text)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        trio.run(main, f"sqlite:///{folder}/notes.db")
