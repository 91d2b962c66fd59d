"""The minimal HTTP servers `benchmarks._http_floors` measures, one per subprocess.

``python -m benchmarks._http_floors_servers NAME [--error]`` listens on an
ephemeral port of 127.0.0.1, prints ``port N`` on a line of its own, and answers
every POST with the JSON-RPC result of a ``tools/call``: the body parsed with
`json.loads`, a ~320-byte reply made with `json.dumps`, the least work any MCP
server must do. ``--error`` (hypercorn-trio and raw-trio) answers a JSON-RPC
error instead, so that a test can prove the load driver counts it.

raw-trio runs on the ``server`` extra and hypercorn-trio on the ``bench`` one; the
others need ``pip install uvloop uvicorn``.

Each design is the floor of one way to build the lean HTTP path: a framework
(hypercorn, uvicorn) around a bare ASGI app, a bare parser (httptools) on a bare
loop (trio, uvloop), and uvicorn with a round trip into trio in guest mode per
request, the hop a runtime on trio pays behind an asyncio server.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import sys
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from functools import partial
from typing import Any, Final, cast

import trio

__all__ = ["DESIGNS", "answer", "asgi_app", "error_answer", "main"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def answer(body: bytes) -> bytes:
    """The JSON-RPC result a light tool call gets: shaped as `actors serve` answers it."""
    request = json.loads(body)
    name = request["params"]["name"]
    module, _, tool = name.partition("__")
    result = {
        "content": [
            {
                "_meta": {
                    "dev.mcp-actors/serviceInfo": {
                        "serverName": module,
                        "toolName": tool,
                        "backendType": "builtin",
                    }
                },
                "text": "No goals yet.",
                "type": "text",
            }
        ],
        "isError": False,
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mcp-actors", "version": "0"}},
    }
    reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    return json.dumps(reply, separators=(",", ":")).encode()


def error_answer(body: bytes) -> bytes:
    """A JSON-RPC error for the request: what a broken server answers, fast."""
    request = json.loads(body)
    reply = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}}
    return json.dumps(reply, separators=(",", ":")).encode()


def _http_response(payload: bytes) -> bytes:
    """A keep-alive HTTP/1.1 200 response carrying *payload* as JSON."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(
        payload
    )
    return head + payload


def _listening_socket() -> socket.socket:
    """A socket listening on an ephemeral port of 127.0.0.1, its port announced."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.set_inheritable(True)
    _announce(sock.getsockname()[1])
    return sock


def _announce(port: int) -> None:
    """Tell the parent where to connect."""
    print(f"port {port}", flush=True)


# --- the minimal ASGI app (a, c) -----------------------------------------------------------


async def _read_body(receive: Receive) -> bytes:
    """The request body, all its chunks."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _reply(send: Send, payload: bytes) -> None:
    """Send *payload* as a 200 JSON response."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def asgi_app(
    respond: Callable[[bytes], bytes],
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An ASGI app that answers every HTTP request with *respond* of its body."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await _reply(send, respond(await _read_body(receive)))

    return app


async def _lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge startup and shutdown: nothing to set up."""
    while True:
        message = await receive()
        kind = message["type"].rsplit(".", 1)[-1]
        await send({"type": f"lifespan.{kind}.complete"})
        if kind == "shutdown":
            return


# --- (a) hypercorn on trio -----------------------------------------------------------------


def _serve_hypercorn(respond: Callable[[bytes], bytes]) -> None:
    """The minimal ASGI app on hypercorn (h11) in this process, on trio."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    sock = _listening_socket()  # held here: collected, it would close under hypercorn
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    trio.run(partial(serve, asgi_app(respond), config, mode="asgi"))  # type: ignore[arg-type]


# --- (b) raw trio + httptools --------------------------------------------------------------


class _Requests:
    """httptools callbacks that collect each complete request's body."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.complete: list[bytes] = []

    def on_body(self, data: bytes) -> None:
        self.chunks.append(data)

    def on_message_complete(self) -> None:
        self.complete.append(b"".join(self.chunks))
        self.chunks.clear()


async def _raw_trio_connection(
    stream: trio.SocketStream, respond: Callable[[bytes], bytes]
) -> None:
    """Serve one keep-alive connection: parse what arrives, answer each complete request."""
    import httptools

    requests = _Requests()
    parser = httptools.HttpRequestParser(requests)
    try:
        while data := await stream.receive_some(65536):
            parser.feed_data(data)
            if requests.complete:
                # Pipelined requests are answered in one write.
                out = b"".join(_http_response(respond(body)) for body in requests.complete)
                requests.complete.clear()
                await stream.send_all(out)
                if not parser.should_keep_alive():
                    return
    except (httptools.HttpParserError, trio.BrokenResourceError):
        return
    finally:
        await trio.aclose_forcefully(stream)


