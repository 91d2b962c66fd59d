"""Our HTTP/1.1 server (`actors.server.http._server`) on sockets: framing, limits, timeouts, stop.

A small ASGI app stands in for the real one; responses are read with
httptools' response parser, so the framing is checked by a parser that is not
the server's own code. Timeouts are set short here and waited for as
conditions with generous deadlines (the machine may be loaded).
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import tracemalloc
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import attrs
import httpx2
import pytest
import trio

from actors._runtime import open_runtime
from actors.server import ServeOptions
from actors.server._options import build_modules
from actors.server.http._app import _http_apps, http_adapter
from actors.server.http._responses import RefusalLog
from actors.server.http._server import FastStream, WireLimits, serve_wire
from benchmarks._http_floors import BODY, EXPECTED, HEADERS, TOOL

from .._http_responses import Response, Responses
from .._mcp_helpers import http_server, initialize_request, tools_call

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import Message, Receive, Scope, Send

DEADLINE: Final = 10.0
"""Seconds any awaited condition may take on a loaded machine."""
SHORT: Final = WireLimits(
    max_body_bytes=100,
    max_header_bytes=1024,
    request_timeout=0.5,
    keep_alive_timeout=0.3,
    max_connections=3,
)


@attrs.define
class Toy:
    """The app: echoes requests, streams, waits, fails; records what it saw."""

    scopes: list[dict[str, Any]] = attrs.field(factory=list)
    received: list[Message] = attrs.field(factory=list)
    disconnected: trio.Event = attrs.field(factory=trio.Event)
    in_flight: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)
    cancelled: trio.Event = attrs.field(factory=trio.Event)
    shut_down: trio.Event = attrs.field(factory=trio.Event)
    errors: list[BaseException] = attrs.field(factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        self.scopes.append(dict(scope))
        route = getattr(self, "_" + scope["path"].strip("/"), self._echo)
        await route(receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["flag"] = "set at startup"
                await send({"type": "lifespan.startup.complete"})
            else:
                self.shut_down.set()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _echo(self, receive: Receive, send: Send) -> None:
        message = await receive()
        self.received.append(message)
        status = 413 if message.get("more_body") else 200
        body = json.dumps({"body": message["body"].decode(), "more": message["more_body"]})
        await _respond(send, status, body.encode())

    async def _stream(self, receive: Receive, send: Send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnected.set()
            # What an SSE writer may do before it notices: the server must not raise.
            await send({"type": "http.response.body", "body": b"late", "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except trio.Cancelled:
            self.cancelled.set()
            raise
        except Exception as error:  # recorded: the test fails on it
            self.errors.append(error)

    async def _idle_stream(self, receive: Receive, send: Send) -> None:
        """A stream that starts and then sends nothing until released: an idle SSE stream."""
        await receive()
        sse = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": sse})
        await self.release.wait()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _wait(self, receive: Receive, send: Send) -> None:
        await receive()
        self.in_flight.set()
        await self.release.wait()
        await _respond(send, 200, b"done")

    async def _fail(self, receive: Receive, send: Send) -> None:
        msg = "the app fails"
        raise RuntimeError(msg)


async def _respond(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": body})


@attrs.define(eq=False)
class Client(Responses):
    """A raw connection: bytes out, responses parsed by httptools' response parser."""

    stream: trio.SocketStream = attrs.field(kw_only=True)

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def responses(self, count: int) -> list[Response]:
        """The first `count` responses, once they are in."""
        with trio.fail_after(DEADLINE):
            while len(self.done) < count:
                data = await self.stream.receive_some()
                assert data, f"closed after {len(self.done)} of {count} responses"
                self.feed(data)
        return self.done[:count]

    async def closed(self) -> bool:
        """Whether the server closes the connection (reading, within the deadline)."""
        with trio.fail_after(DEADLINE):
            try:
                while data := await self.stream.receive_some():
                    self.feed(data)
            except trio.BrokenResourceError:
                pass  # a reset is a close too
        return True


