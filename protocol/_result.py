"""Results: content for people and models, structured data for programs, provenance on each item.

The dual contract: ``content`` carries items a model can read (text, and the
images, audio and resources of `protocol._content`); ``structured_content``
carries the data a program wants; ``is_error`` marks a tool error the model
should read and correct. Every content item is stamped with the `ServiceInfo`
of the tool that produced it, so results from several modules in one message
stay distinguishable. ``docs/design.md`` ("Results: the dual contract") says
why both channels exist.

The text carries all the data. A client that reads only text (or a model that
sees only text) must lose no field, and the MCP specification asks a tool that
returns structured content to return it serialized in a text item too. So a
result with structured content has this shape, in process and on the wire:

* an optional summary item first (``CallResult.both``'s readable line), or
  any items of ``CallResult.of``;
* last, one text item whose text is `render_data` of the structured content.

`CallResult.data`, `.both` and `.of` build that shape; `CallResult.to_wire`
adds the JSON item to any other result that carries data without it, so no
result leaves the runtime with the data in only one channel.

`ResourceResult` and `PromptResult` are the pure data of a ``resources/read``
and a ``prompts/get`` answer.

`unwrap`, `ToolResult` and `service_info_of` are for the consuming side and
work on the wire shape (``{"content": [...], "structuredContent": ...}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, final

import attrs

from ._content import SERVICE_INFO_META_KEY as SERVICE_INFO_META_KEY
from ._content import BackendType as BackendType
from ._content import (
    Content,
    ResourceContents,
    _check_content,
    _check_str,
    _content_from_wire,
    _object,
    _required,
    _resource_from_wire,
    _set_service,
    _set_text,
    _slot_setters,
    _text_item,
)
from ._content import ServiceInfo as ServiceInfo
from ._content import TextContent as TextContent
from ._content import service_info_of as service_info_of
from ._errors import ProtocolError

__all__ = [
    "CallResult",
    "PromptMessage",
    "PromptResult",
    "ResourceResult",
    "ToolResult",
    "render_data",
    "to_tool_result",
    "unwrap",
]
# `SERVICE_INFO_META_KEY`, `BackendType`, `ServiceInfo`, `TextContent` and `service_info_of`
# live in `protocol._content` and are re-exported here for the modules that import them
# from this one.


def render_data(data: object) -> str:
    """A readable, stable JSON rendering of structured data, for the text channel.

    Every field is kept: a value JSON has no type for is written as its `str`.
    """
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def _with_data_text(content: tuple[Content, ...], data: Mapping[str, Any]) -> tuple[Content, ...]:
    """`content` ending with the JSON rendering of `data`, added unless it is already last.

    The added item carries the provenance of the item before it, whatever its
    type, so a stamped result stays stamped throughout.
    """
    rendering = render_data(data)
    if not content:
        return (TextContent(rendering),)
    last = content[-1]
    if type(last) is TextContent and last.text == rendering:
        return content
    return (*content, TextContent(rendering, last.service))


@final
@attrs.frozen
class CallResult:
    """The outcome of one tool call: content items, optional data, and the error flag."""

    content: tuple[Content, ...]
    """Content items (text, image, audio, embedded resource, resource link), in order."""
    structured_content: Mapping[str, Any] | None = None
    """Data for programs, when the tool returns any."""
    is_error: bool = False
    """True for a tool error: the text says what went wrong."""
    _renders_data: bool = attrs.field(default=False, eq=False, repr=False, alias="_renders_data")
    # True when `data`, `both` or `of` built the content, whose last item is then
    # the rendering of the data: `to_wire` need not render it again to find out.

    @classmethod
    def text(cls, text: str, service: ServiceInfo | None = None) -> CallResult:
        """A text-only result, its one item carrying `service` (``None``: not stamped)."""
        # The commonest result (a handler's `str`, made on every such call): `_text_item`
        # and `_made` inline, without the frozen __init__s (see `_slot_setters`).
        item = object.__new__(TextContent)
        _set_text(item, text)
        _set_service(item, service)
        result = object.__new__(CallResult)
        _set_content(result, (item,))
        _set_data(result, None)
        _set_is_error(result, False)
        _set_renders_data(result, False)
        return result

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

    @classmethod
    def of(
        cls,
        *items: Content | str,
        data: Mapping[str, Any] | None = None,
        is_error: bool = False,
    ) -> CallResult:
        """A result of any content items, in order; a `str` is a text item.

        ``CallResult.of("The chart:", ImageContent(png, "image/png"))``. With
        `data`, its JSON rendering follows the items as a text item (the text
        carries all the data), as for `both`. A `TypeError` names an item that
        is neither a string nor a content item.
        """
        content = tuple(
            TextContent(item) if isinstance(item, str) else _check_content(item, f"items[{index}]")
            for index, item in enumerate(items)
        )
        if data is None:
            return cls(content, None, is_error)
        if not isinstance(data, Mapping):
            msg = f"data must be a mapping (a JSON object), got {type(data).__name__}"
            raise TypeError(msg)
        return cls(_with_data_text(content, data), data, is_error, _renders_data=True)

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any], service: ServiceInfo | None = None) -> CallResult:
        """Read back what `to_wire` sent (or any MCP ``CallToolResult`` mapping).

        Each item keeps the ServiceInfo of its own ``_meta`` when it has one,
        else gets `service`. Malformed input raises `ProtocolError` naming the
        field (``content[1].mimeType``); unknown keys are ignored, so a newer
        peer may add some.
        """
        result = _object(wire, "a tool result")
        content = _required(result, "content", "a tool result")
        if not isinstance(content, list | tuple):
            msg = f"content must be a list of content items, got {type(content).__name__}"
            raise ProtocolError(msg)
        items = tuple(
            _content_from_wire(item, f"content[{index}]", service)
            for index, item in enumerate(content)
        )
        data = result.get("structuredContent")
        if data is not None and not isinstance(data, Mapping):
            msg = f"structuredContent must be an object, got {type(data).__name__}"
            raise ProtocolError(msg)
        is_error = result.get("isError")
        if is_error is None:
            is_error = False
        elif not isinstance(is_error, bool):
            msg = f"isError must be a boolean, got {type(is_error).__name__}"
            raise ProtocolError(msg)
        return cls(items, data, is_error)

    @property
    def first_text(self) -> str:
        """The text of the first text item (other items skipped), or ``""`` when there is none."""
        content = self.content
        if content and type(content[0]) is TextContent:  # nearly always: no loop
            return content[0].text
        for item in content:
            if type(item) is TextContent:
                return item.text
        return ""

    def stamped(self, service: ServiceInfo) -> CallResult:
        """This result with every content item carrying `service`."""
        # Built directly rather than with attrs.evolve: this runs on every call,
        # and text items, nearly all of them, skip a method call.
        items = tuple(
            _text_item(item.text, service) if type(item) is TextContent else item.stamped(service)
            for item in self.content
        )
        return _made(items, self.structured_content, self.is_error, self._renders_data)

    def to_wire(self) -> dict[str, Any]:
        """The MCP ``CallToolResult`` mapping (camelCase), every content type rendered.

        With structured content, the last item is a text item holding its JSON
        rendering (added here when the result was built without it).
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


