"""Durable state: what a caller can rely on once a durable module's call is answered.

The state is loaded when its actor starts and written before each changing
call's reply; expiry, eviction, crashes, failed writes, timeouts and restarts
only cost memory; a blob that no longer loads is kept; the store's version
fence keeps one writer per key; ending a session and retention delete state.
Tests that need time run on trio's autojump clock, or wait with a bound.
"""

from __future__ import annotations

import json
import re
import threading
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from actors import (
    ActorCrashedError,
    CallTimeoutError,
    Durable,
    Runtime,
    RuntimeConfig,
    SessionEndingError,
    StateUnreadableError,
    ToolError,
    ToolModule,
    open_runtime,
)
from actors.lowlevel import Observer, StopReason
from actors.modules import content_store, planning, playbook_store
from actors.store import MemoryStore, Stored, StoreError, VersionConflict, open_store
from actors.store._batched import open_batched
from actors.store._sqlite import SqliteBackend
from protocol import ActorKey, CallResult, ToolContext

from .._calls import call_as
from ..runtime.test_runtime import Gate, Liveness, append, box_module

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Collection, Sequence
    from pathlib import Path

    from actors.store import PartChanges, StateStore
    from actors.store._batched import Conflict, Write


@attrs.define
class Tally:
    """A durable test state: the values added, in order."""

    values: list[str] = attrs.field(factory=list)


@attrs.define
class Switch:
    """A fault a test turns on and off."""

    on: bool = False


def tally_module(state_type: type[Tally] = Tally) -> ToolModule[Tally]:
    """A durable module whose tools add to, show, and leave alone a `Tally`."""
    module: ToolModule[Tally] = ToolModule(
        "tally", lambda _context: state_type(), durable=Durable(state_type)
    )

    @module.tool
    def add(state: Tally, value: str) -> dict[str, Any]:
        """Append a value."""
        state.values.append(value)
        return attrs.asdict(state)

    @module.tool
    def touch(state: Tally) -> dict[str, Any]:
        """Change nothing, without saying so."""
        return attrs.asdict(state)

    @module.tool(read_only=True)
    def show(state: Tally) -> dict[str, Any]:
        """Show the state."""
        return attrs.asdict(state)

    @module.tool(read_only=True)
    def scribble(state: Tally, value: str) -> dict[str, Any]:
        """Append a value, though declared read-only: the runtime must take the word for it."""
        state.values.append(value)
        return attrs.asdict(state)

    return module


def fragile_tally(breaking: Switch) -> ToolModule[Tally]:
    """A tally whose heal() half-repairs the state, then raises while `breaking` is on."""

    @attrs.define
    class Fragile(Tally):
        def heal(self) -> None:
            if breaking.on:
                self.values.clear()  # a repair gone wrong: must never reach the store
                raise RuntimeError("the tally's resource is beyond repair")

    return tally_module(Fragile)


@attrs.define
class Healed(Tally):
    """A tally counting the heal() runs it saw: the state each call runs against."""

    heals: int = 0

    def heal(self) -> None:
        self.heals += 1


@attrs.define(eq=False)
class FaultyStore:
    """A real MemoryStore whose saves can be held, refused, half-done or always fenced off."""

    inner: MemoryStore = attrs.field(factory=MemoryStore)
    fault: str | None = None  # "refuse", "lose_reply" (written, then an error) or "conflict"
    held: trio.Event | None = None  # saves wait for it, when there is one
    saves: int = 0  # saves that reached the inner store
    url: str = "memory"

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        return await self.inner.load(key, parts=parts)

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        if self.held is not None:
            await self.held.wait()
        if self.fault == "refuse":
            raise StoreError("the disk is full (injected)")
        if self.fault == "conflict":
            await trio.sleep(1)  # a retry loop that never ends lets the clock run out
            raise VersionConflict(key, expected, (expected or 0) + 1)
        version = await self.inner.save(key, blob, expected, changes=changes)
        self.saves += 1
        if self.fault == "lose_reply":
            raise StoreError("the connection broke after the commit (injected)")
        return version

    async def delete_session(self, session_id: str) -> int:
        return await self.inner.delete_session(session_id)

    async def touch(self, keys: Collection[ActorKey]) -> None:
        await self.inner.touch(keys)

    async def sweep(self, retention: float) -> int:
        return await self.inner.sweep(retention)


