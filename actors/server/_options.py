"""What ``serve`` serves and how: `ServeOptions`, checked before anything starts."""

from __future__ import annotations

import collections
import importlib
import importlib.util
import ipaddress
import re
import warnings
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from protocol import DEFAULT_LIFETIME, ContextError, extract_context

from .._config import RuntimeConfig
from .._module import ToolModule
from ..modules import content_store, planning, playbook_store, workspace
from ..store import check_store_url, default_state_url
from ._addresses import is_loopback
from ._configuration import ConfigurationError
from ._module_specs import is_file_spec, load_module
from ._stdio import DEFAULT_MAX_IN_FLIGHT
from .http._admission import DEFAULT_MAX_SESSIONS_PER_TOKEN, DEFAULT_SESSION_IDLE_TIMEOUT
from .http._event_store import DEFAULT_MAX_STORED_EVENT_BYTES
from .http._server import DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, WireLimits
from .http._session_prefix import check_session_id_prefix

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from ..store import Creation
    from .auth._settings import OAuthSettings

__all__ = [
    "DEFAULT_MODULES",
    "DEFAULT_RUNTIME",
    "KNOWN_MODULES",
    "ConfigurationError",
    "ServeOptions",
    "build_modules",
    "describe_tokens",
]

DEFAULT_MODULES: Final = ("planning", "playbook_store", "content_store")
"""What ``serve`` enables unless told otherwise."""
KNOWN_MODULES: Final = (*DEFAULT_MODULES, "workspace")
"""Every built-in module ``serve`` can enable; ``workspace`` only with ``allow_exec``."""
DEFAULT_MAX_REQUEST_BYTES: Final = 1024 * 1024
_LABEL: Final = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
# A Host header's value: a DNS name or a bracketed IPv6 address, with an optional port.
_HOST_NAME: Final = re.compile(rf"(?:(?:{_LABEL}\.)*{_LABEL}|\[[0-9a-f:.]+\])(?::[0-9]{{1,5}})?")
# About 7 KB per idle context plus its state: a bound on memory a client cannot lift.
DEFAULT_RUNTIME: Final = RuntimeConfig(max_actors=10_000)
"""The runtime settings of a server: `RuntimeConfig`'s defaults, with at most
10 000 live contexts (a bound on the memory clients can take)."""
_LEAN_HTTP_DEPRECATED: Final = (
    "ServeOptions.lean_http is deprecated and does nothing: every HTTP request is served by "
    "actors' own server; leave it out"
)
_SDK_HTTP_REMOVED: Final = (
    "ServeOptions(lean_http=False), the serving path through the MCP SDK's transport on "
    "hypercorn (--sdk-http), was removed after 0.2: every HTTP request is served by actors' "
    "own server, which hands what its fast path does not answer to the SDK's session "
    "manager; leave lean_http out (to compare against the SDK's transport, run "
    "`python -m benchmarks --only mcp`)"
)


