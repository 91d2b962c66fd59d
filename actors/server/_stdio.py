"""The stdio transport: one MCP connection on this process's stdin and stdout.

The SDK's ``stdio_server`` frames the messages; this module supplies the two
ends it reads and writes, and guards what goes through them.

* **stdin** is read here rather than by the SDK: a line longer than
  ``max_request_bytes`` must be refused without being held in memory, and a
  read blocked on an idle stdin must be cancellable, or a signal could not
  stop the server. Lines the SDK cannot parse or would run as something
  else (a request with an id like ``1.5`` or ``true`` becomes a
  notification), and the oversized ones, are answered with a JSON-RPC error
  carrying the request's id whenever it can be read (`actors.server.mcp._jsonrpc` has
  the rules, and how batches are answered); the server keeps serving.
* **Backpressure.** At most ``max_in_flight`` requests are between being
  read and having their reply taken by the writer; at that bound no further
  line is read. A client that stops reading its replies therefore fills its
  own pipe to the server instead of the server's memory. The price: while
  at the bound, nothing behind the waiting requests is read either, a
  ``notifications/cancelled`` included (the call timeout still ends slow
  calls). A tool may send the client a request of its own (`actors.Ask`) and
  wait for its answer, which the client writes behind requests of its own:
  while the server waits for an answer it therefore keeps reading, so the
  answer always gets through, and a request read beyond the bound meanwhile
  is refused at once ("busy", retry it) rather than held.
* **Pipes without threads.** When stdin and stdout are pipes or sockets and
  stderr is another file — as under every MCP client — trio reads and writes
  them directly (`trio.lowlevel.FdStream`). The SDK's default, and the
  fallback here for a terminal, a file or ``2>&1``, hands every read, write
  and flush to a worker thread; measured with the benchmarks' ``mcp``
  scenario, those hand-offs and the GIL traffic they cause made the server
  spend about three times the CPU per call (``docs/performance.md``, "Figures
  the design rests on"). Trio's writes
  can also be cancelled: a client that stops reading cannot hold off a
  signal, as it can on the threaded fallback (a thread blocked in ``write``
  on a full pipe does not return until the pipe drains or the process dies).
* **fds 0 and 1 are claimed** while serving: fd 1 points at stderr, so that
  stray output of a handler or a child process misses the wire, and fd 0 at
  ``/dev/null``, so that a child reads EOF rather than requests (the SDK does
  the same when it opens them itself).
* **Endings.** At EOF the requests already read still get their replies
  (within a grace); a client that closes its end of stdout stops the server
  the same way, with a warning.
"""

from __future__ import annotations

import abc
import errno
import functools
import json
import logging
import os
import re
import secrets
import stat
import sys
from collections import deque
from contextlib import asynccontextmanager, closing, contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio
import attrs
import pydantic_core
import trio
from mcp import types
from mcp.server.stdio import stdio_server
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from ._stdio_lean import LeanStdio
from .mcp._jsonrpc import Accept, Answer, BatchReply, Ignore, Reply, plan_batch, screen

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
    from types import TracebackType
    from typing import Self

    import pydantic
    from mcp.shared._stream_protocols import ReadStream, WriteStream

    from .mcp._adapter import McpAdapter

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "StdoutWire",
    "leading_request_id",
    "owns_pipes",
    "serve_stdio",
]

logger = logging.getLogger("actors.serve")

_READ_CHUNK: Final = 64 * 1024
_ABANDON_GRACE: Final = 5.0
"""How long the lean path's calls may take to end once cancelled at the end (as the SDK's)."""
_ID_SCAN_BYTES: Final = 4096  # how much of an oversized line is kept to find its id
DEFAULT_MAX_IN_FLIGHT: Final = 32
"""Requests read and not yet answered before the server stops reading stdin."""


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


@final
@attrs.frozen
class _Oversized:
    """A line longer than the limit: its size and its first bytes (to find the request id)."""

    size: int
    head: bytes


