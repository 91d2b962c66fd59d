"""The runtime: a router and one trio actor per key.

The map
-------
* This module: `Runtime`, the router (prepare, route, mailbox: `run`,
  `submit_nowait`, ``_offer``, ``_start``), the TTL reaper, sessions
  (`Runtime.end_session`, `Runtime.hand_over`), the retention marks,
  statistics, shutdown (`Runtime.aclose`), and `open_runtime`.
* `actors._actor`: an actor's phases and their one table of transitions
  (`Phase`), the envelope a call travels in, and `ActorLoop`, every actor's
  task (its turn, its state, its calls, its stop).
* `actors._admission`: room under ``max_actors`` and
  ``max_actors_per_tenant``, fair eviction, and the `CapacityError` wording.
* `actors._target`: `Host`, the calling methods (``call``, ``call_tool``,
  ``prepare``, resources, prompts, completions) written once on top of `run`.

How a call travels
------------------
`Runtime.call` prepares the call in the caller's task (`prepare_call`:
resolve the tool, parse the context, validate the arguments, and compute the
actor key: the module plus the context projected on the module's scope). It
then puts an envelope into that actor's bounded mailbox (a trio memory
channel) and waits for the one reply.
The actor is a task in the runtime's nursery that takes one envelope at a
time, in the order they were accepted, runs the handler against the state it
alone holds, and replies. Bad input is refused before anything is sent, so it
never reaches an actor.

Why no call is lost, none is reordered, and no key has two states
-----------------------------------------------------------------
Trio is cooperative: code between two checkpoints runs without interruption,
and the router relies on that. The phases named below are `Phase`'s
(STARTING, SERVING, RETIRING, STOPPING, FINISHED); only a STARTING or
SERVING actor takes calls.

* A caller never waits to deliver (unless the mailbox is full). It takes the
  key's actor from the routing table if it takes calls, or registers a new
  one (STARTING), and puts its envelope in that actor's mailbox with no
  checkpoint in between. A key's calls therefore enter one FIFO in arrival
  order.
* An actor stops by *retiring*: it becomes RETIRING and its mailbox is
  closed in one synchronous step (`Actor.retire`). Closing a send channel
  never drops what it holds, so calls accepted before are still served. The
  reaper retires an actor only when it has no pending call and has been idle
  for its TTL; eviction retires only idle actors.
* A call for a key whose actor is RETIRING or STOPPING registers a successor
  at once and queues in the successor's mailbox. The successor stays
  STARTING, and makes the state only once its predecessor is FINISHED,
  ``on_stop`` included, so a key never has two live states; the runtime
  checks this every time a state is seated (``statistics().duplicate_actors``
  must stay zero). Waiting for room under ``max_actors`` happens in the same
  place, after the calls are already queued in order.
* A caller blocked on a full mailbox whose actor then crashes (or shuts down)
  is woken with ClosedResourceError; its envelope was never accepted, so it
  routes again. This is the one case where calls can change order: the
  crash failed the calls queued before them.

Cancellation
------------
A caller cancelled while its call waits in the mailbox withdraws it: the actor
skips it. A caller cancelled once its call has started does not stop it: the
handler runs to completion against the state (so state is never left
half-updated by a caller going away) and the reply is dropped. A handler that
overruns the per-call deadline is cancelled by the actor itself and its caller
gets CallTimeoutError; the key keeps being served. (A heavy handler's thread
cannot be cancelled: see below.)

Only the runtime cancels its actors. They run in one nursery inside a single
shielded scope, so cancelling the code around ``open_runtime`` does not cut
accepted calls short: shutdown retires every actor, lets accepted calls
finish for ``shutdown_grace`` and then cancels that nursery as a whole (each
actor still answers its calls and, STOPPING, runs ``on_stop``, shielded and
bounded by ``stop_timeout``).

Heavy handlers
--------------
A sync handler runs inline on its actor: the cheapest way to run it, but
nothing else runs on the event loop until it returns, not other keys, not
signal handling. A tool registered with ``heavy=True`` runs in a worker
thread instead, and its actor awaits the thread, so the loop keeps serving.
The invariants above still hold because the actor keeps the key's turn while
it waits: it takes the key's next call only once the thread has ended, so
the state is used by one thread at a time, call after call, in order.

A thread cannot be cancelled, and that shapes the two endings that cancel:

* The deadline. The caller gets CallTimeoutError at once, but the actor keeps
  waiting for the thread before it serves the key's next call, which queues
  meanwhile. Until the thread ends the call still counts as pending, so TTL
  and eviction leave the busy actor alone. The thread's result is dropped;
  what it did to the state stays, as for a caller that went away.
* Shutdown. Once ``shutdown_grace`` is over the actor stops waiting: the
  caller gets RuntimeClosedError and the runtime exits without the thread
  (trio's worker threads are daemon threads, so the process can exit too).
  The state is discarded with the actor; the thread alone still holds it,
  until it ends and drops it. ``on_stop`` never runs beside the thread: the
  actor waits up to ``stop_timeout`` for it, and if it still runs, skips
  ``on_stop`` and logs an error.

Threads are started with `trio.lowlevel.start_thread_soon`, not
`trio.to_thread.run_sync`: a cancelled ``run_sync`` cannot tell whether its
thread had started, and the actor must know whether a thread still uses the
state. How many run at once is bounded by a limiter of the runtime's own
(``heavy_threads``): each competes with the event loop for the GIL, and
trio's default limiter is shared with other threads (the stdio transport's).
A call waiting for a free thread is still within its deadline.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import heapq
import itertools
import logging
import math
from collections import OrderedDict
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from protocol import (
    ActorKey,
    CallError,
    CallResult,
    ToolContext,
)

from ._actor import ACTOR_TASK, Actor, ActorLoop, Counters, Envelope, ObservedEnvelope, Phase
from ._admission import Admission
from ._config import RuntimeConfig
from ._errors import (
    RuntimeCallError,
    RuntimeClosedError,
    SessionEndingError,
)
from ._observe import Observer, Observers, StopReason, outcome_of
from ._prepare import call_parts
from ._registry import Registry
from ._target import Host, Watcher
from .store import StoreError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping

    from protocol import Caller

    from ._client import Asker, LogMessage
    from ._module import Tool, ToolModule
    from ._prepare import PreparedCall, Route
    from ._progress import ProgressReport
    from .store import StateStore

__all__ = [
    "ActorInfo",
    "Runtime",
    "RuntimeStatistics",
    "Watcher",
    "open_runtime",
]

logger = logging.getLogger("actors")


@final
@attrs.frozen
class RuntimeStatistics:
    """A snapshot of the runtime's counters."""

    live_actors: int
    """Actors running now, in any phase but FINISHED."""
    started: int
    """Actors started so far."""
    expired: int
    """Actors stopped by their idle TTL."""
    evicted: int
    """Idle actors stopped to make room under ``max_actors``."""
    crashed: int
    """Actors that died unexpectedly (state factory, hook, or runtime fault)."""
    calls: int
    """Calls accepted into a mailbox."""
    errors: int
    """Accepted calls whose reply was an error (tool error, timeout, crash, shutdown)."""
    timeouts: int
    """Calls whose handler overran the deadline."""
    duplicate_actors: int
    """Times a key's state was created while another was live. Always zero unless broken."""
    state_writes: int = 0
    """Durable states written to the store after a call."""
    write_conflicts: int = 0
    """Writes refused because another writer had changed the key (the call ran again)."""
    write_failures: int = 0
    """Writes that failed; their calls got an error and the state was reloaded."""


