"""The runtime's invariants: routing, TTL, order, failure containment, bounds, shutdown.

Time-dependent tests run on trio's autojump clock, so they never sleep for real.
"""

from __future__ import annotations

import gc
import logging
import random
import weakref
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing

from actors import (
    ActorCrashedError,
    ArgumentsError,
    CallTimeoutError,
    CapacityError,
    Runtime,
    RuntimeClosedError,
    RuntimeConfig,
    ToolError,
    ToolModule,
    UnknownToolError,
    open_runtime,
)
from actors._actor import ActorLoop
from protocol import ActorKey, CallResult, ContextError, ContextPolicy, Scope, ToolContext

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable


@attrs.define
class Liveness:
    """Tracks which keys have a state alive, from the states' own lifecycle."""

    live: set[ActorKey] = attrs.field(factory=set)
    overlaps: int = 0
    stopped: list[ActorKey] = attrs.field(factory=list)
    final_logs: dict[ActorKey, list[str]] = attrs.field(factory=dict)

    def started(self, key: ActorKey) -> None:
        if key in self.live:
            self.overlaps += 1
        self.live.add(key)

    def ended(self, key: ActorKey) -> None:
        self.live.discard(key)
        self.stopped.append(key)


@attrs.define(eq=False)
class Box:
    """Test state: a log of values, plus hooks reporting to a Liveness."""

    key: ActorKey
    liveness: Liveness
    log: list[str] = attrs.field(factory=list)
    running: int = 0
    most_running: int = 0
    broken: bool = False

    def on_start(self) -> None:
        self.liveness.started(self.key)

    async def on_stop(self) -> None:
        await trio.sleep(0.001)  # a stop that takes time widens any race with restarts
        self.liveness.final_logs[self.key] = list(self.log)
        self.liveness.ended(self.key)

    def heal(self) -> None:
        if self.broken:
            raise RuntimeError("resource is beyond repair")