@final
class _LineSplitter:
    """Splits a byte stream into lines of at most `limit` bytes (sans-IO).

    A longer line is never held whole: only its first bytes are kept, the rest
    is counted and dropped, and it comes out as `_Oversized`.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._line = bytearray()
        self._oversized: _Oversized | None = None

    def feed(self, data: bytes) -> list[bytes | _Oversized]:
        """Take the next bytes; return the lines they complete."""
        lines: list[bytes | _Oversized] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end])
            lines.append(self._finish())
            start = end + 1
        if start < len(data):  # the usual chunk ends with its newline: nothing left to take
            self._take(data[start:])
        return lines

    def close(self) -> list[bytes | _Oversized]:
        """At end of input: the last line, if it had no newline."""
        if self._oversized is None and not self._line:
            return []
        return [self._finish()]

    def _take(self, piece: bytes) -> None:
        if self._oversized is not None:
            self._oversized = attrs.evolve(self._oversized, size=self._oversized.size + len(piece))
        elif len(self._line) + len(piece) > self._limit:
            size = len(self._line) + len(piece)
            head = bytes(self._line[:_ID_SCAN_BYTES]) + piece[:_ID_SCAN_BYTES]
            self._oversized = _Oversized(size, head[:_ID_SCAN_BYTES])
            self._line.clear()
        else:
            self._line += piece

    def _finish(self) -> bytes | _Oversized:
        if self._oversized is not None:
            line: bytes | _Oversized = self._oversized
            self._oversized = None
            return line
        complete = bytes(self._line)
        self._line.clear()
        return complete


_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")


def leading_request_id(head: str) -> int | str | None:
    """The ``id`` of a JSON-RPC message from its first characters, if it comes before the cut.

    Reads the top-level members in order and stops at ``id``, at the first
    member that is cut off, or at anything that is not JSON; the SDK writes
    ``jsonrpc`` and ``id`` before ``params``, so its requests are answered
    with their own id even when their arguments are far too long.
    """
    decoder = json.JSONDecoder()

    def skip(index: int) -> int:
        match = _WHITESPACE.match(head, index)
        return index if match is None else match.end()

    index = skip(0)
    if not head.startswith("{", index):
        return None
    index += 1
    while True:
        try:
            key, index = decoder.raw_decode(head, skip(index))
            index = skip(index)
            if not head.startswith(":", index):
                return None
            value, index = decoder.raw_decode(head, skip(index + 1))
        except (ValueError, RecursionError):  # RecursionError: arrays or objects nested too deep
            return None
        if key == "id":
            valid = isinstance(value, str) or (
                isinstance(value, int) and not isinstance(value, bool)
            )
            return value if valid else None
        index = skip(index)
        if not head.startswith(",", index):
            return None
        index += 1


@final
class _StdinLines:
    """stdin as text lines for the SDK's ``stdio_server``, each at most `limit` bytes.

    `read` returns the next chunk (``b""`` at EOF) and must be cancellable, so
    that a server waiting on an idle stdin still stops on a signal. An
    oversized line is replaced by a notification to `marker`, a method name no
    client can guess, which `_GuardedReadStream` answers with an error; blank
    lines are skipped.
    """

    def __init__(self, read: Callable[[], Awaitable[bytes]], limit: int) -> None:
        self._read_chunk = read
        self._limit = limit
        self._splitter = _LineSplitter(limit)
        self._ready: deque[bytes | _Oversized] = deque()
        self._eof = False
        self.marker: Final = f"mcp-actors/oversized-{secrets.token_hex(8)}"
        self.lean: LeanStdio | None = None
        """Offered every complete line first: the lines it takes never reach the SDK."""
        self.handed: Final[deque[str]] = deque()
        """The lines handed out whose message has not been received yet, oldest first.

        ``stdio_server`` turns each line into exactly one item, in order, so
        `_GuardedReadStream` takes the line of each item from here: the SDK's
        item alone cannot tell a bad id from no id.
        """

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        while True:
            while not self._ready:
                if self._eof:
                    raise StopAsyncIteration
                await self._read()
            text = self._text(self._ready.popleft())
            if text is not None:
                self.handed.append(text)
                return text

    async def _read(self) -> None:
        data = await self._read_chunk()
        if data:
            self._ready.extend(self._splitter.feed(data))
        else:
            self._eof = True
            self._ready.extend(self._splitter.close())

    def _text(self, line: bytes | _Oversized) -> str | None:
        if isinstance(line, _Oversized):
            head = line.head.decode("utf-8", errors="replace")
            params = {"id": leading_request_id(head), "size": line.size, "limit": self._limit}
            return json.dumps({"jsonrpc": "2.0", "method": self.marker, "params": params})
        text = line.decode("utf-8", errors="replace")  # as the SDK's own stdio transport does
        if not text.strip() or (self.lean is not None and self.lean.route(text)):
            return None
        return text


def _oversized_error(params: Mapping[str, Any]) -> Reply:
    message = (
        f"Invalid Request: the message is {params['size']} bytes; this server accepts at most "
        f"{params['limit']} bytes per message (--max-request-bytes)"
    )
    return Reply.of(params["id"], types.INVALID_REQUEST, message)


SERVER_BUSY: Final = -32000
"""The JSON-RPC error of a request refused because too many are in flight (retry it)."""


def _busy(request_id: types.RequestId, limit: int) -> Reply:
    message = (
        f"the server is busy: {limit} requests are in flight while it waits for this client's "
        "answer to one of its own; retry this request (--max-in-flight)"
    )
    return Reply.of(request_id, SERVER_BUSY, message)


def _as_message(reply: pydantic.BaseModel) -> types.JSONRPCMessage:
    """One of our replies, as the SDK's writer takes it.

    The writer only serializes what it is given (``model_dump_json``); our
    replies are pydantic models of their own because they may carry what the
    SDK's cannot: an id like ``1.5``, or a batch's array.
    """
    return cast("types.JSONRPCMessage", reply)


class _ClosedOnExit(abc.ABC):
    """``async with`` for the SDK's stream wrappers below: leaving the block closes the stream."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close the wrapped stream."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@final
