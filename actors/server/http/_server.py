"""Our own HTTP/1.1 server on trio: what ``serve --http`` listens with.

Why our own
-----------
A general ASGI server (hypercorn served the MCP listener once) spends more
CPU per request with an *empty* app (h11 in pure Python, a task group and
queues per request, an ASGI event per body chunk) than the fast path
(`actors.server.http._fast_path`) spends on a whole ``tools/call``. A trio
server that parses with ``httptools`` (llhttp, the C parser Node.js and
uvicorn use) does the same for a tenth of it (the figures: "Figures the
design rests on" in ``docs/performance.md``). This module is that server, kept small: HTTP/1.1
only (no TLS, no HTTP/2, no WebSocket: a TLS proxy in front does those), one
task per connection, the actors and everything else on the same trio loop.

Each request is read whole (headers and body) before anything looks at it.
Then, in order:

1. the **fast handler**, when one is given: a plain async function of the
   method, path, headers, body and client address that answers the request,
   or returns ``None``. ``serve --http`` passes the fast path with the checks
   of `actors.server.http._host_rules` and `actors.server.http._admission` in front of it
   (`actors.server.http._app`), so that a 2026-era ``tools/call`` is answered
   without an ASGI scope, a Starlette ``Request`` or a single extra task;
2. the **ASGI app** (the full app) for everything the
   fast handler leaves.

What it refuses, and why
------------------------
Every limit is one an attacker would push (`WireLimits`):

* **Header bytes** (64 KiB): more is answered 431 and the connection closed;
  llhttp buffers a header value until it ends, so the bytes are counted as
  they arrive, not once the headers are complete. At most 100 fields
  (``max_header_fields``; more: 431), since each costs some 130 bytes of
  Python objects besides its own: a connection waiting with a partial head
  holds about its bytes, not twenty times them.
* **Trailer fields** (after a chunked body) never become headers (RFC 9110
  §6.5.1 forbids merging them: a proxy that checks or strips ``Authorization``
  never saw one there); they are dropped, and counted as the head is, against
  the same limit of their own: more is answered 431 and the connection closed.
* **Body bytes** (``--max-request-bytes``): a body is read up to the limit and
  no further. A request whose body is larger (declared, or found so while
  reading a chunked one) still goes to the app, with what was read and then
  ``http.disconnect``: the gate answers it exactly as before (401 without a
  valid token, else 413 naming the option), and the connection is closed
  after the answer. The bytes the client goes on sending are drained for a
  moment after the answer (a "lingering close"), so that the client reads
  the answer rather than a reset.
* **Time**: a request's line and headers must arrive within
  ``header_timeout`` seconds of its first byte (5 s), and the whole request
  within ``request_timeout`` (30 s; a large body on a slow link needs it):
  then 408 and close. A client that trickles its head one byte at a time
  (slowloris) holds a connection 5 s and no longer. A connection with no
  request under way is closed after ``keep_alive_timeout`` seconds
  (hypercorn's default, 5 s; a new one too, before its first byte), and at
  once when the server stops. A response the client does not read for
  ``send_timeout`` seconds is abandoned and its connection closed.
* **Malformed requests** (400, then close): whatever llhttp refuses in its
  strict mode, among them the request smuggling vectors: a
  ``Content-Length`` beside ``Transfer-Encoding``, two ``Content-Length``
  headers, a ``Transfer-Encoding`` that does not end in ``chunked``, bare LF
  line ends and folded headers. The first check is repeated here, should a
  lenient llhttp ever be built in. Two ``Host`` headers too (RFC 9112 §3.2):
  the front checks one, and a proxy may have routed by the other.
* **Connections** (10 000): past the cap, a new connection is answered 503
  with ``Retry-After`` and closed at once, without reading it; those served
  go on. File descriptors are thus bounded by the cap (and the process's own
  limit, at which trio pauses accepting: ``serve`` raises its soft limit to
  the hard one).
* **Connections per client address** (64, ``--max-connections-per-address``;
  an IPv6 address counts as its /64): of those that have not yet sent a whole
  request. Past the cap, a new connection from that address is answered 503
  with ``Retry-After`` and closed; other addresses, and the address's
  connections past their first request (kept alive, streaming), go on. So
  one address holds at most the cap, each for ``keep_alive_timeout`` plus
  ``header_timeout`` (``request_timeout`` if it trickles a body), and a
  client behind the same proxy or NAT goes on being served on the
  connections it has.

``Expect: 100-continue`` is answered ``100 Continue`` before the body is read,
unless the declared body is over the limit (then the answer comes at once).
Pipelined requests are parsed as they arrive and answered in order, at most
``max_pipelined`` of them read ahead (what follows waits unparsed). No
upgrade is offered: a request with ``Upgrade`` (``curl --http2`` sends
``Upgrade: h2c`` on a POST) is answered as a plain one, its body read as its
own framing headers say (llhttp skips an upgrade's body), and ``CONNECT``
too (what follows it is the tunnel's); then the connection is closed, and
nothing sent after the request is read: the client asked to leave HTTP/1.1.

The ASGI bridge
---------------
The scope is built as hypercorn builds it (ASGI 3.0, HTTP spec 2.3: the app
learns of a disconnect through ``receive`` and its ``send`` never raises),
with the lifespan's ``state`` copied into each request. ``receive`` gives the
whole body at once, then waits until the client disconnects (or the response
is complete) and says ``http.disconnect``: a task reads the socket while the
app runs, so an SSE stream or a long POST whose client hangs up is cancelled
by the SDK as under hypercorn. ``send`` writes a response complete in one
body with a ``Content-Length``, and a streamed one (``more_body``) with
chunked transfer encoding unless the app set a length. Once the client is
gone, ``send`` drops what it is given, as hypercorn does: the app finds out
from ``receive``. An app that fails before it started its response gets a
500; one that fails later has its connection closed mid-response.

The app's lifespan runs around the server: startup before it listens,
shutdown after the last connection closed (the SDK's session manager lives
there).

Stopping
--------
Once ``stop`` is set, the listeners close and idle connections with them;
requests in flight finish and their connections close after the response
(``Connection: close``). Whatever is still open ``grace`` seconds later (an
SSE stream) is cancelled.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import math
import os
import urllib.parse
from collections import deque
from typing import TYPE_CHECKING, Any, Final, TypeAlias, final

import attrs
import httptools
import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from starlette.types import ASGIApp, Message

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_ADDRESS",
    "BodySend",
    "FastAnswer",
    "FastHandler",
    "FastStream",
    "RawHeaders",
    "WireLimits",
    "serve_wire",
]

logger = logging.getLogger("actors.serve")

DEFAULT_MAX_CONNECTIONS: Final = 10_000
"""Connections served at once; one more is answered 503 and closed."""
DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: Final = 64
"""Connections of one client address not yet past their first request; one more: 503."""

RawHeaders: TypeAlias = "list[tuple[bytes, bytes]]"
"""Header names (lowercase) and values, in the order they came."""
FastAnswer: TypeAlias = "tuple[int, Sequence[tuple[bytes, bytes]], bytes]"
"""A fast handler's response: status, headers (with ``content-length``), body."""
BodySend: TypeAlias = "Callable[[bytes, bool], Awaitable[None]]"
"""``(piece, more)``: send the next piece of a streamed body; ``more`` False for the last."""


