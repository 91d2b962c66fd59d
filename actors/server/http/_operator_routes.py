"""What an operator's tools ask the server: ``/healthz``, ``/readyz`` and ``/metrics``.

* ``GET /healthz`` answers 200 while the process serves HTTP at all: a load
  balancer or an orchestrator restarts a server that stops answering it.
* ``GET /readyz`` answers 200 while the server takes calls, and 503 with the
  reason while it does not: once shutdown began (it drains the calls in
  flight and refuses new ones), and while its state store cannot be reached.
  The store is probed by loading a key no module can have, with a deadline;
  the answer is reused for a second, so a client polling ``/readyz`` as fast
  as it can costs the store one load per second, not one per request.
* ``GET /metrics`` is the Prometheus exposition (the ``metrics`` extra).
  With ``--metrics`` it is on the MCP listener, and a server with tokens
  shows it only to a gateway token (one bound to no tenant): the figures are
  every tenant's, so a tenant's token gets 403. With ``--metrics HOST:PORT``
  it is on a listener of its own (a stdio server's only way to serve it, or
  an HTTP server's way to keep it off the public port) that takes no token,
  and these three paths are all that listener serves. Metrics gathered from
  elsewhere (a cluster's shards) are asked for at most once a second, and
  awaited without holding up any other request.
* ``/readyz`` also asks the backend, when it can say (a cluster front: is
  the cluster there?), with the same deadline and reuse as the store probe.

None of them says anything about sessions, tenants or calls beyond the
aggregate numbers the metrics carry.
"""

from __future__ import annotations

import enum
import errno
import functools
import logging
import math
from typing import TYPE_CHECKING, Final, cast, final

import trio
from starlette.responses import PlainTextResponse, Response

from protocol import ActorKey, ToolContext

from ...store import SplitStore, StoreError
from .._logs import announce as announce_line
from ..auth._principals import TENANT_CLAIM
from ._server import WireLimits, serve_wire

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.server.auth.provider import TokenVerifier
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ...store import StateStore
    from ...telemetry import PrometheusMetrics
    from ._server import FastHandler

__all__ = [
    "HEALTH_PATH",
    "METRICS_PATH",
    "OPS_MAX_BODY_BYTES",
    "READY_PATH",
    "OpsRoutes",
    "Readiness",
    "leaves",
    "serve_asgi",
]

logger = logging.getLogger("actors.serve")

HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
METRICS_PATH: Final = "/metrics"
# No module can be named so (module names are identifiers): loading it reads nothing real.
_PROBE_KEY: Final = ActorKey("-readyz", ToolContext("readyz-probe"))
PROBE_TIMEOUT: Final = 2.0
"""Seconds the store may take to answer the readiness probe."""
PROBE_REUSE: Final = 1.0
"""Seconds one probe's answer is reused for."""
OPS_MAX_BODY_BYTES: Final = 1024
"""Bytes of a request body the operator's own listener reads: its paths take none, and a
client that trickles one holds no more than that."""


@final
class Readiness:
    """Whether the server takes calls now; `problem` says why not."""

    def __init__(
        self,
        store: StateStore | None,
        draining: Callable[[], bool],
        *,
        backend: Callable[[], Awaitable[str | None]] | None = None,
        probe_timeout: float = PROBE_TIMEOUT,
        reuse_for: float = PROBE_REUSE,
    ) -> None:
        self._store = store
        self._draining = draining
        self._backend = backend
        self._probe_timeout = probe_timeout
        self._reuse_for = reuse_for
        self._answer: str | None = None
        self._answered_at = -math.inf
        self._probing: trio.Event | None = None

    async def problem(self) -> str | None:
        """``None`` when ready; else what keeps the server from taking calls."""
        if self._draining():
            return "shutting down: draining the calls in flight, taking no new ones"
        if self._store is None and self._backend is None:
            return None
        if trio.current_time() - self._answered_at >= self._reuse_for:
            await self._probe_once()
        return self._answer

    async def _probe_once(self) -> None:
        """Probe the store, or wait for the probe already under way (one at a time)."""
        if self._probing is not None:
            await self._probing.wait()
            return
        self._probing = trio.Event()
        try:
            self._answer = await self._probe()
            self._answered_at = trio.current_time()
        finally:
            # Set even if this request was cancelled, so that the waiters go on.
            self._probing.set()
            self._probing = None

    async def _probe(self) -> str | None:
        if self._backend is not None:
            problem = await self._backend()
            if problem is not None:
                logger.warning("readiness: %s", problem)
                return problem
        if self._store is None:
            return None
        with trio.move_on_after(self._probe_timeout):
            try:
                await _reach(self._store)
            except StoreError as error:
                logger.warning("readiness: the state store is unreachable: %s", error)
                return f"the state store {self._store.url} is unreachable"
            return None
        logger.warning("readiness: the state store took over %g s to answer", self._probe_timeout)
        return f"the state store {self._store.url} did not answer within {self._probe_timeout:g} s"


