"""Session ids that name their front, so that a load balancer keeps a session on it.

Why
---
A 2026-era request carries everything a front needs, so any front of a
cluster can serve it. A 2025-era HTTP session does not: the SDK keeps it, its
streams and its stored events in the memory of the front that answered its
``initialize``, and any other front answers its ``Mcp-Session-Id`` with 404.
Several fronts behind one load balancer therefore need each session's requests
to reach the front that opened it. nginx open source learns no stickiness
(that is NGINX Plus's ``sticky learn``), and hashing the session id cannot
work: the id is chosen by the front after the load balancer has already
routed the ``initialize`` that opens it. Hashing the client's address would,
until the client moves or many clients share one address (a NAT, an agent
host), and then one front takes them all.

So each front may be given a prefix that names it (``--session-id-prefix a``),
and its ids are shown to clients as ``<prefix>.<id>``: the load balancer reads
the front from the id itself (an nginx ``map`` of the header, see
``examples/nginx-fronts.conf``). Every client already echoes the id as it got
it, so no client changes.

What it does
------------
`SessionIdPrefix` is an ASGI layer around the gate:

* in every response, each ``Mcp-Session-Id`` header gets the prefix;
* in a request of the 2025 era (the ones the SDK serves in sessions), each
  ``Mcp-Session-Id`` header loses it before anything reads it: the gate's
  session table and fast path, the event store's session scopes and the SDK's
  session manager all see the SDK's ids, as without a prefix;
* such a request whose id lacks this front's prefix (another front's, or
  none) goes on with an empty id instead, which no session has (the SDK's ids
  are hex): the gate checks its token first, as for any request, and then it
  is answered as the SDK answers an unknown session, 404 "Session not found",
  having reached no session. It is logged, at most once per interval
  (`RefusalLog`): it means that the load balancer routed a session to the
  wrong front.

A 2026-era request is served without a session, whatever header it carries,
so its header is left as it is. The SDK's own id stays what the server's
sessions are named by (a call that names no session lands in the one of the
id without the prefix).

Without a prefix the layer is not there at all: nothing changes, nothing is
paid.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, final

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from ._admission import _may_open_a_session

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ._responses import RefusalLog

__all__ = ["SEPARATOR", "SessionIdPrefix", "check_session_id_prefix", "marker"]

SEPARATOR: Final = "."
"""What joins a front's prefix to the SDK's session id; never part of a prefix."""
_PREFIX: Final = re.compile(r"[A-Za-z0-9-]{1,32}")
_HEADER: Final = MCP_SESSION_ID_HEADER.encode("latin-1")
_NO_SESSION: Final = b""
"""The id a request of another front's session goes on with: one no session has."""
_REFUSED: Final = "a session id without this front's prefix (is the load balancer routing by it?)"


def check_session_id_prefix(prefix: str) -> None:
    """Raise ValueError, naming the problem, unless `prefix` is 1-32 letters, digits or '-'."""
    if not _PREFIX.fullmatch(prefix):  # not match with $: it allows a final \n
        msg = (
            f"{prefix!r} is no session id prefix: expected 1 to 32 ASCII letters, digits or "
            "'-', like 'a' or 'front-2'"
        )
        raise ValueError(msg)


def marker(prefix: str) -> str:
    """What the ids of a front with `prefix` start with, as clients see them."""
    return prefix + SEPARATOR


@final
class SessionIdPrefix:
    """ASGI layer around the gate: the SDK's session ids shown as ``<prefix>.<id>``.

    What it rewrites and refuses is in this module's docstring.
    """

    def __init__(self, app: ASGIApp, prefix: str, refusals: RefusalLog) -> None:
        check_session_id_prefix(prefix)
        self._app = app
        self._marker = marker(prefix).encode("ascii")
        self._refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        await self._app(self._inbound(scope), receive, self._outbound(send))

    def _inbound(self, scope: Scope) -> Scope:
        """`scope` with its session ids as the SDK made them; an id not of this front empty."""
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        # Compared lowercased: no spelling of the name may slip past unchecked.
        if not any(name.lower() == _HEADER for name, _ in headers) or not _may_open_a_session(
            scope
        ):
            return scope
        ids = [value for name, value in headers if name.lower() == _HEADER]
        foreign = next((value for value in ids if not value.startswith(self._marker)), None)
        if foreign is not None:
            self._refused(foreign, scope)  # and every copy of the header goes: one id or none
        rewritten = [
            (name, value if name.lower() != _HEADER else self._ours(value, foreign is None))
            for name, value in headers
        ]
        return {**scope, "headers": rewritten}

    def _ours(self, value: bytes, kept: bool) -> bytes:
        """The SDK's id of `value` (which has this front's prefix), or an empty one."""
        return value[len(self._marker) :] if kept else _NO_SESSION

    def _outbound(self, send: Send) -> Send:
        """`send`, with the prefix put on every ``Mcp-Session-Id`` of the response."""

        async def prefixed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                if any(name.lower() == _HEADER for name, _ in headers):
                    message = {
                        **message,
                        "headers": [
                            (name, self._marker + value if name.lower() == _HEADER else value)
                            for name, value in headers
                        ],
                    }
            await send(message)

        return prefixed

    def _refused(self, value: bytes, scope: Scope) -> None:
        """Log a request whose id is not of this front: the prefix it has, never the id."""
        shown, dot, _ = value.decode("latin-1").partition(SEPARATOR)
        detail = f"prefix {shown}" if dot else "no prefix"
        self._refusals.refused(_REFUSED, detail, scope)
