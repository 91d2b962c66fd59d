"""Running the trio runtime inside an asyncio program: trio's guest mode.

How it runs
-----------
`open_asyncio_runtime` starts a trio run in *guest mode* on the running asyncio
loop (`trio.lowlevel.start_guest_run`): trio's scheduler runs in callbacks on
the loop's own thread ("guest ticks"), and only its wait for I/O happens in a
worker thread. No thread per call, and trio code and asyncio code never run
at the same time. The trio run opens the store and the runtime
(`open_hosted_runtime`), hands the runtime over, and waits to be stopped.

How a call crosses
------------------
The asyncio side must not drive trio directly: outside a guest tick no trio
task is running, and a trio task woken from outside would not run until
trio's I/O wait happened to return. It enters through
`TrioToken.run_sync_soon`, which also wakes that wait. Each call is queued in
a deque, and one drain is scheduled while one is pending: a burst of 100
callers costs one wake-up, not 100.

The drain hands each tool call straight to its actor's mailbox
(`Runtime.submit_nowait`), with a callback that settles the call's asyncio
Future when the actor replies: no trio task per call. Asyncio futures are not
thread-safe, but guest ticks run on the loop's thread (start_guest_run's
``run_sync_soon_*`` are the loop's ``call_soon*``), so settling them there is
safe. Results and exceptions are the runtime's own objects. Only a call whose
mailbox is full (backpressure), and other work (`end_session`), gets a trio
task of its own, in a nursery of the guest run, which waits as `Runtime.run`
does.

A call is prepared (`Runtime.prepare`) on the asyncio side, so bad input is
refused at once, and its key is known before it crosses. That key keeps a
key's calls in the order asyncio made them. The drain takes the deque in
order, so calls handed over directly enter their mailboxes in that order.
Once a key's call had to wait for room, the key's later calls wait behind it:
trio runs the tasks started in one pass in either order (it reverses each
batch half the time), so such a call is not started with the others: its
predecessor starts it just before routing itself, and a task started then
runs only after the predecessor's call is in the mailbox.

Cancellation
------------
The runtime's semantics, unchanged: an asyncio caller cancelled while its
call is still queued (in the deque, or in the key's mailbox) withdraws it;
cancelled after the handler started, the handler runs to completion and the
reply is dropped. A call handed over directly is withdrawn by marking its
envelope (no trio API is involved, and trio never runs while asyncio code
does); a call with a trio task has that task cancelled, through the same
queue. A call that ends without a reply (the trio run is being torn down
under it) gets RuntimeClosedError, never a hang.

Shutdown
--------
Leaving the block stops the runtime as `open_runtime`'s block does (accepted
calls finish within ``shutdown_grace``, the rest get RuntimeClosedError, every
``on_stop`` runs) and waits for the trio run to end, even when the task
holding the block is cancelled (see `_Guest.close`). Trio allows one run per
thread: tasks share one handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final

import attrs
import trio

from ._blocking import open_hosted_runtime, raise_run_error
from ._client import CannotAskError
from ._errors import RuntimeCallError, RuntimeClosedError
from ._observe import Observers
from ._target import Host

if TYPE_CHECKING:
    from collections.abc import (
        AsyncIterator,
        Awaitable,
        Callable,
        Coroutine,
        Iterable,
        Mapping,
        Sequence,
    )
    from contextvars import Context

    import outcome

    from protocol import Caller, CallResult

    from ._blocking import Opening
    from ._client import Answer, Asker, LogMessage
    from ._config import RuntimeConfig
    from ._module import ToolModule
    from ._observe import Observer
    from ._prepare import PreparedCall, Route
    from ._progress import ProgressReport
    from ._runtime import ActorInfo, Runtime, RuntimeStatistics
    from ._target import Watcher

__all__ = ["AsyncioRuntime", "open_asyncio_runtime"]

T = TypeVar("T")


@attrs.define(eq=False)
class _Call(Generic[T]):
    """One call from asyncio: the trio work to run, and the Future its caller awaits."""

    work: Callable[[], Awaitable[T]]
    future: asyncio.Future[T]
    route: Route | None  # its actor's key, for the order of a key's calls
    prepared: PreparedCall | None = None  # a tool call, which may be accepted without a task
    withdraw: Callable[[], None] | None = None  # set once accepted that way
    successor: _Call[Any] | None = None  # the key's next call, started by this one
    scope: trio.CancelScope | None = None  # set when its trio task is started
    finished: bool = False  # its trio task has ended


@attrs.define(eq=False)
class _Guest:
    """The bridge: both sides of one guest run, touched only on the loop's thread."""

    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    opened: asyncio.Future[Runtime | None]  # the runtime, or None if the run ended first
    ended: asyncio.Future[outcome.Outcome[None]]
    token: trio.lowlevel.TrioToken | None = None
    stop: trio.Event = attrs.field(factory=trio.Event)
    queue: deque[_Call[Any]] = attrs.field(factory=deque)  # to start, or to cancel
    drain_pending: bool = False
    unrouted: dict[Route, _Call[Any]] = attrs.field(factory=dict)  # newest not yet routed
    calls: trio.Nursery | None = None  # where drains start call tasks, while they may
    runtime: Runtime | None = None  # set once opened, on the trio side
    accepted: set[_Call[Any]] = attrs.field(factory=set)  # in mailboxes, awaiting replies
    closed: str | None = None  # why calls are refused, once they are

    @classmethod
    def start(cls, opening: Opening) -> _Guest:
        loop = asyncio.get_running_loop()
        if trio.lowlevel.in_trio_run():
            msg = (
                "a trio run is already active in this thread (another open_asyncio_runtime "
                "block?); trio allows one per thread, so share the one AsyncioRuntime handle "
                "between the tasks that need it"
            )
            raise RuntimeError(msg)
        guest = cls(loop, threading.current_thread(), loop.create_future(), loop.create_future())
        trio.lowlevel.start_guest_run(
            guest._main,
            opening,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=guest._done,
            # asyncio's signal handling relies on signal.set_wakeup_fd: let it keep it.
            host_uses_signal_set_wakeup_fd=True,
        )
        # Documented to work once start_guest_run has returned.
        guest.token = trio.lowlevel.current_trio_token()
        return guest

    # ---- the trio side (guest ticks) -----------------------------------------

    async def _main(self, opening: Opening) -> None:
        async with (
            opening() as runtime,
            trio.open_nursery() as calls,
        ):
            self.calls = calls
            self.runtime = runtime
            try:
                if not self.opened.done():  # not when the opener was cancelled
                    self.opened.set_result(runtime)
                await self.stop.wait()
                # Settle every accepted call before the nursery waits for the call
                # tasks: accepted calls finish within shutdown_grace, the rest get
                # RuntimeClosedError, and calls not yet accepted are refused at once.
                # Without this, one handler that never returns would hold the exit.
                await runtime.aclose()
            finally:
                # Once this body ends, the nursery closes as soon as its last call
                # task does; drains must no longer start tasks in it (call tasks
                # still start their successors there: while one runs, it is open).
                self.calls = None

    def _drain(self) -> None:
        """Start the queued calls' trio tasks, and cancel those whose callers went away."""
        self.drain_pending = False
        queue = self.queue
        while queue:
            call = queue.popleft()
            if call.scope is not None:
                call.scope.cancel()  # queued again: its asyncio caller was cancelled
            elif call.future.done():
                continue  # cancelled before it reached trio: withdrawn, never sent
            elif self.calls is None:
                _refuse(call)
            elif call.route is None:
                self._start(call, self.calls)
            else:
                predecessor = self.unrouted.get(call.route)
                if predecessor is None and self._accepted(call):
                    continue
                self.unrouted[call.route] = call
                if predecessor is None:
                    self._start(call, self.calls)
                else:
                    predecessor.successor = call  # see "How a call crosses"

    def _accepted(self, call: _Call[Any]) -> bool:
        """Hand a tool call straight to its actor's mailbox; False if that must wait for room."""
        if call.prepared is None or self.runtime is None:
            return False
        try:
            call.withdraw = self.runtime.submit_nowait(
                call.prepared, functools.partial(self._settle, call)
            )
        except Exception as exc:  # shutting down, session being ended: the runtime's errors
            call.future.set_exception(exc)
            return True
        if call.withdraw is None:
            return False
        self.accepted.add(call)
        return True

    def _settle(self, call: _Call[Any], outcome: CallResult | RuntimeCallError) -> None:
        """Deliver an accepted call's reply (from its actor); dropped if the caller left."""
        self.accepted.discard(call)
        if call.future.done():
            return
        if isinstance(outcome, RuntimeCallError):
            call.future.set_exception(outcome)
        else:
            call.future.set_result(outcome)

    def _start(self, call: _Call[Any], calls: trio.Nursery) -> None:
        call.scope = trio.CancelScope()
        calls.start_soon(self._serve, call, calls)

    async def _serve(self, call: _Call[Any], calls: trio.Nursery) -> None:
        future = call.future
        try:
            # Nothing from here to the routing inside call.work() yields, so the
            # successor started here runs after this call is in the key's mailbox.
            if call.route is not None and self.unrouted.get(call.route) is call:
                del self.unrouted[call.route]
            if call.successor is not None:
                self._start(call.successor, calls)
                call.successor = None
            if future.done():
                return  # its caller was cancelled before this task ran: never sent
            assert call.scope is not None
            with call.scope:
                result = await call.work()
                if not future.done():  # else the caller went away: the reply is dropped
                    future.set_result(result)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        finally:
            call.finished = True
            if not future.done():
                # Neither a reply nor a withdrawal: the trio run is being torn down.
                msg = "the runtime's trio run ended before this call completed"
                future.set_exception(RuntimeClosedError(msg))

    def _done(self, result: outcome.Outcome[None]) -> None:
        if self.closed is None:  # the run ended without being asked to: it crashed
            self.closed = "its trio run ended unexpectedly (leaving the block raises why)"
        for call in self.accepted:  # the runtime replies to every one; should it not: no hang
            if not call.future.done():
                msg = "the runtime's trio run ended before this call completed"
                call.future.set_exception(RuntimeClosedError(msg))
        self.accepted.clear()
        if not self.opened.done():
            self.opened.set_result(None)
        self.ended.set_result(result)

    # ---- the asyncio side ----------------------------------------------------

    def check_thread(self) -> None:
        if threading.current_thread() is not self.thread:
            msg = (
                "AsyncioRuntime was used outside the thread of the event loop that opened it; "
                "from another thread, submit the call to that loop with "
                "asyncio.run_coroutine_threadsafe(runtime.call(...), loop)"
            )
            raise RuntimeError(msg)

    def check_open(self) -> None:
        self.check_thread()
        if self.closed is not None:
            msg = f"the runtime is closed: {self.closed}"
            raise RuntimeClosedError(msg)

    async def run(
        self,
        work: Callable[[], Awaitable[T]],
        route: Route | None = None,
        prepared: PreparedCall | None = None,
    ) -> T:
        """Run `work` in the guest run (`prepared`, a tool call, may skip the trio task)."""
        future: asyncio.Future[T] = self.loop.create_future()
        call = _Call(work, future, route, prepared)
        self._enter(call)
        try:
            return await future
        except asyncio.CancelledError:
            if call.withdraw is not None:
                # No trio API is called, only the envelope is marked, and trio
                # never runs while this does (one thread): safe from here.
                call.withdraw()
            elif call.scope is not None and not call.finished:
                self._enter(call)  # started in trio: cancel its task there
            raise

    def _enter(self, call: _Call[Any]) -> None:
        self.queue.append(call)
        if self.drain_pending:
            return
        assert self.token is not None
        self.drain_pending = True
        try:
            self.token.run_sync_soon(self._drain)
        except trio.RunFinishedError:
            # The run is ending on its own (it crashed; its last ticks have not
            # reported it yet) and runs no more drains: settle the calls here.
            self.drain_pending = False
            while self.queue:
                _refuse(self.queue.popleft())

    async def on_loop(self, work: Callable[[], Coroutine[Any, Any, T]], context: Context) -> T:
        """From a trio task of the run: await `work()` as an asyncio task, in a copy of `context`.

        The asyncio task's end wakes the trio task through the token (a done
        callback runs outside trio's ticks, where trio cannot be touched); the
        trio task cancelled meanwhile cancels the asyncio one. An asyncio task
        cancelled on its own side (the loop is closing) raises CannotAskError.
        """
        task = self.loop.create_task(work(), context=context.copy())
        done = trio.Event()
        token = self.token
        assert token is not None  # set once started, before any call

        def wake(_task: object) -> None:
            with contextlib.suppress(trio.RunFinishedError):  # the trio side has gone
                token.run_sync_soon(done.set)

        task.add_done_callback(wake)
        try:
            await done.wait()
        finally:
            task.cancel()  # a no-op once it is done
        if task.cancelled():
            msg = "the question was cancelled on the asyncio side (its loop is closing?)"
            raise CannotAskError(msg)
        return task.result()

    async def close(self) -> None:
        """Stop the runtime and wait for the trio run to end; raise what ended it badly.

        asyncio has no shielded scope, so a cancellation of the task that
        holds the block cannot be deferred: it is caught, the wait goes on
        until the run has ended (so accepted calls still finish within
        shutdown_grace and every on_stop runs before the block is left), and
        it is raised again afterwards. Leaving early would abandon the run
        half-way: trio's guest mode requires that the host let it finish.
        """
        if self.closed is None:
            self.closed = "its open_asyncio_runtime block has ended"
        assert self.token is not None
        with contextlib.suppress(trio.RunFinishedError):  # ending on its own: a crash
            self.token.run_sync_soon(self.stop.set)
        cancelled: asyncio.CancelledError | None = None
        while not self.ended.done():
            try:
                await asyncio.shield(self.ended)
            except asyncio.CancelledError as exc:
                cancelled = exc
        if cancelled is not None:
            raise cancelled
        raise_run_error(self.ended.result())


