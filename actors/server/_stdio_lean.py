"""The lean stdio path: plain requests answered without the SDK's session, dispatcher and streams.

Why
---
Over stdio every request used to go through the SDK: its transport parses the
line into pydantic models and hands it on through memory streams, its
dispatcher runs a task with cancel scopes, its kernel validates the params and
the result, and its writer dumps the reply from the models again. For a plain
call that is most of the server's CPU (``docs/performance.md``). The HTTP lean
path (`actors.server.http._fast_path`) showed that the common requests can be
answered where they are read, with the SDK's rules kept; this is the same for
the one connection stdio serves.

What it takes
-------------
A line that is one plain request (`actors.server.mcp._plain`): ``tools/call`` of
a plain tool, ``tools/list``, or a catalog request the adapter answers plainly
(`McpAdapter.plain_params`: the resource, template, prompt and completion
requests, and ``ping`` where the era has it), on a connection whose protocol era
is settled:

* **the handshake era** (up to 2025-11-25): once the SDK has answered
  ``initialize`` (the version it negotiated is the one used), for a request
  that carries no 2026 envelope (which the SDK refuses on such a connection);
* **the 2026 era**: a connection the client opened with an enveloped request,
  for a request whose envelope the SDK's ladder accepts (its version is used).

The client's first request always goes to the SDK, which settles the era with
it, as ours is settled here from the same line; a connection whose first
request is of any unusual shape is left to the SDK entirely. Anything else — a
request the lean path does not fully understand, a batch, a notification, an
answer to one of the server's questions, any refusal — goes to the SDK as
before, and the SDK answers it in its own words.

What it keeps
-------------
* **In flight.** A lean request counts in the transport's bound
  (``--max-in-flight``) from the moment it is read until its reply has been
  written to the pipe; at the bound, lines go to the SDK's side, which stops
  reading (`actors.server._stdio`).
* **Cancellation.** ``notifications/cancelled`` naming a lean request cancels
  it, and it is never answered, as the SDK does (the notification still goes
  on to the SDK, for a request of its own with that id). A call still running
  when the transport stops (the wait for replies at EOF is over) is cancelled
  and answered "Connection closed", as the SDK answers its own (`abandon`).
* **The drain and the log.** The calls go through `McpAdapter.call_plainly`,
  the catalog requests through `McpAdapter.serve_plainly` (the handlers the SDK
  would call): the same rules, refusals, log line and in-flight count as
  through the SDK.
* **Whole lines.** Replies go to the same writer as the SDK's
  (`actors.server._stdio.StdoutWire`), which writes each line whole, those
  ready together in one write.

It runs only where the transport writes the pipe itself (``owns_pipes``) and the
adapter's caller is fixed (`McpAdapter.sole_caller`): every stdio server
``actors serve`` starts.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Final, Protocol, final

import attrs
import pydantic_core
import trio
from mcp.server.runner import modern_error_data
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp_types import CONNECTION_CLOSED, PROTOCOL_VERSION_META_KEY

from .mcp._plain import PLAIN_METHODS, PlainAnswers, envelope_version, plain_request, valid_params

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.types import RequestId
    from pydantic import BaseModel

    from protocol import Caller

    from .mcp._adapter import McpAdapter

__all__ = ["InFlight", "LeanStdio", "Wire"]

logger = logging.getLogger("actors.serve")

_CANCELLED: Final = "notifications/cancelled"
_LEAN_METHODS: Final = PLAIN_METHODS | {
    "ping",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
}
"""What the lean path answers: the lean paths' plain requests, and the catalog's
(`McpAdapter.serve_plainly`), which no lean path over HTTP takes."""
_NOTIFICATION_MEMBERS: Final = frozenset({"jsonrpc", "method", "params"})
_CLOSED: Final = MCPError(CONNECTION_CLOSED, "Connection closed")
"""What a call the transport gave up on is answered, in the SDK's words."""


class _Era(enum.Enum):
    """What the lean path knows of the connection's protocol era."""

    HANDSHAKE = "handshake"
    MODERN = "modern"
    UNSETTLED = "unsettled"
    """Its first request was of a shape the lean path leaves to the SDK: so is the rest."""


class InFlight(Protocol):
    """The transport's count of the requests in flight, and what its handshake settled."""

    @property
    def full(self) -> bool:
        """Whether the bound is reached: no request may be taken now."""

    @property
    def version(self) -> str | None:
        """The version the SDK's ``initialize`` negotiated; None before it answered one."""

    def hold(self) -> None:
        """Count one more request in flight."""

    def release(self) -> None:
        """One request counted is no longer in flight."""


