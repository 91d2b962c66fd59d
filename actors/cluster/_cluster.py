"""`Cluster`: Ray shards, the routing of each call to its session's shard, and handovers.

The router prepares each call here, with the rules a runtime applies
(`actors.prepare_call`), so bad input is refused before it crosses to a
shard, and the session it names picks the shard (`protocol.Membership`).
Each shard is a Ray actor restarted by Ray when its process dies; a call
that was in flight on it is answered with an error saying so, and the next
call to the session reaches the restarted shard, which loads the session's
state from the store.

The membership lives in a directory actor, where front ends in other
processes (`connect_cluster`) and restarted shards read it. A shard that no
longer owns a session answers `Moved`; the router then reads the directory
and sends the call again, to the new owner.

One routing procedure serves the synchronous `Cluster.call` and the async
`Cluster.run` (the MCP front end): a coroutine given how to exchange a call
with a shard, awaiting it on the event loop or blocking on `ray.get`.

How calls cross
---------------
A Ray actor call costs about a millisecond of CPU between the two processes
and Ray, whatever it carries, against tens of microseconds for a light tool
call itself. So the async path sends the calls it has for a shard together:
each event loop keeps a *lane* per shard. A call that finds its lane with
nothing in flight leaves at once, alone (a lone caller waits for nothing);
calls that come while a batch is in flight queue in the lane, and go
together, in one `ShardHost.call_batch`, as soon as that batch's answer is
back. Under load the batches grow with the number of callers, and the hop's
cost per call shrinks with them; without load nothing changes.

A batch's answer comes back whole, so a slow call would hold up the calls
queued behind its batch: a call queued for `_HOLD` seconds goes in a batch of
its own (with whatever is queued with it) even though one is in flight. A
slow call delays another by at most that, never by its own length.

Everything a lane holds is touched on its loop's thread only: Ray's answer
arrives on one of Ray's threads, and is handed to the loop
(`TrioToken.run_sync_soon`, `loop.call_soon_threadsafe`), where each call of
the batch is answered and the next batch sent. No task per lane: nothing
outlives the calls. A batch's calls enter the shard's runtime in their order
(Ray promises none between two calls of an async actor, so one batch in flight
at a time keeps one session's calls made at once in order, where calls sent
alone need not be). Each call is answered on its own: `Moved` reroutes that
call only, and a batch whose shard was lost fails its own calls only. A
caller cancelled while its call is queued withdraws it (it is never sent);
cancelled once it was sent, the call goes on at its shard and only its
answer is dropped, as for a call sent alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
import threading
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast, final

import anyio
import anyio.to_thread
import attrs
import ray
import sniffio
import trio
from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError, RayActorError

from protocol import CallResult, Membership, call_name

from .._client import CannotAskError, LogMessage
from .._config import RuntimeConfig
from .._error_result import error_result
from .._errors import RuntimeCallError, UnknownToolError
from .._prepare import prepare_call
from .._progress import ProgressReport
from .._registry import Registry
from .._target import Host
from ..server._module_specs import load_module
from ._shard import (
    Channels,
    Failed,
    Heard,
    Moved,
    Refused,
    Said,
    SessionEnded,
    WireCall,
    shard_class,
)

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence

    from prometheus_client.core import Metric

    from protocol import Caller

    from .._client import Answer, Asker
    from .._prepare import PreparedCall
    from .._runtime import RuntimeStatistics
    from .._target import Watcher
    from ._shard import Change

__all__ = [
    "NAMESPACE",
    "Cluster",
    "ClusterUnavailableError",
    "Directory",
    "MembershipError",
    "RoutingStatistics",
    "ShardLostError",
    "connect_cluster",
    "open_cluster",
]

logger = logging.getLogger("actors.cluster")

NAMESPACE: Final = "mcp-actors"
"""The Ray namespace of every cluster's named actors."""
_SHARD_LOST: Final = (ActorDiedError, ActorUnavailableError, RayActorError)
_MAX_ROUTES: Final = 8  # reroutes of one call before the caller is told to retry
_RETRY_FOR: Final = 60.0  # seconds a handover step waits for a restarting shard
_SCRAPE_TIMEOUT: Final = 2.0  # seconds a scrape waits for one shard's metrics
_PROBE_TIMEOUT: Final = 2.0  # seconds /readyz waits for the cluster's directory
# Seconds a call waits behind its lane's batch in flight before it goes without waiting
# for it: about twice a batch's round trip under load on the benchmark machine.
_HOLD: Final = 0.005
T = TypeVar("T")
_Wait = Callable[[Any], Awaitable[Any]]
_Exchange = Callable[[str], Awaitable[Any]]


class ShardLostError(RuntimeCallError):
    """The shard running a call was lost (its process died): the call may or may not have run."""


class ClusterUnavailableError(RuntimeCallError):
    """The cluster a front serves cannot be reached (it stopped): nothing was run."""


class MembershipError(RuntimeError):
    """A change of membership was refused (another is under way, or it names no shard)."""


