"""The MCP endpoint as an ASGI app of yours: mount it in FastAPI or Starlette.

`McpEndpoint` is the app ``serve --http`` serves — the SDK's Streamable HTTP
app behind the gate, with the same tokens, tenants, Origin and Host rules and
limits — made to live inside an application that already has an ASGI server
and a lifespan. It is built when the application is (so it can be mounted),
and serves while its `serving` block runs in the application's lifespan,
with the runtime that block is given: an `actors.AsyncioRuntime` under
asyncio, a `Runtime` under trio. The adapter, the gate and the SDK run on
anyio, so they run on the host's own loop; only the runtime's actors run on
trio.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, final

import anyio
from starlette.responses import PlainTextResponse

from .._handle_keys import PROCESS_KEY, serving_keys
from ._app import http_adapter, http_app
from ._responses import RefusalLog

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..._target import CallTarget
    from .._options import ServeOptions

__all__ = ["McpEndpoint"]

logger = logging.getLogger("actors.serve")

_NOT_SERVING: Final = (
    "the MCP endpoint is not serving: run `async with endpoint.serving(runtime):` in the "
    "application's lifespan"
)


@final
class McpEndpoint:
    """An MCP Streamable HTTP endpoint to mount in your ASGI application.

    ``options`` are `ServeOptions`, as for ``serve --http``: ``http`` names the
    host the application is served on (its port is not used; on a loopback host
    the SDK's Host check applies), and ``tokens``, ``allow_origins``,
    ``max_request_bytes``, ``max_sessions_per_token``, ``session_idle_timeout``
    and ``max_stored_event_bytes`` apply unchanged; so do conversation handles
    (``handles``, on by default: give ``handle_key_file`` for handles that outlive the
    process and that every replica of the application reads). The endpoint answers at
    ``/mcp`` below where it is mounted (``app.mount("/", endpoint)`` serves
    ``/mcp``), and 503 outside its `serving` block::

        endpoint = McpEndpoint(ServeOptions(http=("127.0.0.1", 8000)))

        @asynccontextmanager
        async def lifespan(app):
            async with open_asyncio_runtime([notes]) as runtime, endpoint.serving(runtime):
                yield

        app = FastAPI(lifespan=lifespan)
        app.mount("/", endpoint)  # after the application's own routes
    """

    def __init__(self, options: ServeOptions) -> None:
        if options.http is None:
            msg = "McpEndpoint needs options.http: the (host, port) the application is served on"
            raise ValueError(msg)
        options.check()
        self._options = options
        self._app: ASGIApp | None = None

    @asynccontextmanager
    async def serving(self, runtime: CallTarget) -> AsyncIterator[None]:
        """Serve `runtime`'s tools for the duration of the block (the application's lifespan).

        On the way out, new calls are refused, calls in flight get up to the
        runtime's ``shutdown_grace`` to finish, and the SDK's sessions close.
        """
        if self._app is not None:
            msg = "this McpEndpoint is already serving"
            raise RuntimeError(msg)
        handles, keys_from = serving_keys(self._options)
        if keys_from == PROCESS_KEY:
            logger.warning("conversation handles: keys %s", keys_from)
        adapter = http_adapter(runtime, self._options, handles=handles)
        refusals = RefusalLog()
        app = http_app(adapter, self._options, refusals)
        try:
            async with adapter.server.session_manager.run():
                self._app = app
                try:
                    yield
                finally:
                    self._app = None
                    adapter.close()
                    # Shielded: a cancelled lifespan still lets calls in flight finish.
                    with (
                        anyio.CancelScope(shield=True),
                        anyio.move_on_after(runtime.config.shutdown_grace),
                    ):
                        await adapter.wait_idle()
        finally:
            refusals.flush()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        if scope["type"] == "lifespan":
            return  # a mounted app gets no lifespan: `serving` is its lifespan
        app = self._app
        if app is None:
            await PlainTextResponse(_NOT_SERVING, status_code=503)(scope, receive, send)
            return
        await app(scope, receive, send)
