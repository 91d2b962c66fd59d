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
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, Final, Literal, final

__all__ = [
    "EVENT_FIELD",
    "LOG_FORMATS",
    "MAX_FIELD_CHARACTERS",
    "TEXT_FORMAT",
    "JsonFormatter",
    "LogFormat",
    "log_handler",
]

LogFormat = Literal["text", "json"]
LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
EVENT_FIELD: Final = "event"
"""The `logging` ``extra`` key whose mapping becomes the record's ``event`` object."""
MAX_FIELD_CHARACTERS: Final = 256
"""Longest string kept whole in an event field."""


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


def log_handler(log_format: LogFormat) -> logging.Handler:
    """A stderr handler writing `log_format`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    return handler
