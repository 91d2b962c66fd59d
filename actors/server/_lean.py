"""The lean path: 2026-era requests the gate answers itself, without the SDK's transport.

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
* one of `LEAN_METHODS`: ``tools/call`` of a tool that reaches nothing of the
  client's but its result (`McpAdapter.plain_tool`; its ``params`` hold only
  ``name``, ``arguments`` and ``_meta``, and no ``Mcp-Param-*`` header is
  involved), or ``tools/list``;
* that passes the checks the SDK makes first, with the SDK's own functions:
  no routing header twice, the envelope ladder (``_meta`` fields, headers that
  agree with the body, a supported version), and the params' shape for the
  method at that version.

Anything else goes on to the SDK, which answers it as before: the lean path
takes only what it answers exactly as the SDK would, byte for byte in the JSON
it sends (``tests/test_lean_http.py`` checks that request by request, beside
the SDK), and leaves every refusal to the SDK's own words.

The answer is one ``application/json`` body. The SDK answers these the same
way (it switches to a stream only for a handler that sends notifications, or
after 15 s of silence, to ping through idle proxies); a plain call's silence
is bounded by the runtime's call timeout instead.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import attrs
import pydantic
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY
from mcp_types import methods as spec_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.datastructures import Headers
    from starlette.types import Scope

    from protocol import Caller

    from ._mcp import McpAdapter

__all__ = ["LEAN_METHODS", "LeanPath"]

LEAN_METHODS: Final = frozenset({"tools/call", "tools/list"})
"""The methods the lean path answers itself (when the request is one it fully understands)."""
_ENVELOPE_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})
_CALL_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
_PARAM_HEADER: Final = MCP_PARAM_HEADER_PREFIX.lower()


def _dumped(value: object) -> bytes:
    """JSON as the SDK's 2026-era entry writes it."""
    return json.dumps(value, separators=(",", ":")).encode()


@final
@attrs.frozen
class _Exchange:
    """One request the lean path serves: whose, at which version, in which era."""

    request_id: str | int
    version: str
    """The version the result is shaped for: the envelope's, or what the session negotiated."""
    session_id: str | None
    """The 2025-era session (``Mcp-Session-Id``); None for a 2026-era request."""
    modern: bool
    """Whether this is a 2026-era request (every result stamped, errors mapped to statuses)."""


@final
class LeanPath:
    """Answers the requests described in this module's docstring.

    `identify` tells who sent a request (its token's label and tenant) from
    its ASGI scope and its session, as the SDK path's caller identification
    does. `sessions` is the SDK's session manager, whose sessions the 2025-era
    requests name.
    """

    def __init__(
        self,
        adapter: McpAdapter,
        identify: Callable[[Scope, str | None], Caller],
        sessions: StreamableHTTPSessionManager,
    ) -> None:
        self._adapter = adapter
        self._identify = identify
        self._sessions = _SdkSessions(sessions)
        # Identity is fixed at construction; the answers are serialized at once, never mutated.
        self._server_info = adapter.server.server_info_stamp
        self._lists: dict[str, dict[str, Any]] = {}
        self._param_headers_declared: dict[str, bool] = {}

    async def answer(self, scope: Scope, headers: Headers, message: Any) -> Response | None:
        """The response to a 2026-era `message` (a POST's parsed body), or None: the SDK's."""
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version not in MODERN_PROTOCOL_VERSIONS or not _plain_request(message):
            return None
        if not self._modern_checks_pass(scope, headers, message):
            return None
        exchange = _Exchange(message["id"], version, None, modern=True)
        return await self._serve(scope, headers, message, exchange)

    async def answer_in_session(
        self, scope: Scope, headers: Headers, message: Any, session_id: str, negotiated: str
    ) -> Response | None:
        """The response to `message` in the 2025-era session `session_id`, or None: the SDK's.

        `negotiated` is the version its ``initialize`` settled (the gate's session table).
        """
        sent = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if sent is not None and sent not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None  # the SDK serves it in the 2026 era, whatever its session header
        if not _plain_request(message) or not _accepts_both(scope):
            return None
        params = message.get("params")
        if _has_modern_envelope(params) or not _valid_params(message, negotiated):
            return None
        transport = self._sessions.live(session_id, scope)
        if transport is None:
            return None
        with _SdkSessions.in_flight(transport):
            exchange = _Exchange(message["id"], negotiated, session_id, modern=False)
            return await self._serve(scope, headers, message, exchange)

    async def _serve(
        self, scope: Scope, headers: Headers, message: dict[str, Any], exchange: _Exchange
    ) -> Response | None:
        method = message["method"]
        if method == "tools/list":
            return self._ok(exchange, self._tool_list(exchange))
        if method == "tools/call":
            return await self._call(scope, headers, message.get("params", {}), exchange)
        return None

    def _modern_checks_pass(self, scope: Scope, headers: Headers, message: dict[str, Any]) -> bool:
        """Whether the SDK would serve a 2026-era `message`: its own checks, in its order."""
        if message["method"] not in LEAN_METHODS or not _accepts_both(scope):
            return False
        if find_duplicated_routing_header(headers.items()) is not None:
            return False
        verdict = classify_inbound_request(message, headers=dict(headers))
        if isinstance(verdict, InboundLadderRejection):
            return False
        return _valid_params(message, verdict.protocol_version)

    async def _call(
        self, scope: Scope, headers: Headers, params: dict[str, Any], exchange: _Exchange
    ) -> Response | None:
        name = params.get("name")
        if (
            not isinstance(name, str)
            or not params.keys() <= _CALL_PARAMS
            or not self._adapter.plain_tool(name)
            or (exchange.modern and self._may_route_by_header(name, headers))
        ):
            return None
        caller = self._identify(scope, exchange.session_id)
        try:
            result = await self._adapter.call_plainly(
                name, params.get("arguments"), params.get("_meta"), caller
            )
        except MCPError as error:
            return self._error(exchange, error)
        # As the SDK's handler result dumps: a complete result (no question for the client).
        complete = {**result, "resultType": "complete"}
        wire = spec_methods.serialize_server_result("tools/call", exchange.version, complete)
        return self._ok(exchange, self._stamped(wire) if exchange.modern else wire)

    def _may_route_by_header(self, name: str, headers: Headers) -> bool:
        """Whether ``Mcp-Param-*`` headers take part: sent, or declared by the tool's schema.

        The SDK then checks them against the arguments; the lean path leaves that to it.
        """
        for key in headers:
            if key.startswith(_PARAM_HEADER):
                return True
        declared = self._param_headers_declared.get(name)
        if declared is None:
            schema = self._adapter.input_schema(name)
            declared = "x-mcp-header" in json.dumps(schema)
            self._param_headers_declared[name] = declared
        return declared

    def _tool_list(self, exchange: _Exchange) -> dict[str, Any]:
        """The ``tools/list`` result at the exchange's version: the same for every request."""
        listed = self._adapter.list_tools_plainly()
        result = self._lists.get(exchange.version)
        if result is None:
            dumped = _dumped_model(listed)
            wire = spec_methods.serialize_server_result("tools/list", exchange.version, dumped)
            result = self._stamped(wire) if exchange.modern else wire
            self._lists[exchange.version] = result
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

    @staticmethod
    def _ok(exchange: _Exchange, result: Mapping[str, Any]) -> Response:
        reply = {"jsonrpc": "2.0", "id": exchange.request_id, "result": result}
        return _json(reply, 200, exchange.session_id)

    @staticmethod
    def _error(exchange: _Exchange, error: MCPError) -> Response:
        """A JSON-RPC error: with its mapped HTTP status in the 2026 era, with 200 before."""
        wire = modern_error_data(error)
        data = wire.model_dump(mode="json", by_alias=True, exclude_none=True)
        status = ERROR_CODE_HTTP_STATUS.get(wire.code, 200) if exchange.modern else 200
        reply = {"jsonrpc": "2.0", "id": exchange.request_id, "error": data}
        return _json(reply, status, exchange.session_id)