@final
@attrs.frozen
class _LoopAsker:
    """An asyncio-side `Asker` as the trio side sees it: each question crosses to the loop."""

    guest: _Guest
    asker: Asker
    context: Context  # the caller's: each question runs in a copy of it

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """`Asker.elicit`, awaited on the loop."""
        work = functools.partial(self.asker.elicit, message, schema)
        return await self.guest.on_loop(work, self.context)

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
    ) -> str:
        """`Asker.sample`, awaited on the loop."""
        work = functools.partial(
            self.asker.sample,
            messages,
            max_tokens=max_tokens,
            system_prompt=system_prompt,
            temperature=temperature,
        )
        return await self.guest.on_loop(work, self.context)


def _refuse(call: _Call[Any]) -> None:
    """Fail a call the trio run will never start (a cancelled one needs nothing)."""
    if call.scope is None and not call.future.done():
        msg = "the runtime shut down before this call was sent"
        call.future.set_exception(RuntimeClosedError(msg))


@final
class AsyncioRuntime(Host):
    """A runtime for asyncio code; create one with `open_asyncio_runtime`.

    A `CallTarget`, with `Runtime`'s methods, results, exceptions (the very
    objects raised on the trio side) and cancellation semantics: a caller
    cancelled while its call is queued withdraws it; once the handler started,
    it runs to completion and the reply is dropped. Use it from the thread of
    the loop that opened it (from another thread, submit coroutines to that
    loop with `asyncio.run_coroutine_threadsafe`). After the block, or once the
    trio run has ended, calls raise RuntimeClosedError at once.

    What the trio side tells this side (`run`'s `progress` and `log`, `watch`'s
    watchers) it tells on the loop's thread, synchronously, from inside one
    of trio's guest ticks: between two asyncio callbacks, so asyncio objects
    may be touched (``Event.set``, ``Queue.put_nowait``, ``call_soon``), but
    no asyncio task is current, so nothing may be awaited or block.
    """

    def __init__(self, guest: _Guest, runtime: Runtime, observer: Observer | None) -> None:
        self._guest = guest
        self._runtime = runtime
        self._registry = runtime.registry
        self._config = runtime.config
        # Told of the calls refused on this side (`Host.prepare`), before trio sees them.
        self._observer = None if observer is None else Observers([observer])

    def prepare(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> PreparedCall:
        """`Runtime.prepare`, on the asyncio side: bad input is refused before it reaches trio.

        Raises RuntimeError off the loop's thread and RuntimeClosedError once
        closed, before looking at the call.
        """
        self._guest.check_open()
        return super().prepare(params, caller=caller)

    async def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: Asker | None = None,
    ) -> CallResult:
        """`Runtime.run`: run a prepared call on its key's actor, in the trio run.

        `progress` and `log` are called as the class docstring says (in a guest
        tick). `ask` is an asyncio-side `Asker`: each question the tool asks
        runs as an asyncio task on this loop, in the context of the caller of
        `run` (its context variables), while the tool waits in trio; a tool
        cancelled meanwhile (its deadline) cancels that task.
        """
        self._guest.check_open()
        trio_ask = None if ask is None else _LoopAsker(self._guest, ask, contextvars.copy_context())
        work = functools.partial(self._runtime.run, call, progress=progress, log=log, ask=trio_ask)
        # The direct submission carries no channel: a call that has one takes the task.
        listens = progress is not None or log is not None or ask is not None
        return await self._guest.run(work, call.route, None if listens else call)

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """`Runtime.watch`: `watcher` is told as the class docstring says (in a guest tick)."""
        self._guest.check_thread()
        return self._runtime.watch(watcher)

    async def unavailable(self) -> str | None:
        """Why calls are refused (the block ended, or the trio run did), or None while open."""
        closed = self._guest.closed
        return None if closed is None else f"the runtime is closed: {closed}"

    async def end_session(self, session_id: str) -> int:
        """`Runtime.end_session`: stop the session's actors, delete its stored state."""
        self._guest.check_open()
        return await self._guest.run(functools.partial(self._runtime.end_session, session_id))

    async def hand_over(self, leaving: Callable[[str], bool]) -> int:
        """`Runtime.hand_over`: stop the sessions `leaving` picks here, keep their state."""
        self._guest.check_open()
        return await self._guest.run(functools.partial(self._runtime.hand_over, leaving))

    def statistics(self) -> RuntimeStatistics:
        """`Runtime.statistics` (trio never runs while asyncio code does: no race)."""
        self._guest.check_thread()
        return self._runtime.statistics()

    def actors(self) -> tuple[ActorInfo, ...]:
        """`Runtime.actors`."""
        self._guest.check_thread()
        return self._runtime.actors()


@asynccontextmanager
async def open_asyncio_runtime(
    modules: Iterable[ToolModule[Any]],
    config: RuntimeConfig | None = None,
    *,
    state: str | Sequence[str] | None = None,
    observer: Observer | None = None,
) -> AsyncIterator[AsyncioRuntime]:
    """Run a runtime serving `modules` on the running asyncio loop, for the length of the block.

    Trio runs in guest mode on this loop's thread. `state` is a store URL for
    durable modules (`actors.store.open_store`: ``memory``,
    ``sqlite:///state.db``, ``postgresql://…``); an error opening it
    (ValueError, StoreError) is raised here as itself. `observer` is told what
    the runtime does, as `open_runtime`'s is (its methods run on this loop's
    thread, between asyncio's callbacks). On exit, even a
    cancelled one, the runtime stops as `open_runtime`'s block does before
    the block is left. One per thread: a second one while one is open raises
    RuntimeError (trio allows one run per thread; share the handle).
    """
    guest = _Guest.start(functools.partial(open_hosted_runtime, modules, config, state, observer))
    try:
        runtime = await guest.opened
        if runtime is not None:  # else the run ended while opening: close() raises why
            yield AsyncioRuntime(guest, runtime, observer)
    finally:
        await guest.close()
