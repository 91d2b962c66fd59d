"""Group commit over SQLite: how many saves share a transaction, and that sharing one
changes no save's outcome (its own version, its own conflict, its own failure).

The batches are counted by a backend that wraps the real `SqliteBackend` and
counts its commits; everything else is the real store, on a file.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, final

import pytest
import trio

from actors.store import Stored, StoreError, VersionConflict
from actors.store._batched import Conflict, Write, open_batched
from actors.store._sqlite import SqliteBackend
from protocol import ActorKey, ToolContext

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

WRITERS = 30
ROUNDS = 8
KNOWN_FIRST = 1_000_003
"""The first version of every key while `known_first_version` is on: not 1, so that a
backend that does not ask `first_version` is caught."""


def key(session: str) -> ActorKey:
    return ActorKey("notes", ToolContext(session))


@pytest.fixture(name="known_first_version")
def known_first_version_fixture(monkeypatch: pytest.MonkeyPatch) -> int:
    """The SQLite backend's first versions made `KNOWN_FIRST`, for a test of one batch in
    which a write expects the version that an earlier write of the batch gives."""
    monkeypatch.setattr("actors.store._sqlite.first_version", lambda: KNOWN_FIRST)
    return KNOWN_FIRST


@final
class CountingBackend:
    """The real SQLite backend, counting the transactions of saves and their rows."""

    def __init__(self, path: Path) -> None:
        self.inner = SqliteBackend(path)
        self.url = self.inner.url
        self.batches: list[int] = []

    def commit(self, writes: Sequence[Write], now: float) -> list[int | Conflict]:
        results = self.inner.commit(writes, now)
        self.batches.append(len(writes))
        return results

    def __getattr__(self, name: str) -> object:  # loads, deletes, close: the real ones
        return getattr(self.inner, name)


async def test_writers_that_come_back_a_few_passes_apart_share_one_commit_per_round(
    tmp_path: Path,
) -> None:
    """The writers a batch answered write again 1 to 3 scheduler passes later (as an
    actor does: reply, next call, write); the next batch waits for all of them, so each
    round is one transaction, not one per pass."""
    backend = CountingBackend(tmp_path / "state.db")
    versions: dict[int, list[int]] = {}

    async def writer(number: int) -> None:
        version = None
        for _ in range(ROUNDS):
            for _ in range(number % 3):  # come back 1, 2 or 3 passes after the answer
                await trio.lowlevel.checkpoint()
            version = await store.save(key(f"s{number}"), b"x", version)
            versions.setdefault(number, []).append(version)

    async with open_batched(backend) as store, trio.open_nursery() as nursery:
        for number in range(WRITERS):
            nursery.start_soon(writer, number)
    assert backend.batches == [WRITERS] * ROUNDS
    assert sorted(versions) == list(range(WRITERS))
    for each in versions.values():  # each key's first version, then one more per round
        assert each[0] >= 1
        assert each == list(range(each[0], each[0] + ROUNDS))


async def test_each_of_many_concurrent_saves_gets_its_own_version_or_conflict(
    tmp_path: Path,
) -> None:
    """One transaction, yet every caller hears its own answer: the stale writers (every
    third) a VersionConflict naming what is stored, the others their new version."""
    backend = CountingBackend(tmp_path / "state.db")
    written: dict[int, int] = {}
    outcomes: dict[int, int | str] = {}

    async def write(number: int) -> None:
        written[number] = await store.save(key(f"s{number}"), b"old", None)

    async def save(number: int) -> None:
        # Every third writer read a version never stored: seven past the stored one.
        expected = written[number] + (7 if number % 3 == 0 else 0)
        try:
            outcomes[number] = await store.save(key(f"s{number}"), b"new", expected)
        except VersionConflict as exc:
            outcomes[number] = f"conflict: expected {exc.expected}, found {exc.found}"

    async with open_batched(backend) as store:
        async with trio.open_nursery() as nursery:
            for number in range(WRITERS):
                nursery.start_soon(write, number)
        async with trio.open_nursery() as nursery:
            for number in range(WRITERS):
                nursery.start_soon(save, number)
        stored = [await store.load(key(f"s{number}")) for number in range(WRITERS)]
    assert backend.batches == [WRITERS, WRITERS]
    for number in range(WRITERS):
        old = written[number]
        if number % 3:
            assert (outcomes[number], stored[number]) == (old + 1, Stored(old + 1, b"new"))
        else:
            assert outcomes[number] == f"conflict: expected {old + 7}, found {old}"
            assert stored[number] == Stored(old, b"old")


class TestOneBatch:
    """`SqliteBackend.commit` itself: one batch, one transaction, an outcome per write."""

    def test_a_conflict_in_the_middle_of_a_batch_leaves_the_others_committed(
        self, tmp_path: Path
    ) -> None:
        backend = SqliteBackend(tmp_path / "state.db")
        try:
            taken, u = backend.commit(
                [Write("taken", "s", b"old", None), Write("u", "s", b"u1", None)], 0.0
            )
            assert isinstance(taken, int)
            assert isinstance(u, int)
            results = backend.commit(
                [
                    Write("a", "s", b"a", None),
                    Write("taken", "s", b"new", None),  # stored already
                    Write("u", "s", b"u2", u),
                    Write("stale", "s", b"x", 4),  # never stored
                    Write("u-stale", "s", b"x", None),
                    Write("b", "s", b"b", None),
                ],
                1.0,
            )
            loaded = backend.load_many(["a", "taken", "u", "stale", "u-stale", "b"])
        finally:
            backend.close()
        a, u_stale, b = results[0], results[4], results[5]  # new keys: first versions
        assert all(isinstance(version, int) for version in (a, u_stale, b))
        assert results == [a, Conflict(taken), u + 1, Conflict(None), u_stale, b]
        assert loaded == [
            (a, b"a"),
            (taken, b"old"),
            (u + 1, b"u2"),
            None,
            (u_stale, b"x"),
            (b, b"b"),
        ]

    def test_an_update_that_meets_another_version_is_refused_alone(self, tmp_path: Path) -> None:
        """All of a batch's writes are updates, one of them stale: it alone is refused."""
        backend = SqliteBackend(tmp_path / "state.db")
        try:
            a, b, c = backend.commit([Write(name, "s", b"1", None) for name in "abc"], 0.0)
            assert isinstance(a, int)
            assert isinstance(b, int)
            assert isinstance(c, int)
            assert backend.commit([Write("b", "s", b"2", b)], 0.0) == [b + 1]
            results = backend.commit(
                [
                    Write("a", "s", b"new", a),
                    Write("b", "s", b"new", b),
                    Write("c", "s", b"new", c),
                ],
                0.0,
            )
            loaded = backend.load_many(list("abc"))
        finally:
            backend.close()
        assert results == [a + 1, Conflict(b + 1), c + 1]
        assert loaded == [(a + 1, b"new"), (b + 1, b"2"), (c + 1, b"new")]

    def test_writes_to_one_key_in_a_batch_apply_in_order(
        self, tmp_path: Path, known_first_version: int
    ) -> None:
        """A repeated key: each write meets the version the ones before it left (z's
        insert, then the update expecting its first version, and so on)."""
        first = known_first_version
        backend = SqliteBackend(tmp_path / "state.db")
        try:
            results = backend.commit(
                [
                    Write("z", "s", b"z1", None),
                    Write("a", "s", b"a1", None),
                    Write("z", "s", b"z2", first),
                    Write("z", "s", b"late", first),
                    Write("z", "s", b"z3", first + 1),
                ],
                0.0,
            )
            loaded = backend.load_many(["z", "a"])
        finally:
            backend.close()
        assert results == [first, first, first + 1, Conflict(first + 1), first + 2]
        assert loaded == [(first + 2, b"z3"), (first, b"a1")]

    def test_an_update_ahead_of_its_keys_insert_is_refused(
        self, tmp_path: Path, known_first_version: int
    ) -> None:
        """In order, the update finds nothing stored yet; run inserts first, it would land
        (it expects the version the insert gives)."""
        first = known_first_version
        backend = SqliteBackend(tmp_path / "state.db")
        try:
            results = backend.commit(
                [Write("y", "s", b"too soon", first), Write("y", "s", b"y1", None)], 0.0
            )
            loaded = backend.load_many(["y"])
        finally:
            backend.close()
        assert results == [Conflict(None), first]
        assert loaded == [(first, b"y1")]