class _OpenBatch:
    """The replies to one batch, held until every request in it has settled."""

    def __init__(self, answers: Sequence[Reply], requests: int) -> None:
        self.replies: list[pydantic.BaseModel] = list(answers)
        self.requests: Final = requests
        """How many of its requests were handed to the SDK (each holds a slot until the end)."""
        self.pending = requests
        """How many of those have not settled yet."""


_Owner = _OpenBatch | None
"""Who waits for a request's reply: a batch, or (``None``) the client directly."""


@final
class _Exchange(_ClosedOnExit):
    """The SDK's write stream, and the requests in flight between reading and replying.

    A request is in flight from the moment it is handed to the SDK until its
    reply has been taken by the writer, or the SDK has settled it without one
    (a cancelled request). The read side reads no new line while `limit`
    requests are in flight: replies that wait for a client who does not read
    stay bounded in number, and the client's writes block instead.

    The SDK runs every request in a task of its own and answers each with
    the id it came with; requests may share an id, so each id keeps the queue
    of the owners waiting for it, oldest first.
    """

    def __init__(self, inner: WriteStream[SessionMessage], limit: int) -> None:
        self._inner = inner
        self.limit: Final = limit
        self._owners: dict[types.RequestId, deque[_Owner]] = {}
        self._in_flight = 0
        self._settled = trio.Event()
        self._asked: set[types.RequestId] = set()  # the server's requests the client owes
        self._initialize_id: types.RequestId | None = None
        self.version: str | None = None
        """The protocol version the ``initialize`` handshake negotiated, once it has."""

    def __len__(self) -> int:
        return self._in_flight

    @property
    def full(self) -> bool:
        """Whether `limit` requests are in flight: no other may be handed to the SDK now."""
        return self._in_flight >= self.limit

    def track(self, message: types.JSONRPCMessage, owner: _Owner) -> SessionMessage:
        """`message`, about to be handed to the SDK; a request now counts as in flight."""
        if not isinstance(message, types.JSONRPCRequest):
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                self._asked.discard(message.id)  # the client answered one of ours
            return SessionMessage(message)
        request_id = message.id
        self._owners.setdefault(request_id, deque()).append(owner)
        self._in_flight += 1
        if message.method == "initialize" and owner is None:
            self._initialize_id = request_id

        async def unanswered() -> None:
            if self._forget(request_id, owner):
                await self._settle(owner)

        # The SDK runs this hook when it settles the request without a reply (cancelled).
        return SessionMessage(message, ServerMessageMetadata(on_request_unanswered=unanswered))

    def hold(self) -> None:
        """Count a request served beside the SDK (the lean path's) as in flight."""
        self._in_flight += 1

    def release(self) -> None:
        """One request `hold` counted is no longer in flight."""
        self._release(1)

    async def room(self) -> None:
        """Return once fewer than `limit` requests are in flight, or the client owes an answer.

        While a request of the server's waits for the client's answer, reading
        never stops: the answer may come behind any number of the client's
        own requests (see `_GuardedReadStream.receive`).
        """
        while self.full and not self._asked:
            await self._settled.wait()

    async def wait_all(self) -> None:
        """Return once no request is in flight."""
        while self._in_flight:
            await self._settled.wait()

    async def send(self, item: SessionMessage, /) -> None:
        """Pass a message of the SDK's on to the writer, or hold a reply for its batch."""
        message = item.message
        if isinstance(message, types.JSONRPCRequest):  # the server asks the client something
            self._asked.add(message.id)
            self._wake()
        if (
            not isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            or message.id is None
        ):
            await self._inner.send(item)
            return
        owners = self._owners.get(message.id)
        if not owners:  # not a request we track (nothing else replies with an id)
            await self._inner.send(item)
            return
        owner = owners.popleft()
        if not owners:
            del self._owners[message.id]
        if owner is not None:
            owner.replies.append(message)
        else:
            if self._initialize_id is not None:  # only until the initialize is answered
                self._note_version(message)
            await self._pass_on(item)
        await self._settle(owner)

    async def reply(self, reply: pydantic.BaseModel) -> None:
        """Send one of our own replies; an error here means the connection is going away."""
        try:
            await self._inner.send(SessionMessage(_as_message(reply)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("stdio: the connection closed before a reply could be sent")

    async def aclose(self) -> None:
        """Close the SDK's stream."""
        await self._inner.aclose()

    async def _pass_on(self, item: SessionMessage) -> None:
        try:
            await self._inner.send(item)
        finally:
            # Taken by the writer, or never will be: either way it no longer waits here.
            self._release(1)

    async def _settle(self, owner: _Owner) -> None:
        """One request of `owner` settled; a batch whose last one it was is sent."""
        if owner is None:
            return  # `_pass_on` or `_forget` released its slot
        owner.pending -= 1
        if owner.pending:
            return
        try:
            if owner.replies:
                await self.reply(BatchReply.of(owner.replies))
        finally:
            self._release(owner.requests)

    def _forget(self, request_id: types.RequestId, owner: _Owner) -> bool:
        """Stop waiting for a reply to a request of `owner`; whether one was awaited."""
        owners = self._owners.get(request_id)
        if owners is None or owner not in owners:
            return False
        owners.remove(owner)
        if not owners:
            del self._owners[request_id]
        if owner is None:
            self._release(1)
        return True

    def _release(self, count: int) -> None:
        self._in_flight -= count
        self._wake()

    def _wake(self) -> None:
        """Wake whoever waits in `room` or `wait_all`, to look again."""
        self._settled.set()
        self._settled = trio.Event()

    def _note_version(self, message: types.JSONRPCResponse | types.JSONRPCError) -> None:
        if message.id != self._initialize_id:
            return
        self._initialize_id = None  # a later request may reuse the id
        if isinstance(message, types.JSONRPCResponse):
            version = message.result.get("protocolVersion")
            self.version = version if isinstance(version, str) else None


@final
class _GuardedReadStream(_ClosedOnExit):
    """The SDK's stdio read stream, with what the SDK cannot take answered here.

    ``stdio_server`` passes a line it cannot parse on as an exception, which
    the SDK's dispatcher only logs, and turns a request with an unusable id
    into a notification; a client waiting for its reply would wait forever.
    This stream answers each such line (`actors.server.mcp._jsonrpc` has the rules),
    each oversized one, and splits batches; every other message goes on.

    No new line is read while the `_Exchange` is full (backpressure), unless the
    client owes the server an answer: then a request beyond the bound is refused.

    At EOF it holds the end back until every request read has its response
    on the way (at most `eof_grace` seconds): the SDK cancels the calls in
    flight when its read stream ends, and a client that closes stdin after
    its last request still reads the replies.
    """

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        lines: _StdinLines,
        exchange: _Exchange,
        eof_grace: float,
    ) -> None:
        self._inner = inner
        self._lines = lines
        self._exchange = exchange
        self._eof_grace = eof_grace
        self._batch: deque[tuple[types.JSONRPCMessage, _Owner]] = deque()
        """A batch's messages, not yet handed to the SDK."""

    @property
    def last_context(self) -> object:
        """The sender's context of the last item, which the SDK's dispatcher restores."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        """The next message the SDK should handle."""
        while True:
            await self._exchange.room()
            if self._batch and not self._exchange.full:
                queued, batch = self._batch.popleft()
                return self._exchange.track(queued, batch)
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                await self._drain()
                raise
            line = self._lines.handed.popleft()
            message = await self._screened(item, line)
            if isinstance(message, types.JSONRPCRequest) and self._exchange.full:
                # Read while there was room, which the lean path took meanwhile: this one
                # line waits for room in turn.
                await self._exchange.room()
            if isinstance(message, types.JSONRPCRequest) and self._exchange.full:
                # Read only because the client owes the server an answer (see `room`).
                await self._refuse(_busy(message.id, self._exchange.limit))
            elif message is not None:
                return self._exchange.track(message, None)

    async def _screened(
        self, item: SessionMessage | Exception, line: str
    ) -> types.JSONRPCMessage | None:
        """`item`'s message if the SDK may have it; otherwise answer (or drop) it here."""
        if isinstance(item, SessionMessage):
            message = item.message
            if not isinstance(message, types.JSONRPCNotification):
                return message
            if message.method == self._lines.marker:
                await self._refuse(_oversized_error(message.params or {}))
                return None
            if '"id"' not in line and "\\u" not in line:
                return message  # no id, not even an escaped one: no need to parse it again
        try:
            value = pydantic_core.from_json(line)
        except ValueError as error:
            await self._refuse(
                Reply.of(None, types.PARSE_ERROR, f"Parse error: Invalid JSON: {error}")
            )
            return None
        if isinstance(value, list):
            await self._split(value)
            return None
        match screen(value):
            case Accept(message):
                return message
            case Answer(reply):
                await self._refuse(reply)
            case Ignore(problem):
                logger.warning("stdio: dropped a notification: %s", problem)
        return None

    async def _split(self, elements: list[Any]) -> None:
        """Queue a batch's messages for the SDK, or answer it now (`actors.server.mcp._jsonrpc`)."""
        plan = plan_batch(elements, self._exchange.version, self._exchange.limit)
        if plan.whole is not None:
            await self._refuse(plan.whole)
            return
        for problem in plan.ignored:
            logger.warning("stdio: dropped a notification in a batch: %s", problem)
        requests = sum(isinstance(m, types.JSONRPCRequest) for m in plan.dispatch)
        batch = _OpenBatch(plan.answers, requests) if requests else None
        if batch is None and plan.answers:
            # Nothing to wait for: the errors go back at once.
            logger.warning("stdio: refused a batch: %s", plan.answers[0].error.message)
            await self._exchange.reply(BatchReply.of(plan.answers))
        self._batch.extend((message, batch) for message in plan.dispatch)

    async def _refuse(self, reply: Reply) -> None:
        logger.warning("stdio: refused a message: %s", reply.error.message)
        await self._exchange.reply(reply)

    async def _drain(self) -> None:
        with trio.move_on_after(self._eof_grace) as waited:
            await self._exchange.wait_all()
        if waited.cancelled_caught:
            logger.warning("stdin closed; %d call(s) got no reply in time", len(self._exchange))

    async def aclose(self) -> None:
        """Close the SDK's stream."""
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


# ---- the two ends ----------------------------------------------------------------

_STDIN: Final = 0
_STDOUT: Final = 1
_STDERR: Final = 2


def _identity(fd: int) -> tuple[int, int, int] | None:
    """The file behind `fd` (device, inode, type), or None if `fd` is not open."""
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode)


