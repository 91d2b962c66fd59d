"""The official SDK client with ``mcp-actors serve`` on stdio: the client starts the server."""

import sys

import trio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def main() -> None:
    server = StdioServerParameters(command=sys.executable, args=["-m", "actors", "serve"])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        context = {"sessionId": "s1", "assistantId": "a1"}
        await session.call_tool("planning__create_goal", {"goal": "Learn Rust"}, meta=context)
        result = await session.call_tool("planning__list_goals", {}, meta=context)
        print(result.content[0].text)  # Goals (1):\n- g1: Learn Rust
        other = await session.call_tool("planning__list_goals", {}, meta={"sessionId": "s2"})
        print(other.content[0].text)  # No goals yet.


if __name__ == "__main__":
    trio.run(main)
