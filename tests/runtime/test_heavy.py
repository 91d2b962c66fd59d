"""Heavy sync handlers: run in worker threads, so one caller cannot stall the others.

The handlers here block in real threads on a `threading.Event` the test sets;
each waits at most `SAFETY` seconds, so that an implementation that runs them
on the event loop fails the test (the handler reports it was never released)
instead of hanging it. No test asserts how long anything took.
"""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing

from actors import (
    CallTimeoutError,
    RuntimeClosedError,
    RuntimeConfig,
    ToolError,
    ToolModule,
    open_runtime,
)

from .._calls import ModuleCalls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from actors import Runtime
    from protocol import ToolContext

SAFETY = 20.0
"""Seconds a blocked handler waits for its release before giving up (only when broken)."""


@attrs.define(eq=False)
class Tally:
    """What the handlers did, recorded from whichever thread they ran in."""

    lock: threading.Lock = attrs.field(factory=threading.Lock)
    running: int = 0
    most: int = 0
    entries: list[str] = attrs.field(factory=list)
    released: list[bool] = attrs.field(factory=list)
    """For each blocked handler: whether it was released (False: it gave up after SAFETY)."""
    stops: list[int] = attrs.field(factory=list)
    """For each on_stop: how many handlers were running at that moment."""
    idle: threading.Event = attrs.field(factory=threading.Event)
    """Set whenever no handler runs."""

    @contextmanager
    def inside(self, value: str) -> Iterator[None]:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.entries.append(value)
            self.idle.clear()
        try:
            yield
        finally:
            with self.lock:
                self.running -= 1
                if not self.running:
                    self.idle.set()


@attrs.define(eq=False)
class Log:
    """The state: the values its calls appended."""

    tally: Tally
    values: list[str] = attrs.field(factory=list)


@attrs.define(eq=False)
class StoppingLog(Log):
    """A state with an on_stop hook, which records whether a handler was still running."""

    def on_stop(self) -> None:
        self.tally.stops.append(self.tally.running)


@attrs.define(eq=False)
class Blocker:
    """Holds heavy handlers called with ``block=True`` until the test releases them."""

    release: threading.Event
    entered: trio.Event = attrs.field(factory=trio.Event)
    token: trio.lowlevel.TrioToken = attrs.field(factory=trio.lowlevel.current_trio_token)

    def block(self, tally: Tally) -> None:
        self.token.run_sync_soon(self.entered.set)  # thread-safe, from any thread
        tally.released.append(self.release.wait(timeout=SAFETY))


def heavy_module(tally: Tally, blocker: Blocker, *, on_stop: bool = False) -> ToolModule[Log]:
    """``work`` (heavy, may block), ``touch`` (inline), ``fail`` and ``refuse`` (heavy)."""
    state_class = StoppingLog if on_stop else Log

    def new_log(_context: ToolContext) -> Log:
        return state_class(tally)

    module: ToolModule[Log] = ToolModule("heavy", new_log)

    @module.tool(heavy=True)
    def work(state: Log, value: str, block: bool = False) -> dict[str, Any]:
        """Append a value, blocking first if asked to."""
        with tally.inside(value):
            if block:
                blocker.block(tally)
            state.values.append(value)
            return {"log": list(state.values)}

    @module.tool
    def touch(state: Log, value: str) -> dict[str, Any]:
        """Append a value, inline on the actor."""
        with tally.inside(value):
            state.values.append(value)
            return {"log": list(state.values)}

    @module.tool(heavy=True)
    def fail(state: Log) -> str:
        """Raise an ordinary exception in the thread."""
        raise ValueError("the thread broke")

    @module.tool(heavy=True)
    def refuse(state: Log) -> str:
        """Raise a ToolError in the thread."""
        raise ToolError("Permission denied: not yours")

    return module


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """The event blocked handlers wait for; set at teardown so no thread is left waiting."""
    event = threading.Event()
    yield event
    event.set()


@asynccontextmanager
async def running(module: ToolModule[Any], **config: Any) -> AsyncIterator[Runtime]:
    async with open_runtime([module], RuntimeConfig(**config)) as runtime:
        yield runtime


HEAVY = ModuleCalls("heavy")


async def until_idle(tally: Tally) -> None:
    """Wait, in a thread, until no handler runs any more."""
    await trio.to_thread.run_sync(tally.idle.wait, SAFETY)


