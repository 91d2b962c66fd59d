"""The ASGI gate in front of the SDK's Streamable HTTP app: what reaches it, and how often.

For each HTTP request, in order (after `actors.server.http._host_rules` checked its
``Host`` and ``Origin``):

1. **Bearer token** (401; with OAuth also 403 for a token without the tenant
   or scopes it needs, and 503 while the issuer's keys cannot be fetched) and
   **declared body size** (413) are checked from the headers alone. What
   checks the token is an `Authenticator` (`actors.server.http._app`: static
   tokens, then OAuth); a refusal is an `AuthRefusal`, with its status and
   headers.
2. A POST body is read whole, at most ``max_body`` bytes (413 beyond, also
   for chunked bodies), and screened by `actors.server.mcp._jsonrpc`: what the SDK
   would drop or answer without the request's id is answered here, with it
   (400); a batch is split into single messages for the SDK and answered as
   one array (on a session that negotiated 2025-03-26) or refused request by
   request (any other version).
3. A request that may open a session is refused (429) once its **principal**
   — the token, or every anonymous client together — holds
   ``max_sessions_per_token`` open sessions, once its tenant holds its share
   of the `MAX_OPEN_SESSIONS` the SDK keeps (`actors.server._fair_shares`: many
   tokens of one tenant do not take every session, invariant 10), or once all
   of them are open; `SessionTable` says which are.
4. A POST the fast path takes (`actors.server.http._fast_path`; in a
   2025-era session, `actors.server.http._fast_path_sessions`) is answered
   there. Everything else goes to the SDK's session manager unchanged: the
   body it gets is the one read here, replayed.

Refusals
--------
Each refusal is a JSON-RPC error in the body, which the SDK's client
surfaces as is. They are logged through `RefusalLog`: the first of a kind at
once, later ones counted and summarized at most once per interval, so that a
flood of unauthenticated requests cannot fill the log.

Our own server (`actors.server.http._server`) serves this gate under
``serve --http``. An application may serve it with its own ASGI server
(`actors.server.http._endpoint`), and a trio application's is hypercorn, where
a refusal sent while the client is still uploading its body races: when the
client hangs up after reading the answer, hypercorn closes the connection
from its reading task without the lock its sending task holds, and the last
write of the answer fails with ``trio.BusyResourceError``, which hypercorn
logs as an ERROR with a traceback. The answer had gone out; the gate takes
that error as the client having left, never as a failure.
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import attrs
import pydantic_core
from mcp import types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import DEFAULT_MAX_SESSIONS
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import HEADER_MISMATCH
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.responses import Response

from .._fair_shares import ANONYMOUS, Bound, FairShares, Full, Principal
from ..auth._principals import (
    Authenticator,
    AuthRefusal,
    access_token_of,
    principal_of,
    scope_principal,
)
from ..mcp._jsonrpc import Accept, Answer, BatchReply, Ignore, Reply, plan_batch, screen
from ._fast_path import UNREADABLE_NAME, unreadable_name
from ._responses import RefusalLog, answer_early, error_response, reply_response

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from mcp.server.auth.provider import AccessToken
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ._fast_path import FastPath
    from ._fast_path_sessions import SessionCall, SessionCalls

__all__ = [
    "DEFAULT_MAX_SESSIONS_PER_TOKEN",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "MAX_OPEN_SESSIONS",
    "Gate",
    "HeaderRefusal",
    "SessionTable",
]

DEFAULT_MAX_SESSIONS_PER_TOKEN: Final = 100
"""Open HTTP sessions one token (or every anonymous client together) may hold at once."""
MAX_OPEN_SESSIONS: Final = DEFAULT_MAX_SESSIONS
"""Open HTTP sessions over all clients: the SDK's own bound, which the gate keeps first,
sharing it fairly among tenants."""
DEFAULT_SESSION_IDLE_TIMEOUT: Final = 600.0
"""Seconds an HTTP session may go without a request in flight before it is closed."""
DEFAULT_MAX_BATCH: Final = 32
"""Messages in one JSON-RPC batch: its replies are held until the last one is ready."""


_SSE: Final = "text/event-stream"

logger = logging.getLogger("actors.serve")


@attrs.define(eq=False)
class _Session:
    principal: Principal
    version: str
    """The protocol version its ``initialize`` negotiated."""
    path: str
    """Where it was opened: requests elsewhere never reach it, whatever they are answered."""
    in_flight: int = 1
    idle_since: float = 0.0


@final
class SessionTable:
    """The open HTTP sessions of each principal, as seen from the gate.

    The SDK's session manager owns the sessions; this table follows them from
    the requests and responses that pass through the gate:

    * a session opens with the response that carries its new
      ``Mcp-Session-Id``, and its principal and path are the ones of that
      request;
    * it ends only with what ends it in the SDK: a DELETE answered with
      success, or no request in flight for `idle_timeout` seconds. The SDK is
      given the same timeout and starts its timer when its part of the last
      request ends, before the gate's does, so the table never lets go of a
      session the SDK still keeps.

    A 404 ends nothing: the event store answers 404 to a made-up
    ``Last-Event-ID`` on a live session, and the app to any path but the
    session's; taken as the session's end, either let a client free its place
    while the SDK kept the session, and open sessions without bound. (A
    session the SDK lost otherwise, its task crashing, keeps its place until
    the idle timeout.) Only requests at the session's path count.

    A request that may open a session holds a place for its principal while
    it is served, so that many sent at once cannot overshoot the limit. The
    places are `FairShares`: ``limit`` per principal, and at most
    `MAX_OPEN_SESSIONS` in all, of which each tenant holds its share.
    """

    def __init__(self, limit: int, idle_timeout: float) -> None:
        if limit < 1:
            msg = f"max_sessions_per_token must be at least 1, got {limit}"
            raise ValueError(msg)
        if not idle_timeout > 0:
            msg = f"session_idle_timeout must be positive, got {idle_timeout}"
            raise ValueError(msg)
        self.idle_timeout: Final = idle_timeout
        self._places = FairShares(MAX_OPEN_SESSIONS, limit)
        self.total: Final = self._places.total
        """Sessions open at once over all principals: give the SDK the same bound."""
        self._sessions: dict[str, _Session] = {}
        # The sessions with no request in flight, the longest idle first: the ones
        # to expire are at the front.
        self._idle: dict[str, None] = {}

    def held(self, principal: Principal) -> int:
        """How many sessions `principal` has open or is opening."""
        self._expire()
        return self._places.held(principal)

    def reserve(self, principal: Principal) -> Full | None:
        """Hold a place for a session `principal` may open; None, or why there is none."""
        self._expire()
        return self._places.take(principal)

    def unreserve(self, principal: Principal) -> None:
        """The request that held a place has ended without opening a session."""
        self._places.give_back(principal)

    def opened(self, session_id: str, principal: Principal, version: str, path: str) -> None:
        """A response to a request at `path` named the new session `session_id`, still in flight.

        The place the request held becomes the session's, and is not counted again:
        counted twice for a moment, it would refuse another opening one below the limit.
        """
        self._sessions[session_id] = _Session(principal, version, path)

    def tracked(self, session_id: str | None, principal: Principal, path: str) -> _Session | None:
        """`session_id`'s session, if tracked here as opened by `principal` at `path`."""
        session = None if session_id is None else self._sessions.get(session_id)
        if session is None or session.principal != principal or session.path != path:
            return None  # the SDK refuses another principal's session, the app another path (404)
        return session

    def enter(self, session_id: str | None, principal: Principal, path: str) -> _Session | None:
        """A request at `path` for `session_id` by `principal` goes on; its session, if tracked."""
        session = self.tracked(session_id, principal, path)
        if session is not None and session_id is not None:
            self._busy(session_id, session)
        return session

    @contextmanager
    def serving(self, session_id: str) -> Iterator[None]:
        """Within the block, a request the session table `tracked` is in flight in `session_id`."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._busy(session_id, session)
        try:
            yield
        finally:
            self.leave(session_id, status=200, deleted=False)

    def leave(self, session_id: str, *, status: int | None, deleted: bool) -> None:
        """A request for the tracked `session_id` is over, answered with `status`."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        session.in_flight -= 1
        if deleted and status is not None and status < 300:
            self._forget(session_id)
        elif not session.in_flight:
            session.idle_since = anyio.current_time()
            self._idle.pop(session_id, None)
            self._idle[session_id] = None  # the most recently idle: last

    def version(self, session_id: str | None, principal: Principal) -> str | None:
        """The protocol version `principal`'s session `session_id` negotiated, if tracked."""
        session = None if session_id is None else self._sessions.get(session_id)
        return session.version if session is not None and session.principal == principal else None

    def _busy(self, session_id: str, session: _Session) -> None:
        session.in_flight += 1
        self._idle.pop(session_id, None)

    def _expire(self) -> None:
        """Forget every session idle for `idle_timeout`: their places count for nobody."""
        now = anyio.current_time()
        while self._idle:
            oldest = next(iter(self._idle))
            if now - self._sessions[oldest].idle_since < self.idle_timeout:
                return
            self._forget(oldest)

    def _forget(self, session_id: str) -> None:
        session = self._sessions.pop(session_id)
        self._idle.pop(session_id, None)
        self._places.give_back(session.principal)


