"""Over stdio, calls naming no session share the connection's; session__end ends it."""

import sys

import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

SERVE = ["-m", "actors", "serve", "--allow-end-session"]


async def main() -> None:
    server = StdioServerParameters(command=sys.executable, args=SERVE)
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.call_tool("planning__create_goal", {"goal": "Draft the talk"})
        listed = await session.call_tool("planning__list_goals", {})
        print(listed.content[0].text)  # Goals (1):\n- g1: Draft the talk
        ended = await session.call_tool("session__end", {})
        print(ended.content[0].text)
        listed = await session.call_tool("planning__list_goals", {})
        print(listed.content[0].text)  # No goals yet.


if __name__ == "__main__":
    trio.run(main)
