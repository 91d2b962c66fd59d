"""FastMCP's `Client` keeping two conversations apart through conversation handles.

Run it with the Python that has ``fastmcp``: with no argument it starts
``mcp-actors serve --handles`` itself, over stdio; given a URL, it connects to a server
started with ``mcp-actors serve --http HOST:PORT`` (handles are on by default there).
``tests/clients/test_fastmcp_client.py`` runs it both ways; the docs page
``docs/integrations/fastmcp.md`` shows it.
"""

from __future__ import annotations

import asyncio
import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport


# --8<-- [start:main]
async def start(client: Client) -> str:
    """A new conversation's handle."""
    started = await client.call_tool("conversation__start")
    return started.structured_content["conversation"]


async def main(server: StreamableHttpTransport | StdioTransport) -> None:
    """Two conversations on one client; then a new client finds each one's goal."""
    async with Client(server) as client:
        alice, bob = await start(client), await start(client)
        goal = "planning__create_goal"
        await client.call_tool(goal, {"goal": "learn Rust", "conversation": alice})
        await client.call_tool(goal, {"goal": "water the plants", "conversation": bob})
    async with Client(server) as client:  # a new client: the handles still name them
        for name, handle in (("Alice", alice), ("Bob", bob)):
            arguments = {"conversation": handle}
            goals = await client.call_tool("planning__list_goals", arguments)
            print(f"{name}: {goals.content[0].text}")


if __name__ == "__main__":
    # The URL of `mcp-actors serve --http 127.0.0.1:8000`, or the command FastMCP starts
    # to serve over stdio (by default with handles turned on).
    where = sys.argv[1:] or ["mcp-actors", "serve", "--handles"]
    if where[0].startswith("http"):
        server = StreamableHttpTransport(where[0])
    else:
        server = StdioTransport(command=where[0], args=where[1:])
    asyncio.run(main(server))
# --8<-- [end:main]