@final
@attrs.frozen
class RoutingStatistics:
    """What a router sent to its shards so far (`Cluster.routing_statistics`)."""

    calls_sent: int
    """Tool calls sent to shards; a call sent again after `Moved` counts again."""
    ray_calls: int
    """The Ray calls that carried them: fewer when calls for one shard went together."""


@attrs.define(eq=False)
class _Waiting:
    """A call in a lane: its wire form, and its answer once its batch is back."""

    wire: WireCall
    done: anyio.Event
    answer: Any = None
    error: BaseException | None = None
    sent: bool = False
    hold: anyio.CancelScope | None = None  # while it waits to go: how long it may


@attrs.define(eq=False)
class _Lane:
    """One event loop's calls for one shard: those queued, and the batches in flight.

    Touched on its loop's thread only.
    """

    key: tuple[object, str]  # (the loop, the shard)
    handle: Any
    soon: Callable[[Callable[[], object]], object]  # runs a function on the loop, from any thread
    queued: list[_Waiting] = attrs.field(factory=list)
    flying: int = 0  # batches sent and not yet answered
    sent_at: float = -math.inf  # when the last batch went


@final
@attrs.frozen
class _Front:
    """A call's channels on its front: where what its tool says on its shard goes."""

    progress: Callable[[ProgressReport], None] | None
    log: Callable[[LogMessage], None] | None
    ask: Asker | None

    @property
    def channels(self) -> Channels:
        """Which channels the shard's runtime gets: only these."""
        return Channels(self.progress is not None, self.log is not None, self.ask is not None)

    async def hear(self, said: Said, handle: Any, call_id: str) -> None:
        """Hand `said` to its listener; a question is asked here and answered to the shard."""
        if isinstance(said, ProgressReport):
            if self.progress is not None:
                self.progress(said)
        elif isinstance(said, LogMessage):
            if self.log is not None:
                self.log(said)
        else:
            reply = await self._asked(said.asked)
            # Not awaited: the shard's tool waits for it, and a lost shard ends the stream.
            handle.answer.remote(call_id, said.number, reply)

    async def _asked(self, asked: Callable[[Asker], Awaitable[Answer | str]]) -> Any:
        """What the client answered (`asked` through this front's asker), or why it could not."""
        assert self.ask is not None  # a shard asks only when its front has the channel
        try:
            return await asked(self.ask)
        except CannotAskError as error:
            return Refused(str(error))


@attrs.define(eq=False)
class _Watching:
    """A front's watchers, and the shards' change streams it follows while it has any.

    Touched on the loop of the first watcher only (Ray's callbacks hop there).
    """

    soon: Callable[[Callable[[], object]], object]  # runs a function on that loop, from anywhere
    watchers: list[Watcher] = attrs.field(factory=list)
    streams: dict[str, Any] = attrs.field(factory=dict)  # shard → its change stream

    def follows(self, shard: str, stream: Any) -> bool:
        """Whether `stream` is the change stream followed for `shard` (not one given up)."""
        return self.streams.get(shard) is stream


@final
class Directory:
    """The cluster's membership and what its shards serve (the body of a Ray actor).

    ``committed`` is what routing follows; ``pending`` is the next membership
    while a handover prepares it.
    """

    def __init__(
        self,
        modules: Sequence[str],
        config: RuntimeConfig | None,
        state: str | Sequence[str],
        metrics: bool,
        membership: Membership,
    ) -> None:
        self._modules = tuple(modules)
        self._config = config
        self._state = state
        self._metrics = metrics
        self._committed = membership
        self._pending: Membership | None = None
        self._numbers = itertools.count(len(membership.shards))

    def memberships(self) -> tuple[Membership, Membership | None]:
        """The committed membership and the pending one (None outside a handover)."""
        return self._committed, self._pending

    def description(
        self,
    ) -> tuple[tuple[str, ...], RuntimeConfig | None, str | Sequence[str], bool]:
        """The module specs, runtime settings, store and metrics switch every shard runs with."""
        return self._modules, self._config, self._state, self._metrics

    def new_shard_name(self) -> str:
        """A name no shard of this cluster had: ``shard-N``, N counting up.

        Never one of a removed shard: Ray may not have let go of its actor's name yet.
        """
        return f"shard-{next(self._numbers)}"

    def begin(self, pending: Membership) -> None:
        """Start a handover to `pending`; MembershipError if one is under way or it is not next."""
        if self._pending is not None:
            msg = f"a change to epoch {self._pending.epoch} is under way"
            raise MembershipError(msg)
        if pending.epoch != self._committed.epoch + 1:
            msg = f"epoch {pending.epoch} does not follow {self._committed.epoch}"
            raise MembershipError(msg)
        self._pending = pending

    def call_off(self, epoch: int) -> None:
        """Forget the handover to `epoch`, if it is the one under way."""
        if self._pending is not None and self._pending.epoch == epoch:
            self._pending = None

    def commit(self) -> Membership:
        """End the handover: the pending membership is the committed one."""
        if self._pending is None:
            msg = "no change of membership is under way"
            raise MembershipError(msg)
        self._committed, self._pending = self._pending, None
        return self._committed