@attrs.define(eq=False)
class Served:
    """A running wire server and how to reach it."""

    port: int
    stop: trio.Event

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Client]:
        """A raw client connection, closed when the block ends."""
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        async with stream:
            yield Client(stream=stream)

    async def get(self, path: str, extra: bytes = b"") -> Response:
        """One GET on a connection of its own."""
        async with self.connect() as client:
            await client.send(b"GET %b HTTP/1.1\r\nHost: t\r\n%b\r\n" % (path.encode(), extra))
            return (await client.responses(1))[0]


@asynccontextmanager
async def serving(
    app: Any, limits: WireLimits = SHORT, grace: float = 30.0, fast: Any = None
) -> AsyncIterator[Served]:
    """`app` served on an ephemeral port of 127.0.0.1 for the block, then stopped."""
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        serve = functools.partial(
            serve_wire, app, "127.0.0.1:0", stop, grace=grace, limits=limits, fast=fast
        )
        urls: list[str] = await nursery.start(serve)
        served = Served(int(urls[0].rsplit(":", 1)[1]), stop)
        try:
            yield served
        finally:
            stop.set()


def post(path: bytes, body: bytes, extra: bytes = b"") -> bytes:
    """A POST with a Content-Length."""
    return b"POST %b HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n%b\r\n%b" % (
        path,
        len(body),
        extra,
        body,
    )


