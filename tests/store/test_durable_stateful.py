"""Invariant 8 (durability) for the built-in modules: state survives TTL expiry and restarts.

The approach
------------
`DurableBuiltinsMachine` is `BuiltinsMachine` (``tests/modules/test_builtin_stateful.py``:
batches of concurrent calls to ``planning``, ``playbook_store`` and
``content_store`` from colliding contexts, every reply checked against a
model) with its runtime on a SQLite store in a folder of its own, and three
more rules that take the state out of memory:

* ``idle_actors_expire``: the runtime's clock jumps past the TTL. The clock
  is a `trio.testing.MockClock` that moves only when a rule moves it, so the
  reaper stops *every* actor, deterministically; the rule checks that it did.
* ``calls_race_with_expiry``: the clock jumps past the TTL and a batch starts
  at once, before the reaper has run. trio's scheduler then decides, call by
  call, whether a call reaches the old actor (which stays, since it is busy)
  or a successor that loads the key after the old actor has stopped.
* ``the_server_restarts``: the runtime and the store are closed and opened
  again on the same file, with nothing kept in memory in between.

After each of them every touched key is listed through every view and must
equal the model exactly; a difference, or a reply the model cannot explain
while calls race with expiry, is reported as invariant 8. Later batches go on
against the model too, so a state that came back wrong (an old version,
another key's) also shows as ids that do not follow on, or as a leak. The
model is the one the in-memory machine keeps: nothing in it changes on expiry
or restart, which is what durability means. One writer owns the file, so no
write may ever meet a conflict or fail.

The proofs that the machine can fail run it on stores that break invariant 8
the two ways a store can: one that acknowledges saves and writes nothing, and
one that keeps nothing across a restart (``--state memory``).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio
import trio.testing
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from actors import RuntimeConfig, open_runtime
from actors.store import MemoryStore, open_store

from .. import _stateful_harness as harness
from ..modules.test_builtin_stateful import MODULES, BuiltinsMachine, Call, calls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Iterator
    from contextlib import AbstractAsyncContextManager

    from actors import Runtime, RuntimeStatistics
    from actors.store import PartChanges, StateStore, Stored
    from protocol import ActorKey, CallResult

TTL: Final = 60.0
# No retention sweep: it would run on the wall clock, beside the mock one.
CONFIG: Final = RuntimeConfig(ttl=TTL, state_retention=None)
_INVARIANT: Final = re.compile(r"^invariant \d+ \([^)]*\): ")


def sqlite_store(folder: Path) -> AbstractAsyncContextManager[StateStore]:
    """The store the machine restarts on: one SQLite file in the example's folder."""
    return open_store(f"sqlite:///{folder / 'state.db'}")


@contextmanager
def _durability(when: str) -> Iterator[None]:
    """Report a reply that does not match the model as state lost or revived `when`."""
    try:
        yield
    except AssertionError as exc:
        detail = _INVARIANT.sub("", str(exc))
        raise AssertionError(f"invariant 8 (durability): {when}, {detail}") from None


