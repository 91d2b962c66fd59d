"""Content items: text, images, audio, embedded resources and resource links, with provenance.

These are the MCP content types a tool result, a prompt message or an embedded
resource carries. Each item is a frozen value holding what it means (bytes, not
base64; ``mime_type``, not ``mimeType``); ``to_wire`` makes the MCP mapping
(camelCase, base64 for bytes) and the results in `protocol._result` read it
back. Each content item may carry the `ServiceInfo` of the tool that produced
it, in its ``_meta`` on the wire, so results from several modules in one
message stay distinguishable.

Bad values are refused where they are made: a `TypeError` or `ValueError`
naming the field for a constructor, a `ProtocolError` naming the wire field
(``content[2].mimeType``) for what arrived on the wire.
"""

from __future__ import annotations

import base64
import enum
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias, final

import attrs

from ._errors import ProtocolError

__all__ = [
    "SERVICE_INFO_META_KEY",
    "AudioContent",
    "BackendType",
    "Content",
    "EmbeddedResource",
    "ImageContent",
    "ResourceContents",
    "ResourceLink",
    "ServiceInfo",
    "TextContent",
    "service_info_of",
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


def service_info_of(item: object) -> ServiceInfo | None:
    """The `ServiceInfo` a received content item carries, or ``None`` when it carries none.

    `item` is a wire mapping (``{"type": "text", ..., "_meta": {...}}``, or
    any other content type) or an SDK-like object with a ``meta`` (or
    ``_meta``) attribute. An item whose ``_meta`` or ServiceInfo is malformed
    raises `ProtocolError` naming the field: a wrong ServiceInfo would re-call
    the wrong tool, so it is never guessed at.
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


# ---- checks shared by the constructors and the wire readers ----------------------------
#
# Each check names the field it was given: ``ImageContent.mime_type`` from a constructor
# (TypeError or ValueError), ``content[0].mimeType`` from a wire reader (ProtocolError).

# RFC 9110's media type: type "/" subtype, then optional "; name=value" parameters
# (``text/html;profile=mcp-app``). Tokens are RFC 9110's; values may be quoted.
_TOKEN: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_MEDIA_TYPE: Final = re.compile(
    rf'{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|"(?:[^"\\\x00-\x1f\x7f]|\\.)*"))*'
)
# A URI never holds a control character (RFC 3986); one in a log line or a UI misleads.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def _type_error(field: str, expected: str, value: object, *, wire: bool) -> Exception:
    message = f"{field} must be {expected}, got {type(value).__name__}"
    return ProtocolError(message) if wire else TypeError(message)


def _value_error(message: str, *, wire: bool) -> Exception:
    return ProtocolError(message) if wire else ValueError(message)


def _check_str(value: object, field: str, *, wire: bool = False) -> str:
    if not isinstance(value, str):
        raise _type_error(field, "a string", value, wire=wire)
    return value


def _check_media_type(value: object, field: str, *, wire: bool = False) -> str:
    text = _check_str(value, field, wire=wire)
    if not _MEDIA_TYPE.fullmatch(text):
        message = (
            f"{field} must be a media type, type/subtype such as 'image/png' "
            f"(parameters may follow: 'text/plain; charset=utf-8'), got {text!r:.80}"
        )
        raise _value_error(message, wire=wire)
    return text


def _check_uri(value: object, field: str, *, wire: bool = False) -> str:
    text = _check_str(value, field, wire=wire)
    if not text:
        msg = f"{field} must be a URI such as 'file:///notes.txt', got ''"
        raise _value_error(msg, wire=wire)
    if _CONTROL.search(text):
        msg = f"{field} must not hold control characters, got {text!r:.80}"
        raise _value_error(msg, wire=wire)
    return text


def _check_name(value: object, field: str, *, wire: bool = False) -> str:
    text = _check_str(value, field, wire=wire)
    if not text:
        msg = f"{field} must not be empty"
        raise _value_error(msg, wire=wire)
    return text


def _check_bytes(value: object, field: str) -> bytes:
    if not isinstance(value, bytes):
        hint = ""
        if isinstance(value, str):
            hint = " (pass the raw bytes: base64 is applied on the wire)"
        message = f"{field} must be bytes, got {type(value).__name__}{hint}"
        raise TypeError(message)
    return value


def _field(instance: object, attribute: attrs.Attribute[Any]) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


def _is_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_str(value, _field(instance, attribute))


def _is_media_type(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_media_type(value, _field(instance, attribute))


def _is_uri(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_uri(value, _field(instance, attribute))


def _is_name(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_name(value, _field(instance, attribute))


def _is_bytes(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_bytes(value, _field(instance, attribute))


def _is_service(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ServiceInfo):
        field = _field(instance, attribute)
        raise _type_error(field, "a ServiceInfo or None", value, wire=False)


def _bytes_repr(value: bytes | None) -> str:
    """Bytes in a repr: their length, not a screenful of an image."""
    return "None" if value is None else f"<{len(value)} bytes>"


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _meta(item: dict[str, Any], service: ServiceInfo | None) -> dict[str, Any]:
    """`item` with `service` in its ``_meta``, as every content item sends it."""
    if service is not None:
        item["_meta"] = {SERVICE_INFO_META_KEY: service.to_wire()}
    return item


def _slot_setters(cls: type, *fields: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The setters of the slots of the frozen attrs class `cls`, one per field, in order.

    For a maker of `cls` on a hot path that skips the frozen ``__init__``, which
    sets each field through ``object.__setattr__`` (about twice what the slot's own
    setter costs): ``instance = object.__new__(cls)``, then every setter. Only for
    values the maker made or checked itself, since no converter or validator runs.
    `fields` must name every field of `cls`, in order, so that a field added later
    fails here, at import, rather than leave a slot unset (a `TypeError`).
    """
    declared = tuple(attribute.name for attribute in attrs.fields(cls))
    if fields != declared:
        msg = f"{cls.__name__}'s fields are {declared}, not {fields}"
        raise TypeError(msg)
    return tuple(cls.__dict__[field].__set__ for field in fields)


# ---- the content items ---------------------------------------------------------------


@final
@attrs.frozen
class TextContent:
    """One text item of a result."""

    text: str
    """What a person or a model reads."""
    service: ServiceInfo | None = None
    """The tool that produced it; stamped by the runtime."""

    def stamped(self, service: ServiceInfo) -> TextContent:
        """This item carrying `service`."""
        return _text_item(self.text, service)

    def to_wire(self) -> dict[str, Any]:
        """The MCP content item: ``{"type": "text", "text": ..., "_meta": {...}}``."""
        item: dict[str, Any] = {"type": "text", "text": self.text}
        if self.service is not None:
            item["_meta"] = {SERVICE_INFO_META_KEY: self.service.to_wire()}
        return item


_set_text, _set_service = _slot_setters(TextContent, "text", "service")


def _text_item(text: str, service: ServiceInfo | None) -> TextContent:
    """``TextContent(text, service)``, made without the frozen ``__init__``: a result's
    text item, made on every call (`_slot_setters`; TextContent checks nothing)."""
    item = object.__new__(TextContent)
    _set_text(item, text)
    _set_service(item, service)
    return item


@final
@attrs.frozen
class ImageContent:
    """One image of a result: its bytes and their media type."""

    data: bytes = attrs.field(validator=_is_bytes, repr=_bytes_repr)
    """The image itself (raw bytes; base64 only on the wire)."""
    mime_type: str = attrs.field(validator=_is_media_type)
    """Its media type, e.g. ``image/png``."""
    service: ServiceInfo | None = attrs.field(default=None, validator=_is_service)
    """The tool that produced it; stamped by the runtime."""

    def stamped(self, service: ServiceInfo) -> ImageContent:
        """This item carrying `service`."""
        return ImageContent(self.data, self.mime_type, service)

    def to_wire(self) -> dict[str, Any]:
        """The MCP content item: ``{"type": "image", "data": base64, "mimeType": ...}``."""
        item = {"type": "image", "data": _base64(self.data), "mimeType": self.mime_type}
        return _meta(item, self.service)


@final
@attrs.frozen
class AudioContent:
    """One audio clip of a result: its bytes and their media type."""

    data: bytes = attrs.field(validator=_is_bytes, repr=_bytes_repr)
    """The audio itself (raw bytes; base64 only on the wire)."""
    mime_type: str = attrs.field(validator=_is_media_type)
    """Its media type, e.g. ``audio/wav``."""
    service: ServiceInfo | None = attrs.field(default=None, validator=_is_service)
    """The tool that produced it; stamped by the runtime."""

    def stamped(self, service: ServiceInfo) -> AudioContent:
        """This item carrying `service`."""
        return AudioContent(self.data, self.mime_type, service)

    def to_wire(self) -> dict[str, Any]:
        """The MCP content item: ``{"type": "audio", "data": base64, "mimeType": ...}``."""
        item = {"type": "audio", "data": _base64(self.data), "mimeType": self.mime_type}
        return _meta(item, self.service)


@final
@attrs.frozen
class ResourceContents:
    """What a resource holds: text or bytes, at a URI.

    What ``resources/read`` returns (see `ResourceResult`) and what an
    `EmbeddedResource` embeds. Exactly one of `text` and `blob` is set. Not a
    content item itself: the item that embeds it carries the provenance.
    """

    uri: str = attrs.field(validator=_is_uri)
    """Where the resource lives, e.g. ``file:///notes.txt``."""
    mime_type: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(_is_media_type)
    )
    """Its media type, e.g. ``text/markdown``; ``None`` when not known."""
    text: str | None = attrs.field(default=None, validator=attrs.validators.optional(_is_str))
    """The contents of a text resource; ``None`` for a binary one."""
    blob: bytes | None = attrs.field(
        default=None, validator=attrs.validators.optional(_is_bytes), repr=_bytes_repr
    )
    """The contents of a binary resource (raw bytes; base64 only on the wire); ``None`` for text."""

    def __attrs_post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            got = "both" if self.text is not None else "neither"
            msg = (
                "ResourceContents needs exactly one of text (a str, for a text resource) "
                f"and blob (bytes, for a binary one), got {got}"
            )
            raise ValueError(msg)

    def to_wire(self) -> dict[str, Any]:
        """The MCP resource contents: ``{"uri", "mimeType"?, "text"}``, or ``"blob"`` (base64)."""
        wire: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            wire["mimeType"] = self.mime_type
        if self.blob is not None:
            wire["blob"] = _base64(self.blob)
        else:
            wire["text"] = self.text
        return wire

    @classmethod
    def from_wire(cls, wire: object) -> ResourceContents:
        """Read back what `to_wire` sent; `ProtocolError` names what is malformed."""
        return _resource_from_wire(wire, "contents")