class TestOffTheLoop:
    async def test_a_blocked_heavy_handler_does_not_hold_up_other_keys(
        self, release: threading.Event
    ) -> None:
        """Invariant 7: while one key's handler blocks in its thread, other keys are served."""
        tally, blocker = Tally(), Blocker(release)
        outcomes: dict[str, dict[str, Any]] = {}

        async def blocked(runtime: Runtime) -> None:
            outcomes["s1"] = await HEAVY.data(runtime, "work", "s1", value="slow", block=True)

        async with running(heavy_module(tally, blocker)) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(blocked, runtime)
                await blocker.entered.wait()
                assert (await HEAVY.data(runtime, "work", "s2", value="heavy"))["log"] == ["heavy"]
                assert (await HEAVY.data(runtime, "touch", "s2", value="inline"))["log"] == [
                    "heavy",
                    "inline",
                ]
                release.set()  # only now: s2 was served while s1's handler was blocked
        assert outcomes["s1"]["log"] == ["slow"]
        assert tally.released == [True]

    async def test_heavy_calls_to_one_key_run_one_at_a_time_in_arrival_order(self) -> None:
        """Invariant 3 holds off the loop: one thread at a time per key, in order."""
        tally = Tally()
        values = [f"v{n}" for n in range(8)]
        logs: list[list[str]] = []

        async def append(runtime: Runtime, value: str) -> None:
            logs.append((await HEAVY.data(runtime, "work", "s", value=value))["log"])

        async with running(heavy_module(tally, Blocker(threading.Event()))) as runtime:
            async with trio.open_nursery() as nursery:
                for value in values:
                    nursery.start_soon(append, runtime, value)
                    await trio.testing.wait_all_tasks_blocked()
        assert max(logs, key=len) == values
        assert tally.most == 1

    async def test_errors_in_the_thread_are_error_results_and_the_key_keeps_serving(
        self,
    ) -> None:
        """A ToolError keeps its exact text; another exception is named; the actor lives on."""
        tally = Tally()
        async with running(heavy_module(tally, Blocker(threading.Event()))) as runtime:
            refused = await HEAVY.call(runtime, "refuse", "s")
            failed = await HEAVY.call(runtime, "fail", "s")
            after = await HEAVY.data(runtime, "work", "s", value="after")
            statistics = runtime.statistics()
        assert (refused.is_error, refused.first_text) == (True, "Permission denied: not yours")
        assert failed.is_error
        assert failed.first_text == ("tool 'heavy__fail' failed: ValueError: the thread broke")
        assert after["log"] == ["after"]
        assert (statistics.crashed, statistics.errors) == (0, 2)

    async def test_a_cancelled_caller_does_not_stop_the_thread(
        self, release: threading.Event
    ) -> None:
        """As inline: the handler completes against the state, and the reply is dropped."""
        tally, blocker = Tally(), Blocker(release)
        async with running(heavy_module(tally, blocker)) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: HEAVY.data(runtime, "work", "s", value="dropped", block=True)
                )
                await blocker.entered.wait()
                nursery.cancel_scope.cancel()
            release.set()
            assert (await HEAVY.data(runtime, "touch", "s", value="next"))["log"] == [
                "dropped",
                "next",
            ]


class TestDeadline:
    async def test_a_timed_out_heavy_call_answers_at_once_and_its_key_waits_for_the_thread(
        self, mock_clock: trio.testing.MockClock, release: threading.Event
    ) -> None:
        """CallTimeoutError now; the key's next call runs only once the thread has ended."""
        tally, blocker = Tally(), Blocker(release)
        timed_out = trio.Event()
        next_logs: list[list[str]] = []

        async def slow(runtime: Runtime) -> None:
            with pytest.raises(
                CallTimeoutError,
                match=r"^tool 'heavy__work' for heavy\(session='s'\) overran its 5 s deadline",
            ):
                await HEAVY.data(runtime, "work", "s", value="slow", block=True)
            timed_out.set()

        async def touch(runtime: Runtime) -> None:
            next_logs.append((await HEAVY.data(runtime, "touch", "s", value="next"))["log"])

        async with running(heavy_module(tally, blocker), call_timeout=5) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow, runtime)
                await blocker.entered.wait()
                mock_clock.jump(5)
                await timed_out.wait()  # the caller is answered while the thread still blocks
                [actor] = runtime.actors()
                assert actor.pending == 1  # busy until the thread ends: not evictable
                nursery.start_soon(touch, runtime)
                await trio.testing.wait_all_tasks_blocked()
                assert tally.entries == ["slow"]  # the next call waits for the thread
                release.set()
            statistics = runtime.statistics()
        assert tally.entries == ["slow", "next"]
        assert tally.most == 1  # never two handlers on one state
        assert next_logs == [["slow", "next"]]  # what the thread did stays, its reply is dropped
        assert (statistics.timeouts, statistics.errors) == (1, 1)

    async def test_a_call_waiting_for_a_free_thread_times_out_without_running(
        self, mock_clock: trio.testing.MockClock, release: threading.Event
    ) -> None:
        """heavy_threads bounds the threads; a call's wait for one counts against its deadline."""
        tally, blocker = Tally(), Blocker(release)
        module = heavy_module(tally, blocker)
        timed_out: list[str] = []

        async def times_out(runtime: Runtime, session: str, block: bool) -> None:
            with pytest.raises(CallTimeoutError):
                await HEAVY.data(runtime, "work", session, value=session, block=block)
            timed_out.append(session)

        async with running(module, call_timeout=5, heavy_threads=1) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(times_out, runtime, "holder", True)
                await blocker.entered.wait()
                nursery.start_soon(times_out, runtime, "waiting", False)
                await trio.testing.wait_all_tasks_blocked()
                mock_clock.jump(5)
            assert sorted(timed_out) == ["holder", "waiting"]
            release.set()  # the holder's thread ends and frees the one thread
            after = await HEAVY.data(runtime, "work", "waiting", value="after")
        assert tally.entries == ["holder", "after"]  # the call that waited never ran
        assert after["log"] == ["after"]


