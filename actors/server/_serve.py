"""``actors serve``: the MCP server on stdio or Streamable HTTP, its limits, auth and shutdown.

Transports
----------
* **stdio** (the default): the SDK's ``stdio_server`` and ``Server.run``. The
  parent process is the trusted middleware, so its context claims are taken
  as given. `actors.server._stdio` reads and writes the pipes (size limit on lines,
  errors for lines the SDK cannot parse, a bound on requests read ahead of
  their replies, no worker threads).
* **Streamable HTTP** (``--http HOST:PORT``): every request is served by our
  own HTTP/1.1 server on trio (`actors.server.http._server`): the common ones
  on the fast path (`actors.server.http._fast_path`), the rest by the SDK's
  Starlette app and session manager, all behind the ASGI gate of
  `actors.server.http._admission`: ``Origin`` (403), bearer token (401), body
  size (413), malformed JSON-RPC answered with its id, and a cap on open
  sessions per token (429). In front of it all, ``Host`` is checked (DNS
  rebinding; `actors.server.http._host_rules`).

Tokens and tenants
------------------
Operators configure static bearer tokens, each optionally bound to a tenant,
or an OAuth issuer whose access tokens name their tenant in a claim
(`actors.server.auth._oauth`), or both.
A token bound to tenant ``T`` may address only the sessions ``T`` and
``T/…`` (see `protocol.Caller` for the default session a call without one gets).
A token bound to no tenant is a trusted gateway and may address any session,
as may every client of a loopback server configured without tokens. The SDK
ties each HTTP session (``Mcp-Session-Id``) to the token that opened it.

Operators
---------
``/healthz`` and ``/readyz`` are served beside ``/mcp`` (`actors.server.http._operator_routes`);
``--metrics`` adds Prometheus metrics there, or on a listener of its own with
``--metrics HOST:PORT`` (the only way for a stdio server). Spans are made when
the process has an OpenTelemetry SDK configured. ``--log-format json`` writes
one JSON object per log record (`actors.server._logs`).

Sessions of their own
---------------------
A call that names no session lands in its connection's own session, never
in one another connection reaches (invariant 11): over stdio, a session made
for the connection (or the one ``--session`` names, shared on purpose); over
HTTP, the client's ``Mcp-Session-Id``. A connection's own session ends with
it: its actors stop and its stored state is deleted, since nobody else can
name it. The log says at startup which rule is in force.

Shutdown
--------
The first SIGINT or SIGTERM stops new calls (they get an ``isError``
result that says to retry), lets the calls in flight finish for up to
``shutdown_grace`` seconds, goes on answering everything else until no
request came for a moment (a client lists the tools right after a result, to
check it against the tool's output schema), then stops the transport; the
runtime then stops every actor and runs every state's ``on_stop`` (the
workspace's kills its processes). A second signal stops the transport at
once. EOF on stdin ends a stdio server the same way: the calls read before
it still get their replies, within the same grace (a client may close stdin
right after its last request).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import resource
import signal
from typing import TYPE_CHECKING, Final, Protocol

import attrs
import trio

from .._errors import RuntimeCallError
from .._observe import Observer, Observers
from .._runtime import open_runtime
from ..store import StoreError, open_store
from ._handle_keys import PROCESS_KEY, serving_keys
from ._logs import write_log_lines
from ._options import build_modules, describe_tokens
from ._stdio import serve_stdio
from .http._app import http_adapter, http_bind, serve_http
from .http._operator_routes import OPS_MAX_BODY_BYTES, OpsRoutes, Readiness, serve_asgi
from .http._server import DEFAULT_MAX_CONNECTIONS
from .mcp._adapter import McpAdapter, connection_session, stdio_caller

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractAsyncContextManager

    from protocol import HandleKeys

    from .._target import CallTarget
    from ..store import StateStore
    from ..telemetry import PrometheusMetrics
    from ._options import ServeOptions

__all__ = ["Backend", "local_runtime", "run", "serve"]

logger = logging.getLogger("actors.serve")
_DAY = 86400.0


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


DRAIN_QUIET: Final = 1.0
"""Seconds without a request after which a draining server stops (calls answered first)."""
_DRAIN_QUIET_LIMIT: Final = 5.0  # a client that never stops sending cannot hold the stop off


async def _drain(shutdown: _Shutdown, adapter: McpAdapter, grace: float, stop: trio.Event) -> None:
    """Once shutdown is requested, refuse new calls, wait for those in flight, then `stop`.

    After the last call, the server goes on answering what clients send
    around it (tools/list, ping) until they fall quiet.
    """
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
    else:
        with trio.move_on_after(_DRAIN_QUIET_LIMIT):
            await adapter.wait_quiet(DRAIN_QUIET)
    stop.set()


class Backend(Protocol):
    """What runs the calls a server takes: `local_runtime`, or ``actors cluster``'s shards."""

    def __call__(
        self,
        options: ServeOptions,
        store: StateStore,
        observer: Observer | None,
        metrics: PrometheusMetrics | None,
        /,
    ) -> AbstractAsyncContextManager[CallTarget]:
        """A context manager that yields the call target for the life of the server.

        `observer` is what the server observes calls with (`metrics` among it,
        when ``--metrics`` is on): a backend whose calls run elsewhere may add
        what it measures there to `metrics` (`PrometheusMetrics.include`).
        """
        ...