@final
class _SdkSessions:
    """The SDK's 2025-era HTTP sessions, as its own transport checks and holds them.

    The SDK offers no public way to ask whether a session is alive and whose
    it is, or to hold it open while a request is served, so this reads and
    follows its session manager and transport as they are in mcp 2.x
    (``tests/test_lean_http.py`` fails if they change): the session must be
    one the manager serves, opened by the same credential, not terminated nor
    expiring; while a request is served its idle countdown is suspended, and it
    restarts when the last one ends, as `StreamableHTTPServerTransport.handle_request`
    does.
    """

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager

    def live(self, session_id: str, scope: Scope) -> StreamableHTTPServerTransport | None:
        """The transport of `session_id` if the SDK would serve this request in it."""
        transport = self._manager._server_instances.get(session_id)
        if transport is None or transport.is_terminated:
            return None
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        if requestor != self._manager._session_owners.get(session_id):
            return None
        idle = transport.idle_scope
        return None if idle is None or idle.cancel_called else transport

    @staticmethod
    @contextmanager
    def in_flight(transport: StreamableHTTPServerTransport) -> Iterator[None]:
        """Hold the session open while a request is served, as its transport does."""
        idle, timeout = transport.idle_scope, transport._idle_timeout
        # `live` admits only sessions with an idle countdown.
        assert idle is not None
        assert timeout is not None
        transport._requests_in_flight += 1
        idle.deadline = math.inf
        try:
            yield
        finally:
            transport._requests_in_flight -= 1
            if not transport._requests_in_flight:
                idle.deadline = anyio.current_time() + timeout


def _accepts_both(scope: Scope) -> bool:
    """Whether the request accepts JSON and SSE, as the SDK's transport requires of a POST."""
    has_json, has_sse = check_accept_headers(Request(scope))
    return has_json and has_sse


def _valid_params(message: dict[str, Any], version: str) -> bool:
    """Whether the SDK's kernel takes `message`'s method and params at `version`."""
    if message["method"] not in LEAN_METHODS:
        return False
    try:
        spec_methods.validate_client_request(message["method"], version, message.get("params"))
    except (KeyError, ValueError, pydantic.ValidationError):
        return False
    return True


def _has_modern_envelope(params: Any) -> bool:
    """Whether `params` carry the 2026 envelope, which the SDK refuses on a 2025-era session."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _dumped_model(model: pydantic.BaseModel) -> dict[str, Any]:
    """A handler's result as the SDK dumps it before shaping it for the wire."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _plain_request(message: Any) -> bool:
    """Whether `message` is one JSON-RPC request of the plainest shape (see the docstring)."""
    if not isinstance(message, dict) or not message.keys() <= _ENVELOPE_MEMBERS:
        return False
    request_id = message.get("id")
    return (
        message.get("jsonrpc") == "2.0"
        and isinstance(request_id, (str, int))
        and not isinstance(request_id, bool)
        and isinstance(message.get("method"), str)
        and isinstance(message.get("params", {}), dict)
    )


def _json(reply: Mapping[str, Any], status: int, session_id: str | None) -> Response:
    headers = None if session_id is None else {MCP_SESSION_ID_HEADER: session_id}
    return Response(
        _dumped(reply), status_code=status, media_type="application/json", headers=headers
    )
