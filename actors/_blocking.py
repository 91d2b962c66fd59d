"""Running the trio runtime for synchronous code: trio in a thread of its own.

``open_blocking_runtime`` starts one thread that runs ``trio.run``; the runtime
lives there, and each call from any other thread goes in through
``trio.from_thread.run`` and blocks until its reply. Calls from several
threads run concurrently, as concurrent trio callers would. Leaving the block
stops the runtime in order (see `open_runtime`) and joins the thread.

`open_hosted_runtime` is the part both hosts share (this one and the asyncio
one in ``_guest``): what runs on the trio side.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, final

import attrs
import outcome
import trio

from ._actor import sole_cause
from ._errors import RuntimeClosedError
from ._runtime import open_runtime
from .store import open_store

if TYPE_CHECKING:
    from collections.abc import (
        AsyncIterator,
        Awaitable,
        Callable,
        Iterable,
        Iterator,
        Mapping,
        Sequence,
    )
    from contextlib import AbstractAsyncContextManager

    from protocol import Caller, CallResult, PromptResult, ResourceResult

    from ._client import Answer, LogMessage
    from ._config import RuntimeConfig
    from ._module import ToolModule
    from ._observe import Observer
    from ._prepare import PreparedCall
    from ._progress import ProgressReport
    from ._registry import Registry
    from ._resources import Completions
    from ._runtime import ActorInfo, Runtime, RuntimeStatistics
    from ._target import BlockingAsker, Watcher

    # How a host opens its runtime on the trio side: `open_hosted_runtime`, arguments bound.
    Opening = Callable[[], AbstractAsyncContextManager[Runtime]]

__all__ = ["BlockingRuntime", "open_blocking_runtime", "open_hosted_runtime", "raise_run_error"]

T = TypeVar("T")


@asynccontextmanager
async def open_hosted_runtime(
    modules: Iterable[ToolModule[Any]],
    config: RuntimeConfig | None,
    state: str | Sequence[str] | None,
    observer: Observer | None = None,
) -> AsyncIterator[Runtime]:
    """`open_runtime` over the store that `state` names (`open_store`), if any.

    The trio side of both host handles. Raises as `open_store` does (ValueError
    for a bad URL, StoreError for a store that cannot be opened).
    """
    async with contextlib.AsyncExitStack() as stack:
        store = None if state is None else await stack.enter_async_context(open_store(state))
        opening = open_runtime(modules, config, store=store, observer=observer)
        yield await stack.enter_async_context(opening)


def raise_run_error(result: outcome.Outcome[None]) -> None:
    """Raise what ended a trio run, if it failed: its one cause, not a group of one."""
    if isinstance(result, outcome.Error):
        error = result.error
        raise sole_cause(error) if isinstance(error, Exception) else error


@attrs.define(eq=False)
class _Host:
    """The trio thread's side: it opens the runtime, publishes it and waits to be stopped."""

    opened: threading.Event = attrs.field(factory=threading.Event)  # opened, or the run ended
    stop: trio.Event = attrs.field(factory=trio.Event)
    runtime: Runtime | None = None
    token: trio.lowlevel.TrioToken | None = None
    result: outcome.Outcome[None] | None = None
    thread: threading.Thread | None = None  # the trio thread

    def run(self, opening: Opening) -> None:
        self.thread = threading.current_thread()
        self.result = outcome.capture(trio.run, self._main, opening)
        self.opened.set()  # wakes the opener if the run ended before opening

    async def _main(self, opening: Opening) -> None:
        async with opening() as runtime:
            self.runtime = runtime
            self.token = trio.lowlevel.current_trio_token()
            self.opened.set()
            await self.stop.wait()

    def request_stop(self) -> None:
        """Ask the run to close the runtime and end; it may have ended already."""
        self.opened.wait()  # before that there is no token to reach the run with
        if self.token is not None:
            with contextlib.suppress(trio.RunFinishedError):  # it ended (crashed) on its own
                self.token.run_sync_soon(self.stop.set)