class TestFraming:
    async def test_keep_alive_serves_several_requests_on_one_connection(self) -> None:
        """HTTP/1.1 keeps the connection; each response has a Content-Length."""
        async with serving(Toy()) as served, served.connect() as client:
            await client.send(post(b"/", b"one"))
            await client.responses(1)
            await client.send(post(b"/", b"two"))
            first, second = await client.responses(2)
        assert json.loads(first.body)["body"] == "one"
        assert json.loads(second.body)["body"] == "two"
        assert second.headers[b"content-length"] == b"%d" % len(second.body)

    async def test_pipelined_requests_are_answered_in_order(self) -> None:
        """Three requests in one write: three responses, in the order sent."""
        async with serving(Toy()) as served, served.connect() as client:
            await client.send(post(b"/", b"a") + post(b"/", b"b") + post(b"/", b"c"))
            answers = await client.responses(3)
        assert [json.loads(answer.body)["body"] for answer in answers] == ["a", "b", "c"]

    async def test_a_chunked_body_reaches_the_app_whole(self) -> None:
        """Transfer-Encoding: chunked is read to its end; the app gets one body."""
        async with serving(Toy()) as served, served.connect() as client:
            await client.send(
                b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
            )
            (answer,) = await client.responses(1)
        assert json.loads(answer.body) == {"body": "abcdefg", "more": False}

    @pytest.mark.parametrize(
        "request_line",
        [b"GET / HTTP/1.1\r\nConnection: close\r\n", b"GET / HTTP/1.0\r\n"],
        ids=["connection-close", "http-1.0"],
    )
    async def test_connection_close_and_http_1_0_close_after_the_response(
        self, request_line: bytes
    ) -> None:
        """The response says Connection: close, and the connection ends."""
        async with serving(Toy()) as served, served.connect() as client:
            await client.send(request_line + b"Host: t\r\n\r\n")
            (answer,) = await client.responses(1)
            assert await client.closed()
        assert answer.headers[b"connection"] == b"close"

    async def test_a_streamed_response_is_chunked_and_the_app_learns_of_a_disconnect(
        self,
    ) -> None:
        """more_body without a length: chunked; the client hangs up: http.disconnect, no error."""
        toy = Toy()
        async with serving(toy) as served:
            async with served.connect() as client:
                await client.send(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
                with trio.fail_after(DEADLINE):
                    head = b""
                    while b"first" not in head:
                        head += await client.stream.receive_some()
            with trio.fail_after(DEADLINE):
                await toy.disconnected.wait()
            assert (await served.get("/")).status == 200  # still serving
        assert b"transfer-encoding: chunked" in head
        assert toy.errors == []

    async def test_a_streamed_response_starts_before_its_first_body(self) -> None:
        """An SSE stream with no event yet: its head goes at once (a proxy waits for it)."""
        toy = Toy()
        async with serving(toy) as served, served.connect() as client:
            await client.send(b"GET /idle_stream HTTP/1.1\r\nHost: t\r\n\r\n")
            head = b""
            with trio.fail_after(DEADLINE):
                while b"\r\n\r\n" not in head:
                    head += await client.stream.receive_some()
            released_before = toy.release.is_set()
            toy.release.set()
        assert not released_before
        assert head.startswith(b"HTTP/1.1 200")
        assert b"transfer-encoding: chunked" in head

    async def test_expect_100_continue_is_answered_before_the_body(self) -> None:
        """The client waits for 100 Continue, then sends its body, then gets the answer."""
        async with serving(Toy()) as served, served.connect() as client:
            await client.send(
                b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
            )
            (interim,) = await client.responses(1)
            await client.send(b"hello")
            _, final = await client.responses(2)
        assert interim.status == 100
        assert json.loads(final.body)["body"] == "hello"

    async def test_the_scope_is_built_as_the_asgi_http_spec_says(self) -> None:
        """Version, path decoded, raw path, query, headers lowercased in order, addresses, state."""
        toy = Toy()
        async with serving(toy) as served, served.connect() as client:
            await client.send(b"GET /a%20b?x=1 HTTP/1.1\r\nHost: t\r\nX-One: 1\r\nx-two: 2\r\n\r\n")
            await client.responses(1)
        scope = toy.scopes[0]
        assert scope["asgi"] == {"version": "3.0", "spec_version": "2.3"}
        assert (scope["type"], scope["http_version"], scope["method"]) == ("http", "1.1", "GET")
        assert (scope["scheme"], scope["root_path"]) == ("http", "")
        assert (scope["path"], scope["raw_path"], scope["query_string"]) == (
            "/a b",
            b"/a%20b",
            b"x=1",
        )
        assert scope["headers"] == [(b"host", b"t"), (b"x-one", b"1"), (b"x-two", b"2")]
        assert scope["client"][0] == "127.0.0.1"
        assert scope["server"] == ("127.0.0.1", served.port)
        assert scope["state"] == {"flag": "set at startup"}

    async def test_an_app_that_fails_gets_a_500_and_the_server_goes_on(self) -> None:
        """The failure is logged; the client gets 500; other requests are served."""
        async with serving(Toy()) as served:
            failed = await served.get("/fail")
            after = await served.get("/")
        assert (failed.status, after.status) == (500, 200)


class TestLimits:
    async def test_headers_over_the_limit_get_431(self) -> None:
        """Whole headers too large, and a header that never ends: 431; others are served."""
        async with serving(Toy()) as served:
            big = await served.get("/", b"X-Big: " + b"x" * 2000 + b"\r\n")
            async with served.connect() as client:
                await client.send(b"GET / HTTP/1.1\r\nX-Endless: ")
                with trio.move_on_after(DEADLINE):
                    while not client.done:
                        await client.send(b"x" * 16384)
                        with trio.move_on_after(0.01):
                            client.feed(await client.stream.receive_some())
                endless = await client.responses(1)
            after = await served.get("/")
        assert big.status == 431
        assert endless[0].status == 431
        assert after.status == 200

    async def test_a_body_over_the_limit_reaches_the_app_cut_then_closes(self) -> None:
        """Declared or chunked: the app gets what was read with more_body, then the end."""
        toy = Toy()
        async with serving(toy) as served:
            async with served.connect() as client:
                await client.send(post(b"/", b"x" * 1000))
                (declared,) = await client.responses(1)
                assert await client.closed()
            async with served.connect() as client:
                await client.send(
                    b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + b"40\r\n"
                    + b"y" * 64
                    + b"\r\n"
                    + b"40\r\n"
                    + b"y" * 64
                    + b"\r\n"
                )
                (chunked,) = await client.responses(1)
                assert await client.closed()
            after = await served.get("/")
        assert (declared.status, chunked.status, after.status) == (413, 413, 200)
        assert toy.received[0] == {"type": "http.request", "body": b"", "more_body": True}
        assert len(toy.received[1]["body"]) == 128
        assert declared.headers[b"connection"] == b"close"

    @pytest.mark.parametrize(
        "head",
        [
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n",
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n",
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n",
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\n folded\r\n",
            b"NOT HTTP AT ALL\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\nX-Other: 1\r\nHost: evil.example\r\n",
        ],
        ids=["cl-te", "te-cl", "cl-cl", "te-not-chunked", "folded", "garbage", "host-host"],
    )
    async def test_malformed_and_smuggling_requests_get_400_and_close(self, head: bytes) -> None:
        """Refused before any app sees them; the connection ends; others are served. Two Host
        headers too (RFC 9112 §3.2): the front checks one, a proxy may route by the other."""
        toy = Toy()
        async with serving(toy) as served:
            async with served.connect() as client:
                await client.send(head + b"\r\nabc")
                (refused,) = await client.responses(1)
                assert await client.closed()
            after = await served.get("/")
        assert refused.status == 400
        assert after.status == 200
        assert len(toy.scopes) == 1

    async def test_past_the_connection_cap_a_client_gets_503(self) -> None:
        """Three served at once; a fourth gets 503; once one leaves, a new one is served."""
        async with serving(Toy(), limits=attrs.evolve(SHORT, keep_alive_timeout=60)) as served:
            async with served.connect() as one, served.connect() as two:
                async with served.connect() as three:
                    for client in (one, two, three):  # answered: counted by the server
                        await client.send(post(b"/", b"hi"))
                        await client.responses(1)
                    async with served.connect() as fourth:
                        (busy,) = await fourth.responses(1)
                        assert await fourth.closed()
                served_again = await _served_once_one_left(served)
        assert busy.status == 503
        assert busy.headers[b"retry-after"] == b"1"
        assert served_again.status == 200

    async def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(self) -> None:
        """No request within 0.3 s: closed, with no answer."""
        async with serving(Toy()) as served, served.connect() as client:
            await client.send(post(b"/", b"one"))
            await client.responses(1)
            started = trio.current_time()
            assert await client.closed()
            assert trio.current_time() - started >= SHORT.keep_alive_timeout * 0.9
            assert len(client.done) == 1

    async def test_a_slow_request_gets_408_after_the_request_timeout(self) -> None:
        """Headers trickled a byte at a time: 408 once 0.5 s have passed since the first."""
        async with serving(Toy()) as served, served.connect() as client:
            started = trio.current_time()
            with trio.move_on_after(DEADLINE), contextlib_suppress_broken():
                for byte in b"GET / HTTP/1.1\r\nX-Slow: " + b"s" * 1000:
                    await client.send(bytes([byte]))
                    await trio.sleep(0.05)
            (late,) = await client.responses(1)
            assert await client.closed()
        assert late.status == 408
        assert trio.current_time() - started >= SHORT.request_timeout * 0.9


def contextlib_suppress_broken() -> Any:
    """Stop trickling once the server has closed its side."""
    return contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError)


