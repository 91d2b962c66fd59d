"""Call the notes server over Streamable HTTP with the MCP SDK's client.

Start the server first, in the folder of notes.py, its state in a file there:
mcp-actors serve --module notes:notes --http 127.0.0.1:8765 --state sqlite:///notes.db
"""

import trio
from mcp import Client


async def main(url: str = "http://127.0.0.1:8765/mcp") -> None:
    async with Client(url) as client:
        meta = {"sessionId": "s1"}
        note = {"text": "buy milk"}
        added = await client.call_tool("notes__add_note", note, meta=meta)
        print(added.structured_content)
        result = await client.call_tool("notes__list_notes", {}, meta=meta)
        print(result.content[0].text)
        theirs = {"sessionId": "s2"}
        other = await client.call_tool("notes__list_notes", {}, meta=theirs)
        print(other.content[0].text)


if __name__ == "__main__":
    trio.run(main)
