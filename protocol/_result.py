"""Results: text for people and models, structured data for programs, provenance on each item.

The dual contract: ``content`` carries text items a model can read;
``structured_content`` carries the data a program wants; ``is_error`` marks a
tool error the model should read and correct. Every content item is stamped
with the `ServiceInfo` of the tool that produced it, so results from several
modules in one message stay distinguishable. ``docs/design.md`` ("Results: the
dual contract") says why both channels exist.

`unwrap` and `ToolResult` are for the consuming side and work on the wire
shape (``{"content": [...], "structuredContent": ...}``).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any, Final, final

import attrs

__all__ = [
    "SERVICE_INFO_META_KEY",
    "BackendType",
    "CallResult",
    "ServiceInfo",
    "TextContent",
    "ToolResult",
    "render_data",
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


def render_data(data: object) -> str:
    """A readable, stable JSON rendering of structured data, for the text channel."""
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True, default=str)


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

    @classmethod
    def text(cls, text: str) -> CallResult:
        """A text-only result."""
        return cls((TextContent(text),))

    @classmethod
    def data(cls, data: Mapping[str, Any]) -> CallResult:
        """A data result, with its JSON rendering as the text item."""
        return cls((TextContent(render_data(data)),), data)

    @classmethod
    def both(cls, text: str, data: Mapping[str, Any]) -> CallResult:
        """A result with a text summary and the data behind it."""
        return cls((TextContent(text),), data)

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
        return CallResult(items, self.structured_content, self.is_error)

    def to_wire(self) -> dict[str, Any]:
        """The MCP ``CallToolResult`` mapping (camelCase)."""
        wire: dict[str, Any] = {
            "content": [item.to_wire() for item in self.content],
            "isError": self.is_error,
        }
        if self.structured_content is not None:
            wire["structuredContent"] = dict(self.structured_content)
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