@final
class Cluster(Host):
    """A cluster's router (see `open_cluster` and `connect_cluster`): a host, as a runtime is.

    It offers what every host does (`actors.CallTarget`): tools, resources,
    prompts and completions run on their session's shard, with progress, log
    messages and questions crossing back to the caller (`run`), and changes
    on every shard heard through `watch`. So ``actors cluster --http`` is
    ``actors serve --http`` in front of shards. `call_blocking` is `call`
    for synchronous code.
    """

    def __init__(
        self,
        name: str,
        registry: Registry,
        config: RuntimeConfig | None,
        directory: Any,
        membership: Membership,
        handles: Mapping[str, Any] | None = None,
    ) -> None:
        self._name = name
        self._registry = registry
        self._config = RuntimeConfig() if config is None else config
        self._directory = directory
        self._membership = membership
        self._handles: dict[str, Any] = {} if handles is None else dict(handles)
        self._lanes: dict[tuple[object, str], _Lane] = {}
        self._counting = threading.Lock()  # sync callers count from their own threads
        self._calls_sent = 0
        self._ray_calls = 0
        self._watching: _Watching | None = None  # while anyone watches

    # ---- placement -------------------------------------------------------------

    @property
    def name(self) -> str:
        """The cluster's name: its Ray actors are named ``<name>/...`` in `NAMESPACE`."""
        return self._name

    @property
    def membership(self) -> Membership:
        """The membership this router last read."""
        return self._membership

    @property
    def shards(self) -> tuple[str, ...]:
        """The shard names, in the order they joined."""
        return self._membership.shards

    def shard_of(self, session_id: str) -> str:
        """The shard that owns `session_id`."""
        return self._membership.owner(session_id)

    # ---- calls -----------------------------------------------------------------

    def call(  # async, but still blocking where no loop runs (deprecated)
        self, params: Mapping[str, Any], *, caller: Caller | None = None
    ) -> Coroutine[Any, Any, CallResult]:
        """Run one tools/call-shaped call on its session's shard: await it (`Host.call`).

        Called from synchronous code (no event loop running in the thread),
        it still blocks and returns the result, with a DeprecationWarning:
        use `call_blocking` there.
        """
        try:
            sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            warnings.warn(
                "Cluster.call from synchronous code is deprecated: it is a coroutine, as on "
                "every host; call Cluster.call_blocking instead",
                DeprecationWarning,
                stacklevel=2,
            )
            return self.call_blocking(params, caller=caller)  # type: ignore[return-value]
        return super().call(params, caller=caller)

    def call_blocking(
        self, params: Mapping[str, Any], *, caller: Caller | None = None
    ) -> CallResult:
        """Run a tools/call-shaped call on its session's shard, waiting for its result.

        Raises UnknownToolError and ProtocolError as `Runtime.call` does; every
        other refusal, and a shard lost during the call, is an ``isError``
        result naming the problem.
        """
        try:
            call = prepare_call(self._registry, params, self._config.policy, caller)
            wire = WireCall.of(call)

            async def exchange(shard: str) -> Any:
                self._count(1)
                return await _got(self._handle(shard).call.remote(wire))

            reply = _blocking(self._routed(call.context.session_id, exchange, _got))
            return CallResult.from_wire(reply, call.tool.service)
        except UnknownToolError:
            raise
        except RuntimeCallError as error:
            return error_result(error, self._registry.resolve(call_name(params)).service)

    async def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: Asker | None = None,
    ) -> CallResult:
        """Run a prepared call on its session's shard (under trio or asyncio).

        `progress` and `log` hear what the tool reports and logs on its shard,
        and `ask` answers its questions, all on this loop (see "Client
        channels" in `actors.cluster._shard`); neither listener may block. A
        call given none of them travels as before, batched with the loop's
        other calls. Raises ShardLostError for a shard lost during the call.
        """
        wire = WireCall.of(call)
        if progress is None and log is None and ask is None:
            exchange = functools.partial(self._batched, wire)
        else:
            exchange = functools.partial(self._conversed, wire, _Front(progress, log, ask))
        reply = await self._routed(call.context.session_id, exchange, _resolved)
        # Each item keeps its own provenance from its _meta, or gets the tool's.
        return CallResult.from_wire(reply, call.tool.service)

    async def end_session(self, session_id: str) -> int:
        """`Runtime.end_session` on the session's shard: how many stored keys it deleted."""

        async def exchange(shard: str) -> Any:
            return await _resolved(
                (await self._awaited_handle(shard)).end_session.remote(session_id)
            )

        count: int = await self._routed(session_id, exchange, _resolved)
        return count

    def routing_statistics(self) -> RoutingStatistics:
        """How many tool calls this router sent to shards, in how many Ray calls."""
        with self._counting:
            return RoutingStatistics(self._calls_sent, self._ray_calls)

    def _count(self, calls: int) -> None:
        with self._counting:
            self._calls_sent += calls
            self._ray_calls += 1

    async def _routed(self, session: str, exchange: _Exchange, wait: _Wait) -> Any:
        """`exchange` with `session`'s shard, rerouting after a change of membership; the reply.

        `exchange` sends the call to the shard it is given and returns its
        answer; `wait` turns a Ray object ref into its value, for the
        directory. Both await on the event loop (`_batched`, `_resolved`), or
        block for a synchronous caller (`_got`, run by `_blocking`), so one
        procedure serves both.
        """
        for _ in range(_MAX_ROUTES):
            shard = self._membership.owner(session)
            try:
                reply = await exchange(shard)
            except _SHARD_LOST as lost:
                await self._refresh(wait)
                if shard not in self._membership.shards:
                    continue  # removed meanwhile: it answered nothing it had not handed over
                msg = (
                    f"shard {shard!r} was lost during the call ({type(lost).__name__}); the call "
                    "may or may not have happened: check, then retry"
                )
                raise ShardLostError(msg) from lost
            if isinstance(reply, Failed):
                msg = f"the call failed on shard {shard!r}: {reply.error}"
                raise RuntimeCallError(msg)
            if not isinstance(reply, Moved):
                return reply
            await self._refresh(wait)
        msg = f"the cluster's membership changed {_MAX_ROUTES} times during the call; retry"
        raise ShardLostError(msg)

    # ---- the async path's lanes (see "How calls cross") --------------------------

    async def _batched(self, wire: WireCall, shard: str) -> Any:
        """`wire`'s answer from `shard`, sent in a batch with the loop's other calls for it."""
        lane = self._lanes.get((_current_loop(), shard))
        if lane is None:
            lane = await self._lane(shard)
        waiting = _Waiting(wire, anyio.Event())
        lane.queued.append(waiting)
        if not lane.flying or time.monotonic() - lane.sent_at >= _HOLD:
            self._send(lane)
        answered = False
        try:
            if not waiting.sent:
                with anyio.move_on_after(lane.sent_at + _HOLD - time.monotonic()) as hold:
                    waiting.hold = hold
                    await waiting.done.wait()
                if not waiting.sent:  # held long enough behind a slower batch: go now
                    self._send(lane)
            await waiting.done.wait()
            answered = True
        finally:
            if not answered and not waiting.sent:  # cancelled while queued: withdrawn, never sent
                lane.queued.remove(waiting)
                self._forget_if_idle(lane)
        if waiting.error is not None:
            raise waiting.error
        return waiting.answer

    async def _conversed(self, wire: WireCall, front: _Front, shard: str) -> Any:
        """`wire`'s answer from `shard` in a Ray call of its own, hearing what it says on the way.

        Cancelled, it cancels the shard's stream: the call is told (see
        `ShardHost.converse`).
        """
        handle = await self._awaited_handle(shard)
        call_id = uuid.uuid4().hex
        self._count(1)
        converse = handle.converse.options(num_returns="streaming")
        stream = converse.remote(call_id, wire, front.channels)
        answered = False
        try:
            while True:
                item = await _resolved(await _next_ref(stream))
                if not isinstance(item, Heard):
                    answered = True
                    return item
                for said in item.said:
                    await front.hear(said, handle, call_id)
        finally:
            if not answered:
                with contextlib.suppress(*_SHARD_LOST):  # a lost shard has no call to tell
                    ray.cancel(stream)

    async def _lane(self, shard: str) -> _Lane:
        """This loop's lane to `shard`, made if it has none (the handle looked up off the loop)."""
        handle = await self._awaited_handle(shard)
        key = (_current_loop(), shard)
        lane = self._lanes.get(key)  # made meanwhile, by another call
        if lane is None:
            lane = self._lanes[key] = _Lane(key, handle, _soon())
        return lane

    def _send(self, lane: _Lane) -> None:
        """Send every call queued in `lane` in one Ray call; answer them when it is back."""
        batch, lane.queued = lane.queued, []
        for waiting in batch:
            waiting.sent = True
            if waiting.hold is not None:
                waiting.hold.deadline = math.inf  # it waits for its answer now, however long
        lane.flying += 1
        self._count(len(batch))
        try:
            future = lane.handle.call_batch.remote([w.wire for w in batch]).future()
        except Exception as error:  # refused before it left (its arguments do not pickle)
            self._answer(lane, batch, error)
            return
        finally:
            lane.sent_at = time.monotonic()  # once it left: the first call of a handle is slow

        def back(future: Any) -> None:  # on one of Ray's threads
            try:
                lane.soon(functools.partial(self._answered, lane, batch, future))
            except (trio.RunFinishedError, RuntimeError):  # the loop is gone, its callers too
                if self._lanes.get(lane.key) is lane:
                    del self._lanes[lane.key]

        future.add_done_callback(back)

    def _answered(self, lane: _Lane, batch: list[_Waiting], future: Any) -> None:
        """A batch's answer is back, on the lane's loop (never raises: it runs in the loop)."""
        answers: list[Any] | BaseException
        try:
            answers = list(future.result())
        except BaseException as error:  # the shard lost, or call_batch failed: each call's
            answers = error
        else:
            if len(answers) != len(batch):
                msg = f"the shard sent {len(answers)} answers to a batch of {len(batch)} calls"
                answers = RuntimeCallError(msg)
        self._answer(lane, batch, answers)

    def _answer(
        self, lane: _Lane, batch: list[_Waiting], answers: list[Any] | BaseException
    ) -> None:
        """Settle a batch's calls (with `answers`, or each with the error), and send the next."""
        lane.flying -= 1
        for n, waiting in enumerate(batch):
            if isinstance(answers, BaseException):
                waiting.error = answers
            else:
                waiting.answer = answers[n]
            waiting.done.set()  # a caller that went away meanwhile hears nothing
        if lane.queued:
            self._send(lane)
        else:
            self._forget_if_idle(lane)

    def _forget_if_idle(self, lane: _Lane) -> None:
        """Drop a lane with nothing queued or in flight: a loop that ended leaves none behind."""
        if not lane.queued and not lane.flying and self._lanes.get(lane.key) is lane:
            del self._lanes[lane.key]

    async def _refresh(self, wait: _Wait) -> None:
        try:
            committed, _ = await wait(self._directory.memberships.remote())
        except _SHARD_LOST:
            msg = "its directory does not answer"
            raise self._gone(msg) from None
        if committed.epoch > self._membership.epoch:
            self._membership = committed

    async def _awaited_handle(self, shard: str) -> Any:
        """`_handle`, looked up in a worker thread when it is not known: Ray's lookup blocks.

        A caller cancelled meanwhile leaves the lookup to finish on its own (and be kept).
        """
        handle = self._handles.get(shard)
        if handle is None:
            handle = await anyio.to_thread.run_sync(self._handle, shard, abandon_on_cancel=True)
        return handle

    def _handle(self, shard: str) -> Any:
        handle = self._handles.get(shard)
        if handle is None:  # a shard another process started: looked up once, by name
            try:
                handle = ray.get_actor(f"{self._name}/{shard}", namespace=NAMESPACE)
            except ValueError:
                msg = f"its shard {shard!r} is not on Ray"
                raise self._gone(msg) from None
            self._handles[shard] = handle
        return handle

    def _gone(self, why: str) -> ClusterUnavailableError:
        return ClusterUnavailableError(
            f"the cluster {self._name!r} cannot be reached ({why}): the call was not run; "
            "its operator must start the cluster again"
        )

    async def unavailable(self) -> str | None:
        """Why the cluster cannot serve now (its directory does not answer), or None.

        For ``/readyz``: awaited on the event loop, never blocking it, at most
        `_PROBE_TIMEOUT` seconds.
        """
        with anyio.move_on_after(_PROBE_TIMEOUT):
            try:
                await _resolved(self._directory.memberships.remote())
            except _SHARD_LOST as error:
                return f"the cluster {self._name!r} cannot be reached: {type(error).__name__}"
            return None
        return f"the cluster {self._name!r} did not answer within {_PROBE_TIMEOUT:g} s"

    # ---- changes (see `watch`) ---------------------------------------------------

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Tell `watcher` of every change of a key's state on any shard from now on; how to stop.

        Call it on the event loop (trio or asyncio) that is to hear: watchers
        are told there, synchronously, and must not block (with several
        watchers, all on the loop of the first). While anyone watches, each
        shard streams its changes here (`ShardHost.changes`): with nobody
        watching, a call pays nothing for it. A shard that joins is followed
        once a shard commits the membership naming it; a stream lost with its
        shard is followed again once the shard is back (what changed meanwhile
        is not told). A change is heard once its shard's stream is open: the
        first watcher's streams open with their first Ray call.
        """
        watching = self._watching
        if watching is None:
            watching = self._watching = _Watching(_soon())
            self._follow_every(watching, self._membership)
        watching.watchers.append(watcher)

        def unwatch() -> None:
            with contextlib.suppress(ValueError):
                watching.watchers.remove(watcher)
            if not watching.watchers and self._watching is watching:
                self._watching = None
                for stream in watching.streams.values():
                    with contextlib.suppress(*_SHARD_LOST):
                        ray.cancel(stream)  # the shard stops watching its runtime

        return unwatch

    def _follow_every(self, watching: _Watching, membership: Membership) -> None:
        """Follow the change stream of each shard of `membership` not followed yet."""
        if membership.epoch > self._membership.epoch:
            self._membership = membership
        for shard in membership.shards:
            if shard not in watching.streams:
                # A shard another process started is looked up by name here, once.
                changes = self._handle(shard).changes.options(num_returns="streaming")
                stream = watching.streams[shard] = changes.remote()
                self._await_changes(watching, shard, stream)

    def _await_changes(self, watching: _Watching, shard: str, stream: Any) -> None:
        """Take `stream`'s next changes on the watchers' loop once Ray has them (a callback)."""
        expected, _ = stream.worker.core_worker.peek_object_ref_stream(stream._generator_ref)
        _on_loop(watching, expected, functools.partial(self._changes_came, watching, shard, stream))

    def _changes_came(self, watching: _Watching, shard: str, stream: Any, _: object) -> None:
        if not watching.follows(shard, stream):
            return  # no longer followed
        try:
            ref = stream._next_sync(timeout_s=0)
        except StopIteration:
            self._lost_changes(watching, shard, "it ended")
            return
        if ref.is_nil():  # not there after all: wait again
            self._await_changes(watching, shard, stream)
            return
        _on_loop(watching, ref, functools.partial(self._changes_read, watching, shard, stream))

    def _changes_read(self, watching: _Watching, shard: str, stream: Any, future: Any) -> None:
        if not watching.follows(shard, stream):
            return
        try:
            changes: tuple[Change, ...] = future.result()
        except Exception as error:  # the shard lost, or its stream failed
            self._lost_changes(watching, shard, type(error).__name__)
            return
        for change in changes:
            self._tell(watching, change)
        self._await_changes(watching, shard, stream)

    def _tell(self, watching: _Watching, change: Change) -> None:
        """Tell each watcher of `change`; a membership is followed instead (its new shards)."""
        if isinstance(change, Membership):
            self._follow_every(watching, change)
            return
        for watcher in tuple(watching.watchers):
            try:
                if isinstance(change, SessionEnded):
                    watcher.session_ended(change.session_id)
                else:
                    watcher.key_changed(change)
            except Exception:  # a watcher's bug must not stop the others hearing
                logger.exception("a watcher failed on the change %s", change)

    def _lost_changes(self, watching: _Watching, shard: str, why: str) -> None:
        """`shard`'s stream is gone: follow it again if the directory still names it."""
        del watching.streams[shard]
        logger.warning("the change stream of %s ended (%s); following it again", shard, why)

        def read(future: Any) -> None:
            if self._watching is not watching:
                return
            try:
                committed, _ = future.result()
            except Exception as error:
                logger.warning(
                    "its directory does not answer (%s): %s is not followed", error, shard
                )
                return
            self._follow_every(watching, committed)

        _on_loop(watching, self._directory.memberships.remote(), read)

    # ---- introspection ---------------------------------------------------------

    def statistics(self) -> dict[str, RuntimeStatistics]:
        """Each shard's runtime counters, by shard name (``write_conflicts``: fenced writes)."""
        statistics: dict[str, RuntimeStatistics] = self._on_every("statistics")
        return statistics

    def live_sessions(self) -> dict[str, frozenset[str]]:
        """The sessions with a live actor on each shard, by shard name."""
        live: dict[str, frozenset[str]] = self._on_every("live_sessions")
        return live

    def metric_families(self) -> dict[str, list[Metric]]:
        """Each shard's Prometheus metric families, by shard name, waiting for them.

        Empty lists unless the cluster was opened with ``metrics=True``. A shard
        that does not answer within a few seconds is left out.
        """
        sent = {shard: self._handle(shard).metric_families.remote() for shard in self.shards}
        families = {}
        for shard, ref in sent.items():
            try:
                families[shard] = ray.get(ref, timeout=_SCRAPE_TIMEOUT)
            except (GetTimeoutError, *_SHARD_LOST) as error:
                logger.warning("no metrics from %s this scrape: %s", shard, type(error).__name__)
        return families

    async def gathered_metric_families(self) -> dict[str, list[Metric]]:
        """`metric_families`, awaited on the event loop (trio or asyncio) without blocking it.

        All shards are asked at once; one that does not answer within
        `_SCRAPE_TIMEOUT` seconds, or is lost, is left out.
        """
        families: dict[str, list[Metric]] = {}

        async def one(shard: str) -> None:
            with anyio.move_on_after(_SCRAPE_TIMEOUT):
                try:
                    handle = await self._awaited_handle(shard)
                    families[shard] = await _resolved(handle.metric_families.remote())
                except (*_SHARD_LOST, ClusterUnavailableError) as error:
                    logger.warning("no metrics from %s: %s", shard, type(error).__name__)
                return
            logger.warning("no metrics from %s: it did not answer in time", shard)

        async with anyio.create_task_group() as asking:
            for shard in self.shards:
                asking.start_soon(one, shard)
        return families

    def pid_of(self, shard: str) -> int:
        """The process id of `shard` now."""
        pid: int = ray.get(self._handle(shard).pid.remote())
        return pid

    def _on_every(self, method: str, *args: Any, shards: Iterable[str] | None = None) -> Any:
        """`method` on every shard (or `shards`) at once, by name; waits out a restarting one."""
        waiting = set(self._membership.shards if shards is None else shards)
        replies = {}
        deadline = time.monotonic() + _RETRY_FOR
        while waiting:
            sent = {shard: getattr(self._handle(shard), method).remote(*args) for shard in waiting}
            for shard, ref in sent.items():
                try:
                    replies[shard] = ray.get(ref)
                except _SHARD_LOST:
                    if time.monotonic() > deadline:
                        raise
                else:
                    waiting.discard(shard)
            if waiting:
                time.sleep(0.1)  # Ray is restarting them
        return replies

    # ---- membership --------------------------------------------------------------

    def add_shard(self) -> str:
        """Start one more shard and hand it its sessions; its name."""
        name: str = ray.get(self._directory.new_shard_name.remote())
        self._change(lambda shards: (*shards, name))
        return name

    def remove_shard(self, shard: str) -> None:
        """Hand `shard`'s sessions to the others, then stop it.

        Raises ValueError for a shard not in the cluster or the last one.
        """

        def without(shards: tuple[str, ...]) -> tuple[str, ...]:
            if shard not in shards:
                msg = f"no shard {shard!r} in the cluster (shards: {', '.join(shards)})"
                raise ValueError(msg)
            if len(shards) == 1:
                msg = "cannot remove the last shard"
                raise ValueError(msg)
            return tuple(s for s in shards if s != shard)

        self._change(without)

    def _change(self, change: Callable[[tuple[str, ...]], tuple[str, ...]]) -> None:
        """A handover to the shards `change` makes of today's: prepare, publish, commit.

        If a step fails before the publication, the handover is called off:
        every shard goes on with the old membership (the sessions it stopped
        load again on their next call), and the error is raised.
        """
        old, _ = ray.get(self._directory.memberships.remote())
        new = old.successor(change(old.shards))
        ray.get(self._directory.begin.remote(new))
        involved = set(old.shards) | set(new.shards)
        try:
            description = ray.get(self._directory.description.remote())
            for shard in set(new.shards) - set(old.shards):
                self._handles[shard] = _start_shard(self._name, shard, *description)
            self._on_every("prepare", new, shards=involved)
        except BaseException:
            self._call_off(new.epoch, involved, started=involved - set(old.shards))
            raise
        ray.get(self._directory.commit.remote())
        self._membership = new
        self._on_every("commit", new, shards=involved)
        for shard in set(old.shards) - set(new.shards):
            _stop(self._handles.pop(shard))

    def _call_off(self, epoch: int, involved: set[str], *, started: set[str]) -> None:
        """Undo a handover that failed before its publication, as far as can be."""
        ray.get(self._directory.call_off.remote(epoch))
        for shard in involved:
            # A shard that is gone has nothing to undo (ValueError: no actor by that name).
            with contextlib.suppress(ValueError, *_SHARD_LOST):
                ray.get(self._handle(shard).call_off.remote(epoch))
        for shard in started:
            if shard in self._handles:
                _stop(self._handles.pop(shard))


