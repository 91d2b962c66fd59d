"""Results: text for people and models, structured data for programs, provenance on each item.

The dual contract: ``content`` carries text items a model can read;
``structured_content`` carries the data a program wants; ``is_error`` marks a
tool error the model should read and correct. Every content item is stamped
with the `ServiceInfo` of the tool that produced it, so results from several
modules in one message stay distinguishable. ``docs/design.md`` ("Results: the
dual contract") says why both channels exist.

The text carries all the data. A client that reads only text (or a model that
sees only text) must lose no field, and the MCP specification asks a tool that
returns structured content to return it serialized in a text item too. So a
result with structured content has this shape, in process and on the wire:

* an optional summary item first (``CallResult.both``'s readable line);
* last, one item whose text is `render_data` of the structured content.

`CallResult.data` and `.both` build that shape; `CallResult.to_wire` adds the
JSON item to any other result that carries data without it, so no result
leaves the runtime with the data in only one channel.

`unwrap`, `ToolResult` and `service_info_of` are for the consuming side and
work on the wire shape (``{"content": [...], "structuredContent": ...}``).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from typing import Any, Final, final

import attrs

from ._errors import ProtocolError

__all__ = [
    "SERVICE_INFO_META_KEY",
    "BackendType",
    "CallResult",
    "ServiceInfo",
    "TextContent",
    "ToolResult",
    "render_data",
    "service_info_of",
    "to_tool_result",
    "unwrap",
]

SERVICE_INFO_META_KEY: Final = "dev.mcp-actors/serviceInfo"
"""The ``_meta`` key under which a content item's ServiceInfo travels on the wire."""


class BackendType(enum.Enum):
    """Where a tool runs."""

    BUILTIN = "builtin"
    """A module served by this runtime (full name ``builtin.server__tool``)."""
    EXTERNAL = "external"
    """Another MCP server (full name ``server__tool``)."""


@final
@attrs.frozen
class ServiceInfo:
    """Which tool produced a content item."""

    server_name: str
    """The module (server) name, e.g. ``planning``."""
    tool_name: str
    """The base tool name, e.g. ``create_goal``."""
    backend_type: BackendType = BackendType.BUILTIN
    """Built-in module or external server."""

    def to_wire(self) -> dict[str, str]:
        """The camelCase mapping sent in a content item's ``_meta``."""
        return {
            "serverName": self.server_name,
            "toolName": self.tool_name,
            "backendType": self.backend_type.value,
        }

    @classmethod
    def from_wire(cls, wire: object) -> ServiceInfo:
        """Read back what `to_wire` sent; `ProtocolError` names what is malformed.

        Keys other than the three known ones are ignored, so a newer server
        may add some.
        """
        if not isinstance(wire, Mapping):
            msg = f"{_WHERE} must be an object, got {type(wire).__name__}"
            raise ProtocolError(msg)
        backend = _wire_field(wire, "backendType")
        try:
            backend_type = BackendType(backend)
        except ValueError:
            allowed = ", ".join(repr(kind.value) for kind in BackendType)
            msg = f"{_WHERE}.backendType must be one of {allowed}, got {backend!r:.80}"
            raise ProtocolError(msg) from None
        return cls(_wire_field(wire, "serverName"), _wire_field(wire, "toolName"), backend_type)


_WHERE: Final = f"_meta[{SERVICE_INFO_META_KEY!r}]"
# The MCP specification's rule for tool names, applied to both parts of a full name:
# it keeps control characters, spaces and lookalike tricks out of names a UI re-calls.
_WIRE_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _wire_field(wire: Mapping[Any, Any], key: str) -> str:
    """The string field `key` of a wire ServiceInfo, checked against `_WIRE_NAME`."""
    if key not in wire:
        msg = f"{_WHERE} has no {key!r}"
        raise ProtocolError(msg)
    value = wire[key]
    if not isinstance(value, str):
        msg = f"{_WHERE}.{key} must be a string, got {type(value).__name__}"
        raise ProtocolError(msg)
    if not _WIRE_NAME.fullmatch(value):
        msg = (
            f"{_WHERE}.{key} {value!r:.80} is not a tool or server name "
            "(1 to 128 letters, digits, '_', '-' or '.')"
        )
        raise ProtocolError(msg)
    return value


@final
@attrs.frozen
class TextContent:
    """One text item of a result."""

    text: str
    """What a person or a model reads."""
    service: ServiceInfo | None = None
    """The tool that produced it; stamped by the runtime."""

    def to_wire(self) -> dict[str, Any]:
        """The MCP content item: ``{"type": "text", "text": ..., "_meta": {...}}``."""
        item: dict[str, Any] = {"type": "text", "text": self.text}
        if self.service is not None:
            item["_meta"] = {SERVICE_INFO_META_KEY: self.service.to_wire()}
        return item