@final
@attrs.frozen
class ActorInfo:
    """A snapshot of one live actor."""

    key: ActorKey
    """The key the actor owns."""
    last_used: float
    """trio.current_time() of the last call accepted for it."""
    pending: int
    """Calls accepted and not yet replied to (queued or running)."""
    accepting: bool
    """Whether it takes calls (STARTING or SERVING); False once it is retired."""


_Outcome = CallResult | RuntimeCallError
_MARK_INTERVAL = 900.0  # seconds between two markings of the stored states in use, at most


@final
class Runtime(Host):
    """Routes tool calls to per-key actors. Create one with `open_runtime`.

    A `CallTarget`: `Host` writes the calling methods on top of `run`.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        registry: Registry,
        config: RuntimeConfig,
        store: StateStore | None = None,
        observer: Observer | None = None,
    ) -> None:
        self._nursery = nursery
        self._registry = registry
        self._config = config
        self._store = store
        # Guarded, so that an observer's bug never reaches a call (see Observers).
        self._observer = (
            observer
            if observer is None or isinstance(observer, Observers)
            else Observers([observer])
        )
        # Sessions being ended (by how many end_session calls): their calls are refused.
        self._ending: collections.Counter[str] = collections.Counter()
        # The routing table: each key's newest actor, least recently used first.
        self._actors: OrderedDict[Route, Actor] = OrderedDict()
        self._running: set[Actor] = set()  # every actor task, routed or still stopping
        self._peak = 0  # most actors running since the tables were last rebuilt
        self._loaded: set[ActorKey] = set()  # stored states loaded since the last sweep
        self._counters = Counters()
        self._closing = False
        self._defaulted_tools: set[str] = set()  # tools called without a session so far
        self._watchers: list[Watcher] = []  # told of changes (resource subscriptions)
        # trio.current_time(), without the two calls it makes to reach the run's clock:
        # read twice per call. The clock is the run's for its whole life, as is the runtime.
        self._now = trio.lowlevel.current_clock().current_time
        # Room under the caps; it reads the tables through these two, which see them
        # even after `_compact_if_sparse` has rebuilt them.
        self._admission = Admission(
            config.max_actors,
            config.max_actors_per_tenant,
            self._counters,
            routed=lambda: self._actors.values(),
            running=lambda: self._running,
        )
        # Every actor's task; it shares the counters, watchers and loaded keys.
        self._loop = ActorLoop(
            config,
            store,
            self._observer,
            self._counters,
            self._watchers,
            self._admission,
            self._release,
            self._loaded,
            self._now,
        )
        # TTL bookkeeping: a heap of (when to look at an actor again, tie-breaker, actor),
        # read by one reaper task. Entries go stale when an actor is used; the
        # reaper then pushes the actor back at its new expiry (lazy deletion).
        self._expiries: list[tuple[float, int, Actor]] = []
        self._tie_breaker = itertools.count()
        self._reaper_wait = trio.CancelScope()

    # ---- calling (the caller's task) -----------------------------------------
    # `Host` writes `call`, `call_tool`, `prepare`, `read_resource`, `get_prompt` and
    # `complete` on top of `run`, and tells `_observer` of what `prepare` refuses.

    def _log_defaulted(self, tool: Tool, session: str) -> None:
        """Warn of the first call to `tool` without a session; later ones only at DEBUG.

        A host that never names sessions would otherwise get a warning per call.
        """
        if tool.full_name in self._defaulted_tools:
            logger.debug("call to %s named no session; using %r", tool.full_name, session)
            return
        self._defaulted_tools.add(tool.full_name)
        logger.warning(
            "call to %s named no session; using %r (lenient context policy); "
            "later calls to it without one are logged at DEBUG",
            tool.full_name,
            session,
        )

    # ---- changes --------------------------------------------------------------

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Tell `watcher` of every change of a key's state from now on; returns how to stop.

        A key changes when a call of a tool that is not read-only replies, when
        the actor of a module that is not durable stops (its state is gone),
        when its session is ended, and, with a shared store (`RuntimeConfig.shared_store`),
        when a call finds that another process changed it. Watchers are told synchronously, on the
        runtime's loop: they must not block.
        """
        self._watchers.append(watcher)

        def unwatch() -> None:
            with contextlib.suppress(ValueError):
                self._watchers.remove(watcher)

        return unwatch

    # The actors' tasks tell watchers of changed keys (`ActorLoop.tell_watchers`).

    def _tell_watchers_ended(self, session_id: str) -> None:
        for watcher in tuple(self._watchers):
            try:
                watcher.session_ended(session_id)
            except Exception:  # the session is ended already: every other watcher hears it
                logger.exception("a watcher failed on the end of session %r", session_id)

    def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: Asker | None = None,
    ) -> Coroutine[Any, Any, CallResult]:
        """Run a prepared call on its key's actor; raises as `call` does once the call is sent.

        `progress` hears what the tool reports (`actors.Progress`) and `log`
        what it logs (`actors.Log`), in order, on the runtime's loop; neither
        may block. `ask` carries the tool's questions to the client
        (`actors.Ask`); without one, a tool that asks gets CannotAskError.
        """
        # A plain function that returns the coroutine that sends (`_send`), which `call`
        # and `call_tool` reach with no PreparedCall (`_prepared_and_run`): no coroutine more.
        envelope = self._envelope(
            call.tool, call.context, call.arguments, call.meta, progress, log, ask
        )
        return self._send(envelope, call.route, call.session_defaulted)

    def _prepared_and_run(
        self, params: Mapping[str, Any], caller: Caller | None
    ) -> Coroutine[Any, Any, CallResult]:
        """`prepare` and `run` for a caller with no channels, without a `PreparedCall`: its
        parts go straight into the envelope. Raises what `prepare` does; returns what sends."""
        try:
            tool, context, arguments, route, defaulted, meta = call_parts(
                self._registry, params, self._config.policy, caller
            )
        except CallError as error:
            self._refused(params, error)
            raise
        envelope = self._envelope(tool, context, arguments, meta, None, None, None)
        return self._send(envelope, route, defaulted)

    async def _send(self, envelope: Envelope, route: Route, defaulted: bool) -> CallResult:
        """Put `envelope` in `route`'s actor's mailbox and wait for its one reply.

        One coroutine frame from here to the reply: this is every call's hot path.
        """
        if defaulted:
            self._log_defaulted(envelope.tool, envelope.context.session_id)
        while (full := self._offer(route, envelope)) is not None:
            if await self._send_when_room(full, envelope):
                self._counters.calls += 1
                break
        # Always None with trio's channels (a caller let in from a full mailbox runs
        # again before the actor can take its call); checked, since waiting for a reply
        # that came already would never end.
        if envelope.outcome is None:
            envelope.waiter = trio.lowlevel.current_task()
            # Cancellable: a cancelled caller withdraws the call (`cancelled`).
            await trio.lowlevel.wait_task_rescheduled(envelope.cancelled)
        outcome = envelope.outcome
        if isinstance(outcome, RuntimeCallError):
            raise outcome
        assert outcome is not None  # set by `reply` before it wakes the caller
        return outcome

    def submit_nowait(
        self, call: PreparedCall, on_reply: Callable[[CallResult | RuntimeCallError], None]
    ) -> Callable[[], None] | None:
        """Accept `call` without waiting, for a caller outside trio; None if its mailbox is full.

        `on_reply` is called once, from the actor, with the call's result or
        runtime error. The function returned withdraws the call (its caller went
        away): a call not started yet is skipped, a started one runs to
        completion and its reply is dropped. With a full mailbox nothing is
        accepted: wait for room with `run`. Raises RuntimeClosedError and
        SessionEndingError as `run` does.
        """
        if call.session_defaulted:
            self._log_defaulted(call.tool, call.context.session_id)
        envelope = self._envelope(
            call.tool, call.context, call.arguments, call.meta, None, None, None, on_reply
        )
        full = self._offer(call.route, envelope)
        if full is not None:
            full.pending -= 1  # not accepted, and nobody waits to send it
            return None
        return envelope.withdraw

    def _envelope(
        self,
        tool: Tool,
        context: ToolContext,
        arguments: dict[str, Any],
        meta: Mapping[str, Any] | None,
        progress: Callable[[ProgressReport], None] | None,
        log: Callable[[LogMessage], None] | None,
        ask: Asker | None,
        on_reply: Callable[[_Outcome], None] | None = None,
    ) -> Envelope:
        """The envelope a call travels in: an observed one when someone observes."""
        if self._observer is None:
            return Envelope(tool, context, arguments, progress, log, ask, on_reply)
        return ObservedEnvelope(
            tool,
            context,
            arguments,
            on_reply=on_reply,
            progress=progress,
            log=log,
            ask=ask,
            observer=self._observer,
            meta=meta,
        )

    def _offer(self, route: Route, envelope: Envelope) -> Actor | None:
        """Put `envelope` in `route`'s mailbox now; the actor, if its full mailbox refused it.

        Everything here is synchronous: the actor found accepting is still
        accepting when the envelope lands, so a key's calls enter its mailbox, a
        FIFO, in arrival order. A refused envelope counts as pending on the
        actor it waits for.
        """
        context = envelope.context
        if self._closing:
            msg = "the runtime is shutting down and takes no new calls"
            raise self._refusal(envelope.tool, RuntimeClosedError(msg))
        if self._ending and self._ending[context.session_id]:
            msg = f"session {context.session_id!r} is being ended; retry once it is"
            raise self._refusal(envelope.tool, SessionEndingError(msg))
        actor = self._actors.get(route)
        if actor is None or not actor.phase.accepting:
            actor = self._start(route, envelope.tool.module, actor, context)
        else:
            self._actors.move_to_end(route)
            actor.last_used = self._now()
        actor.pending += 1
        try:
            actor.send.send_nowait(envelope)
        except trio.WouldBlock:
            return actor
        self._counters.calls += 1
        return None

    def _refusal(self, tool: Tool, error: RuntimeCallError) -> RuntimeCallError:
        """`error`, which refuses a call of `tool` at the door, once the observer has been told."""
        if self._observer is not None:
            self._observer.call_refused(tool.full_name, outcome_of(error))
        return error

    @staticmethod
    async def _send_when_room(actor: Actor, envelope: Envelope) -> bool:
        """Backpressure: wait for room in a full mailbox; False if the actor stopped meanwhile."""
        try:
            await actor.send.send(envelope)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            actor.pending -= 1
            return False
        except BaseException:
            # Cancelled while waiting for room: trio's send is atomic with
            # respect to cancellation, so the call was never accepted.
            actor.pending -= 1
            raise
        return True

    def _start(
        self,
        route: Route,
        module: ToolModule[Any],
        predecessor: Actor | None,
        context: ToolContext,
    ) -> Actor:
        """Route `route` to a new actor now, as the most recently used; its task sets up the
        state when it may. `context` is the first call's: its key's, if the scope keeps it all.
        """
        name, session, assistant, thread = route
        if (context.session_id, context.assistant_id, context.thread_id) != route[1:]:
            context = ToolContext(session, assistant, thread)  # projected on the module's scope
        key = ActorKey(name, context)
        # Not open_memory_channel[Envelope](...): the subscripted form goes
        # through typing's generic alias and costs more than the rest of _start.
        send: trio.MemorySendChannel[Envelope]
        receive: trio.MemoryReceiveChannel[Envelope]
        send, receive = trio.open_memory_channel(self._config.mailbox_size)
        now = self._now()
        actor = Actor(
            key=key,
            route=route,
            module=module,
            ttl=self._config.ttl if module.ttl is None else module.ttl,
            send=send,
            receive=receive,
            last_used=now,
            idle_since=now,
            predecessor=predecessor,
        )
        self._actors[route] = actor  # a stopping predecessor keeps running off the table
        if predecessor is not None:
            self._actors.move_to_end(route)  # replaced in place: a new key lands last anyway
        self._running.add(actor)
        if len(self._running) > self._peak:
            self._peak = len(self._running)
        self._counters.started += 1
        self._expire_at(actor, now + actor.ttl)
        # Named here: trio would work out the same name from the method on every start.
        self._nursery.start_soon(self._loop.run, actor, name=ACTOR_TASK)
        return actor

    # ---- TTL (the reaper task) --------------------------------------------

    def _expire_at(self, actor: Actor, when: float) -> None:
        heapq.heappush(self._expiries, (when, next(self._tie_breaker), actor))
        if when < self._reaper_wait.deadline:
            self._reaper_wait.deadline = when  # wake the reaper earlier

    async def _reap(self) -> None:
        """Stop actors whose idle time reached their TTL; runs for the runtime's life."""
        while True:
            now = self._now()
            while self._expiries and self._expiries[0][0] <= now:
                _, _, actor = heapq.heappop(self._expiries)
                self._review(actor, now)
            next_look = self._expiries[0][0] if self._expiries else math.inf
            with trio.CancelScope(deadline=next_look) as self._reaper_wait:
                await trio.sleep_forever()

    def _review(self, actor: Actor, now: float) -> None:
        """Expire `actor` if it has been idle for its TTL, else look again later."""
        if not actor.phase.accepting:
            return  # already retiring or stopping: its heap entry just goes away
        if actor.pending:
            self._expire_at(actor, now + actor.ttl)  # busy actors never expire
            return
        expiry = actor.idle_since + actor.ttl
        if expiry > now:
            self._expire_at(actor, expiry)
            return
        self._counters.expired += 1
        logger.debug("actor for %s idle for %g s; stopping", actor.key, actor.ttl)
        actor.stop_reason = StopReason.EXPIRED
        actor.retire()

    # ---- an actor's end (its task, `ActorLoop.run`, calls this) ----------------

    def _release(self, actor: Actor) -> None:
        """Forget an actor whose task is done, free its seat, and make it FINISHED."""
        self._admission.release(actor)
        if self._actors.get(actor.route) is actor:  # not when a successor took its place
            del self._actors[actor.route]
        self._running.discard(actor)
        actor.finish()  # wakes its successor, and whoever waits for room
        self._compact_if_sparse()

    def _compact_if_sparse(self) -> None:
        """Rebuild the tables once most of their actors are gone.

        Python's dicts and sets never give back capacity, and the expiry heap
        keeps the entries of actors that finished early (evicted, crashed)
        until their time comes; without this, memory freed by TTL expiry and
        eviction would stay with the runtime. Rebuilding only after shrinking
        to a quarter keeps the cost amortized O(1) per actor.
        """
        running = len(self._running)
        if running * 4 >= self._peak and len(self._expiries) <= 4 * running + 64:
            return
        self._actors = OrderedDict(self._actors)
        self._running = set(self._running)
        self._admission.compact()
        self._expiries = [entry for entry in self._expiries if entry[2].phase is not Phase.FINISHED]
        heapq.heapify(self._expiries)
        self._peak = running

    # ---- sessions and the store ---------------------------------------------

    @property
    def store(self) -> StateStore | None:
        """Where durable modules' state is kept; ``None`` when it lives in memory only."""
        return self._store

    async def hand_over(self, leaving: Callable[[str], bool]) -> int:
        """Stop the actors of every session `leaving` picks; their stored state stays.

        For a session whose calls will now reach another runtime (a shard of a
        cluster after a change of membership): each actor answers what it
        already accepted, then stops, so once this returns no state of those
        sessions is live here and their next owner can load what was stored.
        The caller must stop sending their calls first; one that arrives
        meanwhile would start a new actor. Returns how many actors stopped.
        """
        leavers = [a for a in self._running if leaving(a.key.context.session_id)]
        await self._stop_actors(leavers, StopReason.HANDED_OVER)
        return len(leavers)

    @staticmethod
    async def _stop_actors(actors: list[Actor], reason: StopReason) -> None:
        """Retire `actors` (each answers what it already accepted, then stops); wait for them."""
        for actor in actors:
            if actor.phase.accepting:
                actor.stop_reason = reason
                actor.retire()
        for actor in actors:
            await actor.wait_finished()

    async def end_session(self, session_id: str) -> int:
        """End a session: stop its actors in every module, delete its stored state.

        Calls for the session that arrive meanwhile get SessionEndingError;
        afterwards the session starts afresh. The workspace's ``on_stop``
        kills the session's processes and deletes its directory. Returns how
        many stored keys were deleted. Raises StoreError if the store fails
        (the actors are stopped by then).
        """
        self._ending[session_id] += 1
        try:
            doomed = [a for a in self._running if a.key.context.session_id == session_id]
            await self._stop_actors(doomed, StopReason.SESSION_ENDED)
            deleted = 0 if self._store is None else await self._store.delete_session(session_id)
            self._tell_watchers_ended(session_id)
            return deleted
        finally:
            self._ending[session_id] -= 1
            if not self._ending[session_id]:
                del self._ending[session_id]

    async def _keep_used(self, retention: float | None) -> None:
        """Mark the stored states in use as used, and sweep those unused for `retention`.

        Every `_MARK_INTERVAL` at most (a quarter of the retention, if that is
        shorter), the keys loaded since the last time and every key an actor
        holds now are marked as used, in one statement, and then, with a
        retention, what was neither written nor used for that long is deleted.
        So a key read every day is never swept, nor one an actor here holds;
        and since every runtime on the store marks its own keys as often, nor
        one another process serves, as long as the retention is longer than
        twice the interval (the command line's is given in days). If marking
        fails, nothing is swept that round.
        """
        assert self._store is not None
        interval = _MARK_INTERVAL if retention is None else min(retention / 4, _MARK_INTERVAL)
        while True:
            live = {actor.key for actor in self._running if actor.holds_state}
            used = self._loaded | live
            self._loaded.clear()  # in place: the actor loop adds to this set
            try:
                if used:
                    await self._store.touch(used)
                deleted = 0 if retention is None else await self._store.sweep(retention)
            except StoreError as exc:
                self._loaded |= used  # marked again next round
                logger.error("marking stored state as used, or sweeping it, failed: %s", exc)
            else:
                if deleted:
                    logger.info(
                        "retention: deleted %d state(s) unused for %g s", deleted, retention
                    )
            await trio.sleep(interval)

    # ---- introspection and shutdown ------------------------------------------

    def statistics(self) -> RuntimeStatistics:
        """A snapshot of the counters and the live actor count."""
        c = self._counters
        return RuntimeStatistics(
            live_actors=len(self._running),
            started=c.started,
            expired=c.expired,
            evicted=c.evicted,
            crashed=c.crashed,
            calls=c.calls,
            errors=c.errors,
            timeouts=c.timeouts,
            duplicate_actors=c.duplicate_actors,
            state_writes=c.state_writes,
            write_conflicts=c.write_conflicts,
            write_failures=c.write_failures,
        )

    def actors(self) -> tuple[ActorInfo, ...]:
        """A snapshot of each key's current actor, least recently used first."""
        return tuple(
            ActorInfo(actor.key, actor.last_used, actor.pending, actor.phase.accepting)
            for actor in self._actors.values()
        )

    async def aclose(self) -> None:
        """Stop taking calls, let accepted ones finish within the grace period, stop every actor.

        Called by `open_runtime` on exit; safe to call more than once.
        """
        self._closing = True
        for actor in list(self._running):
            actor.retire()
        with trio.move_on_after(self._config.shutdown_grace):
            for actor in list(self._running):
                await actor.wait_finished()
        # The grace is over: cancel what still runs (each actor's finally
        # still answers its calls and runs on_stop, shielded).
        for actor in list(self._running):
            actor.cancel()
        self._nursery.cancel_scope.cancel()
        for actor in list(self._running):
            await actor.wait_finished()


