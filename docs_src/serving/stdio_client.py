"""The official SDK client with ``mcp-actors serve`` on stdio: the client starts it."""

import sys

import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

SERVE = ["-m", "actors", "serve"]


async def main() -> None:
    server = StdioServerParameters(command=sys.executable, args=SERVE)
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        context = {"sessionId": "s1", "assistantId": "a1"}
        goal = {"goal": "Learn Rust"}
        await session.call_tool("planning__create_goal", goal, meta=context)
        result = await session.call_tool("planning__list_goals", {}, meta=context)
        print(result.content[0].text)  # Goals (1):\n- g1: Learn Rust
        s2 = {"sessionId": "s2"}
        other = await session.call_tool("planning__list_goals", {}, meta=s2)
        print(other.content[0].text)  # No goals yet.


if __name__ == "__main__":
    trio.run(main)