def owns_pipes() -> bool:
    """Whether stdin and stdout are pipes or sockets that trio may read and write directly.

    Trio needs them in non-blocking mode, which applies to everyone sharing
    the open file. That is safe for the pipes an MCP client makes for its
    server, but not for a terminal or a file, nor when stderr shares the pipe
    (``2>&1``): the log's blocking writes would start failing.
    """
    stdin, stdout, stderr = (_identity(fd) for fd in (_STDIN, _STDOUT, _STDERR))
    if stdin is None or stdout is None or stderr is None:
        return False
    pipes = all(kind in (stat.S_IFIFO, stat.S_IFSOCK) for *_, kind in (stdin, stdout))
    return pipes and stderr not in (stdin, stdout)


@final
class StdoutWire:
    """The wire end of stdout, on trio: each line written whole, in the order given.

    Two writers share it: the SDK's (`write`, which returns once its line is in
    the pipe, so that the SDK's own backpressure holds) and the lean path's
    (`put`, which returns at once and runs `written` once the line is in the
    pipe). A line is written at once, in the task that gives it, when the pipe
    takes it whole and nothing is queued before it — a reply then costs no hop
    to another task. Otherwise it is queued, and `run`, the one task that waits
    for the pipe, writes everything queued with one call.
    """

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream
        self._lines: list[bytes] = []
        self._written: list[Callable[[], None]] = []
        self._ready = trio.Event()
        self._flushed = trio.Event()
        self._writing: trio.Event | None = None
        """Set once the write under way is over; None: no write is."""
        self._broken = False

    def put(self, line: bytes, written: Callable[[], None]) -> None:
        """Send `line` (ending in a newline); `written` runs once it is in the pipe."""
        rest = self._write_now(line)
        if rest:
            self._queue(rest)
            self._written.append(written)
        else:
            written()

    async def write(self, text: str) -> None:
        """Send `text` whole, waiting while the pipe is full (the SDK's writer)."""
        rest = self._write_now(text.encode("utf-8"))
        if not rest:
            return
        self._queue(rest)
        flushed = self._flushed
        await flushed.wait()
        if self._broken:
            # What a blocking write raises, so that both transports end the same way.
            raise BrokenPipeError(errno.EPIPE, "the client closed its end of stdout")

    async def flush(self) -> None:
        """Nothing to do: `write` returns once every byte is in the pipe."""

    async def run(self) -> None:
        """Write what is queued, until cancelled or the client closes its end."""
        while True:
            await self._ready.wait()
            await self._write_queued()

    async def settle(self) -> None:
        """Return once what is queued is in the pipe (`run` writes it: the last replies)."""
        while self._lines or self._writing is not None:
            await (self._flushed if self._writing is None else self._writing).wait()

    def _write_now(self, line: bytes) -> bytes:
        """Write what the pipe takes of `line` now, if nothing waits before it; the rest."""
        if self._lines or self._writing is not None:
            return line
        try:
            sent = os.write(self._stream.fileno(), line)
        except OSError:  # full (or broken: the writer task finds out, and ends the transport)
            return line
        return line[sent:]

    def _queue(self, line: bytes) -> None:
        self._lines.append(line)
        self._ready.set()

    async def _write_queued(self) -> None:
        self._ready = trio.Event()
        lines, self._lines = self._lines, []
        written, self._written = self._written, []
        flushed, self._flushed = self._flushed, trio.Event()
        self._writing = flushed
        try:
            await self._stream.send_all(b"".join(lines))
        except trio.BrokenResourceError as exc:
            self._broken = True
            raise BrokenPipeError(errno.EPIPE, "the client closed its end of stdout") from exc
        finally:
            self._writing = None
            flushed.set()
        for done in written:
            done()