@final
@attrs.frozen
class HeaderRefusal:
    """A request the gate refuses from its headers alone: the answer, and its log entry."""

    response: Response
    """The answer: a JSON-RPC error, with its status and headers."""
    kind: str
    """How `RefusalLog` counts it."""
    detail: str = ""
    """What the log adds to the kind."""


class _Disconnected(Exception):
    """The client went away before its request body was whole."""


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or ``None`` once it exceeds `limit` bytes."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """`receive` for the SDK: the body read by the gate, then whatever else comes."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _sse_messages(body: bytes) -> list[Any]:
    """The JSON messages in the ``data`` of each event of an SSE stream."""
    messages = []
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(
            line.removeprefix(b"data:").removeprefix(b" ")
            for line in event.split(b"\n")
            if line.startswith(b"data:")
        )
        if data.strip():
            with suppress(ValueError):
                messages.append(json.loads(data))
    return messages


@attrs.define
class _Answered:
    """What the SDK answered one request with."""

    status: int | None = None
    headers: Headers | None = None
    body: bytearray = attrs.field(factory=bytearray)

    async def capture(self, message: Message) -> None:
        """The ``send`` given to the SDK."""
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = Headers(raw=message.get("headers", []))
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")

    def messages(self) -> list[Any]:
        """The JSON-RPC messages in the body, JSON or SSE."""
        kind = "" if self.headers is None else self.headers.get("content-type", "")
        if kind.startswith(_SSE):
            return _sse_messages(bytes(self.body))
        with suppress(ValueError):
            return [json.loads(self.body)]
        return []


