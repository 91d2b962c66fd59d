"""Ending the sessions of connections that closed, in tasks of the server's own.

An HTTP client's calls that name no session land in a session of its
``Mcp-Session-Id`` alone (`actors.server._mcp`), so when its HTTP session
ends (DELETE, or no request for ``--session-idle-timeout``) the adapter ends
that session too: its actors stop and its stored state is deleted.

The SDK tells of a connection's end by unwinding the connection's
``exit_stack``, and it bounds that unwinding (5 s in mcp 2.3): what still runs
then is cancelled, with a warning the log shows only now and then. An end
must not run there. It waits for the store, which deletes one session at a
time, each in a transaction of its own synced to disk, beside the saves: when
many sessions end at once on a slow disk, an end can wait its turn for longer
than that bound. It was cancelled then, and the session's state stayed stored,
out of every client's reach, until the retention swept it days later. So the
exit stack only hands the session to `SessionEnds.end_soon`, which never
awaits, and the end runs in the server's own task group for as long as its
turn takes. When the server stops, the ends still under way are waited for,
bounded, before the runtime closes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, final

import anyio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._subscriptions import Background

__all__ = ["SessionEnds"]

logger = logging.getLogger("actors.mcp")


@final
class SessionEnds:
    """Ends sessions in the background while the server serves; waits for them as it stops."""

    def __init__(self, end: Callable[[str], Awaitable[object]]) -> None:
        """Sessions ended with `end`, which reports its own outcome (a log line)."""
        self._end = end
        self._pending = 0
        self._settled = anyio.Event()
        self._settled.set()

    def end_soon(self, background: Background, session: str) -> None:
        """Start ending `session` in `background`, the server's task group; return at once."""
        background.start_soon(self._run, session)
        if not self._pending:
            self._settled = anyio.Event()
        self._pending += 1

    async def _run(self, session: str) -> None:
        try:
            await self._end(session)
        except Exception:
            # In the server's own task group: a failure here must not stop the server.
            logger.exception("ending session %r of a closed connection failed", session)
        finally:
            self._pending -= 1
            if not self._pending:
                self._settled.set()

    async def settle(self, bound: float) -> None:
        """Wait up to `bound` seconds (shielded: the server is stopping) for the ends under way."""
        with anyio.move_on_after(bound, shield=True):
            while self._pending:
                await self._settled.wait()
        if self._pending:
            logger.warning(
                "stopping with the sessions of %d closed connection(s) still being ended "
                "after %g s: what they stored is left to the retention",
                self._pending,
                bound,
            )
