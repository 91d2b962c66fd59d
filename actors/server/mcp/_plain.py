"""Plain requests and their answers, whatever the transport: what a lean path serves itself.

A lean path (`actors.server.http._fast_path` over HTTP, `actors.server._stdio_lean`
over stdio) answers the commonest requests without the SDK's session, dispatcher
and streams. What it may take is the same on every transport:

* one JSON-RPC request of the plainest shape (`plain_request`): ``jsonrpc`` "2.0",
  an ``id`` that is a string or an integer, a ``method`` and ``params`` that are an
  object, and nothing else;
* of the 2026 era, with an envelope the SDK's ladder takes (`envelope_version`);
* of one of `PLAIN_METHODS`, with params the SDK's kernel takes at the version in
  force (`valid_params`); a ``tools/call`` only of a tool that reaches nothing of the
  client's but its result (`PlainAnswers.plain_call`).

The answers are the JSON the SDK sends for the same request (`PlainAnswers`); the
transport adds its own checks (HTTP's headers, stdio's handshake) and frames them.

The checks and the shaping do without pydantic for the shapes clients and the runtime
send every time, and call the SDK's own functions for anything else: a verdict or a
result is then the SDK's, word for word. The SDK's models are pydantic's in lax mode
(a ``1.0`` is an integer, a mapping an object), so a plain check takes only values of
the exact JSON types it knows to pass; what is unusual goes to the SDK, which takes it
or refuses it in its own words. ``tests/server/test_plain_checks.py`` holds each fast
function to the SDK's on generated inputs, common and nearly so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import pydantic
import pydantic_core
from mcp.server.runner import modern_error_data
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    InboundLadderRejection,
    classify_inbound_request,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INTERNAL_ERROR,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as spec_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._adapter import McpAdapter

__all__ = [
    "PLAIN_METHODS",
    "PlainAnswers",
    "dumped",
    "envelope_version",
    "plain_request",
    "valid_params",
]

logger = logging.getLogger("actors.mcp")

PLAIN_METHODS: Final = frozenset({"tools/call", "tools/list"})
"""The methods a lean path answers itself (when the request is one it fully understands)."""
_ENVELOPE_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})
_CALL_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
_LIST_PARAMS: Final = frozenset({"cursor", "_meta"})
_HANDSHAKE: Final = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
_MODERN: Final = frozenset(MODERN_PROTOCOL_VERSIONS)
_SENTINEL_START: Final = "=?base64?"
"""How a header value the SDK decodes (base64) begins: such a value is the SDK's to read."""


def dumped(value: object) -> bytes:
    """Compact JSON: the same JSON as the SDK's 2026-era entry writes (with `json`).

    pydantic-core writes it several times quicker (``docs/performance.md``). The value is
    the same; the bytes may differ where JSON lets them (text beyond ASCII as UTF-8
    rather than escaped, ``0.00001`` for ``1e-05``).
    """
    return pydantic_core.to_json(value)


def plain_request(message: Any, methods: frozenset[str] = PLAIN_METHODS) -> bool:
    """Whether `message` is one JSON-RPC request of the plainest shape (see the module
    docstring), of one of `methods` (those a lean path answers)."""
    if not isinstance(message, dict) or not message.keys() <= _ENVELOPE_MEMBERS:
        return False
    request_id = message.get("id")
    return (
        message.get("jsonrpc") == "2.0"
        and isinstance(request_id, (str, int))
        and not isinstance(request_id, bool)
        and isinstance(message.get("method"), str)
        and message["method"] in methods
        and isinstance(message.get("params", {}), dict)
    )


# ---- the envelope ---------------------------------------------------------------------


def envelope_version(message: dict[str, Any], headers: Mapping[str, str] | None) -> str | None:
    """The protocol version of `message`'s 2026-era envelope, or None: the SDK's ladder
    (`classify_inbound_request`) refuses it.

    `headers` are the HTTP request's (the ladder compares its routing headers with the
    body), or None where there are none (stdio: the ladder skips that rung).
    """
    version = _plain_envelope_version(message, headers)
    if version is not None:
        return version
    verdict = classify_inbound_request(message, headers=headers)
    return None if isinstance(verdict, InboundLadderRejection) else verdict.protocol_version


