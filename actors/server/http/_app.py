"""The Streamable HTTP half of ``serve``: tokens, callers, Origin rules, the ASGI app, the wire.

`http_app` builds the ASGI app: the SDK's Streamable HTTP app at `MCP_PATH`
behind the gate of `actors.server.http._admission` (Origin 403, bearer token 401, body
size 413, malformed JSON-RPC answered with its id, sessions per token 429),
with resumable SSE streams (`actors.server.http._event_store`). The gate hands
the common requests to the fast path (`actors.server.http._fast_path`); the SDK's
session manager answers the rest (2025-era handshakes, ``GET`` streams,
``DELETE``, tools that report progress or ask the client, …). `serve_http`
serves both halves on our own HTTP server (`actors.server.http._server`).
In front of everything, `actors.server.http._host_rules` checks ``Host`` (DNS rebinding) and
``Origin``, and believes forwarded headers only from the operator's proxies.
Operators' bearer tokens are checked by digest in constant time; a token that
is none of them is checked as an OAuth access token when an issuer is
configured (`actors.server.auth._oauth`). Either way the token's tenant rides in
its claims and becomes the `protocol.Caller` of its requests.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import urllib.parse
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import pydantic_core
import trio
from mcp import types
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request

from protocol import Caller

from .._addresses import LOOPBACK_NAMES, is_loopback
from ..auth._oauth import OAuthResource
from ..auth._principals import TENANT_CLAIM, AuthRefusal, access_token_of
from ..mcp._adapter import McpAdapter
from ..mcp._request_context import connection_of
from . import _session_prefix as _prefix
from ._admission import Gate, HeaderRefusal, SessionTable
from ._event_store import RETRY_INTERVAL_MS, BoundedEventStore, SessionScopes
from ._fast_path import FastPath
from ._fast_path_sessions import SessionCalls
from ._host_rules import Front, FrontRules
from ._operator_routes import OpsRoutes, serve_asgi
from ._responses import RefusalLog
from ._server import FastStream

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from mcp.server.context import ServerRequestContext
    from starlette.types import ASGIApp

    from protocol import HandleKeys, HandleReader

    from ..._observe import Observer
    from ..._target import CallTarget
    from ...telemetry import PrometheusMetrics
    from .._options import ServeOptions
    from ._operator_routes import Readiness
    from ._server import FastAnswer, RawHeaders

__all__ = [
    "MCP_PATH",
    "BearerAuth",
    "authentication",
    "http_adapter",
    "http_app",
    "http_bind",
    "identify_http_caller",
    "origin_allowed",
    "serve_http",
    "token_caller",
]

logger = logging.getLogger("actors.serve")

MCP_PATH: Final = "/mcp"
"""Where the Streamable HTTP endpoint is mounted."""
# Once calls have drained, open connections (idle SSE streams) get this long.
_HTTP_CLOSE_GRACE: Final = 1.0
_SESSION_HEADER: Final = MCP_SESSION_ID_HEADER.encode()
_JSON: Final = b"application/json"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@final
class _StaticTokens:
    """The SDK's TokenVerifier over the operator's tokens; each one's tenant rides in its claims."""

    def __init__(self, tokens: Mapping[str, str | None]) -> None:
        self._tokens = [
            (_digest(token), f"token-{number}", tenant)
            for number, (token, tenant) in enumerate(tokens.items(), 1)
        ]

    async def verify_token(self, token: str) -> AccessToken | None:
        """The AccessToken for `token`, or ``None`` when it is not one of ours."""
        # Digests of equal length, each compared in constant time: the time
        # taken tells nothing about which token, or how much of one, matched.
        offered = _digest(token)
        match: AccessToken | None = None
        for digest, label, tenant in self._tokens:
            if hmac.compare_digest(offered, digest):
                claims = None if tenant is None else {TENANT_CLAIM: tenant}
                match = AccessToken(token=token, client_id=label, scopes=[], claims=claims)
        return match


_NO_VALID_TOKEN: Final = AuthRefusal(
    401,
    "a valid bearer token is required: send 'Authorization: Bearer <token>'",
    (("WWW-Authenticate", 'Bearer realm="mcp"'),),
)


