"""Ending the sessions of connections that closed, in tasks of the server's own.

An HTTP client's calls that name no session land in a session of its
``Mcp-Session-Id`` alone (`actors.server.mcp._adapter`), so when its HTTP session
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
from typing import TYPE_CHECKING, Any, Final, final

import anyio
from mcp import types

from protocol import BackendType, NoSessionError, ServiceInfo

from ..._errors import RuntimeCallError
from ...store import StoreError
from ._request_context import connection_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from protocol import Caller, ContextPolicy

    from ._subscriptions import Background

__all__ = [
    "END_SESSION",
    "END_SESSION_SERVICE",
    "END_SESSION_TOOL",
    "NO_ARGUMENTS",
    "ConnectionSessions",
    "SessionEnds",
    "not_own_session",
    "own_session",
]

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


@final
class ConnectionSessions:
    """A connection's own session, ended when its connection closes (``end_connection_sessions``).

    The adapter tells it of every request that reached a session (`note`) and
    registers `middleware` with the SDK's server: an ``initialize`` has its
    connection's closing end the session it owns, if a request reached it.
    The ends run in the server's own tasks (`ends`).
    """

    def __init__(
        self,
        end_session: Callable[[str], Awaitable[int]],
        identify: Callable[[Any], Caller],
        policy: ContextPolicy,
    ) -> None:
        self._end_session = end_session
        self._identify = identify
        self._policy = policy
        # Transport session → its connection's own session, once a request reached it.
        self._own: dict[str, str] = {}
        self.ends: Final = SessionEnds(self._end_connection_session)
        """The ends under way: the server waits for them as it stops."""

    def note(self, session: str, caller: Caller) -> None:
        """Note that a request of `caller` reached `session`: if it is its connection's own,
        it ends with the connection.

        Only a connection of the handshake era has a transport session of its
        own (`Caller.transport_session`): a 2026-era request has none.
        """
        transport = caller.transport_session
        if transport is not None and session == caller.default_session(self._policy):
            self._own[transport] = session

    async def middleware(self, ctx: Any, call_next: Any) -> Any:
        """Server middleware: an ``initialize`` has its connection's closing end its own session.

        Registered when the connection opens, whichever path its calls take
        later (the SDK's, or `actors.server.http._fast_path` for plain calls); the session
        is ended only if a request reached it (`note`).
        """
        result = await call_next(ctx)
        if ctx.method == "initialize":
            # The transport's session as the caller's rules see it: an HTTP session's id, or
            # whatever a connection is identified by (a connection of its own, in memory).
            transport = self._identify(ctx).transport_session
            if transport is not None:
                # Not an async callback that ends it: the SDK cancels the exit stack's
                # callbacks after a few seconds, and an end may wait longer than that
                # for its turn at the store (see `actors.server.mcp._session_ends`).
                background: Background = ctx.lifespan_context
                connection_of(ctx).exit_stack.callback(self._closed, background, transport)
        return result

    def _closed(self, background: Background, transport: str) -> None:
        """The connection of `transport` closed: end its own session, if a request reached it."""
        own = self._own.pop(transport, None)
        if own is not None:
            self.ends.end_soon(background, own)

    async def _end_connection_session(self, session: str) -> None:
        """End the session of a connection that closed; only a note in the log if it cannot.

        Runs in the server's own task group (`SessionEnds`), as long as the
        session's calls and the store take; a server that stops waits for it,
        bounded, and then leaves the session's state to the retention.
        """
        try:
            deleted = await self._end_session(session)
        except (RuntimeCallError, StoreError) as exc:
            logger.warning(
                "the connection of session %r closed; ending it failed: %s", session, exc
            )
            return
        logger.info(
            "the connection of session %r closed: ended it (%d stored item(s) deleted)",
            session,
            deleted,
        )


END_SESSION: Final = "session__end"
"""The tool that ends the caller's own session: its actors stop and its stored state goes.
Listed only when the operator enables it (``allow_end_session``)."""


NO_ARGUMENTS: Final = {"type": "object", "properties": {}, "additionalProperties": False}


END_SESSION_SERVICE: Final = ServiceInfo("session", "end", BackendType.BUILTIN)


END_SESSION_TOOL: Final = types.Tool(
    name=END_SESSION,
    description=(
        "End this connection's session for good: stop its state in every module and delete "
        "what is stored for it (goals, playbooks, documents, workspace files and processes). "
        "Only this connection's own session is ended; it takes no session id."
    ),
    input_schema=NO_ARGUMENTS,
    output_schema={
        "type": "object",
        "properties": {"sessionId": {"type": "string"}, "deleted": {"type": "integer"}},
        "required": ["sessionId", "deleted"],
        "additionalProperties": False,
    },
    title="End session",
    # Deletes stored state; ending an ended session again deletes nothing more.
    annotations=types.ToolAnnotations(
        title="End session", destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)


def own_session(caller: Caller, policy: ContextPolicy) -> str | None:
    """The session `caller`'s calls land in when they name none; None if there is none."""
    try:
        return caller.default_session(policy)
    except NoSessionError:
        return None


def not_own_session(named: str, own: str | None) -> str:
    if own is None:
        return (
            f"{END_SESSION} ends this connection's own session, and this connection has none "
            "(it names a session in each call); the operator can end a session with "
            "'mcp-actors state delete'"
        )
    return (
        f"{END_SESSION} ends only this connection's own session ({own!r}), not {named!r}; "
        "call it without a session id"
    )
