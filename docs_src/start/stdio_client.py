"""Start the notes server on stdio and call it with the MCP SDK's client."""

from pathlib import Path

import trio
from mcp import Client, StdioServerParameters

HERE = Path(__file__).parent  # the folder of notes.py: the server imports it from there


async def main() -> None:
    server = StdioServerParameters(
        command="mcp-actors", args=["serve", "--module", "notes:notes"], cwd=HERE
    )
    async with Client(server) as client:
        listed = await client.list_tools()
        print([tool.name for tool in listed.tools])
        added = await client.call_tool("notes__add_note", {"text": "buy milk"})
        print(added.structured_content)
        result = await client.call_tool("notes__list_notes", {})
        print(result.content[0].text)


if __name__ == "__main__":
    trio.run(main)