def _serve_raw_trio(respond: Callable[[bytes], bytes]) -> None:
    """httptools on trio.serve_tcp, nothing else."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            handler = partial(_raw_trio_connection, respond=respond)
            listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
            _announce(listeners[0].socket.getsockname()[1])

    trio.run(main)


# --- (c) uvicorn, (e) uvicorn with a hop into trio guest mode -------------------------------


async def _uvicorn(app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
    """Serve *app* on uvicorn with httptools, on the running (uvloop) loop."""
    import uvicorn

    config = uvicorn.Config(
        app, http="httptools", lifespan="off", access_log=False, log_level="warning"
    )
    await uvicorn.Server(config).serve(sockets=[_listening_socket()])


def _serve_uvicorn() -> None:
    """The minimal ASGI app on uvicorn (httptools) on uvloop."""
    import uvloop

    uvloop.run(_uvicorn(asgi_app(answer)))


class _TrioHop:
    """Hands request bodies to a trio task in a guest run and awaits their answers.

    As the runtime's asyncio bridge does: bodies queue in a deque, and one drain
    is scheduled with `TrioToken.run_sync_soon` while any is pending. The drain
    passes them to a trio task over a memory channel (the actor's mailbox); the
    task answers each asyncio future directly, which is safe because guest ticks
    run on the loop's own thread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: deque[tuple[bytes, asyncio.Future[bytes]]] = deque()
        self.drain_scheduled = False
        self.started: asyncio.Future[None] = loop.create_future()
        self.ended: asyncio.Future[object] = loop.create_future()
        self.token: trio.lowlevel.TrioToken | None = None
        self.send: trio.MemorySendChannel[tuple[bytes, asyncio.Future[bytes]]] | None = None
        self.cancel_scope = trio.CancelScope()

    async def trio_main(self) -> None:
        """The guest run: one task answers every request handed over."""
        send, receive = trio.open_memory_channel[tuple[bytes, asyncio.Future[bytes]]](math.inf)
        self.token, self.send = trio.lowlevel.current_trio_token(), send
        self.started.set_result(None)
        with self.cancel_scope:
            async for body, future in receive:
                if not future.done():
                    future.set_result(answer(body))

    def start(self) -> None:
        """Start the guest run on the loop."""
        trio.lowlevel.start_guest_run(
            self.trio_main,
            run_sync_soon_threadsafe=self.loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=self.loop.call_soon,
            done_callback=self.ended.set_result,
            host_uses_signal_set_wakeup_fd=True,
        )

    def _drain(self) -> None:
        assert self.send is not None
        self.drain_scheduled = False
        while self.pending:
            self.send.send_nowait(self.pending.popleft())

    def submit(self, body: bytes) -> asyncio.Future[bytes]:
        """The future of *body*'s answer, computed in trio."""
        assert self.token is not None
        future = self.loop.create_future()
        self.pending.append((body, future))
        if not self.drain_scheduled:
            self.drain_scheduled = True
            self.token.run_sync_soon(self._drain)
        return future

    async def stop(self) -> None:
        """End the guest run and wait for it."""
        assert self.token is not None
        self.token.run_sync_soon(self.cancel_scope.cancel)
        await self.ended


def _serve_uvicorn_guest() -> None:
    """uvicorn (httptools, uvloop) whose app answers each request through trio."""
    import uvloop

    async def main() -> None:
        hop = _TrioHop(asyncio.get_running_loop())
        hop.start()
        await hop.started

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            await _reply(send, await hop.submit(await _read_body(receive)))

        try:
            await _uvicorn(app)
        finally:
            await hop.stop()

    uvloop.run(main())


# --- (d) asyncio Protocol + httptools on uvloop --------------------------------------------


class _HttpProtocol(asyncio.Protocol):
    """One connection: httptools parses, each complete request is answered at once."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpRequestParser(self)
        self.parse_error = httptools.HttpParserError
        self.chunks: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except self.parse_error:
            assert self.transport is not None
            self.transport.close()

    def on_body(self, data: bytes) -> None:
        self.chunks.append(data)

    def on_message_complete(self) -> None:
        assert self.transport is not None
        body = b"".join(self.chunks)
        self.chunks.clear()
        self.transport.write(_http_response(answer(body)))
        if not self.parser.should_keep_alive():
            self.transport.close()


def _serve_asyncio_protocol() -> None:
    """httptools in an asyncio Protocol on uvloop, nothing else."""
    import uvloop

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(
            _HttpProtocol, sock=_listening_socket()
        )
        await server.serve_forever()

    uvloop.run(main())


DESIGNS: Final[dict[str, Callable[[], None]]] = {
    "hypercorn-trio": partial(_serve_hypercorn, answer),
    "raw-trio": partial(_serve_raw_trio, answer),
    "uvicorn-uvloop": _serve_uvicorn,
    "asyncio-protocol": _serve_asyncio_protocol,
    "uvicorn-guest-trio": _serve_uvicorn_guest,
}
"""Each design's name and the function that serves it until the process is stopped."""


_ERRING: Final[dict[str, Callable[[], None]]] = {
    "hypercorn-trio": partial(_serve_hypercorn, error_answer),
    "raw-trio": partial(_serve_raw_trio, error_answer),
}
"""The designs that can answer every request with a JSON-RPC error (``--error``)."""


def main(argv: list[str]) -> None:
    """Serve the design *argv* names; with ``--error``, answering errors."""
    if len(argv) == 2 and argv[1] == "--error" and argv[0] in _ERRING:
        _ERRING[argv[0]]()
    elif len(argv) == 1 and argv[0] in DESIGNS:
        DESIGNS[argv[0]]()
    else:
        sys.exit(f"usage: python -m benchmarks._http_floors_servers {{{','.join(DESIGNS)}}}")


if __name__ == "__main__":
    main(sys.argv[1:])
