"""The actor lifecycle: `Phase`, its one table of transitions, and a runtime that keeps to it.

The table is checked pair by pair against the transitions written out here; then real
runtimes are driven through retirement, succession, shutdown, a failed activation and a
failed background task, and every transition their actors make is recorded (by wrapping
`Actor.move_to`, the one way between phases) and read from the routing table.
"Until everything has settled" is `trio.testing.wait_all_tasks_blocked`, never a sleep.
"""

from __future__ import annotations

import itertools
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing

from actors import (
    ActorCrashedError,
    CapacityError,
    RuntimeClosedError,
    RuntimeConfig,
    ToolModule,
    open_runtime,
)
from actors import _actor as actor_module
from actors._actor import Actor, LifecycleError, Phase
from protocol import ActorKey, Scope, ToolContext

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actors import Runtime

STARTING, SERVING, RETIRING, STOPPING, FINISHED = (
    Phase.STARTING,
    Phase.SERVING,
    Phase.RETIRING,
    Phase.STOPPING,
    Phase.FINISHED,
)
ALLOWED = frozenset(
    {
        (STARTING, SERVING),  # the state made, on_start run
        (STARTING, RETIRING),  # retired before its state was made
        (SERVING, RETIRING),  # TTL, eviction, shutdown, hand-over, a session ended, a crash
        (SERVING, STOPPING),  # a background state's task failed
        (RETIRING, STOPPING),  # drained, with a state to stop
        (RETIRING, FINISHED),  # never had a state
        (STOPPING, FINISHED),
    }
)
"""Written out independently of ``actors._actor._NEXT``: the two must agree."""


def _actor_in(phase: Phase) -> Actor:
    send, receive = trio.open_memory_channel[Any](1)
    route = ("door", "s", None, None)
    actor = Actor(
        ActorKey("door", ToolContext("s")),
        route,
        _door_module(Hooks()),
        1.0,
        send,
        receive,
        0.0,
        0.0,
    )
    actor.phase = phase  # the set-up only: the runtime moves phases with move_to
    return actor


class TestTheTable:
    @pytest.mark.parametrize(("source", "target"), sorted(ALLOWED, key=str))
    def test_every_allowed_transition_is_taken(self, source: Phase, target: Phase) -> None:
        actor = _actor_in(source)
        actor.move_to(target)
        assert actor.phase is target

    @pytest.mark.parametrize(
        ("source", "target"),
        sorted(set(itertools.product(Phase, Phase)) - ALLOWED, key=str),
    )
    def test_every_other_transition_is_refused_and_changes_nothing(
        self, source: Phase, target: Phase
    ) -> None:
        actor = _actor_in(source)
        with pytest.raises(
            LifecycleError, match=rf"^BUG: .* cannot go from {source.name} to {target.name}; "
        ):
            actor.move_to(target)
        assert actor.phase is source

    def test_only_a_starting_or_serving_actor_takes_calls(self) -> None:
        assert {phase for phase in Phase if phase.accepting} == {STARTING, SERVING}

    @pytest.mark.parametrize("phase", [RETIRING, STOPPING, FINISHED])
    def test_retiring_an_actor_that_takes_no_calls_leaves_it_where_it_is(
        self, phase: Phase
    ) -> None:
        """Shutdown retires every running actor, whatever its phase."""
        actor = _actor_in(phase)
        actor.retire()
        assert actor.phase is phase


# ---- a module whose stop, calls and background task a test can hold -------------------


@attrs.define
class Hooks:
    """What the test holds: calls by value, every on_stop, the background task."""

    gates: dict[str, trio.Event] = attrs.field(factory=dict)
    entered: dict[str, trio.Event] = attrs.field(factory=dict)
    hold_stop: trio.Event | None = None  # on_stop waits for it, when set
    stops_entered: int = 0
    fail_background: trio.Event | None = None  # taken by the first background task only

    def hold(self, value: str) -> trio.Event:
        """Hold calls of `value` until the returned event is set."""
        self.entered[value] = trio.Event()
        self.gates[value] = trio.Event()
        return self.gates[value]


@attrs.define(eq=False)
class Door:
    hooks: Hooks
    log: list[str] = attrs.field(factory=list)

    async def on_stop(self) -> None:
        self.hooks.stops_entered += 1
        if self.hooks.hold_stop is not None:
            await self.hooks.hold_stop.wait()


@attrs.define(eq=False)
class WatchedDoor(Door):
    async def start_background(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._watch)

    async def _watch(self) -> None:
        fail, self.hooks.fail_background = self.hooks.fail_background, None
        if fail is None:
            await trio.sleep_forever()  # a successor's: it never fails
        else:
            await fail.wait()
            raise OSError("the watched resource vanished")


