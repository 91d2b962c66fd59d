"""The official SDK client over Streamable HTTP, its bearer token in a header."""

import httpx2
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL = "http://127.0.0.1:8765/mcp"
TOKEN = "Zq9#xK2pLw7Vn4Rt3sYbT0uQ"  # bound to tenant alpha in tokens.txt


async def main(url: str = URL) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        meta = {"sessionId": "alpha/conversation-1"}
        await session.call_tool("planning__create_goal", {"goal": "Ship"}, meta=meta)
        result = await session.call_tool("planning__list_goals", {}, meta=meta)
        print(result.content[0].text)  # Goals (1):\n- g1: Ship


if __name__ == "__main__":
    trio.run(main)