@final
@attrs.frozen
class FastStream:
    """A fast handler's streamed response: its head, then the pieces `body` sends.

    `body` is called as soon as the handler returns, with nothing awaited in
    between: what it holds while it streams, it may take in the handler. The
    head goes with its first piece; each piece is one write, framed as a chunk.
    """

    status: int
    headers: Sequence[tuple[bytes, bytes]]
    """Without framing (``content-length``, ``transfer-encoding``): the wire adds it."""
    body: Callable[[BodySend], Awaitable[None]]


FastHandler: TypeAlias = (
    "Callable[[str, str, RawHeaders, bytes, tuple[str, int] | None], "
    "Awaitable[FastAnswer | FastStream | None]]"
)
"""``(method, path, headers, body, client) -> answer | None``: ``None`` leaves it to the app."""

_CHUNK: Final = 65536
_SLICE: Final = 4096
"""Bytes parsed at once: past `WireLimits.max_pipelined`, a slice's requests at most."""
_PROBE_EVERY: Final = 8
"""Of the reads that start a request on a connection that waits first (`_ReadRule`), one
in this many tries first: how a client turned quick is noticed (1/8 of the wasted tries)."""
_LINGER_SECONDS: Final = 2.0
_LINGER_BYTES: Final = 1 << 20
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}


@final
@attrs.frozen
class WireLimits:
    """What one client may make the server hold, and for how long."""

    max_body_bytes: int = 4 << 20
    """Bytes of a request body read; a larger one reaches the app cut (see the module)."""
    max_header_bytes: int = 64 << 10
    """Bytes of a request line and headers; more: 431."""
    max_header_fields: int = 100
    """Fields of a request's head; more: 431. Each costs Python objects besides its own
    bytes, so that a head of many one-byte fields would cost many times its size without
    it (the figure: ``docs/performance.md``)."""
    header_timeout: float = 5.0
    """Seconds a request's line and headers may take to arrive, from its first byte; then
    408. Its body has until `request_timeout`."""
    request_timeout: float = 30.0
    """Seconds a request may take to arrive whole, from its first byte; then 408."""
    keep_alive_timeout: float = 5.0
    """Seconds a connection may wait for its next request (for its first, once accepted)."""
    send_timeout: float = 30.0
    """Seconds a write may wait for the client to read; then the connection is dropped."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Connections served at once; more are answered 503 and closed."""
    max_connections_per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS
    """Connections of one client address (an IPv6 one: its /64) that have not yet sent a
    whole request; one more is answered 503 with ``Retry-After`` and closed. Those past
    their first request (answered, kept alive, streaming) are not counted."""
    max_pipelined: int = 16
    """Requests read ahead of the one being answered; then reading pauses."""


