"""An OAuth client of `serve --oauth-issuer`: its answer without a token, then calls."""

import os
import urllib.parse

import httpx2
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL = "http://127.0.0.1:8765/mcp"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "oauth-example", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


async def discover(url: str) -> None:
    """Without a token: the 401's challenge, and the metadata document it points to."""
    async with httpx2.AsyncClient(timeout=30) as http:
        refused = await http.post(url, json=INITIALIZE, headers=ACCEPT)
        print(refused.status_code, refused.headers["WWW-Authenticate"])
        # RFC 9728: the document sits at the well-known path followed by the endpoint's.
        path = "/.well-known/oauth-protected-resource" + urllib.parse.urlsplit(url).path
        metadata = (await http.get(urllib.parse.urljoin(url, path))).json()
        print("resource:", metadata["resource"])
        print("authorization server:", metadata["authorization_servers"][0])


async def main(url: str = URL, token: str = "") -> None:
    token = token or os.environ["ACCESS_TOKEN"]  # the issuer signed it for this server
    await discover(url)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        roadmap = {"sessionId": "acme/roadmap"}  # the token's tenant claim is "acme"
        await session.call_tool("planning__create_goal", {"goal": "Ship"}, meta=roadmap)
        listed = await session.call_tool("planning__list_goals", {}, meta=roadmap)
        print(f"acme/roadmap: {listed.content[0].text}")
        other = {"sessionId": "beta/plans"}
        refused = await session.call_tool("planning__list_goals", {}, meta=other)
        print(refused.is_error, refused.content[0].text)


if __name__ == "__main__":
    trio.run(main)
