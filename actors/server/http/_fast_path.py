"""The fast path: requests the gate answers itself, without the SDK's transport.

This module answers the 2026 era's; `actors.server.http._fast_path_sessions` answers those of a
2025-era session, with the parts of this one.

Why
---
The SDK's Streamable HTTP transport spends, on one ``tools/call``, several
tasks, a few dozen cancel scopes, events and memory streams, and a handful of
pydantic validations and dumps: most of the server's CPU per call (see
docs/performance.md). A 2026-era request is self-contained (its version,
client and capabilities ride in its ``_meta``; there is no session), so the
common ones can be answered right where the gate has read them.

What it takes
-------------
A POST the gate has read, checked (token, size, ``Host``, ``Origin``) and
parsed, that is exactly:

* one JSON object with ``jsonrpc`` "2.0", an ``id`` that is a string or an
  integer, a ``method`` and ``params`` that are an object, and nothing else;
* of the 2026 era: its ``MCP-Protocol-Version`` header names a version of it;
* accepting both ``application/json`` and ``text/event-stream``;
* one of `FAST_PATH_METHODS`: ``tools/call`` of a tool that reaches nothing of the
  client's but its result (`McpAdapter.plain_tool`; its ``params`` hold only
  ``name``, ``arguments`` and ``_meta``, and no ``Mcp-Param-*`` header is
  involved), or ``tools/list``;
* that passes the checks the SDK makes first, with the SDK's own functions:
  no routing header twice, the envelope ladder (``_meta`` fields, headers that
  agree with the body, a supported version), and the params' shape for the
  method at that version.

Anything else goes on to the SDK, which answers it: the fast path
takes only what it answers exactly as the SDK would, with the same status and
the same JSON (``tests/server/test_fast_path.py`` checks that request by request,
beside the SDK), and leaves every refusal to the SDK's own words.

The gate asks it after its own checks; so does the wire's fast handler
(`actors.server.http._app.FastPathWire`), after the same checks, so that on our own
server such a request never becomes an ASGI scope.

The answer is one ``application/json`` body (`FastPathReply`), the same JSON the
SDK sends (written by pydantic-core, as the SDK's models write theirs). The SDK
answers these the same way (it switches to a stream only for a handler that
sends notifications, or after 15 s of silence, to ping through idle proxies); a
plain call's silence is bounded by the runtime's call timeout instead.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import pydantic
import pydantic_core
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as spec_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mcp.server.auth.provider import AccessToken
    from starlette.datastructures import Headers
    from starlette.types import Receive, Scope, Send

    from protocol import Caller

    from ..mcp._adapter import McpAdapter

__all__ = ["FAST_PATH_METHODS", "FastPath", "FastPathReply"]

FAST_PATH_METHODS: Final = frozenset({"tools/call", "tools/list"})
"""The methods the fast path answers itself (when the request is one it fully understands)."""
_ENVELOPE_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})
_CALL_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
_PARAM_HEADER: Final = MCP_PARAM_HEADER_PREFIX.lower()
_JSON: Final = "application/json"
_REMEMBERED_ACCEPT: Final = 256
"""The longest ``Accept`` whose verdict `accepts_both` remembers (64 at most)."""


def _dumped(value: object) -> bytes:
    """Compact JSON: the same JSON as the SDK's 2026-era entry writes (with `json`).

    pydantic-core writes it several times quicker (``docs/performance.md``). The value is
    the same; the
    bytes may differ where JSON lets them (text beyond ASCII as UTF-8 rather
    than escaped, ``0.00001`` for ``1e-05``).
    """
    return pydantic_core.to_json(value)


@final
@attrs.frozen
class FastPathReply:
    """The fast path's answer to a request: an ``application/json`` body and its status."""

    status: int
    body: bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send it as an ASGI app."""
        response = Response(self.body, status_code=self.status, media_type=_JSON)
        await response(scope, receive, send)


@final
class FastPath:
    """Answers the 2026-era requests described in this module's docstring.

    `identify` tells who sent a request (its token's label and tenant) from
    the bearer token the gate accepted (None: the server takes no tokens), as
    the SDK path's caller identification does. `path` is where the SDK serves
    MCP: a request elsewhere is the SDK's app's to answer (404).
    """

    def __init__(
        self,
        adapter: McpAdapter,
        identify: Callable[[AccessToken | None], Caller],
        path: str,
    ) -> None:
        self.path: Final = path
        """The only path whose requests the fast path answers."""
        self._adapter = adapter
        self._identify = identify
        # Identity is fixed at construction; the answers are serialized at once, never mutated.
        self._server_info = adapter.server.server_info_stamp
        self._fixed: dict[str, dict[str, Any]] = {}
        self._param_headers_declared: dict[str, bool] = {}

    async def answer(
        self, headers: Headers, message: Any, token: AccessToken | None
    ) -> FastPathReply | None:
        """The response to `message` (the parsed body of a POST with `headers`, sent with
        `token`), or None: the SDK's to answer."""
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version not in MODERN_PROTOCOL_VERSIONS or not self.takes(message):
            return None
        # The SDK's own checks, in its order.
        if not accepts_both(headers) or find_duplicated_routing_header(headers.items()):
            return None
        verdict = classify_inbound_request(message, headers=headers)
        if isinstance(verdict, InboundLadderRejection):
            return None
        if not valid_params(message, verdict.protocol_version):
            return None
        if message["method"] == "tools/call":
            return await self._call(token, headers, message["id"], message["params"], version)
        return _ok(message["id"], self.tool_list(version))

    @staticmethod
    def takes(message: Any) -> bool:
        """Whether `message` is one JSON-RPC request of the plainest shape (see the module
        docstring), of a method the fast path answers."""
        if not isinstance(message, dict) or not message.keys() <= _ENVELOPE_MEMBERS:
            return False
        request_id = message.get("id")
        return (
            message.get("jsonrpc") == "2.0"
            and isinstance(request_id, (str, int))
            and not isinstance(request_id, bool)
            and isinstance(message.get("method"), str)
            and message["method"] in FAST_PATH_METHODS
            and isinstance(message.get("params", {}), dict)
        )

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
        # As the SDK's handler result dumps: a complete result (no question for the client).
        complete = {**result, "resultType": "complete"}
        wire = spec_methods.serialize_server_result("tools/call", version, complete)
        return self._stamped(wire) if version in MODERN_PROTOCOL_VERSIONS else wire

    @staticmethod
    def reply(request_id: str | int, result: Mapping[str, Any]) -> bytes:
        """The JSON-RPC response carrying `result`, in JSON."""
        return _dumped({"jsonrpc": "2.0", "id": request_id, "result": result})

    @staticmethod
    def error_reply(request_id: str | int, error: MCPError) -> bytes:
        """The JSON-RPC error response for `error`, in JSON."""
        data = modern_error_data(error).model_dump(mode="json", by_alias=True, exclude_none=True)
        return _dumped({"jsonrpc": "2.0", "id": request_id, "error": data})

    async def _call(
        self,
        token: AccessToken | None,
        headers: Headers,
        request_id: str | int,
        params: dict[str, Any],
        version: str,
    ) -> FastPathReply | None:
        if not self.plain_call(params) or self._may_route_by_header(params["name"], headers):
            return None
        try:
            result = await self._adapter.call_plainly(
                params["name"], params.get("arguments"), params.get("_meta"), self._identify(token)
            )
        except MCPError as error:
            return _error(request_id, error)
        return _ok(request_id, self.call_result(result, version))

    def _may_route_by_header(self, name: str, headers: Headers) -> bool:
        """Whether ``Mcp-Param-*`` headers take part: sent, or declared by the tool's schema.

        The SDK then checks them against the arguments; the fast path leaves that to it.
        """
        for key in headers:  # a loop, not any(): a generator costs a call per header
            if key.startswith(_PARAM_HEADER):
                return True
        declared = self._param_headers_declared.get(name)
        if declared is None:
            schema = self._adapter.input_schema(name)
            declared = "x-mcp-header" in json.dumps(schema)
            self._param_headers_declared[name] = declared
        return declared

    def tool_list(self, version: str) -> dict[str, Any]:
        """The ``tools/list`` result at `version`: the same for every request."""
        listed = self._adapter.list_tools_plainly()
        result = self._fixed.get(version)
        if result is None:
            dumped = _dumped_model(listed)
            wire = spec_methods.serialize_server_result("tools/list", version, dumped)
            modern = version in MODERN_PROTOCOL_VERSIONS
            result = self._fixed[version] = self._stamped(wire) if modern else wire
        return result

    def _stamped(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """`result` with the server's identity, which every 2026-era result carries."""
        stamped = {**result}
        meta = result.get("_meta")
        if meta is None:
            stamped["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            stamped["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return stamped


def accepts_both(headers: Headers) -> bool:
    """Whether a request accepts JSON and SSE, as the SDK's transport requires of a POST."""
    accept = headers.get("accept", "")
    # A client sends the same Accept with every request: its verdict is remembered, for
    # the usual short ones only, so that no client can fill memory with long ones.
    if len(accept) <= _REMEMBERED_ACCEPT:
        return _remembered_accepts_both(accept)
    return _accepts_both(accept)


def _accepts_both(accept: str) -> bool:
    # The SDK's function reads a Request's Accept header only: this one, in a minimal scope.
    scope = {"type": "http", "headers": [(b"accept", accept.encode("latin-1"))]}
    has_json, has_sse = check_accept_headers(Request(scope))
    return has_json and has_sse


_remembered_accepts_both: Final = functools.lru_cache(maxsize=64)(_accepts_both)


def valid_params(message: dict[str, Any], version: str) -> bool:
    """Whether the SDK's kernel takes `message`'s method and params at `version`."""
    try:
        spec_methods.validate_client_request(message["method"], version, message.get("params"))
    except (KeyError, ValueError, pydantic.ValidationError):
        return False
    return True


def _dumped_model(model: pydantic.BaseModel) -> dict[str, Any]:
    """A handler's result as the SDK dumps it before shaping it for the wire."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _ok(request_id: str | int, result: Mapping[str, Any]) -> FastPathReply:
    return FastPathReply(200, FastPath.reply(request_id, result))


def _error(request_id: str | int, error: MCPError) -> FastPathReply:
    status = ERROR_CODE_HTTP_STATUS.get(modern_error_data(error).code, 200)
    return FastPathReply(status, FastPath.error_reply(request_id, error))