class TestShutdown:
    async def test_after_the_grace_the_caller_is_told_and_the_runtime_exits_without_the_thread(
        self, autojump_clock: trio.testing.MockClock, release: threading.Event
    ) -> None:
        """Shutdown does not wait for a thread past shutdown_grace; the thread ends later."""
        tally, blocker = Tally(), Blocker(release)
        outcome: list[BaseException] = []

        async def stuck(runtime: Runtime) -> None:
            try:
                await HEAVY.data(runtime, "work", "s", value="stuck", block=True)
            except RuntimeClosedError as exc:
                outcome.append(exc)

        module = heavy_module(tally, blocker)
        async with trio.open_nursery() as nursery:
            async with running(module, shutdown_grace=2, call_timeout=None) as runtime:
                nursery.start_soon(stuck, runtime)
                await blocker.entered.wait()
        assert len(outcome) == 1
        assert "shut down before this call completed (shutdown_grace=2 s)" in str(outcome[0])
        assert runtime.statistics().live_actors == 0
        assert tally.running == 1  # the runtime is gone and the thread still blocks
        release.set()
        await until_idle(tally)  # it ends; its result goes nowhere
        assert tally.released == [True]

    async def test_on_stop_runs_once_an_abandoned_thread_has_ended(
        self, release: threading.Event
    ) -> None:
        """Invariant 1: on_stop never runs beside a thread still using the state."""
        tally, blocker = Tally(), Blocker(release)

        async def stuck(runtime: Runtime) -> None:
            with pytest.raises(RuntimeClosedError):
                await HEAVY.data(runtime, "work", "s", value="stuck", block=True)
            release.set()  # the caller was answered before the thread ended

        module = heavy_module(tally, blocker, on_stop=True)
        async with trio.open_nursery() as nursery:
            async with running(module, shutdown_grace=0, call_timeout=None) as runtime:
                nursery.start_soon(stuck, runtime)
                await blocker.entered.wait()
        assert tally.stops == [0]

    async def test_on_stop_is_skipped_when_the_thread_outlives_stop_timeout(
        self,
        autojump_clock: trio.testing.MockClock,
        release: threading.Event,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A thread that will not end leaves the state to it: no on_stop, and an error logged."""
        tally, blocker = Tally(), Blocker(release)
        module = heavy_module(tally, blocker, on_stop=True)
        config = {"shutdown_grace": 0, "stop_timeout": 1, "call_timeout": None}
        with caplog.at_level(logging.ERROR, logger="actors"):
            async with trio.open_nursery() as nursery:
                async with running(module, **config) as runtime:
                    nursery.start_soon(self._expect_closed, runtime)
                    await blocker.entered.wait()
        assert tally.stops == []
        assert (
            "on_stop of heavy(session='s') skipped: a heavy handler's thread still used the "
            "state after stop_timeout (1 s)"
        ) in caplog.text
        release.set()
        await until_idle(tally)

    @staticmethod
    async def _expect_closed(runtime: Runtime) -> None:
        with pytest.raises(RuntimeClosedError):
            await HEAVY.data(runtime, "work", "s", value="stuck", block=True)


def test_heavy_threads_must_be_positive() -> None:
    """No thread for heavy handlers would mean none of them could ever run."""
    with pytest.raises(ValueError, match=r"^heavy_threads must be positive, got 0$"):
        RuntimeConfig(heavy_threads=0)