class CountingBackend:
    """A real SqliteBackend that counts its transactions (everything else passes through)."""

    def __init__(self, path: Path) -> None:
        self.inner = SqliteBackend(path)
        self.url = self.inner.url
        self.commits = 0

    def commit(self, writes: Sequence[Write], now: float) -> list[int | Conflict]:
        self.commits += 1
        return self.inner.commit(writes, now)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def key(session: str = "s1", module: str = "tally") -> ActorKey:
    return ActorKey(module, ToolContext(session))


@asynccontextmanager
async def serving(
    store: StateStore, *modules: ToolModule[Any], **config: Any
) -> AsyncIterator[Runtime]:
    """A runtime over `store` serving `modules` (a tally by default)."""
    async with open_runtime(
        modules or [tally_module()], RuntimeConfig(**config), store=store
    ) as runtime:
        yield runtime


@pytest.fixture(params=["memory", "sqlite"])
async def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    url = "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'state.db'}"
    async with open_store(url) as store:
        yield store


async def tally(runtime: Runtime, tool: str, session: str = "s1", **arguments: Any) -> list[str]:
    """The values a successful call of tally's `tool` answers with."""
    result = await call_as(runtime, f"tally__{tool}", session, **arguments)
    assert not result.is_error, result.first_text
    assert result.structured_content is not None
    return list(result.structured_content["values"])


async def add(runtime: Runtime, value: str, session: str = "s1") -> list[str]:
    return await tally(runtime, "add", session, value=value)


async def show(runtime: Runtime, session: str = "s1") -> list[str]:
    return await tally(runtime, "show", session)


async def stored_values(store: StateStore, session: str = "s1") -> list[str] | None:
    """The tally as the store has it, read directly."""
    stored = await store.load(key(session))
    return None if stored is None else json.loads(stored.blob)["state"]["values"]


class TestActivation:
    async def test_a_new_key_gets_a_fresh_state_and_nothing_is_stored_until_it_changes(
        self,
    ) -> None:
        """Activation makes the state when the store has none; a read-only call stores nothing."""
        store = MemoryStore()
        async with serving(store) as runtime:
            assert await show(runtime) == []
            assert await store.load(key()) is None
            assert await add(runtime, "a") == ["a"]
        assert await stored_values(store) == ["a"]

    async def test_activation_loads_what_the_store_holds(self) -> None:
        """A key with a stored state starts from it, in a runtime that never saw it."""
        store = MemoryStore()
        await store.save(key(), Durable(Tally).dump(Tally(["from", "before"])), None)
        async with serving(store) as runtime:
            assert await add(runtime, "now") == ["from", "before", "now"]