class _Refused(Exception):
    """The request cannot be served: answer `status` with `text` and close."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class _Cut(Exception):
    """Parsing stops here: a request was handed on, and nothing after it is read.

    Its body was over the limit (handed on before it was whole), or it asked for an
    upgrade (the connection closes after its answer).
    """


@attrs.define(eq=False)
class _Request:
    method: str
    http_version: str
    target: bytes
    headers: RawHeaders
    keep_alive: bool
    body: bytes = b""
    whole: bool = True
    """False: the body is over the limit and only its start was read."""
    upgrade: bool = False
    """It asked to switch protocols (``Upgrade``, ``CONNECT``): answered plainly, then close."""


def _status_line(status: int) -> bytes:
    # No reason phrase, as h11 (hypercorn) sends it: clients read the code, and scripts
    # that match "HTTP/1.1 200 " keep working.
    return b"HTTP/1.1 %d \r\n" % status


def _head(status: int, headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    lines = [_status_line(status)]
    lines.extend(name + b": " + value + b"\r\n" for name, value in headers)
    lines.append(b"\r\n")
    return b"".join(lines)


def _plain(status: int, text: str, *extra: tuple[bytes, bytes]) -> bytes:
    """A whole response of our own (not the app's): plain text, and the connection closes."""
    body = (text + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", b"%d" % len(body)),
        (b"connection", b"close"),
        *extra,
    ]
    return _head(status, headers) + body


def _has(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> bool:
    return any(key.lower() == name for key, _ in headers)


def _no_body(method: str, status: int) -> bool:
    """Whether the response carries no body whatever the app sends (HEAD, 1xx, 204, 304)."""
    return method == "HEAD" or status < 200 or status in (204, 304)


def _check_framing(headers: RawHeaders) -> None:
    """Refuse a head that proxies and this server could read as different requests.

    llhttp refuses most such heads itself, in its strict mode; the first check is kept
    should a lenient llhttp ever be built in.
    """
    if _has(headers, b"transfer-encoding") and _has(headers, b"content-length"):
        raise _Refused(400, "Content-Length and Transfer-Encoding together are refused")
    if [name for name, _ in headers].count(b"host") > 1:
        raise _Refused(400, "a request with two Host headers is refused (RFC 9112 §3.2)")


@final
class _Parser:
    """httptools' callbacks: requests as they complete, within the limits."""

    def __init__(self, limits: WireLimits) -> None:
        self._limits = limits
        self._parser = httptools.HttpRequestParser(self)
        self.ready: deque[_Request] = deque()
        self.failure: _Refused | None = None
        """Answered once the requests before it are: the connection then closes."""
        self.done = False
        """No more requests on this connection (a failure, a cut body, an upgrade)."""
        self.started_at: float | None = None
        """When the request being read began; None between requests."""
        self.wants_continue = False
        """Its client waits for ``100 Continue`` before it sends the body."""
        self._held = b""
        """Bytes not parsed yet: `max_pipelined` requests were waiting."""
        self._reset()

    def _reset(self) -> None:
        self._target = bytearray()
        self._headers: RawHeaders = []
        self._head_done = False
        self._fields = 0
        """Bytes of the head's fields so far; once it is complete, of the trailer section's."""
        self._fed = 0
        """Bytes fed since the head or a chunk header began: see `_count_fed`."""
        self._after_chunk_header = False
        """No chunk data since the last chunk header: trailers, if that chunk was the last."""
        self._body_skipped = False
        """An upgrade's body, which llhttp skips: `_upgraded` reads it."""
        self._body = bytearray()
        self._request: _Request | None = None

    @property
    def head_done(self) -> bool:
        """Whether the head of the request being read is complete (its body may follow)."""
        return self._head_done

    def feed(self, data: bytes) -> None:
        """Parse `data`; complete requests join `ready`, a refusal becomes `failure`.

        Parsing pauses once `max_pipelined` requests wait in `ready`, and what is left
        is held until `pop` takes one: one read of tiny pipelined requests would
        otherwise make thousands of them at once, some twenty times its size.
        """
        self._held = self._held + data if self._held else data
        self._parse_held()

    def pop(self) -> _Request:
        """The first request of `ready`; parsing what is held resumes."""
        request = self.ready.popleft()
        self._parse_held()
        return request

    def _parse_held(self) -> None:
        held, at = self._held, 0
        while at < len(held) and not self.done and len(self.ready) < self._limits.max_pipelined:
            self._feed(held[at : at + _SLICE])
            at += _SLICE
        self._held = b"" if self.done else held[at:]

    def _feed(self, data: bytes) -> None:
        if self.done:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            rest = data[upgrade.args[0] :]
        except httptools.HttpParserCallbackError as error:
            self._callback_failed(error)
            return
        except httptools.HttpParserError as error:
            self._fail(_Refused(400, f"malformed HTTP request: {error}"))
            return
        else:
            self._count_fed(len(data))
            return
        # Out of the handler: an error of the body's parser must not take the upgrade as
        # its context, where `_callback_failed` looks for the callback's own.
        self._upgraded(rest)

    def _count_fed(self, fed: int) -> None:
        """Refuse a head or trailer section that outgrows the limit before a field of it ends.

        httptools keeps a field's value until it ends, and llhttp sets no bound: what is fed
        while one may be under way is counted. A chunk may end the body or the request
        before that, hence the slack of one chunk; the exact size is checked as each field
        ends.
        """
        if self.started_at is None or (self._head_done and not self._after_chunk_header):
            return
        self._fed += fed
        if self._fed > self._limits.max_header_bytes + _CHUNK:
            self._fail(self._too_large())

    def _upgraded(self, rest: bytes) -> None:
        """llhttp stopped at an upgrade; `rest` is what followed the request's head.

        No upgrade is offered: the request is answered plainly, then the connection
        closes, and nothing after it is parsed. llhttp (httptools) skips an upgrade's body,
        so a body the request declares is read by a parser of its own, fed a head that
        frames it with the request's own framing headers, then `rest`.
        """
        if not self._body_skipped:
            self.done = True
            return
        self._body_skipped = False
        assert self._request is not None
        framing = [
            name + b": " + value + b"\r\n"
            for name, value in self._request.headers
            if name in (b"content-length", b"transfer-encoding")
        ]
        self._parser = httptools.HttpRequestParser(_UpgradeBody(self))
        self._feed(b"POST / HTTP/1.1\r\n" + b"".join(framing) + b"\r\n" + rest)

    def _callback_failed(self, error: Exception) -> None:
        cause = error.__context__
        if isinstance(cause, _Refused):
            self._fail(cause)
        elif isinstance(cause, _Cut):
            self.done = True
        else:
            self._fail(_Refused(400, f"malformed HTTP request: {error}"))

    def _fail(self, refusal: _Refused) -> None:
        self.failure = refusal
        self.done = True

    def _too_large(self) -> _Refused:
        what = "the trailer fields" if self._head_done else "the request line and headers"
        return _Refused(431, f"{what} exceed {self._limits.max_header_bytes} bytes")

    def _fields_grew(self, size: int) -> None:
        self._fields += size
        if self._fields > self._limits.max_header_bytes:
            raise self._too_large()

    # httptools' callbacks

    def on_message_begin(self) -> None:
        self._reset()
        self.started_at = trio.current_time()

    def on_url(self, url: bytes) -> None:
        self._target += url
        self._fields_grew(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields_grew(len(name) + len(value) + 4)
        # A trailer field is counted and dropped: RFC 9110 §6.5.1 forbids merging it into the
        # headers, where a proxy that checks or strips them (Authorization) never saw it.
        if not self._head_done:
            if len(self._headers) == self._limits.max_header_fields:
                raise _Refused(431, f"over {self._limits.max_header_fields} header fields")
            self._headers.append((name.lower(), value.rstrip(b" \t")))

    def on_headers_complete(self) -> None:
        self._head_done = True
        self._fields = 0  # a trailer section has a limit of its own, the same
        headers, parser = self._headers, self._parser
        _check_framing(headers)
        self._request = _Request(
            method=parser.get_method().decode("ascii"),
            http_version=parser.get_http_version(),
            target=bytes(self._target),
            headers=headers,
            keep_alive=parser.should_keep_alive(),
            upgrade=parser.should_upgrade(),
        )
        declared = dict(headers).get(b"content-length")
        length = 0 if declared is None else int(declared)
        self._body_skipped = (
            self._request.upgrade
            and self._request.method != "CONNECT"  # its body, if any, is the tunnel's
            and (length > 0 or _has(headers, b"transfer-encoding"))
        )
        if length > self._limits.max_body_bytes:
            self._cut()
        expect = dict(headers).get(b"expect", b"").lower()
        self.wants_continue = expect == b"100-continue" and declared != b"0"

    def on_chunk_header(self) -> None:
        self._after_chunk_header = True
        self._fed = 0

    def on_body(self, body: bytes) -> None:
        self._after_chunk_header = False
        self._body += body
        if len(self._body) > self._limits.max_body_bytes:
            self._cut()

    def on_message_complete(self) -> None:
        assert self._request is not None
        if self._body_skipped:
            return  # llhttp took it for an upgrade: its body is still to come (`_upgraded`)
        self._request.body = bytes(self._body)
        self.ready.append(self._request)
        self.started_at = None
        self.wants_continue = False
        self._reset()

    def _cut(self) -> None:
        """Hand the request on as it is, its body over the limit: no more parsing."""
        assert self._request is not None
        self._request.body = bytes(self._body)
        self._request.whole = False
        self.ready.append(self._request)
        self.started_at = None
        self.wants_continue = False
        raise _Cut


@final
class _UpgradeBody:
    """The callbacks of the parser that reads an upgrade's body (see `_Parser._upgraded`).

    The head it is fed first is the server's own: only what follows it, the body and
    its trailers, goes to the `_Parser`, and parsing stops at the body's end.
    """

    def __init__(self, parser: _Parser) -> None:
        self._parser = parser
        self._past_head = False

    def on_headers_complete(self) -> None:
        self._past_head = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._past_head:  # a trailer field
            self._parser.on_header(name, value)

    def on_chunk_header(self) -> None:
        self._parser.on_chunk_header()

    def on_body(self, body: bytes) -> None:
        self._parser.on_body(body)

    def on_message_complete(self) -> None:
        self._parser.on_message_complete()
        raise _Cut


@attrs.define(eq=False)
class _Server:
    """What every connection of one listener shares."""

    app: ASGIApp
    fast: FastHandler | None
    limits: WireLimits
    state: dict[str, Any]
    """The lifespan's state, copied into each request's scope."""
    open: int = 0
    stopping: bool = False
    idle: set[trio.CancelScope] = attrs.field(factory=set)
    """The waits of connections between requests: cancelled when the server stops."""
    all_closed: trio.Event = attrs.field(factory=trio.Event)
    waiting: _Waiting = attrs.field(
        default=attrs.Factory(lambda self: _Waiting(self.limits), takes_self=True)
    )
    """Connections of each client address not yet past their first request."""

    def stop(self) -> None:
        """Take no new requests: close idle connections now, busy ones after their response."""
        self.stopping = True
        for scope in self.idle:
            scope.cancel()
        if not self.open:
            self.all_closed.set()

    async def connection(self, stream: trio.SocketStream) -> None:
        """Serve one accepted connection (trio.serve_listeners' handler)."""
        if self.open >= self.limits.max_connections or self.stopping:
            await _turn_away(stream, "too many connections; try again shortly", 1)
            return
        connection = _Connection(self, stream)
        if not self.waiting.admit(connection.group):
            logger.debug("http: %s has too many connections without a request", connection.group)
            text = "too many connections from your address have sent no request; try again shortly"
            await _turn_away(stream, text, math.ceil(self.limits.header_timeout))
            return
        self.open += 1
        try:
            await connection.run()
        except Exception:
            logger.exception("http: a connection failed")
        finally:
            connection.stop_waiting()
            self.open -= 1
            if self.stopping and not self.open:
                self.all_closed.set()


@final
@attrs.define
class _Waiting:
    """Connections of each client address that have not sent a whole request yet.

    Once past its first request a connection is not counted: a client (or the proxy
    all clients come through) whose connections are served is never turned away for
    those, and one that holds connections without a request holds at most the cap,
    each for `WireLimits.keep_alive_timeout` plus `WireLimits.request_timeout` at most
    (`WireLimits.header_timeout` for a head that does not come).
    """

    limits: WireLimits
    counts: dict[str, int] = attrs.field(factory=dict)

    def admit(self, group: str | None) -> bool:
        """Count one more connection of `group` (None: unknown, not counted); False if full."""
        if group is None:
            return True
        count = self.counts.get(group, 0)
        if count >= self.limits.max_connections_per_address:
            return False
        self.counts[group] = count + 1
        return True

    def release(self, group: str) -> None:
        """One connection of `group` sent its first whole request, or closed before."""
        count = self.counts.pop(group) - 1
        if count:
            self.counts[group] = count


async def _turn_away(stream: trio.SocketStream, text: str, retry_after: int) -> None:
    """A connection past a cap: a 503 if it can be written at once, then close."""
    answer = _plain(503, text, (b"retry-after", b"%d" % retry_after))
    with trio.move_on_after(1), contextlib.suppress(trio.BrokenResourceError):
        await stream.send_all(answer)
    await trio.aclose_forcefully(stream)


def _address_group(host: str) -> str:
    """What the per-address cap counts a client at `host` as: its address, an IPv6 one's /64.

    A /64 is what one IPv6 subscriber is given: counted by address, each of its
    2**64 addresses would have a cap of its own.
    """
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.partition("%")[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


def _address(sockname: Any) -> tuple[str, int] | None:
    """``(host, port)`` of a socket address (IPv6 ones have two more fields)."""
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return str(sockname[0]), int(sockname[1])
    return None


@final
@attrs.define
class _ReadRule:
    """Whether the read that starts a request tries the socket first or waits for it first.

    trio's ``receive_some`` tries ``recv`` at once and waits for readability (epoll) only
    if that finds nothing: right where bytes tend to be there already (a client that
    pipelines, or sends at once from another core, a loaded server that comes back to a
    connection late), one wasted system call and a second ``recv`` before every request
    where the client sends its next request only once it has read the response, after the
    server is back to reading (an MCP client in Python: the usual case). Trying first costs
    1 call when bytes wait and 3 when not (try, ``epoll_ctl``, read); waiting first costs 2
    either way: trying first is the cheaper while fewer than half the tries miss.

    So a two-bit saturating count, as a branch predictor keeps one: a try that misses adds
    one, one that finds bytes takes one away, and the connection waits first from two; one
    miss among hits does not flip it, nor one hit among misses. Waiting first tells nothing
    of whether bytes were there already, so every `_PROBE_EVERY`-th read that would wait
    tries first instead. Only the first read of a request follows the rule: the rest of a
    request is on its way, so tried at once.
    """

    misses: int = 0
    """0 to 3: tries that missed, less those that found bytes; wait first from 2."""
    skipped: int = 0
    """Reads that waited first since the last probe."""

    def tries_first(self) -> bool:
        """Whether this read tries the socket before waiting (then `found` is told)."""
        if self.misses < 2:
            return True
        self.skipped += 1
        if self.skipped < _PROBE_EVERY:
            return False
        self.skipped = 0
        return True

    def found(self, *, waiting: bool) -> None:
        """What the try found: bytes `waiting`, or nothing."""
        self.misses = max(self.misses - 1, 0) if waiting else min(self.misses + 1, 3)


@final
class _Connection:
    """One client connection: requests read, answered in order, until it closes."""

    def __init__(self, server: _Server, stream: trio.SocketStream) -> None:
        self._server = server
        self._limits = server.limits
        self._stream = stream
        self._parser = _Parser(server.limits)
        self._eof = False
        self._gone = trio.Event()
        """Set once the client is gone (EOF, a reset, a write that failed or timed out)."""
        self.response_over: trio.Event | None = None
        """The running ASGI request's: set when the client goes, too."""
        self._drain = False
        """Close with a lingering drain: the client may still be sending."""
        self._idle_since = trio.current_time()
        self._fd = stream.socket.fileno()
        self._rule = _ReadRule()
        try:
            self._client = _address(stream.socket.getpeername())
            self._local = _address(stream.socket.getsockname())
        except OSError:
            self._client = self._local = None
            self._lost()
        self.group = None if self._client is None else _address_group(self._client[0])
        """What the client counts as for `WireLimits.max_connections_per_address`."""
        self._waiting = True
        """Counted in `_Server.waiting` (when admitted): no whole request came yet."""

    async def run(self) -> None:
        """Serve requests until the client leaves, a refusal, a timeout or the server stops."""
        try:
            while not self._gone.is_set():
                request = await self._next_request()
                if request is None:
                    break
                if request.whole:
                    self.stop_waiting()
                if not await self._answer(request):
                    break
                self._idle_since = trio.current_time()
        finally:
            await self._close()

    def stop_waiting(self) -> None:
        """No longer count against the client's address: a whole request came, or it closed."""
        if self._waiting and self.group is not None:
            self._server.waiting.release(self.group)
        self._waiting = False

    async def _close(self) -> None:
        if self._drain and not self._gone.is_set():
            await self._linger()
        await trio.aclose_forcefully(self._stream)

    async def _linger(self) -> None:
        """Stop sending, then read what the client still sends for a moment, then close."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self._stream.send_eof()
            drained = 0
            with trio.move_on_after(_LINGER_SECONDS):
                while drained < _LINGER_BYTES:
                    data = await self._stream.receive_some(_CHUNK)
                    if not data:
                        break
                    drained += len(data)

    # reading

    async def _next_request(self) -> _Request | None:
        """The next request in order; None when the connection should close."""
        parser = self._parser
        while not parser.ready:
            if parser.failure is not None:
                await self._refuse(parser.failure)
                return None
            if parser.done or self._eof or (self._server.stopping and parser.started_at is None):
                return None
            if not await self._read_more():
                return None
        return parser.pop()

    async def _read_more(self) -> bool:
        """Read and parse what comes next, within its timeout; False: close."""
        if self._parser.wants_continue:
            self._parser.wants_continue = False
            await self._write(b"HTTP/1.1 100 \r\n\r\n")
        started = self._parser.started_at
        if started is None:
            deadline = self._idle_since + self._limits.keep_alive_timeout
            with trio.move_on_at(deadline) as waiting:
                self._server.idle.add(waiting)
                try:
                    data = await self._receive(next_request=True)
                finally:
                    self._server.idle.discard(waiting)
            if waiting.cancelled_caught:
                return False  # idle too long, or the server stops: close without a word
        else:
            # From its first byte, or from the end of the response before it (pipelined).
            since = max(started, self._idle_since)
            part, timeout = self._arriving()
            with trio.move_on_at(since + timeout) as waiting:
                data = await self._receive()
            if waiting.cancelled_caught:
                text = f"the request's {part} did not arrive within {timeout:g} s"
                await self._refuse(_Refused(408, text))
                return False
        self._parser.feed(data)
        return bool(data) or bool(self._parser.ready)

    def _arriving(self) -> tuple[str, float]:
        """The part of the request under way, and the seconds it has from the first byte."""
        if self._parser.head_done:
            return "body", self._limits.request_timeout
        return "line and headers", self._limits.header_timeout

    async def _receive(self, *, next_request: bool = False) -> bytes:
        """Some bytes from the client; ``b""`` once it is gone (EOF, a reset, closed).

        What trio's ``SocketStream.receive_some`` does, on the file descriptor, so that
        the first try can be skipped: `next_request` (no byte of the next request read
        yet) lets `_ReadRule` decide whether to try the socket before waiting for it. The
        stream is always a plain TCP socket (no TLS here: `serve_wire` listens with
        `trio.open_tcp_listeners`), so its bytes are the client's.
        """
        if not next_request or self._rule.tries_first():
            # A checkpoint either side of the try, as trio's: cancellable before it, and a
            # client that keeps the socket full cannot starve the other tasks.
            await trio.lowlevel.checkpoint_if_cancelled()
            data = self._read_now()
            if next_request:
                self._rule.found(waiting=data is not None)
            if data is not None:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return self._got(data)
        while True:
            try:
                await trio.lowlevel.wait_readable(self._fd)
            except (trio.ClosedResourceError, OSError):  # closed under it, or a bad fd
                return self._got(b"")
            data = self._read_now()
            if data is not None:  # None: woken with nothing to read; wait again, as trio does
                return self._got(data)

    def _read_now(self) -> bytes | None:
        """What the socket holds now (``b""``: gone); None when nothing is waiting."""
        try:
            return os.read(self._fd, _CHUNK)
        except BlockingIOError:
            return None
        except OSError:  # a reset, mostly: the client is gone as surely as at EOF
            return b""

    def _got(self, data: bytes) -> bytes:
        if not data:
            self._eof = True
            self._lost()
        return data

    def _lost(self) -> None:
        """The client is gone: whatever waits for that learns it."""
        self._gone.set()
        if self.response_over is not None:
            self.response_over.set()

    async def _watch(self) -> None:
        """While the app runs: read pipelined requests, and notice the client leaving."""
        while not self._eof:
            if len(self._parser.ready) >= self._limits.max_pipelined:
                await trio.sleep_forever()  # no reading ahead: a disconnect shows when writing
            data = await self._receive()
            if self._parser.done:
                continue  # a cut body's rest, or after a refusal: drained, not parsed
            self._parser.feed(data)

    # writing

    async def _write(self, data: bytes) -> bool:
        """Send `data`; False (and the client counted gone) if it cannot be."""
        if self._gone.is_set():
            return False
        # Most writes fit the socket's buffer: one non-blocking write, without the timeout's
        # cancel scope and the two scheduler round trips of send_all. The rest, if any, waits.
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            self._lost()
            return False
        if written == len(data):
            return True
        data = data[written:]
        with trio.move_on_after(self._limits.send_timeout) as waiting:
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._lost()
                return False
        if waiting.cancelled_caught:
            logger.debug("http: a client read nothing for %g s; dropped", self._limits.send_timeout)
            self._lost()
            return False
        return True

    async def _refuse(self, refusal: _Refused) -> None:
        logger.debug("http: refused with %d: %s", refusal.status, refusal.text)
        self._drain = True
        await self._write(_plain(refusal.status, refusal.text))

    # answering

    def _closes_after(self, request: _Request) -> bool:
        return (
            not request.keep_alive
            or not request.whole
            or request.upgrade
            or request.http_version != "1.1"
            or self._server.stopping
        )

    async def _answer(self, request: _Request) -> bool:
        """Answer `request`; whether the connection may carry another."""
        if not request.whole:
            self._drain = True
        if self._server.fast is not None and request.whole:
            try:
                answer = await self._fast(request, self._server.fast)
            except Exception:
                logger.exception("http: the fast handler failed on %s", request.method)
                await self._write(_plain(500, "internal server error"))
                return False
            if isinstance(answer, FastStream):
                return await self._stream_fast(request, answer)
            if answer is not None:
                return await self._send_fast(request, answer)
        bridge = _Bridge(self, request)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch)
            await bridge.run()
            nursery.cancel_scope.cancel()
        return bridge.keeps_alive

    async def _fast(self, request: _Request, fast: FastHandler) -> FastAnswer | FastStream | None:
        path = urllib.parse.unquote(request.target.partition(b"?")[0].decode("latin-1"))
        return await fast(request.method, path, request.headers, request.body, self._client)

    async def _send_fast(self, request: _Request, answer: FastAnswer) -> bool:
        status, headers, body = answer
        closes = self._closes_after(request)
        if closes:
            headers = [*headers, (b"connection", b"close")]
        sent = await self._write(_head(status, headers) + body)
        return sent and not closes

    async def _stream_fast(self, request: _Request, answer: FastStream) -> bool:
        """Stream `answer`, chunked (HTTP/1.0: to the connection's end); whether it may go on."""
        chunked = request.http_version == "1.1"
        closes = self._closes_after(request) or not chunked
        headers = [(name, value) for name, value in answer.headers if name != b"connection"]
        headers.append((b"connection", b"close" if closes else b"keep-alive"))
        if chunked:
            headers.append((b"transfer-encoding", b"chunked"))
        head = _head(answer.status, headers)
        complete = False

        async def send(piece: bytes, more: bool) -> None:
            nonlocal head, complete
            if complete:
                msg = "a fast stream sent a piece after its last"
                raise RuntimeError(msg)
            complete = not more
            data = head + (_chunk(piece, more=more) if chunked else piece)
            head = b""
            await self._write(data)

        try:
            await answer.body(send)
        except Exception:
            logger.exception("http: a fast stream failed on %s", request.method)
            if head:  # nothing sent yet
                await self._write(_plain(500, "internal server error"))
            return False  # else a response cut short: only closing tells the client
        if not complete:
            await send(b"", False)
        return not closes and not self._gone.is_set()


@final
class _Bridge:
    """One request handed to the ASGI app: its scope, ``receive`` and ``send``."""

    def __init__(self, connection: _Connection, request: _Request) -> None:
        self._connection = connection
        self._request = request
        self._body_given = False
        self._status = 200
        self._headers: list[tuple[bytes, bytes]] = []
        self._started = False
        self._head_sent = False
        self._chunked = False
        self._complete = False
        self._closes = connection._closes_after(request)
        self._over = connection.response_over = trio.Event()
        """The response is complete or the client gone: ``receive`` then says
        ``http.disconnect``, as hypercorn's does."""
        self._lock = trio.StrictFIFOLock()

    @property
    def keeps_alive(self) -> bool:
        """Whether the connection may carry another request after this one."""
        return self._complete and not self._closes and not self._connection._gone.is_set()

    def _scope(self) -> dict[str, Any]:
        request = self._request
        path, _, query = request.target.partition(b"?")
        connection = self._connection
        return {
            "type": "http",
            "asgi": _ASGI,
            "http_version": request.http_version,
            "method": request.method,
            "scheme": "http",
            "path": urllib.parse.unquote(path.decode("latin-1")),
            "raw_path": path,
            "query_string": query,
            "root_path": "",
            "headers": request.headers,
            "client": connection._client,
            "server": connection._local,
            "state": connection._server.state.copy(),
            "extensions": {},
        }

    async def run(self) -> None:
        """Run the app on the request; a 500 if it fails before its response began."""
        try:
            await self._connection._server.app(self._scope(), self._receive, self._send)
        except Exception:
            logger.exception(
                "http: the app failed on %s %r", self._request.method, self._request.target
            )
        if not self._started:
            self._closes = True
            await self._connection._write(_plain(500, "internal server error"))
        elif not self._complete:
            self._closes = True  # a response cut short: only closing tells the client

    async def _receive(self) -> Message:
        if not self._body_given:
            self._body_given = True
            more = not self._request.whole  # a cut body: the rest never comes
            return {"type": "http.request", "body": self._request.body, "more_body": more}
        if self._request.whole:
            await self._over.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self._started:
                msg = "the app sent http.response.start twice"
                raise RuntimeError(msg)
            self._started = True
            self._status = int(message["status"])
            self._headers = _checked(message.get("headers", ()))
            if _is_event_stream(self._headers):
                # An SSE stream's head goes now, not with its first event, which may be long
                # in coming (an idle GET stream sends nothing for a while, and a proxy in
                # front gives up on a response that never started). Any other response's
                # head waits for its first body, to be framed with a length if it is whole.
                async with self._lock:
                    await self._body(b"", more=True)
        elif kind == "http.response.body":
            if not self._started or self._complete:
                msg = "http.response.body before http.response.start, or after the last body"
                raise RuntimeError(msg)
            async with self._lock:
                await self._body(bytes(message.get("body", b"")), message.get("more_body", False))
        else:
            msg = f"unexpected ASGI message {kind!r}"
            raise RuntimeError(msg)

    async def _body(self, body: bytes, more: bool) -> None:
        if not more:
            self._complete = True
            self._over.set()
        if _no_body(self._request.method, self._status):
            body = b""
        head = b""
        if not self._head_sent:
            self._head_sent = True
            head = self._head(body, more=more)  # decides the framing of what follows
        data = head + self._framed(body, more=more)
        if data:
            await self._connection._write(data)
        else:
            await trio.lowlevel.checkpoint()  # an empty chunk: nothing to frame yet

    def _head(self, body: bytes, *, more: bool) -> bytes:
        """The status line and headers, with the framing and ``Connection`` they need."""
        status, headers = self._status, self._headers
        no_body = _no_body(self._request.method, status)
        connection = [value.lower() for name, value in headers if name.lower() == b"connection"]
        if b"close" in connection or self._connection._server.stopping:
            self._closes = True
        extra: list[tuple[bytes, bytes]] = []
        if not no_body and not _has(headers, b"content-length"):
            if not more:
                extra.append((b"content-length", b"%d" % len(body)))
            elif self._request.http_version == "1.1":
                self._chunked = True
                extra.append((b"transfer-encoding", b"chunked"))
            else:
                self._closes = True  # HTTP/1.0: the end of the body is the end of the connection
        if self._closes and not _has(headers, b"connection"):
            extra.append((b"connection", b"close"))
        return _head(status, [*headers, *extra])

    def _framed(self, body: bytes, *, more: bool) -> bytes:
        return _chunk(body, more=more) if self._chunked else body


def _chunk(body: bytes, *, more: bool) -> bytes:
    """`body` as a chunk of a chunked body (none when empty); the last one ends the body."""
    chunk = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
    return chunk if more else chunk + b"0\r\n\r\n"


def _is_event_stream(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a response is an SSE stream (``Content-Type: text/event-stream``)."""
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.lower().startswith(b"text/event-stream")
    return False


def _checked(headers: Any) -> list[tuple[bytes, bytes]]:
    """The app's response headers, refused if one could split the response."""
    checked = [(bytes(name), bytes(value)) for name, value in headers]
    for name, value in checked:
        if b"\r" in name + value or b"\n" in name + value or b":" in name:
            msg = f"the app sent a response header that is not one: {name!r}: {value!r}"
            raise RuntimeError(msg)
    return checked


@final
class _Lifespan:
    """The app's ASGI lifespan: started before the server listens, shut down after it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self.state: dict[str, Any] = {}
        self._started = trio.Event()
        self._stopping = trio.Event()
        self._stopped = trio.Event()
        self._failure: str | None = None
        self._asked = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the lifespan until shutdown; started once the app's startup is complete."""
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}}
        scope["state"] = self.state
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._app_lifespan, scope)
            await self._started.wait()
            if self._failure is not None:
                msg = f"the app's startup failed: {self._failure}"
                raise RuntimeError(msg)
            task_status.started()
            await self._stopped.wait()

    async def _app_lifespan(self, scope: dict[str, Any]) -> None:
        try:
            await self._app(scope, self._receive, self._send)
        except Exception:
            if self._started.is_set():
                logger.exception("http: the app's lifespan failed")
            else:
                # An app without a lifespan raises on its scope: it has nothing to start.
                logger.debug("http: the app has no lifespan", exc_info=True)
        finally:
            self._started.set()
            self._stopped.set()

    async def _receive(self) -> Message:
        self._asked += 1
        if self._asked == 1:
            return {"type": "lifespan.startup"}
        await self._stopping.wait()
        return {"type": "lifespan.shutdown"}

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.failed":
            self._failure = str(message.get("message", ""))
        if kind.startswith("lifespan.startup."):
            self._started.set()
        elif kind.startswith("lifespan.shutdown."):
            self._stopped.set()
        await trio.lowlevel.checkpoint()

    def shut_down(self) -> None:
        """Ask the app to shut down; `run` returns once it has."""
        self._stopping.set()


def _url(listener: trio.SocketListener) -> str:
    host, port = _address(listener.socket.getsockname()) or ("?", 0)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _host_and_port(bind: str) -> tuple[str | None, int]:
    """``HOST:PORT`` (an IPv6 host in brackets) as `trio.open_tcp_listeners` takes it."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    return host or None, int(port)


async def serve_wire(
    app: ASGIApp,
    bind: str,
    stop: trio.Event,
    *,
    grace: float,
    limits: WireLimits,
    fast: FastHandler | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` (and `fast` first) on `bind` until `stop`; started with the URLs bound.

    The app's lifespan starts first; an address that cannot be bound raises
    its OSError. Once `stop` is set, see the module docstring.
    """
    async with trio.open_nursery() as nursery:
        lifespan = _Lifespan(app)
        await nursery.start(lifespan.run)
        try:
            host, port = _host_and_port(bind)
            listeners = await trio.open_tcp_listeners(port, host=host)
            server = _Server(app, fast, limits, lifespan.state)
            await _serve(server, listeners, stop, grace, task_status)
        finally:
            lifespan.shut_down()


async def _serve(
    server: _Server,
    listeners: list[trio.SocketListener],
    stop: trio.Event,
    grace: float,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    """Accept and serve connections until `stop`; then stop as the module docstring says."""
    async with trio.open_nursery() as connections:
        async with trio.open_nursery() as accepting:
            accepting.start_soon(
                functools.partial(
                    trio.serve_listeners,
                    server.connection,
                    listeners,
                    handler_nursery=connections,
                )
            )
            task_status.started([_url(listener) for listener in listeners])
            await stop.wait()
            accepting.cancel_scope.cancel()  # closes the listeners
        server.stop()
        with trio.move_on_after(grace):
            await server.all_closed.wait()
        # What is left (SSE streams, slow calls) is cancelled: its clients see the connection end.
        connections.cancel_scope.cancel()