@final
@attrs.frozen
class EmbeddedResource:
    """A resource's contents carried inside a result."""

    resource: ResourceContents = attrs.field(
        validator=attrs.validators.instance_of(ResourceContents)
    )
    """The embedded contents: text or bytes, with their URI."""
    service: ServiceInfo | None = attrs.field(default=None, validator=_is_service)
    """The tool that produced it; stamped by the runtime."""

    def stamped(self, service: ServiceInfo) -> EmbeddedResource:
        """This item carrying `service`."""
        return EmbeddedResource(self.resource, service)

    def to_wire(self) -> dict[str, Any]:
        """The MCP content item: ``{"type": "resource", "resource": {...}}``."""
        return _meta({"type": "resource", "resource": self.resource.to_wire()}, self.service)


@final
@attrs.frozen
class ResourceLink:
    """A pointer to a resource the client may read (``resources/read``), without its contents."""

    uri: str = attrs.field(validator=_is_uri)
    """Where the resource lives, e.g. ``file:///notes.txt``."""
    name: str = attrs.field(validator=_is_name)
    """Its programmatic name, e.g. ``notes.txt``."""
    description: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(_is_str)
    )
    """What it holds, for a person or a model; ``None`` when not said."""
    mime_type: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(_is_media_type)
    )
    """Its media type; ``None`` when not known."""
    title: str | None = attrs.field(default=None, validator=attrs.validators.optional(_is_str))
    """A human-readable name for hosts to show; ``None`` when not given."""
    service: ServiceInfo | None = attrs.field(default=None, validator=_is_service)
    """The tool that produced it; stamped by the runtime."""

    def stamped(self, service: ServiceInfo) -> ResourceLink:
        """This item carrying `service`."""
        return ResourceLink(
            self.uri, self.name, self.description, self.mime_type, self.title, service
        )

    def to_wire(self) -> dict[str, Any]:
        """The MCP content item: ``{"type": "resource_link", "uri", "name", ...}``.

        Optional fields left at ``None`` are left out.
        """
        item: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.title is not None:
            item["title"] = self.title
        if self.description is not None:
            item["description"] = self.description
        if self.mime_type is not None:
            item["mimeType"] = self.mime_type
        return _meta(item, self.service)