def _bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value, exactly as sent; else None."""
    if authorization is None or not authorization.lower().startswith("bearer "):
        return None
    return authorization[len("bearer ") :] or None


@final
class BearerAuth:
    """The gate's `Authenticator`: the operator's static tokens first, then OAuth.

    A token that is one of the static tokens is that, with its tenant; any
    other is checked as an OAuth access token when `oauth` is set, and refused
    otherwise. As a `TokenVerifier` (`verify_token`) it tells the operator's
    routes (``/metrics``) who a token is.
    """

    def __init__(self, tokens: Mapping[str, str | None], oauth: OAuthResource | None) -> None:
        self._static = _StaticTokens(tokens) if tokens else None
        self.oauth: Final = oauth
        """The OAuth side, when an issuer is configured."""

    async def authenticate(self, authorization: str | None) -> AccessToken | AuthRefusal:
        """The token's `AccessToken` from an ``Authorization`` value, or the refusal."""
        token = _bearer(authorization)
        if token is not None and self._static is not None:
            static = await self._static.verify_token(token)
            if static is not None:
                return static
        if self.oauth is not None:
            return await self.oauth.authenticate(token)
        return _NO_VALID_TOKEN

    async def verify_token(self, token: str) -> AccessToken | None:
        """The `AccessToken` for `token`, or ``None`` when it is refused (SDK's TokenVerifier)."""
        verdict = await self.authenticate(f"Bearer {token}")
        return verdict if isinstance(verdict, AccessToken) else None


def authentication(options: ServeOptions) -> BearerAuth | None:
    """What checks the bearer tokens of a server with `options`; None when nothing does."""
    if not options.tokens and options.oauth is None:
        return None
    oauth = None if options.oauth is None else OAuthResource(options.oauth)
    return BearerAuth(options.tokens, oauth)


def identify_http_caller(
    ctx: ServerRequestContext[Any, Any],
    *,
    token_required: bool = False,
    handles: HandleReader | None = None,
) -> Caller:
    """Who sent an HTTP request: its token's label and tenant, and its HTTP session.

    The session is the one the SDK serves the request in (opened by this
    token, see `actors.server.http._admission`), never the ``Mcp-Session-Id`` header as
    sent: a 2026-era request is served without a session, whatever it carries.
    """
    request = ctx.request
    scope = request.scope if isinstance(request, Request) else {}
    token = access_token_of(scope)
    session = connection_of(ctx).session_id
    return token_caller(token, session, token_required=token_required, handles=handles)


def token_caller(
    token: AccessToken | None,
    session: str | None,
    *,
    token_required: bool = False,
    handles: HandleReader | None = None,
) -> Caller:
    """The caller of a request the gate accepted with `token` (None: without one), in
    `session`; its handles read by `handles` (None: handles are off)."""
    if token is not None:
        claimed = (token.claims or {}).get(TENANT_CLAIM)
        tenant = claimed if isinstance(claimed, str) else None
        return Caller(token.client_id, tenant, session, handles=handles)
    if token_required:
        # The gate answers such a request with 401 before it gets here; should one
        # ever get through anyway, it must not be served as a trusted caller.
        msg = "this server requires a bearer token"
        raise MCPError(types.INVALID_REQUEST, msg)
    return Caller("anonymous", None, session, handles=handles)


def http_adapter(
    runtime: CallTarget,
    options: ServeOptions,
    observer: Observer | None = None,
    handles: HandleKeys | None = None,
) -> McpAdapter:
    """The adapter an HTTP endpoint serves `runtime` with: callers told apart by their
    token and ``Mcp-Session-Id``, and each HTTP session's own session ended when it closes;
    conversation handles minted and read with `handles` (None: off)."""
    identify = functools.partial(
        identify_http_caller, token_required=options.authenticates, handles=handles
    )
    return McpAdapter(
        runtime,
        identify=identify,
        observer=observer,
        allow_end_session=options.allow_end_session,
        end_connection_sessions=True,
        handles=handles,
    )


def origin_allowed(origin: str, extra: frozenset[str]) -> bool:
    """Whether a browser `origin` may call: a loopback http(s) origin, or one of `extra`."""
    if origin in extra:
        return True
    if any(not character.isprintable() or character.isspace() for character in origin):
        return False  # urlsplit drops tabs and newlines: "local\thost" would read as localhost
    parts = urllib.parse.urlsplit(origin)
    try:
        parts.port  # noqa: B018 -- raises ValueError for a malformed port
    except ValueError:
        return False
    bracketed = (
        f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    )
    return (
        parts.scheme in ("http", "https")
        and bracketed in LOOPBACK_NAMES
        and "@" not in parts.netloc  # any userinfo, an empty one too
        and not (parts.path or parts.query or parts.fragment)
    )


