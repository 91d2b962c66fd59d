"""``actors serve``: the MCP server on stdio or Streamable HTTP, its limits, auth and shutdown.

Transports
----------
* **stdio** (the default): the SDK's ``stdio_server`` and ``Server.run``. The
  parent process is the trusted middleware, so its context claims are taken
  as given. stdin is read here rather than by the SDK, for two reasons: a line
  longer than ``max_request_bytes`` must be refused without being held in
  memory, and a read blocked on an idle stdin must be cancellable, or a
  signal could not stop the server. Lines the SDK cannot parse, and the
  oversized ones, are answered with a JSON-RPC error (the SDK would drop them
  silently) and the server keeps serving.
* **Streamable HTTP** (``--http HOST:PORT``): the SDK's Starlette app, served
  by hypercorn on trio, behind a small ASGI gate that checks, in order, the
  ``Origin`` (403), the bearer token (401) and the declared body size (413).
  The SDK itself enforces the body size on chunked bodies too, and, on a
  loopback bind, the ``Host`` header (DNS rebinding).

Tokens and tenants
------------------
Operators configure static bearer tokens, each optionally bound to a tenant.
A token bound to tenant ``T`` may address only the sessions ``T`` and
``T/…`` (see `actors._mcp` for the default session a call without one gets).
A token bound to no tenant is a trusted gateway and may address any session,
as may every client of a loopback server configured without tokens. The SDK
ties each HTTP session (``Mcp-Session-Id``) to the token that opened it.

Shutdown
--------
The first SIGINT or SIGTERM stops new calls (they get an ``isError``
result), lets the calls in flight finish for up to ``shutdown_grace``
seconds, then stops the transport; the runtime then stops every actor and
runs every state's ``on_stop`` (the workspace's kills its processes). A
second signal stops the transport at once. EOF on stdin ends a stdio server
the same way, without the grace: nobody is left to read the replies.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
import signal
import sys
import urllib.parse
from collections import deque
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio
import attrs
import hypercorn.config
import hypercorn.trio
import trio
from mcp import types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from ._mcp import Caller, McpAdapter
from ._runtime import RuntimeConfig, open_runtime
from .modules import content_store, planning, playbook_store, workspace

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path
    from types import TracebackType
    from typing import Self

    from hypercorn.typing import ASGIFramework
    from mcp.server.context import ServerRequestContext
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ._module import ToolModule
    from ._runtime import Runtime

__all__ = [
    "DEFAULT_MODULES",
    "KNOWN_MODULES",
    "MCP_PATH",
    "ConfigurationError",
    "ServeOptions",
    "build_modules",
    "serve",
]

logger = logging.getLogger("actors.serve")

MCP_PATH: Final = "/mcp"
"""Where the Streamable HTTP endpoint is mounted."""
DEFAULT_MODULES: Final = ("planning", "playbook_store", "content_store")
"""What ``serve`` enables unless told otherwise."""
KNOWN_MODULES: Final = (*DEFAULT_MODULES, "workspace")
"""Every module ``serve`` can enable; ``workspace`` only with ``--allow-exec``."""
DEFAULT_MAX_REQUEST_BYTES: Final = 1024 * 1024

_TENANT_CLAIM: Final = "dev.mcp-actors/tenant"
_LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
# Once calls have drained, open connections (idle SSE streams) get this long.
_HTTP_CLOSE_GRACE: Final = 1.0
_READ_CHUNK: Final = 64 * 1024
_ID_SCAN_BYTES: Final = 4096  # how much of an oversized line is kept to find its id


class ConfigurationError(ValueError):
    """The serve options contradict each other or are unsafe; the message says what to change."""


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@final
@attrs.frozen(kw_only=True)
class ServeOptions:
    """Everything ``serve`` needs: modules, runtime settings, transport, limits and tokens."""

    modules: tuple[str, ...] = DEFAULT_MODULES
    """Enabled modules, by name (see `KNOWN_MODULES`)."""
    allow_exec: bool = False
    """Enable the ``workspace`` module, which runs programs on this host."""
    exec_allow: tuple[str, ...] | None = None
    """Program names the workspace may start; ``None`` allows any."""
    workspace_root: Path | None = None
    """Where session directories go; a fresh temporary directory when ``None``."""
    runtime: RuntimeConfig = attrs.field(factory=RuntimeConfig)
    """TTL, mailbox size, actor cap, call timeout, grace, context policy."""
    http: tuple[str, int] | None = None
    """``(host, port)`` to serve Streamable HTTP on; ``None`` serves stdio."""
    tokens: Mapping[str, str | None] = attrs.field(factory=dict)
    """Bearer token → the tenant it is bound to (``None``: any session). HTTP only."""
    allow_origins: tuple[str, ...] = ()
    """Browser origins allowed besides loopback ones. HTTP only."""
    insecure: bool = False
    """Allow a non-loopback bind without tokens."""
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    """The largest JSON-RPC message accepted: a stdio line or an HTTP body."""

    def check(self) -> None:
        """Raise ConfigurationError for options that contradict each other or are unsafe."""
        unknown = sorted(set(self.modules) - set(KNOWN_MODULES))
        if unknown:
            msg = f"unknown module(s) {', '.join(unknown)}; known: {', '.join(KNOWN_MODULES)}"
            raise ConfigurationError(msg)
        if not self.allow_exec:
            exec_only = [
                name
                for name, given in (
                    ("--modules workspace", "workspace" in self.modules),
                    ("--exec-allow", self.exec_allow is not None),
                    ("--workspace-root", self.workspace_root is not None),
                )
                if given
            ]
            if exec_only:
                msg = f"{', '.join(exec_only)} needs --allow-exec: the workspace runs programs"
                raise ConfigurationError(msg)
        if self.max_request_bytes < 1:
            msg = f"--max-request-bytes must be at least 1, got {self.max_request_bytes}"
            raise ConfigurationError(msg)
        if self.http is None:
            if self.tokens or self.allow_origins or self.insecure:
                msg = "--token, --tokens-file, --allow-origin and --insecure apply to --http only"
                raise ConfigurationError(msg)
            return
        host = self.http[0]
        if not is_loopback(host) and not self.tokens and not self.insecure:
            msg = (
                f"refusing to serve on {host} without tokens: anyone who can reach it could use "
                "every session; add --token or --tokens-file, or --insecure on a trusted network"
            )
            raise ConfigurationError(msg)

    @property
    def enabled(self) -> tuple[str, ...]:
        """The modules to enable: `modules`, plus ``workspace`` with `allow_exec`."""
        if self.allow_exec and "workspace" not in self.modules:
            return (*self.modules, "workspace")
        return self.modules


def build_modules(options: ServeOptions) -> list[ToolModule[Any]]:
    """The tool modules `options` enables, in the order given."""
    ready: dict[str, ToolModule[Any]] = {
        "planning": planning,
        "playbook_store": playbook_store,
        "content_store": content_store,
    }
    return [
        workspace(root=options.workspace_root, allow=options.exec_allow)
        if name == "workspace"
        else ready[name]
        for name in options.enabled
    ]


# ---- shutdown ----------------------------------------------------------------


@attrs.define(eq=False)
class _Shutdown:
    """Turns the first SIGINT/SIGTERM into a graceful stop and the next into an immediate one."""

    requested: trio.Event = attrs.field(factory=trio.Event)
    """Set by the first signal: take no new calls, let the calls in flight finish."""
    hurry: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """Cancelled by a second signal: stop the transport now."""

    async def watch(self, signals: AsyncIterator[int]) -> None:
        """Act on each signal received, for as long as the server runs."""
        async for number in signals:
            name = signal.Signals(number).name
            if not self.requested.is_set():
                logger.info("%s received: shutting down", name)
                self.requested.set()
            else:
                logger.warning("%s received again: stopping the transport now", name)
                self.hurry.cancel()


async def _drain(shutdown: _Shutdown, adapter: McpAdapter, grace: float, stop: trio.Event) -> None:
    """Once shutdown is requested, refuse new calls, wait for those in flight, then `stop`."""
    await shutdown.requested.wait()
    adapter.close()
    with trio.move_on_after(grace):
        await adapter.wait_idle()
    if adapter.in_flight:
        logger.warning(
            "%d call(s) still running after %g s; their callers get an error",
            adapter.in_flight,
            grace,
        )
    stop.set()


def _adapter(runtime: Runtime, options: ServeOptions) -> McpAdapter:
    if options.http is None:
        return McpAdapter(runtime)  # the stdio parent is a trusted middleware
    identify = functools.partial(identify_http_caller, token_required=bool(options.tokens))
    return McpAdapter(runtime, identify=identify)


async def serve(options: ServeOptions) -> None:
    """Serve MCP until EOF on stdin (stdio) or a signal; then shut down in order.

    Must run in the main thread (it handles SIGINT and SIGTERM itself).
    """
    options.check()
    shutdown = _Shutdown()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as watchers:
            # Signals are watched until the runtime has stopped, so that a
            # second one during cleanup is logged instead of killing the process.
            watchers.start_soon(shutdown.watch, signals)
            async with open_runtime(build_modules(options), options.runtime) as runtime:
                logger.info("modules: %s", ", ".join(runtime.registry.modules))
                adapter = _adapter(runtime, options)
                stop = trio.Event()
                grace = options.runtime.shutdown_grace
                watchers.start_soon(_drain, shutdown, adapter, grace, stop)
                with shutdown.hurry:
                    if options.http is None:
                        await _serve_stdio(adapter, options.max_request_bytes, stop)
                    else:
                        await _serve_http(adapter, options, stop)
                logger.info("transport stopped; stopping actors")
            watchers.cancel_scope.cancel()
    logger.info("stopped")


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


# ---- stdio ---------------------------------------------------------------------


@final
@attrs.frozen
class _Oversized:
    """A line longer than the limit: its size and its first bytes (to find the request id)."""

    size: int
    head: bytes


@final
class _LineSplitter:
    """Splits a byte stream into lines of at most `limit` bytes (sans-IO).

    A longer line is never held whole: only its first bytes are kept, the rest
    is counted and dropped, and it comes out as `_Oversized`.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._line = bytearray()
        self._oversized: _Oversized | None = None

    def feed(self, data: bytes) -> list[bytes | _Oversized]:
        """Take the next bytes; return the lines they complete."""
        lines: list[bytes | _Oversized] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end])
            lines.append(self._finish())
            start = end + 1
        self._take(data[start:])
        return lines

    def close(self) -> list[bytes | _Oversized]:
        """At end of input: the last line, if it had no newline."""
        if self._oversized is None and not self._line:
            return []
        return [self._finish()]

    def _take(self, piece: bytes) -> None:
        if self._oversized is not None:
            self._oversized = attrs.evolve(self._oversized, size=self._oversized.size + len(piece))
        elif len(self._line) + len(piece) > self._limit:
            size = len(self._line) + len(piece)
            head = bytes(self._line[:_ID_SCAN_BYTES]) + piece[:_ID_SCAN_BYTES]
            self._oversized = _Oversized(size, head[:_ID_SCAN_BYTES])
            self._line.clear()
        else:
            self._line += piece

    def _finish(self) -> bytes | _Oversized:
        if self._oversized is not None:
            line: bytes | _Oversized = self._oversized
            self._oversized = None
            return line
        complete = bytes(self._line)
        self._line.clear()
        return complete


