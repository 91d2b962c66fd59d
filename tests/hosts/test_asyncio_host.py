"""The runtime inside an asyncio program: trio in guest mode, behind `open_asyncio_runtime`.

Each test is a plain function that runs its scenario with ``asyncio.run``.
Handlers are held by trio events that other calls set, so nothing depends on
how long anything takes; the few short sleeps are steps a handler takes, not
bounds anything is measured against.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import pytest
import trio

from actors import (
    Answer,
    ArgumentsError,
    AsyncioRuntime,
    CallTimeoutError,
    RuntimeClosedError,
    RuntimeConfig,
    ToolError,
    ToolModule,
    UnknownToolError,
    open_asyncio_runtime,
    open_runtime,
)
from actors.lowlevel import CallRecord, Observer
from actors.modules import planning
from actors.store import StoreError
from protocol import ActorKey, CallResult, ContextError, ToolContext

from ..core.test_resources import asking_module

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Mapping, Sequence
    from pathlib import Path

T = TypeVar("T")


class Gate:
    """Holds `hold` calls until a `release` call; `wait_entered` returns once one holds."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.release = trio.Event()


@attrs.define(eq=False)
class Log:
    """Test state: the values appended to one key, and a shared record of lifecycle events."""

    key: ActorKey
    events: list[str]
    items: list[str] = attrs.field(factory=list)

    async def on_stop(self) -> None:
        await trio.lowlevel.checkpoint()
        self.events.append(f"on_stop {self.key.context.session_id} {self.items}")


def log_module(gate: Gate, events: list[str]) -> ToolModule[Log]:
    """A module whose calls can be held, failed, timed out and used to crash the trio run."""
    module: ToolModule[Log] = ToolModule(
        "log", lambda context: Log(ActorKey("log", context), events)
    )

    def items(state: Log) -> dict[str, Any]:
        return {"items": list(state.items)}

    @module.tool
    async def append(state: Log, value: str) -> dict[str, Any]:
        """Append a value."""
        await trio.lowlevel.checkpoint()
        state.items.append(value)
        return items(state)

    @module.tool
    def note(state: Log, value: str) -> dict[str, Any]:
        """Append a value inline: no await, so no call deadline applies to it."""
        state.items.append(value)
        return items(state)

    @module.tool(read_only=True)
    def read(state: Log) -> dict[str, Any]:
        """The values appended so far."""
        return items(state)

    @module.tool
    async def hold(state: Log, value: str) -> dict[str, Any]:
        """Wait for the gate, then append."""
        gate.entered.set()
        await gate.release.wait()
        state.items.append(value)
        return items(state)

    @module.tool
    async def nap(state: Log, seconds: float) -> dict[str, Any]:
        """Say it started, sleep, then append "napped"."""
        gate.entered.set()
        await trio.sleep(seconds)
        state.items.append("napped")
        return items(state)

    @module.tool
    async def wait_entered(state: Log) -> str:
        """Return once a hold or nap call has started."""
        await gate.entered.wait()
        return "entered"

    @module.tool
    def release(state: Log) -> str:
        """Let held calls go on."""
        gate.release.set()
        return "released"

    @module.tool
    def fail(state: Log, message: str) -> str:
        """Raise an ordinary exception."""
        raise ValueError(message)

    @module.tool
    def refuse(state: Log) -> str:
        """Raise a ToolError."""
        raise ToolError("Permission denied: not yours")

    @module.tool
    async def hang(state: Log) -> str:
        """Never return."""
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @module.tool
    def crash_the_run(state: Log) -> str:
        """Make the whole trio run fail: a system task that raises ends it."""

        async def boom() -> None:
            raise OSError("the trio run broke")

        trio.lowlevel.spawn_system_task(boom)
        return "crashing"

    return module


def session(session_id: str, /, **arguments: Any) -> dict[str, Any]:
    return {**arguments, "__sessionId": session_id}


CONTROL = session("control")


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


