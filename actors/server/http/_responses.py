"""What the HTTP side answers of its own: JSON-RPC errors as responses, and refusals logged.

Every refusal (`actors.server.http._admission`, `actors.server.http._host_rules`,
`actors.server.auth`) is an HTTP response whose body is a JSON-RPC error, which
the SDK's client surfaces as is, and one entry in a `RefusalLog`: the first of
a kind at once, later ones counted and summarized at most once per interval,
so that a flood of refused requests cannot fill the log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, final

import anyio
import attrs
import trio
from mcp import types
from starlette.responses import Response

from ..mcp._jsonrpc import Reply

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pydantic
    from starlette.types import Receive, Scope, Send

__all__ = [
    "REFUSAL_LOG_INTERVAL",
    "RefusalLog",
    "answer_early",
    "client_address",
    "error_response",
    "reply_response",
]

logger = logging.getLogger("actors.serve")


REFUSAL_LOG_INTERVAL: Final = 10.0
"""Seconds between two log lines about refusals of one kind."""


def error_response(
    status: int,
    message: str,
    *,
    request_id: types.RequestId | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An HTTP error whose body is a JSON-RPC error, which the SDK's client surfaces as is."""
    return reply_response(status, Reply.of(request_id, types.INVALID_REQUEST, message), headers)


def reply_response(
    status: int, reply: pydantic.BaseModel, headers: Mapping[str, str] | None = None
) -> Response:
    """`reply` (a message, or a batch's array) as the JSON body of an HTTP response."""
    return Response(
        reply.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def client_address(scope: Scope) -> str:
    """Where a request came from, as `actors.server.http._host_rules` found (``?`` if unknown)."""
    client = scope.get("client")
    return str(client[0]) if client else "?"


_DETAIL_CHARACTERS: Final = 200


def _escaped(text: str) -> str:
    """`text` on one line of plain ASCII, quoted, at most about 200 characters before escaping."""
    cut = "…" if len(text) > _DETAIL_CHARACTERS else ""
    return ascii(text[:_DETAIL_CHARACTERS] + cut)


@attrs.define
class _Tally:
    held: int = 0
    """Refusals of this kind not logged yet."""
    quiet_until: float = -float("inf")
    """Until when further refusals of this kind are only counted."""


@final
class RefusalLog:
    """Warnings about refused requests: at most one line per kind every `interval` seconds.

    The first refusal of a kind is logged at once; later ones within the
    interval are counted, and the count rides on the next line logged for
    that kind, or comes out at `flush` (when the server stops).
    """

    def __init__(self, interval: float = REFUSAL_LOG_INTERVAL) -> None:
        self._interval = interval
        self._kinds: dict[str, _Tally] = {}

    def refused(self, kind: str, detail: str = "", scope: Scope | None = None) -> None:
        """Note one refusal of `kind` (``"a request without a valid bearer token"``).

        `detail` (what was wrong, often the client's own text) is logged escaped
        and cut short; `scope` names the address the request came from.
        """
        tally = self._kinds.setdefault(kind, _Tally())
        now = anyio.current_time()
        if now < tally.quiet_until:
            tally.held += 1
            return
        shown = f": {_escaped(detail)}" if detail else ""
        source = "" if scope is None else f" from {_escaped(client_address(scope))}"
        more = f" (and {tally.held} more since the last such line)" if tally.held else ""
        logger.warning("http: refused %s%s%s%s", kind, source, shown, more)
        tally.held = 0
        tally.quiet_until = now + self._interval

    def flush(self) -> None:
        """Log the refusals counted and not reported yet."""
        for kind, tally in self._kinds.items():
            if tally.held:
                logger.warning(
                    "http: refused %s: %d more since the last such line", kind, tally.held
                )
                tally.held = 0


async def answer_early(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
    """Send a refusal before the request body was read (see the module docstring)."""
    try:
        await response(scope, receive, send)
    except trio.BusyResourceError:
        # The host's hypercorn (an application serving `McpEndpoint` under trio; ours has
        # no such race) closing the connection of a client that hung up while still
        # uploading, as this answer was written: the client has left.
        logger.debug("http: the client hung up while it was being refused")