_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")


def leading_request_id(head: str) -> int | str | None:
    """The ``id`` of a JSON-RPC message from its first characters, if it comes before the cut.

    Reads the top-level members in order and stops at ``id``, at the first
    member that is cut off, or at anything that is not JSON; the SDK writes
    ``jsonrpc`` and ``id`` before ``params``, so its requests are answered
    with their own id even when their arguments are far too long.
    """
    decoder = json.JSONDecoder()

    def skip(index: int) -> int:
        match = _WHITESPACE.match(head, index)
        return index if match is None else match.end()

    index = skip(0)
    if not head.startswith("{", index):
        return None
    index += 1
    while True:
        try:
            key, index = decoder.raw_decode(head, skip(index))
            index = skip(index)
            if not head.startswith(":", index):
                return None
            value, index = decoder.raw_decode(head, skip(index + 1))
        except ValueError:
            return None
        if key == "id":
            valid = isinstance(value, str) or (
                isinstance(value, int) and not isinstance(value, bool)
            )
            return value if valid else None
        index = skip(index)
        if not head.startswith(",", index):
            return None
        index += 1


@final
class _StdinLines:
    """stdin as text lines for the SDK's ``stdio_server``, each at most `limit` bytes.

    Read in a worker thread that a cancellation abandons, so that a server
    waiting on an idle stdin still stops on a signal. An oversized line is
    replaced by a notification to `marker`, a method name no client can guess,
    which `_GuardedReadStream` answers with an error; blank lines are skipped.
    """

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self._splitter = _LineSplitter(limit)
        self._ready: deque[bytes | _Oversized] = deque()
        self._eof = False
        self.marker: Final = f"mcp-actors/oversized-{secrets.token_hex(8)}"

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        while True:
            while not self._ready:
                if self._eof:
                    raise StopAsyncIteration
                await self._read()
            text = self._text(self._ready.popleft())
            if text is not None:
                return text

    async def _read(self) -> None:
        data = await trio.to_thread.run_sync(os.read, self._fd, _READ_CHUNK, abandon_on_cancel=True)
        if data:
            self._ready.extend(self._splitter.feed(data))
        else:
            self._eof = True
            self._ready.extend(self._splitter.close())

    def _text(self, line: bytes | _Oversized) -> str | None:
        if isinstance(line, _Oversized):
            head = line.head.decode("utf-8", errors="replace")
            params = {"id": leading_request_id(head), "size": line.size, "limit": self._limit}
            return json.dumps({"jsonrpc": "2.0", "method": self.marker, "params": params})
        text = line.decode("utf-8", errors="replace")  # as the SDK's own stdio transport does
        return text if text.strip() else None