async def _served_once_one_left(served: Served) -> Response:
    """A GET, retried until the server has noticed a client left and serves it."""
    with trio.fail_after(DEADLINE):
        while True:
            answer = await served.get("/")
            if answer.status != 503:
                return answer
            await trio.sleep(0.05)


class TestStopping:
    async def test_stop_closes_idle_connections_and_lets_a_request_in_flight_finish(
        self,
    ) -> None:
        """Idle: closed at once. In flight: answered with Connection: close. Then it returns."""
        toy = Toy()
        limits = attrs.evolve(SHORT, keep_alive_timeout=60)
        with trio.fail_after(DEADLINE):
            async with serving(toy, limits=limits, grace=60) as served:
                async with served.connect() as idle, served.connect() as busy:
                    await idle.send(post(b"/", b"x"))
                    await idle.responses(1)
                    await busy.send(b"GET /wait HTTP/1.1\r\nHost: t\r\n\r\n")
                    await toy.in_flight.wait()
                    served.stop.set()
                    assert await idle.closed()
                    with pytest.raises(OSError, match=r"(?i)connect"):
                        await served.get("/")  # no longer listening
                    toy.release.set()
                    (answer,) = await busy.responses(1)
                    assert await busy.closed()
        assert answer.body == b"done"
        assert answer.headers[b"connection"] == b"close"
        assert toy.shut_down.is_set()  # the lifespan ended after the last connection

    async def test_a_stream_still_open_after_the_grace_is_cancelled(self) -> None:
        """An SSE-like stream gets `grace` seconds, then the app is cancelled and it closes."""
        toy = Toy()
        with trio.fail_after(DEADLINE):
            async with serving(toy, grace=0.2) as served, served.connect() as client:
                await client.send(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
                while b"first" not in await client.stream.receive_some():
                    pass
                served.stop.set()
                assert await client.closed()
        assert toy.cancelled.is_set()


class TestFastHandler:
    async def test_the_fast_handler_is_tried_first_and_none_goes_to_the_app(self) -> None:
        """Its answers go out as given; what it declines reaches the app as usual."""
        asked: list[tuple[str, str, bytes]] = []

        async def fast(
            method: str, path: str, headers: Any, body: bytes, client: Any
        ) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
            asked.append((method, path, body))
            if path != "/fast":
                return None
            return 201, [(b"content-length", b"4")], b"fast"

        toy = Toy()
        async with serving(toy, fast=fast) as served, served.connect() as client:
            await client.send(post(b"/fast", b"1") + post(b"/slow", b"2"))
            quick, slow = await client.responses(2)
        assert (quick.status, quick.body) == (201, b"fast")
        assert json.loads(slow.body)["body"] == "2"
        assert asked == [("POST", "/fast", b"1"), ("POST", "/slow", b"2")]
        assert [scope["path"] for scope in toy.scopes] == ["/slow"]

    async def test_a_fast_stream_is_chunked_its_head_going_with_its_first_piece(self) -> None:
        """Each piece one chunk, the first one with the head, before the next is ready; the
        connection goes on. HTTP/1.0: no chunks, and the end of the body closes it."""
        next_piece = trio.Event()

        async def pieces(send: Any) -> None:
            await send(b"one", True)
            await next_piece.wait()
            await send(b"two", False)

        async def fast(*_: Any) -> FastStream:
            return FastStream(200, [(b"content-type", b"text/event-stream")], pieces)

        async with serving(Toy(), fast=fast) as served, served.connect() as client:
            await client.send(post(b"/", b"") + post(b"/", b""))
            first = await client.stream.receive_some()
            assert first.endswith(b"\r\n\r\n3\r\none\r\n")  # the head and one chunk, alone
            assert b"transfer-encoding: chunked" in first
            client.feed(first)
            next_piece.set()
            answers = await client.responses(2)
        assert [answer.body for answer in answers] == [b"onetwo", b"onetwo"]
        async with serving(Toy(), fast=fast) as served, served.connect() as client:
            await client.send(b"POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
            whole = b""
            with trio.fail_after(DEADLINE):
                while data := await client.stream.receive_some():
                    whole += data
        head, _, body = whole.partition(b"\r\n\r\n")
        assert body == b"onetwo"
        assert b"connection: close" in head
        assert b"chunked" not in head

    async def test_a_fast_stream_that_fails_gets_500_or_is_cut(self) -> None:
        """Failing before its first piece: 500. After it: the connection closes mid-body."""

        async def failing(send: Any) -> None:
            if send_first:
                await send(b"partial", True)
            msg = "the stream fails"
            raise RuntimeError(msg)

        async def fast(*_: Any) -> FastStream:
            return FastStream(200, [], failing)

        for send_first in (False, True):
            async with serving(Toy(), fast=fast) as served, served.connect() as client:
                await client.send(post(b"/", b""))
                assert await client.closed()
            if send_first:
                assert client.done == []  # the body never ended: no whole response
            else:
                assert client.done[0].status == 500


_TOKEN: Final = "wire-test-token-0a1b2c3d"


@attrs.frozen(eq=False)
class Lean:
    """``serve --http``'s app and fast handler on the wire, and the paths the app was asked."""

    served: Served
    app: Any
    paths: list[str]


@asynccontextmanager
async def lean_serving(options: ServeOptions) -> AsyncIterator[Lean]:
    """What ``serve --http`` serves with `options`, on the wire for the block."""
    async with open_runtime(build_modules(options), options.runtime) as runtime:
        apps = _http_apps(http_adapter(runtime, options), options, RefusalLog(), None, None)
        paths: list[str] = []

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                paths.append(scope["path"])
            await apps.app(scope, receive, send)

        async with serving(counted, limits=WireLimits(), fast=apps.fast) as served:
            yield Lean(served, apps.app, paths)


class TestLeanWire:
    async def test_a_2026_call_is_answered_without_asgi_and_as_the_app_answers_it(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The same bytes as through the app; a bad token falls to the app: its 401, logged once."""
        options = ServeOptions(http=("127.0.0.1", 0), tokens={_TOKEN: None})
        async with lean_serving(options) as lean:
            base = f"http://127.0.0.1:{lean.served.port}"
            async with httpx2.AsyncClient(base_url=base, headers=HEADERS) as http:
                good = {"Authorization": f"Bearer {_TOKEN}"}
                fast = await http.post("/mcp", content=BODY, headers=good)
                assert lean.paths == []
                bad = await http.post("/mcp", content=BODY, headers={"Authorization": "x"})
                assert lean.paths == ["/mcp"]
            transport = httpx2.ASGITransport(app=lean.app)
            async with httpx2.AsyncClient(
                transport=transport, base_url=base, headers=HEADERS
            ) as asgi:
                slow = await asgi.post("/mcp", content=BODY, headers=good)
        assert fast.status_code == 200
        assert fast.content == slow.content
        assert json.loads(fast.content)["result"]["isError"] is False
        assert bad.status_code == 401
        refused = [r for r in caplog.records if "without a valid bearer token" in r.getMessage()]
        assert len(refused) == 1


def _events(stream: str) -> list[str]:
    return [event for event in stream.split("\r\n\r\n") if event]


def _data(event: str) -> Any:
    """The JSON message of an SSE event."""
    lines = [line[len("data: ") :] for line in event.split("\r\n") if line.startswith("data: ")]
    return json.loads("".join(lines))


class TestLeanWireInSessions:
    @pytest.mark.parametrize("prefix", [None, "front-a"])
    async def test_a_call_in_a_2025_session_is_streamed_without_asgi(
        self, prefix: str | None, caplog: pytest.LogCaptureFixture
    ) -> None:
        """``initialize`` goes to the app; a call in its session is the fast handler's: an SSE
        stream whose priming event comes first, the same message the app's fast path sends.
        The front's prefix stays on the id; an id of another front's goes to the app (404)."""
        tokens = {_TOKEN: None}
        options = ServeOptions(http=("127.0.0.1", 0), tokens=tokens, session_id_prefix=prefix)
        auth = {"Authorization": f"Bearer {_TOKEN}", "Accept": HEADERS["Accept"]}
        async with lean_serving(options) as lean:
            base = f"http://127.0.0.1:{lean.served.port}"
            async with httpx2.AsyncClient(base_url=base, headers=auth) as http:
                opened = await http.post("/mcp", json=initialize_request("wire"))
                session = opened.headers["mcp-session-id"]
                in_session = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post("/mcp", json=initialized, headers=in_session)
                assert lean.paths == ["/mcp", "/mcp"]
                fast = await http.post(
                    "/mcp",
                    json=tools_call(TOOL, {}, request_id=2, meta={"sessionId": "wire"}),
                    headers=in_session,
                )
                assert lean.paths == ["/mcp", "/mcp"], "the call reached the ASGI app"
                foreign = {**in_session, "Mcp-Session-Id": "front-b." + session.split(".")[-1]}
                elsewhere = await http.post(
                    "/mcp",
                    json=tools_call(TOOL, {}, request_id=3, meta={"sessionId": "wire"}),
                    headers=foreign,
                )
            transport = httpx2.ASGITransport(app=lean.app)
            async with httpx2.AsyncClient(transport=transport, base_url=base, headers=auth) as asgi:
                slow = await asgi.post(
                    "/mcp",
                    json=tools_call(TOOL, {}, request_id=2, meta={"sessionId": "wire"}),
                    headers=in_session,
                )
        assert session.startswith("front-a.") == (prefix is not None)
        assert fast.status_code == 200
        assert fast.headers["content-type"] == "text/event-stream"
        assert fast.headers["mcp-session-id"] == session
        priming, reply = _events(fast.text)
        assert priming.startswith("id: ")
        assert priming.endswith("retry: 1000\r\ndata: ")
        assert _data(reply) == _data(_events(slow.text)[1])
        assert _data(reply)["result"]["isError"] is False
        assert elsewhere.status_code == 404  # "front-b.<id>": no session of this front's
        refused = [r for r in caplog.records if "without this front's prefix" in r.getMessage()]
        assert len(refused) == (prefix is not None)


def chunked(path: bytes, body: bytes, trailers: bytes, head: bytes = b"Host: t\r\n") -> bytes:
    """A chunked POST of `body` in one chunk, `head` (field lines) before, `trailers` after."""
    return b"POST %b HTTP/1.1\r\n%bTransfer-Encoding: chunked\r\n\r\n%x\r\n%b\r\n0\r\n%b\r\n" % (
        path,
        head,
        len(body),
        body,
        trailers,
    )


def _lean_head() -> bytes:
    """The field lines of a 2026-era call (`HEADERS`) to a server on loopback."""
    fields = {"Host": "127.0.0.1", **HEADERS}
    return b"".join(
        b"%b: %b\r\n" % (name.encode(), value.encode()) for name, value in fields.items()
    )


FLOOD_BYTES: Final = 2 << 20
TRAILER_FLOODS: Final = {
    "one-endless-field": (b"X-Long: ", b"v" * 16384, b"\r\n\r\n"),
    "many-short-fields": (b"", b"X: y\r\n" * 2730, b"\r\n"),
}
"""How a trailer section starts, the piece repeated, and how it ends."""


async def _flood(client: Client, piece: bytes, end: bytes) -> None:
    """Send `piece` until `FLOOD_BYTES` are out, then `end`; stop once the server closes."""
    with contextlib_suppress_broken():
        for _ in range(FLOOD_BYTES // len(piece)):
            await client.send(piece)
        await client.send(end)


class TestTrailers:
    async def test_trailer_fields_never_become_headers(self) -> None:
        """A chunked body's trailer fields are read and dropped: the app's headers are the
        head's alone (RFC 9110 §6.5.1 forbids merging them)."""
        toy = Toy()
        async with serving(toy) as served, served.connect() as client:
            await client.send(chunked(b"/", b"abc", b"X-Trailer: 1\r\nHost: evil.example\r\n"))
            (answer,) = await client.responses(1)
        assert json.loads(answer.body) == {"body": "abc", "more": False}
        assert toy.scopes[0]["headers"] == [(b"host", b"t"), (b"transfer-encoding", b"chunked")]

    async def test_a_token_sent_only_as_a_trailer_does_not_authenticate(self) -> None:
        """``serve --http`` with a token: the token in the head, 200; the same token only in
        a trailer, which a proxy in front never checks or strips, 401."""
        options = ServeOptions(http=("127.0.0.1", 0), tokens={_TOKEN: None})
        auth = b"Authorization: Bearer %b\r\n" % _TOKEN.encode()
        async with lean_serving(options) as lean, lean.served.connect() as client:
            await client.send(chunked(b"/mcp", BODY.encode(), b"", _lean_head() + auth))
            await client.send(chunked(b"/mcp", BODY.encode(), auth, _lean_head()))
            in_head, in_trailer = await client.responses(2)
        assert in_head.status == 200
        assert in_trailer.status == 401

    @pytest.mark.parametrize("shape", sorted(TRAILER_FLOODS))
    async def test_trailers_over_the_limit_get_431_and_close_in_bounded_memory(
        self, shape: str
    ) -> None:
        """Invariant 5 (bounded resources): 2 MiB of trailer fields (one endless field, or
        many short ones) under a 1 KiB header limit get 431 and a close, and the process
        holds no more than a few reads of them at any moment (tracemalloc's peak)."""
        start, piece, end = TRAILER_FLOODS[shape]
        limits = attrs.evolve(SHORT, request_timeout=60.0)
        async with serving(Toy(), limits=limits) as served, served.connect() as client:
            await client.send(chunked(b"/", b"a", b"")[: -len(b"\r\n")] + start)
            tracemalloc.start()
            try:
                baseline = tracemalloc.get_traced_memory()[0]
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_flood, client, piece, end)
                    (answer,) = await client.responses(1)
                    assert await client.closed()
                    nursery.cancel_scope.cancel()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        assert answer.status == 431
        assert answer.body == b"the trailer fields exceed 1024 bytes\n"
        assert peak - baseline < FLOOD_BYTES // 4


UPGRADE: Final = (
    b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
    b"HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n"
)
"""What ``curl --http2`` adds to a request on plain HTTP."""


class TestUpgrades:
    @pytest.mark.parametrize(
        "request_bytes",
        [post(b"/", b"hello", UPGRADE), chunked(b"/", b"hello", b"", b"Host: t\r\n" + UPGRADE)],
        ids=["content-length", "chunked"],
    )
    async def test_a_post_with_upgrade_is_served_with_its_body_then_closes(
        self, request_bytes: bytes
    ) -> None:
        """No upgrade is offered (no 101): the body reaches the app whole, the answer says
        Connection: close, and nothing sent after the request is read."""
        toy = Toy()
        async with serving(toy) as served, served.connect() as client:
            await client.send(request_bytes + post(b"/", b"next"))
            (answer,) = await client.responses(1)
            assert await client.closed()
        assert (answer.status, json.loads(answer.body)) == (200, {"body": "hello", "more": False})
        assert answer.headers[b"connection"] == b"close"
        assert (len(client.done), len(toy.scopes)) == (1, 1)

    @pytest.mark.parametrize(
        "head",
        [
            b"CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n",
        ],
        ids=["connect", "get-upgrade"],
    )
    async def test_connect_and_a_get_with_upgrade_are_answered_plainly_then_close(
        self, head: bytes
    ) -> None:
        """No tunnel and no switch: one plain answer with Connection: close, nothing after it
        read (after CONNECT, the bytes are the tunnel's)."""
        toy = Toy()
        async with serving(toy) as served, served.connect() as client:
            await client.send(head + b"\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
            (answer,) = await client.responses(1)
            assert await client.closed()
        assert answer.status == 200
        assert answer.headers[b"connection"] == b"close"
        assert (len(client.done), len(toy.scopes)) == (1, 1)

    @pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
    async def test_curl_http2_posts_a_call_to_serve_and_gets_its_result(self) -> None:
        """``curl --http2 -d`` (``Upgrade: h2c`` on a POST) against ``serve --http``."""
        headers = [arg for name, value in HEADERS.items() for arg in ("-H", f"{name}: {value}")]
        async with http_server("--state", "memory") as server:
            curl = ["curl", "-sSv", "--http2", "--max-time", "60", *headers, "-d", BODY]
            result = await trio.run_process(
                [*curl, server.url], capture_stdout=True, capture_stderr=True, check=False
            )
        assert b"Upgrade: h2c" in result.stderr  # what curl sent
        assert result.returncode == 0, result.stderr.decode()
        assert EXPECTED.encode() in result.stdout