class DurableBuiltinsMachine(BuiltinsMachine):
    """The built-in modules' machine, with actors expiring and the server restarting."""

    # Opens the store in the example's folder; overridden by the proofs below.
    open_store_in: Callable[[Path], AbstractAsyncContextManager[StateStore]] = staticmethod(
        sqlite_store
    )

    clock: trio.testing.MockClock
    """The clock of the runtime's loop: a new one for every run of the runtime."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="durable-machine-"))
        self.jump = 0.0
        """How far the clock jumps just before the next batch starts."""
        super().__init__()

    def open_loop(self) -> harness.TrioThread:
        self.clock = trio.testing.MockClock()
        return harness.TrioThread(self._open_runtime, clock=self.clock)

    @asynccontextmanager
    async def _open_runtime(self) -> AsyncIterator[Runtime]:
        async with (
            type(self).open_store_in(self.folder) as store,
            open_runtime(MODULES, CONFIG, store=store) as runtime,
        ):
            yield runtime

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def submit(self, lanes: list[list[dict[str, Any]]]) -> list[list[CallResult]]:
        jump, self.jump = self.jump, 0.0
        results: list[list[CallResult]] = self.loop.run(self._jump_then_run, jump, lanes)
        return results

    async def _jump_then_run(
        self, jump: float, lanes: list[list[dict[str, Any]]]
    ) -> list[list[CallResult]]:
        # No checkpoint between the jump and the calls: they race with the reaper.
        self.clock.jump(jump)
        return await harness.run_lanes(self.loop.runtime, lanes)

    def _statistics(self) -> RuntimeStatistics:
        runtime = self.loop.runtime
        stats: RuntimeStatistics = self.loop.run_sync(runtime.statistics)
        return stats

    def _check_every_key(self, when: str) -> None:
        """List every touched key; a difference from the model breaks invariant 8."""
        with _durability(when):
            self.every_touched_key_lists_exactly_its_model()

    @rule()
    def idle_actors_expire(self) -> None:
        before = self._statistics()
        live: set[ActorKey] = self.loop.run(self._expire_everything)
        after = self._statistics()
        assert not live, (
            f"invariant 5 (bounded resources): {sorted(live, key=repr)} outlived the TTL"
        )
        assert after.expired - before.expired == before.live_actors, (before, after)
        event("every actor expired")
        self._check_every_key(f"after {before.live_actors} idle actor(s) expired")

    async def _expire_everything(self) -> set[ActorKey]:
        """Move the clock past the TTL and let the reaper stop every actor; the keys still live."""
        self.clock.jump(TTL)
        # The reaper wakes at the next checkpoint; each actor it retires then
        # stops, loading and writing nothing. Once every task waits, all are done.
        await trio.testing.wait_all_tasks_blocked()
        runtime = self.loop.runtime
        return {actor.key for actor in runtime.actors()}

    @rule(lanes=st.lists(st.lists(calls, min_size=1, max_size=3), min_size=1, max_size=4))
    def calls_race_with_expiry(self, lanes: list[list[Call]]) -> None:
        touched, before = set(self.model.touched), self._statistics()
        self.jump = TTL
        with _durability("as calls raced with the actors' expiry"):
            self._run_batch(lanes)
        started = self._statistics().started - before.started
        if started > len(self.model.touched - touched):
            event("a key's actor expired as it was called: a successor loaded its state")
        self._check_every_key("after calls raced with the actors' expiry")

    @rule()
    def the_server_restarts(self) -> None:
        self.loop.close()
        self.loop = self.open_loop()
        self.expected_errors = 0  # the new runtime's counters start at zero
        event("restarted")
        self._check_every_key("after a restart")

    @invariant()
    def one_writer_meets_no_conflict_and_no_failure(self) -> None:
        stats = self._statistics()
        assert stats.write_conflicts == stats.write_failures == 0, (
            f"invariant 9 (one writer): the runtime is the store's only writer, yet {stats}"
        )


# Each example writes a SQLite file with full fsync and restarts its runtime: 200
# examples of 8 steps take about 10 s and reach every rule and race many times.
_SETTINGS: Final = harness.machine_settings(max_examples=200, stateful_step_count=8)

TestBuiltinModulesKeepStateThroughExpiryAndRestarts = DurableBuiltinsMachine.TestCase
TestBuiltinModulesKeepStateThroughExpiryAndRestarts.settings = _SETTINGS


# ---- proof that the machine can fail ---------------------------------------------


class _DroppedSaves:
    """A store that acknowledges every save and keeps nothing: `_write` skipping the save."""

    url = "memory"

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        await trio.lowlevel.checkpoint()
        return None

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        await trio.lowlevel.checkpoint()
        return 1 if expected is None else expected + 1

    async def delete_session(self, session_id: str) -> int:
        await trio.lowlevel.checkpoint()
        return 0

    async def touch(self, keys: Collection[ActorKey]) -> None:
        await trio.lowlevel.checkpoint()

    async def sweep(self, retention: float) -> int:
        await trio.lowlevel.checkpoint()
        return 0


@asynccontextmanager
async def _dropping_saves(_folder: Path) -> AsyncIterator[StateStore]:
    yield _DroppedSaves()


@asynccontextmanager
async def _memory_per_run(_folder: Path) -> AsyncIterator[StateStore]:
    yield MemoryStore()


class DroppedSavesMachine(DurableBuiltinsMachine):
    """The machine on a store that never writes what it acknowledges."""

    open_store_in = staticmethod(_dropping_saves)


class MemoryPerRunMachine(DurableBuiltinsMachine):
    """The machine on a store that lives in memory: nothing survives a restart."""

    open_store_in = staticmethod(_memory_per_run)


def test_machine_finds_changes_acknowledged_but_never_written() -> None:
    message = harness.failure_of(DroppedSavesMachine, _SETTINGS)
    assert message.startswith("invariant 8 (durability): "), message


def test_machine_finds_state_lost_in_a_restart() -> None:
    message = harness.failure_of(MemoryPerRunMachine, _SETTINGS)
    assert message.startswith("invariant 8 (durability): after a restart, "), message