def _current_loop() -> object:
    """The running event loop (trio's run by its token), to key the lanes by."""
    if sniffio.current_async_library() == "asyncio":
        return asyncio.get_running_loop()
    return trio.lowlevel.current_trio_token()


def _soon() -> Callable[[Callable[[], object]], object]:
    """How to run a function on the running loop from another thread."""
    if sniffio.current_async_library() == "asyncio":
        return asyncio.get_running_loop().call_soon_threadsafe
    return trio.lowlevel.current_trio_token().run_sync_soon


def _on_loop(watching: _Watching, ref: Any, then: Callable[[Any], None]) -> None:
    """Once `ref` is ready, run ``then(its future)`` on the watchers' loop (unless it ended)."""
    future = ref.future()

    def back(_: object) -> None:  # on one of Ray's threads
        with contextlib.suppress(trio.RunFinishedError, RuntimeError):  # the loop is gone
            watching.soon(functools.partial(then, future))

    future.add_done_callback(back)


async def _next_ref(stream: Any) -> Any:
    """The next object ref of a Ray streaming generator, awaited under trio or asyncio.

    Ray's own ``async for`` runs on asyncio only: this awaits the ref Ray
    expects next, then takes it without waiting. Raises RuntimeCallError for
    a stream that ended without an answer.
    """
    while True:
        expected, ready = stream.worker.core_worker.peek_object_ref_stream(stream._generator_ref)
        if not ready:
            await _settled(expected)
        try:
            ref = stream._next_sync(timeout_s=0)
        except StopIteration:
            msg = "the shard ended the call's stream without its answer"
            raise RuntimeCallError(msg) from None
        if not ref.is_nil():
            return ref