async def items(runtime: AsyncioRuntime, name: str) -> list[str]:
    result = await runtime.call_tool("log__read", session(name))
    assert result.structured_content is not None, result.first_text
    return list(result.structured_content["items"])


async def until(condition: Callable[[], bool]) -> None:
    """Let both loops run until `condition` holds (trio's work arrives in loop callbacks)."""
    # Polling: the condition is trio-side state, and nothing on the asyncio side signals it.
    while not condition():  # noqa: ASYNC110
        await asyncio.sleep(0.001)


def pending(runtime: AsyncioRuntime, name: str) -> int:
    """Calls accepted by the `log` actor of session `name` and not yet answered."""
    key = ActorKey("log", ToolContext(name))
    return sum(info.pending for info in runtime.actors() if info.key == key)


PLANNING_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("planning__create_goal", session("s1", goal="Learn Rust")),
    ("planning__create_goal", session("s2", goal="Bake bread")),
    ("planning__add_todo", session("s1", name="Read the book")),
    ("planning__mark_todo", session("s1", todo_id="t9")),
    ("planning__list_goals", session("s1")),
    ("planning__list_goals", session("s2")),
    ("planning__get_planning_state", session("s1")),
]


async def trio_results(calls: list[tuple[str, dict[str, Any]]]) -> list[CallResult]:
    async with open_runtime([planning]) as runtime:
        return [await runtime.call_tool(name, arguments) for name, arguments in calls]


class TestCalls:
    def test_results_equal_the_trio_runtimes(self) -> None:
        """The same calls give equal results through the asyncio handle and through trio."""

        async def scenario() -> list[CallResult]:
            async with open_asyncio_runtime([planning]) as runtime:
                return [await runtime.call_tool(n, a) for n, a in PLANNING_CALLS]

        expected = trio.run(trio_results, PLANNING_CALLS)
        assert run(scenario) == expected
        assert expected[-3].first_text == "Goals (1):\n- g1: Learn Rust"

    def test_call_takes_a_tools_call_mapping_and_end_session_forgets(self) -> None:
        """`call` takes name/arguments/_meta; `end_session` stops the session's actors."""

        async def scenario() -> tuple[str, int, str, int]:
            async with open_asyncio_runtime([planning]) as runtime:
                create = {"name": "planning__create_goal", "arguments": {"goal": "Ship"}}
                await runtime.call({**create, "_meta": {"sessionId": "m"}})
                listed = await runtime.call_tool("planning__list_goals", meta={"sessionId": "m"})
                live = runtime.statistics().live_actors
                deleted = await runtime.end_session("m")
                after = await runtime.call_tool("planning__list_goals", session("m"))
                return listed.first_text, live, after.first_text, deleted

        listed, live, after, deleted = run(scenario)
        assert (listed, live, deleted) == ("Goals (1):\n- g1: Ship", 1, 0)
        assert after == "No goals yet."

    def test_a_hundred_concurrent_tasks_see_only_their_own_sessions_goals(self) -> None:
        """Invariant 2 through the bridge: 100 asyncio tasks, 100 sessions, no leakage."""

        async def one(runtime: AsyncioRuntime, i: int) -> str:
            for k in range(3):
                await runtime.call_tool("planning__create_goal", session(f"s{i}", goal=f"{i}-{k}"))
            listed = await runtime.call_tool("planning__list_goals", session(f"s{i}"))
            return listed.first_text

        async def scenario() -> list[str]:
            async with open_asyncio_runtime([planning]) as runtime:
                return await asyncio.gather(*(one(runtime, i) for i in range(100)))

        for i, text in enumerate(run(scenario)):
            assert text == f"Goals (3):\n- g1: {i}-0\n- g2: {i}-1\n- g3: {i}-2"

    def test_calls_on_one_key_are_served_in_the_order_asyncio_made_them(self) -> None:
        """Invariant 3: tasks started together on one key run in the order they called.

        Trio reverses the order of each scheduling pass half the time, so 20
        rounds of 10 callers would catch a bridge that let them race.
        """

        async def scenario() -> list[list[str]]:
            async with open_asyncio_runtime([log_module(Gate(), [])]) as runtime:
                for round_ in range(20):
                    name = f"round-{round_}"
                    await asyncio.gather(
                        *(
                            runtime.call_tool("log__append", session(name, value=str(i)))
                            for i in range(10)
                        )
                    )
                return [await items(runtime, f"round-{r}") for r in range(20)]

        expected = [str(i) for i in range(10)]
        assert run(scenario) == [expected] * 20

    def test_order_holds_under_backpressure(self) -> None:
        """200 callers on one key with a 4-call mailbox are all served, in order."""

        async def scenario() -> list[str]:
            gate = Gate()
            config = RuntimeConfig(mailbox_size=4)
            async with open_asyncio_runtime([log_module(gate, [])], config) as runtime:
                first = asyncio.create_task(
                    runtime.call_tool("log__hold", session("s", value="first"))
                )
                await runtime.call_tool("log__wait_entered", CONTROL)
                rest = [
                    asyncio.create_task(
                        runtime.call_tool("log__append", session("s", value=str(i)))
                    )
                    for i in range(200)
                ]
                await until(
                    lambda: pending(runtime, "s") == 201
                )  # all routed: 4 queued, 196 blocked
                await runtime.call_tool("log__release", CONTROL)
                await asyncio.gather(first, *rest)
                return await items(runtime, "s")

        assert run(scenario) == ["first", *(str(i) for i in range(200))]


