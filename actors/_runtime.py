"""The runtime: a router and one trio actor per key.

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
and the router relies on that.

* A caller never waits to deliver (unless the mailbox is full). It takes the
  key's accepting actor from the routing table, or registers a new one, and
  puts its envelope in that actor's mailbox with no checkpoint in between. A
  key's calls therefore enter one FIFO in arrival order.
* An actor stops by *retiring*: it stops accepting and its mailbox is closed
  in one synchronous step. Closing a send channel never drops what it holds,
  so calls accepted before are still served. The reaper retires an actor only
  when it has no pending call and has been idle for its TTL; eviction retires
  only idle actors.
* A call for a key whose actor is stopping registers a successor at once and
  queues in the successor's mailbox. The successor's task creates the state
  only after its predecessor has finished, ``on_stop`` included, so a key
  never has two live states; the runtime checks this every time a state is
  created (``statistics().duplicate_actors`` must stay zero). Waiting for
  room under ``max_actors`` happens in the same place, after the calls are
  already queued in order.
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
accepted calls short: shutdown lets them finish for ``shutdown_grace`` and
then cancels that nursery as a whole (each actor still answers its calls and
runs ``on_stop``, shielded and bounded by ``stop_timeout``).

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
import time
from collections import OrderedDict
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, TypeVar, final

import attrs
import trio

from protocol import (
    DEFAULT_POLICY,
    ActorKey,
    CallResult,
    ContextPolicy,
    PromptResult,
    ProtocolError,
    ResourceResult,
    ToolContext,
    call_name,
    tenant_of,
)

from ._client import Ask, Log
from ._durable import StateLoadError
from ._errors import (
    ActorCrashedError,
    CallTimeoutError,
    CapacityError,
    RuntimeCallError,
    RuntimeClosedError,
    SessionEndingError,
    StateUnreadableError,
    ToolError,
)
from ._keeper import Keeper
from ._module import Tool, ToolModule, run_hook
from ._observe import OK, TOOL_ERROR, CallRecord, Observer, Observers, StopReason, outcome_of
from ._prepare import (
    PreparedCall,
    Route,
    prepare_call,
    prepare_completion,
    prepare_prompt,
    prepare_read,
)
from ._progress import Progress, ProgressReport
from ._registry import Registry
from ._resources import Completions, completions_of, handler_data
from .store import StoreError, VersionConflict

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping

    from outcome import Outcome

    from protocol import Caller

    from ._client import Asker, LogMessage
    from .store import StateStore

__all__ = [
    "ActorInfo",
    "Runtime",
    "RuntimeConfig",
    "RuntimeStatistics",
    "Watcher",
    "open_runtime",
]

logger = logging.getLogger("actors")

_Prepared = TypeVar("_Prepared")
"""What a prepare function returns: a PreparedCall, or Completions answered without one."""


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not value > 0:
        msg = f"{attribute.name} must be positive, got {value!r}"
        raise ValueError(msg)


def _not_negative(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value >= 0:
        msg = f"{attribute.name} must be zero or more, got {value!r}"
        raise ValueError(msg)


@final
@attrs.frozen
class RuntimeConfig:
    """How the runtime routes, bounds and stops actors."""

    ttl: float = attrs.field(default=3600.0, validator=_positive)
    """Seconds an actor may sit idle before it stops and its state is released."""
    mailbox_size: int = attrs.field(default=64, validator=_positive)
    """Calls an actor's mailbox holds before callers wait (backpressure)."""
    max_actors: int | None = attrs.field(default=None, validator=_positive)
    """Cap on live actors; at the cap an idle actor is evicted (see `tenant_of`)."""
    max_actors_per_tenant: int | None = attrs.field(default=None, validator=_positive)
    """Cap on one tenant's live actors: at it, the tenant's own least recently used idle
    actor is evicted, so that one tenant cannot take every slot of ``max_actors``."""
    call_timeout: float | None = attrs.field(default=60.0, validator=_positive)
    """Deadline for one handler run, in seconds; ``None`` for none."""
    shutdown_grace: float = attrs.field(default=10.0, validator=_not_negative)
    """On shutdown, how long accepted calls may keep running before they are cancelled."""
    stop_timeout: float = attrs.field(default=10.0, validator=_positive)
    """How long one state's ``on_stop`` hook may take."""
    heavy_threads: int = attrs.field(default=2, validator=_positive)
    """How many heavy sync handlers may run at once, each in a worker thread; more wait.

    Each one competes with the event loop for the GIL, so few is better for the loop."""
    policy: ContextPolicy = DEFAULT_POLICY
    """How context fields are checked (lenient default session, or strict)."""
    state_retention: float | None = attrs.field(default=30 * 24 * 3600.0, validator=_positive)
    """Stored state neither written nor used (loaded, or held by a live actor) for this many
    seconds is deleted (with a store); None keeps it."""


