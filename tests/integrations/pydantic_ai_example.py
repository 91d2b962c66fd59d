"""pydantic-ai's `MCPToolset` keeping two conversations apart through handles.

Run it with the Python that has ``pydantic-ai-slim[mcp]``: with no argument it starts
``mcp-actors serve --handles`` itself, over stdio (other arguments: the command to start
instead); given a URL, it connects to a server started with ``mcp-actors serve --http
HOST:PORT`` (handles are on by default there).
``tests/integrations/test_pydantic_ai.py`` runs it both ways; the docs page
``docs/integrations/pydantic-ai.md`` shows it.
"""

from __future__ import annotations

import asyncio
import re
import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

# --8<-- [start:model]
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")
START = "conversation__start"


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A stand-in for a real model: it opens a conversation, then passes its handle.

    "My goal: X" adds the goal X; anything else lists the goals. A tool's answer (or its
    error) is repeated as the reply. The handle is found where a model finds it: in what
    conversation__start returned earlier in this conversation's messages. A server
    without handles lists no conversation__start: then the tools are called without one.
    """
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart) and last.tool_name != START:
        return ModelResponse(parts=[TextPart(str(last.content))])
    if isinstance(last, RetryPromptPart):
        return ModelResponse(parts=[TextPart(last.model_response())])
    arguments = {}
    if any(tool.name == START for tool in info.function_tools):
        returned = [
            str(part.content)
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.tool_name == START
        ]
        found = HANDLE.search("\n".join(returned))
        if found is None:
            return ModelResponse(parts=[ToolCallPart(START, {})])
        arguments["conversation"] = found.group()
    prompt = next(
        part.content
        for message in reversed(messages)
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    )
    assert isinstance(prompt, str)
    if prompt.startswith("My goal: "):
        arguments["goal"] = prompt.removeprefix("My goal: ")
        return ModelResponse(parts=[ToolCallPart("planning__create_goal", arguments)])
    return ModelResponse(parts=[ToolCallPart("planning__list_goals", arguments)])


# --8<-- [end:model]


# --8<-- [start:main]
async def main(toolset: MCPToolset) -> None:
    """Two conversations at once on one toolset, each over two agent runs."""
    agent = Agent(FunctionModel(scripted), toolsets=[toolset])
    async with agent:  # one connection (over stdio, one server process) for every run
        alice, bob = await asyncio.gather(
            agent.run("My goal: learn Rust"), agent.run("My goal: water the plants")
        )
        alice, bob = await asyncio.gather(
            agent.run("What are my goals?", message_history=alice.all_messages()),
            agent.run("What are my goals?", message_history=bob.all_messages()),
        )
    print(f"Alice: {alice.output}")
    print(f"Bob: {bob.output}")


if __name__ == "__main__":
    # The URL of `mcp-actors serve --http 127.0.0.1:8000`, or the command pydantic-ai
    # starts to serve over stdio (by default with handles turned on).
    where = sys.argv[1:] or ["mcp-actors", "serve", "--handles"]
    if where[0].startswith("http"):
        toolset = MCPToolset(where[0])
    else:
        toolset = MCPToolset(StdioTransport(command=where[0], args=where[1:]))
    asyncio.run(main(toolset))
# --8<-- [end:main]