class TestErrors:
    def test_bad_input_raises_the_runtimes_exceptions_and_sends_nothing(self) -> None:
        """UnknownToolError, ArgumentsError, ContextError: refused before anything reaches trio."""
        arguments = {"value": 3, "__sessionId": "s"}

        async def scenario() -> AsyncioRuntime:
            async with open_asyncio_runtime([log_module(Gate(), [])]) as runtime:
                with pytest.raises(UnknownToolError, match=r"^unknown tool 'log__nope'"):
                    await runtime.call_tool("log__nope", session("s"))
                with pytest.raises(ArgumentsError, match=r"value"):
                    await runtime.call_tool("log__append", arguments)
                with pytest.raises(ContextError, match=r"^unknown context field '__sessionid'"):
                    await runtime.call_tool("log__read", {"__sessionid": "s"})
                assert runtime.statistics().calls == 0
                return runtime

        run(scenario)
        assert arguments == {"value": 3, "__sessionId": "s"}

    def test_tool_errors_are_results_and_timeouts_raise(self) -> None:
        """A ToolError or a failing handler is an is_error result; an overrun, CallTimeoutError."""

        async def scenario() -> tuple[CallResult, CallResult, list[str]]:
            config = RuntimeConfig(call_timeout=0.05)
            async with open_asyncio_runtime([log_module(Gate(), [])], config) as runtime:
                refused = await runtime.call_tool("log__refuse", session("s"))
                failed = await runtime.call_tool("log__fail", session("s", message="boom"))
                with pytest.raises(CallTimeoutError, match=r"^tool 'log__hang' for .* overran"):
                    await runtime.call_tool("log__hang", session("s"))
                # Inline, so that the short deadline meant for log__hang cannot cut it off.
                after = await runtime.call_tool("log__note", session("s", value="still served"))
                assert after.structured_content is not None
                return refused, failed, after.structured_content["items"]

        refused, failed, served = run(scenario)
        assert (refused.is_error, refused.first_text) == (True, "Permission denied: not yours")
        assert failed.is_error
        assert failed.first_text == "tool 'log__fail' failed: ValueError: boom"
        assert served == ["still served"]


