"""smolagents' `MCPClient` and `ToolCollection.from_mcp` keeping conversations apart.

Run it with the Python that has ``smolagents[mcp]``. With no argument it starts
``mcp-actors serve --handles`` over stdio (or the server command line it is given);
given a URL, it connects to a server started with ``mcp-actors serve --http HOST:PORT``
(handles are on by default there). It holds one connection for the whole run, through
`MCPClient`, or through `ToolCollection.from_mcp` when ``--collection`` comes first.
``tests/integrations/test_smolagents.py`` runs it every way, and against
``--no-handles``; the docs page ``docs/integrations/smolagents.md`` shows it.
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from mcp import StdioServerParameters
from smolagents import MCPClient, ToolCollection

if TYPE_CHECKING:
    from smolagents import Tool

# --8<-- [start:model]
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")


def converse(tools: list[Tool], goal: str) -> str:
    """A scripted stand-in for a model in one conversation: remember `goal`, list goals.

    It calls the tools one step at a time, as smolagents' agents do
    (``tool(**arguments)``), and passes the handle that conversation__start returned
    (found where a model finds it: in that tool's answer) to every later call. A server
    without handles offers no conversation__start: the model then has nothing to pass.
    """
    tool = {tool.name: tool for tool in tools}
    handle = {}
    if "conversation__start" in tool:
        started = tool["conversation__start"]()
        handle = {"conversation": HANDLE.search(started).group()}
    tool["planning__create_goal"](goal=goal, **handle)
    return tool["planning__list_goals"](**handle)


# --8<-- [end:model]


def two_conversations(tools: list[Tool]) -> None:
    """Alice's and Bob's conversations at once, in two threads, on the same tools."""
    with ThreadPoolExecutor(max_workers=2) as agents:
        goals = ["learn Rust", "water the plants"]
        alice, bob = agents.map(converse, [tools, tools], goals)
    print(f"Alice: {alice}")
    print(f"Bob: {bob}")


# --8<-- [start:main]
def main(
    server_parameters: StdioServerParameters | dict[str, Any],
    collection: bool,
) -> None:
    """Both conversations on one connection: an MCPClient's, or a ToolCollection's."""
    if collection:
        with ToolCollection.from_mcp(
            server_parameters, trust_remote_code=True, structured_output=False
        ) as tool_collection:
            two_conversations(tool_collection.tools)
    else:
        with MCPClient(server_parameters, structured_output=False) as tools:
            two_conversations(tools)


if __name__ == "__main__":
    # [--collection], then the URL of `mcp-actors serve --http 127.0.0.1:8000`, or the
    # command line of a server for smolagents to start over stdio
    # (`mcp-actors serve --handles`).
    collection = sys.argv[1:2] == ["--collection"]
    where = sys.argv[1 + collection :] or ["mcp-actors", "serve", "--handles"]
    if where[0].startswith("http"):
        server_parameters = {"url": where[0], "transport": "streamable-http"}
    else:
        server_parameters = StdioServerParameters(command=where[0], args=where[1:])
    main(server_parameters, collection)
# --8<-- [end:main]