def local_runtime(
    options: ServeOptions,
    store: StateStore,
    observer: Observer | None,
    metrics: PrometheusMetrics | None,
) -> AbstractAsyncContextManager[CallTarget]:
    """The default backend: a runtime in this process, on `store`, observed by `observer`."""
    del metrics  # among `observer` already
    return open_runtime(build_modules(options), options.runtime, store=store, observer=observer)


def _adapter(
    runtime: CallTarget,
    options: ServeOptions,
    observer: Observer | None,
    stdio_session: str | None,
    handles: HandleKeys | None,
) -> McpAdapter:
    if options.http is not None:
        return http_adapter(runtime, options, observer, handles)
    # The stdio parent is a trusted middleware; its model, which writes the arguments, is not.
    caller = stdio_caller(
        stdio_session, arguments_may_name_sessions=options.allow_session_naming, handles=handles
    )
    return McpAdapter(
        runtime,
        caller=caller,
        observer=observer,
        allow_end_session=options.allow_end_session,
        handles=handles,
    )


def _stdio_session(options: ServeOptions) -> str | None:
    """The session a stdio client's calls land in when they name none."""
    if options.http is not None or options.session is not None:
        return options.session
    if options.runtime.policy.require_session:
        return None
    return connection_session()


def _session_rule(options: ServeOptions, stdio_session: str | None) -> str:
    """Where a call that names no session lands, in words for the startup log."""
    policy = options.runtime.policy
    if options.http is not None:
        if policy.require_session:
            fallback = "refused (--require-session)"
        elif options.handles_on:
            fallback = "a conversation handle's conversation, else refused"
        else:
            fallback = f"a tenant token's bucket 'TENANT/{policy.default_session}', others refused"
        return (
            "the client's own HTTP session (its Mcp-Session-Id, ended when it closes); "
            f"without one, {fallback}"
        )
    if stdio_session is None:
        return "refused (--require-session)"
    if options.session is not None:
        return f"session {options.session!r} (--session), shared by every server given it"
    return (
        "a session private to this connection, ended when it closes "
        "(--session NAME keeps one across restarts)"
    )


def _handle_rule(options: ServeOptions, keys_from: str) -> str:
    """Whether handles are served, and with which keys, in words for the startup log."""
    if not options.handles_on:
        return "off (--handles: a model starts a conversation and passes its handle)"
    days = options.handle_lifetime / _DAY
    return (
        "on: a stateful call that names no session passes the handle of "
        f"conversation__start as 'conversation' (valid {days:g} days); keys: {keys_from}"
    )


async def _end_private_session(runtime: CallTarget, session: str, bound: float) -> None:
    """End the stdio connection's own session once the transport has stopped."""
    # Shielded: this runs on the way out, also after a second signal cut the transport.
    with trio.CancelScope(shield=True), trio.move_on_after(bound):
        try:
            deleted = await runtime.end_session(session)
        except (RuntimeCallError, StoreError) as exc:
            logger.warning("ending this connection's session failed: %s", exc)
            return
        logger.info("connection closed: its session ended (%d stored item(s) deleted)", deleted)


def _observer(metrics: PrometheusMetrics | None) -> Observer | None:
    """The metrics, and spans when the process has an OpenTelemetry SDK; None without either."""
    observers: list[Observer] = [] if metrics is None else [metrics]
    if importlib.util.find_spec("opentelemetry") is not None:
        from ..telemetry import TracingObserver, tracing_configured

        if tracing_configured():
            observers.append(TracingObserver())
    return Observers(observers) if observers else None


def _metrics(options: ServeOptions) -> PrometheusMetrics | None:
    if not options.metrics:
        return None
    from ..telemetry import PrometheusMetrics

    return PrometheusMetrics()


async def _serve_transport(
    adapter: McpAdapter,
    options: ServeOptions,
    stop: trio.Event,
    readiness: Readiness,
    metrics: PrometheusMetrics | None,
) -> None:
    """Serve MCP on the transport `options` name, and the operator's listener if any."""
    async with trio.open_nursery() as nursery:
        if options.metrics_address is not None:
            routes = OpsRoutes(None, readiness, metrics, tokens=None)
            host, port = options.metrics_address
            announce = "operator endpoints on {}"
            # On our own HTTP server too: one server to harden, under the same limits.
            serve = functools.partial(
                serve_asgi,
                grace=1.0,
                flag="--metrics HOST:PORT",
                limits=attrs.evolve(options.wire_limits, max_body_bytes=OPS_MAX_BODY_BYTES),
            )
            await nursery.start(serve, routes, http_bind(host, port), stop, announce)
        if options.http is None:
            await serve_stdio(
                adapter,
                options.max_request_bytes,
                stop,
                eof_grace=options.runtime.shutdown_grace,
                max_in_flight=options.max_in_flight,
            )
        else:
            shared = metrics if options.metrics_address is None else None
            await serve_http(adapter, options, stop, readiness, shared)
        stop.set()  # the transport ended (EOF on stdin): so does the operator's listener


