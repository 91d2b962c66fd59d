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
* one of `PLAIN_METHODS` (`actors.server.mcp._plain`): ``tools/call`` of a tool
  that reaches nothing of the client's but its result (`PlainAnswers.plain_call`;
  its ``params`` hold only ``name``, ``arguments`` and ``_meta``, and no
  ``Mcp-Param-*`` header is involved), or ``tools/list``;
* that passes the checks the SDK makes first, in its order: no routing header
  twice, the envelope ladder (``_meta`` fields, headers that agree with the
  body, a supported version: `envelope_version`), and the params' shape for the
  method at that version (`valid_params`), each decided as the SDK's own
  function decides it (without pydantic for the usual shapes).

Anything else goes on to the SDK, which answers it: the fast path
takes only what it answers exactly as the SDK would, with the same status and
the same JSON (``tests/server/test_fast_path.py`` checks that request by request,
beside the SDK), and leaves every refusal to the SDK's own words.

The gate asks it after its own checks; so does the wire's fast handler
(`actors.server.http._app.FastPathWire`), after the same checks, so that on our own
server such a request never becomes an ASGI scope.

The answer is one ``application/json`` body (`FastPathReply`), the same JSON the
SDK sends (`PlainAnswers`). The SDK
answers these the same way (it switches to a stream only for a handler that
sends notifications, or after 15 s of silence, to ping through idle proxies); a
plain call's silence is bounded by the runtime's call timeout instead.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Final, final

import attrs
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    decode_header_value,
    find_duplicated_routing_header,
)
from mcp_types import CLIENT_CAPABILITIES_META_KEY, HEADER_MISMATCH, PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response

from ..mcp._plain import PlainAnswers, envelope_version, plain_request, valid_params

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mcp.server.auth.provider import AccessToken
    from starlette.datastructures import Headers
    from starlette.types import Receive, Scope, Send

    from protocol import Caller

    from ..mcp._adapter import McpAdapter

__all__ = ["UNREADABLE_NAME", "FastPath", "FastPathReply", "accepts_both", "unreadable_name"]

_PARAM_HEADER: Final = MCP_PARAM_HEADER_PREFIX.lower()
_ENVELOPE_KEYS: Final = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY})
UNREADABLE_NAME: Final = (
    "Header mismatch: the Mcp-Name header's base64 payload holds characters beyond ASCII"
)
"""The refusal of a request whose ``Mcp-Name`` the SDK's decoder cannot read (see
`unreadable_name`)."""
_JSON: Final = "application/json"
_REMEMBERED_ACCEPT: Final = 256
"""The longest ``Accept`` whose verdict `accepts_both` remembers (64 at most)."""


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
        self.answers: Final = PlainAnswers(adapter)
        """The answers, as the SDK shapes them (shared with the 2025 era's sessions)."""
        self._adapter = adapter
        self._identify = identify
        self._param_headers_declared: dict[str, bool] = {}

    async def answer(
        self, headers: Headers, message: Any, token: AccessToken | None
    ) -> FastPathReply | None:
        """The response to `message` (the parsed body of a POST with `headers`, sent with
        `token`), or None: the SDK's to answer."""
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version not in MODERN_PROTOCOL_VERSIONS or not plain_request(message):
            return None
        if unreadable_name(headers, message):
            return _error(message["id"], MCPError(HEADER_MISMATCH, UNREADABLE_NAME))
        # The SDK's own checks, in its order.
        if not accepts_both(headers) or find_duplicated_routing_header(headers.items()):
            return None
        enveloped = envelope_version(message, headers)
        if enveloped is None or not valid_params(message, enveloped):
            return None
        if message["method"] == "tools/call":
            return await self._call(token, headers, message["id"], message["params"], version)
        return _ok(message["id"], self.answers.tool_list(version))

    async def _call(
        self,
        token: AccessToken | None,
        headers: Headers,
        request_id: str | int,
        params: dict[str, Any],
        version: str,
    ) -> FastPathReply | None:
        if not self.answers.plain_call(params) or self._may_route_by_header(
            params["name"], headers
        ):
            return None
        try:
            result = await self._adapter.call_plainly(
                params["name"], params.get("arguments"), params.get("_meta"), self._identify(token)
            )
        except MCPError as error:
            return _error(request_id, error)
        return _ok(request_id, self.answers.call_result(result, version))

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


def unreadable_name(headers: Mapping[str, str], message: Any) -> bool:
    """Whether the SDK's envelope ladder would fail on `message`'s ``Mcp-Name`` header.

    The SDK means a malformed base64 sentinel (``=?base64?…?=``) to read as no value (a
    header mismatch), but one whose payload holds a character beyond ASCII makes its
    decoder raise: unanswered, every such request was a 500 and a traceback in the log.
    The ladder reads the header only on its header rung, for a name-bearing method whose
    name is in the body (`classify_inbound_request`): so does this.
    """
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not meta.keys() >= _ENVELOPE_KEYS:
        return False
    sent = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    method = message.get("method")
    if sent is None or sent != meta[PROTOCOL_VERSION_META_KEY]:
        return False
    if not isinstance(method, str) or headers.get(MCP_METHOD_HEADER) != method:
        return False
    name_key = NAME_BEARING_METHODS.get(method)
    if name_key is None or params.get(name_key) is None:
        return False
    try:
        decode_header_value(headers.get(MCP_NAME_HEADER))
    except ValueError:
        return True
    return False


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


def _ok(request_id: str | int, result: Mapping[str, Any]) -> FastPathReply:
    return FastPathReply(200, PlainAnswers.reply(request_id, result))


def _error(request_id: str | int, error: MCPError) -> FastPathReply:
    status = ERROR_CODE_HTTP_STATUS.get(modern_error_data(error).code, 200)
    return FastPathReply(status, PlainAnswers.error_reply(request_id, error))