class TestWrites:
    async def test_a_changing_call_is_stored_before_its_reply(self) -> None:
        """While the store has not acknowledged the write, the caller has no reply."""
        held = trio.Event()
        store = FaultyStore(held=held)
        replies: list[list[str]] = []

        async def add_x(runtime: Runtime) -> None:
            replies.append(await add(runtime, "x"))

        async with serving(store) as runtime, trio.open_nursery() as nursery:
            nursery.start_soon(add_x, runtime)
            await trio.testing.wait_all_tasks_blocked()
            assert replies == []
            held.set()
        assert replies == [["x"]]
        assert await stored_values(store.inner) == ["x"]

    async def test_a_read_only_tool_is_never_written(self) -> None:
        """Declared read-only, a tool's call skips the write: even a change it makes is unsaved."""
        store = MemoryStore()
        async with serving(store) as runtime:
            await add(runtime, "a")
            written = await store.load(key())
            writes = runtime.statistics().state_writes
            assert await tally(runtime, "scribble", value="b") == ["a", "b"]
            assert runtime.statistics().state_writes == writes
            stored = await store.load(key())
        assert written is not None
        assert stored is not None
        assert stored.version == written.version  # no save since the write of "a"
        assert await stored_values(store) == ["a"]

    async def test_a_call_that_changes_nothing_reaches_no_store(self) -> None:
        """The digest of the last stored blob spares the store a write that changes nothing."""
        store = FaultyStore()
        async with serving(store) as runtime:
            await add(runtime, "a")
            assert await tally(runtime, "touch") == ["a"]
            assert store.saves == 1

    async def test_a_call_that_changes_nothing_is_not_counted_as_a_write(self) -> None:
        """statistics().state_writes counts states written to the store, not calls served."""
        async with serving(MemoryStore()) as runtime:
            await add(runtime, "a")
            await tally(runtime, "touch")
            assert runtime.statistics().state_writes == 1

    async def test_pending_writes_of_many_actors_share_transactions(self, tmp_path: Path) -> None:
        """Group commit: 100 concurrent changing calls on 100 keys, far fewer SQLite commits."""
        backend = CountingBackend(tmp_path / "state.db")
        async with open_batched(backend) as store, serving(store) as runtime:
            async with trio.open_nursery() as nursery:
                for index in range(100):
                    nursery.start_soon(add, runtime, f"v{index}", f"s{index}")
            assert runtime.statistics().state_writes == 100
            assert [await stored_values(store, f"s{i}") for i in range(100)] == [
                [f"v{i}"] for i in range(100)
            ]
        assert backend.commits <= 10, f"{backend.commits} commits for 100 writes"


