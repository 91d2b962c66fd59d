"""Helpers for the MCP tests: servers in subprocesses or in process, the SDK client as the peer.

Every helper that starts a process stops it on the way out (kill, then
wait), whatever happened in the test. Servers listen on 127.0.0.1 only.
`in_process_http` runs the HTTP server's ASGI app (gate, SDK app, runtime) in
the test's own trio run, reached through httpx2's ASGI transport: no socket,
no process, and the test can read the runtime's statistics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import httpx2
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from actors import open_runtime
from actors.server import MCP_PATH, http_app
from actors.server._logs import LISTENING as LISTENING  # the URL, as text or JSON
from actors.server._options import build_modules
from actors.server.http._app import http_adapter
from protocol import SERVICE_INFO_META_KEY

if TYPE_CHECKING:
    import re
    from collections.abc import AsyncIterator, Mapping, Sequence
    from pathlib import Path
    from typing import IO

    import pytest

    from actors import Runtime
    from actors.server import ServeOptions

Era = Literal["legacy", "modern"]
"""The protocol era a client opens with: the initialize handshake, or 2026-07-28's discover."""

SERVE = (sys.executable, "-m", "actors", "serve")
CLUSTER = (sys.executable, "-m", "actors", "cluster")
STARTUP_TIMEOUT = 60.0  # a loaded machine takes seconds to import the server
CLUSTER_STARTUP_TIMEOUT = 240.0  # a local Ray instance first, then the shards: slow when busy