# The Host and Origin checks are `Front`'s, for every path; the SDK's own would
# repeat them with texts that name no remedy (and log the raw header each time).
_NO_SDK_HOST_CHECK: Final = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def http_app(
    adapter: McpAdapter,
    options: ServeOptions,
    refusals: RefusalLog | None = None,
    *,
    beside: Callable[[ASGIApp], ASGIApp] | None = None,
    auth: BearerAuth | None = None,
) -> ASGIApp:
    """The ASGI app: the SDK's Streamable HTTP app at `MCP_PATH`, behind the gate and `Front`.

    Each token, and every anonymous client together, may hold
    ``options.max_sessions_per_token`` open sessions; a session with no request
    in flight for ``options.session_idle_timeout`` seconds is closed. The SDK's
    own cap on all sessions (10 000) stays as the bound on the whole table, and
    the gate shares it fairly among tenants (`SessionTable`).

    Each POST's SSE stream starts with an event id and a ``retry`` field; a
    client whose connection drops resumes it with ``Last-Event-ID``, from the
    events its session was sent, ``options.max_stored_event_bytes`` in all.

    With ``options.session_id_prefix``, the session ids clients see name this
    front (`actors.server.http._session_prefix`), for a load balancer in front of several.

    `beside` wraps the gated app in routes of its own (the operator's
    ``/healthz``, ``/readyz``, ``/metrics``), which `Front` guards too.

    Tokens are checked by `auth`, or else by what `authentication` builds
    from `options`; with OAuth, the RFC 9728 metadata document is served in
    front of the gate, to clients without a token.
    """
    refusals = RefusalLog() if refusals is None else refusals
    return _http_apps(adapter, options, refusals, beside, auth).app


@final
@attrs.frozen
class _HttpApps:
    """What the MCP listener serves: the ASGI app, and the wire's fast handler."""

    app: ASGIApp
    fast: FastPathWire


def _http_apps(
    adapter: McpAdapter,
    options: ServeOptions,
    refusals: RefusalLog,
    wrap: Callable[[ASGIApp], ASGIApp] | None,
    auth: BearerAuth | None,
) -> _HttpApps:
    """`http_app`'s app (`wrap` is its `beside`), and the fast handler that answers the lean
    path's requests before it."""
    assert options.http is not None
    sessions = SessionTable(options.max_sessions_per_token, options.session_idle_timeout)
    events = BoundedEventStore(options.max_stored_event_bytes)
    app = adapter.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        event_store=events,
        retry_interval=RETRY_INTERVAL_MS,
        max_request_body_size=options.max_request_bytes,
        session_idle_timeout=options.session_idle_timeout,
        max_sessions=sessions.total,
        transport_security=_NO_SDK_HOST_CHECK,
        host=options.http[0],
    )
    auth = authentication(options) if auth is None else auth
    scopes = SessionScopes(app, events)
    caller = functools.partial(
        token_caller, token_required=options.authenticates, handles=adapter.handles
    )
    lean = FastPath(adapter, functools.partial(caller, session=None), MCP_PATH)
    manager = adapter.server.session_manager
    in_sessions = SessionCalls(lean, adapter, caller, manager, events, scopes)
    gate = Gate(
        scopes,
        auth=auth,
        max_body=options.max_request_bytes,
        sessions=sessions,
        refusals=refusals,
        lean=lean,
        in_sessions=in_sessions,
    )
    gated: ASGIApp = gate
    if auth is not None and auth.oauth is not None:
        gated = auth.oauth.routes(gated, MCP_PATH)
    if options.session_id_prefix is not None:
        # Outside the gate: everything in it (session table, fast path, SDK) sees the SDK's ids.
        # The wire's fast handler takes 2026-era requests only, whose session header nothing reads.
        gated = _prefix.SessionIdPrefix(gated, options.session_id_prefix, refusals)
    rules = FrontRules(
        bind_host=options.http[0],
        allow_hosts=options.allow_hosts,
        origin_allowed=functools.partial(origin_allowed, extra=frozenset(options.allow_origins)),
        trusted_proxies=options.trusted_proxies,
    )
    front = Front(gated if wrap is None else wrap(gated), rules, refusals)
    return _HttpApps(front, FastPathWire(rules, gate, lean, options.session_id_prefix))