async def test_a_row_sqlite_refuses_fails_its_own_save_only(tmp_path: Path) -> None:
    """A blob over SQLite's length limit fails its transaction: the batch is run again
    one save at a time, so only that save fails and the others of the moment land."""
    backend = SqliteBackend(tmp_path / "state.db")
    backend._writer.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1000)  # a limit a test can reach
    outcomes: dict[int, str] = {}

    async def save(number: int, blob: bytes) -> None:
        try:
            await store.save(key(f"s{number}"), blob, None)
        except StoreError as exc:
            outcomes[number] = str(exc)
        else:
            outcomes[number] = "saved"

    async with open_batched(backend) as store:
        async with trio.open_nursery() as nursery:
            for number in range(WRITERS):
                nursery.start_soon(save, number, b"x" * (5000 if number == 11 else 10))
        landed = [await store.load(key(f"s{number}")) for number in range(WRITERS)]
    assert "too big" in outcomes.pop(11)
    assert set(outcomes.values()) == {"saved"}
    assert [stored is None for stored in landed] == [number == 11 for number in range(WRITERS)]


async def test_a_save_cancelled_while_queued_is_withdrawn_and_the_others_land(
    tmp_path: Path,
) -> None:
    """Its caller was cancelled before the batch was taken: nothing of it is written."""
    backend = CountingBackend(tmp_path / "state.db")
    kept: dict[int, int] = {}

    async def keep(number: int) -> None:
        kept[number] = await store.save(key(f"s{number}"), b"kept", None)

    async with open_batched(backend) as store:
        async with trio.open_nursery() as nursery:
            for number in range(3):
                nursery.start_soon(keep, number)
            with trio.CancelScope() as scope:
                scope.cancel()  # delivered at the save's first wait: it is queued by then
                await store.save(key("gone"), b"never", None)
        assert await store.load(key("gone")) is None
        assert [await store.load(key(f"s{number}")) for number in range(3)] == [
            Stored(kept[number], b"kept") for number in range(3)
        ]
    assert backend.batches == [3]
