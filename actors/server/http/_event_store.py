"""Resumable Streamable HTTP streams: the SSE events sent, kept per session and bounded.

The SDK's transport gives each event of a request's SSE stream an id from an
`EventStore`; a client whose connection drops reconnects with a GET carrying
``Last-Event-ID`` and gets what it missed, then the rest live. The first event
of every POST stream is an empty *priming* event, so that even a call with
nothing sent yet can be resumed, and it carries ``retry:`` (`RETRY_INTERVAL_MS`),
how long the client waits before it reconnects.

Whose events are whose
----------------------
The SDK names a stream by the request's JSON-RPC id (``"1"``) and passes no
session to the store, while one store serves every session: keyed by stream
alone, two sessions' ``"1"`` would be one stream, and a client could replay
another's results. So `SessionScopes`, the ASGI layer in front of the SDK's
app, marks each request with its session's `_SessionScope` in a context
variable, and the store keys every event by (that scope, stream id):

* a request without ``Mcp-Session-Id`` (the ``initialize`` that opens a
  session) gets a new scope, remembered under the id its response announces;
* the session's message router, which stores the replies, is started from
  that request, and a task starts with a copy of its starter's context
  variables (trio and asyncio alike): it stores under the same scope;
* a request with ``Mcp-Session-Id`` gets that session's scope if it comes
  from the principal (token and tenant, or every anonymous client) that
  opened the session, and a new, empty one otherwise: an unknown id (the SDK then
  answers 404) or another token's session (the SDK answers 404 too, and the
  store would not show it that session's events even if it did not).

Replay looks up ``Last-Event-ID`` in the current request's scope only: an id
of another session, an evicted or a made-up one are all just unknown, and a
GET carrying one is answered 404 here. The SDK itself would answer it with an
empty stream, and its client reconnects to an empty stream without end; a 404
makes it give up after a few attempts and fail the call. Event ids are random
(128 bits): they cannot be guessed, and they name nothing.

Bounds
------
All events together take at most ``max_bytes``, counted as what they cost
in memory, not what they weigh on the wire: each event's JSON (as a
``bytes`` object) plus `EVENT_OVERHEAD`, and `STREAM_OVERHEAD` for each
stream that holds any (both measured with ``tracemalloc`` on CPython 3.11,
rounded up; ``tests/server/test_resumable_http.py`` checks the bound against what
is really held, for tiny and large events, in one session and in a
thousand). A stream keeps its last `max_events_per_stream` events. Past
the byte bound, the oldest event of the principal that holds the most bytes,
in the tenant (`Principal.group`) that holds the most, goes first: one
tenant's flood of large results, from one token or from many, evicts its own
events before anyone else's (invariant 10). Either way only the oldest events
of a stream are evicted, so what is left of a stream is always a run of events
with nothing missing after its first one: a client whose last event is still
held gets everything after it; one whose last event is gone gets a 404, never
a replay with a hole. An event larger than ``max_bytes`` is not kept, and the
events before it in its stream are dropped for the same reason. A session's
scope, and the events stored under it, outlive the session only until newer
events push them out.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
import secrets
import sys
import weakref
from typing import TYPE_CHECKING, Final, final

import attrs
from mcp.server.streamable_http import (
    LAST_EVENT_ID_HEADER,
    MCP_SESSION_ID_HEADER,
    EventMessage,
    EventStore,
)
from mcp.types import jsonrpc_message_adapter
from starlette.datastructures import Headers

from ..auth._principals import principal_of, scope_principal
from ._responses import error_response

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mcp.server.auth.provider import AccessToken
    from mcp.server.streamable_http import EventCallback
    from mcp.types import JSONRPCMessage
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .._fair_shares import Group, Principal

__all__ = [
    "DEFAULT_MAX_EVENTS_PER_STREAM",
    "DEFAULT_MAX_STORED_EVENT_BYTES",
    "EVENT_OVERHEAD",
    "RETRY_INTERVAL_MS",
    "STREAM_OVERHEAD",
    "BoundedEventStore",
    "EventStoreStatistics",
    "SessionScopes",
    "event_id",
]

DEFAULT_MAX_STORED_EVENT_BYTES: Final = 16 * 1024 * 1024
"""Bytes all stored SSE events may take together, by default."""
DEFAULT_MAX_EVENTS_PER_STREAM: Final = 256
"""Events kept per stream (one request's SSE stream, or a session's GET stream)."""
RETRY_INTERVAL_MS: Final = 1000
"""How long a client waits before reconnecting a dropped stream (the SSE ``retry`` field)."""
EVENT_OVERHEAD: Final = 768
"""Bytes counted for each event besides its JSON: its id, its record, its place in the tables."""
STREAM_OVERHEAD: Final = 896
"""Bytes counted for each stream that holds events: its queue and its place in the table."""


@final
@attrs.frozen(eq=False)
class _SessionScope:
    """One session as the store sees it.

    Its events are keyed by `serial`, not by this object: only the contexts of
    the session's tasks hold it, so that `SessionScopes` forgets the session
    with them.
    """

    serial: int
    owner: Principal
    """The principal that opened the session: a token and its tenant, or every anonymous
    client."""


_scope: contextvars.ContextVar[_SessionScope | None] = contextvars.ContextVar(
    "actors_http_session_scope", default=None
)

_StreamKey = tuple[int, str]
"""(session scope serial, the SDK's stream id)."""


@attrs.frozen(eq=False)
class _Event:
    id: str
    stream: _StreamKey
    owner: Principal
    data: bytes | None
    """The message as JSON; None for a priming event."""
    size: int


@attrs.define
class _Holding:
    """One principal's events, oldest first, and the bytes counted for them."""

    # Ordered, not a dict: its oldest is looked up at every eviction, and a dict whose
    # oldest entries were deleted walks past their empty slots to find the first one (a
    # full store evicting at every event spent ~10 µs a lookup on it).
    events: collections.OrderedDict[str, _Event] = attrs.field(factory=collections.OrderedDict)
    bytes: int = 0


@final
@attrs.frozen
class EventStoreStatistics:
    """What a `BoundedEventStore` holds now."""

    events: int
    """Events stored, priming events included."""
    streams: int
    """Streams with at least one event stored."""
    bytes: int
    """Bytes counted for them: their JSON and `EVENT_OVERHEAD` each, `STREAM_OVERHEAD` a stream."""


def event_id() -> str:
    """A new event id: 128 random bits, URL-safe. One the store did not keep names nothing."""
    return secrets.token_urlsafe(16)


@final
class BoundedEventStore(EventStore):
    """The SDK's `EventStore`, in memory, per session, bounded in bytes and per stream.

    `store_event` and `replay_events_after` act for the session of the current
    request (see `SessionScopes`); outside one, events are not kept. Neither
    waits for anything but the client: the tables change in one step.
    """

    def __init__(
        self, max_bytes: int, max_events_per_stream: int = DEFAULT_MAX_EVENTS_PER_STREAM
    ) -> None:
        if max_bytes < 1 or max_events_per_stream < 1:
            msg = (
                "max_bytes and max_events_per_stream must be at least 1, got "
                f"{max_bytes} and {max_events_per_stream}"
            )
            raise ValueError(msg)
        self._max_bytes = max_bytes
        self._max_per_stream = max_events_per_stream
        self._events: dict[str, _Event] = {}
        self._streams: dict[_StreamKey, collections.deque[_Event]] = {}
        self._holdings: dict[Principal, _Holding] = {}
        self._group_bytes: collections.Counter[Group] = collections.Counter()
        self._bytes = 0

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        """Keep `message` (None: a priming event) of `stream_id` in this session; its new id."""
        data = (
            None
            if message is None
            else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        )
        return self.store_json(stream_id, data)

    def store_json(self, stream_id: str, data: bytes | None) -> str:
        """`store_event` for a message already in JSON (None: a priming event); its new id."""
        new_id = event_id()
        scope = _scope.get()
        if scope is None:
            return new_id  # no session to keep it for: an id nothing will replay
        key = (scope.serial, stream_id)
        size = EVENT_OVERHEAD + (0 if data is None else sys.getsizeof(data))
        event = _Event(new_id, key, scope.owner, data, size)
        if size + STREAM_OVERHEAD > self._max_bytes:
            # Kept, the events before it would replay with this one missing.
            for dropped in list(self._streams.get(key, ())):
                self._evict(dropped)
            return new_id
        stream = self._streams.get(key)
        if stream is not None and len(stream) >= self._max_per_stream:
            self._evict(stream[0])
        while self._bytes + size + (STREAM_OVERHEAD if key not in self._streams else 0) > (
            self._max_bytes
        ):
            self._evict(self._heaviest())
        holding = self._holdings.get(event.owner)
        if holding is None:
            holding = self._holdings[event.owner] = _Holding()
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = collections.deque()
            size += STREAM_OVERHEAD  # counted with the stream's first event (not in its size)
        stream.append(event)
        self._events[new_id] = event
        holding.events[new_id] = event
        self._count(event.owner, holding, size)
        return new_id

    def _heaviest(self) -> _Event:
        """The event to evict first: the oldest of the heaviest principal of the heaviest group.

        By group first: a tenant's many tokens, each lighter than another tenant's
        one, still make the tenant the one whose events go.
        """
        # max(), not most_common(1): the same first of equals, without a heap.
        group = max(self._group_bytes, key=self._group_bytes.__getitem__)
        owner = max(
            (owner for owner in self._holdings if owner.group == group),
            key=lambda owner: self._holdings[owner].bytes,
        )
        return next(iter(self._holdings[owner].events.values()))

    def _count(self, owner: Principal, holding: _Holding, size: int) -> None:
        holding.bytes += size
        self._group_bytes[owner.group] += size
        self._bytes += size

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send this session's events after `last_event_id` of its stream; the stream's id.

        None, and nothing sent, when the id is unknown in this session.
        """
        event = self._find(last_event_id)
        if event is None:
            return None
        # The SDK goes on live only once this returns: what is stored while the
        # callback waits for the client is sent too, until nothing new is left.
        sent = event
        while later := self._after(sent):
            for sent in later:
                if sent.data is not None:
                    message = jsonrpc_message_adapter.validate_json(sent.data, by_name=False)
                    await send_callback(EventMessage(message, sent.id))
        return event.stream[1]

    def knows(self, event_id: str) -> bool:
        """Whether `event_id` is an event of the current request's session still held."""
        return self._find(event_id) is not None

    def statistics(self) -> EventStoreStatistics:
        """A snapshot of what is stored."""
        return EventStoreStatistics(len(self._events), len(self._streams), self._bytes)

    def _after(self, event: _Event) -> list[_Event]:
        """The events of `event`'s stream stored after it; none once it is evicted.

        Once it is gone, so is where its successors started: what is left would
        be sent with a hole.
        """
        if event.id not in self._events:
            return []
        stream = self._streams[event.stream]
        return list(itertools.islice(stream, stream.index(event) + 1, None))

    def _find(self, event_id: str) -> _Event | None:
        scope = _scope.get()
        event = self._events.get(event_id)
        if event is None or scope is None or event.stream[0] != scope.serial:
            return None  # another session's id looks exactly like an unknown one
        return event

    def _evict(self, event: _Event) -> None:
        """Forget `event`, the oldest of its stream (and so of its principal's too)."""
        stream = self._streams[event.stream]
        assert stream[0] is event, "only the oldest event of a stream is evicted"
        stream.popleft()
        holding = self._holdings[event.owner]
        if not stream:
            del self._streams[event.stream]
            self._count(event.owner, holding, -STREAM_OVERHEAD)
        del self._events[event.id]
        del holding.events[event.id]
        self._count(event.owner, holding, -event.size)
        if not holding.events:
            del self._holdings[event.owner]
        if not self._group_bytes[event.owner.group]:
            del self._group_bytes[event.owner.group]


@final
class SessionScopes:
    """ASGI layer in front of the SDK's app: marks each request with its session's scope.

    Also answers 404 to a GET whose ``Last-Event-ID`` `store` does not hold
    for that session, before the SDK would open an empty stream for it.
    """

    def __init__(self, app: ASGIApp, store: BoundedEventStore) -> None:
        self._app = app
        self._store = store
        self._serials = itertools.count(1)
        # Held only by the contexts of the session's tasks: when the session
        # ends, its entry goes with them.
        self._sessions: weakref.WeakValueDictionary[str, _SessionScope] = (
            weakref.WeakValueDictionary()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI request with its session's scope current."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        owner = scope_principal(scope)
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        session = None if session_id is None else self._sessions.get(session_id)
        if session is None or session.owner != owner:
            session = _SessionScope(next(self._serials), owner)
        if session_id is None:
            send = self._learning(session, send)
        last_event_id = headers.get(LAST_EVENT_ID_HEADER)
        token = _scope.set(session)
        try:
            if scope["method"] == "GET" and last_event_id and not self._store.knows(last_event_id):
                message = (
                    "Last-Event-ID names no event this session can resume from (unknown, "
                    "expired or evicted); call again"
                )
                await error_response(404, message)(scope, receive, send)
                return
            await self._app(scope, receive, send)
        finally:
            _scope.reset(token)

    @contextlib.contextmanager
    def session(self, session_id: str, token: AccessToken | None) -> Iterator[bool]:
        """Within the block, the events stored are `session_id`'s, as in one of its requests.

        Yields False (and stores nothing for it) unless the session is known here and
        the principal of `token` (`principal_of`) opened it.
        """
        session = self._sessions.get(session_id)
        if session is None or session.owner != principal_of(token):
            yield False
            return
        current = _scope.set(session)
        try:
            yield True
        finally:
            _scope.reset(current)

    def _learning(self, session: _SessionScope, send: Send) -> Send:
        """`send`, remembering `session` under the session id the response announces."""

        async def learn(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                announced = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID_HEADER)
                if announced is not None:
                    self._sessions[announced] = session
            await send(message)

        return learn
