"""The peer on the MCP SDK's own transport: ``python -m benchmarks._sdk_transport_peer``.

What ``serve --http`` is measured against in the ``mcp`` scenario's HTTP part
(`benchmarks._over_http`): the very adapter ``serve --http`` builds — the same
modules (``serve``'s defaults), a runtime on a memory store, conversation
handles on — behind the SDK's Streamable HTTP app, whose
``StreamableHTTPSessionManager`` answers every request, served by hypercorn
on trio. That is a server built on the SDK as it ships: no fast path, none of
our server's HTTP parsing, and none of the gate's or the front's checks
either (no tokens, no Host or Origin rules), which only make ours dearer.
The SDK's transport is kept whole for this comparison alone: ``serve``
answers every request on its own server, handing the SDK's session manager
only what its fast path does not answer.

It prints ``listening on URL`` once it listens, as ``serve --http`` does,
logs warnings only, and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import signal
import sys
from functools import partial
from typing import TYPE_CHECKING, Final

import trio

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework
    from starlette.applications import Starlette

    from actors.server import CallTarget, ServeOptions
    from protocol import HandleKeys

__all__ = ["PEER", "command", "main", "sdk_transport_app", "serve_peer"]

PEER: Final = "SDK transport (hypercorn)"
"""The peer's name in figures and notes."""


def command() -> list[str]:
    """The peer's command line, for `benchmarks._http_floors.start_processes`."""
    return [sys.executable, "-m", "benchmarks._sdk_transport_peer"]


async def serve_peer() -> None:
    """Serve the peer on an ephemeral port of 127.0.0.1 until SIGTERM or SIGINT."""
    # Imported here: the benchmarks import this module's names without the server extra.
    from actors.server import ServeOptions, local_runtime
    from actors.server._handle_keys import serving_keys
    from actors.store import open_store

    options = ServeOptions(http=("127.0.0.1", 0), state="memory")
    options.check()
    async with (
        open_store(options.state_url, create=options.state_creation) as store,
        local_runtime(options, store, None, None) as runtime,
    ):
        handles, _ = serving_keys(options, store.url)
        await _serve_on_hypercorn(sdk_transport_app(runtime, options, handles))


def sdk_transport_app(
    runtime: CallTarget, options: ServeOptions, handles: HandleKeys | None = None
) -> Starlette:
    """``serve --http``'s adapter for `runtime` behind the SDK's Streamable HTTP app, as the
    SDK ships it: every request answered by its session manager (`tests/server/test_fast_path.py`
    checks the fast path's answers against it); `handles` as `serving_keys` gives them."""
    from mcp.server.transport_security import TransportSecuritySettings

    from actors.server import MCP_PATH
    from actors.server.http._app import http_adapter

    adapter = http_adapter(runtime, options, handles=handles)
    # wrk's Host is 127.0.0.1:PORT, which the SDK's check lets by: it would only add its cost.
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return adapter.server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=unchecked
    )


async def _serve_on_hypercorn(app: Starlette) -> None:
    """Serve `app` with hypercorn until a signal; print where, as ``serve --http`` does."""
    import hypercorn.config
    import hypercorn.trio

    from actors.server import MCP_PATH

    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None  # as ``serve --log-level warning``: no line per request
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0
    stopped = trio.Event()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            # Starlette's and hypercorn's ASGI type hints describe the same protocol differently.
            framework: ASGIFramework = app  # type: ignore[assignment]
            serve = partial(hypercorn.trio.serve, framework, config, shutdown_trigger=stopped.wait)
            binds: list[str] = await nursery.start(serve)
            print(f"listening on {binds[0]}{MCP_PATH}", flush=True)
            async for _ in signals:
                stopped.set()
                break


def main() -> int:
    """Serve the peer until a signal."""
    from actors.server import configure_logging

    configure_logging("warning")
    trio.run(serve_peer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