_set_content, _set_data, _set_is_error, _set_renders_data = _slot_setters(
    CallResult, "content", "structured_content", "is_error", "_renders_data"
)


def _made(
    content: tuple[Content, ...],
    data: Mapping[str, Any] | None,
    is_error: bool,
    renders_data: bool,
) -> CallResult:
    """``CallResult(content, data, is_error, _renders_data=renders_data)`` without the
    frozen ``__init__`` (`_slot_setters`): for parts a CallResult made or already holds."""
    result = object.__new__(CallResult)
    _set_content(result, content)
    _set_data(result, data)
    _set_is_error(result, is_error)
    _set_renders_data(result, renders_data)
    return result


def _tuple_of(kind: type[Any]) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """A validator: the value is a tuple of `kind` (a `TypeError` names the field and index)."""

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        field = f"{type(instance).__name__}.{attribute.name}"
        if not isinstance(value, tuple):
            msg = f"{field} must be a tuple of {kind.__name__}, got {type(value).__name__}"
            raise TypeError(msg)
        for index, item in enumerate(value):
            if not isinstance(item, kind):
                msg = f"{field}[{index}] must be a {kind.__name__}, got {type(item).__name__}"
                raise TypeError(msg)

    return check


def _wire_list(wire: Mapping[str, Any], key: str, where: str) -> list[Any] | tuple[Any, ...]:
    items = _required(wire, key, where)
    if not isinstance(items, list | tuple):
        msg = f"{key} must be a list, got {type(items).__name__}"
        raise ProtocolError(msg)
    return items