class TestCancellation:
    def test_a_caller_cancelled_while_its_call_is_queued_withdraws_it(self) -> None:
        """Cancelled in the key's mailbox, behind a held call: it never runs."""

        async def scenario() -> tuple[list[str], int]:
            async with open_asyncio_runtime([log_module(Gate(), [])]) as runtime:
                holder = asyncio.create_task(
                    runtime.call_tool("log__hold", session("s", value="held"))
                )
                await runtime.call_tool("log__wait_entered", CONTROL)
                queued = asyncio.create_task(
                    runtime.call_tool("log__append", session("s", value="withdrawn"))
                )
                await until(lambda: pending(runtime, "s") == 2)  # in the mailbox, not running
                queued.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await queued
                await runtime.call_tool("log__release", CONTROL)
                await holder
                return await items(runtime, "s"), runtime.statistics().calls

        log, calls = run(scenario)
        assert log == ["held"]
        assert calls == 5  # hold, wait_entered, the withdrawn append, release, read

    def test_a_caller_cancelled_before_its_call_crosses_sends_nothing(self) -> None:
        """Cancelled while still in the bridge's queue: the runtime never sees the call."""

        async def scenario() -> tuple[list[str], int]:
            async with open_asyncio_runtime([log_module(Gate(), [])]) as runtime:
                task = asyncio.create_task(
                    runtime.call_tool("log__append", session("s", value="x"))
                )
                await asyncio.sleep(0)  # entered in the queue; trio has not run since
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                return await items(runtime, "s"), runtime.statistics().calls

        assert run(scenario) == ([], 1)

    def test_a_caller_cancelled_after_its_call_started_does_not_stop_it(self) -> None:
        """The handler runs to completion against the state; only the reply is dropped."""

        async def scenario() -> list[str]:
            async with open_asyncio_runtime([log_module(Gate(), [])]) as runtime:
                task = asyncio.create_task(
                    runtime.call_tool("log__hold", session("s", value="done"))
                )
                await runtime.call_tool("log__wait_entered", CONTROL)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await runtime.call_tool("log__release", CONTROL)
                return await items(runtime, "s")  # queued behind the held call

        assert run(scenario) == ["done"]