class Gate:
    """Lets a test hold a handler until it says so."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.release = trio.Event()


def box_module(
    liveness: Liveness,
    *,
    name: str = "box",
    scope: Scope = Scope.SESSION,
    ttl: float | None = None,
    gates: dict[str, Gate] | None = None,
    fail_first_start: bool = False,
) -> ToolModule[Box]:
    """A module whose state is a Box; `gates` lets tests hold `append` calls by value."""
    gates = {} if gates is None else gates
    starts = 0

    def new_box(context: ToolContext) -> Box:
        nonlocal starts
        starts += 1
        if fail_first_start and starts == 1:
            raise OSError("could not open the box")
        return Box(ActorKey(name, context), liveness)

    module: ToolModule[Box] = ToolModule(name, new_box, scope=scope, ttl=ttl)

    @module.tool
    async def append(state: Box, value: str) -> dict[str, Any]:
        """Append a value and return the log."""
        state.running += 1
        state.most_running = max(state.most_running, state.running)
        gate = gates.get(value)
        if gate is not None:
            gate.entered.set()
            await gate.release.wait()
        await trio.lowlevel.checkpoint()
        state.log.append(value)
        state.running -= 1
        return {"log": list(state.log), "key": str(state.key), "most_running": state.most_running}

    @module.tool
    def read(state: Box) -> dict[str, Any]:
        """Return the log."""
        return {"log": list(state.log), "key": str(state.key)}

    @module.tool
    def fail(state: Box, message: str) -> str:
        """Raise an ordinary exception."""
        raise ValueError(message)

    @module.tool
    def refuse(state: Box) -> str:
        """Raise a ToolError."""
        raise ToolError("Permission denied: not yours")

    @module.tool
    async def hang(state: Box) -> str:
        """Never return."""
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @module.tool
    async def nap(state: Box, seconds: float) -> str:
        """Sleep, then log that the nap completed."""
        await trio.sleep(seconds)
        state.log.append("napped")
        return "rested"

    @module.tool
    def break_state(state: Box) -> str:
        """Make the next heal() fail."""
        state.broken = True
        return "broken"

    return module


@asynccontextmanager
async def running(modules: Iterable[ToolModule[Any]], **config: Any) -> AsyncIterator[Runtime]:
    async with open_runtime(modules, RuntimeConfig(**config)) as runtime:
        yield runtime


async def append(runtime: Runtime, session: str, value: str, **extra: str) -> dict[str, Any]:
    result = await runtime.call_tool(
        "box__append", {"value": value, "__sessionId": session, **extra}
    )
    assert not result.is_error, result.first_text
    assert result.structured_content is not None
    return dict(result.structured_content)


async def read(runtime: Runtime, session: str) -> list[str]:
    result = await runtime.call_tool("box__read", {"__sessionId": session})
    assert result.structured_content is not None
    return list(result.structured_content["log"])


async def arrive_one_by_one(runtime: Runtime, session: str, values: list[str]) -> list[str]:
    """Start one concurrent append per value, each blocked before the next; the final log."""
    logs: list[list[str]] = []

    async def call(value: str) -> None:
        logs.append((await append(runtime, session, value))["log"])

    async with trio.open_nursery() as nursery:
        for value in values:
            nursery.start_soon(call, value)
            await trio.testing.wait_all_tasks_blocked()
    return max(logs, key=len)


class TestRouting:
    async def test_each_session_has_its_own_state(self) -> None:
        """Calls with different keys reach different states (invariant 2)."""
        async with running([box_module(Liveness())]) as runtime:
            await append(runtime, "s1", "one")
            await append(runtime, "s2", "two")
            assert await read(runtime, "s1") == ["one"]
            assert await read(runtime, "s2") == ["two"]

    async def test_the_route_names_the_key_whatever_the_context(self) -> None:
        """A prepared call runs on the actor of its route, which keys the state: a
        `PreparedCall` is public, and a context that disagrees must not name the key."""
        liveness = Liveness()
        async with running([box_module(liveness)]) as runtime:
            prepared = runtime.prepare({"name": "box__read", "arguments": {"__sessionId": "s9"}})
            rerouted = attrs.evolve(prepared, route=("box", "s1", None, None))
            await runtime.run(rerouted)
            assert [actor.key for actor in runtime.actors()] == [ActorKey("box", ToolContext("s1"))]

    async def test_scope_decides_what_shares_state(self) -> None:
        """Assistants share a SESSION-scoped state but not a SESSION_ASSISTANT one."""
        liveness = Liveness()
        shared = box_module(liveness, name="shared", scope=Scope.SESSION)
        private = box_module(liveness, name="private", scope=Scope.SESSION_ASSISTANT)
        async with running([shared, private]) as runtime:
            for module in ("shared", "private"):
                for assistant in ("a1", "a2"):
                    await runtime.call_tool(
                        f"{module}__append",
                        {"value": assistant, "__sessionId": "s", "__assistantId": assistant},
                    )
            probe = {"__sessionId": "s", "__assistantId": "a1"}
            shared_log = await runtime.call_tool("shared__read", probe)
            private_log = await runtime.call_tool("private__read", probe)
        assert shared_log.structured_content == {"log": ["a1", "a2"], "key": "shared(session='s')"}
        assert private_log.structured_content == {
            "log": ["a1"],
            "key": "private(session='s', assistant='a1')",
        }

    async def test_results_are_stamped_with_their_service(self) -> None:
        """Every content item carries the ServiceInfo of the tool that made it."""
        async with running([box_module(Liveness())]) as runtime:
            result = await runtime.call_tool("box__read", {"__sessionId": "s"})
        assert [item.service for item in result.content] == [
            runtime.registry.resolve("box__read").service
        ]

    async def test_context_may_come_from_meta(self) -> None:
        """`_meta.sessionId` routes like `__sessionId`."""
        async with running([box_module(Liveness())]) as runtime:
            await runtime.call_tool("box__append", {"value": "m"}, meta={"sessionId": "s9"})
            assert await read(runtime, "s9") == ["m"]

    async def test_bad_input_is_refused_before_any_actor_starts(self) -> None:
        """Unknown tools, bad arguments and bad context change nothing."""
        async with running([box_module(Liveness())]) as runtime:
            with pytest.raises(UnknownToolError, match=r"^unknown tool 'box__nope'; known tools: "):
                await runtime.call_tool("box__nope", {"__sessionId": "s"})
            with pytest.raises(ArgumentsError, match=r"value"):
                await runtime.call_tool("box__append", {"value": 3, "__sessionId": "s"})
            with pytest.raises(ValueError, match=r"^unknown context field '__sessionid'"):
                await runtime.call_tool("box__read", {"__sessionid": "s"})
            assert runtime.statistics().started == 0
            assert runtime.statistics().calls == 0

    async def test_a_call_without_a_session_is_defaulted_and_logged(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Lenient policy: the calls land in "default"; a warning says so, once for each tool."""
        caplog.set_level(logging.DEBUG, logger="actors")
        async with running([box_module(Liveness())]) as runtime:
            await runtime.call_tool("box__append", {"value": "lost context"})
            await runtime.call_tool("box__append", {"value": "lost again"})
            await runtime.call_tool("box__read")
            assert await read(runtime, "default") == ["lost context", "lost again"]
        defaulted = [
            (r.levelname, r.getMessage())
            for r in caplog.records
            if "named no session" in r.getMessage()
        ]
        assert defaulted == [
            (
                "WARNING",
                "call to box__append named no session; using 'default' (lenient context policy); "
                "later calls to it without one are logged at DEBUG",
            ),
            ("DEBUG", "call to box__append named no session; using 'default'"),
            (
                "WARNING",
                "call to box__read named no session; using 'default' (lenient context policy); "
                "later calls to it without one are logged at DEBUG",
            ),
        ]

    async def test_the_strict_policy_refuses_a_call_without_a_session(self) -> None:
        """Strict policy (require_session=True): no session, no call, no actor."""
        strict = ContextPolicy(require_session=True)
        async with running([box_module(Liveness())], policy=strict) as runtime:
            with pytest.raises(ContextError, match=r"^a session id is required"):
                await runtime.call_tool("box__append", {"value": "x"})
            assert runtime.statistics().started == 0

    async def test_handlers_see_clean_arguments_and_the_caller_dict_is_untouched(self) -> None:
        """Invariant 6: no context field reaches the handler; the caller's dict is unchanged."""
        seen: list[dict[str, Any]] = []
        module: ToolModule[None] = ToolModule("spy", lambda _context: None)

        @module.tool
        def record(state: None, context: ToolContext, text: str) -> str:
            """Record what the handler receives."""
            seen.append({"text": text, "context": context})
            return "ok"

        arguments = {"text": "hi", "__sessionId": "s", "__threadId": "t"}
        async with running([module]) as runtime:
            await runtime.call_tool("spy__record", arguments)
        assert seen == [{"text": "hi", "context": ToolContext("s", None, "t")}]
        assert arguments == {"text": "hi", "__sessionId": "s", "__threadId": "t"}