def _door_module(hooks: Hooks, *, background: bool = False) -> ToolModule[Door]:
    state = WatchedDoor if background else Door
    module: ToolModule[Door] = ToolModule("door", lambda _context: state(hooks), Scope.SESSION)

    @module.tool
    async def enter(door: Door, value: str) -> dict[str, list[str]]:
        """Append `value` (held while the test holds it) and return the log."""
        if value in hooks.gates:
            hooks.entered[value].set()
            await hooks.gates[value].wait()
        door.log.append(value)
        return {"log": list(door.log)}

    return module


@asynccontextmanager
async def _runtime(
    hooks: Hooks, *, background: bool = False, **config: Any
) -> AsyncIterator[Runtime]:
    async with open_runtime(
        [_door_module(hooks, background=background)], RuntimeConfig(**config)
    ) as runtime:
        yield runtime


async def _enter(runtime: Runtime, value: str, session: str = "s") -> list[str]:
    result = await runtime.call_tool("door__enter", {"value": value, "__sessionId": session})
    assert not result.is_error, result.first_text
    assert result.structured_content is not None
    return list(result.structured_content["log"])


def _current(runtime: Runtime, session: str = "s") -> Actor:
    """The actor the router sends `session`'s calls to now."""
    return runtime._actors[("door", session, None, None)]


@attrs.define
class Replies:
    """Calls a test starts in its nursery, and the logs they got back, by value."""

    runtime: Runtime
    got: dict[str, list[str]] = attrs.field(factory=dict)

    async def enter(self, value: str) -> None:
        self.got[value] = await _enter(self.runtime, value)


async def _retire_all(runtime: Runtime, nursery: trio.Nursery) -> None:
    """Hand every session over (which retires its actors) and let that go as far as it can."""
    nursery.start_soon(runtime.hand_over, lambda _session: True)
    await trio.testing.wait_all_tasks_blocked()


@attrs.define
class Journal:
    """Every transition of every actor, in order, as `Actor.move_to` made it."""

    moves: dict[Actor, list[Phase]] = attrs.field(factory=dict)

    def of(self, actor: Actor) -> list[Phase]:
        return self.moves.get(actor, [])


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> Journal:
    journal = Journal()
    move_to = Actor.move_to

    def recorded(actor: Actor, phase: Phase) -> None:
        move_to(actor, phase)
        journal.moves.setdefault(actor, []).append(phase)

    monkeypatch.setattr(Actor, "move_to", recorded)
    return journal


# ---- a runtime keeps to the phases ---------------------------------------------------