async def _got(ref: Any) -> Any:
    """The value of a Ray object ref, blocking the thread: for `_blocking` only."""
    return ray.get(ref)


def _blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a routing procedure whose waits block (`_got`) to its end, in this thread.

    Nothing in it suspends, so one step runs it through: no event loop needed.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    msg = "a blocking routing procedure suspended"
    raise RuntimeError(msg)


async def _resolved(ref: Any) -> Any:
    """The value of a Ray object ref, awaited without a thread."""
    return (await _settled(ref)).result()


async def _settled(ref: Any) -> Any:
    """The future of a Ray object ref, once it is settled (a value or an error): no thread."""
    future = ref.future()
    if sniffio.current_async_library() == "asyncio":
        with contextlib.suppress(Exception):  # read by the caller, from the future
            await asyncio.wrap_future(future)
        return future
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()

    def wake(_: object) -> None:
        with contextlib.suppress(trio.RunFinishedError):  # the loop ended before the reply
            token.run_sync_soon(done.set)

    future.add_done_callback(wake)
    # Cancelled here (the client went away, shutdown's grace ran out): the call goes on
    # at its shard, which answers it in order; only its reply is dropped.
    await done.wait()
    return future


def _start_shard(
    cluster: str,
    shard: str,
    modules: Sequence[str],
    config: RuntimeConfig | None,
    state: str | Sequence[str],
    metrics: bool,
) -> Any:
    named = shard_class().options(name=f"{cluster}/{shard}", namespace=NAMESPACE)
    return named.remote(shard, f"{cluster}/directory", NAMESPACE, modules, config, state, metrics)