def _parse_error(error: Exception) -> types.ErrorData:
    """The JSON-RPC error for a line the SDK could not turn into a message."""
    if isinstance(error, ValidationError):
        for detail in error.errors(include_url=False, include_input=False):
            if detail["type"] == "json_invalid":
                return types.ErrorData(
                    code=types.PARSE_ERROR, message=f"Parse error: {detail['msg']}"
                )
    message = (
        "Invalid Request: the line is JSON but not a JSON-RPC 2.0 request, notification or response"
    )
    return types.ErrorData(code=types.INVALID_REQUEST, message=message)


def _oversized_error(params: Mapping[str, Any]) -> tuple[types.RequestId | None, types.ErrorData]:
    message = (
        f"Invalid Request: the message is {params['size']} bytes; this server accepts at most "
        f"{params['limit']} bytes per message (--max-request-bytes)"
    )
    return params["id"], types.ErrorData(code=types.INVALID_REQUEST, message=message)


@final
class _GuardedReadStream:
    """The SDK's stdio read stream, with bad lines answered here instead of dropped.

    ``stdio_server`` passes a line it cannot parse on as an exception, which
    the SDK's dispatcher only logs; a client waiting for its reply would wait
    forever. This stream answers each such line, and each oversized one, with
    a JSON-RPC error on the write stream, and passes every other item on.
    """

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        replies: WriteStream[SessionMessage],
        marker: str,
    ) -> None:
        self._inner = inner
        self._replies = replies
        self._marker = marker

    @property
    def last_context(self) -> object:
        """The sender's context of the last item, which the SDK's dispatcher restores."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """The next message the SDK should handle."""
        while True:
            item = await self._inner.receive()
            if isinstance(item, Exception):
                await self._answer(None, _parse_error(item))
            elif (
                isinstance(item.message, types.JSONRPCNotification)
                and item.message.method == self._marker
            ):
                await self._answer(*_oversized_error(item.message.params or {}))
            else:
                return item

    async def _answer(self, request_id: types.RequestId | None, error: types.ErrorData) -> None:
        logger.warning("stdio: refused a message: %s", error.message)
        reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        try:
            await self._replies.send(SessionMessage(reply))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("stdio: the connection closed before the error could be sent")

    async def aclose(self) -> None:
        """Close the SDK's stream."""
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _serve_stdio(adapter: McpAdapter, max_request_bytes: int, stop: trio.Event) -> None:
    """Serve one connection on stdin/stdout until EOF or `stop`."""
    lines = _StdinLines(sys.stdin.fileno(), max_request_bytes)
    server = adapter.server
    logger.info("serving MCP on stdio")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_when, stop, nursery.cancel_scope)
        # stdio_server declares an AsyncFile but only iterates it (`async for line in stdin`).
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (read, write):
            guarded = _GuardedReadStream(read, write, lines.marker)
            await server.run(guarded, write, server.create_initialization_options())
        nursery.cancel_scope.cancel()
    logger.info("stdin closed" if not stop.is_set() else "stdio transport stopped")


