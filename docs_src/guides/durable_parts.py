"""A durable state stored part by part: a write stores the notes a call changed."""

# --8<-- [start:parts]
import tempfile

import attrs
import trio

from actors import Durable, ToolModule, open_runtime
from actors.store import open_store
from protocol import ActorKey, ToolContext


@attrs.frozen  # a part is immutable: to change one, put a new one in its place
class Note:
    body: str
    tags: tuple[str, ...] = ()


@attrs.define
class Notebook:
    title: str = "untitled"  # the header: everything that is not a part
    notes: dict[str, Note] = attrs.field(factory=dict)  # note id → note: the parts


notebook = ToolModule("notebook", Notebook, durable=Durable(parts=("notes",)))


@notebook.tool
def write(state: Notebook, note_id: str, body: str) -> str:
    """Write a note, new or over an old one."""
    state.notes[note_id] = Note(body)
    return note_id


@notebook.tool
def tag(state: Notebook, note_id: str, tag: str) -> str:
    """Tag a note."""
    note = state.notes[note_id]
    state.notes[note_id] = attrs.evolve(note, tags=(*note.tags, tag))
    return note_id


# --8<-- [end:parts]


# --8<-- [start:refused]
@attrs.define  # not frozen: a tool could change a note in place, unseen
class LooseNote:
    body: str


@attrs.define
class LooseNotebook:
    notes: dict[str, LooseNote] = attrs.field(factory=dict)


try:
    Durable(LooseNotebook, parts=("notes",))
except TypeError as error:
    print(error)
# --8<-- [end:refused]


async def main(url: str) -> None:
    async with open_store(url) as store:
        async with open_runtime([notebook], store=store) as runtime:
            for note_id in ("n1", "n2", "n3"):
                written = {"note_id": note_id, "body": "…", "__sessionId": "s1"}
                await runtime.call_tool("notebook__write", written)
            await runtime.call_tool(
                "notebook__tag", {"note_id": "n2", "tag": "urgent", "__sessionId": "s1"}
            )
        # --8<-- [start:stored]
        stored = await store.load(ActorKey("notebook", ToolContext("s1")), parts=True)
        print(f"header {stored.blob.decode()}")
        for name, part in stored.parts.items():
            print(f"  part {name}: {part.decode()}")
        # --8<-- [end:stored]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        trio.run(main, f"sqlite:///{folder}/notes.db")