class TestOrder:
    async def test_calls_to_one_key_run_one_at_a_time_in_arrival_order(self) -> None:
        """Invariant 3: queued calls run serially, in the order they were accepted."""
        gates = {"first": Gate()}
        async with running([box_module(Liveness(), gates=gates)], mailbox_size=1) as runtime:
            results: dict[str, dict[str, Any]] = {}

            async def call(value: str) -> None:
                results[value] = await append(runtime, "s", value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "first")
                await gates["first"].entered.wait()
                order = [f"v{i}" for i in range(6)]
                for value in order:
                    nursery.start_soon(call, value)
                    # Each caller is accepted (or blocks on the full mailbox) before the next.
                    await trio.testing.wait_all_tasks_blocked()
                gates["first"].release.set()
            assert results["v5"]["log"] == ["first", *order]
            assert max(r["most_running"] for r in results.values()) == 1

    async def test_calls_arriving_while_the_actor_stops_keep_their_order(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Calls that find the key's actor in on_stop are served by its successor in order."""
        liveness = Liveness()
        async with running([box_module(liveness)], ttl=1) as runtime:
            await append(runtime, "s", "first")
            await trio.sleep(1.0005)  # expired; on_stop takes 1 ms, so it is stopping now
            assert runtime.statistics().expired == 1
            assert liveness.live  # still in on_stop
            order = [f"c{i}" for i in range(8)]
            assert await arrive_one_by_one(runtime, "s", order) == order
            assert liveness.overlaps == runtime.statistics().duplicate_actors == 0

    async def test_calls_waiting_for_room_keep_their_order(self) -> None:
        """Calls for a new key queue in order while its actor waits for an eviction."""
        gates = {"held": Gate()}
        async with running([box_module(Liveness(), gates=gates)], max_actors=1) as runtime:
            await append(runtime, "idle", "x")
            order = [f"c{i}" for i in range(8)]
            assert await arrive_one_by_one(runtime, "new", order) == order
            assert runtime.statistics().evicted == 1

    async def test_a_slow_key_does_not_delay_other_keys(self) -> None:
        """Invariant 7: a held call on one key leaves other keys fully served."""
        gates = {"held": Gate()}
        async with running([box_module(Liveness(), gates=gates)]) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "slow", "held")
                await gates["held"].entered.wait()
                for i in range(20):
                    await append(runtime, f"fast-{i % 3}", str(i))
                assert not gates["held"].release.is_set()
                gates["held"].release.set()