# ---- Streamable HTTP ---------------------------------------------------------


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
                claims = None if tenant is None else {_TENANT_CLAIM: tenant}
                match = AccessToken(token=token, client_id=label, scopes=[], claims=claims)
        return match


def identify_http_caller(
    ctx: ServerRequestContext[Any, Any], *, token_required: bool = False
) -> Caller:
    """Who sent an HTTP request: its token's label and tenant, and its ``Mcp-Session-Id``."""
    request = ctx.request
    session = request.headers.get(MCP_SESSION_ID_HEADER) if isinstance(request, Request) else None
    user = request.scope.get("user") if isinstance(request, Request) else None
    if isinstance(user, AuthenticatedUser):
        token = user.access_token
        tenant = (token.claims or {}).get(_TENANT_CLAIM)
        return Caller(token.client_id, tenant if isinstance(tenant, str) else None, session)
    if token_required:
        # The gate answers such a request with 401 before it gets here; should one
        # ever get through anyway, it must not be served as a trusted caller.
        msg = "this server requires a bearer token"
        raise MCPError(types.INVALID_REQUEST, msg)
    return Caller("anonymous", None, session)


def origin_allowed(origin: str, extra: frozenset[str]) -> bool:
    """Whether a browser `origin` may call: a loopback http(s) origin, or one of `extra`."""
    if origin in extra:
        return True
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
        and bracketed in _LOOPBACK_NAMES
        and not (parts.path or parts.query or parts.fragment or parts.username)
    )


