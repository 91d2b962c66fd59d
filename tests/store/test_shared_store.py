"""`RuntimeConfig.shared_store`: a runtime that shares its store asks a key's version before
each call, so that what another process wrote is what it serves.

Two runtimes on one `MemoryStore` stand for two processes on one database
(`tests/store/test_cross_process_reads.py` runs the real thing: two ``serve``
processes on PostgreSQL and on a SQLite file). Each test keeps both runtimes'
actors live, as a busy server does, so that only the version check can bring
the other's writes in; and the same test with the check off shows the stale
read it prevents. Off, the check is never asked: it costs nothing.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
import trio.testing

from actors import RuntimeConfig, open_runtime
from actors.modules import planning
from actors.store import MemoryStore, StoreError, open_store

from .._calls import ModuleCalls, listed_goals
from .._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401
from .._stores import store_url_fixture  # noqa: F401  (a fixture)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actors import Runtime
    from actors._prepare import Route
    from actors.store import StateStore, Stored
    from protocol import ActorKey

PLANNING = ModuleCalls("planning")


class CountedStore(MemoryStore):
    """A `MemoryStore` that counts the versions asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.versions_asked = 0

    async def version(self, key: ActorKey) -> int | None:
        self.versions_asked += 1
        return await super().version(key)


@asynccontextmanager
async def two_runtimes(
    store: StateStore, *, shared: bool | None
) -> AsyncIterator[tuple[Runtime, Runtime]]:
    """Two runtimes serving `planning` from `store`, told `shared` (None: the default)."""
    config = RuntimeConfig(shared_store=shared)
    async with (
        open_runtime([planning], config, store=store) as first,
        open_runtime([planning], config, store=store) as second,
    ):
        yield first, second


async def goals(runtime: Runtime, session: str) -> list[str]:
    """The titles `runtime` lists in `session`."""
    return [title for _, title in listed_goals(await PLANNING.text(runtime, "list_goals", session))]


async def leave_b_a_stale_copy(a: Runtime, b: Runtime) -> None:
    """a creates goal "one", b's actor goes live holding it, a creates "two" behind it."""
    await PLANNING.text(a, "create_goal", "s", goal="one")
    assert await goals(b, "s") == ["one"]
    await PLANNING.text(a, "create_goal", "s", goal="two")


async def test_each_runtime_reads_the_others_writes() -> None:
    async with two_runtimes(MemoryStore(), shared=True) as (a, b):
        await PLANNING.text(a, "create_goal", "s", goal="one")
        assert await goals(b, "s") == ["one"]  # b's actor is live from here on
        await PLANNING.text(a, "create_goal", "s", goal="two")
        assert await goals(b, "s") == ["one", "two"]  # read from the store, not b's memory
        await PLANNING.text(b, "create_goal", "s", goal="three")
        assert await goals(a, "s") == ["one", "two", "three"]


async def test_a_session_the_other_ended_is_empty_here() -> None:
    """A key deleted under a live actor (the other process ended the session): fresh state."""
    store = MemoryStore()
    async with two_runtimes(store, shared=True) as (a, b):
        await PLANNING.text(a, "create_goal", "s", goal="one")
        assert await goals(b, "s") == ["one"]
        await store.delete_session("s")
        assert await goals(b, "s") == []


async def test_without_the_check_a_live_actor_serves_what_it_loaded() -> None:
    """The control: told the store is not shared, b's live actor misses a's write."""
    async with two_runtimes(MemoryStore(), shared=False) as (a, b):
        await PLANNING.text(a, "create_goal", "s", goal="one")
        assert await goals(b, "s") == ["one"]
        await PLANNING.text(a, "create_goal", "s", goal="two")
        assert await goals(b, "s") == ["one"]


@pytest.mark.parametrize(("shared", "asked"), [(True, 3), (False, 0), (None, 0)])
async def test_a_version_is_asked_per_call_only_when_the_store_is_shared(
    shared: bool | None, asked: int
) -> None:
    """One version per call of a live actor (its first call loads instead); off, and by
    default for a store that is not PostgreSQL, none at all."""
    store = CountedStore()
    async with open_runtime([planning], RuntimeConfig(shared_store=shared), store=store) as one:
        for title in ("one", "two"):
            await PLANNING.text(one, "create_goal", "s", goal=title)
        assert await goals(one, "s") == ["one", "two"]
        await PLANNING.text(one, "create_goal", "s", goal="three")
    assert store.versions_asked == asked


class UnsureStore(MemoryStore):
    """A `MemoryStore` whose version check fails (a connection dropped) while `unsure`."""

    def __init__(self) -> None:
        super().__init__()
        self.unsure = False
        self.loads = 0

    async def version(self, key: ActorKey) -> int | None:
        if self.unsure:
            msg = "version check failed in memory: the connection dropped"
            raise StoreError(msg)
        return await super().version(key)

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        self.loads += 1
        return await super().load(key, parts=parts)


async def test_a_version_that_cannot_be_asked_loads_the_state_again() -> None:
    """The check failing is no answer: the state is loaded again (here it can be), and the
    call sees the other runtime's write rather than what this one held."""
    store = UnsureStore()
    async with two_runtimes(store, shared=True) as (a, b):
        await leave_b_a_stale_copy(a, b)
        store.unsure = True
        loads = store.loads
        assert await goals(b, "s") == ["one", "two"]
    assert store.loads == loads + 1