def _raise_open_file_limit() -> None:
    """Raise the soft limit on open files to the hard one, and log both: a listener's need.

    Each connection takes a descriptor. Under the usual soft limit (1 024, kept low
    for programs that still use select()), about a thousand slow clients exhaust it
    long before the listener's connection cap: trio then stops accepting, and a valid
    client waits instead of being answered.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as error:  # macOS: an infinite hard limit is no soft one
            logger.warning("open files: the soft limit stays %d (hard %d): %s", soft, hard, error)
            return
    logger.info("open files: soft limit %d, now %d (the hard limit)", soft, hard)
    if hard < DEFAULT_MAX_CONNECTIONS:
        logger.warning(
            "open files: %d, fewer than the %d connections a listener serves: past it, new "
            "clients wait; raise the hard limit (ulimit -Hn, systemd's LimitNOFILE)",
            hard,
            DEFAULT_MAX_CONNECTIONS,
        )


async def serve(options: ServeOptions, *, backend: Backend = local_runtime) -> None:
    """Serve MCP until EOF on stdin (stdio) or a signal; then shut down in order.

    Must run in the main thread (it handles SIGINT and SIGTERM itself). One
    that listens on TCP raises the process's soft limit on open files to its hard
    limit first (each connection takes a file), and logs both.
    Raises ConfigurationError for options that `ServeOptions.check` refuses.
    `backend` runs the calls: a runtime in this process by default
    (``actors cluster`` passes its shards).
    """
    options.check()
    options = _masking_decided(options)
    if options.http is not None or options.metrics_address is not None:
        _raise_open_file_limit()
    shutdown = _Shutdown()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as watchers:
            # Signals are watched until the runtime has stopped, so that a
            # second one during cleanup is logged instead of killing the process.
            watchers.start_soon(shutdown.watch, signals)
            # Log lines written together, here: every one is written once this nursery ends.
            watchers.start_soon(write_log_lines)
            metrics = _metrics(options)
            observer = _observer(metrics)
            async with (
                open_store(options.state_url, create=options.state_creation) as store,
                backend(options, store, observer, metrics) as runtime,
            ):
                logger.info("modules: %s", ", ".join(runtime.registry.modules))
                logger.info("state: %s", store.url)
                if options.http is not None and (options.tokens or options.oauth is None):
                    logger.info("tokens: %s", describe_tokens(options.tokens))
                if options.oauth is not None:
                    logger.info("oauth: %s", options.oauth.describe())
                if options.session_id_prefix is not None:
                    shown = f"{options.session_id_prefix}.<id>"
                    logger.info("session ids: %s (this front's, for the load balancer)", shown)
                stdio_session = _stdio_session(options)
                handles, keys_from = serving_keys(options, store.url)
                logger.info("calls that name no session: %s", _session_rule(options, stdio_session))
                level = logging.WARNING if keys_from == PROCESS_KEY else logging.INFO
                logger.log(level, "conversation handles: %s", _handle_rule(options, keys_from))
                adapter = _adapter(runtime, options, observer, stdio_session, handles)
                if metrics is not None:
                    metrics.track_in_flight(lambda: adapter.in_flight)
                stop = trio.Event()
                grace = options.runtime.shutdown_grace
                watchers.start_soon(_drain, shutdown, adapter, grace, stop)
                # A backend that can tell whether it is there (a cluster front) says so too.
                readiness = Readiness(store, shutdown.requested.is_set, backend=runtime.unavailable)
                with shutdown.hurry:
                    await _serve_transport(adapter, options, stop, readiness, metrics)
                if stdio_session is not None and options.session is None:
                    grace = options.runtime.shutdown_grace + options.runtime.stop_timeout
                    await _end_private_session(runtime, stdio_session, grace)
                logger.info("transport stopped; stopping actors")
            watchers.cancel_scope.cancel()
    logger.info("stopped")


def _masking_decided(options: ServeOptions) -> ServeOptions:
    """`options` with ``mask_errors`` left to the host decided: on over HTTP, off over stdio.

    HTTP clients are remote, perhaps other tenants: an unexpected exception's text may hold
    paths, queries, secrets or another key's data. A stdio client is the user's own parent
    process, which may see what the server's log shows.
    """
    if options.runtime.mask_errors is not None:
        return options
    runtime = attrs.evolve(options.runtime, mask_errors=options.http is not None)
    return attrs.evolve(options, runtime=runtime)


def run(options: ServeOptions) -> None:
    """Serve as `serve` does, from synchronous code: ``trio.run(serve, options)``.

    For a script that serves its own modules::

        from actors.server import ServeOptions, run
        run(ServeOptions(modules=(notes,), http=("127.0.0.1", 8765)))
    """
    trio.run(serve, options)