def _error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """An HTTP error whose body is a JSON-RPC error, which the SDK's client surfaces as is."""
    body = types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=types.INVALID_REQUEST, message=message)
    )
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


@final
class _Gate:
    """ASGI middleware in front of the SDK's app: Origin (403), bearer token (401), size (413)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allow_origins: frozenset[str],
        tokens: _StaticTokens | None,
        max_body: int,
    ) -> None:
        # AuthContextMiddleware exposes the token to the SDK (get_access_token).
        self._app = AuthContextMiddleware(app)
        self._allow_origins = allow_origins
        self._backend = None if tokens is None else BearerAuthBackend(tokens)
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events go straight through
            await self._app(scope, receive, send)
            return
        refusal = await self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self._app(scope, receive, send)

    async def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self._allow_origins):
            logger.warning("http: refused origin %r", origin)
            message = (
                f"origin {origin!r} is not allowed; loopback origins are, "
                "and the operator can allow others with --allow-origin"
            )
            return _error_response(403, message)
        if self._backend is not None:
            verdict = await self._backend.authenticate(HTTPConnection(scope))
            if verdict is None:
                logger.warning("http: refused a request without a valid bearer token")
                message = "a valid bearer token is required: send 'Authorization: Bearer <token>'"
                return _error_response(401, message, {"WWW-Authenticate": 'Bearer realm="mcp"'})
            scope["auth"], scope["user"] = verdict
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            message = (
                f"the request body is {length} bytes; this server accepts at most "
                f"{self._max_body} bytes (--max-request-bytes)"
            )
            return _error_response(413, message)
        return None


def _transport_security(host: str, allow_origins: frozenset[str]) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection: Host (and Origin) checks for a loopback bind."""
    if not is_loopback(host):
        # A public bind's Host names are not known in advance; the gate checks Origin.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [*_LOOPBACK_NAMES, *(f"{name}:*" for name in _LOOPBACK_NAMES)]
    origins = [f"{scheme}://{name}" for scheme in ("http", "https") for name in hosts]
    return TransportSecuritySettings(
        allowed_hosts=hosts, allowed_origins=[*origins, *sorted(allow_origins)]
    )


def http_app(adapter: McpAdapter, options: ServeOptions) -> ASGIApp:
    """The ASGI app: the SDK's Streamable HTTP app at `MCP_PATH`, behind the gate."""
    assert options.http is not None
    host = options.http[0]
    allow_origins = frozenset(options.allow_origins)
    app = adapter.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        max_request_body_size=options.max_request_bytes,
        transport_security=_transport_security(host, allow_origins),
        host=host,
    )
    tokens = _StaticTokens(options.tokens) if options.tokens else None
    return _Gate(
        app, allow_origins=allow_origins, tokens=tokens, max_body=options.max_request_bytes
    )


def _bind(host: str, port: int) -> str:
    return f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"


async def _serve_http(adapter: McpAdapter, options: ServeOptions, stop: trio.Event) -> None:
    """Serve Streamable HTTP with hypercorn until `stop`; print where it listens."""
    assert options.http is not None
    host, port = options.http
    if not is_loopback(host):
        if options.tokens:
            logger.warning(
                "serving plain HTTP on %s: tokens travel unencrypted; use a TLS proxy", host
            )
        else:
            logger.warning(
                "serving on %s WITHOUT tokens (--insecure): anyone can use any session", host
            )
    config = hypercorn.config.Config()
    config.bind = [_bind(host, port)]
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = _HTTP_CLOSE_GRACE
    app = http_app(adapter, options)
    async with trio.open_nursery() as nursery:
        # Starlette's and hypercorn's ASGI type hints describe the same protocol differently.
        framework = cast("ASGIFramework", app)
        serve_app = functools.partial(
            hypercorn.trio.serve, framework, config, shutdown_trigger=stop.wait
        )
        binds: list[str] = await nursery.start(serve_app)
        for bind in binds:
            # Not a log record: tests and scripts parse this line, whatever the log level.
            print(f"mcp-actors: listening on {bind}{MCP_PATH}", file=sys.stderr, flush=True)