def service_info_of(item: object) -> ServiceInfo | None:
    """The `ServiceInfo` a received content item carries, or ``None`` when it carries none.

    `item` is a wire mapping (``{"type": "text", ..., "_meta": {...}}``) or an
    SDK-like object with a ``meta`` (or ``_meta``) attribute. An item whose
    ``_meta`` or ServiceInfo is malformed raises `ProtocolError` naming the
    field: a wrong ServiceInfo would re-call the wrong tool, so it is never
    guessed at.
    """
    if isinstance(item, Mapping):
        meta = item.get("_meta")
    else:
        meta = getattr(item, "meta", None)
        if meta is None:
            meta = getattr(item, "_meta", None)
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        msg = f"a content item's _meta must be an object, got {type(meta).__name__}"
        raise ProtocolError(msg)
    wire = meta.get(SERVICE_INFO_META_KEY)
    return None if wire is None else ServiceInfo.from_wire(wire)


def render_data(data: object) -> str:
    """A readable, stable JSON rendering of structured data, for the text channel.

    Every field is kept: a value JSON has no type for is written as its `str`.
    """
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def _with_data_text(
    content: tuple[TextContent, ...], data: Mapping[str, Any]
) -> tuple[TextContent, ...]:
    """`content` ending with the JSON rendering of `data`, added unless it is already last.

    The added item carries the provenance of the item before it, so a stamped
    result stays stamped throughout.
    """
    rendering = render_data(data)
    if content and content[-1].text == rendering:
        return content
    service = content[-1].service if content else None
    return (*content, TextContent(rendering, service))


@final
@attrs.frozen
class CallResult:
    """The outcome of one tool call: text items, optional data, and the error flag."""

    content: tuple[TextContent, ...]
    """Text items, in order."""
    structured_content: Mapping[str, Any] | None = None
    """Data for programs, when the tool returns any."""
    is_error: bool = False
    """True for a tool error: the text says what went wrong."""
    _renders_data: bool = attrs.field(default=False, eq=False, repr=False, alias="_renders_data")
    # True when `data` or `both` built the content, whose last item is then the
    # rendering of the data: `to_wire` need not render it again to find out.

    @classmethod
    def text(cls, text: str) -> CallResult:
        """A text-only result."""
        return cls((TextContent(text),))

    @classmethod
    def data(cls, data: Mapping[str, Any]) -> CallResult:
        """A data result, with its whole JSON rendering as the one text item."""
        return cls((TextContent(render_data(data)),), data, _renders_data=True)

    @classmethod
    def both(cls, text: str, data: Mapping[str, Any]) -> CallResult:
        """A result with a text summary, then the data's JSON rendering, and the data.

        The summary is the first item, for a model that reads the first line;
        the JSON item after it carries every field, for a client that reads only
        text. An empty summary is left out.
        """
        summary = (TextContent(text),) if text else ()
        return cls(_with_data_text(summary, data), data, _renders_data=True)

    @classmethod
    def error(cls, message: str) -> CallResult:
        """A tool error the model can read and correct."""
        return cls((TextContent(message),), None, is_error=True)

    @property
    def first_text(self) -> str:
        """The first text item, or ``""`` when there is none."""
        return self.content[0].text if self.content else ""

    def stamped(self, service: ServiceInfo) -> CallResult:
        """This result with every content item carrying `service`."""
        # Built directly rather than with attrs.evolve: this runs on every call.
        items = tuple(TextContent(item.text, service) for item in self.content)
        return CallResult(
            items, self.structured_content, self.is_error, _renders_data=self._renders_data
        )

    def to_wire(self) -> dict[str, Any]:
        """The MCP ``CallToolResult`` mapping (camelCase).

        With structured content, the last text item is its JSON rendering
        (added here when the result was built without it).
        """
        content = self.content
        data = self.structured_content
        if data is not None and not self._renders_data:
            content = _with_data_text(content, data)
        wire: dict[str, Any] = {
            "content": [item.to_wire() for item in content],
            "isError": self.is_error,
        }
        if data is not None:
            wire["structuredContent"] = dict(data)
        return wire


@final
@attrs.frozen
class ToolResult:
    """Both channels of a wire result at once, for callers that need text and data."""

    text: str | None
    """The first text item, if the first item is text."""
    data: Any
    """``structuredContent``, or ``None``."""
    raw: Mapping[str, Any]
    """The result mapping as received."""


def _first_text(raw: Mapping[str, Any]) -> str | None:
    content = raw.get("content")
    if isinstance(content, list) and content:
        first = content[0]
        if isinstance(first, Mapping) and first.get("type") == "text":
            text = first.get("text")
            if isinstance(text, str) and text:
                return text
    return None


def to_tool_result(raw: Mapping[str, Any]) -> ToolResult:
    """Split a wire result into text, data and the raw mapping, for callers that need both."""
    return ToolResult(text=_first_text(raw), data=raw.get("structuredContent"), raw=raw)


def unwrap(raw: Mapping[str, Any]) -> Any:
    """The value a program wants from a wire result, in a fixed order callers rely on.

    1. ``structuredContent`` when present;
    2. else the first text item parsed as JSON;
    3. else that text as a string;
    4. else the raw result itself.
    """
    if raw.get("structuredContent") is not None:
        return raw["structuredContent"]
    text = _first_text(raw)
    if text is None:
        return raw
    try:
        return json.loads(text)
    except ValueError:
        return text