@final
@attrs.frozen
class RuntimeStatistics:
    """A snapshot of the runtime's counters."""

    live_actors: int
    """Actors running now (serving or stopping)."""
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
    """False once the actor is stopping."""


@attrs.define(eq=False)
class _Counters:
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


_Outcome = CallResult | RuntimeCallError
_ACTOR_TASK: Final = "actors._runtime.Runtime._run_actor"  # the name of every actor's task
_WRITE_ATTEMPTS = 3  # runs of one call whose write met another writer's change
_MARK_INTERVAL = 900.0  # seconds between two markings of the stored states in use, at most


@attrs.define(eq=False)
class _Envelope:
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
    observed: ClassVar[bool] = False  # an `_ObservedEnvelope`: tell the observer its times

    def reply(self, outcome: _Outcome) -> None:
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
class _ObservedEnvelope(_Envelope):
    """An envelope of a runtime with an observer: it keeps its times and reports its reply.

    A subclass, so that an unobserved runtime's envelopes carry none of it.
    """

    observer: Observer = attrs.field(kw_only=True)
    meta: Mapping[str, Any] | None = attrs.field(kw_only=True)
    accepted: float = attrs.field(kw_only=True, factory=time.perf_counter)
    started: float | None = attrs.field(kw_only=True, default=None)
    observed: ClassVar[bool] = True

    def reply(self, outcome: _Outcome) -> None:
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
class _Actor:
    """The task that owns one key's state, and the router's handle on it."""

    key: ActorKey
    route: Route
    module: ToolModule[Any]
    ttl: float
    send: trio.MemorySendChannel[_Envelope]
    receive: trio.MemoryReceiveChannel[_Envelope]
    last_used: float
    idle_since: float
    predecessor: _Actor | None = None  # the key's previous actor, maybe still stopping
    pending: int = 0
    accepting: bool = True
    holds_state: bool = False  # counted against max_actors, from room found to finish
    tenant: str | None = None  # whose share the state counts against, under a cap
    stopped: bool = False  # on_stop has run
    current: _Envelope | None = None
    worker: _Worker | None = None  # the thread of a heavy call, from its start to its end
    cancelled: bool = False  # the runtime cancelled it (shutdown_grace is over)
    stop_reason: StopReason = StopReason.SHUTDOWN  # set by whoever retires it otherwise
    scope: trio.CancelScope | None = None  # a background state's cancellable part, if any
    finished: bool = False
    # Made only when someone waits: most actors never are, and an Event
    # would add about 280 bytes to every idle actor.
    _finish_event: trio.Event | None = None

    async def wait_finished(self) -> None:
        """Wait until the actor has finished (its on_stop included)."""
        if self.finished:
            await trio.lowlevel.checkpoint()
            return
        if self._finish_event is None:
            self._finish_event = trio.Event()
        await self._finish_event.wait()

    def mark_finished(self) -> None:
        """Record that the actor has finished and wake whoever waits."""
        self.finished = True
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
        """Take no more calls; the actor serves what its mailbox holds, then stops.

        Synchronous on purpose: nothing can be sent between the decision and
        the close, and closing a send channel never drops what it buffered.
        """
        self.accepting = False
        self.send.close()

    def fail_pending(self, error: Callable[[], RuntimeCallError]) -> int:
        """Reply `error()` to the running call and every queued one; return how many."""
        failed = 0
        if self.current is not None and self.current.outcome is None:
            self.current.reply(error())
            failed += 1
        self.current = None
        self.send.close()  # callers blocked on a full mailbox route again (see _route)
        while True:
            try:
                envelope = self.receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return failed
            if not envelope.abandoned:
                envelope.reply(error())
                failed += 1