@final
class Gate:
    """ASGI middleware in front of the SDK's app: the checks in this module's docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        auth: Authenticator | None,
        max_body: int,
        sessions: SessionTable,
        refusals: RefusalLog,
        max_batch: int = DEFAULT_MAX_BATCH,
        lean: FastPath | None = None,
        in_sessions: SessionCalls | None = None,
    ) -> None:
        # AuthContextMiddleware exposes the token to the SDK (get_access_token).
        self._app = AuthContextMiddleware(app)
        self._lean = lean
        self._in_sessions = in_sessions
        self._auth = auth
        self._max_body = max_body
        self._sessions = sessions
        self._refusals = refusals
        self._max_batch = max_batch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events go straight through
            await self._app(scope, receive, send)
            return
        refusal = await self._check_headers(scope)
        if refusal is not None:
            await answer_early(refusal, scope, receive, send)
            return
        if scope["method"] != "POST":
            session_id = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
            await self._forward(scope, receive, send, session_id=session_id, request_id=None)
            return
        try:
            body = await _read_body(receive, self._max_body)
        except _Disconnected:
            logger.debug("http: the client left before its request body was whole")
            return
        if body is None:
            self._refusals.refused("an oversized body", scope=scope)
            await answer_early(self._too_large(), scope, receive, send)
            return
        await self._post(scope, body, receive, send)

    async def _post(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """Screen a POST's body; pass what the SDK can take on, answer the rest here."""
        headers = Headers(scope=scope)
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        if not headers.get("content-type", "").startswith("application/json"):
            # Not offered as JSON: the SDK refuses it (415) without reading it as JSON-RPC.
            replayed = _replayed(body, receive)
            await self._forward(scope, replayed, send, session_id=session_id, request_id=None)
            return
        try:
            value = pydantic_core.from_json(body)
        except ValueError as error:
            self._refusals.refused("a body that is not JSON", scope=scope)
            reply = Reply.of(None, types.PARSE_ERROR, f"Parse error: Invalid JSON: {error}")
            await reply_response(400, reply)(scope, receive, send)
            return
        if isinstance(value, list):
            await self._batch(scope, value, receive, send)
            return
        if unreadable_name(headers, value):
            self._refusals.refused("an unreadable Mcp-Name header", scope=scope)
            reply = Reply.of(_request_id(value), HEADER_MISMATCH, UNREADABLE_NAME)
            await reply_response(400, reply)(scope, receive, send)
            return
        if self._lean is not None and scope["path"] == self._lean.path:
            if session_id is not None and self._in_sessions is not None:
                if await self._lean_in_session(scope, headers, value, session_id, receive, send):
                    return
            else:
                answer = await self._lean.answer(headers, value, access_token_of(scope))
                if answer is not None:
                    await answer(scope, receive, send)
                    return
        match screen(value):
            case Answer(reply):
                self._refusals.refused("a malformed JSON-RPC message", reply.error.message, scope)
                await reply_response(400, reply)(scope, receive, send)
            case Ignore(problem):
                self._refusals.refused("a malformed notification", problem, scope)
                await Response(status_code=202)(scope, receive, send)
            case Accept(message):
                request_id = message.id if isinstance(message, types.JSONRPCRequest) else None
                opening = (
                    message.params
                    if isinstance(message, types.JSONRPCRequest) and message.method == "initialize"
                    else None
                )
                await self._forward(
                    scope,
                    _replayed(body, receive),
                    send,
                    session_id=session_id,
                    request_id=request_id,
                    initialize=opening,
                )

    async def _lean_in_session(
        self,
        scope: Scope,
        headers: Headers,
        message: Any,
        session_id: str,
        receive: Receive,
        send: Send,
    ) -> bool:
        """Serve `message` on the fast path in a session this gate tracks; whether it did."""
        token = access_token_of(scope)
        answer = self.session_call(headers, message, token, session_id, scope["path"])
        if answer is None:
            return False
        await answer(scope, receive, send)
        return True

    def session_call(
        self,
        headers: Headers,
        message: Any,
        token: AccessToken | None,
        session_id: str,
        path: str,
    ) -> SessionCall | None:
        """The fast path's answer to `message`, a POST to `path` in the 2025-era session
        `session_id` sent with `token`; None: the SDK's to answer (or to refuse).

        The session must be one this gate tracks for the token's principal at
        `path`; while the answer streams, it counts as a request in flight. The
        wire's fast handler asks it too (`actors.server.http._app`).
        """
        if self._in_sessions is None:
            return None
        session = self._sessions.tracked(session_id, principal_of(token), path)
        if session is None:
            return None  # the SDK's to refuse: unknown, another principal's, another path
        return self._in_sessions.answer(
            headers, message, token, session_id, session.version, self._sessions.serving(session_id)
        )

    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        session_id: str | None,
        request_id: types.RequestId | None,
        initialize: Mapping[str, Any] | None = None,
    ) -> None:
        """Hand the request to the SDK, keeping the session table up to date."""
        principal = scope_principal(scope)
        if session_id is None and _may_open_a_session(scope):
            await self._open(scope, receive, send, principal, request_id, initialize)
            return
        session = self._sessions.enter(session_id, principal, scope["path"])
        if session is not None:
            scope = _at_negotiated_version(scope, session.version)
        status: int | None = None

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, watch if session is not None else send)
        finally:
            if session is not None and session_id is not None:
                deleted = scope["method"] == "DELETE"
                self._sessions.leave(session_id, status=status, deleted=deleted)

    async def _open(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        principal: Principal,
        request_id: types.RequestId | None,
        initialize: Mapping[str, Any] | None,
    ) -> None:
        """A request without a session: it may open one, if its principal has room."""
        full = self._sessions.reserve(principal)
        if full is not None:
            self._refusals.refused(_OVER[full.bound], str(principal), scope)
            await self._too_many_sessions(full, request_id)(scope, receive, send)
            return
        opened: str | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID_HEADER)
                if opened is not None:
                    version = _negotiated(initialize)
                    self._sessions.opened(opened, principal, version, scope["path"])
            await send(message)

        try:
            await self._app(scope, receive, watch)
        finally:
            if opened is None:
                self._sessions.unreserve(principal)
            else:
                self._sessions.leave(opened, status=200, deleted=False)

    async def _batch(self, scope: Scope, elements: list[Any], receive: Receive, send: Send) -> None:
        """A JSON-RPC batch: its messages go to the SDK one by one; one array comes back."""
        session_id = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        principal = scope_principal(scope)
        version = self._sessions.version(session_id, principal)
        plan = plan_batch(elements, version, self._max_batch)
        for problem in plan.ignored:
            self._refusals.refused("a notification in a batch", problem, scope)
        if plan.whole is not None:
            self._refusals.refused("a batch", plan.whole.error.message, scope)
            await reply_response(400, plan.whole)(scope, receive, send)
            return
        replies: list[dict[str, Any]] = [
            reply.model_dump(mode="json", by_alias=True, exclude_unset=True)
            for reply in plan.answers
        ]
        if plan.dispatch:
            assert session_id is not None  # only a tracked session gets a version
            session = self._sessions.enter(session_id, principal, scope["path"])
            try:
                replies += await self._dispatch(scope, plan.dispatch, receive)
            finally:
                if session is not None:
                    self._sessions.leave(session_id, status=200, deleted=False)
        elif plan.answers:
            self._refusals.refused("a batch", plan.answers[0].error.message, scope)
        if replies:
            await reply_response(200, BatchReply(replies))(scope, receive, send)
        else:
            await Response(status_code=202)(scope, receive, send)

    async def _dispatch(
        self, scope: Scope, messages: tuple[types.JSONRPCMessage, ...], receive: Receive
    ) -> list[dict[str, Any]]:
        """Send each message to the SDK as a request of its own, at once; the replies."""
        replies: list[dict[str, Any]] = []
        left = anyio.Event()

        async def watch_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            left.set()

        async def after_body() -> Message:
            await left.wait()
            return {"type": "http.disconnect"}

        async def one(message: types.JSONRPCMessage) -> None:
            body = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
            inner = {**scope, "headers": [*headers, (b"content-length", b"%d" % len(body))]}
            answered = _Answered()
            await self._app(inner, _replayed(body, after_body), answered.capture)
            if isinstance(message, types.JSONRPCRequest):
                replies.append(_reply_for(message.id, answered))

        async with anyio.create_task_group() as watcher:
            watcher.start_soon(watch_disconnect)
            async with anyio.create_task_group() as requests:
                for message in messages:
                    requests.start_soon(one, message)
            watcher.cancel_scope.cancel()
        return replies

    async def _check_headers(self, scope: Scope) -> Response | None:
        """A refusal decided from the headers alone (`admit`), logged; else None."""
        verdict = await self.admit(Headers(scope=scope))
        if isinstance(verdict, HeaderRefusal):
            self._refusals.refused(verdict.kind, verdict.detail, scope)
            return verdict.response
        if verdict is not None:
            # What the SDK reads: AuthContextMiddleware, and the session's owner.
            scope["auth"] = AuthCredentials(verdict.scopes)
            scope["user"] = AuthenticatedUser(verdict)
        return None

    async def admit(self, headers: Headers) -> AccessToken | HeaderRefusal | None:
        """What the headers alone decide: the token and the declared size (`Front` did Origin).

        The request's `AccessToken`, or None when this server takes no tokens;
        or the refusal, which the caller logs. The wire's fast handler calls
        it too (`actors.server.http._app`).
        """
        token = None
        if self._auth is not None:
            verdict = await self._auth.authenticate(headers.get("authorization"))
            if isinstance(verdict, AuthRefusal):
                answer = dict(verdict.headers)
                response = error_response(verdict.status, verdict.message, headers=answer)
                return HeaderRefusal(response, verdict.kind, verdict.detail)
            token = verdict
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            return HeaderRefusal(self._too_large(length), "an oversized body")
        return token

    @property
    def lean(self) -> FastPath | None:
        """The fast path this gate answers the common 2026-era requests with, if any."""
        return self._lean

    def _too_large(self, length: str | None = None) -> Response:
        size = "larger" if length is None else f"{length} bytes"
        message = (
            f"the request body is {size}; this server accepts at most "
            f"{self._max_body} bytes (--max-request-bytes)"
        )
        return error_response(413, message)

    def _too_many_sessions(self, full: Full, request_id: types.RequestId | None) -> Response:
        if full.bound is Bound.TOTAL:
            reason = full.says("sessions", "are open")
            message = f"{reason}; retry later, once some have ended or expired"
            return error_response(429, message, request_id=request_id)
        if full.bound is Bound.HOLDER:
            anonymous = full.principal.label == ANONYMOUS
            who = "anonymous clients together hold" if anonymous else "this token holds"
            reason = (
                f"{who} {full.limit} open sessions already, the most allowed "
                "(--max-sessions-per-token)"
            )
        else:
            reason = full.says("sessions", "are open")
        message = (
            f"{reason}; end one (HTTP DELETE with its Mcp-Session-Id) or let an idle one expire "
            f"({self._sessions.idle_timeout:g} s without requests, --session-idle-timeout)"
        )
        return error_response(429, message, request_id=request_id)