@contextmanager
def _diverted(fd: int, target: int) -> Iterator[int]:
    """Point `fd` at `target` while the block runs; yield a private duplicate of what it was."""
    private = os.dup(fd)
    try:
        os.dup2(target, fd)
        try:
            yield private
        finally:
            os.dup2(private, fd)
    finally:
        os.close(private)


@contextmanager
def _wire_in() -> Iterator[int]:
    """The wire's read end as a private fd; fd 0 reads /dev/null meanwhile.

    A handler's child process that inherits fd 0 then reads EOF, instead of
    the client's requests (or, on the trio transport, a non-blocking pipe).
    The SDK's own claim of stdin does the same.
    """
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        with _diverted(_STDIN, devnull) as wire:
            yield wire
    finally:
        os.close(devnull)


def _flush_stray_output() -> None:
    """Write out what handlers printed, while fd 1 still points away from the wire."""
    with suppress(OSError, ValueError):  # a closed or broken sys.stdout has nothing to give
        sys.stdout.flush()


@asynccontextmanager
async def _trio_ends(limit: int) -> AsyncIterator[tuple[_StdinLines, StdoutWire]]:
    """stdin and stdout read and written by trio; fd 0 and fd 1 diverted meanwhile."""
    # Each FdStream wraps a duplicate of its own and, closing it, restores the
    # blocking mode it found; the `with` closes them in reverse order, which
    # keeps that right when stdin and stdout are one socket. Closed
    # synchronously: this runs inside the transport's cancelled scope on the way out.
    with (
        _wire_in() as wire_in,
        _diverted(_STDOUT, _STDERR) as wire_out,  # stray output misses the wire
        closing(trio.lowlevel.FdStream(os.dup(wire_in))) as stdin,
        closing(trio.lowlevel.FdStream(os.dup(wire_out))) as stdout,
    ):
        read = functools.partial(stdin.receive_some, _READ_CHUNK)
        yield _StdinLines(read, limit), StdoutWire(stdout)


