"""The fast path in a 2025-era session: a plain call answered on a resumable stream of our own.

A client of the handshake era sends its requests in an HTTP session that the
SDK opened with ``initialize`` (``Mcp-Session-Id``). The fast path answers
its ``tools/call`` of a plain tool, and its ``tools/list``, without the SDK's
transport, and without giving up what that transport promises:

* **The same checks.** The session must be one the SDK serves, opened by the
  same credential, not terminated nor expiring (the gate has checked that it
  tracks it for this principal and path); the params must have the shape the
  SDK's kernel takes at the version the session negotiated, and carry no 2026
  envelope (which the SDK refuses in a session).
* **The session held open.** While the call is served, the session's idle
  countdown is suspended, and it restarts when the last request ends, as the
  SDK's transport does for its own requests.
* **A resumable stream, where one can be resumed.** The answer is an SSE
  stream, as the SDK's. For clients of 2025-11-25 and later, a priming event
  (an id, ``retry``, no data) is stored and sent before the call runs, and the
  result is stored and sent as the next event. A client whose connection drops
  reconnects with ``GET`` and ``Last-Event-ID``, which the SDK serves from the
  same event store; if the call is still running then, its result goes to the
  resumed stream when it ends, as the SDK's own router would send it. Both
  events are kept: a write the kernel took is not a reply the client read,
  and a client cut off after it resumes from the priming event and must find
  the result there.
* **Nothing stored that no one can ask for.** Clients of 2025-03-26 and
  2025-06-18 read no priming event: the result is the stream's first and last
  event, so before it arrives the client holds no id to resume from, and
  after it there is nothing to resume (a replay sends only the events *after*
  the id it names). So its result is sent with an id, as the SDK sends it,
  but not stored: kept, it would only push out the events of streams that can
  be resumed, and a ``GET`` naming it gets the store's 404 rather than an
  empty stream that never ends.
* **The head at once.** The response starts before the call runs (with the
  priming event, where there is one), and the result follows in a second
  write: a client cut off meanwhile must have had the head (`SessionCall.stream`).
  Only a reply ready at once, a tool list, leaves in the same write as the
  head, and the end of the body with it.

The SDK offers no public way to ask whether a session is alive and whose it
is, to hold it open, or to reach a resumed stream, so `_SdkSessions` reads and
follows its session manager and transport as they are in mcp 2.x
(``tests/server/test_fast_path.py`` fails if they change).
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any, Final, final

import anyio
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, EventMessage
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ..mcp._plain import plain_request, valid_params
from ._event_store import RETRY_INTERVAL_MS, event_id
from ._fast_path import accepts_both

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager

    from mcp.server.auth.provider import AccessToken
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.datastructures import Headers
    from starlette.types import Receive, Scope, Send

    from protocol import Caller

    from ..mcp._adapter import McpAdapter
    from ._event_store import BoundedEventStore, SessionScopes
    from ._fast_path import FastPath
    from ._server import BodySend

__all__ = ["SessionCall", "SessionCalls"]

_PRIMED_FROM: Final = "2025-11-25"
"""The first version whose clients read a priming event (an event without data)."""
_SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
)
_SESSION_HEADER: Final = MCP_SESSION_ID_HEADER.lower().encode()
_PRIMING: Final = b"id: %b\r\nretry: %d\r\ndata: \r\n\r\n"
"""A priming event: its id and the ``retry`` interval, no data."""
_REPLY: Final = b"id: %b\r\nevent: message\r\ndata: %b\r\n\r\n"
"""A message event: its id and the JSON-RPC reply."""


@final
class SessionCalls:
    """Answers plain calls and tool lists in 2025-era sessions (this module's docstring)."""

    def __init__(
        self,
        lean: FastPath,
        adapter: McpAdapter,
        identify: Callable[[AccessToken | None, str | None], Caller],
        manager: StreamableHTTPSessionManager,
        events: BoundedEventStore,
        scopes: SessionScopes,
    ) -> None:
        self._answers = lean.answers
        self._adapter = adapter
        self._identify = identify
        self._sessions = _SdkSessions(manager)
        self._events = events
        self._scopes = scopes

    def answer(
        self,
        headers: Headers,
        message: Any,
        token: AccessToken | None,
        session_id: str,
        negotiated: str,
        held: AbstractContextManager[object],
    ) -> SessionCall | None:
        """The answer to `message`, sent with `token`, in the session `session_id`, or None:
        the SDK's.

        `negotiated` is the version its ``initialize`` settled (the gate's session
        table), `held` what keeps the gate counting the request in flight meanwhile.
        """
        sent = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if sent is not None and sent not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None  # the SDK serves it in the 2026 era, whatever its session header
        if not plain_request(message) or not accepts_both(headers):
            return None
        params = message.get("params")
        if _has_modern_envelope(params) or not valid_params(message, negotiated):
            return None
        if message["method"] == "tools/call" and not self._answers.plain_call(params):
            return None
        transport = self._sessions.live(session_id, token)
        if transport is None:
            return None
        caller = self._identify(token, session_id)
        return SessionCall(self, transport, message, caller, token, session_id, negotiated, held)

    def ready(self, message: dict[str, Any], version: str) -> bytes | None:
        """The JSON-RPC reply to `message` at the session's `version` if it is ready at once
        (a tool list), else None: a call's, which `result` waits for."""
        if message["method"] == "tools/list":
            return self._answers.reply(message["id"], self._answers.tool_list(version))
        return None

    async def result(self, message: dict[str, Any], caller: Caller, version: str) -> bytes:
        """The JSON-RPC reply to `message`, a ``tools/call``, in JSON, at the session's
        `version`."""
        request_id = message["id"]
        params = message.get("params", {})
        try:
            result = await self._adapter.call_plainly(
                params["name"], params.get("arguments"), params.get("_meta"), caller
            )
        except MCPError as error:
            return self._answers.error_reply(request_id, error)
        return self._answers.reply(request_id, self._answers.call_result(result, version))


@final
class SessionCall:
    """One answer in a session: an SSE stream with a priming event, then the reply.

    The wire's fast handler sends its pieces (`stream`) behind the `headers`;
    as an ASGI app, it sends them as ASGI messages.
    """

    def __init__(
        self,
        calls: SessionCalls,
        transport: StreamableHTTPServerTransport,
        message: dict[str, Any],
        caller: Caller,
        token: AccessToken | None,
        session_id: str,
        version: str,
        held: AbstractContextManager[object],
    ) -> None:
        self._calls = calls
        self._transport = transport
        self._message = message
        self._caller = caller
        self._token = token
        self._version = version
        self._held = held
        self._session_id = session_id
        self.headers: Final = (*_SSE_HEADERS, (_SESSION_HEADER, session_id.encode()))
        """The response's headers (status 200): an SSE stream in the session."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the answer as an ASGI app: headers first, then each piece as it is ready."""
        started = False

        async def piece(body: bytes, more: bool) -> None:
            nonlocal started
            if not started:
                started = True
                await send({"type": "http.response.start", "status": 200, "headers": self.headers})
            await send({"type": "http.response.body", "body": body, "more_body": more})

        await self.stream(piece)

    async def stream(self, send: BodySend) -> None:
        """Send the body: the priming event (or nothing) at once, the reply once it is ready.

        The first piece goes before the call runs, even when it is empty: it
        starts the response. A client cut off after the head learns that its
        call is lost (the SDK's fails that call alone); one cut off before it
        sees only a dropped connection (the SDK's client then fails as a whole),
        and one of 2025-11-25 resumes from the priming event. A reply ready at
        once (a tool list) leaves no such moment: it goes with the head.
        """
        stream_id = str(self._message["id"])
        resumable = self._version >= _PRIMED_FROM  # the dates of versions compare as strings
        with self._held, _SdkSessions.in_flight(self._transport), self._stored_for(resumable):
            events = self._calls._events
            first = b""
            if resumable:
                first = _PRIMING % (events.store_json(stream_id, None).encode(), RETRY_INTERVAL_MS)
            reply = self._calls.ready(self._message, self._version)
            if reply is None:
                await send(first, True)
                first = b""
                reply = await self._calls.result(self._message, self._caller, self._version)
            # Not stored where no client can resume: this module's docstring says why.
            sent_as = events.store_json(stream_id, reply) if resumable else event_id()
            self._to_resumed_stream(stream_id, reply, sent_as)
            await send(first + _REPLY % (sent_as.encode(), reply), False)

    def _stored_for(self, resumable: bool) -> AbstractContextManager[object]:
        """Where the events stored meanwhile go: the session's scope, if it keeps any."""
        if not resumable:
            return contextlib.nullcontext()
        return self._calls._scopes.session(self._session_id, self._token)

    def _to_resumed_stream(self, stream_id: str, reply: bytes, sent_as: str) -> None:
        """Hand the reply to a stream the client resumed while the call ran, if there is one.

        Stored first (where it is stored at all), in the same step: a resume that
        replays the store after this finds it there, one whose replay had ended is
        waiting on its live stream.
        """
        live = self._transport._request_streams.get(stream_id)
        if live is None:
            return
        message = types.jsonrpc_message_adapter.validate_json(reply)
        try:
            live[0].send_nowait(EventMessage(message, sent_as))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the resumed stream is full or gone: the client resumes again, from the store


@final
class _SdkSessions:
    """The SDK's 2025-era HTTP sessions, as its own transport checks and holds them."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager

    def live(
        self, session_id: str, token: AccessToken | None
    ) -> StreamableHTTPServerTransport | None:
        """The transport of `session_id` if the SDK would serve a request with `token` in it."""
        manager = self._manager
        transport = manager._server_instances.get(session_id)
        if transport is None or transport.is_terminated:
            return None
        # The SDK's own owner check: client_id, issuer and subject. An OAuth token's
        # client_id names its tenant too (`actors.server.auth._oauth`), so the same subject of
        # another tenant is another owner here as in the gate.
        requestor = None if token is None else authorization_context(AuthenticatedUser(token))
        if requestor != manager._session_owners.get(session_id):
            return None
        idle = transport.idle_scope
        return None if idle is None or idle.cancel_called else transport

    @staticmethod
    @contextlib.contextmanager
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


def _has_modern_envelope(params: Any) -> bool:
    """Whether `params` carry the 2026 envelope, which the SDK refuses in a session."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