@final
@attrs.frozen(kw_only=True)
class ServeOptions:
    """Everything ``serve`` needs: modules, runtime settings, transport, limits and tokens."""

    modules: tuple[str | ToolModule[Any], ...] = DEFAULT_MODULES
    """What to serve: built-in modules by name (`KNOWN_MODULES`), your own as
    ``package.module:attribute`` or a file, ``path/to/notes.py[:notes]`` (imported
    when the options are checked: `load_module`), or `ToolModule` objects."""
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
    runtime: RuntimeConfig = DEFAULT_RUNTIME
    """TTL, mailbox size, actor cap, call timeout, grace, context policy."""
    http: tuple[str, int] | None = None
    """``(host, port)`` to serve Streamable HTTP on; ``None`` serves stdio."""
    tokens: Mapping[str, str | None] = attrs.field(factory=dict)
    """Bearer token → the tenant it is bound to (``None``: any session). HTTP only."""
    oauth: OAuthSettings | None = None
    """Accept OAuth access tokens (JWTs) of an issuer besides `tokens`, their tenant
    from a claim (the ``oauth`` extra). HTTP only."""
    allow_origins: tuple[str, ...] = ()
    """Browser origins allowed besides loopback ones. HTTP only."""
    allow_hosts: tuple[str, ...] = ()
    """``Host`` header values a loopback server accepts besides loopback names: the public
    name of a reverse proxy that passes its own ``Host`` on. HTTP only."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks (``10.0.0.0/8``) of reverse proxies whose ``X-Forwarded-For``
    and ``X-Forwarded-Proto`` are believed; from anyone else they are ignored. HTTP only."""
    insecure: bool = False
    """Allow a non-loopback bind without tokens or OAuth."""
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    """The largest JSON-RPC message accepted: a stdio line or an HTTP body."""
    unsafe_shared_exec: bool = False
    """Allow the workspace on an HTTP server whose clients are not all trusted gateways."""
    max_sessions_per_token: int = DEFAULT_MAX_SESSIONS_PER_TOKEN
    """Open HTTP sessions one token (or all anonymous clients together) may hold."""
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    """Seconds after which an HTTP session with no request in flight is closed."""
    max_stored_event_bytes: int = DEFAULT_MAX_STORED_EVENT_BYTES
    """Bytes the SSE events kept for resuming dropped HTTP streams may take, all together."""
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    """Stdio requests read ahead of their replies; past it, no more are read."""
    max_connections_per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS
    """HTTP connections one client address may hold before its first whole request (on
    the HTTP listener and the ``--metrics`` one, each); one more gets 503."""
    state: str | tuple[str, ...] | None = None
    """Where durable state is kept (`actors.store.open_store` URL, or several PostgreSQL URLs
    for a store split by session); None: `default_state_url` of the transport, a file
    the other transport's default never shares."""
    metrics: bool = False
    """Serve Prometheus metrics at ``/metrics`` (the ``metrics`` extra)."""
    session: str | None = None
    """The session a stdio client's calls that name none land in, shared with every
    server given the same name; ``None``: a session private to the connection, ended
    with it. Stdio only."""
    allow_session_naming: bool = False
    """Let a stdio call's arguments (``__sessionId``, which the model writes) name a session
    other than the connection's own; off, only the host's ``_meta.sessionId`` may. Stdio
    only: over HTTP arguments may name any session within the token's tenant."""
    allow_end_session: bool = False
    """List the ``session__end`` tool, which lets a client end its own session."""
    handles: bool | None = None
    """Mint conversation handles (``conversation__start``) and take them in every stateful
    call (`protocol.HandleKeys`); ``None``: on over HTTP, where a 2026-era client has no
    session of its own, and off over stdio, where each connection has one."""
    handle_key_file: Path | None = None
    """The handle keys, one per line: the first mints, all verify. ``None``: a key kept
    beside a SQLite state file, or one of this process for other stores."""
    handle_lifetime: float = DEFAULT_LIFETIME
    """How long a handle is valid after it is minted, in seconds."""
    lean_http: bool | None = None
    """Deprecated, and ignored: every HTTP request is served by the project's own server
    (`actors.server.http._server`), which answers the common requests on its fast path and
    hands the rest to the SDK's session manager. Given at all, a DeprecationWarning;
    ``False`` (every request through the SDK's transport on hypercorn) was removed after 0.2:
    `check` refuses it."""
    session_id_prefix: str | None = None
    """What the ``Mcp-Session-Id`` of each HTTP session starts with, then a ``.``: 1 to 32
    letters, digits or ``-`` naming this front, so that a load balancer in front of several
    sends each 2025-era session's requests to the front that opened it (an nginx ``map``);
    an id without it is answered 404. ``None``: the SDK's ids as they are. HTTP only."""
    metrics_address: tuple[str, int] | None = None
    """``(host, port)`` of a listener of its own for ``/metrics``, ``/healthz`` and
    ``/readyz``, without tokens; ``None`` serves them on the HTTP listener."""

    def __attrs_post_init__(self) -> None:
        """Warn of the deprecated `lean_http`, when it is given."""
        if self.lean_http is not None:
            # Two frames up: the caller of the attrs-made __init__.
            warnings.warn(_LEAN_HTTP_DEPRECATED, DeprecationWarning, stacklevel=3)

    def check(self) -> None:
        """Raise ConfigurationError for options that contradict each other or are unsafe."""
        if self.lean_http is False:
            raise ConfigurationError(_SDK_HTTP_REMOVED)
        self._check_state()
        self._check_modules()
        self._check_metrics()
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
            ("--max-stored-event-bytes", self.max_stored_event_bytes),
            ("--max-in-flight", self.max_in_flight),
            ("--max-connections-per-address", self.max_connections_per_address),
        ):
            if value < 1:
                msg = f"{flag} must be at least 1, got {value}"
                raise ConfigurationError(msg)
        if not self.session_idle_timeout > 0:
            msg = f"--session-idle-timeout must be positive, got {self.session_idle_timeout}"
            raise ConfigurationError(msg)
        self._check_session()
        self._check_handles()
        self._check_session_id_prefix()
        if self.http is None:
            if (
                self.tokens
                or self.oauth is not None
                or self.allow_origins
                or self.insecure
                or self.allow_hosts
                or self.trusted_proxies
            ):
                msg = (
                    "--token, --tokens-file, --oauth-issuer, --allow-origin, --allow-host, "
                    "--trusted-proxy and --insecure apply to --http only"
                )
                raise ConfigurationError(msg)
            return
        self._check_proxy_options()
        self._check_oauth()
        host = self.http[0]
        if not is_loopback(host) and not self.authenticates and not self.insecure:
            msg = (
                f"refusing to serve on {host} without tokens: anyone who can reach it could use "
                "every session; add --token, --tokens-file or --oauth-issuer, or --insecure on "
                "a trusted network"
            )
            raise ConfigurationError(msg)
        self._check_shared_exec()

    @property
    def wire_limits(self) -> WireLimits:
        """What one client may make an HTTP listener of ours hold (`WireLimits`)."""
        return WireLimits(
            max_body_bytes=self.max_request_bytes,
            max_connections_per_address=self.max_connections_per_address,
        )

    @property
    def handles_on(self) -> bool:
        """Whether conversation handles are served: as set, or by the transport's default."""
        return self.http is not None if self.handles is None else self.handles

    def _check_handles(self) -> None:
        if not self.handle_lifetime > 0:
            msg = f"--handle-lifetime must be positive, got {self.handle_lifetime / 86400:g} days"
            raise ConfigurationError(msg)
        if self.handle_key_file is not None and not self.handles_on:
            msg = "--handle-key-file needs conversation handles on (--handles)"
            raise ConfigurationError(msg)

    @property
    def authenticates(self) -> bool:
        """Whether HTTP clients need a bearer token: static `tokens`, or `oauth`."""
        return bool(self.tokens) or self.oauth is not None

    def _check_oauth(self) -> None:
        if self.oauth is None:
            return
        try:
            self.oauth.check()
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None

    def _check_session(self) -> None:
        if self.allow_session_naming and self.http is not None:
            msg = (
                "--allow-session-naming applies to stdio only: over HTTP a call's arguments "
                "may name any session its token may reach (its tenant's, for a tenant token)"
            )
            raise ConfigurationError(msg)
        if self.session is None:
            return
        if self.http is not None:
            msg = (
                "--session applies to stdio only: over HTTP each client's calls land in its own "
                "Mcp-Session-Id, or name their session"
            )
            raise ConfigurationError(msg)
        if self.runtime.policy.require_session:
            msg = "--session names where calls without a session go; --require-session refuses them"
            raise ConfigurationError(msg)
        try:
            extract_context({}, {"sessionId": self.session}, self.runtime.policy)
        except ContextError as exc:
            msg = f"--session: {exc}".replace("context field '_meta.sessionId' ", "")
            raise ConfigurationError(msg) from None

    def _check_session_id_prefix(self) -> None:
        if self.session_id_prefix is None:
            return
        if self.http is None:
            msg = "--session-id-prefix applies to --http only: stdio has no session ids"
            raise ConfigurationError(msg)
        try:
            check_session_id_prefix(self.session_id_prefix)
        except ValueError as exc:
            msg = f"--session-id-prefix: {exc}"
            raise ConfigurationError(msg) from None

    def _check_proxy_options(self) -> None:
        for host in self.allow_hosts:
            if not _HOST_NAME.fullmatch(host):
                msg = (
                    f"--allow-host {host!r}: expected a host name as a Host header carries it, "
                    "like mcp.example.com or mcp.example.com:8443"
                )
                raise ConfigurationError(msg)
        for proxy in self.trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                msg = (
                    f"--trusted-proxy {proxy!r}: expected an IP address or network, like "
                    "127.0.0.1 or 10.0.0.0/8"
                )
                raise ConfigurationError(msg) from None

    def _check_metrics(self) -> None:
        if self.metrics_address is not None and not self.metrics:
            msg = "metrics_address is set but metrics are off"
            raise ConfigurationError(msg)
        if not self.metrics:
            return
        if self.http is None and self.metrics_address is None:
            msg = "a stdio server serves metrics on a listener of its own: --metrics HOST:PORT"
            raise ConfigurationError(msg)
        if importlib.util.find_spec("prometheus_client") is None:
            msg = "--metrics needs prometheus-client: pip install 'mcp-actors[metrics]'"
            raise ConfigurationError(msg)

    def _check_modules(self) -> None:
        """Import the modules named by spec now, and refuse unknown or repeated names."""
        names = [
            entry.name if isinstance(entry, ToolModule) else _builtin_or_loaded(entry).name
            for entry in self.modules
            if entry != "workspace"
        ]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            msg = f"module(s) {', '.join(repeated)} given more than once; module names are unique"
            raise ConfigurationError(msg)

    def _check_state(self) -> None:
        try:
            check_store_url(self.state_url)
        except ValueError as exc:
            msg = f"--state: {exc}"
            raise ConfigurationError(msg) from None

    @property
    def state_url(self) -> str | tuple[str, ...]:
        """The store to open: `state`, or the SQLite file in the user's state directory."""
        if self.state is not None:
            return self.state
        return default_state_url("stdio" if self.http is None else "http")

    @property
    def state_creation(self) -> Creation:
        """What opening the store may make: the default file's folders too, else the file."""
        return "folders" if self.state is None else "file"

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
        as the server's user. OAuth tokens bound to tenants count as tenant tokens.
        """
        if not self.allow_exec or self.unsafe_shared_exec:
            return
        tenants = sorted({tenant for tenant in self.tokens.values() if tenant is not None})
        if self.oauth is not None and self.oauth.tenant_claim is not None:
            tenants.append(f"OAuth claim {self.oauth.tenant_claim!r}")
        if tenants:
            msg = (
                f"refusing --allow-exec next to tenant tokens ({', '.join(tenants)}): a program "
                "it runs can read the server's tokens and reach every tenant's sessions; serve "
                "the workspace from a separate server with gateway tokens only, or pass "
                "--unsafe-shared-exec to accept that"
            )
            raise ConfigurationError(msg)
        if not self.authenticates:
            msg = (
                "refusing --allow-exec over HTTP without tokens: any local user could run "
                "programs as this server's user; add gateway tokens (--token TOKEN), or pass "
                "--unsafe-shared-exec to accept that"
            )
            raise ConfigurationError(msg)

    @property
    def enabled(self) -> tuple[str | ToolModule[Any], ...]:
        """The modules to enable: `modules`, plus ``workspace`` with `allow_exec`."""
        if self.allow_exec and "workspace" not in self.modules:
            return (*self.modules, "workspace")
        return self.modules


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
    """The tool modules `options` enables, in the order given (the options are checked first)."""
    return [
        entry
        if isinstance(entry, ToolModule)
        else options.workspace_module()
        if entry == "workspace"
        else _builtin_or_loaded(entry)
        for entry in options.enabled
    ]


_BUILTIN: Final[Mapping[str, ToolModule[Any]]] = {
    "planning": planning,
    "playbook_store": playbook_store,
    "content_store": content_store,
}


def _builtin_or_loaded(entry: str) -> ToolModule[Any]:
    if ":" in entry or is_file_spec(entry):
        return load_module(entry)
    module = _BUILTIN.get(entry)
    if module is None:
        msg = (
            f"unknown module {entry!r}; built-in: {', '.join(KNOWN_MODULES)}, or name your own "
            "as package.module:attribute or path/to/file.py"
        )
        raise ConfigurationError(msg)
    return module
