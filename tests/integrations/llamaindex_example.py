"""LlamaIndex's `BasicMCPClient` and `McpToolSpec` keeping two conversations apart.

Run it with the Python that has ``llama-index-tools-mcp``. With no argument it has
`BasicMCPClient` start ``mcp-actors serve --handles`` over stdio (or the server command
line it is given); given a URL, it connects to a server started with
``mcp-actors serve --http HOST:PORT`` (handles are on by default there).
`BasicMCPClient` opens a connection for every request, and over stdio starts a server
process for each.
``tests/integrations/test_llamaindex.py`` runs it both ways, and against
``--no-handles``; the docs page ``docs/integrations/llamaindex.md`` shows it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TYPE_CHECKING

from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

if TYPE_CHECKING:
    from llama_index.core.tools import FunctionTool, ToolOutput

# --8<-- [start:model]
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")


def text(output: ToolOutput) -> str:
    """The text items of the MCP result a tool's output wraps."""
    content = output.raw_output.content
    return "\n".join(item.text for item in content if item.type == "text")


async def converse(tools: list[FunctionTool], goal: str) -> str:
    """A scripted stand-in for a model in one conversation: remember `goal`, list goals.

    It calls the tools one step at a time, as LlamaIndex's agents do (``tool.acall``),
    and passes the handle that conversation__start returned (found where a model finds
    it: in that tool's output) to every later call. A server without handles offers no
    conversation__start: the model then has nothing to pass.
    """
    tool = {tool.metadata.name: tool for tool in tools}
    handle = {}
    if "conversation__start" in tool:
        started = await tool["conversation__start"].acall()
        handle = {"conversation": HANDLE.search(started.content).group()}
    await tool["planning__create_goal"].acall(goal=goal, **handle)
    return text(await tool["planning__list_goals"].acall(**handle))


# --8<-- [end:model]


# --8<-- [start:main]
async def main(client: BasicMCPClient) -> None:
    """Alice's and Bob's conversations at once, on the same tools."""
    tools = await McpToolSpec(client=client).to_tool_list_async()
    alice, bob = await asyncio.gather(
        converse(tools, "learn Rust"), converse(tools, "water the plants")
    )
    print(f"Alice: {alice}")
    print(f"Bob: {bob}")


if __name__ == "__main__":
    # The URL of `mcp-actors serve --http 127.0.0.1:8000`, or the command line of a
    # server for LlamaIndex to start over stdio (`mcp-actors serve --handles`).
    command, *arguments = sys.argv[1:] or ["mcp-actors", "serve", "--handles"]
    asyncio.run(main(BasicMCPClient(command, args=arguments)))
# --8<-- [end:main]