def _plain_envelope_version(message: Any, headers: Mapping[str, str] | None) -> str | None:
    """The envelope's version when it is of the usual shape and passes every rung; else
    None (not necessarily a refusal: the ladder decides)."""
    params: Any = message.get("params") if type(message) is dict else None
    meta = params.get("_meta") if type(params) is dict else None
    if type(meta) is not dict or CLIENT_CAPABILITIES_META_KEY not in meta:
        return None
    version = meta.get(PROTOCOL_VERSION_META_KEY)
    if type(version) is not str or version not in _MODERN:
        return None
    if headers is None:
        return version
    method = message.get("method")
    if headers.get(MCP_PROTOCOL_VERSION_HEADER) != version:
        return None
    if headers.get(MCP_METHOD_HEADER) != method:
        return None
    name_key = NAME_BEARING_METHODS.get(method) if type(method) is str else None
    named = None if name_key is None else params.get(name_key)
    if named is None:
        return version
    header = headers.get(MCP_NAME_HEADER)
    # A header value the SDK would decode first (base64) is left to it.
    plain = type(named) is str and header == named and not named.startswith(_SENTINEL_START)
    return version if plain else None


# ---- the params -----------------------------------------------------------------------


def valid_params(message: dict[str, Any], version: str) -> bool:
    """Whether the SDK's kernel takes `message`'s method and params at `version`."""
    if _surely_valid(message, version):
        return True
    try:
        spec_methods.validate_client_request(message["method"], version, message.get("params"))
    except (KeyError, ValueError, pydantic.ValidationError):
        return False
    return True


def _surely_valid(message: dict[str, Any], version: str) -> bool:
    """Whether `message`'s method and params are of a shape the SDK's kernel takes at
    `version` for sure (False: the SDK decides)."""
    method = message.get("method")
    params = message.get("params")  # None: no params, as the SDK reads it
    if version in _MODERN:
        meta_ok: Callable[[Any], bool] = _modern_meta
    elif version in _HANDSHAKE:
        meta_ok = _handshake_meta
    else:
        return False
    if method == "tools/call":
        return (
            type(params) is dict
            and params.keys() <= _CALL_PARAMS
            and type(params.get("name")) is str
            and (params.get("arguments") is None or _string_keys(params["arguments"]))
            and meta_ok(params.get("_meta"))
        )
    if method == "tools/list":
        if params is None:
            return version in _HANDSHAKE  # the 2026 era requires the envelope
        return (
            type(params) is dict
            and params.keys() <= _LIST_PARAMS
            and _optional_str(params.get("cursor"))
            and meta_ok(params.get("_meta"))
        )
    return False


def _string_keys(value: Any) -> bool:
    """Whether `value` is an object whose keys are strings (as JSON's always are)."""
    # map(type, …) in a set: no Python-level loop nor generator, a call each.
    return type(value) is dict and set(map(type, value)) <= _JUST_STR


_JUST_STR: Final = frozenset({str})


def _handshake_meta(meta: Any) -> bool:
    """Whether `meta` passes as a 2025-era request's ``_meta`` (a progress token, any more)."""
    if meta is None:
        return True
    if type(meta) is not dict:
        return False
    for key, value in meta.items():
        if key == "progressToken":
            if not _optional_token(value):
                return False
        elif not _extra_key(key):
            return False
    return True


def _modern_meta(meta: Any) -> bool:
    """Whether `meta` passes as a 2026-era request's ``_meta``: the envelope (a version,
    the client's capabilities, who it is), a log level, a progress token, any more."""
    if type(meta) is not dict or type(meta.get(PROTOCOL_VERSION_META_KEY)) is not str:
        return False
    if CLIENT_CAPABILITIES_META_KEY not in meta:
        return False
    for key, value in meta.items():
        check = _MODERN_META_FIELDS.get(key)
        if check is None:
            if not _extra_key(key):
                return False
        elif not check(value):
            return False
    return True


def _extra_key(key: Any) -> bool:
    """Whether `key` passes as a key a model takes beyond its fields.

    pydantic-core makes such keys Rust strings: a lone surrogate (JSON's ``"\\ud800"``)
    fails there, so only ASCII passes here.
    """
    return type(key) is str and key.isascii()


def _optional_str(value: Any) -> bool:
    return value is None or type(value) is str


def _optional_token(value: Any) -> bool:
    # A bool is an int to Python, and pydantic's lax mode has its own rules for it.
    return value is None or type(value) is str or type(value) is int


def _capabilities(value: Any) -> bool:
    """Whether `value` passes as a 2026-era client's capabilities (the usual, bare ones)."""
    if type(value) is not dict:
        return False
    for key, declared in value.items():
        if key == "roots":
            if declared is not None and not _string_keys(declared):  # any members
                return False
        elif key in _BARE_CAPABILITIES:
            # Their members are typed JSON: only the bare capability passes here.
            if declared is not None and (type(declared) is not dict or declared):
                return False
        elif type(key) is not str:
            return False
    return True


_BARE_CAPABILITIES: Final = frozenset({"elicitation", "sampling", "experimental", "extensions"})
_IMPLEMENTATION_TEXTS: Final = frozenset({"title", "description", "websiteUrl"})