@final
@attrs.frozen
class ResourceResult:
    """What ``resources/read`` returns: the contents of one resource (or of several parts)."""

    contents: tuple[ResourceContents, ...] = attrs.field(validator=_tuple_of(ResourceContents))
    """The contents, in order: text or bytes, each with its URI."""

    def to_wire(self) -> dict[str, Any]:
        """The MCP ``ReadResourceResult`` mapping: ``{"contents": [...]}``."""
        return {"contents": [contents.to_wire() for contents in self.contents]}

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> ResourceResult:
        """Read back what `to_wire` sent; `ProtocolError` names what is malformed."""
        result = _object(wire, "a resource result")
        contents = _wire_list(result, "contents", "a resource result")
        return cls(
            tuple(
                _resource_from_wire(item, f"contents[{index}]")
                for index, item in enumerate(contents)
            )
        )


_ROLES: Final = ("user", "assistant")


def _is_role(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in _ROLES:
        field = f"{type(instance).__name__}.{attribute.name}"
        msg = f"{field} must be 'user' or 'assistant', got {value!r:.80}"
        raise ValueError(msg)


def _is_content(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_content(value, f"{type(instance).__name__}.{attribute.name}")


@final
@attrs.frozen
class PromptMessage:
    """One message of a prompt: who says it, and one content item."""

    role: Literal["user", "assistant"] = attrs.field(validator=_is_role)
    """Who speaks: ``"user"`` or ``"assistant"``."""
    content: Content = attrs.field(validator=_is_content)
    """What is said: text, an image, audio, an embedded resource or a resource link."""

    def to_wire(self) -> dict[str, Any]:
        """The MCP ``PromptMessage`` mapping: ``{"role": ..., "content": {...}}``."""
        return {"role": self.role, "content": self.content.to_wire()}

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> PromptMessage:
        """Read back what `to_wire` sent; `ProtocolError` names what is malformed."""
        return _message_from_wire(wire, "message")


def _message_from_wire(wire: object, where: str) -> PromptMessage:
    message = _object(wire, where)
    role = _required(message, "role", where)
    if role not in _ROLES:
        msg = f"{where}.role must be 'user' or 'assistant', got {role!r:.80}"
        raise ProtocolError(msg)
    content = _content_from_wire(_required(message, "content", where), f"{where}.content", None)
    return PromptMessage("user" if role == "user" else "assistant", content)


@final
@attrs.frozen
class PromptResult:
    """What ``prompts/get`` returns: the prompt's messages, and what it is for."""

    messages: tuple[PromptMessage, ...] = attrs.field(validator=_tuple_of(PromptMessage))
    """The messages, in order."""
    description: str | None = attrs.field(default=None)
    """What the prompt is for; ``None`` when not said."""

    @description.validator
    def _check_description(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            _check_str(value, f"PromptResult.{attribute.name}")

    def to_wire(self) -> dict[str, Any]:
        """The MCP ``GetPromptResult`` mapping: ``{"description"?, "messages": [...]}``."""
        wire: dict[str, Any] = {}
        if self.description is not None:
            wire["description"] = self.description
        wire["messages"] = [message.to_wire() for message in self.messages]
        return wire

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> PromptResult:
        """Read back what `to_wire` sent; `ProtocolError` names what is malformed."""
        result = _object(wire, "a prompt result")
        messages = _wire_list(result, "messages", "a prompt result")
        description = result.get("description")
        if description is not None:
            _check_str(description, "description", wire=True)
        return cls(
            tuple(
                _message_from_wire(message, f"messages[{index}]")
                for index, message in enumerate(messages)
            ),
            description,
        )


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