class TestTTL:
    async def test_idle_actors_expire_and_release_their_state(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """After the TTL the live count is zero and on_stop ran for every key."""
        liveness = Liveness()
        async with running([box_module(liveness)], ttl=60) as runtime:
            for session in ("a", "b", "c"):
                await append(runtime, session, "x")
            assert runtime.statistics().live_actors == 3
            await trio.sleep(61)
            stats = runtime.statistics()
            assert (stats.live_actors, stats.expired) == (0, 3)
            assert liveness.live == set()

    async def test_activity_postpones_expiry(self, autojump_clock: trio.testing.MockClock) -> None:
        """The TTL counts idle time: a key used every 50 s of a 60 s TTL stays alive."""
        async with running([box_module(Liveness())], ttl=60) as runtime:
            for value in "abcd":
                await append(runtime, "s", value)
                await trio.sleep(50)
            assert await read(runtime, "s") == list("abcd")
            assert runtime.statistics().expired == 0

    async def test_a_call_after_expiry_gets_fresh_state(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """State does not survive its actor."""
        async with running([box_module(Liveness())], ttl=1) as runtime:
            await append(runtime, "s", "old")
            await trio.sleep(2)
            assert await read(runtime, "s") == []
            assert runtime.statistics().started == 2

    async def test_module_ttl_overrides_the_runtime_default(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A module may set its own TTL."""
        async with running([box_module(Liveness(), ttl=5)], ttl=3600) as runtime:
            await append(runtime, "s", "x")
            await trio.sleep(6)
            assert runtime.statistics().live_actors == 0

    async def test_calls_racing_with_expiry_are_served_by_the_old_or_a_new_actor(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A caller waking exactly when the TTL fires is served, never failed (invariant 4)."""
        liveness = Liveness()
        async with running([box_module(liveness)], ttl=1) as runtime:
            for round_ in range(200):
                await append(runtime, "s", f"a{round_}")
                # Sleeping exactly the TTL puts this caller's wake-up and the
                # actor's expiry in the same scheduler batch, in random order.
                await trio.sleep(1)
            stats = runtime.statistics()
        assert stats.errors == 0
        assert stats.expired > 0, "the race was never exercised"
        assert stats.duplicate_actors == liveness.overlaps == 0

    async def test_churn_loses_no_call_and_never_doubles_an_actor(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """TTL near zero, many callers, shared keys: every call answered by its own key's actor."""
        liveness = Liveness()
        rng = random.Random(7)
        replies: list[tuple[str, str, dict[str, Any]]] = []

        async def caller(index: int, runtime: Runtime) -> None:
            for step in range(40):
                session = f"s{rng.randrange(40)}"
                value = f"{index}.{step}"
                replies.append((session, value, await append(runtime, session, value)))
                await trio.sleep(rng.choice([0, 0.0005, 0.001, 0.002, 0.005]))

        async with running([box_module(liveness)], ttl=0.001) as runtime:
            async with trio.open_nursery() as nursery:
                for index in range(25):
                    nursery.start_soon(caller, index, runtime)
            stats = runtime.statistics()
        assert len(replies) == 25 * 40 == stats.calls
        for session, value, reply in replies:
            assert reply["key"] == f"box(session={session!r})"
            assert reply["log"][-1] == value
        assert stats.errors == 0
        assert stats.expired > 300, "churn never happened"
        assert stats.duplicate_actors == liveness.overlaps == 0

    async def test_the_race_test_fails_with_a_naive_reaper(
        self, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Proof the race test can fail: killing an actor at its TTL, calls in flight or not."""

        kill_switches: dict[Any, trio.CancelScope] = {}
        run_actor = ActorLoop.run

        async def killable(self: ActorLoop, actor: Any) -> None:
            with trio.CancelScope() as kill_switches[actor]:
                await run_actor(self, actor)

        def kill_when_idle_too_long(self: Runtime, actor: Any, now: float) -> None:
            if actor.phase.accepting and actor.idle_since + actor.ttl <= now:
                kill_switches[actor].cancel()  # no look at the mailbox first
            elif actor.phase.accepting:
                self._expire_at(actor, actor.idle_since + actor.ttl)

        monkeypatch.setattr(ActorLoop, "run", killable)
        monkeypatch.setattr(Runtime, "_review", kill_when_idle_too_long)
        failures = 0
        async with running([box_module(Liveness())], ttl=1) as runtime:
            for round_ in range(200):
                try:
                    await append(runtime, "s", f"a{round_}")
                except RuntimeClosedError:
                    failures += 1
                await trio.sleep(1)
        assert failures > 0


class TestFailures:
    async def test_a_handler_exception_is_an_error_result_and_the_actor_keeps_serving(self) -> None:
        """The exception's text comes back as an error; the state survives."""
        async with running([box_module(Liveness())]) as runtime:
            await append(runtime, "s", "before")
            result = await runtime.call_tool("box__fail", {"message": "boom", "__sessionId": "s"})
            assert result.is_error
            assert result.first_text == "tool 'box__fail' failed: ValueError: boom"
            assert await read(runtime, "s") == ["before"]
            assert runtime.statistics().started == 1

    async def test_tool_error_text_is_exactly_the_message(self) -> None:
        """ToolError is how a handler returns a clean error result."""
        async with running([box_module(Liveness())]) as runtime:
            result = await runtime.call_tool("box__refuse", {"__sessionId": "s"})
        assert result.is_error
        assert result.first_text == "Permission denied: not yours"

    async def test_a_failing_state_factory_fails_only_that_call(self) -> None:
        """An actor that dies at start fails its call; the next call gets a fresh actor."""
        async with running([box_module(Liveness(), fail_first_start=True)]) as runtime:
            with pytest.raises(
                ActorCrashedError, match=r"^the actor for box\(session='s'\) crashed \(OSError"
            ):
                await append(runtime, "s", "lost")
            assert (await append(runtime, "s", "kept"))["log"] == ["kept"]
            stats = runtime.statistics()
        assert (stats.crashed, stats.started) == (1, 2)

    async def test_a_crash_fails_the_queued_calls_of_that_key_only(self) -> None:
        """A crashing actor answers every pending call with an error; other keys are unaffected."""
        gates = {"held": Gate()}
        liveness = Liveness()
        async with running([box_module(liveness, gates=gates)]) as runtime:
            await append(runtime, "other", "safe")
            outcomes: list[str] = []

            async def queued(value: str) -> None:
                try:
                    await append(runtime, "s", value)
                    outcomes.append("ok")
                except ActorCrashedError:
                    outcomes.append("crashed")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(queued, "held")
                await gates["held"].entered.wait()
                nursery.start_soon(self._break, runtime)
                await trio.testing.wait_all_tasks_blocked()
                for i in range(3):
                    nursery.start_soon(queued, f"q{i}")
                await trio.testing.wait_all_tasks_blocked()
                gates["held"].release.set()
            # "held" ran before the state broke; the heal before each queued call then fails.
            assert sorted(outcomes) == ["crashed", "crashed", "crashed", "ok"]
            assert await read(runtime, "other") == ["safe"]
            assert await read(runtime, "s") == []  # a fresh actor
            assert runtime.statistics().crashed == 1

    @staticmethod
    async def _break(runtime: Runtime) -> None:
        await runtime.call_tool("box__break_state", {"__sessionId": "s"})

    async def test_an_overrunning_handler_is_cancelled_and_the_key_keeps_serving(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """The per-call deadline names the tool and key; the next call on the key works."""
        async with running([box_module(Liveness())], call_timeout=5) as runtime:
            with pytest.raises(
                CallTimeoutError,
                match=r"^tool 'box__hang' for box\(session='s'\) overran its 5 s deadline",
            ):
                await runtime.call_tool("box__hang", {"__sessionId": "s"})
            assert (await append(runtime, "s", "after"))["log"] == ["after"]
            assert runtime.statistics().timeouts == 1


@attrs.define(eq=False)
class Ticker:
    """A state with a background task that counts, and a record of what on_stop saw."""

    ticks: int = 0
    running_at_stop: bool | None = None
    task_ended: trio.Event = attrs.field(factory=trio.Event)
    fail_after: int | None = None

    async def start_background(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._tick)

    async def _tick(self) -> None:
        try:
            while True:
                await trio.sleep(1)
                self.ticks += 1
                if self.fail_after is not None and self.ticks >= self.fail_after:
                    raise OSError("the watched resource vanished")
        finally:
            self.task_ended.set()

    def on_stop(self) -> None:
        self.running_at_stop = not self.task_ended.is_set()


def ticker_module(states: list[Ticker], fail_after: int | None = None) -> ToolModule[Ticker]:
    def new_ticker(_context: ToolContext) -> Ticker:
        states.append(Ticker(fail_after=fail_after if not states else None))
        return states[-1]

    module: ToolModule[Ticker] = ToolModule("ticker", new_ticker)

    @module.tool
    def ticks(state: Ticker) -> str:
        """How many ticks the background task counted."""
        return str(state.ticks)

    @module.tool
    async def nap(state: Ticker, seconds: float) -> str:
        """Sleep."""
        await trio.sleep(seconds)
        return "rested"

    return module


class TestBackgroundTasks:
    async def test_background_tasks_run_while_the_actor_serves(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A state's tasks live in its actor's nursery: they run between calls."""
        states: list[Ticker] = []
        async with running([ticker_module(states)]) as runtime:
            await runtime.call_tool("ticker__ticks", {"__sessionId": "s"})
            await trio.sleep(5.5)
            result = await runtime.call_tool("ticker__ticks", {"__sessionId": "s"})
        assert result.first_text == "5"

    async def test_on_stop_runs_before_the_tasks_are_cancelled(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """on_stop can wind its tasks down in order; nothing outlives the actor."""
        states: list[Ticker] = []
        async with running([ticker_module(states)], ttl=10) as runtime:
            await runtime.call_tool("ticker__ticks", {"__sessionId": "s"})
            await trio.sleep(11)
            assert runtime.statistics().live_actors == 0
        (state,) = states
        assert state.running_at_stop is True
        assert state.task_ended.is_set()

    async def test_tasks_outlive_a_call_cancelled_at_shutdown_until_on_stop_ran(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """When the grace period cancels a running call, on_stop still sees the tasks alive."""
        states: list[Ticker] = []
        outcome: list[str] = []

        async def nap(runtime: Runtime) -> None:
            try:
                await runtime.call_tool("ticker__nap", {"seconds": 60, "__sessionId": "s"})
            except RuntimeClosedError:
                outcome.append("closed")

        async with trio.open_nursery() as nursery:
            async with running([ticker_module(states)], shutdown_grace=1) as runtime:
                nursery.start_soon(nap, runtime)
                await trio.testing.wait_all_tasks_blocked()
        assert outcome == ["closed"]
        assert states[0].running_at_stop is True
        assert states[0].task_ended.is_set()

    async def test_a_failing_background_task_crashes_only_its_actor(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """The crash names the task's own exception; the next call gets a fresh actor."""
        states: list[Ticker] = []
        async with running([ticker_module(states, fail_after=2)]) as runtime:
            await runtime.call_tool("ticker__ticks", {"__sessionId": "s"})
            await trio.sleep(3)
            stats = runtime.statistics()
            assert (stats.crashed, stats.live_actors) == (1, 0)
            result = await runtime.call_tool("ticker__ticks", {"__sessionId": "s"})
        assert result.first_text == "0"
        assert len(states) == 2
        assert states[0].running_at_stop is False  # on_stop still ran, after the task died


class TestCancellation:
    async def test_a_caller_cancelled_while_queued_withdraws_its_call(self) -> None:
        """The call never runs: the state does not see it."""
        gates = {"held": Gate()}
        async with running([box_module(Liveness(), gates=gates)]) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "s", "held")
                await gates["held"].entered.wait()
                with trio.CancelScope() as scope:
                    nursery.start_soon(self._cancel_soon, scope)
                    await append(runtime, "s", "withdrawn")
                gates["held"].release.set()
            assert await read(runtime, "s") == ["held"]

    async def test_a_caller_cancelled_while_running_does_not_stop_the_call(self) -> None:
        """A started call completes against the state; only the reply is dropped."""
        gates = {"running": Gate()}
        async with running([box_module(Liveness(), gates=gates)]) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "s", "running")
                await gates["running"].entered.wait()  # it runs: the caller goes away now
                nursery.cancel_scope.cancel()
            gates["running"].release.set()
            assert await read(runtime, "s") == ["running"]

    @staticmethod
    async def _cancel_soon(scope: trio.CancelScope) -> None:
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()


class TestBounds:
    async def test_a_full_mailbox_makes_callers_wait(self) -> None:
        """Invariant 5: with mailbox_size=1, the third caller blocks until there is room."""
        gates = {"held": Gate()}
        async with running([box_module(Liveness(), gates=gates)], mailbox_size=1) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "s", "held")
                await gates["held"].entered.wait()
                for value in ("queued", "waiting"):
                    nursery.start_soon(append, runtime, "s", value)
                    await trio.testing.wait_all_tasks_blocked()  # accepted in this order
                (info,) = runtime.actors()
                assert info.pending == 3  # running + queued + blocked on send
                assert runtime.statistics().calls == 2  # the blocked one is not yet accepted
                gates["held"].release.set()
            assert await read(runtime, "s") == ["held", "queued", "waiting"]

    async def test_the_least_recently_used_idle_actor_is_evicted_at_the_cap(self) -> None:
        """At max_actors, a new key evicts the LRU idle actor, whose on_stop runs."""
        liveness = Liveness()
        async with running([box_module(liveness)], max_actors=2) as runtime:
            await append(runtime, "a", "1")
            await append(runtime, "b", "1")
            await append(runtime, "a", "2")  # now b is least recently used
            await append(runtime, "c", "1")
            keys = {info.key.context.session_id for info in runtime.actors()}
            assert keys == {"a", "c"}
            assert liveness.stopped == [ActorKey("box", ToolContext("b"))]
            assert runtime.statistics().evicted == 1

    async def test_a_busy_actor_is_never_evicted(self) -> None:
        """The LRU actor is skipped while it has a call; an idle one goes instead."""
        gates = {"held": Gate()}
        async with running([box_module(Liveness(), gates=gates)], max_actors=2) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "busy", "held")
                await gates["held"].entered.wait()
                await append(runtime, "idle", "1")
                await append(runtime, "new", "1")
                keys = {info.key.context.session_id for info in runtime.actors()}
                assert keys == {"busy", "new"}
                gates["held"].release.set()

    async def test_when_every_actor_is_busy_a_new_key_gets_a_capacity_error(self) -> None:
        """Nothing to evict: the new call is refused with a clear error, nothing lost."""
        gates = {"held": Gate()}
        async with running([box_module(Liveness(), gates=gates)], max_actors=1) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "busy", "held")
                await gates["held"].entered.wait()
                with pytest.raises(
                    CapacityError, match=r"^all 1 live actors are busy; raise max_actors"
                ):
                    await append(runtime, "other", "x")
                gates["held"].release.set()

    async def test_evicted_actors_are_not_kept_until_their_ttl(self) -> None:
        """Invariant 5: an actor that stops early is released now, not at its expiry time."""
        async with running([box_module(Liveness())], max_actors=1, ttl=3600) as runtime:
            await append(runtime, "first", "x")
            (info,) = runtime.actors()
            watched = weakref.ref(runtime._actors[next(iter(runtime._actors))])
            del info
            for i in range(100):  # each new key evicts the previous actor
                await append(runtime, f"k{i}", "x")
            gc.collect()
            assert runtime.statistics().evicted == 100
            assert watched() is None
            assert len(runtime._expiries) <= 4 * runtime.statistics().live_actors + 64

    async def test_an_idle_actor_keeps_nothing_of_its_last_call(self) -> None:
        """Invariant 5: a call's arguments and result are released when it is answered."""
        module: ToolModule[None] = ToolModule("big", lambda _context: None)

        @module.tool
        def make(state: None, marker: str) -> CallResult:
            """Return a result the test can watch."""
            return CallResult.text(marker)

        async with running([module]) as runtime:
            result = await runtime.call_tool("big__make", {"marker": "m", "__sessionId": "s"})
            watched = weakref.ref(result)
            del result
            gc.collect()
            assert runtime.statistics().live_actors == 1
            assert watched() is None

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("ttl", 0, r"^ttl must be positive, got 0$"),
            ("mailbox_size", 0, r"^mailbox_size must be positive, got 0$"),
            ("max_actors", -1, r"^max_actors must be positive, got -1$"),
            ("call_timeout", 0, r"^call_timeout must be positive, got 0$"),
            ("shutdown_grace", -1, r"^shutdown_grace must be zero or more, got -1$"),
        ],
    )
    def test_bad_configuration_is_refused(self, field: str, value: float, message: str) -> None:
        """Each nonsensical setting is refused, naming it."""
        with pytest.raises(ValueError, match=message):
            RuntimeConfig(**{field: value})