class TestOnlyMemoryIsFreed:
    async def test_an_expired_actor_comes_back_from_the_store(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """TTL expiry releases the memory; the next call reactivates the state as acknowledged."""
        async with serving(MemoryStore(), ttl=10) as runtime:
            await add(runtime, "a")
            await trio.sleep(11)
            assert runtime.statistics().live_actors == 0
            assert await add(runtime, "b") == ["a", "b"]
            stats = runtime.statistics()
        assert (stats.expired, stats.started) == (1, 2)

    async def test_an_evicted_actor_comes_back_from_the_store(self) -> None:
        """Eviction under max_actors releases the memory, not the state."""
        async with serving(MemoryStore(), max_actors=1) as runtime:
            for round_ in range(3):
                for session in ("s1", "s2"):
                    await add(runtime, f"{session}.{round_}", session)
            assert await show(runtime, "s1") == ["s1.0", "s1.1", "s1.2"]
            assert runtime.statistics().evicted >= 6


class TestFailedWrites:
    async def test_a_refused_write_is_an_error_and_its_change_is_gone(self) -> None:
        """Never acknowledged-but-lost: the call fails, the next sees the store, later ones work."""
        store = FaultyStore()
        async with serving(store) as runtime:
            await add(runtime, "a")
            store.fault = "refuse"
            failed = await call_as(runtime, "tally__add", "s1", value="lost")
            assert failed.is_error
            assert failed.first_text.startswith("the change was not saved, so it did not happen")
            assert "the disk is full (injected)" in failed.first_text
            assert await stored_values(store.inner) == ["a"]
            store.fault = None
            assert await show(runtime) == ["a"]
            assert await add(runtime, "c") == ["a", "c"]
            assert runtime.statistics().write_failures == 1
        assert await stored_values(store.inner) == ["a", "c"]

    async def test_a_write_that_landed_but_failed_is_reloaded_and_later_writes_fit(self) -> None:
        """A write the store reports failed may still have landed: the store's copy then wins."""
        store = FaultyStore()
        async with serving(store) as runtime:
            await add(runtime, "a")
            store.fault = "lose_reply"
            assert (await call_as(runtime, "tally__add", "s1", value="b")).is_error
            store.fault = None
            assert await add(runtime, "c") == ["a", "b", "c"]
            assert runtime.statistics().write_conflicts == 0

    async def test_a_state_that_cannot_be_serialized_is_an_error_and_changes_nothing(
        self,
    ) -> None:
        """A hostile goal (a lone surrogate, which JSON carries and UTF-8 refuses) is not kept."""
        store = MemoryStore()
        async with serving(store, planning) as runtime:
            await call_as(runtime, "planning__create_goal", "s1", goal="kept")
            failed = await call_as(runtime, "planning__create_goal", "s1", goal="bad \ud800")
            assert failed.is_error
            assert "cannot be stored: UnicodeEncodeError" in failed.first_text
            listed = await call_as(runtime, "planning__list_goals", "s1")
            assert listed.first_text == "Goals (1):\n- g1: kept"

    async def test_a_heal_that_raises_loses_no_acknowledged_state(self) -> None:
        """The actor crashes, its half-healed state is dropped, and the next one loads it."""
        breaking = Switch()
        async with serving(MemoryStore(), fragile_tally(breaking)) as runtime:
            await add(runtime, "a")
            breaking.on = True
            with pytest.raises(ActorCrashedError, match="beyond repair"):
                await call_as(runtime, "tally__add", "s1", value="b")
            breaking.on = False
            assert await add(runtime, "c") == ["a", "c"]


class TestRestart:
    async def test_everything_acknowledged_is_there_after_reopening(self, tmp_path: Path) -> None:
        """Close the runtime and its SQLite store, open both again: every acknowledged call."""
        url = f"sqlite:///{tmp_path / 'state.db'}"
        sessions = [f"s{index}" for index in range(20)]

        async def fill(runtime: Runtime, session: str) -> None:
            for step in range(3):
                await add(runtime, f"{session}.{step}", session)
                await call_as(runtime, "planning__create_goal", session, goal=f"{session} {step}")

        async with open_store(url) as store, serving(store, tally_module(), planning) as runtime:
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(fill, runtime, session)
            assert runtime.statistics().errors == 0
        async with open_store(url) as store, serving(store, tally_module(), planning) as runtime:
            for session in sessions:
                assert await show(runtime, session) == [f"{session}.{step}" for step in range(3)]
                listed = await call_as(runtime, "planning__list_goals", session)
                assert listed.first_text.endswith(f"- g3: {session} 2")


def plan_blob(schema: int = 1, **changes: Any) -> str:
    """A stored plan with one goal, changed by `changes`."""
    return json.dumps(
        {"schema": schema, "state": {"goals": {"g1": "a goal"}, "todos": {}, **changes}}
    )


# What a blob holds, and what the error must name.
_BAD_BLOBS = {
    "a newer schema": (plan_blob(schema=2), "has schema 2, newer than the schema 1 this"),
    "no schema": (plan_blob(schema="one"), "has schema 'one', which is no schema version"),
    "no state": ('{"schema": 1}', "has no 'state' field"),
    "a missing field": (plan_blob(todos={"t1": {"id": "t1"}}), "todos['t1'].name"),
    "a field of the wrong type": (plan_blob(goals=["g1"]), "goals is stored as"),
    "an unknown field": (plan_blob(owner="mallory"), "owner"),
    "not JSON": ("\x00{not json", "is not JSON"),
}


class TestBlobsThatNoLongerLoad:
    @pytest.mark.parametrize("blob", _BAD_BLOBS.keys())
    async def test_the_key_fails_naming_key_and_field_and_its_blob_is_kept(self, blob: str) -> None:
        """Every call of the key says so, truly and what to do; its blob stays; other keys work."""
        text, field = _BAD_BLOBS[blob]
        store = MemoryStore()
        planning_key = key(module="planning")
        version = await store.save(planning_key, text.encode(), None)
        async with serving(store, planning) as runtime:
            for tool, arguments in [("list_goals", {}), ("create_goal", {"goal": "x"})] * 2:
                with pytest.raises(StateUnreadableError) as unreadable:
                    await call_as(runtime, f"planning__{tool}", "s1", **arguments)
                message = str(unreadable.value)
                assert message.startswith("the stored state of planning(session='s1') ")
                assert field in message
                assert message.endswith(
                    ". It is kept as it is, and the calls of planning(session='s1') fail until "
                    "that changes: run a version of the module that reads it, give the module a "
                    "migration (Durable(migrations=...)), or repair or delete it with "
                    "'mcp-actors state'"
                )
                assert "dropped" not in message
            other = await call_as(runtime, "planning__create_goal", "s2", goal="fine")
            assert other.first_text == "Created goal g1: fine"
            assert await store.load(planning_key) == Stored(version, text.encode())
            assert await runtime.end_session("s1") == 1  # how an operator lets the key start over
            emptied = await call_as(runtime, "planning__list_goals", "s1")
            assert emptied.first_text == "No goals yet."


class TestDeclaration:
    def test_a_state_that_is_not_an_attrs_class_is_refused(self) -> None:
        """Only an attrs class says which fields make up the state."""
        with pytest.raises(TypeError, match=r"^a durable state must be an attrs class, got "):
            Durable(dict)

    @pytest.mark.parametrize("hook", ["on_start", "on_stop", "start_background"])
    def test_a_state_with_resource_hooks_is_refused(self, hook: str) -> None:
        """Resources cannot be stored, so a durable state may not acquire any."""
        hooked = attrs.define(type("Hooked", (), {hook: lambda self, *_: None}))
        with pytest.raises(TypeError, match=rf"^Hooked defines {hook}: a durable state holds"):
            Durable(hooked)

    def test_a_state_with_heal_is_accepted(self) -> None:
        """heal() repairs data in place and holds no resource, so it is allowed."""
        assert Durable(Healed).state_type is Healed


def created(result: CallResult) -> tuple[str, str]:
    """The goal id and text of an acknowledged create_goal."""
    match = re.fullmatch(r"Created goal (g\d+): (.*)", result.first_text, re.DOTALL)
    assert match is not None, result.first_text
    return match[1], match[2]


class TestFencing:
    async def test_two_runtimes_on_one_store_lose_no_acknowledged_goal(
        self, shared_store: StateStore
    ) -> None:
        """Both serve one key: the version fence refuses stale writes, and calls run again."""
        results: list[CallResult] = []

        async def create(runtime: Runtime, goal: str) -> None:
            results.append(await call_as(runtime, "planning__create_goal", "s1", goal=goal))

        async with (
            serving(shared_store, planning) as first,
            serving(shared_store, planning) as second,
        ):
            async with trio.open_nursery() as nursery:
                for index in range(20):
                    for name, runtime in (("first", first), ("second", second)):
                        nursery.start_soon(create, runtime, f"{name} {index}")
            conflicts = first.statistics().write_conflicts + second.statistics().write_conflicts
        stored = await shared_store.load(key(module="planning"), parts=True)
        assert stored is not None
        assert planning.durable is not None
        final, _partwise = planning.durable.load_parts(
            stored.blob, stored.parts, key(module="planning")
        )
        acknowledged = dict(created(result) for result in results if not result.is_error)
        assert acknowledged.items() <= final.goals.items()
        assert all("kept changing under" in r.first_text for r in results if r.is_error)
        assert conflicts > 0, "the two runtimes never met at the fence"

    async def test_conflicts_that_never_stop_end_in_an_error_not_a_hang(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Another writer that always wins: the call gives up after a few runs and says why."""
        async with serving(FaultyStore(fault="conflict"), planning, call_timeout=None) as runtime:
            with trio.fail_after(600):
                result = await call_as(runtime, "planning__create_goal", "s1", goal="never")
            assert result.is_error
            assert "kept changing under this call (another process writes" in result.first_text
            assert runtime.statistics().write_conflicts >= 1

    async def test_a_call_that_gave_up_leaves_no_change_behind(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A call answered "its change was not saved" must not have its change saved later."""
        store = FaultyStore(fault="conflict")
        async with serving(store, call_timeout=None) as runtime:
            with trio.fail_after(600):  # a hang must fail, not pass as the expected failure
                assert (await call_as(runtime, "tally__add", "s1", value="gave up")).is_error
            store.fault = None
            assert await add(runtime, "b") == ["b"]

    async def test_after_a_conflict_heal_runs_on_the_state_the_call_sees(self) -> None:
        """A state reloaded because of another writer is the one healed before the next call."""
        store = MemoryStore()
        healed = tally_module(Healed)
        async with serving(store, healed) as first, serving(store, healed) as second:
            await call_as(first, "tally__add", "s1", value="a")
            await call_as(second, "tally__add", "s1", value="b")
            # This one conflicts, reloads and runs again.
            rerun = await call_as(first, "tally__add", "s1", value="c")
            assert first.statistics().write_conflicts == 1
            after = await call_as(first, "tally__add", "s1", value="d")
        assert rerun.structured_content is not None
        assert after.structured_content is not None
        assert after.structured_content["heals"] == rerun.structured_content["heals"] + 1


class TestEndSession:
    async def test_ending_a_session_stops_its_actors_and_deletes_its_state_only(self) -> None:
        """Calls meanwhile are refused; afterwards the session starts empty; others are kept."""
        liveness, gate = Liveness(), Gate()
        store = MemoryStore()
        modules: list[ToolModule[Any]] = [
            tally_module(),
            planning,
            box_module(liveness, gates={"held": gate}),
        ]
        deleted: list[int] = []

        async def end(runtime: Runtime) -> None:
            deleted.append(await runtime.end_session("s1"))

        async with serving(store, *modules) as runtime:
            for session in ("s1", "s2"):
                await add(runtime, f"{session} value", session)
                await call_as(runtime, "planning__create_goal", session, goal="g")
                await append(runtime, session, "boxed")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "s1", "held")
                await gate.entered.wait()
                nursery.start_soon(end, runtime)
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(SessionEndingError, match=r"^session 's1' is being ended"):
                    await call_as(runtime, "tally__show", "s1")
                assert await show(runtime, "s2") == ["s2 value"]
                gate.release.set()
            assert deleted == [2]
            assert liveness.final_logs[ActorKey("box", ToolContext("s1"))] == ["boxed", "held"]
            assert not [a for a in runtime.actors() if a.key.context.session_id == "s1"]
            assert await stored_values(store) is None
            assert await show(runtime) == []
            emptied = await call_as(runtime, "planning__list_goals", "s1")
            assert emptied.first_text == "No goals yet."
            assert await show(runtime, "s2") == ["s2 value"]
            assert ActorKey("box", ToolContext("s2")) in liveness.live


class TestHandOver:
    async def test_the_sessions_picked_stop_after_their_calls_and_their_state_stays(
        self,
    ) -> None:
        """What a shard does when sessions move: stop them, keep what the store holds."""
        store = MemoryStore()
        stops: list[tuple[ActorKey, StopReason]] = []

        class Stops(Observer):
            def actor_stopped(self, key: ActorKey, reason: StopReason) -> None:
                stops.append((key, reason))

        modules = [tally_module(), planning]
        async with open_runtime(modules, store=store, observer=Stops()) as runtime:
            for session in ("leaving", "staying"):
                await add(runtime, f"{session} value", session)
                await call_as(runtime, "planning__create_goal", session, goal="g")
            stopped = await runtime.hand_over(lambda session: session == "leaving")
            live = {a.key.context.session_id for a in runtime.actors()}
            handed = sorted(k.module for k, r in stops if r is StopReason.HANDED_OVER)
            assert await stored_values(store, "leaving") == ["leaving value"]  # kept
            assert await show(runtime, "leaving") == ["leaving value"]  # and loaded again
        assert stopped == 2
        assert live == {"staying"}
        assert handed == ["planning", "tally"]
        assert runtime.statistics().started == 5  # the leaving tally started again


class TestRetention:
    """State neither written nor used for the retention goes; state in use never does.

    On trio's virtual clock (the store tells time by it too), so that days of
    retention pass in an instant and no test waits for a machine's timing.
    """

    async def test_state_unused_for_the_retention_is_deleted_once_no_actor_holds_it(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """The sweeper deletes a key nobody used; a later activation starts it afresh."""
        store = MemoryStore(clock=trio.current_time)
        async with serving(store, ttl=1.0, state_retention=10.0) as runtime:
            await add(runtime, "old")
            written = trio.current_time()
            while await store.load(key()) is not None:  # noqa: ASYNC110 -- virtual time
                await trio.sleep(1.0)
            assert trio.current_time() - written >= 10.0
        async with serving(store) as runtime:
            assert await show(runtime) == []

    async def test_the_key_of_a_live_actor_is_never_swept(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Written once, then only held (and read from memory) for ten retentions: kept."""
        store = MemoryStore(clock=trio.current_time)
        async with serving(store, ttl=1000.0, state_retention=10.0) as runtime:
            await add(runtime, "kept")
            for _ in range(10):
                await trio.sleep(10.0)
                assert await show(runtime) == ["kept"]
            assert await stored_values(store) == ["kept"]

    async def test_a_key_read_often_but_never_written_again_is_kept(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Each read loads it (its actor expired in between): a use, so it stays; then it goes."""
        store = MemoryStore(clock=trio.current_time)
        async with serving(store, ttl=1.0, state_retention=10.0) as runtime:
            await add(runtime, "read daily")
            for _ in range(20):
                await trio.sleep(5.0)  # past the TTL: the next read loads it from the store
                assert await show(runtime) == ["read daily"]
            assert await stored_values(store) == ["read daily"]
            last_read = trio.current_time()
            while await store.load(key()) is not None:  # noqa: ASYNC110 -- virtual time
                await trio.sleep(1.0)
            assert trio.current_time() - last_read >= 10.0

    async def test_a_key_another_runtime_serves_is_not_swept_by_this_one(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Two processes on one store: the one that sweeps never deletes what the other holds.

        The holder keeps its state for ever, so it marks its keys at the longest
        interval (15 minutes): a retention of twice that is safe.
        """
        store = MemoryStore(clock=trio.current_time)
        async with serving(store, ttl=100_000.0, state_retention=None) as holder:
            await add(holder, "held elsewhere")
            async with serving(store, state_retention=1800.0):
                await trio.sleep(20_000.0)
                assert await stored_values(store) == ["held elsewhere"]
            assert await show(holder) == ["held elsewhere"]

    async def test_marking_fails_so_nothing_is_swept(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """If the keys in use cannot be marked, the sweep that round does not run."""
        store = UnmarkableStore(MemoryStore(clock=trio.current_time))
        async with serving(store, ttl=1000.0, state_retention=10.0) as runtime:
            await add(runtime, "kept")
            await trio.sleep(100.0)
            assert await show(runtime) == ["kept"]
        # Perhaps a sweep at startup, before any key was in use to mark; none after a failure.
        failed = store.steps.index("touch failed")
        assert "sweep" not in store.steps[failed:], store.steps
        assert store.steps.count("touch failed") >= 5  # every round since tried again
        assert await stored_values(store.inner) == ["kept"]


@attrs.define(eq=False)
class UnmarkableStore:
    """A MemoryStore whose `touch` always fails, recording what the runtime asked, in order."""

    inner: MemoryStore
    steps: list[str] = attrs.field(factory=list)
    url: str = "memory"

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        return await self.inner.load(key, parts=parts)

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        return await self.inner.save(key, blob, expected, changes=changes)

    async def delete_session(self, session_id: str) -> int:
        return await self.inner.delete_session(session_id)

    async def touch(self, keys: Collection[ActorKey]) -> None:
        await trio.lowlevel.checkpoint()
        self.steps.append("touch failed")
        raise StoreError("the disk is read-only (injected)")

    async def sweep(self, retention: float) -> int:
        self.steps.append("sweep")
        return await self.inner.sweep(retention)


def calls(tool: str, **arguments: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Calls of `tool` with arguments drawn from `arguments`."""
    return st.tuples(st.just(tool), st.fixed_dictionaries(arguments))


texts = st.text(max_size=12)
_CALLS = {
    "planning": calls("create_goal", goal=texts)
    | calls("add_todo", name=texts, goal_id=st.sampled_from([None, "g1", "g2", "g9"]))
    | calls("mark_todo", todo_id=st.sampled_from(["t1", "t2", "t9"])),
    "playbook_store": calls("create_playbook", name=texts)
    | calls("select_playbook", id=st.sampled_from(["pb_1", "pb_2", "pb_9"])),
    "content_store": calls("create_store") | calls("add_content", filename=texts, content=texts),
}
_MODULES: dict[str, ToolModule[Any]] = {
    module.name: module for module in (planning, playbook_store, content_store)
}


def answer(
    module: ToolModule[Any], state: object, tool: str, context: ToolContext, **arguments: Any
) -> Any:
    """What a tool call answers, run on `state` directly: text and data, or the tool error."""
    handler = module.tools[tool]
    try:
        result = handler.result_of(handler.invoke(state, context, arguments))
    except ToolError as exc:
        return ("error", str(exc))
    return (result.first_text, result.structured_content)


def read_everything(module: ToolModule[Any], state: Any) -> list[Any]:
    """The answers of the module's read tools, for every caller and item there is."""
    contexts = [ToolContext("s1", assistant) for assistant in (None, "a1", "a2", "none")]
    answers = []
    for context in contexts:
        for name, tool in module.tools.items():
            if tool.read_only and not tool.signature.input_schema.get("required"):
                answers.append(answer(module, state, name, context))
    if module is content_store:
        for item_id, item in state.items.items():
            answers.append(answer(module, state, "read_content", contexts[0], id=item_id))
            for word in re.findall(r"\w+", item.filename + " " + item.content.decode())[:2]:
                answers.append(answer(module, state, "search_content", contexts[0], query=word))
    return answers


class TestBuiltinModulesRoundTrip:
    @pytest.mark.parametrize("name", _MODULES.keys())
    @given(data=st.data())
    def test_a_stored_state_answers_as_the_live_one_did(
        self, name: str, data: st.DataObject
    ) -> None:
        """Any sequence of calls, then dump and load: every read tool answers the same."""
        module = _MODULES[name]
        durable = module.durable
        assert durable is not None
        state = module.state(ToolContext("s1"))
        for tool, arguments in data.draw(st.lists(_CALLS[name], max_size=12)):
            context = ToolContext("s1", data.draw(st.sampled_from([None, "a1", "a2"])))
            answer(module, state, tool, context, **arguments)
        blob = durable.dump(state)
        loaded = durable.load(blob, ActorKey(name, ToolContext("s1")))
        assert attrs.asdict(loaded) == attrs.asdict(state)
        assert read_everything(module, loaded) == read_everything(module, state)
        assert durable.dump(loaded) == blob


class TestHeavyTimeout:
    async def test_a_timed_out_heavy_write_is_not_seen_by_the_next_call(self) -> None:
        """The caller gets CallTimeoutError; what the thread then did in memory is dropped.

        The heavy handler's thread waits until the caller has seen the timeout and only then
        changes the state, so the change lands after the deadline however busy the machine.
        """
        store = MemoryStore()
        timed_out = threading.Event()
        module = tally_module()

        @module.tool(heavy=True)
        def add_late(state: Tally, value: str) -> str:
            """Add `value` once the caller has given up on this call."""
            timed_out.wait(timeout=60)  # a bound, so a broken test cannot hang its thread
            state.values.append(value)
            return "added"

        async with serving(store, module, call_timeout=0.05) as runtime:
            await call_as(runtime, "tally__add", "s1", value="kept")
            with pytest.raises(CallTimeoutError, match="tally__add_late"):
                await call_as(runtime, "tally__add_late", "s1", value="late")
            timed_out.set()
            shown = await call_as(runtime, "tally__show", "s1")
            assert shown.structured_content == {"values": ["kept"]}
            assert runtime.statistics().timeouts == 1
        stored = await store.load(key())
        assert stored is not None
        assert stored.blob == Durable(Tally).dump(Tally(["kept"]))
