"""A tenant's token and a gateway's, from one tokens file, over Streamable HTTP."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL = "http://127.0.0.1:8765/mcp"
ALPHA = "Zq9#xK2pLw7Vn4Rt3sYbT0uQ"  # TOKEN=alpha in tokens.txt
GATEWAY = "hB1vR8mC4nW6eK2jL9pX5tZ0"  # no tenant: a trusted gateway


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def main(url: str = URL) -> None:
    async with connect(url, ALPHA) as alpha:
        own = {"sessionId": "alpha/conversation-2"}
        await alpha.call_tool("planning__create_goal", {"goal": "Ship"}, meta=own)
        other = {"sessionId": "beta/conversation-1"}
        spy = {"goal": "Spy"}
        refused = await alpha.call_tool("planning__create_goal", spy, meta=other)
        print(refused.is_error, refused.content[0].text)
        # Naming no session: alpha/<Mcp-Session-Id>, deleted as this HTTP session ends.
        await alpha.call_tool("planning__create_goal", {"goal": "Scratch"})
    async with connect(url, GATEWAY) as gateway:
        for session in ("alpha/conversation-2", "beta/conversation-1"):
            meta = {"sessionId": session}
            listed = await gateway.call_tool("planning__list_goals", {}, meta=meta)
            print(f"{session}: {listed.content[0].text}")


if __name__ == "__main__":
    trio.run(main)