async def _host_actors(
    task_status: trio.TaskStatus[tuple[trio.Nursery, trio.CancelScope]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Hold the nursery every actor runs in, until the runtime cancels it.

    Shielded, once for all actors: only the runtime cancels its actors (in
    aclose, once shutdown_grace is over), so cancelling the code around
    open_runtime does not cut accepted calls short.
    """
    with trio.CancelScope(shield=True) as host:
        async with trio.open_nursery() as actors:
            task_status.started((actors, host))
            await trio.sleep_forever()


async def _run_in(scope: trio.CancelScope, task: Callable[[], Awaitable[None]]) -> None:
    with scope:
        await task()


@asynccontextmanager
async def open_runtime(
    modules: Iterable[ToolModule[Any]],
    config: RuntimeConfig | None = None,
    *,
    store: StateStore | None = None,
    observer: Observer | None = None,
) -> AsyncIterator[Runtime]:
    """Open a runtime serving `modules`; every actor lives inside this block.

    With a `store` (see `actors.store.open_store`), durable modules load their
    state from it and write it after every call that may change it; without
    one, all state lives in memory and goes with its actor. The store must
    stay open for the whole block. An `observer` (`actors.Observer`) is told
    what happens to actors, calls and stored states (``actors.telemetry`` has
    metrics and traces); without one, nothing is measured.

    On exit (normal, error or cancellation) the runtime stops taking calls,
    lets accepted ones finish for ``config.shutdown_grace`` seconds, cancels
    the rest (their callers get RuntimeClosedError) and runs every state's
    ``on_stop`` hook before the block ends.
    """
    registry = Registry(modules)
    config = config or RuntimeConfig()
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        actors, host = await nursery.start(_host_actors)
        runtime = Runtime(actors, registry, config, store, observer)
        reaper, sweeper = trio.CancelScope(), trio.CancelScope()
        nursery.start_soon(_run_in, reaper, runtime._reap, name="actors reaper")
        if store is not None:
            keep = functools.partial(runtime._keep_used, config.state_retention)
            nursery.start_soon(_run_in, sweeper, keep, name="actors retention")
        try:
            yield runtime
        except BaseException as exc:
            # Re-raised below, after the nursery: raised inside it, the caller's
            # own exception would reach them wrapped in an ExceptionGroup. Actors
            # never raise into the nursery, so the body is the only source.
            body_error = exc
        finally:
            # Shielded so that a cancelled block still shuts down in order;
            # aclose is bounded by shutdown_grace plus the stop timeouts.
            with trio.CancelScope(shield=True):
                await runtime.aclose()
            reaper.cancel()
            sweeper.cancel()
            host.cancel()
    if body_error is not None:
        raise body_error