class DownStore(UnsureStore):
    """An `UnsureStore` whose loads fail too while `unsure`: the server is down."""

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        if self.unsure:
            msg = "load failed in memory: the server is down"
            raise StoreError(msg)
        return await super().load(key, parts=parts)


async def test_a_store_that_is_down_fails_each_call_with_its_reason_and_crashes_no_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Neither the check nor the load can reach the store: the call is answered with an
    error that says why, the actor lives on, and once the store is back (and the failure's
    second has passed) its next call loads what the other runtime wrote."""
    store = DownStore()
    async with two_runtimes(store, shared=True) as (a, b):
        await leave_b_a_stale_copy(a, b)
        store.unsure = True
        for _ in range(2):
            result = await PLANNING.call(b, "list_goals", "s")
            assert result.is_error
            assert "the state could not be loaded" in result.first_text
            assert "the server is down" in result.first_text
        store.unsure = False
        await trio.sleep(1)
        assert await goals(b, "s") == ["one", "two"]
        assert b.statistics().crashed == 0
        assert b.statistics().started == 1  # the same actor throughout


class SlowlyDownStore(DownStore):
    """A `DownStore` whose loads take a second to fail (a server's connect timeout)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed_loads = 0

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        if self.unsure:
            await trio.sleep(1)
            self.failed_loads += 1
        return await super().load(key, parts=parts)


async def test_calls_queued_behind_a_load_that_fails_slowly_are_answered_with_it_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Five calls wait behind one load that takes a second to fail: one load is tried, and
    all five are answered when it fails, not a second apart each; a second later the next
    call tries again, and finds the store back."""
    store = SlowlyDownStore()
    async with two_runtimes(store, shared=True) as (a, b):
        await leave_b_a_stale_copy(a, b)
        store.unsure = True
        answered: list[tuple[float, bool]] = []
        start = trio.current_time()

        async def list_goals() -> None:
            result = await PLANNING.call(b, "list_goals", "s")
            answered.append((trio.current_time() - start, result.is_error))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(list_goals)
        assert store.failed_loads == 1
        assert answered == [(1.0, True)] * 5
        store.unsure = False
        await trio.sleep(1)
        assert await goals(b, "s") == ["one", "two"]


class HeldLoads(MemoryStore):
    """A `MemoryStore` whose loads wait, once `hold` is set, until the test releases them."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.loading = trio.Event()
        self.released = trio.Event()

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        stored = await super().load(key, parts=parts)
        if self.hold:
            self.loading.set()
            await self.released.wait()
        return stored


async def test_a_first_call_abandoned_while_its_state_loads_leaves_the_next_one_asking() -> None:
    """The load that starts an actor stands in for its first call's check; abandoned
    (its caller cancelled during the load), it must not stand in for a later one."""
    store = HeldLoads()
    async with two_runtimes(store, shared=True) as (a, b):
        await PLANNING.text(a, "create_goal", "s", goal="one")
        store.hold = True
        async with trio.open_nursery() as nursery:
            nursery.start_soon(goals, b, "s")
            await store.loading.wait()
            nursery.cancel_scope.cancel()  # the caller gives up while b loads
        store.hold = False
        store.released.set()
        await trio.testing.wait_all_tasks_blocked()  # b has skipped the abandoned call
        await PLANNING.text(a, "create_goal", "s", goal="two")
        assert await goals(b, "s") == ["one", "two"]


async def test_a_session_ended_and_begun_again_elsewhere_is_not_served_from_memory(
    store_url: str,
) -> None:
    """The session b holds is ended by a and written again with as many saves: its first
    life's versions must not come back (they did when every key started at 1), or b's
    check passes and b serves the goal of a session that no longer exists."""
    async with (
        open_store(store_url) as store,
        two_runtimes(store, shared=True) as (a, b),
    ):
        await PLANNING.text(a, "create_goal", "s", goal="old")
        assert await goals(b, "s") == ["old"]  # b's actor holds the first life's version
        await a.end_session("s")
        await PLANNING.text(a, "create_goal", "s", goal="new")  # one save, as before
        assert await goals(b, "s") == ["new"]


@attrs.define
class HeardChanges:
    """A `Watcher` that keeps the modules and sessions of the changes it hears."""

    heard: list[tuple[str, str]] = attrs.Factory(list)

    def key_changed(self, route: Route) -> None:
        self.heard.append((route[0], route[1]))

    def session_ended(self, session_id: str) -> None:
        self.heard.append(("*", session_id))


@pytest.mark.parametrize("shared", [True, False])
async def test_a_read_that_finds_another_process_changed_a_key_tells_the_watchers(
    shared: bool,
) -> None:
    """Resource subscribers of b hear a change that a made, once a call of b finds it: b's
    read-only call writes nothing, so only the check can tell them (off, nothing does).
    A check that fails loads again and finds the same version: nothing to tell."""
    store = UnsureStore()
    async with two_runtimes(store, shared=shared) as (a, b):
        await PLANNING.text(a, "create_goal", "s", goal="one")
        assert await goals(b, "s") == ["one"]
        watcher = HeardChanges()
        b.watch(watcher)
        await goals(b, "s")  # nothing changed: nothing heard
        await PLANNING.text(a, "create_goal", "s", goal="two")
        await goals(b, "s")
        store.unsure = True
        await goals(b, "s")
    assert watcher.heard == ([("planning", "s")] if shared else [])


def test_shared_store_must_be_a_bool_or_none() -> None:
    with pytest.raises(TypeError, match="shared_store"):
        RuntimeConfig(shared_store="yes")  # type: ignore[arg-type]