@final
class FastPathWire:
    """The wire's fast handler: the fast path's requests, answered without ASGI.

    A POST to `MCP_PATH` goes through the checks `Front` and the `Gate` make
    (``Host``, ``Origin``, bearer token, ``Content-Type``, the body as JSON),
    the very functions they call, then to the fast path: a 2026-era request
    as the `Gate` hands it to `FastPath`, one in a 2025-era session as it
    hands it to `Gate.session_call` (its ``Mcp-Session-Id`` first losing this
    front's prefix, when it has one, as `actors.server.http._session_prefix` does).
    Whatever one of them would refuse, or the fast path leaves to the SDK, is
    handed on (None) to the ASGI app, which checks it again, answers it, and
    logs the refusal: so a refusal's words and its log line have one source,
    at the cost of checking a refused request twice.
    """

    def __init__(
        self, rules: FrontRules, gate: Gate, lean: FastPath, session_prefix: str | None
    ) -> None:
        self._rules = rules
        self._gate = gate
        self._lean = lean
        self._marker = None if session_prefix is None else _prefix.marker(session_prefix)

    async def __call__(
        self,
        method: str,
        path: str,
        raw: RawHeaders,
        body: bytes,
        client: tuple[str, int] | None,
    ) -> FastAnswer | FastStream | None:
        """The answer to the request, or None: the app's to answer."""
        del client  # the checks here need no address; the refusals' log lines are the app's
        if method != "POST" or path != MCP_PATH:
            return None
        headers = _IndexedHeaders(raw)
        modern = headers.get(MCP_PROTOCOL_VERSION_HEADER) in MODERN_PROTOCOL_VERSIONS
        session_id = None if modern else self._session_id(headers)
        if not modern and session_id is None:
            return None  # the SDK's to answer: an initialize, or no session of this front's
        if self._rules.refusal(headers) is not None:
            return None
        if not headers.get("content-type", "").startswith("application/json"):
            return None
        token = await self._gate.admit(headers)
        if isinstance(token, HeaderRefusal):
            return None
        try:
            message = pydantic_core.from_json(body)
        except ValueError:
            return None
        if session_id is not None:
            return self._in_session(headers, message, token, session_id)
        answer = await self._lean.answer(headers, message, token)
        if answer is None:
            return None
        length = b"%d" % len(answer.body)
        return answer.status, ((b"content-type", _JSON), (b"content-length", length)), answer.body

    def _session_id(self, headers: Headers) -> str | None:
        """The SDK's id of the session a request names; None if it names none of this front's."""
        shown = headers.getlist(MCP_SESSION_ID_HEADER)
        if len(shown) != 1:
            return None
        if self._marker is None:
            return shown[0]
        return shown[0].removeprefix(self._marker) if shown[0].startswith(self._marker) else None

    def _in_session(
        self, headers: Headers, message: Any, token: AccessToken | None, session_id: str
    ) -> FastStream | None:
        """The streamed answer to `message` in the session `session_id`, or None."""
        call = self._gate.session_call(headers, message, token, session_id, MCP_PATH)
        if call is None:
            return None
        answered: Sequence[tuple[bytes, bytes]] = call.headers
        if self._marker is not None:
            shown = (self._marker + session_id).encode()
            answered = tuple((k, shown if k == _SESSION_HEADER else v) for k, v in answered)
        return FastStream(200, answered, call.stream)


@final
class _IndexedHeaders(Headers):
    """A request's headers (names in lowercase, as the wire gives them), each looked up in a
    dict made once: Starlette's scan all of them at every lookup, and the fast path makes a
    dozen. The first of repeated headers is the one found, as there."""

    def __init__(self, raw: RawHeaders) -> None:
        super().__init__(raw=raw)
        index: dict[str, str] = {}
        for name, value in raw:
            index.setdefault(name.decode("latin-1"), value.decode("latin-1"))
        self._index = index

    def __getitem__(self, key: str) -> str:
        return self._index[key.lower()]

    def __contains__(self, key: Any) -> bool:
        return isinstance(key, str) and key.lower() in self._index


def http_bind(host: str, port: int) -> str:
    """The ``HOST:PORT`` bind string for `host` and `port` (IPv6 in brackets)."""
    return f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"


async def serve_http(
    adapter: McpAdapter,
    options: ServeOptions,
    stop: trio.Event,
    readiness: Readiness,
    metrics: PrometheusMetrics | None = None,
) -> None:
    """Serve Streamable HTTP until `stop` on our own server (`actors.server.http._server`), the
    fast path's requests answered first; print where it listens.

    ``/healthz`` and ``/readyz`` (`readiness`) are served beside `MCP_PATH`,
    and ``/metrics`` when `metrics` is given, behind the MCP tokens. With
    OAuth, the issuer's keys are fetched as the server starts.
    """
    assert options.http is not None
    host, port = options.http
    if not is_loopback(host):
        if options.authenticates:
            logger.warning(
                "serving plain HTTP on %s: tokens travel unencrypted; use a TLS proxy", host
            )
        else:
            logger.warning(
                "serving on %s WITHOUT tokens (--insecure): anyone can use any session", host
            )
    refusals = RefusalLog()
    auth = authentication(options)
    with_ops: Callable[[ASGIApp], ASGIApp] = lambda gated: OpsRoutes(  # noqa: E731 -- typed
        gated, readiness, metrics, auth
    )
    apps = _http_apps(adapter, options, refusals, with_ops, auth)
    try:
        announce = f"listening on {{}}{MCP_PATH}"
        bind = http_bind(host, port)
        async with trio.open_nursery() as nursery:
            if auth is not None and auth.oauth is not None:
                # In the background: an issuer that is down must not hold the listener up.
                nursery.start_soon(auth.oauth.prefetch)
            await serve_asgi(
                apps.app,
                bind,
                stop,
                announce,
                grace=_HTTP_CLOSE_GRACE,
                flag="--http",
                limits=options.wire_limits,
                fast=apps.fast,
            )
            nursery.cancel_scope.cancel()
    finally:
        refusals.flush()
