"""One key's actor: its phases, the envelopes it serves, and the loop that serves them.

The map
-------
* `Phase` and ``_NEXT``: the actor's lifecycle, every allowed transition in one
  table, and `Actor.move_to`, the one way from phase to phase (a transition the
  table does not allow is a bug: `LifecycleError`).
* `Actor`: the router's handle on one key's actor (its mailbox, pending count,
  phase), and what the actor's task keeps while it serves (the running call, a
  heavy call's thread).
* `Envelope` (and `ObservedEnvelope`, when someone observes): one accepted call
  and the slot its single reply goes into.
* `ActorLoop`: every actor's task. It waits for the actor's turn, makes or
  loads the state, serves the mailbox call after call (inline, awaited, or in
  a worker thread), writes durable states, and stops the state. What it needs
  of the runtime it gets through `Seats` (room under the caps, from
  `actors._admission`) and a ``finished`` callback (the router forgets the
  actor); counters and watchers are shared with the router.

The lifecycle
-------------
::

    STARTING ──▶ SERVING ──▶ RETIRING ──▶ STOPPING ──▶ FINISHED
        │                       ▲  │                      ▲
        └───────────────────────┘  └──────────────────────┘
               SERVING ──────────▶ STOPPING

An actor is STARTING from the moment the router registers it: it takes calls
(they queue in its mailbox in arrival order) while its task waits for its turn
(its predecessor FINISHED, room under ``max_actors``), makes or loads the state
and runs ``on_start``; then it is SERVING. Retiring (TTL, eviction, shutdown,
hand-over, a session ended, a crash) closes its mailbox in the same step: a
RETIRING actor takes no call, serves what it accepted, and stops. An actor
retired while STARTING still makes its state to serve what it took, or, if it
could not (no room, an unreadable store), fails those calls and goes straight
to FINISHED. STOPPING runs ``on_stop``; a state that runs tasks of its own
(``start_background``) whose task failed goes there from SERVING at once,
inside its nursery. FINISHED frees the key: a successor's state may be made.

See `actors._runtime` for why no call is lost, reordered or served beside
another state of its key.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import math
import secrets
import time
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import attrs
import trio

from protocol import CallResult

from ._client import Ask, Log
from ._durable import StateLoadError
from ._errors import (
    ActorCrashedError,
    CallTimeoutError,
    CapacityError,
    RuntimeCallError,
    RuntimeClosedError,
    StateUnreadableError,
    ToolError,
)
from ._keeper import Keeper
from ._module import Tool, ToolModule, run_hook
from ._observe import OK, TOOL_ERROR, CallRecord, Observer, StopReason, outcome_of
from ._progress import Progress
from .store import StoreError, VersionConflict

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Mapping

    from outcome import Outcome

    from protocol import ActorKey, ToolContext

    from ._client import Asker, LogMessage
    from ._config import RuntimeConfig
    from ._prepare import Route
    from ._progress import ProgressReport
    from ._target import Watcher
    from .store import StateStore

__all__ = [
    "ACTOR_TASK",
    "Actor",
    "ActorLoop",
    "Counters",
    "Envelope",
    "LifecycleError",
    "ObservedEnvelope",
    "Phase",
    "Seats",
    "sole_cause",
]

logger = logging.getLogger("actors")

ACTOR_TASK: Final = "actors._actor.ActorLoop.run"  # the name of every actor's task
_WRITE_ATTEMPTS: Final = 3  # runs of one call whose write met another writer's change
_RELOAD_RETRY_AFTER: Final = 1.0  # seconds a failed load's answer stands for the next calls

_Outcome = CallResult | RuntimeCallError


class Phase(enum.Enum):
    """Where an actor is in its life (see the module docstring); `Actor.move_to` moves it."""

    accepting: bool
    """Whether an actor in this phase takes calls: read by the router on every call."""

    STARTING = "starting", True  # takes calls; waits for its turn, makes its state
    SERVING = "serving", True  # holds the key's state and takes calls
    RETIRING = "retiring", False  # mailbox closed: serves what it accepted, then stops
    STOPPING = "stopping", False  # on_stop runs
    FINISHED = "finished", False  # gone: the key's next state may be made

    def __init__(self, _label: str, accepting: bool) -> None:
        self.accepting = accepting


_NEXT: Final[Mapping[Phase, frozenset[Phase]]] = {
    # Its state made and on_start run; or retired before that (it still serves what it took).
    Phase.STARTING: frozenset({Phase.SERVING, Phase.RETIRING}),
    # Retired; or a background state's task failed, and on_stop runs in its nursery at once.
    Phase.SERVING: frozenset({Phase.RETIRING, Phase.STOPPING}),
    # Drained, with a state to stop; or none was ever made (no room, an unreadable store).
    Phase.RETIRING: frozenset({Phase.STOPPING, Phase.FINISHED}),
    Phase.STOPPING: frozenset({Phase.FINISHED}),
    Phase.FINISHED: frozenset(),
}
"""Every allowed transition: `Actor.move_to` refuses any other."""


class LifecycleError(RuntimeError):
    """An actor was moved between two phases ``_NEXT`` does not link: a bug in the runtime."""


@attrs.define(eq=False)
class Counters:
    """The runtime's counters, shared by the router, admission and the actor loop."""

    started: int = 0
    expired: int = 0
    evicted: int = 0
    crashed: int = 0
    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    duplicate_actors: int = 0
    state_writes: int = 0
    write_conflicts: int = 0
    write_failures: int = 0