def _client_info(value: Any) -> bool:
    """Whether `value` passes as a 2026-era client's identity (a name and a version)."""
    if value is None:
        return True
    if type(value) is not dict:
        return False
    if type(value.get("name")) is not str or type(value.get("version")) is not str:
        return False
    for key, member in value.items():
        if key in _IMPLEMENTATION_TEXTS:
            if not _optional_str(member):
                return False
        elif key == "icons":
            if member is not None:
                return False
        elif type(key) is not str:
            return False
    return True


def _optional_log_level(value: Any) -> bool:
    return value is None or (type(value) is str and value in _LOG_LEVELS)


_LOG_LEVELS: Final = frozenset(
    {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
)
_MODERN_META_FIELDS: Final[dict[str, Callable[[Any], bool]]] = {
    PROTOCOL_VERSION_META_KEY: lambda value: type(value) is str,
    CLIENT_CAPABILITIES_META_KEY: _capabilities,
    CLIENT_INFO_META_KEY: _client_info,
    "io.modelcontextprotocol/logLevel": _optional_log_level,
    "progressToken": _optional_token,
}
"""The 2026 era's request ``_meta`` fields, and what passes as each."""


# ---- the results ----------------------------------------------------------------------


class _NotPlain(Exception):
    """A result not of the shape `_call_result` shapes: the SDK's to shape."""


def _jsonable(value: Any) -> Any:
    """`value` as the SDK's models dump a value of any type (``mode="json"``)."""
    try:
        return pydantic_core.to_jsonable_python(
            value, by_alias=True, exclude_none=True, inf_nan_mode="null"
        )
    except ValueError:  # pydantic-core's, or text it cannot encode: the SDK's to refuse
        raise _NotPlain from None


def _text(value: Any, modern: bool) -> str:
    if type(value) is not str:
        raise _NotPlain
    return value


def _optional_text(value: Any, modern: bool) -> str | None:
    if value is not None and type(value) is not str:
        raise _NotPlain
    return value


def _item_meta(meta: Any, modern: bool) -> dict[str, Any] | None:
    """A content item's ``_meta`` as dumped: an object of any values (2025); in the 2026
    era a model of its own, whose null members are left out."""
    if meta is None:
        return None
    if type(meta) is not dict:
        raise _NotPlain
    if modern:
        for key in meta:
            if not _extra_key(key):
                raise _NotPlain
        meta = {key: value for key, value in meta.items() if value is not None}
    elif not _string_keys(meta):
        raise _NotPlain
    shaped: dict[str, Any] = _jsonable(meta)
    return shaped


_Field = tuple[str, Callable[[Any, bool], Any]]
"""A model's field: its key on the wire, and how its value is shaped (None: left out)."""


@final
@attrs.frozen
class _Shape:
    """A model of the SDK's as `_shaped` dumps it: its fields, in the model's order."""

    fields: tuple[_Field, ...]
    members: frozenset[str] = attrs.field(
        default=attrs.Factory(lambda shape: frozenset(key for key, _ in shape.fields), True)
    )
    """The keys a value of it may hold here: its fields (any other: the SDK's to shape)."""


def _shaped(wire: Any, shape: _Shape, modern: bool) -> dict[str, Any]:
    """`wire` as the SDK dumps it as a `shape`: in the model's order, nulls left out."""
    if type(wire) is not dict or not wire.keys() <= shape.members:
        raise _NotPlain
    shaped = {}
    for key, shaping in shape.fields:
        value = shaping(wire.get(key), modern)
        if value is not None:
            shaped[key] = value
    return shaped


def _resource(value: Any, modern: bool) -> dict[str, Any]:
    """An embedded resource's contents: text or a blob (both: the SDK's to choose, as
    neither shape has both)."""
    text = type(value) is dict and "text" in value
    return _shaped(value, _TEXT_CONTENTS if text else _BLOB_CONTENTS, modern)


# Each content type's fields as its model (the same in both eras) orders them. Fields
# the runtime never sends (annotations, icons, size) are not among them: an item with
# one is the SDK's to shape.
_TEXT_CONTENTS: Final = _Shape(
    (("_meta", _item_meta), ("mimeType", _optional_text), ("text", _text), ("uri", _text))
)
_BLOB_CONTENTS: Final = _Shape(
    (("_meta", _item_meta), ("blob", _text), ("mimeType", _optional_text), ("uri", _text))
)
_MEDIA: Final = _Shape(
    (("_meta", _item_meta), ("data", _text), ("mimeType", _text), ("type", _text))
)
_ITEMS: Final = {
    "text": _Shape((("_meta", _item_meta), ("text", _text), ("type", _text))),
    "image": _MEDIA,
    "audio": _MEDIA,
    "resource": _Shape((("_meta", _item_meta), ("resource", _resource), ("type", _text))),
    "resource_link": _Shape(
        (
            ("_meta", _item_meta),
            ("description", _optional_text),
            ("mimeType", _optional_text),
            ("name", _text),
            ("title", _optional_text),
            ("type", _text),
            ("uri", _text),
        )
    ),
}
"""Each content type, by its ``type``."""
_RESULT_MEMBERS: Final = frozenset({"content", "isError", "structuredContent"})


def _call_result(result: Any, version: str) -> dict[str, Any]:
    """A runtime's call result as the SDK shapes it at `version`; `_NotPlain` for a result
    of another shape (with a ``_meta`` of its own, say), or a version the SDK does not
    know: the SDK's to shape, or to refuse in its own words."""
    modern = version in _MODERN
    if not modern and version not in _HANDSHAKE:
        raise _NotPlain
    if type(result) is not dict or not result.keys() <= _RESULT_MEMBERS:
        raise _NotPlain
    content = result.get("content")
    if type(content) is not list:
        raise _NotPlain
    items = []
    for item in content:
        kind = item.get("type") if type(item) is dict else None
        shape = _ITEMS.get(kind) if type(kind) is str else None
        if shape is None:
            raise _NotPlain
        items.append(_shaped(item, shape, modern))
    wire: dict[str, Any] = {"content": items}
    is_error = result.get("isError")
    if is_error is not None:
        if type(is_error) is not bool:
            raise _NotPlain
        wire["isError"] = is_error
    if modern:
        wire["resultType"] = "complete"
    data = result.get("structuredContent")
    if data is not None:
        # An object in the 2025 era (its keys strings), any JSON value in the 2026 one.
        if not modern and not _string_keys(data):
            raise _NotPlain
        wire["structuredContent"] = _jsonable(data)
    return wire


@final
class PlainAnswers:
    """The answers to plain requests, as the SDK shapes them for each protocol version.

    The server's identity and the tool lists are fixed at construction; the answers
    are serialized at once, never mutated.
    """

    def __init__(self, adapter: McpAdapter) -> None:
        self._adapter = adapter
        self._server_info = adapter.server.server_info_stamp
        self._fixed: dict[str, dict[str, Any]] = {}

    def plain_call(self, params: Any) -> bool:
        """Whether a ``tools/call`` with `params` calls a plain tool, with nothing else in them."""
        name = params.get("name") if isinstance(params, dict) else None
        return (
            isinstance(name, str)
            and params.keys() <= _CALL_PARAMS
            and self._adapter.plain_tool(name)
        )

    def call_result(self, result: dict[str, Any], version: str) -> dict[str, Any]:
        """A call's wire result as the SDK shapes it for `version` (stamped in the 2026 era)."""
        try:
            wire = _call_result(result, version)
        except _NotPlain:
            # As the SDK's handler result dumps: a complete result (no question for the client).
            complete = {**result, "resultType": "complete"}
            wire = spec_methods.serialize_server_result("tools/call", version, complete)
        return self._stamped(wire) if version in _MODERN else wire

    def tool_list(self, version: str) -> dict[str, Any]:
        """The ``tools/list`` result at `version`: the same for every request."""
        listed = self._adapter.list_tools_plainly()
        result = self._fixed.get(version)
        if result is None:
            model = listed.model_dump(by_alias=True, mode="json", exclude_none=True)
            result = self._fixed[version] = self.handler_result("tools/list", version, model)
        return result

    def handler_result(self, method: str, version: str, dumped: dict[str, Any]) -> dict[str, Any]:
        """A handler's `dumped` result for `method` as the SDK's runner shapes it for `version`:
        sieved by that version's schema, and in the 2026 era typed and stamped.

        Raises the SDK's `MCPError` for a result its schema refuses (our bug, logged).
        """
        try:
            wire = spec_methods.serialize_server_result(method, version, dumped)
        except pydantic.ValidationError:
            # As the SDK answers it: the detail stays in the log (it may echo the result).
            logger.exception("handler for %r returned an invalid result", method)
            raise MCPError(INTERNAL_ERROR, "Handler returned an invalid result") from None
        if version not in _MODERN:
            return wire
        if wire.get("resultType") is None:
            wire["resultType"] = "complete"
        return self._stamped(wire)

    @staticmethod
    def reply(request_id: str | int, result: Mapping[str, Any]) -> bytes:
        """The JSON-RPC response carrying `result`, in JSON."""
        return dumped({"jsonrpc": "2.0", "id": request_id, "result": result})

    @staticmethod
    def error_reply(request_id: str | int, error: MCPError) -> bytes:
        """The JSON-RPC error response for `error`, in JSON."""
        data = modern_error_data(error).model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped({"jsonrpc": "2.0", "id": request_id, "error": data})

    def _stamped(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """`result` with the server's identity, which every 2026-era result carries."""
        stamped = {**result}
        meta = result.get("_meta")
        if meta is None:
            stamped["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            stamped["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return stamped
