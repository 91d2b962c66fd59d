"""``--log-format``: one line of text per event (the default), or one JSON object per line.

In JSON, every record is an object with ``time`` (UTC, ISO 8601), ``level``,
``logger`` and ``message``; a record that describes an event also carries
its fields under ``event`` (a tools/call: the tool, the context ids, the
caller and tenant, the outcome, the milliseconds), so a log pipeline reads
them without parsing the message. A traceback goes under ``exception``.

Strings a client chose (tool names, session ids) are JSON strings: quotes,
newlines and control characters are escaped, and everything outside ASCII
is written as ``\\u`` escapes, so a client cannot forge a record, break a
line, or slip in characters a terminal or a log viewer would act on. A
string longer than `MAX_FIELD_CHARACTERS` is cut, with ``…`` at its end.

Under JSON every line on stderr is such a record: the lines ``serve`` writes
whatever the log level (where it listens, why it cannot serve: `announce`),
Python's warnings, and a traceback that would end the process
(`capture_stray_output`).

While ``serve`` runs, lines are written together (`LineBuffer`): at most
`WRITE_DELAY` seconds after they were logged, at once for a warning or worse,
and when serve stops or the process exits; ``kill -9`` loses at most the
lines of that last delay.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import math
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO, final

import trio

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import TracebackType

__all__ = [
    "EVENT_FIELD",
    "LISTENING",
    "LOG_FORMATS",
    "MAX_FIELD_CHARACTERS",
    "TEXT_FORMAT",
    "WRITE_DELAY",
    "WRITE_SIZE",
    "JsonFormatter",
    "LibraryLines",
    "LineBuffer",
    "LogFormat",
    "TextFormatter",
    "announce",
    "capture_stray_output",
    "log_handler",
    "write_log_lines",
]

LogFormat = Literal["text", "json"]
LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
EVENT_FIELD: Final = "event"
"""The `logging` ``extra`` key whose mapping becomes the record's ``event`` object."""
MAX_FIELD_CHARACTERS: Final = 256
"""Longest string kept whole in an event field."""
_ANNOUNCING_LOGGER: Final = "actors.serve"
LISTENING: Final = re.compile(r'listening on (http://[^\s"]+)')
"""Finds the URL in the line ``serve`` writes once it listens, as text
(``mcp-actors: listening on URL``) or as a JSON record (whose message ends
the URL with a quote)."""


def _bounded(event: dict[str, object]) -> dict[str, object]:
    """`event` with each string longer than `MAX_FIELD_CHARACTERS` cut."""
    cut = MAX_FIELD_CHARACTERS
    return {
        key: value[:cut] + "…" if isinstance(value, str) and len(value) > cut else value
        for key, value in event.items()
    }


# One encoder for every record: `json.dumps` with options builds one per call.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=True, default=str)


@final
class _EachSecond:
    """A time's text to the second, made once a second: a busy server logs many lines in
    each, which share all of their time but the milliseconds (``strftime`` and its
    ``localtime`` are half of formatting a text line)."""

    def __init__(self, make: Callable[[float], str]) -> None:
        self._make = make
        self._last: tuple[int, str] = (-1, "")  # one tuple: a thread reads both or neither

    def __call__(self, created: float) -> str:
        second = int(created)
        made, text = self._last
        if made != second:
            text = self._make(created)
            self._last = (second, text)
        return text


