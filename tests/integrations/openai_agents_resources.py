"""openai-agents reading a conversation's resources and prompts: the handle in URI and arguments.

`MCPServerStreamableHttp.read_resource` and `get_prompt` send no ``_meta`` (only tool calls
have `tool_meta_resolver`), so over a 2026-era connection they cannot name a session; with
handles on they pass the conversation's handle instead. Run it with the Python that has
``openai-agents``, given the URL of ``mcp-actors serve --http HOST:PORT --module
examples.notes:notes`` (the notes module has resources and a prompt).
``tests/integrations/test_openai_agents.py`` runs it; the docs page
``docs/integrations/openai-agents.md`` shows it.
"""

from __future__ import annotations

import asyncio
import sys

from agents.mcp import MCPServerStreamableHttp
from mcp.shared.exceptions import MCPError


async def main(url: str) -> None:
    """Start a conversation, add a note, then read it as a resource and through a prompt."""
    async with MCPServerStreamableHttp(name="mcp-actors", params={"url": url}) as server:
        started = await server.call_tool("conversation__start", {})
        assert started.structured_content is not None, started
        handle = started.structured_content["conversation"]
        await server.call_tool("notes__add_note", {"text": "buy milk", "conversation": handle})
        # --8<-- [start:workaround]
        notes = await server.read_resource(f"notes://all?conversation={handle}")
        arguments = {"focus": "typos", "conversation": handle}
        review = await server.get_prompt("notes__review", arguments)
        # --8<-- [end:workaround]
        print(f"notes://all: {notes.contents[0].text}")
        print(f"notes__review: {review.messages[0].content.text}")
        try:
            await server.read_resource("notes://all")
        except MCPError as error:
            print(f"notes://all without the handle: {error.message}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