class TestARuntimeKeepsThePhases:
    async def test_an_actor_goes_through_every_phase_in_order(self, journal: Journal) -> None:
        async with _runtime(Hooks()) as runtime:
            assert await _enter(runtime, "a") == ["a"]
            actor = _current(runtime)
            assert actor.phase is SERVING
        assert journal.of(actor) == [SERVING, RETIRING, STOPPING, FINISHED]

    async def test_a_retired_actor_takes_no_call(self, journal: Journal) -> None:
        """Retired while a call runs, it finishes that call; the key's next one gets a successor."""
        hooks = Hooks()
        release = hooks.hold("first")
        async with _runtime(hooks) as runtime, trio.open_nursery() as nursery:
            replies = Replies(runtime)
            nursery.start_soon(replies.enter, "first")
            await hooks.entered["first"].wait()
            retired = _current(runtime)
            await _retire_all(runtime, nursery)
            assert retired.phase is RETIRING
            nursery.start_soon(replies.enter, "second")
            await trio.testing.wait_all_tasks_blocked()
            successor = _current(runtime)
            assert successor is not retired
            assert successor.predecessor is retired
            assert successor.phase is STARTING
            release.set()
        assert replies.got == {"first": ["first"], "second": ["second"]}  # a state each
        assert journal.of(retired) == [SERVING, RETIRING, STOPPING, FINISHED]
        assert journal.of(successor) == [SERVING, RETIRING, STOPPING, FINISHED]
        assert runtime.statistics().duplicate_actors == 0

    async def test_a_successor_makes_its_state_only_once_its_predecessor_finished(
        self, journal: Journal
    ) -> None:
        hooks = Hooks(hold_stop=trio.Event())
        assert hooks.hold_stop is not None
        async with _runtime(hooks) as runtime, trio.open_nursery() as nursery:
            await _enter(runtime, "first")
            predecessor = _current(runtime)
            await _retire_all(runtime, nursery)
            assert predecessor.phase is STOPPING  # its on_stop is held
            replies = Replies(runtime)
            nursery.start_soon(replies.enter, "second")
            await trio.testing.wait_all_tasks_blocked()
            successor = _current(runtime)
            assert successor.phase is STARTING  # calls queue; no state yet
            assert replies.got == {}
            assert hooks.stops_entered == 1
            hooks.hold_stop.set()
            await trio.testing.wait_all_tasks_blocked()
            assert predecessor.phase is FINISHED
            assert successor.phase is SERVING
            assert replies.got == {"second": ["second"]}
        assert journal.of(predecessor) == [SERVING, RETIRING, STOPPING, FINISHED]
        assert runtime.statistics().duplicate_actors == 0

    async def test_an_actor_retired_while_starting_serves_what_it_took_then_stops(
        self, journal: Journal
    ) -> None:
        """It never serves (takes no call), but makes its state for the calls it holds."""
        hooks = Hooks(hold_stop=trio.Event())
        assert hooks.hold_stop is not None
        async with _runtime(hooks) as runtime, trio.open_nursery() as nursery:
            await _enter(runtime, "first")
            await _retire_all(runtime, nursery)  # its on_stop is held
            replies = Replies(runtime)
            nursery.start_soon(replies.enter, "queued")
            await trio.testing.wait_all_tasks_blocked()
            successor = _current(runtime)
            await _retire_all(runtime, nursery)
            assert successor.phase is RETIRING
            hooks.hold_stop.set()
        assert replies.got == {"queued": ["queued"]}
        assert journal.of(successor) == [RETIRING, STOPPING, FINISHED]

    async def test_an_actor_that_found_no_room_finishes_without_a_state(
        self, journal: Journal
    ) -> None:
        """STARTING, RETIRING, FINISHED: no SERVING, no STOPPING (on_stop has nothing to stop)."""
        hooks = Hooks()
        release = hooks.hold("busy")
        async with _runtime(hooks, max_actors=1) as runtime, trio.open_nursery() as nursery:
            nursery.start_soon(_enter, runtime, "busy", "a")
            await hooks.entered["busy"].wait()
            with pytest.raises(CapacityError, match=r"^all 1 live actors are busy"):
                await _enter(runtime, "x", "b")
            (refused,) = (actor for actor in journal.moves if actor.key.context.session_id == "b")
            release.set()
        assert journal.of(refused) == [RETIRING, FINISHED]
        assert hooks.stops_entered == 1  # the busy actor's, at shutdown

    async def test_shutdown_cancels_what_overruns_the_grace(self, journal: Journal) -> None:
        hooks = Hooks()
        hooks.hold("forever")
        errors: list[BaseException] = []

        async def enter(runtime: Runtime) -> None:
            try:
                await _enter(runtime, "forever")
            except RuntimeClosedError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            async with _runtime(hooks, shutdown_grace=0) as runtime:
                nursery.start_soon(enter, runtime)
                await hooks.entered["forever"].wait()
                actor = _current(runtime)
        assert len(errors) == 1
        assert "shutdown_grace=0 s" in str(errors[0])
        assert actor.cancelled
        assert journal.of(actor) == [SERVING, RETIRING, STOPPING, FINISHED]

    async def test_a_failed_background_task_stops_the_state_at_once_and_calls_go_on(
        self, journal: Journal
    ) -> None:
        """SERVING to STOPPING: while its on_stop runs, the key's calls go to a successor."""
        fail = trio.Event()
        hooks = Hooks(hold_stop=trio.Event(), fail_background=fail)
        assert hooks.hold_stop is not None
        async with _runtime(hooks, background=True) as runtime, trio.open_nursery() as nursery:
            await _enter(runtime, "first")
            crashed = _current(runtime)
            fail.set()
            await trio.testing.wait_all_tasks_blocked()
            assert crashed.phase is STOPPING
            replies = Replies(runtime)
            nursery.start_soon(replies.enter, "after")
            await trio.testing.wait_all_tasks_blocked()
            assert _current(runtime) is not crashed
            hooks.hold_stop.set()
        assert replies.got == {"after": ["after"]}  # a fresh state, not an ActorCrashedError
        assert journal.of(crashed) == [SERVING, STOPPING, FINISHED]
        assert runtime.statistics().crashed == 1

    async def test_a_crash_before_serving_fails_the_calls_it_took(self, journal: Journal) -> None:
        """A state factory that raises: the actor never serves, its call gets the crash."""
        module: ToolModule[None] = ToolModule("broken", _no_state)

        @module.tool
        def noop(state: None) -> str:
            """Never runs."""
            return "ok"

        async with open_runtime([module]) as runtime:
            with pytest.raises(ActorCrashedError, match="no state today"):
                await runtime.call_tool("broken__noop", {"__sessionId": "s"})
        ((_, moves),) = journal.moves.items()
        assert moves == [RETIRING, FINISHED]


def _no_state(_context: ToolContext) -> None:
    raise OSError("no state today")


class TestAWrongTable:
    async def test_a_runtime_moved_against_a_wrong_table_fails_loudly(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The runtime moves phases through the table: one without RETIRING to STOPPING
        makes every stop a LifecycleError, which ends the runtime (it does not hang)."""
        wrong = dict(actor_module._NEXT)
        wrong[RETIRING] = frozenset({FINISHED})
        monkeypatch.setattr(actor_module, "_NEXT", wrong)
        with pytest.RaisesGroup(
            pytest.RaisesExc(LifecycleError, match=r"cannot go from RETIRING to STOPPING"),
            flatten_subgroups=True,
        ):
            async with _runtime(Hooks()) as runtime:
                await _enter(runtime, "a")
