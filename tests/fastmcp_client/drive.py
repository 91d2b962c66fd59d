"""FastMCP's client (``fastmcp.Client`` over its ``StreamableHttpTransport``), driven by a plan.

``tests/clients/test_fastmcp_client.py`` runs it with the Python of FastMCP's own virtual
environment (the one ``benchmarks._fastmcp_peer.find_fastmcp`` finds), never with this
project's: FastMCP's dependencies are not the project's. It reads one JSON value on stdin,

    {"url": "http://127.0.0.1:PORT/mcp", "steps": [STEP, ...]}

runs the steps in order and prints one JSON line per step on stdout:
``{"step": N, "op": OP, "result": ...}``, or ``{"step": N, "op": OP, "error": {"code",
"message", "type"}}`` for a step the server (or the client) refused — ``code`` is the
JSON-RPC error code, null for an error that is not one — the plan going on. Several clients
can be open at once, each named by its step's ``"client"`` (``"a"`` when absent):

    open {mode}                    connect: mode "legacy" (the 2025 initialize handshake,
                                   Mcp-Session-Id) or "auto" (server/discover: 2026-07-28,
                                   no session); the result: protocolVersion, serverInfo,
                                   sessionId (the transport's Mcp-Session-Id, or null)
    close                          leave the client's block (over HTTP: DELETE its session)
    ping
    listTools / listResources / listResourceTemplates / listPrompts
    callTool {name, arguments?, meta?}     the CallToolResult, isError and all
    readResource {uri, meta?}
    getPrompt {name, arguments?, meta?}

A ``callTool`` step may also give ``keep``: a name under which the handle its result
carries (``structuredContent.conversation``, as ``conversation__start`` returns it) is kept
for later steps, in whose strings ``<kept:NAME>`` is replaced by it; the plan is written
before any handle exists.

Results are the SDK's models dumped as they travel (camelCase, no nulls). The exit code is
non-zero only for a bug here (a step it does not know, bad input); every client still open
at the end is closed first.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from contextlib import AsyncExitStack
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp.shared.exceptions import MCPError

STEPS = frozenset(
    {
        "open",
        "close",
        "ping",
        "listTools",
        "callTool",
        "listResources",
        "listResourceTemplates",
        "readResource",
        "listPrompts",
        "getPrompt",
    }
)
KEPT = re.compile(r"<kept:(\w+)>")


def dumped(value: Any) -> Any:
    """A result as it travels: pydantic models dumped by alias, without nulls."""
    if isinstance(value, list):
        return [dumped(item) for item in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def filled(value: Any, kept: dict[str, str]) -> Any:
    """`value` with every ``<kept:NAME>`` in its strings replaced by the handle kept as NAME."""
    if isinstance(value, str):
        return KEPT.sub(lambda match: kept[match.group(1)], value)
    if isinstance(value, list):
        return [filled(item, kept) for item in value]
    if isinstance(value, dict):
        return {key: filled(item, kept) for key, item in value.items()}
    return value


class Driver:
    """The open clients, by name, the handles kept, and how to run a step on one."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.clients: dict[str, tuple[Client[Any], StreamableHttpTransport, AsyncExitStack]] = {}
        self.kept: dict[str, str] = {}

    async def open(self, name: str, mode: str) -> dict[str, Any]:
        transport = StreamableHttpTransport(self.url)
        stack = AsyncExitStack()
        client: Client[Any] = Client(transport, mode=mode, timeout=60, init_timeout=60)
        await stack.enter_async_context(client)
        self.clients[name] = (client, transport, stack)
        info = client.server_info
        return {
            "protocolVersion": client.protocol_version,
            "serverInfo": dumped(info) if info is not None else None,
            "sessionId": transport.get_session_id(),
        }

    async def close(self, name: str) -> dict[str, Any]:
        _, _, stack = self.clients.pop(name)
        await stack.aclose()
        return {}

    async def run(self, step: dict[str, Any]) -> Any:
        step = filled(step, self.kept)
        op, name = step["op"], step.get("client", "a")
        if op not in STEPS:
            raise SystemExit(f"drive.py: unknown step {op!r}")
        if op == "open":
            return await self.open(name, step["mode"])
        if op == "close":
            return await self.close(name)
        client = self.clients[name][0]
        meta = step.get("meta")
        if op == "ping":
            return await client.ping()
        if op == "listTools":
            return dumped(await client.list_tools())
        if op == "callTool":
            arguments = step.get("arguments", {})
            result = await client.call_tool_mcp(step["name"], arguments, meta=meta)
            if "keep" in step:
                self.kept[step["keep"]] = result.structured_content["conversation"]
            return dumped(result)
        if op == "listResources":
            return dumped(await client.list_resources())
        if op == "listResourceTemplates":
            return dumped(await client.list_resource_templates())
        if op == "readResource":
            return dumped(await client.read_resource(step["uri"], meta=meta))
        if op == "listPrompts":
            return dumped(await client.list_prompts())
        assert op == "getPrompt", op
        arguments = step.get("arguments")
        return dumped(await client.get_prompt(step["name"], arguments, meta=meta))

    async def aclose(self) -> None:
        for name in list(self.clients):
            await self.close(name)


async def main() -> None:
    plan = json.load(sys.stdin)
    driver = Driver(plan["url"])
    try:
        for number, step in enumerate(plan["steps"]):
            outcome: dict[str, Any] = {"step": number, "op": step["op"]}
            try:
                outcome["result"] = await driver.run(step)
            except MCPError as error:
                outcome["error"] = {
                    "code": error.code,
                    "message": error.message,
                    "type": type(error).__name__,
                }
            except Exception as error:  # the client's own: reported, and the plan goes on
                outcome["error"] = {
                    "code": None,
                    "message": str(error),
                    "type": type(error).__name__,
                }
            print(json.dumps(outcome), flush=True)
    finally:
        await driver.aclose()


if __name__ == "__main__":
    asyncio.run(main())
