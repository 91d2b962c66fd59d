"""An ``Mcp-Name`` header the SDK's decoder fails on is refused as a mismatch, not a crash.

The SDK reads a malformed base64 sentinel (``=?base64?…?=``) as no value, so that it never
matches the body; but a payload with a character beyond ASCII makes its decoder raise. Every
such request was answered 500, with a traceback in the log, on the lean path and on the
SDK's alike: a client could fill the log with them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from tests._mcp_helpers import http_server

_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _post(
    url: str,
    message: dict[str, Any],
    name: bytes,
    *,
    version: str = "2026-07-28",
    sse: bool = False,
) -> tuple[int, Any]:
    """POST `message` with `name` as its raw ``Mcp-Name``; the status and the body (JSON,
    or with `sse` the raw text of an event stream)."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    body = json.dumps(message).encode()
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: %b\r\n"
        b"Mcp-Method: %b\r\nMcp-Name: %b\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
        % (version.encode(), message["method"].encode(), name, len(body))
    )
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(head + body)
        data = b""
        with trio.fail_after(60):
            while chunk := await stream.receive_some():
                data += chunk
    status = int(data.split(b" ", 2)[1])
    body_text = data.split(b"\r\n\r\n", 1)[1]
    return status, body_text if sse else json.loads(body_text)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "planning__list_goals", "arguments": {}}),  # the lean path's
        ("prompts/get", {"name": "anything"}),  # the SDK's
    ],
)
async def test_an_unreadable_name_header_is_a_header_mismatch(
    method: str, params: dict[str, Any]
) -> None:
    """400, JSON-RPC -32020 naming the header, the request's id; no traceback logged."""
    message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params}}
    message["params"]["_meta"] = _ENVELOPE
    async with http_server() as server:
        answers = [await _post(server.url, message, b"=?base64?\x80?=") for _ in range(3)]
        log = server.log.text()
    for status, reply in answers:
        assert status == 400
        assert reply["id"] == 7
        assert reply["error"]["code"] == -32020
        assert "Mcp-Name" in reply["error"]["message"]
    assert "Traceback" not in log
    assert "the fast handler failed" not in log


async def test_the_header_is_read_only_where_the_sdks_ladder_reads_it() -> None:
    """A 2025-era ``initialize`` carrying the same header is served: the ladder never reads it."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "header-test", "version": "0"},
        },
    }
    async with http_server() as server:
        status, _ = await _post(
            server.url, message, b"=?base64?\x80?=", version="2025-11-25", sse=True
        )
    assert status == 200