def initialize_request(client: str, version: str = "2025-11-25") -> dict[str, Any]:
    """A raw JSON-RPC ``initialize`` request (id 1) from a client named `client`."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


async def open_session(session: ClientSession, era: Era) -> ClientSession:
    """Start `session` in `era` and return it."""
    if era == "legacy":
        await session.initialize()
    else:
        await session.discover()
    return session


@asynccontextmanager
async def stdio_session(*args: str, era: Era = "legacy") -> AsyncIterator[ClientSession]:
    """An SDK ClientSession with ``python -m actors serve ARGS`` on stdio.

    The SDK's stdio_client stops the server when the block ends (stdin closed,
    then the process tree terminated).
    """
    # The SDK passes the server only a few variables of its own choosing: name
    # the test's state folder (see conftest) so that tests never share state.
    env = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}
    params = StdioServerParameters(command=sys.executable, args=[*SERVE[1:], *args], env=env)
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                yield await open_session(session, era)


@asynccontextmanager
async def sdk_http_session(
    url: str, http: httpx2.AsyncClient, era: Era = "legacy"
) -> AsyncIterator[ClientSession]:
    """An SDK ClientSession over Streamable HTTP to `url`, its requests sent through `http`."""
    async with streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            yield await open_session(session, era)


def importable_module(
    folder: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str
) -> None:
    """Write `source` as module `name` in `folder`, on the PYTHONPATH of the servers a test
    starts (until the test ends)."""
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(folder) if path is None else f"{folder}{os.pathsep}{path}")


def texts(result: types.CallToolResult) -> str:
    """All text items of a result, joined by newlines."""
    return "\n".join(item.text for item in result.content if item.type == "text")


def text_of(result: types.CallToolResult) -> str:
    """The text of a result that holds exactly one content item, a text item."""
    assert len(result.content) == 1, f"{len(result.content)} content items, not one: {result}"
    (item,) = result.content
    assert item.type == "text", f"the one content item is {item.type}, not text"
    return item.text


def resource_text(result: types.ReadResourceResult) -> str:
    """The text of a ``resources/read`` result that holds exactly one content, a text."""
    assert len(result.contents) == 1, f"{len(result.contents)} contents, not one: {result}"
    (contents,) = result.contents
    assert isinstance(contents, types.TextResourceContents), contents
    return contents.text


def json_texts(result: Mapping[str, Any]) -> str:
    """All text items of a CallToolResult as JSON (the wire's camelCase), joined by newlines."""
    return "\n".join(item["text"] for item in result["content"] if item["type"] == "text")


def reply_text(reply: Mapping[str, Any]) -> str:
    """The text of a JSON-RPC reply to a ``tools/call`` that succeeded with one text item."""
    result = reply["result"]
    assert not result.get("isError"), f"a call failed: {reply}"
    assert len(result["content"]) == 1, f"not one content item: {reply}"
    (item,) = result["content"]
    assert item["type"] == "text", reply
    text: str = item["text"]
    return text


def tools_call(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    request_id: Any = 1,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A JSON-RPC ``tools/call`` request; `arguments` and ``_meta`` are sent only if given.

    `request_id` is whatever the test puts on the wire, a bad id included.
    """
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": _tools_call_params(name, arguments, meta),
    }


def _tools_call_params(
    name: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A ``tools/call``'s params: `name`, and `arguments` and ``_meta`` where given."""
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta is not None:
        params["_meta"] = meta
    return params


def service_of(result: types.CallToolResult) -> Mapping[str, Any]:
    """The ServiceInfo the first content item carries in its ``_meta``."""
    meta = result.content[0].meta
    assert meta is not None, "the content item lost its _meta on the way"
    info: Mapping[str, Any] = meta[SERVICE_INFO_META_KEY]
    return info


def pid_alive(pid: int) -> bool:
    """Whether a process (or an unreaped zombie) with `pid` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_gone(pid: int, seconds: float = 60.0) -> bool:
    """Poll until `pid` no longer exists; False if it still does after `seconds`."""
    with trio.move_on_after(seconds):
        # Another process's exit: there is no event to wait on, so poll.
        while pid_alive(pid):  # noqa: ASYNC110
            await trio.sleep(0.05)
        return True
    return False


class LogFile:
    """A server's stderr, captured in a file so that a chatty server never blocks on a pipe."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file

    def text(self) -> str:
        """Everything written so far."""
        return os.pread(self.file.fileno(), 1 << 24, 0).decode("utf-8", errors="replace")

    async def wait_for(
        self, pattern: re.Pattern[str], process: trio.Process, seconds: float = STARTUP_TIMEOUT
    ) -> re.Match[str]:
        """The first match of `pattern` in the log, waiting for it (and for nothing dead)."""
        with trio.fail_after(seconds):
            while True:
                match = pattern.search(self.text())
                if match is not None:
                    return match
                if process.returncode is not None:
                    msg = f"server exited with {process.returncode}:\n{self.text()}"
                    raise AssertionError(msg)
                await trio.sleep(0.02)


class RawServer:
    """``python -m actors serve`` over raw stdin/stdout, for what the SDK client cannot send."""

    def __init__(self, process: trio.Process, log: LogFile) -> None:
        self.process = process
        self.log = log
        self._buffer = b""
        self._next_id = 100

    async def send(self, message: Mapping[str, Any] | bytes) -> None:
        """Write one line: a message as JSON, or raw bytes as they are."""
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.process.stdin is not None
        await self.process.stdin.send_all(line + b"\n")

    async def receive(self) -> dict[str, Any]:
        """The next line the server writes, parsed: one message."""
        message = await self.receive_json()
        assert isinstance(message, dict), message
        return message

    async def receive_json(self) -> Any:
        """The next line the server writes, parsed: a message, or a batch's array."""
        assert self.process.stdout is not None
        with trio.fail_after(60):
            while b"\n" not in self._buffer:
                chunk = await self.process.stdout.receive_some()
                if not chunk:
                    msg = f"the server closed stdout; its log:\n{self.log.text()}"
                    raise AssertionError(msg)
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request and return its response."""
        self._next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        response = await self.receive()
        assert response["id"] == self._next_id, response
        return response

    async def call(
        self, name: str, arguments: Mapping[str, Any], meta: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """A tools/call, with `meta` as its ``_meta`` if given; returns the JSON-RPC response."""
        return await self.request("tools/call", _tools_call_params(name, arguments, meta))

    async def initialize(self, version: str = "2025-11-25") -> None:
        """The legacy handshake, asking for protocol `version`."""
        response = await self.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        )
        assert response["result"]["protocolVersion"] == version, response
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def close_stdin(self) -> None:
        """EOF on the server's stdin."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait(self) -> int:
        """The exit code, once the server has exited (within 60 s)."""
        with trio.fail_after(60):
            return await self.process.wait()


async def _stop(process: trio.Process, grace: float = 5.0) -> None:
    """SIGTERM first, so that the server stops the workspace's processes; then SIGKILL."""
    with trio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with trio.move_on_after(grace):
                await process.wait()
        if process.returncode is None:
            process.kill()
        await process.wait()


@asynccontextmanager
async def raw_server(
    *args: str, command: Sequence[str] = SERVE, env: Mapping[str, str] | None = None
) -> AsyncIterator[RawServer]:
    """A stdio server (``command ARGS``) driven by hand; killed and reaped when the block ends."""
    with tempfile.TemporaryFile() as file:
        process = await trio.lowlevel.open_process(
            [*command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=file,
            env=env,
        )
        try:
            yield RawServer(process, LogFile(file))
        finally:
            await _stop(process)


class HttpServer:
    """A ``serve --http 127.0.0.1:0`` subprocess and the URL it printed."""

    def __init__(self, process: trio.Process, log: LogFile, url: str) -> None:
        self.process = process
        self.log = log
        self.url = url

    @asynccontextmanager
    async def session(
        self,
        token: str | None = None,
        era: Era = "legacy",
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[ClientSession]:
        """An SDK ClientSession over Streamable HTTP, with `token` as its bearer token."""
        async with create_mcp_http_client(headers={**bearer(token), **(headers or {})}) as http:
            async with sdk_http_session(self.url, http, era) as session:
                yield session

    async def final_log(self) -> str:
        """The whole log, read once the server has stopped (SIGTERM): its per-call lines
        are buffered, so a line may reach the file after the reply it describes."""
        await _stop(self.process)
        return self.log.text()


@asynccontextmanager
async def http_server(
    *args: str, command: Sequence[str] = SERVE, startup: float = STARTUP_TIMEOUT
) -> AsyncIterator[HttpServer]:
    """An HTTP server on an ephemeral 127.0.0.1 port; killed and reaped when the block ends."""
    with tempfile.TemporaryFile() as file:
        process = await trio.lowlevel.open_process(
            [*command, "--http", "127.0.0.1:0", *args], stdin=subprocess.DEVNULL, stderr=file
        )
        try:
            log = LogFile(file)
            match = await log.wait_for(LISTENING, process, startup)
            yield HttpServer(process, log, match.group(1))
        finally:
            # A cluster stops its shards and its Ray instance: SIGKILL would leave Ray's agents.
            await _stop(process, grace=startup)


async def anonymous_and_foreign(url: str, token: str) -> tuple[httpx2.Response, httpx2.Response]:
    """What `url` answers a POST without a token, and one with `token` from a foreign Origin."""
    async with httpx2.AsyncClient() as http:
        anonymous = await http.post(url, json={})
        foreign = await http.post(
            url,
            json={},
            headers={"Authorization": f"Bearer {token}", "Origin": "http://evil.example"},
        )
    return anonymous, foreign


@asynccontextmanager
async def asgi_lifespan(app: Any) -> AsyncIterator[None]:
    """Run the ASGI lifespan protocol around the block (it starts the SDK's session manager)."""
    to_app, app_inbox = trio.open_memory_channel[dict[str, Any]](1)
    from_app, outbox = trio.open_memory_channel[dict[str, Any]](1)
    async with trio.open_nursery() as nursery:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        nursery.start_soon(app, scope, app_inbox.receive, from_app.send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await outbox.receive())["type"] == "lifespan.startup.complete"
        try:
            yield
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await outbox.receive())["type"] == "lifespan.shutdown.complete"


class InProcessHttp:
    """``serve --http``'s app and runtime in this process; clients reach it with no socket.

    httpx2's ASGI transport hands each request to the app in the client's own
    task and gives the response back once it is complete, so a client's GET
    stream (server-to-client messages) waits until its session ends: enough
    for requests and replies, which is all these tests exchange.
    """

    BASE_URL = "http://127.0.0.1"
    URL = BASE_URL + MCP_PATH

    def __init__(self, app: Any, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    def calls(self) -> int:
        """How many calls have reached the runtime."""
        return self.runtime.statistics().calls

    @asynccontextmanager
    async def http(
        self, token: str | None = None, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[httpx2.AsyncClient]:
        """An HTTP client for raw requests, with `token` as its bearer token."""
        sent = {**bearer(token), **(headers or {})}
        transport = httpx2.ASGITransport(app=self.app)
        async with httpx2.AsyncClient(
            transport=transport, base_url=self.BASE_URL, headers=sent
        ) as client:
            yield client

    @asynccontextmanager
    async def session(
        self,
        token: str | None = None,
        era: Era = "legacy",
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[ClientSession]:
        """An SDK ClientSession over Streamable HTTP, with `token` as its bearer token."""
        async with self.http(token, headers) as http:
            async with sdk_http_session(self.URL, http, era) as session:
                yield session


def bearer(token: str | None) -> dict[str, str]:
    """The Authorization header that carries `token`, or none."""
    return {} if token is None else {"Authorization": f"Bearer {token}"}


@asynccontextmanager
async def in_process_http(options: ServeOptions) -> AsyncIterator[InProcessHttp]:
    """The app `serve` would serve for `options` (``options.http`` set), its lifespan running.

    The runtime has no store: what these tests check happens before state is kept.
    """
    assert options.http is not None, "in_process_http serves HTTP options only"
    async with open_runtime(build_modules(options), options.runtime) as runtime:
        app = http_app(http_adapter(runtime, options), options)
        async with asgi_lifespan(app):
            yield InProcessHttp(app, runtime)


async def status_in_session(url: str, session_id: str) -> int:
    """The HTTP status a ``ping`` in session `session_id` gets (404 once it has ended)."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session_id,
        "MCP-Protocol-Version": "2025-11-25",
    }
    async with httpx2.AsyncClient() as http:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        return (await http.post(url, json=ping, headers=headers)).status_code
