"""``actors serve``: the MCP server on stdio or Streamable HTTP, its limits, auth and shutdown.

Transports
----------
* **stdio** (the default): the SDK's ``stdio_server`` and ``Server.run``. The
  parent process is the trusted middleware, so its context claims are taken
  as given. `actors._stdio` reads and writes the pipes (size limit on lines,
  errors for lines the SDK cannot parse, a bound on requests read ahead of
  their replies, no worker threads).
* **Streamable HTTP** (``--http HOST:PORT``): the SDK's Starlette app, served
  by hypercorn on trio, behind the ASGI gate of `actors._http`: ``Origin``
  (403), bearer token (401), body size (413), malformed JSON-RPC answered
  with its id, and a cap on open sessions per token (429). On a loopback
  bind the SDK also checks the ``Host`` header (DNS rebinding).

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
the same way: the calls read before it still get their replies, within the
same grace (a client may close stdin right after its last request).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import hmac
import ipaddress
import logging
import os
import signal
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast, final

import attrs
import hypercorn.config
import hypercorn.trio
import trio
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from ._http import (
    DEFAULT_MAX_SESSIONS_PER_TOKEN,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    Gate,
    RefusalLog,
    SessionTable,
)
from ._mcp import Caller, McpAdapter
from ._runtime import RuntimeConfig, open_runtime
from ._stdio import DEFAULT_MAX_IN_FLIGHT, serve_stdio
from .modules import content_store, planning, playbook_store, workspace
from .store import check_store_url, open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from hypercorn.typing import ASGIFramework
    from mcp.server.context import ServerRequestContext

    from ._module import ToolModule
    from ._runtime import Runtime

__all__ = [
    "DEFAULT_MODULES",
    "KNOWN_MODULES",
    "MCP_PATH",
    "ConfigurationError",
    "ServeOptions",
    "build_modules",
    "default_state_url",
    "describe_tokens",
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
    """Where the workspace makes its private root; the system's temporary directory if None."""
    exec_max_processes: int = 64
    """Commands the workspace runs at once, across all sessions."""
    exec_file_cap: int = 8 * 1024 * 1024
    """The largest file a workspace command may write, in bytes."""
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
    unsafe_shared_exec: bool = False
    """Allow the workspace on an HTTP server whose clients are not all trusted gateways."""
    max_sessions_per_token: int = DEFAULT_MAX_SESSIONS_PER_TOKEN
    """Open HTTP sessions one token (or all anonymous clients together) may hold."""
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    """Seconds after which an HTTP session with no request in flight is closed."""
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    """Stdio requests read ahead of their replies; past it, no more are read."""
    state: str | None = None
    """Where durable state is kept (`actors.store.open_store` URL); None: `default_state_url`."""

    def check(self) -> None:
        """Raise ConfigurationError for options that contradict each other or are unsafe."""
        self._check_state()
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
        else:
            self._check_workspace()
        for flag, value in (
            ("--max-request-bytes", self.max_request_bytes),
            ("--max-sessions-per-token", self.max_sessions_per_token),
            ("--max-in-flight", self.max_in_flight),
        ):
            if value < 1:
                msg = f"{flag} must be at least 1, got {value}"
                raise ConfigurationError(msg)
        if not self.session_idle_timeout > 0:
            msg = f"--session-idle-timeout must be positive, got {self.session_idle_timeout}"
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
        self._check_shared_exec()

    def _check_state(self) -> None:
        try:
            check_store_url(self.state_url)
        except ValueError as exc:
            msg = f"--state: {exc}"
            raise ConfigurationError(msg) from None

    @property
    def state_url(self) -> str:
        """The store to open: `state`, or the SQLite file in the user's state directory."""
        return default_state_url() if self.state is None else self.state

    def _check_workspace(self) -> None:
        """Build the workspace once, so that an allowed program not on PATH is refused now."""
        try:
            self.workspace_module()
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(str(exc)) from None

    def workspace_module(self) -> ToolModule[Any]:
        """The ``workspace`` module these options describe (it makes nothing on disk yet)."""
        return workspace(
            root=self.workspace_root,
            allow=self.exec_allow,
            file_cap=self.exec_file_cap,
            max_processes_total=self.exec_max_processes,
        )

    def _check_shared_exec(self) -> None:
        """Refuse the workspace where a client that is not a trusted gateway could reach it.

        A program the workspace runs acts as the server's user: it can read the
        tokens file or ``/proc/<ppid>/cmdline``, take a gateway token, and reach
        every tenant's sessions. Without tokens, every local user could run programs
        as the server's user.
        """
        if not self.allow_exec or self.unsafe_shared_exec:
            return
        tenants = sorted({tenant for tenant in self.tokens.values() if tenant is not None})
        if tenants:
            msg = (
                f"refusing --allow-exec next to tenant tokens ({', '.join(tenants)}): a program "
                "it runs can read the server's tokens and reach every tenant's sessions; serve "
                "the workspace from a separate server with gateway tokens only, or pass "
                "--unsafe-shared-exec to accept that"
            )
            raise ConfigurationError(msg)
        if not self.tokens:
            msg = (
                "refusing --allow-exec over HTTP without tokens: any local user could run "
                "programs as this server's user; add gateway tokens (--token TOKEN), or pass "
                "--unsafe-shared-exec to accept that"
            )
            raise ConfigurationError(msg)

    @property
    def enabled(self) -> tuple[str, ...]:
        """The modules to enable: `modules`, plus ``workspace`` with `allow_exec`."""
        if self.allow_exec and "workspace" not in self.modules:
            return (*self.modules, "workspace")
        return self.modules


