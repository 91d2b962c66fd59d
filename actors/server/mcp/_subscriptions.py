"""Resource subscriptions, per key: an update reaches only the clients that follow that key.

A client subscribes to a URI in its own context (its session, and for a
module scoped by assistant or thread, those too): the subscription is to the
URI *of that key*, found by reading it the way ``resources/read`` would
(`actors.prepare_read`). When the runtime tells of a change of a key's state
(`Runtime.watch`: a call of a tool that is not read-only, the stop of a
module's actor whose state is not durable, the end of a session), every
client following one of that key's URIs gets
``notifications/resources/updated`` for it. A client following the same URI
in another session hears nothing: the URI names a different key there.

Two eras of the protocol carry them:

* up to 2025-11-25, ``resources/subscribe`` and ``resources/unsubscribe``
  on a connection, and updates on its standalone channel (the GET stream of
  an HTTP session), sent by a task of the server's own;
* from 2026-07-28, a ``subscriptions/listen`` request whose response stream
  carries the updates, for as long as the client keeps it open.

Bounds: a client follows at most `MAX_SUBSCRIPTIONS` URIs on one connection
or stream, and at most `MAX_LISTEN_STREAMS` streams are open at once,
`MAX_LISTEN_STREAMS_PER_CALLER` of one caller's and a tenant's share of them
(`actors.server._fair_shares`: many tokens of one tenant do not take every place,
invariant 10). The updates waiting for a client are a set of its URIs (a
second change before the first is sent adds nothing), so a slow client costs
no more than its subscriptions. The runtime is watched only while someone follows something:
with no subscription, a call pays nothing for the feature.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import anyio.abc
from mcp import types
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from .._fair_shares import FairShares, Principal
from ._request_context import connection_of, meta_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Mapping

    from mcp.server.context import ServerRequestContext

    from protocol import Caller

    from ..._prepare import PreparedCall, Route
    from ..._target import Watcher
    from .._fair_shares import Full

__all__ = [
    "MAX_LISTEN_STREAMS",
    "MAX_LISTEN_STREAMS_PER_CALLER",
    "MAX_SUBSCRIPTIONS",
    "Background",
    "Subscriber",
    "SubscriptionRequests",
    "Subscriptions",
]

logger = logging.getLogger("actors.mcp")

MAX_SUBSCRIPTIONS: Final = 100
"""URIs one connection (or one listen stream) may follow at once."""
MAX_LISTEN_STREAMS: Final = 1000
"""``subscriptions/listen`` streams open at once, over all clients."""
MAX_LISTEN_STREAMS_PER_CALLER: Final = 100
"""``subscriptions/listen`` streams open at once for one caller (one token, or every
anonymous client together)."""


@final
class Subscriber:
    """One client's followed URIs (each with its key), and the updates waiting to be sent."""

    def __init__(self) -> None:
        self.followed: dict[str, Route] = {}
        """The URIs followed, each with the key it names for this client."""
        self._waiting: dict[str, None] = {}  # an ordered set: the oldest update first
        self._wake = anyio.Event()

    def notice(self, uri: str) -> None:
        """`uri` changed: send an update for it (once, however often it changes meanwhile)."""
        self._waiting[uri] = None
        self._wake.set()

    async def deliver(self, send: Callable[[str], Awaitable[None]]) -> None:
        """Send each update as it comes, until cancelled or `send` fails (the client left)."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._waiting:
                uri = next(iter(self._waiting))
                del self._waiting[uri]
                try:
                    await send(uri)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    logger.debug("a resource update could not be sent; the client left")
                    return


@final
class Background:
    """The server's own task group, for work that outlives a request while the server runs.

    The updates of a connection's subscriptions (to 2025-11-25): one task per
    connection that subscribed, cancelled when it closes. The parked calls of
    2026-era clients (`actors.server.mcp._parked_calls`). The group ends when the
    server stops serving.
    """

    def __init__(self, tasks: anyio.abc.TaskGroup) -> None:
        self._tasks = tasks

    def start_soon(self, work: Callable[..., Coroutine[Any, Any, Any]], *arguments: Any) -> None:
        """Run ``work(*arguments)`` in the server's task group."""
        self._tasks.start_soon(work, *arguments)

    def deliver(
        self, subscriber: Subscriber, send: Callable[[str], Awaitable[None]]
    ) -> anyio.CancelScope:
        """Start sending `subscriber`'s updates with `send`; cancel the scope returned to stop."""
        scope = anyio.CancelScope()

        async def delivering() -> None:
            with scope:
                await subscriber.deliver(send)

        self._tasks.start_soon(delivering)
        return scope