class Wire(Protocol):
    """Where replies go: whole lines, written in the order they are put."""

    def put(self, line: bytes, written: Callable[[], None]) -> None:
        """Queue `line`; `written` runs once it is in the pipe."""


@final
class LeanStdio:
    """Answers the plain requests of one stdio connection (this module's docstring).

    `route` is given every complete line as it is read. Each request taken is
    held in `in_flight` until its reply is in the pipe (`wire`); the calls run in
    `nursery`, on behalf of `caller`.
    """

    def __init__(
        self,
        adapter: McpAdapter,
        caller: Caller,
        in_flight: InFlight,
        wire: Wire,
        nursery: trio.Nursery,
    ) -> None:
        self._adapter = adapter
        self._caller = caller
        self._answers = PlainAnswers(adapter)
        self._in_flight = in_flight
        self._wire = wire
        self._nursery = nursery
        self._era: _Era | None = None
        self._calls: dict[RequestId, _Call] = {}
        """The lean requests being served, by id (as the SDK's dispatcher keys its own)."""
        self._running = 0
        self._finished = trio.Event()
        self._waiting: deque[tuple[_Request, RequestId, _Call]] = deque()
        """Requests taken and not started yet, oldest first (`_launch`)."""
        self._launching = False

    def route(self, line: str) -> bool:
        """Whether `line` was taken here (answered, or being answered); False: the SDK's.

        `line` is the text the SDK would parse (decoded as it decodes). At the in-flight
        bound a line is still read for a cancellation of a call taken here, and nothing
        is started.
        """
        if self._era is _Era.UNSETTLED:
            return False
        try:
            message = pydantic_core.from_json(line)
        except ValueError:
            if self._era is None:
                self._era = _Era.UNSETTLED  # the SDK may read it as its first request
            return False  # the SDK's to refuse, in its words
        if self._era is None:
            self._era = _era_opened_by(message)
            return False  # the first request is the SDK's: it settles the era with it
        if _is_cancellation(message):
            return self._cancel(message.get("params"))
        if self._in_flight.full or not plain_request(message, _LEAN_METHODS):
            return False
        version = self._version(message)
        if version is None or not valid_params(message, version):
            return False
        request = self._taken(message, version)
        if request is None:
            return False
        self._start(request)
        return True

    def _taken(self, message: dict[str, Any], version: str) -> _Request | None:
        """`message` as a request served here, or None: the SDK's (see `route`)."""
        method = message["method"]
        if method == "tools/call":
            return (
                _Request(message, version) if self._answers.plain_call(message["params"]) else None
            )
        if method == "tools/list":
            return _Request(message, version)
        parsed = self._adapter.plain_params(method, message.get("params"))
        return None if parsed is None else _Request(message, version, parsed)

    def _version(self, message: dict[str, Any]) -> str | None:
        """The version `message` is served at, if the SDK would serve it on this connection."""
        enveloped = _has_envelope(message.get("params"))
        if self._era is _Era.HANDSHAKE:
            return None if enveloped else self._in_flight.version
        if not enveloped:
            return None
        return envelope_version(message, None)

    def abandon(self) -> None:
        """Cancel the calls still running; each is answered "Connection closed" (`finished`)."""
        for call in self._calls.values():
            call.scope.cancel()

    async def finished(self) -> None:
        """Return once no call taken here is running."""
        while self._running:
            await self._finished.wait()

    def _cancel(self, params: Any) -> bool:
        """Cancel the call taken here that `params` name; whether there was one.

        One that was is not passed on: the SDK cancels only the newest request of an id,
        and the newest of this one is here.
        """
        request_id = cancelled_request_id_from_params(params if isinstance(params, dict) else None)
        call = None if request_id is None else self._calls.get(coerce_request_id(request_id))
        if call is None:
            return False
        call.by_client = True
        call.scope.cancel()
        return True

    def _start(self, request: _Request) -> None:
        call = _Call(request.message["id"])
        key = coerce_request_id(call.request_id)
        # A reused id: the newer request is the one cancelled, as in the SDK.
        self._calls[key] = call
        self._in_flight.hold()
        self._running += 1
        self._waiting.append((request, key, call))
        if not self._launching:
            self._launch()

    def _launch(self) -> None:
        """Start the oldest request waiting, if any.

        One at a time, each once the one before has run up to its first wait: trio starts
        the tasks of one scheduler round in no fixed order, and calls to one key must
        reach its actor in the order they were read (five creates, then a list, see five).
        """
        self._launching = bool(self._waiting)
        if self._waiting:
            self._nursery.start_soon(self._serve, *self._waiting.popleft())

    async def _serve(self, request: _Request, key: RequestId, call: _Call) -> None:
        self._launch()  # the next one runs after this one has offered its call
        sent = False
        try:
            with call.scope:
                reply: bytes | None = await self._reply(request)
            if call.by_client or call.scope.cancelled_caught:  # by its client, or `abandon`
                reply = self._closed(call)
            sent = self._put(reply)
        except trio.Cancelled:
            # The transport is being torn down (a signal's stop): say so if the pipe takes it
            # now, as the SDK tries for its own calls.
            sent = self._put(self._closed(call))
            raise
        finally:
            if self._calls.get(key) is call:
                del self._calls[key]
            if not sent:
                self._in_flight.release()
            self._running -= 1
            self._finished.set()
            self._finished = trio.Event()

    def _put(self, reply: bytes | None) -> bool:
        """Hand `reply` to the wire, which releases the request's hold; whether there was one."""
        if reply is None:
            return False
        self._wire.put(reply + b"\n", self._in_flight.release)
        return True

    def _closed(self, call: _Call) -> bytes | None:
        """What a call ended by the transport is told: nothing, if its client cancelled it."""
        # A request its client cancelled is never answered, as the SDK's are not.
        return None if call.by_client else self._answers.error_reply(call.request_id, _CLOSED)

    async def _reply(self, request: _Request) -> bytes:
        request_id = request.message["id"]
        try:
            return self._answers.reply(request_id, await self._result(request))
        except MCPError as error:
            return self._answers.error_reply(request_id, error)
        except Exception as error:
            # As the SDK answers its handlers' failures (logged, the text kept back).
            return self._answers.error_reply(request_id, _internal(error))

    async def _result(self, request: _Request) -> dict[str, Any]:
        """The result `request` is answered with, as the SDK shapes it at its version."""
        message, version = request.message, request.version
        method = message["method"]
        if method == "tools/list":
            return self._answers.tool_list(version)
        if method == "tools/call":
            params = message["params"]
            result = await self._adapter.call_plainly(
                params["name"], params.get("arguments"), params.get("_meta"), self._caller
            )
            return self._answers.call_result(result, version)
        assert request.parsed is not None  # `_taken` parsed the catalog's params
        dumped = await self._adapter.serve_plainly(method, request.parsed, self._caller)
        return self._answers.handler_result(method, version, dumped)


