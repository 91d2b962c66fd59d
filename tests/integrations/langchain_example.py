"""LangChain's `MultiServerMCPClient` keeping two conversations apart through handles.

Run it with the Python that has ``langchain-mcp-adapters``. With no argument it starts
``mcp-actors serve --handles`` itself, over stdio (or the server command line it is
given); given a URL, it connects to a server started with
``mcp-actors serve --http HOST:PORT`` (handles are on by default there). Every tool call
opens a connection of its own, as `MultiServerMCPClient.get_tools` does by default;
``--session`` first keeps one connection for the whole run instead
(`MultiServerMCPClient.session`). ``tests/integrations/test_langchain.py`` runs it every
way, and against ``--no-handles``; the docs page ``docs/integrations/langchain.md``
shows it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TYPE_CHECKING, Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

# --8<-- [start:model]
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")


def text(content: Any) -> str:
    """What a model reads of a tool's answer: its text blocks."""
    return "\n".join(block["text"] for block in content if block["type"] == "text")


async def converse(tools: list[BaseTool], goal: str) -> str:
    """A scripted stand-in for a model in one conversation: remember `goal`, list goals.

    It calls the tools one step at a time, as an agent does, and passes the handle that
    conversation__start returned (found where a model finds it: in that tool's answer)
    to every later call. A server without handles offers no conversation__start: the
    model then has nothing to pass.
    """
    tool = {tool.name: tool for tool in tools}
    handle = {}
    if "conversation__start" in tool:
        started = text(await tool["conversation__start"].ainvoke({}))
        handle = {"conversation": HANDLE.search(started).group()}
    await tool["planning__create_goal"].ainvoke({"goal": goal, **handle})
    return text(await tool["planning__list_goals"].ainvoke(handle))


# --8<-- [end:model]


async def two_conversations(tools: list[BaseTool]) -> None:
    """Alice's and Bob's conversations at once, on the same tools."""
    alice, bob = await asyncio.gather(
        converse(tools, "learn Rust"), converse(tools, "water the plants")
    )
    print(f"Alice: {alice}")
    print(f"Bob: {bob}")


# --8<-- [start:main]
async def main(server: dict[str, Any], one_session: bool) -> None:
    """Run the two conversations with a connection per call, or in one session."""
    client = MultiServerMCPClient({"actors": server})
    if one_session:
        async with client.session("actors") as session:
            await two_conversations(await load_mcp_tools(session))
    else:
        # A new connection for each call.
        await two_conversations(await client.get_tools())


if __name__ == "__main__":
    # [--session], then the URL of `mcp-actors serve --http 127.0.0.1:8000`, or the
    # command line of a server for LangChain to start over stdio
    # (`mcp-actors serve --handles`).
    one_session = sys.argv[1:2] == ["--session"]
    where = sys.argv[1 + one_session :] or ["mcp-actors", "serve", "--handles"]
    if where[0].startswith("http"):
        server = {"transport": "http", "url": where[0]}
    else:
        server = {"transport": "stdio", "command": where[0], "args": where[1:]}
    asyncio.run(main(server, one_session))
# --8<-- [end:main]