@final
class Runtime:
    """Routes tool calls to per-key actors. Create one with `open_runtime`."""

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
        self._actors: OrderedDict[Route, _Actor] = OrderedDict()
        self._running: set[_Actor] = set()  # every actor task, routed or still stopping
        self._holding = 0  # actors holding a state, counted against max_actors
        self._held: dict[str, int] = {}  # tenant -> actors holding a state, under a cap
        self._peak = 0  # most actors running since the tables were last rebuilt
        # Keys with a state, kept by the actor tasks; by route, which is hashed per call
        # anyway, where an ActorKey would be hashed once more per activation.
        self._live_routes: set[Route] = set()
        self._capped = config.max_actors is not None or config.max_actors_per_tenant is not None
        self._loaded: set[ActorKey] = set()  # stored states loaded since the last sweep
        self._marks_use = store is not None
        self._counters = _Counters()
        self._closing = False
        self._defaulted_tools: set[str] = set()  # tools called without a session so far
        self._watchers: list[Watcher] = []  # told of changes (resource subscriptions)
        self._timeout = math.inf if config.call_timeout is None else config.call_timeout
        # trio.current_time(), without the two calls it makes to reach the run's clock:
        # read twice per call. The clock is the run's for its whole life, as is the runtime.
        self._now = trio.lowlevel.current_clock().current_time
        self._threads = trio.CapacityLimiter(config.heavy_threads)  # see "Heavy handlers"
        # TTL bookkeeping: a heap of (when to look at an actor again, tie-breaker, actor),
        # read by one reaper task. Entries go stale when an actor is used; the
        # reaper then pushes the actor back at its new expiry (lazy deletion).
        self._expiries: list[tuple[float, int, _Actor]] = []
        self._tie_breaker = itertools.count()
        self._reaper_wait = trio.CancelScope()

    @property
    def config(self) -> RuntimeConfig:
        """The configuration the runtime was opened with."""
        return self._config

    @property
    def registry(self) -> Registry:
        """The enabled modules and tools."""
        return self._registry

    # ---- calling (the caller's task) -----------------------------------------

    async def call(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> CallResult:
        """Run one tools/call-shaped call: ``{"name", "arguments", "_meta"}``.

        Returns the tool's result (``is_error`` set for a tool error). Raises
        UnknownToolError, ProtocolError (bad context or call shape, a session
        outside `caller`'s tenant) or ArgumentsError before anything is sent
        (see `prepare`), and CallTimeoutError, ActorCrashedError,
        RuntimeClosedError or CapacityError for a call the runtime could not
        complete. See the module docstring for cancellation.
        """
        return await self.run(self.prepare(params, caller=caller))

    def prepare(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> PreparedCall:
        """Check a call and work out its actor without sending it (`actors.prepare_call`).

        `caller` is who sent the call as a transport established it
        (`protocol.Caller`): its default session and tenant apply. ``None``, an
        embedding program's own call, takes the call's context as given.
        """
        try:
            return prepare_call(self._registry, params, self._config.policy, caller)
        except (ProtocolError, RuntimeCallError) as error:
            self._refused(params, error)
            raise

    def _checked(self, prepare: Callable[..., _Prepared], *arguments: Any) -> _Prepared:
        """``prepare(registry, *arguments)``; what it refuses is told to the observer first."""
        try:
            return prepare(self._registry, *arguments)
        except (ProtocolError, RuntimeCallError) as error:
            self._refused({}, error)
            raise

    def _refused(self, params: Mapping[str, Any], error: ProtocolError | RuntimeCallError) -> None:
        """Tell the observer, if any, that `params` was refused with `error`."""
        if self._observer is not None:
            self._observer.call_refused(self._resolved_name(params), outcome_of(error))

    def _resolved_name(self, params: Mapping[str, Any]) -> str | None:
        """The full name of the tool `params` names; None when it names none (never a label)."""
        try:
            return self._registry.resolve(call_name(params)).full_name
        except (ProtocolError, RuntimeCallError):
            return None

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

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> CallResult:
        """`call` with the parts given separately."""
        params = {"name": name, "arguments": arguments, "_meta": meta}
        # Not through `call`: a coroutine less to resume at every wake-up.
        return await self.run(self.prepare(params, caller=caller))

    # ---- resources, prompts, completions (the caller's task) -------------------

    async def read_resource(
        self,
        uri: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> ResourceResult:
        """Read the resource `uri` for the context in `meta` (``sessionId``…) or `caller`'s.

        The handler runs on the actor of that context's key, in its turn.
        Raises UnknownResourceError, ProtocolError and ArgumentsError before
        anything is sent, HandlerError if the handler failed, and the runtime
        errors `call` raises.
        """
        call = self._checked(prepare_read, uri, meta, self._config.policy, caller)
        return ResourceResult.from_wire(handler_data(await self.run(call)))

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> PromptResult:
        """Build the prompt listed as `name` with `arguments`, for the context in `meta`.

        Raises UnknownPromptError, ProtocolError and ArgumentsError before
        anything is sent, HandlerError if the handler failed, and the runtime
        errors `call` raises.
        """
        call = self._checked(prepare_prompt, name, arguments, meta, self._config.policy, caller)
        return PromptResult.from_wire(handler_data(await self.run(call)))

    async def complete(
        self,
        target: str,
        argument: str,
        value: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> Completions:
        """Suggest values for `argument` of the prompt or resource template `target`.

        `target` is a listed prompt name, or a URI template as listed; `value`
        is what was typed so far. A declared completion runs on the actor of
        the context's key; an argument whose type lists its values (a
        ``Literal``, an Enum) is completed from them; any other gets none.
        Raises UnknownPromptError or UnknownResourceError for an unknown
        target, and as `get_prompt` does.
        """
        policy = self._config.policy
        call = self._checked(prepare_completion, target, argument, value, meta, policy, caller)
        if isinstance(call, Completions):
            return call
        return completions_of(await self.run(call))

    # ---- changes --------------------------------------------------------------

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Tell `watcher` of every change of a key's state from now on; returns how to stop.

        A key changes when a call of a tool that is not read-only replies, when
        the actor of a module that is not durable stops (its state is gone),
        and when its session is ended. Watchers are told synchronously, on the
        runtime's loop: they must not block.
        """
        self._watchers.append(watcher)

        def unwatch() -> None:
            with contextlib.suppress(ValueError):
                self._watchers.remove(watcher)

        return unwatch

    def _tell_watchers(self, route: Route) -> None:
        for watcher in tuple(self._watchers):
            try:
                watcher.key_changed(route)
            except Exception:  # a watcher's bug must not reach the call or the actor
                logger.exception("a watcher failed on a change of %s", route)

    def _tell_watchers_ended(self, session_id: str) -> None:
        for watcher in tuple(self._watchers):
            try:
                watcher.session_ended(session_id)
            except Exception:  # the session is ended already: every other watcher hears it
                logger.exception("a watcher failed on the end of session %r", session_id)

    async def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: Asker | None = None,
    ) -> CallResult:
        """Run a prepared call on its key's actor; raises as `call` does once the call is sent.

        `progress` hears what the tool reports (`actors.Progress`) and `log`
        what it logs (`actors.Log`), in order, on the runtime's loop; neither
        may block. `ask` carries the tool's questions to the client
        (`actors.Ask`); without one, a tool that asks gets CannotAskError.
        """
        # One coroutine frame from here to the reply: this is every call's hot path.
        if call.session_defaulted:
            self._log_defaulted(call.tool, call.context.session_id)
        envelope = self._envelope(call, progress, log, ask)
        while (full := self._offer(call, envelope)) is not None:
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
        envelope = self._envelope(call, None, None, None, on_reply)
        full = self._offer(call, envelope)
        if full is not None:
            full.pending -= 1  # not accepted, and nobody waits to send it
            return None
        return envelope.withdraw

    def _envelope(
        self,
        call: PreparedCall,
        progress: Callable[[ProgressReport], None] | None,
        log: Callable[[LogMessage], None] | None,
        ask: Asker | None,
        on_reply: Callable[[_Outcome], None] | None = None,
    ) -> _Envelope:
        """The envelope `call` travels in: an observed one when someone observes."""
        if self._observer is None:
            return _Envelope(call.tool, call.context, call.arguments, progress, log, ask, on_reply)
        return _ObservedEnvelope(
            call.tool,
            call.context,
            call.arguments,
            on_reply=on_reply,
            progress=progress,
            log=log,
            ask=ask,
            observer=self._observer,
            meta=call.meta,
        )

    def _offer(self, call: PreparedCall, envelope: _Envelope) -> _Actor | None:
        """Put `envelope` in its key's mailbox now; the actor, if its full mailbox refused it.

        Everything here is synchronous: the actor found accepting is still
        accepting when the envelope lands, so a key's calls enter its mailbox, a
        FIFO, in arrival order. A refused envelope counts as pending on the
        actor it waits for.
        """
        route = call.route
        context = call.context
        if self._closing:
            msg = "the runtime is shutting down and takes no new calls"
            raise self._refusal(call, RuntimeClosedError(msg))
        if self._ending and self._ending[context.session_id]:
            msg = f"session {context.session_id!r} is being ended; retry once it is"
            raise self._refusal(call, SessionEndingError(msg))
        actor = self._actors.get(route)
        if actor is None or not actor.accepting:
            actor = self._start(route, call.tool.module, actor, context)
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

    def _refusal(self, call: PreparedCall, error: RuntimeCallError) -> RuntimeCallError:
        """`error`, which refuses `call` at the door, once the observer has been told."""
        if self._observer is not None:
            self._observer.call_refused(call.tool.full_name, outcome_of(error))
        return error

    @staticmethod
    async def _send_when_room(actor: _Actor, envelope: _Envelope) -> bool:
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

    async def _make_room(self, actor: _Actor) -> None:
        """Wait until `actor` may hold a state under the caps, evicting idle actors.

        Eviction is fair among tenants (`protocol.tenant_of`): at ``max_actors``
        a call may evict an idle actor of its own tenant, or of a tenant that
        holds more actors than its own, the least recently used first; at
        ``max_actors_per_tenant`` only one of its own. So a tenant's load never
        pushes out the state of a tenant that holds fewer actors. Raises
        CapacityError when nothing may be evicted and nothing is stopping.
        """
        tenant = tenant_of(actor.key.context.session_id)
        while (own_only := self._full(tenant)) is not None:
            victim = self._victim(tenant, own_only=own_only)
            if victim is not None:
                self._counters.evicted += 1
                logger.debug("evicting %s to make room for tenant %r", victim.key, tenant)
                victim.stop_reason = StopReason.EVICTED
                victim.retire()
                await victim.wait_finished()
                continue
            stopping = next(
                (
                    a
                    for a in self._running
                    if a.holds_state and not a.accepting and (a.tenant == tenant or not own_only)
                ),
                None,
            )
            if stopping is None:
                raise CapacityError(self._no_room(tenant, own_only=own_only))
            await stopping.wait_finished()  # a slot frees up when it finishes
        self._holding += 1
        self._held[tenant] = self._held.get(tenant, 0) + 1
        actor.tenant = tenant
        actor.holds_state = True

    def _full(self, tenant: str) -> bool | None:
        """None if `tenant` may hold one more state; else whether only its own may make room."""
        per_tenant = self._config.max_actors_per_tenant
        if per_tenant is not None and self._held.get(tenant, 0) >= per_tenant:
            return True
        cap = self._config.max_actors
        if cap is not None and self._holding >= cap:
            return False
        return None

    def _victim(self, tenant: str, *, own_only: bool) -> _Actor | None:
        """The least recently used idle actor a call of `tenant` may evict, if any."""
        mine = self._held.get(tenant, 0)
        for candidate in self._actors.values():  # least recently used first
            if not (candidate.accepting and candidate.holds_state and not candidate.pending):
                continue
            assert candidate.tenant is not None  # every state is counted under a cap
            if candidate.tenant == tenant or (not own_only and self._held[candidate.tenant] > mine):
                return candidate
        return None

    def _no_room(self, tenant: str, *, own_only: bool) -> str:
        if own_only:
            return (
                f"tenant {tenant!r} holds {self._held[tenant]} live actors, its limit "
                "(max_actors_per_tenant), and all are busy; retry later"
            )
        cap = self._config.max_actors
        if any(a.holds_state and a.accepting and not a.pending for a in self._running):
            return (
                f"all {cap} live actors are taken: tenant {tenant!r}'s are busy and the idle "
                "ones belong to tenants holding fewer; raise max_actors or retry later"
            )
        return f"all {cap} live actors are busy; raise max_actors or retry later"

    def _start(
        self,
        route: Route,
        module: ToolModule[Any],
        predecessor: _Actor | None,
        context: ToolContext,
    ) -> _Actor:
        """Route `route` to a new actor now, as the most recently used; its task sets up the
        state when it may. `context` is the first call's: its key's, if the scope keeps it all.
        """
        name, session, assistant, thread = route
        if (context.session_id, context.assistant_id, context.thread_id) != route[1:]:
            context = ToolContext(session, assistant, thread)  # projected on the module's scope
        key = ActorKey(name, context)
        # Not open_memory_channel[_Envelope](...): the subscripted form goes
        # through typing's generic alias and costs more than the rest of _start.
        send: trio.MemorySendChannel[_Envelope]
        receive: trio.MemoryReceiveChannel[_Envelope]
        send, receive = trio.open_memory_channel(self._config.mailbox_size)
        now = self._now()
        actor = _Actor(
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
        self._nursery.start_soon(self._run_actor, actor, name=_ACTOR_TASK)
        return actor

    # ---- TTL (the reaper task) --------------------------------------------

    def _expire_at(self, actor: _Actor, when: float) -> None:
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

    def _review(self, actor: _Actor, now: float) -> None:
        """Expire `actor` if it has been idle for its TTL, else look again later."""
        if not actor.accepting:
            return  # already stopping: its heap entry just goes away
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

    # ---- the actor task -------------------------------------------------------

    async def _run_actor(self, actor: _Actor) -> None:
        key = actor.key
        keeper = Keeper(key, actor.module, self._store, observer=self._observer)
        started = False  # a state exists (made or loaded)
        error: Callable[[], RuntimeCallError] | None = None  # None: the shutdown's
        try:
            # Most actors wait for nothing and load nothing: no coroutine for either.
            if not self._activate_now(actor):
                await self._activate(actor)
            if keeper.durable is None:
                keeper.make()
            else:
                await keeper.start()
            started = True
            if self._marks_use and keeper.version is not None:
                self._loaded.add(key)  # a stored state read: used, for the retention
            if self._observer is not None:
                self._observer.actor_started(key)
            on_start = getattr(keeper.state, "on_start", None)
            if on_start is not None:
                await run_hook(on_start)
            background = getattr(keeper.state, "start_background", None)
            if background is None:
                await self._serve(actor, keeper)
            else:
                await self._serve_with_background(actor, keeper, background)
        except CapacityError as exc:
            error = functools.partial(CapacityError, str(exc))
        except StateLoadError as exc:
            # The stored blob stays as it is; every call of the key says why, and a
            # client retrying cannot fill the log with tracebacks.
            self._counters.crashed += 1
            actor.stop_reason = StopReason.CRASHED
            logger.error("%s", exc)
            error = functools.partial(StateUnreadableError, key, str(exc))
        except Exception as exc:
            # Anything escaping the per-call handling kills only this actor:
            # its pending calls fail, the next call to the key starts afresh
            # (a durable state loads again from the store).
            self._counters.crashed += 1
            actor.stop_reason = StopReason.CRASHED
            logger.exception("actor for %s crashed", key)
            error = functools.partial(ActorCrashedError, key, _sole_cause(exc))
        finally:
            actor.accepting = False
            self._counters.errors += actor.fail_pending(error or self._shutdown_error)
            if started and not actor.stopped:
                await self._stop_state(actor, keeper.state)
            if started and self._observer is not None:
                self._observer.actor_stopped(key, actor.stop_reason)
            if started and self._watchers and actor.module.durable is None:
                self._tell_watchers(actor.route)  # its state is gone: the next is a fresh one
            self._release(actor)
            logger.debug("actor stopped for %s", key)

    def _activate_now(self, actor: _Actor) -> bool:
        """Let `actor` hold its key's state at once if it need not wait; whether it did.

        It waits for a predecessor still stopping, or for room under a cap (`_activate`).
        """
        if actor.predecessor is not None or self._capped:
            return False
        self._holding += 1
        actor.holds_state = True
        self._note_live(actor)
        return True

    async def _activate(self, actor: _Actor) -> None:
        """Wait until `actor` may hold its key's state: alone, and within max_actors."""
        if actor.predecessor is not None:
            # Calls already queue in this actor's mailbox, in arrival order; the
            # state waits until the key's previous actor has fully stopped.
            await actor.predecessor.wait_finished()
            actor.predecessor = None
        if self._capped:
            await self._make_room(actor)
        else:
            self._holding += 1
            actor.holds_state = True
        self._note_live(actor)

    def _note_live(self, actor: _Actor) -> None:
        """Record that `actor` holds its key's state; a second live state is a bug."""
        if actor.route in self._live_routes:
            self._counters.duplicate_actors += 1
            logger.error("BUG: a second state for %s while one was live", actor.key)
        self._live_routes.add(actor.route)
        logger.debug("actor started for %s", actor.key)

    def _release(self, actor: _Actor) -> None:
        """Forget a finished actor and wake whoever waits for it."""
        if actor.holds_state:
            self._live_routes.discard(actor.route)
            self._holding -= 1
            if actor.tenant is not None:  # counted per tenant only under a cap
                self._held[actor.tenant] -= 1
                if not self._held[actor.tenant]:
                    del self._held[actor.tenant]  # tenants come and go: keep the table small
        if self._actors.get(actor.route) is actor:  # not when a successor took its place
            del self._actors[actor.route]
        self._running.discard(actor)
        actor.mark_finished()
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
        self._live_routes = set(self._live_routes)
        self._expiries = [entry for entry in self._expiries if not entry[2].finished]
        heapq.heapify(self._expiries)
        self._peak = running

    def _shutdown_error(self) -> RuntimeClosedError:
        return RuntimeClosedError(
            "the runtime shut down before this call completed "
            f"(shutdown_grace={self._config.shutdown_grace:g} s)"
        )

    async def _serve_with_background(
        self, actor: _Actor, keeper: Keeper, start: Callable[[trio.Nursery], object]
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
                        await self._serve(actor, keeper)
                finally:
                    await self._stop_state(actor, keeper.state)
                    nursery.cancel_scope.cancel()

    async def _stop_state(self, actor: _Actor, state: object) -> None:
        actor.stopped = True
        on_stop = getattr(state, "on_stop", None)
        if on_stop is None:
            return
        if not await self._outwait_thread(actor):
            logger.error(
                "on_stop of %s skipped: a heavy handler's thread still used the state "
                "after stop_timeout (%g s)",
                actor.key,
                self._config.stop_timeout,
            )
            return
        # Shielded: on_stop releases resources (kills subprocesses, closes
        # files) and must run even when the actor was cancelled at shutdown.
        # Bounded, so a hook that hangs cannot hold shutdown forever.
        with trio.CancelScope(shield=True), trio.move_on_after(self._config.stop_timeout) as scope:
            try:
                await run_hook(on_stop)
            except Exception:
                logger.exception("on_stop of %s failed", actor.key)
        if scope.cancelled_caught:
            logger.error("on_stop of %s overran stop_timeout and was cancelled", actor.key)

    async def _outwait_thread(self, actor: _Actor) -> bool:
        """Wait, up to stop_timeout, for a heavy thread the actor gave up on at shutdown.

        on_stop must not run while a thread still uses the state (invariant 1).
        Returns whether no thread does any more.
        """
        worker = actor.worker
        if worker is None:
            return True
        with trio.CancelScope(shield=True), trio.move_on_after(self._config.stop_timeout):
            await worker.finished.wait()
        return worker.finished.is_set()

    def _serve(self, actor: _Actor, keeper: Keeper) -> Coroutine[Any, Any, None]:
        """Serve calls until the mailbox is closed and drained (the coroutine that does).

        A plain function that returns the serving coroutine, not a coroutine
        that awaits it: the actor's task resumes one coroutine less per call.
        """
        # Store I/O is not on this list: each store bounds its own operations
        # (SQLite's busy timeout, PostgreSQL's connect and TCP timeouts), and
        # arming the deadline around every write would cost every durable call.
        awaited = keeper.heal or actor.module.has_awaited_tools
        if self._timeout == math.inf or not awaited:
            return self._serve_calls(actor, keeper, None)  # nothing a deadline could cancel
        return self._serve_with_deadline(actor, keeper)

    async def _serve_with_deadline(self, actor: _Actor, keeper: Keeper) -> None:
        """`_serve_calls` under the call timeout, started afresh after each timeout."""
        while True:
            # One deadline scope serves many calls: its deadline is moved per
            # call, which is far cheaper than a new cancel scope per call. Once
            # it fires it stays cancelled, so a timeout starts a fresh one.
            with trio.CancelScope() as deadline:
                await self._serve_calls(actor, keeper, deadline)
                return
            await self._time_out(actor, keeper)

    async def _serve_calls(
        self, actor: _Actor, keeper: Keeper, deadline: trio.CancelScope | None
    ) -> None:
        timeout = self._timeout
        durable = keeper.durable is not None
        heal = keeper.heal
        while True:
            try:
                envelope = await actor.receive.receive()
            except trio.EndOfChannel:
                return  # retired (TTL, eviction, shutdown) and drained
            if envelope.abandoned:
                del envelope  # as below: nothing of a call outlives it
                actor.pending -= 1
                continue
            actor.current = envelope
            if envelope.observed:
                assert isinstance(envelope, _ObservedEnvelope)
                envelope.started = time.perf_counter()
            tool = envelope.tool
            # Only code that awaits can be cancelled, so the deadline is armed
            # for async and heavy handlers and hooks; an inline sync handler
            # runs to completion (and its write is bounded by the store).
            armed = deadline is not None and (tool.is_async or tool.heavy or heal is not None)
            if armed:
                assert deadline is not None
                deadline.deadline = self._now() + timeout
            if keeper.stale:  # a write failed or a call timed out: the store is right
                await keeper.start()  # raising here is an actor crash; the next actor loads
                heal = keeper.heal
            if heal is not None:
                await run_hook(heal)  # raising here is an actor crash: the resource is gone
            if tool.is_async or tool.heavy:
                outcome = await self._run_call(actor, keeper, envelope)
            else:  # `_run_call`'s last line, inline: most handlers are sync and run right here
                outcome = self._invoke_sync(keeper.state, envelope, _channels(envelope))
            if durable and not tool.read_only:
                outcome = await self._write(actor, keeper, envelope, outcome)
                heal = keeper.heal  # a conflict may have loaded the state again
            if armed:
                assert deadline is not None
                deadline.deadline = math.inf
            if outcome.is_error:
                self._counters.errors += 1
            envelope.reply(outcome)
            if self._watchers and not tool.read_only:
                self._tell_watchers(actor.route)
            # Drop the references before waiting again: an idle actor must not
            # keep its last call's arguments and result alive until its TTL.
            del envelope, tool, outcome
            actor.current = None
            actor.pending -= 1
            actor.idle_since = self._now()

    async def _run_call(self, actor: _Actor, keeper: Keeper, envelope: _Envelope) -> CallResult:
        """Run the call's handler on the key's state: awaited, in a worker thread, or inline."""
        tool = envelope.tool
        if tool.is_async:
            return await self._invoke(keeper.state, envelope)
        if tool.heavy:
            return await self._invoke_in_thread(actor, keeper.state, envelope)
        return self._invoke_sync(keeper.state, envelope, _channels(envelope))

    async def _write(
        self, actor: _Actor, keeper: Keeper, envelope: _Envelope, outcome: CallResult
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
                self._counters.write_conflicts += 1
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
                self._counters.write_failures += 1
                logger.error("%s", exc)
                text = f"the change was not saved, so it did not happen: {exc}; retry the call"
                return CallResult.error(text).stamped(service)
            # Counted after the await, not with `+= await`: that would read the
            # counter before the save and lose the other actors' increments.
            self._counters.state_writes += wrote
            return outcome
        text = (
            f"the state of {actor.key} kept changing under this call (another process writes "
            "the same key), so its change was not saved; retry the call"
        )
        return CallResult.error(text).stamped(service)

    async def _time_out(self, actor: _Actor, keeper: Keeper) -> None:
        """The deadline fired: fail the call that overran, if it is still unanswered.

        A heavy call's thread runs on: the key's turn lasts until it ends (see
        "Heavy handlers"), so its next call never runs beside it. Only shutdown
        cancels that wait, and then `_stop_state` finds the thread in
        ``actor.worker``. A durable state the call may have changed half-way
        is loaded again before the next call: the store has what was replied.
        """
        envelope = actor.current
        actor.current = None
        if envelope is None or envelope.outcome is not None:
            return  # the call finished just as the deadline fired
        self._counters.timeouts += 1
        self._counters.errors += 1
        tool = envelope.tool
        envelope.reply(CallTimeoutError(tool.full_name, actor.key, self._timeout, heavy=tool.heavy))
        del envelope
        if keeper.durable is not None and not tool.read_only:
            keeper.stale = True
        if actor.worker is not None:
            await actor.worker.finished.wait()  # its result is dropped
            actor.worker = None
        actor.pending -= 1  # only now: until the thread ended, the actor was busy
        actor.idle_since = self._now()

    @staticmethod
    async def _invoke(state: object, envelope: _Envelope) -> CallResult:
        """An async handler's call and result conversion, on the loop."""
        tool = envelope.tool
        try:
            value = await tool.invoke(
                state, envelope.context, envelope.arguments, *_channels(envelope)
            )
            return tool.result_of(value)
        except Exception as exc:
            return _failure(tool, exc)

    async def _invoke_in_thread(
        self, actor: _Actor, state: object, envelope: _Envelope
    ) -> CallResult:
        """Run a heavy handler in a worker thread; the actor keeps the key's turn meanwhile.

        Cancelled (deadline or shutdown) once the thread has started, this
        leaves it in ``actor.worker``: whoever goes on must wait for it.
        """
        worker = _Worker(self._threads)
        name = f"heavy {envelope.tool.full_name} for {actor.key}"
        # The channels are made here, on the loop, for the thread to report and log through.
        work = functools.partial(self._invoke_sync, state, envelope, _channels(envelope))
        await worker.start(work, name)
        actor.worker = worker
        await worker.finished.wait()
        actor.worker = None
        assert worker.result is not None  # set before finished
        return worker.result.unwrap()

    @staticmethod
    def _invoke_sync(state: object, envelope: _Envelope, channels: _Channels) -> CallResult:
        """A sync handler's call and result conversion: on the loop, or a heavy one's thread."""
        tool = envelope.tool
        try:
            if channels is _NO_CHANNELS:  # most tools: nothing to fill in
                value = tool.handler(state, **envelope.arguments)
            else:
                value = tool.invoke(state, envelope.context, envelope.arguments, *channels)
            return tool.result_of(value)
        except Exception as exc:
            return _failure(tool, exc)

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
    async def _stop_actors(actors: list[_Actor], reason: StopReason) -> None:
        """Retire `actors` (each answers what it already accepted, then stops); wait for them."""
        for actor in actors:
            if actor.accepting:
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
            used, self._loaded = self._loaded | live, set()
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
            ActorInfo(actor.key, actor.last_used, actor.pending, actor.accepting)
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


def _failure(tool: Tool, exc: Exception) -> CallResult:
    """The error result of a handler that raised `exc`; call it where `exc` is being handled.

    A ToolError's text is the whole message; anything else is logged with its
    traceback and named in the result.
    """
    if isinstance(exc, ToolError):
        return CallResult.error(str(exc)).stamped(tool.service)
    logger.exception("tool %s failed", tool.full_name)
    message = f"tool {tool.full_name!r} failed: {type(exc).__name__}: {exc}"
    return CallResult.error(message).stamped(tool.service)


_Channels = tuple[Progress | None, Log | None, Ask | None]
_NO_CHANNELS: Final[_Channels] = (None, None, None)
"""A tool that takes none of them: its handler is called with its arguments alone."""


class Watcher(Protocol):
    """Told of changes of keys' states (`Runtime.watch`); must not block."""

    def key_changed(self, route: Route) -> None:
        """The state of the key `route` (module, session, assistant, thread) may have changed."""

    def session_ended(self, session_id: str) -> None:
        """The session was ended: every key of it is fresh again."""


def _channels(envelope: _Envelope) -> _Channels:
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


def _sole_cause(exc: Exception) -> Exception:
    """The one exception inside a nursery's group, or `exc` itself."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


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
