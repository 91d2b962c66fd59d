"""pydantic-ai reading a conversation's resources and prompts: the handle in the URI and arguments.

`MCPToolset.read_resource` and `MCPToolset.get_prompt` send no ``_meta``, so over a 2026-era
connection they cannot name a session; with handles on they pass the conversation's handle
instead. Run it with the Python that has ``pydantic-ai-slim[mcp]``, given the URL of
``mcp-actors serve --http HOST:PORT --module examples.notes:notes`` (the notes module has
resources and a prompt). ``tests/integrations/test_pydantic_ai.py`` runs it; the docs page
``docs/integrations/pydantic-ai.md`` shows it.
"""

from __future__ import annotations

import asyncio
import re
import sys

from pydantic_ai.mcp import MCPError, MCPToolset

HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")


async def main(url: str) -> None:
    """Start a conversation, add a note, then read it as a resource and through a prompt."""
    async with MCPToolset(url) as toolset:
        started = await toolset.direct_call_tool("conversation__start", {})
        found = HANDLE.search(str(started))
        assert found is not None, started
        handle = found.group()
        await toolset.direct_call_tool(
            "notes__add_note", {"text": "buy milk", "conversation": handle}
        )
        # --8<-- [start:workaround]
        notes = await toolset.read_resource(f"notes://all?conversation={handle}")
        review = await toolset.get_prompt(
            "notes__review", {"focus": "typos", "conversation": handle}
        )
        # --8<-- [end:workaround]
        print(f"notes://all: {notes}")
        print(f"notes__review: {review.messages[0].content.content}")
        try:
            await toolset.read_resource("notes://all")
        except MCPError as error:
            print(f"notes://all without the handle: {error.message}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