_OVER: Final = {
    Bound.HOLDER: "a new session over the per-token limit",
    Bound.GROUP: "a new session over its tenant's share",
    Bound.TOTAL: "a new session over the server's total",
}
"""The `RefusalLog` kind of a session refused by each bound."""


def _may_open_a_session(scope: Scope) -> bool:
    """Whether the SDK would open a session for this request, had it no session id.

    The SDK serves requests of the stateless 2026 era (a version header it
    does not know from the handshake) without sessions.
    """
    version = Headers(scope=scope).get(MCP_PROTOCOL_VERSION_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def _at_negotiated_version(scope: Scope, negotiated: str) -> Scope:
    """`scope`, its protocol version header raised to the session's if it names an older one.

    The SDK reads what a request's stream may carry from that header alone:
    a session that negotiated 2025-11-25 but sends ``2025-03-26`` (the
    conformance suite's raw requests do) would lose the priming event and the
    retry field that let its client resume the stream. A session speaks what
    its ``initialize`` negotiated; a header naming a newer version, or none,
    is left to the SDK to judge.
    """
    header = MCP_PROTOCOL_VERSION_HEADER.encode()
    sent = next((value for name, value in scope["headers"] if name.lower() == header), None)
    version = None if sent is None else sent.decode("latin-1")
    if version is None or version not in HANDSHAKE_PROTOCOL_VERSIONS or version >= negotiated:
        return scope  # the dates of versions compare as strings
    headers = [(name, value) for name, value in scope["headers"] if name.lower() != header]
    return {**scope, "headers": [*headers, (header, negotiated.encode("latin-1"))]}


def _negotiated(initialize: Mapping[str, Any] | None) -> str:
    """The version the SDK answers an ``initialize`` with: the one asked for, if it has it."""
    requested = None if initialize is None else initialize.get("protocolVersion")
    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


def _reply_for(request_id: types.RequestId, answered: _Answered) -> dict[str, Any]:
    """The SDK's reply to one request of a batch, with its id even when the SDK left it out."""
    for message in answered.messages():
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
    for message in answered.messages():
        if isinstance(message, dict) and isinstance(message.get("error"), dict):
            return {**message, "id": request_id}  # an HTTP-level refusal has no id
    reply = Reply.of(
        request_id,
        types.INTERNAL_ERROR,
        f"the server gave no reply to this request (HTTP {answered.status})",
    )
    return reply.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _request_id(message: Any) -> str | int | None:
    """A request's id, if it has one a reply may carry (a string or an integer)."""
    request_id = message.get("id") if isinstance(message, dict) else None
    valid = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    return request_id if valid else None