def _stop(handle: Any) -> None:
    """Stop a shard's runtime in order, then its actor, for good."""
    with contextlib.suppress(*_SHARD_LOST):
        ray.get(handle.close.remote())
    ray.kill(handle, no_restart=True)


def _placed_config(config: RuntimeConfig | None) -> RuntimeConfig:
    """`config` for shards, whose placement gives each session one owner at a time (a
    handover stops the old owner before the new one loads): unless said otherwise, they
    ask no version before a call, whatever the store; the version fence still guards
    every write, as it guards two clusters on one store."""
    config = RuntimeConfig() if config is None else config
    if config.shared_store is None:
        return attrs.evolve(config, shared_store=False)
    return config


@contextlib.contextmanager
def open_cluster(
    modules: Sequence[str],
    *,
    shards: int,
    state: str | Sequence[str],
    config: RuntimeConfig | None = None,
    name: str | None = None,
    metrics: bool = False,
) -> Iterator[Cluster]:
    """Start `shards` shards on the connected Ray cluster; stop them when the block ends.

    `modules` are specs, ``package.module:attribute`` (``actors.modules:planning``),
    imported here and in every shard. Ray must be initialized (``ray.init``).
    `state` is the store every shard shares (PostgreSQL, for shards on several
    machines; several PostgreSQL URLs for a store split by session,
    `actors.store.open_split_store`). Shards ask no version before a call unless
    `config` sets ``shared_store``: placement gives a session one owner. `name`
    names the cluster's Ray actors, for front ends in other processes
    (`connect_cluster`); a fresh one by default. With `metrics`, each shard keeps
    Prometheus metrics of its runtime (`Cluster.metric_families`; needs the
    ``metrics`` extra). Raises ValueError for fewer than one shard or a name in use,
    ConfigurationError for a module spec that does not import.
    """
    if shards < 1:
        msg = f"shards must be at least 1, got {shards}"
        raise ValueError(msg)
    registry = Registry(map(load_module, modules))
    name = f"cluster-{uuid.uuid4().hex[:12]}" if name is None else name
    membership = Membership(0, tuple(f"shard-{n}" for n in range(shards)))
    config = _placed_config(config)
    specs = tuple(modules)
    directory: Any = (
        ray.remote(Directory)
        .options(name=f"{name}/directory", namespace=NAMESPACE)
        .remote(specs, config, state, metrics, membership)
    )
    handles = {
        shard: _start_shard(name, shard, specs, config, state, metrics)
        for shard in membership.shards
    }
    cluster = Cluster(name, registry, config, directory, membership, handles)
    try:
        # Every shard up, its store reached, before the first call: a bad state URL or a
        # module that does not import in a shard's process fails here, with its cause.
        cluster._on_every("ready")
        yield cluster
    finally:
        for shard in cluster.shards:  # the shards now, after any change of membership
            _stop(cluster._handle(shard))
        ray.kill(directory, no_restart=True)


def connect_cluster(name: str) -> Cluster:
    """A router for the running cluster `name` (a front end in another process).

    Ray must be initialized, connected to the cluster's Ray (``ray.init(address=...)``).
    Raises ValueError if no cluster of that name runs.
    """
    try:
        directory = ray.get_actor(f"{name}/directory", namespace=NAMESPACE)
    except ValueError:
        msg = f"no cluster named {name!r} runs on this Ray cluster"
        raise ValueError(msg) from None
    description: Any = ray.get(directory.description.remote())
    modules, config, _, _ = cast(
        "tuple[tuple[str, ...], RuntimeConfig | None, str | Sequence[str], bool]", description
    )
    committed, _ = ray.get(directory.memberships.remote())
    return Cluster(name, Registry(map(load_module, modules)), config, directory, committed)