@attrs.define(eq=False)
class Envelope:
    """One accepted call, and the slot its single reply goes into."""

    # Made positionally on every call (see `Runtime._envelope`): keywords cost more.
    tool: Tool
    context: ToolContext
    arguments: dict[str, Any]
    progress: Callable[[ProgressReport], None] | None = None  # who hears the tool's progress
    log: Callable[[LogMessage], None] | None = None  # who hears the tool's log
    ask: Asker | None = None  # whom the tool's questions go to
    on_reply: Callable[[_Outcome], None] | None = None  # a caller outside trio (`submit_nowait`)
    outcome: _Outcome | None = None  # set once, by `reply`
    # The caller's task while it waits for the reply, parked by `Runtime.run` and woken
    # by `reply`: what a trio.Event would do, without making one per call.
    waiter: trio.lowlevel.Task | None = None
    abandoned: bool = False  # the caller was cancelled before the call started
    observed: ClassVar[bool] = False  # an `ObservedEnvelope`: tell the observer its times

    def reply(self, outcome: _Outcome) -> None:
        """Set the call's one outcome and wake whoever waits for it."""
        self.outcome = outcome
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            trio.lowlevel.reschedule(waiter)
        if self.on_reply is not None:
            self.on_reply(outcome)

    def withdraw(self) -> None:
        """The caller went away: skip the call if it has not started (its reply is dropped).

        Only for a caller that is not parked on the envelope (or whose wait is being
        aborted): a parked one would never be woken.
        """
        self.waiter = None
        if self.outcome is None:
            self.abandoned = True

    def cancelled(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        """The waiting caller was cancelled: withdraw the call, and end its wait at once."""
        self.withdraw()
        return trio.lowlevel.Abort.SUCCEEDED


@attrs.define(eq=False)
class ObservedEnvelope(Envelope):
    """An envelope of a runtime with an observer: it keeps its times and reports its reply.

    A subclass, so that an unobserved runtime's envelopes carry none of it.
    """

    observer: Observer = attrs.field(kw_only=True)
    meta: Mapping[str, Any] | None = attrs.field(kw_only=True)
    accepted: float = attrs.field(kw_only=True, factory=time.perf_counter)
    started: float | None = attrs.field(kw_only=True, default=None)
    observed: ClassVar[bool] = True

    def reply(self, outcome: _Outcome) -> None:
        """Reply, then tell the observer how the call ended and when."""
        finished = time.perf_counter()
        super().reply(outcome)
        if type(outcome) is CallResult:
            label = TOOL_ERROR if outcome.is_error else OK
        else:
            assert isinstance(outcome, RuntimeCallError)
            label = outcome_of(outcome)
        tool = self.tool
        self.observer.call_finished(
            CallRecord(
                tool.full_name,
                tool.module.name,
                self.context,
                label,
                self.accepted,
                self.started,
                finished,
                self.meta,
            )
        )


@attrs.define(eq=False)
class _Worker:
    """One heavy handler's run in a worker thread, and how its actor learns that it ended."""

    limiter: trio.CapacityLimiter
    token: trio.lowlevel.TrioToken = attrs.field(factory=trio.lowlevel.current_trio_token)
    finished: trio.Event = attrs.field(factory=trio.Event)
    result: Outcome[CallResult] | None = None

    async def start(self, work: Callable[[], CallResult], name: str) -> None:
        """Start `work` in a thread once the limiter has room (cancellable until then)."""
        await self.limiter.acquire_on_behalf_of(self)
        # Nothing between the acquisition and the start can be cancelled: once
        # this returns, a thread runs and only `finished` says when it ends.
        trio.lowlevel.start_thread_soon(work, self._deliver, name)

    def _deliver(self, result: Outcome[CallResult]) -> None:
        # In the worker thread. Once trio.run has returned nobody waits any
        # more (the actor gave up on the thread at shutdown): drop the result.
        with contextlib.suppress(trio.RunFinishedError):
            self.token.run_sync_soon(self._finish, result)

    def _finish(self, result: Outcome[CallResult]) -> None:
        self.limiter.release_on_behalf_of(self)
        self.result = result
        self.finished.set()


@attrs.define(eq=False)
class Actor:
    """The task that owns one key's state, and the router's handle on it."""

    key: ActorKey
    route: Route
    module: ToolModule[Any]
    ttl: float
    send: trio.MemorySendChannel[Envelope]
    receive: trio.MemoryReceiveChannel[Envelope]
    last_used: float
    idle_since: float
    predecessor: Actor | None = None  # the key's previous actor, maybe still stopping
    pending: int = 0
    phase: Phase = Phase.STARTING  # changed by `move_to` only
    # Not phases, and so flags of their own: a seat is taken while STARTING and
    # kept until FINISHED, whatever happens between; shutdown may cancel an actor
    # in any phase, and a background scope made later must start cancelled.
    holds_state: bool = False  # counted against max_actors, from room found to finish
    cancelled: bool = False  # the runtime cancelled it (shutdown_grace is over)
    tenant: str | None = None  # whose share the state counts against, under a cap
    current: Envelope | None = None
    worker: _Worker | None = None  # the thread of a heavy call, from its start to its end
    stop_reason: StopReason = StopReason.SHUTDOWN  # set by whoever retires it otherwise
    scope: trio.CancelScope | None = None  # a background state's cancellable part, if any
    # Made only when someone waits: most actors never are, and an Event would add
    # to every idle actor's memory (the figure: docs/performance.md).
    _finish_event: trio.Event | None = None

    def move_to(self, phase: Phase) -> None:
        """Enter `phase`; LifecycleError if ``_NEXT`` does not lead there from the current one."""
        if phase not in _NEXT[self.phase]:
            msg = (
                f"BUG: the actor for {self.key} cannot go from {self.phase.name} to "
                f"{phase.name}; allowed from there: "
                f"{', '.join(sorted(p.name for p in _NEXT[self.phase])) or 'none'}"
            )
            raise LifecycleError(msg)
        self.phase = phase

    async def wait_finished(self) -> None:
        """Wait until the actor is FINISHED (its on_stop included)."""
        if self.phase is Phase.FINISHED:
            await trio.lowlevel.checkpoint()
            return
        if self._finish_event is None:
            self._finish_event = trio.Event()
        await self._finish_event.wait()

    def finish(self) -> None:
        """Enter FINISHED and wake whoever waits (woken even if the move is refused)."""
        try:
            self.move_to(Phase.FINISHED)
        finally:
            if self._finish_event is not None:
                self._finish_event.set()

    def cancel(self) -> None:
        """Cancel the shielded part of a background state, now or when it starts."""
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()

    def cancellable(self) -> trio.CancelScope:
        """The scope a background state is served in; already cancelled if the actor was."""
        self.scope = trio.CancelScope()
        if self.cancelled:
            self.scope.cancel()
        return self.scope

    def retire(self) -> None:
        """Take no more calls (RETIRING): serve what the mailbox holds, then stop.

        Synchronous on purpose: nothing can be sent between the decision and
        the close, and closing a send channel never drops what it buffered.
        An actor that takes no calls already is left as it is.
        """
        if self.phase.accepting:
            self.move_to(Phase.RETIRING)
            self.send.close()

    def fail_pending(self, error: Callable[[], RuntimeCallError]) -> int:
        """Reply `error()` to the running call and every queued one; return how many."""
        failed = 0
        if self.current is not None and self.current.outcome is None:
            self.current.reply(error())
            failed += 1
        self.current = None
        self.send.close()  # callers blocked on a full mailbox route again (see Runtime._offer)
        while True:
            try:
                envelope = self.receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return failed
            if not envelope.abandoned:
                envelope.reply(error())
                failed += 1


class Seats(Protocol):
    """Room for states under the caps, as an actor's task asks for it (`Admission`)."""

    def seat_now(self, actor: Actor) -> bool:
        """Seat `actor` at once when no cap applies; whether it did."""
        ...

    async def seat(self, actor: Actor) -> None:
        """Wait for room under the caps, evicting idle actors; CapacityError if there is none."""
        ...


@attrs.define(eq=False)
class ActorLoop:
    """Runs every actor's task (`run`): its turn, its state, its calls, its stop.

    The router starts one task per actor; what the tasks need of the runtime
    comes in here once: its counters and watchers (shared, the router reads
    them too), `seats` (admission), and `finished`, called when an actor is
    done so that the router forgets it and frees its seat.
    """

    config: RuntimeConfig
    store: StateStore | None
    observer: Observer | None
    counters: Counters
    watchers: list[Watcher]
    seats: Seats
    finished: Callable[[Actor], None]
    loaded: set[ActorKey]  # stored states loaded since the runtime last marked them used
    now: Callable[[], float]  # the run's clock (see `Runtime.__init__`)
    timeout: float = attrs.field(init=False)
    threads: trio.CapacityLimiter = attrs.field(init=False)  # see "Heavy handlers"
    shared: bool = attrs.field(init=False)
    """Other processes write the store: a durable key's version is asked before each call."""

    def __attrs_post_init__(self) -> None:
        timeout = self.config.call_timeout
        self.timeout = math.inf if timeout is None else timeout
        self.threads = trio.CapacityLimiter(self.config.heavy_threads)
        shared = self.config.shared_store
        if shared is None:  # as the store says: PostgreSQL's is the store for several processes
            shared = bool(getattr(self.store, "shared_by_default", False))
        self.shared = shared and self.store is not None

    async def run(self, actor: Actor) -> None:
        """The task of `actor`, from STARTING to FINISHED."""
        key = actor.key
        keeper = Keeper(key, actor.module, self.store, observer=self.observer)
        durable = keeper.durable is not None  # read once: `_serve_calls` gets it
        started = False  # a state exists (made or loaded)
        error: Callable[[], RuntimeCallError] | None = None  # None: the shutdown's
        try:
            # Most actors wait for nothing and load nothing: no coroutine for either.
            if actor.predecessor is not None or not self.seats.seat_now(actor):
                await self._take_turn(actor)
            if durable:
                await keeper.start()
                keeper.fresh = True  # read for the first call: it need not ask again
            else:
                keeper.make()
            started = True
            if keeper.version is not None:
                self.loaded.add(key)  # a stored state read: used, for the retention
            if self.observer is not None:
                self.observer.actor_started(key)
            on_start = getattr(keeper.state, "on_start", None)
            if on_start is not None:
                await run_hook(on_start)
            if actor.phase is Phase.STARTING:  # not when retired meanwhile
                actor.move_to(Phase.SERVING)
            background = getattr(keeper.state, "start_background", None)
            if background is None:
                await self._serve(actor, keeper, durable=durable)
            else:
                await self._serve_with_background(actor, keeper, background, durable=durable)
        except CapacityError as exc:
            error = functools.partial(CapacityError, str(exc))
        except StateLoadError as exc:
            # The stored blob stays as it is; every call of the key says why, and a
            # client retrying cannot fill the log with tracebacks.
            self.counters.crashed += 1
            actor.stop_reason = StopReason.CRASHED
            error_id = _error_id()
            logger.error("%s (error id %s)", exc, error_id)
            problem = self._told(f"the stored state of {key} cannot be read", str(exc), error_id)
            error = functools.partial(StateUnreadableError, key, problem)
        except Exception as exc:
            # Anything escaping the per-call handling kills only this actor:
            # its pending calls fail, the next call to the key starts afresh
            # (a durable state loads again from the store).
            self.counters.crashed += 1
            actor.stop_reason = StopReason.CRASHED
            error_id = _error_id()
            logger.exception("actor for %s crashed (error id %s)", key, error_id)
            cause = sole_cause(exc)
            why = self._told("an unexpected error", f"{type(cause).__name__}: {cause}", error_id)
            error = functools.partial(ActorCrashedError, key, why)
        finally:
            try:
                actor.retire()  # a crash: the key's next call gets a successor
                self.counters.errors += actor.fail_pending(error or self._shutdown_error)
                if started and actor.phase is Phase.RETIRING:  # not stopped in its nursery
                    await self._stop_state(actor, keeper.state)
                if started and self.observer is not None:
                    self.observer.actor_stopped(key, actor.stop_reason)
                if started and self.watchers and actor.module.durable is None:
                    self.tell_watchers(actor.route)  # its state is gone: the next is fresh
            finally:
                # Even after a LifecycleError (a bug, which goes on to fail the runtime
                # loudly): the router forgets the actor, so that shutdown waits for it
                # no longer and neither does its successor.
                self.finished(actor)
            logger.debug("actor stopped for %s", key)

    async def _take_turn(self, actor: Actor) -> None:
        """Wait until `actor` may make its key's state: alone, and seated under the caps."""
        if actor.predecessor is not None:
            # Calls already queue in this actor's mailbox, in arrival order; the
            # state waits until the key's previous actor is FINISHED.
            await actor.predecessor.wait_finished()
            actor.predecessor = None
        await self.seats.seat(actor)

    def tell_watchers(self, route: Route) -> None:
        """Tell every watcher that the state of `route` may have changed."""
        for watcher in tuple(self.watchers):
            try:
                watcher.key_changed(route)
            except Exception:  # a watcher's bug must not reach the call or the actor
                logger.exception("a watcher failed on a change of %s", route)

    def _shutdown_error(self) -> RuntimeClosedError:
        return RuntimeClosedError(
            "the runtime shut down before this call completed "
            f"(shutdown_grace={self.config.shutdown_grace:g} s)"
        )

    async def _serve_with_background(
        self,
        actor: Actor,
        keeper: Keeper,
        start: Callable[[trio.Nursery], object],
        *,
        durable: bool,
    ) -> None:
        """Serve a state that runs tasks of its own, in a nursery its actor owns.

        The nursery is shielded from the runtime's cancellation at shutdown;
        only the actor's own scope inside it is cancelled. So however serving
        ends (drained, cancelled at shutdown, crashed) on_stop runs while the
        state's tasks still live and can wind them down in order; what is
        left is cancelled after it. If a task fails, the actor crashes.
        """
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as nursery:
                try:
                    with actor.cancellable():
                        await run_hook(functools.partial(start, nursery))
                        await self._serve(actor, keeper, durable=durable)
                finally:
                    await self._stop_state(actor, keeper.state)
                    nursery.cancel_scope.cancel()

    async def _stop_state(self, actor: Actor, state: object) -> None:
        """STOPPING: run the state's on_stop, unless a heavy thread still uses the state."""
        actor.move_to(Phase.STOPPING)
        on_stop = getattr(state, "on_stop", None)
        if on_stop is None:
            return
        if not await self._outwait_thread(actor):
            logger.error(
                "on_stop of %s skipped: a heavy handler's thread still used the state "
                "after stop_timeout (%g s)",
                actor.key,
                self.config.stop_timeout,
            )
            return
        # Shielded: on_stop releases resources (kills subprocesses, closes
        # files) and must run even when the actor was cancelled at shutdown.
        # Bounded, so a hook that hangs cannot hold shutdown forever.
        with trio.CancelScope(shield=True), trio.move_on_after(self.config.stop_timeout) as scope:
            try:
                await run_hook(on_stop)
            except Exception:
                logger.exception("on_stop of %s failed", actor.key)
        if scope.cancelled_caught:
            logger.error("on_stop of %s overran stop_timeout and was cancelled", actor.key)

    async def _outwait_thread(self, actor: Actor) -> bool:
        """Wait, up to stop_timeout, for a heavy thread the actor gave up on at shutdown.

        on_stop must not run while a thread still uses the state (invariant 1).
        Returns whether no thread does any more.
        """
        worker = actor.worker
        if worker is None:
            return True
        with trio.CancelScope(shield=True), trio.move_on_after(self.config.stop_timeout):
            await worker.finished.wait()
        return worker.finished.is_set()

    def _serve(self, actor: Actor, keeper: Keeper, *, durable: bool) -> Coroutine[Any, Any, None]:
        """Serve calls until the mailbox is closed and drained (the coroutine that does).

        A plain function that returns the serving coroutine, not a coroutine
        that awaits it: the actor's task resumes one coroutine less per call.
        """
        # Store I/O is not on this list: each store bounds its own operations
        # (SQLite's busy timeout, PostgreSQL's connect and TCP timeouts), and
        # arming the deadline around every write would cost every durable call.
        awaited = keeper.heal or actor.module.has_awaited_tools
        if self.timeout == math.inf or not awaited:
            return self._serve_calls(actor, keeper, None, durable)  # nothing to cancel
        return self._serve_with_deadline(actor, keeper, durable)

    async def _serve_with_deadline(self, actor: Actor, keeper: Keeper, durable: bool) -> None:
        """`_serve_calls` under the call timeout, started afresh after each timeout."""
        while True:
            # One deadline scope serves many calls: its deadline is moved per
            # call, which is far cheaper than a new cancel scope per call. Once
            # it fires it stays cancelled, so a timeout starts a fresh one.
            with trio.CancelScope() as deadline:
                await self._serve_calls(actor, keeper, deadline, durable)
                return
            await self._time_out(actor, keeper)

    async def _serve_calls(
        self,
        actor: Actor,
        keeper: Keeper,
        deadline: trio.CancelScope | None,
        durable: bool,
    ) -> None:
        timeout = self.timeout
        heal = keeper.heal
        revalidate = durable and self.shared
        while True:
            try:
                envelope = await actor.receive.receive()
            except trio.EndOfChannel:
                return  # retired (TTL, eviction, shutdown) and drained
            if envelope.abandoned:
                del envelope  # as below: nothing of a call outlives it
                actor.pending -= 1
                keeper.fresh = False  # the load was for this call; the next one asks again
                continue
            actor.current = envelope
            if envelope.observed:
                assert isinstance(envelope, ObservedEnvelope)
                envelope.started = time.perf_counter()
            tool = envelope.tool
            # Only code that awaits can be cancelled, so the deadline is armed
            # for async and heavy handlers and hooks; an inline sync handler
            # runs to completion (and its write is bounded by the store).
            armed = deadline is not None and (tool.is_async or tool.heavy or heal is not None)
            if armed:
                assert deadline is not None
                deadline.deadline = self.now() + timeout
            # Stale: a write failed or a call timed out; outdated: another process wrote
            # the key since this one loaded it. Either way the store is right.
            outdated = revalidate and not keeper.stale and await keeper.outdated()
            outcome: CallResult | None = None
            if keeper.stale or outdated:
                held = keeper.version
                outcome = await self._reload(keeper, envelope)  # an error: the store failed
                heal = keeper.heal
                if outcome is None and keeper.version != held and self.watchers:
                    self.tell_watchers(actor.route)  # changed elsewhere, or gone
            if outcome is None:
                if heal is not None:
                    await run_hook(heal)  # raising here is an actor crash: the resource is gone
                if tool.is_async or tool.heavy:
                    outcome = await self._run_call(actor, keeper, envelope)
                else:  # `_run_call`'s last line, inline: most handlers are sync, run right here
                    outcome = self._invoke_sync(keeper.state, envelope, _channels(envelope))
                if durable and not tool.read_only:
                    outcome = await self._write(actor, keeper, envelope, outcome)
                    heal = keeper.heal  # a conflict may have loaded the state again
            if armed:
                assert deadline is not None
                deadline.deadline = math.inf
            if outcome.is_error:
                self.counters.errors += 1
            envelope.reply(outcome)
            if self.watchers and not tool.read_only:
                self.tell_watchers(actor.route)
            # Drop the references before waiting again: an idle actor must not
            # keep its last call's arguments and result alive until its TTL.
            del envelope, tool, outcome
            actor.current = None
            actor.pending -= 1
            actor.idle_since = self.now()

    async def _reload(self, keeper: Keeper, envelope: Envelope) -> CallResult | None:
        """Load the state again before `envelope`'s call; None, or the call's error result
        when the store cannot be read. Then the actor lives on, still stale, so that a
        later call tries again: a store that is down for a while fails the calls that need
        it, each with the reason, rather than crash an actor per call.

        For `_RELOAD_RETRY_AFTER` seconds after a failure, calls get the same answer at
        once without trying: those queued behind a load that took long to fail (an
        unreachable server's connect timeout) must not wait that long each, in turn.
        """
        if keeper.unloadable is not None and self.now() < keeper.retry_at:
            return keeper.unloadable
        try:
            await keeper.start()
        except StoreError as exc:
            keeper.stale = True
            error_id = _error_id()
            logger.error("%s (error id %s)", exc, error_id)
            why = self._told("the store failed", str(exc), error_id)
            text = f"the state could not be loaded, so the call did not run: {why}; retry it"
            keeper.unloadable = CallResult.error(text).stamped(envelope.tool.service)
            keeper.retry_at = self.now() + _RELOAD_RETRY_AFTER
            return keeper.unloadable
        keeper.unloadable = None
        return None

    async def _run_call(self, actor: Actor, keeper: Keeper, envelope: Envelope) -> CallResult:
        """Run the call's handler on the key's state: awaited, in a worker thread, or inline."""
        tool = envelope.tool
        if tool.is_async:
            return await self._invoke(keeper.state, envelope)
        if tool.heavy:
            return await self._invoke_in_thread(actor, keeper.state, envelope)
        return self._invoke_sync(keeper.state, envelope, _channels(envelope))

    async def _write(
        self, actor: Actor, keeper: Keeper, envelope: Envelope, outcome: CallResult
    ) -> CallResult:
        """Store what the call changed before its reply goes out; the reply to send.

        Another writer's change (a second process that also believed it owned
        the key) makes the write fail without writing: the call runs again on
        the state as stored now, a few times at most. A write that fails
        otherwise is never acknowledged: the call gets an error result, and
        the state is loaded again before the next call.
        """
        service = envelope.tool.service
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                wrote = await keeper.save(heavy=envelope.tool.heavy)
            except VersionConflict as exc:
                self.counters.write_conflicts += 1
                if attempt == _WRITE_ATTEMPTS:
                    break  # the state stays stale: loaded again before the next call
                logger.warning("%s; loading it and running the call again", exc)
                await keeper.start()
                heal = keeper.heal
                if heal is not None:
                    await run_hook(heal)
                outcome = await self._run_call(actor, keeper, envelope)
                continue
            except StoreError as exc:
                self.counters.write_failures += 1
                error_id = _error_id()
                logger.error("%s (error id %s)", exc, error_id)
                why = self._told("the store failed", str(exc), error_id)
                text = f"the change was not saved, so it did not happen: {why}; retry the call"
                return CallResult.error(text).stamped(service)
            # Counted after the await, not with `+= await`: that would read the
            # counter before the save and lose the other actors' increments.
            self.counters.state_writes += wrote
            return outcome
        text = (
            f"the state of {actor.key} kept changing under this call (another process writes "
            "the same key), so its change was not saved; retry the call"
        )
        return CallResult.error(text).stamped(service)

    async def _time_out(self, actor: Actor, keeper: Keeper) -> None:
        """The deadline fired: fail the call that overran, if it is still unanswered.

        A heavy call's thread runs on: the key's turn lasts until it ends (see
        "Heavy handlers" in `actors._runtime`), so its next call never runs
        beside it. Only shutdown cancels that wait, and then `_stop_state`
        finds the thread in ``actor.worker``. A durable state the call may have
        changed half-way is loaded again before the next call: the store has
        what was replied.
        """
        envelope = actor.current
        actor.current = None
        if envelope is None or envelope.outcome is not None:
            return  # the call finished just as the deadline fired
        self.counters.timeouts += 1
        self.counters.errors += 1
        tool = envelope.tool
        envelope.reply(CallTimeoutError(tool.full_name, actor.key, self.timeout, heavy=tool.heavy))
        del envelope
        if keeper.durable is not None and not tool.read_only:
            keeper.stale = True
        if actor.worker is not None:
            await actor.worker.finished.wait()  # its result is dropped
            actor.worker = None
        actor.pending -= 1  # only now: until the thread ended, the actor was busy
        actor.idle_since = self.now()

    async def _invoke(self, state: object, envelope: Envelope) -> CallResult:
        """An async handler's call and result conversion, on the loop."""
        tool = envelope.tool
        try:
            value = await tool.invoke(
                state, envelope.context, envelope.arguments, *_channels(envelope)
            )
            return tool.result_of(value)
        except Exception as exc:
            return self._failure(tool, exc)

    async def _invoke_in_thread(
        self, actor: Actor, state: object, envelope: Envelope
    ) -> CallResult:
        """Run a heavy handler in a worker thread; the actor keeps the key's turn meanwhile.

        Cancelled (deadline or shutdown) once the thread has started, this
        leaves it in ``actor.worker``: whoever goes on must wait for it.
        """
        worker = _Worker(self.threads)
        name = f"heavy {envelope.tool.full_name} for {actor.key}"
        # The channels are made here, on the loop, for the thread to report and log through.
        work = functools.partial(self._invoke_sync, state, envelope, _channels(envelope))
        await worker.start(work, name)
        actor.worker = worker
        await worker.finished.wait()
        actor.worker = None
        assert worker.result is not None  # set before finished
        return worker.result.unwrap()

    def _invoke_sync(self, state: object, envelope: Envelope, channels: _Channels) -> CallResult:
        """A sync handler's call and result conversion: on the loop, or a heavy one's thread."""
        tool = envelope.tool
        try:
            if channels is _NO_CHANNELS:  # most tools: nothing to fill in
                value = tool.handler(state, **envelope.arguments)
            else:
                value = tool.invoke(state, envelope.context, envelope.arguments, *channels)
            return tool.result_of(value)
        except Exception as exc:
            return self._failure(tool, exc)

    def _failure(self, tool: Tool, exc: Exception) -> CallResult:
        """The error result of a handler that raised `exc`; call it where `exc` is being handled.

        A ToolError's text is the whole message: its author wrote it for the caller.
        Anything else is logged with its traceback under a fresh error id, and named in
        the result; with ``mask_errors`` the result gives only the id, since exception
        text can carry paths, SQL, secrets or another key's data (the log keeps them).
        """
        if isinstance(exc, ToolError):
            return CallResult.error(str(exc)).stamped(tool.service)
        # The id is logged masked or not, so an operator's search reads the same either way.
        error_id = _error_id()
        logger.exception("tool %s failed (error id %s)", tool.full_name, error_id)
        # None leaves masking to the host; a runtime in process masks nothing.
        if self.config.mask_errors:
            message = (
                f"tool {tool.full_name!r} failed with an unexpected error (error id {error_id}); "
                "the server's log has the details"
            )
        else:
            message = f"tool {tool.full_name!r} failed: {type(exc).__name__}: {exc}"
        return CallResult.error(message).stamped(tool.service)

    def _told(self, masked: str, details: str, error_id: str) -> str:
        """What a caller is told of a failure: its `details` (an exception's text), or, with
        ``mask_errors``, only `masked` and the id the log has the details under."""
        if self.config.mask_errors:
            return f"{masked} (error id {error_id}; the server's log has the details)"
        return details


def _error_id() -> str:
    """A short id an operator finds a failure's log line by, from what its caller was told."""
    return secrets.token_hex(6)


_Channels = tuple[Progress | None, Log | None, Ask | None]
_NO_CHANNELS: Final[_Channels] = (None, None, None)
"""A tool that takes none of them: its handler is called with its arguments alone."""


def _channels(envelope: Envelope) -> _Channels:
    """The call's reporter, log and asker, each when someone listens and the tool takes it.

    Reports and messages that come after the reply (a heavy thread past its
    deadline) are dropped.
    """
    signature = envelope.tool.signature
    if not signature.injects:
        return _NO_CHANNELS  # most tools: nothing to fill in, so no channel is made
    reporter = envelope.progress
    progress = (
        None
        if reporter is None or signature.progress_parameter is None
        else Progress(lambda report: None if envelope.outcome is not None else reporter(report))
    )
    hearer = envelope.log
    log = (
        None
        if hearer is None or signature.log_parameter is None
        else Log(lambda message: None if envelope.outcome is not None else hearer(message))
    )
    ask = None if signature.ask_parameter is None else Ask(envelope.ask)
    return progress, log, ask


def sole_cause(exc: Exception) -> Exception:
    """The one exception inside a nursery's group, or `exc` itself."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