@final
@attrs.frozen
class _Request:
    """A request taken here: its message, the version it is served at, and its params as
    the catalog's handler takes them (None for the tools' requests)."""

    message: dict[str, Any]
    version: str
    parsed: BaseModel | None = None


@attrs.define
class _Call:
    """A request taken here, while it runs."""

    request_id: RequestId
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    by_client: bool = False
    """Whether its client cancelled it (``notifications/cancelled``)."""


def _internal(error: Exception) -> MCPError:
    """The JSON-RPC error for an unexpected failure, logged with its traceback."""
    data = modern_error_data(error)
    return MCPError(data.code, data.message)


def _is_cancellation(message: Any) -> bool:
    """Whether `message` is a ``notifications/cancelled`` the SDK would take as one."""
    return (
        isinstance(message, dict)
        and message.keys() <= _NOTIFICATION_MEMBERS
        and message.get("jsonrpc") == "2.0"
        and message.get("method") == _CANCELLED
        and isinstance(message.get("params", {}), dict)
    )


def _has_envelope(params: Any) -> bool:
    """Whether `params` carry the 2026 envelope's version (as the SDK's era routing reads it)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _era_opened_by(message: Any) -> _Era | None:
    """The era a connection's first message settles; None: it is no request, nothing settled.

    The SDK settles the era with the first message it reads as a request: a
    2026 envelope on anything but ``initialize`` opens the 2026 era, anything
    else the handshake era. A request of the plainest shape is read as one by
    the SDK for certain; one of any other shape might not be, so it leaves the
    era unsettled here (the SDK serves the whole connection).
    """
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None  # a notification, an answer, a batch: the SDK settles nothing with it
    request_id = message["id"]
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return None  # not a request to the SDK (the transport refuses it)
    if not _plain_shape(message):
        return _Era.UNSETTLED
    if message["method"] != "initialize" and _has_envelope(message.get("params")):
        return _Era.MODERN
    return _Era.HANDSHAKE


def _plain_shape(message: dict[str, Any]) -> bool:
    """Whether `message` is a request of the plainest shape, whatever its method."""
    return plain_request({**message, "method": "tools/list"})
