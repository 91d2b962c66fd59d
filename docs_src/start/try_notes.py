"""Call the notes tools in process: two sessions, a refusal, and a restart."""

import tempfile

import trio
from notes import notes

from actors import open_runtime
from actors.store import open_store


async def main(state: str) -> None:
    async with open_store(state) as store:
        async with open_runtime([notes], store=store) as runtime:
            added = await runtime.call_tool(
                "notes__add_note", {"text": "buy milk", "__sessionId": "s1"}
            )
            print(added.structured_content)
            mine = await runtime.call_tool("notes__list_notes", {"__sessionId": "s1"})
            print(mine.first_text)
            theirs = await runtime.call_tool("notes__list_notes", {"__sessionId": "s2"})
            print(theirs.first_text)
            blank = {"text": " ", "__sessionId": "s1"}
            refused = await runtime.call_tool("notes__add_note", blank)
            print(refused.is_error, refused.first_text)
        async with open_runtime([notes], store=store) as runtime:
            again = await runtime.call_tool("notes__list_notes", {"__sessionId": "s1"})
            print(again.first_text)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        trio.run(main, f"sqlite:///{folder}/notes.db")
