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
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Final, Literal, final

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import TracebackType

__all__ = [
    "EVENT_FIELD",
    "LISTENING",
    "LOG_FORMATS",
    "MAX_FIELD_CHARACTERS",
    "TEXT_FORMAT",
    "JsonFormatter",
    "LibraryLines",
    "LogFormat",
    "announce",
    "capture_stray_output",
    "log_handler",
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


def _bounded(value: object) -> object:
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARACTERS:
        return value[:MAX_FIELD_CHARACTERS] + "…"
    return value


@final
class JsonFormatter(logging.Formatter):
    """Formats each record as one line of JSON (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        document: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, EVENT_FIELD, None)
        if isinstance(event, dict):
            document[EVENT_FIELD] = {key: _bounded(value) for key, value in event.items()}
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=True, default=str)


def announce(message: str, *, level: int = logging.INFO, prefix: str = "mcp-actors") -> None:
    """Write `message` on stderr whatever the log level: tests and scripts wait for it.

    As the line ``PREFIX: MESSAGE``; or, where the process logs JSON (a
    `JsonFormatter` on a root handler, as `log_handler` makes for ``json``),
    as a JSON record through those handlers, so that stderr stays all JSON.
    """
    handlers = [
        handler
        for handler in logging.getLogger().handlers
        if isinstance(handler.formatter, JsonFormatter)
    ]
    if not handlers:
        print(f"{prefix}: {message}", file=sys.stderr, flush=True)
        return
    record = logging.LogRecord(_ANNOUNCING_LOGGER, level, __file__, 0, message, None, None)
    for handler in handlers:
        handler.handle(record)


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


def log_handler(log_format: LogFormat) -> logging.Handler:
    """A stderr handler writing `log_format`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    return handler


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

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether `record` goes out (a library's shortened, with the count held back since)."""
        name = record.name
        if not any(name == lib or name.startswith(lib + ".") for lib in self._libraries):
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