@asynccontextmanager
async def _threaded_ends(limit: int) -> AsyncIterator[tuple[_StdinLines, None]]:
    """stdin read in worker threads; stdout left to the SDK, which also uses threads.

    The SDK claims stdout itself (fd 1 points at stderr while it serves).
    """
    with _wire_in() as wire:

        async def read() -> bytes:
            # Abandoned on cancellation: a thread blocked on an idle terminal cannot be
            # interrupted.
            return await trio.to_thread.run_sync(os.read, wire, _READ_CHUNK, abandon_on_cancel=True)

        yield _StdinLines(read, limit), None


async def serve_stdio(
    adapter: McpAdapter,
    max_request_bytes: int,
    stop: trio.Event,
    *,
    eof_grace: float = 10.0,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
) -> None:
    """Serve one connection on stdin/stdout until EOF, `stop`, or the client closing stdout.

    At EOF the calls in flight still get their replies, for up to `eof_grace`
    seconds. With `max_in_flight` requests read and not yet answered, no more
    is read until one is (see `_Exchange`).
    """
    if max_in_flight < 1:
        msg = f"max_in_flight must be at least 1, got {max_in_flight}"
        raise ValueError(msg)
    direct = owns_pipes()
    ends = _trio_ends if direct else _threaded_ends
    logger.info("serving MCP on stdio (%s)", "pipes" if direct else "worker threads")
    broken = False
    async with trio.open_nursery() as nursery, ends(max_request_bytes) as (lines, wire):
        nursery.start_soon(_cancel_when, stop, nursery.cancel_scope)
        try:
            async with trio.open_nursery() as wiring:  # the writer, and the lean path's calls
                if wire is not None:
                    wiring.start_soon(wire.run)
                await _serve_connection(adapter, lines, wire, wiring, eof_grace, max_in_flight)
                if wire is not None:
                    with trio.move_on_after(eof_grace):  # a client that reads nothing more
                        await wire.settle()
                # The drain is over: what is still running gave up on its reply.
                wiring.cancel_scope.cancel()
        except* BrokenPipeError:
            # Nobody reads the replies any more: stop taking calls, as at EOF.
            broken = True
            logger.warning("stdio: the client closed stdout; stopped serving")
        nursery.cancel_scope.cancel()
    if not broken:
        logger.info("stdio transport stopped" if stop.is_set() else "stdin closed")


