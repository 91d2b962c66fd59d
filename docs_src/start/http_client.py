"""Call the notes server over Streamable HTTP with the MCP SDK's client.

Start the server first: mcp-actors serve --module notes:notes --http 127.0.0.1:8765
"""

import trio
from mcp import Client


async def main(url: str = "http://127.0.0.1:8765/mcp") -> None:
    async with Client(url) as client:
        meta = {"sessionId": "s1"}
        added = await client.call_tool("notes__add_note", {"text": "buy milk"}, meta=meta)
        print(added.structured_content)
        result = await client.call_tool("notes__list_notes", {}, meta=meta)
        print(result.content[0].text)
        other = await client.call_tool("notes__list_notes", {}, meta={"sessionId": "s2"})
        print(other.content[0].text)


if __name__ == "__main__":
    trio.run(main)
