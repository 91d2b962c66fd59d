"""The stdio transport: one MCP connection on this process's stdin and stdout.

The SDK's ``stdio_server`` frames the messages; this module supplies the two
ends it reads and writes, and guards what goes through them.

* **stdin** is read here rather than by the SDK: a line longer than
  ``max_request_bytes`` must be refused without being held in memory, and a
  read blocked on an idle stdin must be cancellable, or a signal could not
  stop the server. Lines the SDK cannot parse, and the oversized ones, are
  answered with a JSON-RPC error (the SDK would drop them silently) and the
  server keeps serving.
* **Pipes without threads.** When stdin and stdout are pipes or sockets and
  stderr is another file — as under every MCP client — trio reads and writes
  them directly (`trio.lowlevel.FdStream`). The SDK's default, and the
  fallback here for a terminal, a file or ``2>&1``, hands every read, write
  and flush to a worker thread; measured with the benchmarks' ``mcp``
  scenario, those hand-offs and the GIL traffic they cause made the server
  spend about 700 µs of CPU per call instead of about 220 µs. Trio's writes
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
import trio
from mcp import types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
    from types import TracebackType
    from typing import Self

    from mcp.shared._stream_protocols import ReadStream, WriteStream

    from ._mcp import McpAdapter

__all__ = ["leading_request_id", "owns_pipes", "serve_stdio"]

logger = logging.getLogger("actors.serve")

_READ_CHUNK: Final = 64 * 1024
_CANCELLED: Final = "notifications/cancelled"
_ID_SCAN_BYTES: Final = 4096  # how much of an oversized line is kept to find its id


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
        except ValueError:
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
        return text if text.strip() else None


def _parse_error(error: Exception) -> types.ErrorData:
    """The JSON-RPC error for a line the SDK could not turn into a message."""
    if isinstance(error, ValidationError):
        for detail in error.errors(include_url=False, include_input=False):
            if detail["type"] == "json_invalid":
                return types.ErrorData(
                    code=types.PARSE_ERROR, message=f"Parse error: {detail['msg']}"
                )
    message = (
        "Invalid Request: the line is JSON but not a JSON-RPC 2.0 request, notification or response"
    )
    return types.ErrorData(code=types.INVALID_REQUEST, message=message)


def _oversized_error(params: Mapping[str, Any]) -> tuple[types.RequestId | None, types.ErrorData]:
    message = (
        f"Invalid Request: the message is {params['size']} bytes; this server accepts at most "
        f"{params['limit']} bytes per message (--max-request-bytes)"
    )
    return params["id"], types.ErrorData(code=types.INVALID_REQUEST, message=message)


@final
class _Unanswered:
    """The ids of the requests read so far that have no response on the way yet."""

    def __init__(self) -> None:
        self._ids: set[types.RequestId] = set()
        self._none_left = trio.Event()
        self._none_left.set()

    def read(self, message: types.JSONRPCMessage) -> None:
        """Note a message from the client: a request to answer, or a cancellation."""
        if isinstance(message, types.JSONRPCRequest):
            if not self._ids:
                self._none_left = trio.Event()
            self._ids.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == _CANCELLED:
            # A cancelled request gets no response (MCP); stop waiting for one.
            self._settle((message.params or {}).get("requestId"))

    def written(self, message: types.JSONRPCMessage) -> None:
        """Note a message handed to the writer: a response settles its request."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._settle(message.id)

    def _settle(self, request_id: object) -> None:
        self._ids.discard(request_id)
        if not self._ids:
            self._none_left.set()

    def __len__(self) -> int:
        return len(self._ids)

    async def wait_all(self) -> None:
        """Return once every request read has its response on the way."""
        await self._none_left.wait()


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
class _AnsweringWriteStream(_ClosedOnExit):
    """The SDK's write stream, telling `_Unanswered` about every response it carries."""

    def __init__(self, inner: WriteStream[SessionMessage], unanswered: _Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    async def send(self, item: SessionMessage, /) -> None:
        """Pass `item` to the writer; once it has taken it, the request is answered."""
        await self._inner.send(item)
        self._unanswered.written(item.message)

    async def aclose(self) -> None:
        """Close the SDK's stream."""
        await self._inner.aclose()


@final
class _GuardedReadStream(_ClosedOnExit):
    """The SDK's stdio read stream, with bad lines answered here instead of dropped.

    ``stdio_server`` passes a line it cannot parse on as an exception, which
    the SDK's dispatcher only logs; a client waiting for its reply would wait
    forever. This stream answers each such line, and each oversized one, with
    a JSON-RPC error on the write stream, and passes every other item on.

    At EOF it holds the end back until every request read has its response
    on the way (at most `eof_grace` seconds): the SDK cancels the calls in
    flight when its read stream ends, and a client that closes stdin after
    its last request still reads the replies.
    """

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        replies: WriteStream[SessionMessage],
        marker: str,
        unanswered: _Unanswered,
        eof_grace: float,
    ) -> None:
        self._inner = inner
        self._replies = replies
        self._marker = marker
        self._unanswered = unanswered
        self._eof_grace = eof_grace

    @property
    def last_context(self) -> object:
        """The sender's context of the last item, which the SDK's dispatcher restores."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """The next message the SDK should handle."""
        while True:
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                with trio.move_on_after(self._eof_grace) as waited:
                    await self._unanswered.wait_all()
                if waited.cancelled_caught:
                    logger.warning(
                        "stdin closed; %d call(s) got no reply in time", len(self._unanswered)
                    )
                raise
            if isinstance(item, Exception):
                await self._answer(None, _parse_error(item))
            elif (
                isinstance(item.message, types.JSONRPCNotification)
                and item.message.method == self._marker
            ):
                await self._answer(*_oversized_error(item.message.params or {}))
            else:
                self._unanswered.read(item.message)
                return item

    async def _answer(self, request_id: types.RequestId | None, error: types.ErrorData) -> None:
        logger.warning("stdio: refused a message: %s", error.message)
        reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        try:
            await self._replies.send(SessionMessage(reply))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("stdio: the connection closed before the error could be sent")

    async def aclose(self) -> None:
        """Close the SDK's stream."""
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
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
class _PipeWriter:
    """The wire end of stdout as the SDK's writer uses it (`write` and `flush`), on trio."""

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream

    async def write(self, text: str) -> None:
        """Send `text` whole, waiting while the pipe is full."""
        try:
            await self._stream.send_all(text.encode("utf-8"))
        except trio.BrokenResourceError as exc:
            # What a blocking write raises, so that both transports end the same way.
            raise BrokenPipeError(errno.EPIPE, "the client closed its end of stdout") from exc

    async def flush(self) -> None:
        """Nothing to do: `write` hands every byte to the pipe before it returns."""


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
async def _trio_ends(limit: int) -> AsyncIterator[tuple[_StdinLines, _PipeWriter]]:
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
        yield _StdinLines(read, limit), _PipeWriter(stdout)


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
    adapter: McpAdapter, max_request_bytes: int, stop: trio.Event, *, eof_grace: float = 10.0
) -> None:
    """Serve one connection on stdin/stdout until EOF, `stop`, or the client closing stdout.

    At EOF the calls in flight still get their replies, for up to `eof_grace` seconds.
    """
    direct = owns_pipes()
    ends = _trio_ends if direct else _threaded_ends
    server = adapter.server
    logger.info("serving MCP on stdio (%s)", "pipes" if direct else "worker threads")
    broken = False
    async with trio.open_nursery() as nursery, ends(max_request_bytes) as (lines, wire):
        nursery.start_soon(_cancel_when, stop, nursery.cancel_scope)
        try:
            # stdio_server declares AsyncFiles; it only iterates stdin and calls write/flush
            # on stdout.
            async with stdio_server(
                stdin=cast("anyio.AsyncFile[str]", lines),
                stdout=cast("anyio.AsyncFile[str]", wire),
            ) as (read, write):
                try:
                    unanswered = _Unanswered()
                    guarded = _GuardedReadStream(read, write, lines.marker, unanswered, eof_grace)
                    answering = _AnsweringWriteStream(write, unanswered)
                    await server.run(guarded, answering, server.create_initialization_options())
                finally:
                    _flush_stray_output()
        except* BrokenPipeError:
            # Nobody reads the replies any more: stop taking calls, as at EOF.
            broken = True
            logger.warning("stdio: the client closed stdout; stopped serving")
        nursery.cancel_scope.cancel()
    if not broken:
        logger.info("stdio transport stopped" if stop.is_set() else "stdin closed")