async def _serve_connection(
    adapter: McpAdapter,
    lines: _StdinLines,
    wire: StdoutWire | None,
    calls: trio.Nursery,
    eof_grace: float,
    max_in_flight: int,
) -> None:
    """Run the SDK's server on the connection, with the lean path in front where it can be.

    The lean path needs the pipe written here (`wire`) and one caller for every
    request (`McpAdapter.sole_caller`); its calls run in `calls`.
    """
    server = adapter.server
    # stdio_server declares AsyncFiles; it only iterates stdin and calls write/flush on stdout.
    async with stdio_server(
        stdin=cast("anyio.AsyncFile[str]", lines),
        stdout=cast("anyio.AsyncFile[str]", wire),
    ) as (read, write):
        try:
            exchange = _Exchange(write, max_in_flight)
            caller = adapter.sole_caller
            if wire is not None and caller is not None:
                lines.lean = LeanStdio(adapter, caller, exchange, wire, calls)
            guarded = _GuardedReadStream(read, lines, exchange, eof_grace)
            await server.run(guarded, exchange, server.create_initialization_options())
            if lines.lean is not None:
                lines.lean.abandon()  # the wait for replies is over, as it is for the SDK's
                with trio.move_on_after(_ABANDON_GRACE):
                    await lines.lean.finished()
        finally:
            _flush_stray_output()