async def _reach(store: StateStore) -> None:
    """One read from `store`; from each partition of a split one, since any can be down."""
    if isinstance(store, SplitStore):
        await store.load_from_every_partition(_PROBE_KEY)
    else:
        await store.load(_PROBE_KEY)


@final
class OpsRoutes:
    """ASGI app: the three paths here, everything else to `app` (404 when there is none)."""

    def __init__(
        self,
        app: ASGIApp | None,
        readiness: Readiness,
        metrics: PrometheusMetrics | None,
        tokens: TokenVerifier | None,
    ) -> None:
        self._app = app
        self._readiness = readiness
        self._metrics = metrics
        self._tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer an operator's path, or pass the request on."""
        if scope["type"] == "lifespan" and self._app is None:
            await _lifespan(receive, send)
            return
        path = scope.get("path") if scope["type"] == "http" else None
        if path in (HEALTH_PATH, READY_PATH, METRICS_PATH):
            response = await self._answer(scope, path)
        elif self._app is not None:
            await self._app(scope, receive, send)
            return
        else:
            response = PlainTextResponse("not found\n", status_code=404)
        await response(scope, receive, send)

    async def _answer(self, scope: Scope, path: str) -> Response:
        if scope["method"] not in ("GET", "HEAD"):
            return PlainTextResponse("use GET\n", status_code=405, headers={"Allow": "GET, HEAD"})
        if path == HEALTH_PATH:
            return PlainTextResponse("ok\n")
        if path == READY_PATH:
            problem = await self._readiness.problem()
            if problem is None:
                return PlainTextResponse("ready\n")
            return PlainTextResponse(f"not ready: {problem}\n", status_code=503)
        if self._metrics is None:
            return PlainTextResponse("metrics are off (serve with --metrics)\n", status_code=404)
        access = await self._access(scope)
        if access is _Access.NONE:
            return PlainTextResponse(
                "a bearer token is required\n",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        if access is _Access.TENANT:
            return PlainTextResponse(
                "the metrics show every tenant's figures: a gateway token (bound to no tenant) "
                "reads them, a tenant's token does not\n",
                status_code=403,
            )
        await self._metrics.refresh()
        body, content_type = self._metrics.exposition()
        return Response(body, media_type=content_type)

    async def _access(self, scope: Scope) -> _Access:
        if self._tokens is None:
            return _Access.GATEWAY
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and token:
                    verified = await self._tokens.verify_token(token.strip())
                    if verified is None:
                        return _Access.NONE
                    tenant = (verified.claims or {}).get(TENANT_CLAIM)
                    return _Access.GATEWAY if tenant is None else _Access.TENANT
        return _Access.NONE


class _Access(enum.Enum):
    """What a request's token lets it read of ``/metrics``."""

    NONE = "none"
    TENANT = "tenant"
    GATEWAY = "gateway"


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; `error` itself if it is none."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def _cannot_bind(error: OSError, bind: str, flag: str) -> str:
    """What to do about an address that could not be bound, naming it and its option."""
    if error.errno == errno.EADDRINUSE:
        return (
            f"{bind} is in use already ({flag}): stop what listens there, or give another "
            "port (0 picks a free one)"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return f"{bind} is not an address of this machine ({flag})"
    if error.errno == errno.EACCES:
        return f"{bind} needs privileges to listen on ({flag}): give a port above 1023"
    return f"cannot listen on {bind} ({flag}): {error.strerror or error}"


async def _lifespan(receive: Receive, send: Send) -> None:
    """The ASGI lifespan of a listener with nothing to start or stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve_asgi(
    app: ASGIApp,
    bind: str,
    stop: trio.Event,
    announce: str,
    *,
    grace: float,
    flag: str,
    limits: WireLimits | None = None,
    fast: FastHandler | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI `app` on `bind` (``HOST:PORT``) until `stop`.

    It is served by our own server, `actors.server.http._server`, within
    `limits` (the defaults of `WireLimits` when None), `fast` tried before the
    app. Once it listens, prints `announce` with each address bound in
    place of ``{}`` (`announce_line`: written whatever the log level, since
    tests and scripts parse it; a JSON record under ``--log-format json``).
    Open connections get `grace` seconds once `stop` is set.
    An address that cannot be bound is an OSError naming it and `flag`, the
    option that gave it.
    """
    limits = WireLimits() if limits is None else limits
    serve = functools.partial(serve_wire, app, bind, stop, grace=grace, limits=limits, fast=fast)
    async with trio.open_nursery() as nursery:
        try:
            binds: list[str] = await nursery.start(serve)
        except* OSError as failed:
            first = cast("OSError", leaves(failed)[0])
            raise OSError(_cannot_bind(first, bind, flag)) from None
        for where in binds:
            announce_line(announce.format(where))
        task_status.started()