def default_state_url() -> str:
    """``sqlite:///`` a file in the XDG state directory (``~/.local/state/mcp-actors``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return f"sqlite:///{Path(base, 'mcp-actors', 'state.db').absolute()}"


def describe_tokens(tokens: Mapping[str, str | None]) -> str:
    """How many tokens are gateways and how many each tenant has; never the tokens."""
    if not tokens:
        return "none (every client that can connect is trusted)"
    gateways = sum(1 for tenant in tokens.values() if tenant is None)
    per_tenant = collections.Counter(tenant for tenant in tokens.values() if tenant is not None)
    parts = [f"{gateways} gateway(s)"]
    parts += [f"tenant {tenant!r}: {count}" for tenant, count in sorted(per_tenant.items())]
    return ", ".join(parts)


def build_modules(options: ServeOptions) -> list[ToolModule[Any]]:
    """The tool modules `options` enables, in the order given."""
    ready: dict[str, ToolModule[Any]] = {
        "planning": planning,
        "playbook_store": playbook_store,
        "content_store": content_store,
    }
    return [
        options.workspace_module() if name == "workspace" else ready[name]
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
            async with (
                open_store(options.state_url) as store,
                open_runtime(build_modules(options), options.runtime, store=store) as runtime,
            ):
                logger.info("modules: %s", ", ".join(runtime.registry.modules))
                logger.info("state: %s", store.url)
                if options.http is not None:
                    logger.info("tokens: %s", describe_tokens(options.tokens))
                adapter = _adapter(runtime, options)
                stop = trio.Event()
                grace = options.runtime.shutdown_grace
                watchers.start_soon(_drain, shutdown, adapter, grace, stop)
                with shutdown.hurry:
                    if options.http is None:
                        await serve_stdio(
                            adapter,
                            options.max_request_bytes,
                            stop,
                            eof_grace=grace,
                            max_in_flight=options.max_in_flight,
                        )
                    else:
                        await _serve_http(adapter, options, stop)
                logger.info("transport stopped; stopping actors")
            watchers.cancel_scope.cancel()
    logger.info("stopped")


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


def http_app(
    adapter: McpAdapter, options: ServeOptions, refusals: RefusalLog | None = None
) -> Gate:
    """The ASGI app: the SDK's Streamable HTTP app at `MCP_PATH`, behind the gate.

    Each token, and every anonymous client together, may hold
    ``options.max_sessions_per_token`` open sessions; a session with no request
    in flight for ``options.session_idle_timeout`` seconds is closed. The SDK's
    own cap on all sessions (10 000) stays as the bound on the whole table.
    """
    assert options.http is not None
    host = options.http[0]
    allow_origins = frozenset(options.allow_origins)
    sessions = SessionTable(options.max_sessions_per_token, options.session_idle_timeout)
    app = adapter.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        max_request_body_size=options.max_request_bytes,
        session_idle_timeout=options.session_idle_timeout,
        transport_security=_transport_security(host, allow_origins),
        host=host,
    )
    return Gate(
        app,
        origin_allowed=functools.partial(origin_allowed, extra=allow_origins),
        tokens=_StaticTokens(options.tokens) if options.tokens else None,
        max_body=options.max_request_bytes,
        sessions=sessions,
        refusals=RefusalLog() if refusals is None else refusals,
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
    refusals = RefusalLog()
    app = http_app(adapter, options, refusals)
    try:
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
    finally:
        refusals.flush()
