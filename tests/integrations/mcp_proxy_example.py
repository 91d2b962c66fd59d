"""Two conversations through mcp-proxy, each kept apart by its conversation handle.

Run it with the Python that has ``mcp-proxy`` (and so the MCP SDK it is built on).
mcp-proxy bridges stdio and HTTP either way, and this script is the client at the
far end:

* given the address of ``mcp-proxy --port PORT -- mcp-actors serve --handles`` (a stdio
  server offered over HTTP), Alice connects over its Streamable HTTP endpoint and Bob
  over its SSE one, as two users of the proxy would;
* given ``--stdio`` and the URL of ``mcp-actors serve --http HOST:PORT``, it is a host
  that starts ``mcp-proxy --transport streamablehttp URL`` over stdio, as a desktop host
  would, and holds both conversations on that one connection.

``tests/integrations/test_mcp_proxy.py`` runs it both ways, and against
``--no-handles``; the docs page ``docs/integrations/mcp-proxy.md`` shows it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TYPE_CHECKING

from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

if TYPE_CHECKING:
    from mcp.types import CallToolResult

# --8<-- [start:model]
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")


def text(result: CallToolResult) -> str:
    """What a model reads of a tool's answer: its text items."""
    return "\n".join(item.text for item in result.content if item.type == "text")


async def converse(session: ClientSession, goal: str) -> str:
    """A scripted stand-in for a model in one conversation: remember `goal`, list goals.

    It passes the handle that conversation__start returned (found where a model finds
    it: in that tool's answer) to every later call. A server without handles offers no
    conversation__start: the model then has nothing to pass.
    """
    tools = {tool.name for tool in (await session.list_tools()).tools}
    handle = {}
    if "conversation__start" in tools:
        started = text(await session.call_tool("conversation__start", {}))
        handle = {"conversation": HANDLE.search(started).group()}
    await session.call_tool("planning__create_goal", {"goal": goal, **handle})
    return text(await session.call_tool("planning__list_goals", handle))


# --8<-- [end:model]


def report(alice: str, bob: str) -> None:
    """What each conversation finally listed."""
    print(f"Alice: {alice}")
    print(f"Bob: {bob}")


# --8<-- [start:over_http]
async def through_the_proxy(proxy: str) -> None:
    """Alice on the proxy's Streamable HTTP endpoint, Bob on its SSE one, at once."""
    async with (
        streamablehttp_client(f"{proxy}/mcp") as (read, write, _),
        ClientSession(read, write) as alice_session,
        sse_client(f"{proxy}/sse") as (bob_read, bob_write),
        ClientSession(bob_read, bob_write) as bob_session,
    ):
        await alice_session.initialize()
        await bob_session.initialize()
        report(
            *await asyncio.gather(
                converse(alice_session, "learn Rust"),
                converse(bob_session, "water the plants"),
            )
        )


# --8<-- [end:over_http]


# --8<-- [start:over_stdio]
async def from_a_stdio_host(url: str) -> None:
    """A host that starts mcp-proxy over stdio for an HTTP server: two conversations."""
    arguments = ["--transport", "streamablehttp", url]
    proxy = StdioServerParameters(command="mcp-proxy", args=arguments)
    async with (
        stdio_client(proxy) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        report(
            *await asyncio.gather(
                converse(session, "learn Rust"), converse(session, "water the plants")
            )
        )


# --8<-- [end:over_stdio]


if __name__ == "__main__":
    # The proxy's address (http://127.0.0.1:8080), or --stdio and the server's URL.
    if sys.argv[1] == "--stdio":
        asyncio.run(from_a_stdio_host(sys.argv[2]))
    else:
        asyncio.run(through_the_proxy(sys.argv[1]))