Content: TypeAlias = TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink
"""One item of a result or a prompt message: any of the five MCP content types."""

_CONTENT_TYPES: Final = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)
_CONTENT_KINDS: Final = "'text', 'image', 'audio', 'resource' or 'resource_link'"


def _check_content(value: object, field: str) -> Content:
    """`value`, which must be a content item (a `TypeError` naming `field` otherwise)."""
    if not isinstance(value, _CONTENT_TYPES):
        expected = "a content item (" + ", ".join(kind.__name__ for kind in _CONTENT_TYPES) + ")"
        raise _type_error(field, expected, value, wire=False)
    return value


# ---- reading the wire ----------------------------------------------------------------


def _object(wire: object, where: str) -> Mapping[str, Any]:
    if type(wire) is not dict and not isinstance(wire, Mapping):  # a dict skips the ABC check
        raise _type_error(where, "an object", wire, wire=True)
    return wire


def _required(wire: Mapping[str, Any], key: str, where: str) -> object:
    if wire.get(key) is None:
        msg = f"{where} has no {key!r}"
        raise ProtocolError(msg)
    return wire[key]


def _optional_str(wire: Mapping[str, Any], key: str, where: str) -> str | None:
    value = wire.get(key)
    return None if value is None else _check_str(value, f"{where}.{key}", wire=True)