class TestShutdown:
    def test_calls_in_flight_at_exit_finish_within_the_grace_and_on_stop_runs_first(self) -> None:
        """Leaving the block lets accepted calls finish; every on_stop runs before it ends."""
        events: list[str] = []

        async def scenario() -> CallResult:
            config = RuntimeConfig(shutdown_grace=60)
            async with open_asyncio_runtime([log_module(Gate(), events)], config) as runtime:
                napping = asyncio.create_task(
                    runtime.call_tool("log__nap", session("s", seconds=0.01))
                )
                await runtime.call_tool("log__wait_entered", CONTROL)
            events.append("left the block")
            return await napping

        result = run(scenario)
        assert result.structured_content == {"items": ["napped"]}
        assert sorted(events[:2]) == ["on_stop control []", "on_stop s ['napped']"]
        assert events[2:] == ["left the block"]

    def test_calls_cut_off_by_shutdown_get_runtime_closed_error(self) -> None:
        """Past shutdown_grace a running call is cancelled: its asyncio caller is told, not hung."""
        events: list[str] = []

        async def scenario() -> None:
            config = RuntimeConfig(shutdown_grace=0)
            async with open_asyncio_runtime([log_module(Gate(), events)], config) as runtime:
                held = asyncio.create_task(runtime.call_tool("log__hold", session("s", value="x")))
                await runtime.call_tool("log__wait_entered", CONTROL)
            with pytest.raises(
                RuntimeClosedError, match=r"^the runtime shut down before this call"
            ):
                await held

        run(scenario)
        assert "on_stop s []" in events

    def test_cancelling_the_task_holding_the_block_still_shuts_down_in_order(self) -> None:
        """The block's task is cancelled: accepted calls finish, on_stop runs, then it leaves."""
        events: list[str] = []
        napping: list[asyncio.Task[CallResult]] = []

        async def holder(ready: asyncio.Event) -> None:
            config = RuntimeConfig(shutdown_grace=60)
            try:
                async with open_asyncio_runtime([log_module(Gate(), events)], config) as runtime:
                    call = runtime.call_tool("log__nap", session("s", seconds=0.01))
                    napping.append(asyncio.create_task(call))
                    await runtime.call_tool("log__wait_entered", CONTROL)
                    ready.set()
                    await asyncio.Event().wait()  # until cancelled
            finally:
                events.append("left the block")

        async def scenario() -> CallResult:
            ready = asyncio.Event()
            task = asyncio.create_task(holder(ready))
            await ready.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return await napping[0]

        assert run(scenario).structured_content == {"items": ["napped"]}
        assert sorted(events[:2]) == ["on_stop control []", "on_stop s ['napped']"]
        assert events[2:] == ["left the block"]

    def test_a_cancellation_that_arrives_during_shutdown_does_not_cut_it_short(self) -> None:
        """Cancelled again while the runtime stops: it still waits, then raises CancelledError.

        asyncio delivers each cancellation once, so the one that arrives while
        the block is waiting for the trio run is the one that needs handling.
        """
        events: list[str] = []
        gate = Gate()
        state: dict[str, Any] = {}

        async def holder(ready: asyncio.Event) -> None:
            config = RuntimeConfig(shutdown_grace=60)
            try:
                async with open_asyncio_runtime([log_module(gate, events)], config) as runtime:
                    state["token"] = trio.lowlevel.current_trio_token()  # the guest run's
                    call = runtime.call_tool("log__hold", session("s", value="late"))
                    state["held"] = asyncio.create_task(call)
                    await runtime.call_tool("log__wait_entered", CONTROL)
                    ready.set()
                    await asyncio.Event().wait()  # until cancelled
            finally:
                events.append("left the block")

        async def scenario() -> CallResult:
            ready = asyncio.Event()
            task = asyncio.create_task(holder(ready))
            await ready.wait()
            task.cancel()
            await asyncio.sleep(0)  # the block's exit now waits for the held call
            task.cancel()
            await asyncio.sleep(0)
            assert events == []
            # The block no longer takes calls: release the held one from trio's side.
            state["token"].run_sync_soon(gate.release.set)
            with pytest.raises(asyncio.CancelledError):
                await task
            held: asyncio.Task[CallResult] = state["held"]
            return await held

        assert run(scenario).structured_content == {"items": ["late"]}
        assert sorted(events[:2]) == ["on_stop control []", "on_stop s ['late']"]
        assert events[2:] == ["left the block"]

    def test_calls_after_the_block_raise_runtime_closed_error_at_once(self) -> None:
        """A handle kept past its block refuses calls with a message saying why."""

        async def scenario() -> AsyncioRuntime:
            async with open_asyncio_runtime([planning]) as runtime:
                pass
            return runtime

        async def late(runtime: AsyncioRuntime) -> None:
            message = r"^the runtime is closed: its open_asyncio_runtime block has ended$"
            with pytest.raises(RuntimeClosedError, match=message):
                await runtime.call_tool("planning__list_goals", session("s"))
            with pytest.raises(RuntimeClosedError, match=message):
                await runtime.end_session("s")

        async def both() -> None:
            await late(await scenario())

        run(both)

    def test_a_crashed_trio_run_fails_its_calls_in_flight(self) -> None:
        """The run ends under a running call: the caller gets RuntimeClosedError, not a hang."""
        held: list[asyncio.Task[CallResult]] = []

        async def crash() -> None:
            config = RuntimeConfig(shutdown_grace=0)
            async with open_asyncio_runtime([log_module(Gate(), [])], config) as runtime:
                call = runtime.call_tool("log__hold", session("s", value="x"))
                held.append(asyncio.create_task(call))
                await runtime.call_tool("log__wait_entered", CONTROL)
                await runtime.call_tool("log__crash_the_run", session("c"))
                await asyncio.wait(held)  # checked after the block: the crash it raises would hide

        async def scenario() -> None:
            with pytest.raises(trio.TrioInternalError):
                await crash()

        run(scenario)
        # The runtime's own shutdown answers it (invariant 4), before the run ends.
        with pytest.raises(RuntimeClosedError, match=r"^the runtime shut down before this call"):
            held[0].result()

    def test_calls_while_a_crashed_run_winds_down_are_refused(self) -> None:
        """Every call made as the run ends gets RuntimeClosedError; then it names the crash.

        A call at every turn of the loop meets each stage of the run's end; none
        may hang or get trio's own errors (RunFinishedError, a closed nursery's
        RuntimeError). They are collected, not raised: raised in the block, the
        crash raised on leaving it would hide them.
        """
        refusals: list[Exception] = []

        async def crash() -> None:
            config = RuntimeConfig(shutdown_grace=0)
            async with open_asyncio_runtime([log_module(Gate(), [])], config) as runtime:
                await runtime.call_tool("log__crash_the_run", session("c"))
                while trio.lowlevel.in_trio_run():
                    try:
                        await runtime.call_tool("log__read", session("s"))
                    except Exception as exc:
                        refusals.append(exc)
                    await asyncio.sleep(0)
                try:
                    await runtime.call_tool("log__read", session("s"))
                except Exception as exc:
                    refusals.append(exc)

        async def scenario() -> None:
            with pytest.raises(trio.TrioInternalError):
                await crash()

        run(scenario)
        assert refusals, "the run ended before any call was made"
        assert all(isinstance(exc, RuntimeClosedError) for exc in refusals), refusals
        assert str(refusals[-1]).startswith(
            "the runtime is closed: its trio run ended unexpectedly"
        )