class TestShutdown:
    async def test_in_flight_calls_finish_within_the_grace_period(self) -> None:
        """Leaving the block lets accepted calls complete, then stops every actor."""
        gates = {"held": Gate()}
        liveness = Liveness()
        results: list[dict[str, Any]] = []

        async def call(runtime: Runtime) -> None:
            results.append(await append(runtime, "s", "held"))

        async with trio.open_nursery() as nursery:
            async with running([box_module(liveness, gates=gates)], shutdown_grace=10) as runtime:
                nursery.start_soon(call, runtime)
                await gates["held"].entered.wait()
                nursery.start_soon(self._release_later, gates["held"])
        assert [r["log"] for r in results] == [["held"]]
        assert liveness.live == set()
        assert runtime.statistics().live_actors == 0

    async def test_calls_after_shutdown_are_refused(self) -> None:
        """A closed runtime says so instead of starting actors."""
        async with running([box_module(Liveness())]) as runtime:
            pass
        with pytest.raises(RuntimeClosedError, match=r"^the runtime is shutting down"):
            await append(runtime, "s", "late")

    async def test_calls_overrunning_the_grace_period_are_cancelled_and_told(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """After the grace period a running call is cancelled; its caller is told so."""
        liveness = Liveness()
        outcome: list[BaseException] = []

        async def call(runtime: Runtime) -> None:
            try:
                await runtime.call_tool("box__hang", {"__sessionId": "s"})
            except RuntimeClosedError as exc:
                outcome.append(exc)

        async with (
            trio.open_nursery() as nursery,
            running([box_module(liveness)], shutdown_grace=2, call_timeout=None) as runtime,
        ):
            nursery.start_soon(call, runtime)
            await trio.testing.wait_all_tasks_blocked()
        assert len(outcome) == 1
        assert "shut down before this call completed (shutdown_grace=2 s)" in str(outcome[0])
        assert liveness.live == set()

    async def test_cancelling_the_block_from_outside_still_honours_the_grace(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Cancelling the code around the runtime does not cut an accepted call short."""
        liveness = Liveness()
        with trio.move_on_after(1):
            async with running([box_module(liveness)], shutdown_grace=10) as runtime:
                await runtime.call_tool("box__nap", {"seconds": 3, "__sessionId": "s"})
        assert liveness.final_logs == {ActorKey("box", ToolContext("s")): ["napped"]}

    @staticmethod
    async def _release_later(gate: Gate) -> None:
        await trio.testing.wait_all_tasks_blocked()  # the shutdown waits for the held call
        gate.release.set()


class TestIntrospection:
    async def test_actors_lists_keys_with_last_use(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """actors() shows every live key, least recently used first, with its last use."""
        async with running([box_module(Liveness())]) as runtime:
            await append(runtime, "a", "x")
            await trio.sleep(5)
            await append(runtime, "b", "x")
            infos = runtime.actors()
        assert [info.key.context.session_id for info in infos] == ["a", "b"]
        assert infos[1].last_used - infos[0].last_used == pytest.approx(5)
        assert all(info.accepting and info.pending == 0 for info in infos)