def _optional_media_type(wire: Mapping[str, Any], key: str, where: str) -> str | None:
    value = wire.get(key)
    return None if value is None else _check_media_type(value, f"{where}.{key}", wire=True)


def _base64_field(wire: Mapping[str, Any], key: str, where: str) -> bytes:
    field = f"{where}.{key}"
    text = _check_str(_required(wire, key, where), field, wire=True)
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or characters outside ASCII
        msg = f"{field} is not base64 (standard alphabet, '=' padding, no line breaks)"
        raise ProtocolError(msg) from None


def _resource_from_wire(wire: object, where: str) -> ResourceContents:
    """The `ResourceContents` of a wire mapping; `ProtocolError` names what is malformed."""
    contents = _object(wire, where)
    uri = _check_uri(_required(contents, "uri", where), f"{where}.uri", wire=True)
    mime_type = _optional_media_type(contents, "mimeType", where)
    has_text = contents.get("text") is not None
    has_blob = contents.get("blob") is not None
    if has_text == has_blob:
        got = "both" if has_text else "neither"
        msg = f"{where} must have exactly one of 'text' and 'blob', got {got}"
        raise ProtocolError(msg)
    if has_text:
        text = _check_str(contents["text"], f"{where}.text", wire=True)
        return ResourceContents(uri, mime_type, text=text)
    return ResourceContents(uri, mime_type, blob=_base64_field(contents, "blob", where))


def _content_from_wire(wire: object, where: str, service: ServiceInfo | None) -> Content:
    """The content item of a wire mapping, with its own ServiceInfo or else `service`.

    `where` names the item in errors (``content[2]``): a `ProtocolError` names
    the malformed field under it.
    """
    item = _object(wire, where)
    try:
        own = service_info_of(item)
    except ProtocolError as exc:
        msg = f"{where}: {exc}"
        raise ProtocolError(msg) from None
    if own is not None:
        service = own
    kind = item.get("type")
    if kind == "text":  # first: nearly every item is text
        text = _check_str(_required(item, "text", where), f"{where}.text", wire=True)
        return TextContent(text, service)
    if kind == "image" or kind == "audio":
        data = _base64_field(item, "data", where)
        mime = _check_media_type(_required(item, "mimeType", where), f"{where}.mimeType", wire=True)
        kind_class = ImageContent if kind == "image" else AudioContent
        return kind_class(data, mime, service)
    if kind == "resource":
        resource = _resource_from_wire(_required(item, "resource", where), f"{where}.resource")
        return EmbeddedResource(resource, service)
    if kind == "resource_link":
        return ResourceLink(
            _check_uri(_required(item, "uri", where), f"{where}.uri", wire=True),
            _check_name(_required(item, "name", where), f"{where}.name", wire=True),
            description=_optional_str(item, "description", where),
            mime_type=_optional_media_type(item, "mimeType", where),
            title=_optional_str(item, "title", where),
            service=service,
        )
    if kind is None:
        msg = f"{where} has no 'type' (one of {_CONTENT_KINDS})"
    else:
        msg = f"{where}.type must be {_CONTENT_KINDS}, got {kind!r:.80}"
    raise ProtocolError(msg)