@final
class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, as `logging.Formatter` writes it, with fewer steps (`_EachSecond`)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._seconds = _EachSecond(
            lambda created: time.strftime(self.default_time_format, self.converter(created))
        )

    def format(self, record: logging.LogRecord) -> str:
        """The record's line, as `logging.Formatter` with `TEXT_FORMAT` makes it."""
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)  # the traceback's lines, as logging writes them
        # Without the base's layers (its style object, asking whether the format has a time).
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        return f"{record.asctime} {record.levelname} {record.name}: {record.message}"

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """The record's local time, ``YYYY-MM-DD HH:MM:SS,mmm`` (`datefmt` as the base's)."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return f"{self._seconds(record.created)},{int(record.msecs):03d}"  # default_msec_format


def _utc_second(created: float) -> str:
    return datetime.datetime.fromtimestamp(int(created), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")


@final
class JsonFormatter(logging.Formatter):
    """Formats each record as one line of JSON (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._seconds = _EachSecond(_utc_second)

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        document: dict[str, Any] = {
            "time": f"{self._seconds(record.created)}.{int(record.msecs):03d}+00:00",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, EVENT_FIELD, None)
        if isinstance(event, dict):
            document[EVENT_FIELD] = _bounded(event)
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return _ENCODER.encode(document)


def announce(message: str, *, level: int = logging.INFO, prefix: str = "mcp-actors") -> None:
    """Write `message` on stderr whatever the log level: tests and scripts wait for it.

    As the line ``PREFIX: MESSAGE``; or, where the process logs JSON (a
    `JsonFormatter` on a root handler, as `log_handler` makes for ``json``),
    as a JSON record through those handlers, so that stderr stays all JSON.
    """
    root = logging.getLogger().handlers
    handlers = [handler for handler in root if isinstance(handler.formatter, JsonFormatter)]
    if not handlers:
        for handler in root:  # what was logged before it comes before it
            handler.flush()
        print(f"{prefix}: {message}", file=sys.stderr, flush=True)
        return
    record = logging.LogRecord(_ANNOUNCING_LOGGER, level, __file__, 0, message, None, None)
    for handler in handlers:
        handler.handle(record)
        handler.flush()  # a script waits for it: now, not after a delay


def capture_stray_output() -> None:
    """Send what Python itself writes on stderr through the log handlers: warnings, and
    the traceback of an exception that ends the process or that nothing could raise to.

    For ``json``, where a line of plain text is one a log shipper cannot parse.
    """
    logging.captureWarnings(True)
    stray = logging.getLogger(_ANNOUNCING_LOGGER)

    def uncaught(
        kind: type[BaseException], error: BaseException, traceback: TracebackType | None
    ) -> None:
        stray.critical("uncaught %s: %s", kind.__name__, error, exc_info=(kind, error, traceback))

    def unraisable(hook: sys.UnraisableHookArgs) -> None:
        error = hook.exc_value
        described = hook.exc_type.__name__ if error is None else f"{type(error).__name__}: {error}"
        where = hook.err_msg or "Exception ignored in"
        exc_info = None if error is None else (hook.exc_type, error, hook.exc_traceback)
        stray.error("%s %r: %s", where, hook.object, described, exc_info=exc_info)

    sys.excepthook = uncaught
    sys.unraisablehook = unraisable


WRITE_DELAY: Final = 0.05
"""Seconds a line may wait in a `LineBuffer` before it is written, at most.

Far below what a person reading the log or a log shipper notices, and long
enough to gather the lines of a busy second's many calls into few writes.
"""
WRITE_SIZE: Final = 64 * 1024
"""Characters a `LineBuffer` holds at most before it writes them (a pipe's usual capacity)."""


@final
class LineBuffer(logging.StreamHandler[TextIO]):
    """A stream handler that writes its lines together while `write_log_lines` runs.

    One write (and flush) per call line is a system call per request; this
    handler keeps formatted lines and writes them in one go: `WRITE_DELAY`
    after the first one kept, at once with a record at WARNING or above (and
    what was kept before it), once `WRITE_SIZE` characters are kept, on
    `flush` (`logging.shutdown` at exit calls it) and when `write_log_lines`
    ends. Without it running (before ``serve`` starts, after it stops), each
    line is written as it comes, as a `logging.StreamHandler` writes it.

    Thread-safe: `logging.Handler.handle` holds the handler's lock around
    `emit`, and `flush` takes it, so lines are kept and written whole and in
    order from any thread.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._lines: list[str] = []
        self._size = 0
        self._wake: Callable[[], None] | None = None
        """Asks `write_log_lines` to write in `WRITE_DELAY`; None while it does not run."""

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record's line, or write it (with those kept) if it must go now."""
        try:
            line = self.format(record) + self.terminator
            self._lines.append(line)
            self._size += len(line)
            wake = self._wake
            if wake is None or record.levelno >= logging.WARNING or self._size >= WRITE_SIZE:
                self._write()
            elif len(self._lines) == 1:  # the first line kept: the delay starts now
                wake()
        except RecursionError:  # as logging.StreamHandler: a deep recursion is no log error
            raise
        except Exception:  # as any handler: report on stderr, never raise
            self.handleError(record)

    def flush(self) -> None:
        """Write the lines kept, if any, and flush the stream."""
        # stderr closed or broken: nowhere left to write them, nor to say so.
        with self.lock, contextlib.suppress(OSError, ValueError):  # type: ignore[union-attr]
            self._write()

    def _write(self) -> None:
        """Write the lines kept (under the lock), dropping them even if the write fails."""
        if not self._lines:
            return
        text = "".join(self._lines)
        self._lines.clear()
        self._size = 0
        self.stream.write(text)
        self.stream.flush()

    def buffer(self, wake: Callable[[], None] | None) -> bool:
        """Start keeping lines, `wake` called at each first one kept; or, given None, stop
        (writing what is kept). False if another `write_log_lines` has this handler."""
        with self.lock:  # type: ignore[union-attr]
            if wake is not None and self._wake is not None:
                return False
            if wake is None:
                self._write()
            self._wake = wake
            return True


def log_handler(log_format: LogFormat) -> logging.Handler:
    """A stderr handler writing `log_format`: a `LineBuffer`."""
    handler = LineBuffer(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    return handler


@final
class _Writer:
    """What `write_log_lines` waits on: a line kept, told from any thread."""

    def __init__(self) -> None:
        self.kept = trio.Event()
        self._token = trio.lowlevel.current_trio_token()

    def wake(self) -> None:
        # From any thread, and signal-safe: a record can come from a worker thread.
        self._token.run_sync_soon(self._set)

    def _set(self) -> None:
        self.kept.set()


async def write_log_lines(delay: float = WRITE_DELAY) -> None:
    """Keep the lines of the root logger's `LineBuffer` handlers and write them `delay`
    after the first one kept, until cancelled; then write what is kept, and return
    the handlers to writing each line as it comes.

    ``serve`` runs it in its nursery, inside its signal handling: a SIGTERM or
    SIGINT stops serve, which cancels this, which writes every line kept.
    Returns at once where no such handler is (a program that set up its own logging).
    """
    writer = _Writer()
    handlers = [
        handler
        for handler in logging.getLogger().handlers
        if isinstance(handler, LineBuffer) and handler.buffer(writer.wake)
    ]
    if not handlers:
        return
    try:
        while True:
            await writer.kept.wait()
            await trio.sleep(delay)
            # Armed again before writing: a line kept from now on wakes the next round.
            writer.kept = trio.Event()
            for handler in handlers:
                handler.flush()
    finally:
        # Cancelled (serve stops) or failing: nothing is left kept, nor kept from now on.
        for handler in handlers:
            handler.buffer(None)


LIBRARY_LINE_CHARACTERS: Final = 1000
"""Longest message a library's log record keeps (a client's text can ride in one)."""
LIBRARY_LINE_INTERVAL: Final = 10.0
"""Seconds between two records from one line of a library's code, at most."""


@final
class LibraryLines(logging.Filter):
    """A handler's filter bounding what the `libraries` under ``serve`` log: each of their
    lines of code logs at most once every `LIBRARY_LINE_INTERVAL` seconds, and each
    message is cut short.

    The SDK logs some refusals itself, sometimes with a
    client's text in them (a session id); a client repeating the refused
    request would get a line each time. What is held back is counted, and the
    count rides on that line's next record. Our own refusal lines are bounded
    by `actors.server.http._admission.RefusalLog`.
    """

    def __init__(self, libraries: Iterable[str], interval: float = LIBRARY_LINE_INTERVAL) -> None:
        super().__init__()
        self._libraries = tuple(libraries)
        self._interval = interval
        self._lines: dict[tuple[str, int], tuple[float, int]] = {}  # line -> (quiet until, held)
        # Logger name -> whether a library's: asked of every record, one per call. No
        # bigger than `logging`'s own table of loggers, which keeps every name forever.
        self._theirs: dict[str, bool] = {}

    def _is_library(self, name: str) -> bool:
        theirs = self._theirs.get(name)
        if theirs is None:
            theirs = any(name == lib or name.startswith(lib + ".") for lib in self._libraries)
            self._theirs[name] = theirs
        return theirs

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether `record` goes out (a library's shortened, with the count held back since)."""
        if not self._is_library(record.name):
            return True  # ours: bounded where it is written
        line = (record.pathname, record.lineno)
        now = time.monotonic()
        quiet_until, held = self._lines.get(line, (-math.inf, 0))
        if now < quiet_until:
            self._lines[line] = (quiet_until, held + 1)
            return False
        self._lines[line] = (now + self._interval, 0)
        message = record.getMessage()
        if len(message) > LIBRARY_LINE_CHARACTERS:
            message = message[:LIBRARY_LINE_CHARACTERS] + "…"
        if held:
            message += f" (and {held} more such lines held back)"
        record.msg, record.args = message, None
        return True