@final
class BlockingRuntime:
    """A runtime for synchronous code; create one with `open_blocking_runtime`.

    A `BlockingTarget`: `CallTarget`'s members, each blocking its thread until
    the trio thread answers. Results, exceptions and cancellation are those of
    `Runtime` (a blocked thread cannot be cancelled; a call that started runs
    to completion). Any thread may call, except the runtime's own: a handler
    that called it would wait for itself, so that raises RuntimeError.

    What the trio side tells (`run`'s `progress` and `log`, `watch`'s
    watchers) it tells in the runtime's trio thread, synchronously: hand it
    on to your threads without blocking (a ``queue.Queue``'s ``put_nowait``).
    A `BlockingAsker`'s questions run in a worker thread, where they may block.
    """

    def __init__(self, host: _Host, runtime: Runtime, token: trio.lowlevel.TrioToken) -> None:
        self._host = host
        self._runtime = runtime
        self._token = token

    @property
    def config(self) -> RuntimeConfig:
        """The configuration the runtime was opened with."""
        return self._runtime.config

    @property
    def registry(self) -> Registry:
        """The enabled modules and tools."""
        return self._runtime.registry

    def prepare(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> PreparedCall:
        """`Runtime.prepare`, in the trio thread (where its observer is told of a refusal)."""
        return self._run(_sync(functools.partial(self._runtime.prepare, params, caller=caller)))

    def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: BlockingAsker | None = None,
    ) -> CallResult:
        """`Runtime.run`: `progress` and `log` are told in the trio thread, `ask` asked in a
        worker thread (see the class docstring); a tool cancelled while it waits for an
        answer (its deadline) stops waiting, and the asker's thread is left to finish."""
        trio_ask = None if ask is None else _ThreadAsker(ask)
        run = self._runtime.run
        return self._run(functools.partial(run, call, progress=progress, log=log, ask=trio_ask))

    def call(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> CallResult:
        """`Runtime.call`: one tools/call-shaped call ``{"name", "arguments", "_meta"}``."""
        return self._run(functools.partial(self._runtime.call, params, caller=caller))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> CallResult:
        """`Runtime.call_tool`: `call` with the parts given separately."""
        params = {"name": name, "arguments": arguments, "_meta": meta}
        return self.call(params, caller=caller)

    def read_resource(
        self,
        uri: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> ResourceResult:
        """`Runtime.read_resource`: the resource (or template instance) `uri`, for `meta`."""
        read = self._runtime.read_resource
        return self._run(functools.partial(read, uri, meta=meta, caller=caller))

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> PromptResult:
        """`Runtime.get_prompt`: the prompt listed as `name`, built with `arguments`."""
        get = self._runtime.get_prompt
        return self._run(functools.partial(get, name, arguments, meta=meta, caller=caller))

    def complete(
        self,
        target: str,
        argument: str,
        value: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> Completions:
        """`Runtime.complete`: values for `argument` of the prompt or template `target`."""
        complete = functools.partial(self._runtime.complete, target, argument, value)
        return self._run(functools.partial(complete, meta=meta, caller=caller))

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """`Runtime.watch`: `watcher` is told in the trio thread (see the class docstring).

        The function returned stops it, from any thread; once the runtime is
        closed there is nothing left to stop.
        """
        unwatch = self._run(_sync(functools.partial(self._runtime.watch, watcher)))

        def stop() -> None:
            with contextlib.suppress(RuntimeClosedError):
                self._run(_sync(unwatch))

        return stop

    def end_session(self, session_id: str) -> int:
        """`Runtime.end_session`: stop the session's actors, delete its stored state."""
        return self._run(self._runtime.end_session, session_id)

    def statistics(self) -> RuntimeStatistics:
        """`Runtime.statistics`, read in the trio thread (the counters live there)."""
        return self._run(_sync(self._runtime.statistics))

    def actors(self) -> tuple[ActorInfo, ...]:
        """`Runtime.actors`, read in the trio thread."""
        return self._run(_sync(self._runtime.actors))

    def _run(self, work: Callable[..., Awaitable[T]], *args: Any) -> T:
        if threading.current_thread() is self._host.thread:
            msg = (
                "BlockingRuntime was called from its own trio thread (from a handler?), where "
                "it would wait for itself; inside the runtime, await the trio Runtime instead"
            )
            raise RuntimeError(msg)
        try:
            return trio.from_thread.run(work, *args, trio_token=self._token)
        # RunFinishedError: the run has ended. Cancelled: it was ending (a crash) under the
        # call. Either way no reply can come: the runtime is closed.
        except (trio.RunFinishedError, trio.Cancelled):
            msg = (
                "the runtime is closed: its open_blocking_runtime block has ended, or its "
                "trio thread has (the block's exit raises why)"
            )
            raise RuntimeClosedError(msg) from None


@final
@attrs.frozen
class _ThreadAsker:
    """A `BlockingAsker` as the trio side sees it: each question blocks a worker thread."""

    asker: BlockingAsker

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """`Asker.elicit`, in a worker thread."""
        return await _in_thread(functools.partial(self.asker.elicit, message, schema))

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
    ) -> str:
        """`Asker.sample`, in a worker thread."""
        sample = functools.partial(self.asker.sample, messages, max_tokens=max_tokens)
        return await _in_thread(
            functools.partial(sample, system_prompt=system_prompt, temperature=temperature)
        )


async def _in_thread(ask: Callable[[], T]) -> T:
    # Abandoned on cancel: a user's dialog cannot be interrupted, but the tool's deadline holds.
    return await trio.to_thread.run_sync(ask, abandon_on_cancel=True)


def _sync(read: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    async def in_trio() -> T:
        return read()

    return in_trio


@contextmanager
def open_blocking_runtime(
    modules: Iterable[ToolModule[Any]],
    config: RuntimeConfig | None = None,
    *,
    state: str | Sequence[str] | None = None,
    observer: Observer | None = None,
) -> Iterator[BlockingRuntime]:
    """Run a runtime serving `modules` in a trio thread for the length of the block.

    `state` is a store URL for durable modules (`actors.store.open_store`:
    ``memory``, ``sqlite:///state.db``, ``postgresql://…``). An error opening
    it (ValueError, StoreError) is raised here, in the caller's thread.
    `observer` is told what the runtime does, as `open_runtime`'s is. On
    exit the runtime stops as `open_runtime`'s block does (accepted calls
    finish within ``shutdown_grace``, every ``on_stop`` runs) and the thread
    is joined.
    """
    host = _Host()
    # A daemon thread, so that an interpreter exiting without leaving the block
    # (a second Ctrl-C during startup) is not held forever by a run waiting to stop.
    opening = functools.partial(open_hosted_runtime, modules, config, state, observer)
    thread = threading.Thread(target=host.run, args=(opening,), name="actors runtime", daemon=True)
    thread.start()
    try:
        host.opened.wait()
        if host.runtime is not None and host.token is not None:
            yield BlockingRuntime(host, host.runtime, host.token)
    finally:
        host.request_stop()
        thread.join()
        assert host.result is not None  # set before the thread ends
        raise_run_error(host.result)