class Seen(Observer):
    """What an observer hears: the tool of each call answered, and the thread it heard it in."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def call_finished(self, record: CallRecord) -> None:
        self.calls.append((record.tool, threading.current_thread().name))


class TestOpening:
    def test_an_observer_hears_every_call_on_the_loops_thread(self) -> None:
        seen = Seen()

        async def scenario() -> None:
            async with open_asyncio_runtime([planning], observer=seen) as runtime:
                await runtime.call_tool("planning__create_goal", {"goal": "g", **session("s")})
                await runtime.call_tool("planning__list_goals", session("s"))

        run(scenario)
        here = threading.current_thread().name
        assert seen.calls == [("planning__create_goal", here), ("planning__list_goals", here)]

    def test_a_second_handle_in_one_thread_is_refused_clearly(self) -> None:
        """Trio allows one run per thread: the second open says to share the handle."""

        async def scenario() -> str:
            async with open_asyncio_runtime([planning]) as runtime:
                with pytest.raises(RuntimeError, match=r"share the one AsyncioRuntime handle"):
                    async with open_asyncio_runtime([planning]):
                        pass
                result = await runtime.call_tool("planning__list_goals", session("s"))
            async with open_asyncio_runtime([planning]) as again:  # one after the other is fine
                await again.call_tool("planning__list_goals", session("s"))
            return result.first_text

        assert run(scenario) == "No goals yet."

    def test_a_bad_store_url_raises_its_own_error(self) -> None:
        """Startup errors come out as themselves, not in an exception group."""

        async def scenario() -> None:
            async with open_asyncio_runtime([planning], state="bogus://x"):
                raise AssertionError("unreachable")

        with pytest.raises(ValueError, match=r"^unknown state store URL 'bogus://x'"):
            run(scenario)

    def test_a_store_that_cannot_be_opened_raises_store_error(self, tmp_path: Path) -> None:
        """A SQLite file under a regular file cannot be created: StoreError, and no run is left."""
        (tmp_path / "file").write_text("not a folder")

        async def scenario() -> str:
            with pytest.raises(StoreError):
                async with open_asyncio_runtime(
                    [planning], state=f"sqlite:///{tmp_path}/file/s.db"
                ):
                    raise AssertionError("unreachable")
            async with open_asyncio_runtime([planning]) as runtime:
                return (await runtime.call_tool("planning__list_goals", session("s"))).first_text

        assert run(scenario) == "No goals yet."

    def test_state_survives_from_one_handle_to_the_next(self, tmp_path: Path) -> None:
        """With a SQLite store, a goal created under one handle is there under the next."""
        url = f"sqlite:///{tmp_path}/s.db"

        async def create() -> None:
            async with open_asyncio_runtime([planning], state=url) as runtime:
                await runtime.call_tool("planning__create_goal", session("s", goal="Persist"))

        async def listed() -> str:
            async with open_asyncio_runtime([planning], state=url) as runtime:
                return (await runtime.call_tool("planning__list_goals", session("s"))).first_text

        run(create)
        assert run(listed) == "Goals (1):\n- g1: Persist"

    def test_other_threads_are_refused_and_pointed_to_the_loop(self) -> None:
        """From another thread: a clear RuntimeError; run_coroutine_threadsafe works."""

        async def scenario() -> str:
            loop = asyncio.get_running_loop()
            async with open_asyncio_runtime([planning]) as runtime:

                def elsewhere() -> str:
                    with pytest.raises(RuntimeError, match=r"run_coroutine_threadsafe"):
                        runtime.statistics()
                    with pytest.raises(RuntimeError, match=r"outside the thread of the event loop"):
                        asyncio.run(runtime.call_tool("planning__list_goals", session("s")))
                    call = runtime.call_tool("planning__list_goals", session("s"))
                    return asyncio.run_coroutine_threadsafe(call, loop).result().first_text

                return await asyncio.to_thread(elsewhere)

        assert run(scenario) == "No goals yet."


# ---- questions: an asyncio-side Asker --------------------------------------------------

ASKED_BY: contextvars.ContextVar[str] = contextvars.ContextVar("asked_by", default="nobody")


@attrs.define
class LoopAsker:
    """An Asker of the asyncio side: it awaits asyncio, and notes what it saw there."""

    release: asyncio.Event = attrs.Factory(asyncio.Event)
    cancelled: asyncio.Event = attrs.Factory(asyncio.Event)
    seen: list[str] = attrs.Factory(list)

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        self.seen.append(f"{message} asked by {ASKED_BY.get()}")
        try:
            await self.release.wait()  # asyncio's: this runs on the loop, not in trio
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return Answer("accept", {"confirm": True})

    async def sample(self, messages: Sequence[Mapping[str, Any]], **_options: Any) -> str:
        raise NotImplementedError


class TestAsking:
    def test_a_question_runs_on_the_loop_in_the_callers_context(self) -> None:
        """`run(ask=)`: the question is an asyncio task with the caller's context variables."""
        asker = LoopAsker()

        async def scenario() -> CallResult:
            async with open_asyncio_runtime([asking_module()]) as runtime:
                ASKED_BY.set("the caller")
                call = runtime.prepare({"name": "asking__confirm", "_meta": {"sessionId": "s"}})
                answering = asyncio.create_task(runtime.run(call, ask=asker))
                await until(lambda: bool(asker.seen))
                asker.release.set()
                return await answering

        result = run(scenario)
        assert result.structured_content == {"action": "accept", "content": {"confirm": True}}
        assert asker.seen == ["Go ahead? asked by the caller"]

    def test_a_tool_past_its_deadline_cancels_its_question(self) -> None:
        """The tool's deadline ends its wait in trio, and the asyncio task asking is cancelled."""
        asker = LoopAsker()
        config = RuntimeConfig(call_timeout=0.05)

        async def scenario() -> None:
            async with open_asyncio_runtime([asking_module()], config) as runtime:
                call = runtime.prepare({"name": "asking__confirm", "_meta": {"sessionId": "s"}})
                with pytest.raises(CallTimeoutError):
                    await runtime.run(call, ask=asker)
                await asyncio.wait_for(asker.cancelled.wait(), timeout=60)

        run(scenario)
        assert not asker.release.is_set()