@final
class Subscriptions:
    """Who follows which key's URIs; a `Watcher` of the runtime while anyone follows anything."""

    def __init__(self, watch: Callable[[Watcher], Callable[[], None]]) -> None:
        """Subscriptions told of changes through `watch` (`CallTarget.watch`)."""
        self._watch = watch
        self._unwatch: Callable[[], None] | None = None
        self._by_key: dict[Route, dict[Subscriber, set[str]]] = {}
        self._streams = FairShares(MAX_LISTEN_STREAMS, MAX_LISTEN_STREAMS_PER_CALLER)

    def open_stream(self, principal: Principal) -> Full | None:
        """Count a listen stream of `principal`'s as open; None, or why it may not open."""
        return self._streams.take(principal)

    def close_stream(self, principal: Principal) -> None:
        """A listen stream `open_stream` counted for `principal` has closed."""
        self._streams.give_back(principal)

    def follow(self, subscriber: Subscriber, uri: str, route: Route) -> None:
        """Have `subscriber` follow `uri`, which names the key `route` for it.

        Raises ValueError when it already follows `MAX_SUBSCRIPTIONS` others.
        """
        if uri not in subscriber.followed and len(subscriber.followed) >= MAX_SUBSCRIPTIONS:
            msg = (
                f"this client follows {MAX_SUBSCRIPTIONS} resources already; unsubscribe from "
                "one before subscribing to another"
            )
            raise ValueError(msg)
        self.unfollow(subscriber, uri)  # the same URI in a different context: the new one
        subscriber.followed[uri] = route
        self._by_key.setdefault(route, {}).setdefault(subscriber, set()).add(uri)
        if self._unwatch is None:
            self._unwatch = self._watch(self)

    def unfollow(self, subscriber: Subscriber, uri: str) -> None:
        """Stop `subscriber` following `uri`; nothing if it does not."""
        route = subscriber.followed.pop(uri, None)
        if route is None:
            return
        followers = self._by_key[route]
        followers[subscriber].discard(uri)
        if not followers[subscriber]:
            del followers[subscriber]
        if not followers:
            del self._by_key[route]
        if not self._by_key and self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    def drop(self, subscriber: Subscriber) -> None:
        """Forget everything `subscriber` follows (its connection or stream closed)."""
        for uri in list(subscriber.followed):
            self.unfollow(subscriber, uri)

    # ---- the runtime's watcher ------------------------------------------------

    def key_changed(self, route: Route) -> None:
        """The key `route` changed: each of its followers gets an update per URI it follows."""
        for subscriber, uris in self._by_key.get(route, {}).items():
            for uri in uris:
                subscriber.notice(uri)

    def session_ended(self, session_id: str) -> None:
        """Every key of the session is fresh again."""
        for route in [route for route in self._by_key if route[1] == session_id]:
            self.key_changed(route)


@final
class SubscriptionRequests:
    """The MCP requests of subscriptions, for an adapter: subscribe, unsubscribe, listen.

    `followed` is the adapter's: what following a URI means for a request's
    caller (a read of it, hence its key), or the `MCPError` that refuses it;
    `identify` tells who the caller is, for the fair share of listen streams.
    """

    def __init__(
        self,
        subscriptions: Subscriptions,
        followed: Callable[
            [ServerRequestContext[Any, Any], str, Mapping[str, Any] | None], PreparedCall
        ],
        identify: Callable[[ServerRequestContext[Any, Any]], Caller],
    ) -> None:
        self._subscriptions = subscriptions
        self._followed = followed
        self._identify = identify

    def handlers(self) -> dict[str, Any]:
        """The SDK ``Server``'s keyword arguments that serve these requests."""
        return {
            "on_subscribe_resource": self._subscribe,
            "on_unsubscribe_resource": self._unsubscribe,
            "on_subscriptions_listen": self._listen,
        }

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/subscribe`` (to 2025-11-25): updates of `uri` in this caller's context."""
        route = self._followed(ctx, params.uri, meta_of(params)).route
        connection = connection_of(ctx)
        subscriber = connection.state.get(_SUBSCRIBER)
        if subscriber is None:
            subscriber = connection.state[_SUBSCRIBER] = Subscriber()
            running: Background = ctx.lifespan_context
            delivering = running.deliver(subscriber, ctx.session.send_resource_updated)
            connection.exit_stack.callback(self._unsubscribed, subscriber, delivering)
        try:
            self._subscriptions.follow(subscriber, params.uri, route)
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return types.EmptyResult()

    def _unsubscribed(self, subscriber: Subscriber, delivering: anyio.CancelScope) -> None:
        """The connection closed: its subscriptions end, and so does their delivery."""
        self._subscriptions.drop(subscriber)
        delivering.cancel()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/unsubscribe``: no more updates of `uri` (nothing if none were asked for)."""
        subscriber = connection_of(ctx).state.get(_SUBSCRIBER)
        if subscriber is not None:
            self._subscriptions.unfollow(subscriber, params.uri)
        return types.EmptyResult()

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen`` (from 2026-07-28): updates on this request's own stream.

        Only resource updates are honored: the lists of tools, prompts and
        resources never change while the server runs. The stream lasts until
        the client closes it.
        """
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen needs a request id")
        uris = params.notifications.resource_subscriptions or []
        if len(uris) > MAX_SUBSCRIPTIONS:
            msg = f"a listen stream follows at most {MAX_SUBSCRIPTIONS} resources, not {len(uris)}"
            raise MCPError(types.INVALID_PARAMS, msg)
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        routes = {uri: self._followed(ctx, uri, meta_of(params)).route for uri in uris}
        listener = Principal.of(self._identify(ctx))
        full = self._subscriptions.open_stream(listener)
        if full is not None:
            msg = f"{full.says('listen streams', 'are open')}; close one or retry later"
            raise MCPError(types.INTERNAL_ERROR, msg)
        subscriber = Subscriber()
        try:
            for uri, route in routes.items():
                self._subscriptions.follow(subscriber, uri, route)
            honored = types.SubscriptionFilter(resource_subscriptions=list(routes) or None)
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=ctx.request_id,
            )

            async def send(uri: str) -> None:
                update = types.ResourceUpdatedNotificationParams(uri=uri, _meta=meta)
                await ctx.session.send_notification(
                    types.ResourceUpdatedNotification(params=update),
                    related_request_id=ctx.request_id,
                )

            await subscriber.deliver(send)
        finally:
            self._subscriptions.drop(subscriber)
            self._subscriptions.close_stream(listener)
        return types.SubscriptionsListenResult(_meta=meta)


_SUBSCRIBER: Final = "mcp-actors/subscriber"
"""Where a connection's state keeps what it subscribed to (``resources/subscribe``)."""
