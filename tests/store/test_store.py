"""The state stores' contract, the same for every backend: versioned saves, group commit,
sessions, retention, and the errors a broken store gives.

The PostgreSQL cases run against a real server (see ``tests/_postgres.py``).
"""

from __future__ import annotations

import random
import re
import sqlite3
import threading
import time
import traceback
import urllib.parse
import uuid
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import psycopg
import pytest
import trio
from psycopg import sql

from actors.store import MemoryStore, Stored, StoreError, VersionConflict, open_store
from actors.store._base import decode_key, encode_key
from actors.store._batched import BatchRolledBack, Conflict, Write
from actors.store._postgres import PostgresBackend
from protocol import ActorKey, ToolContext, extract_context

from .._postgres import (  # noqa: F401  (fixtures)
    PostgresServer,
    free_port,
    fresh_postgres_url_fixture,
    postgres_server_fixture,
)
from .._stores import store_url_fixture  # noqa: F401  (a fixture)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from psycopg.rows import TupleRow

    from actors.store import StateStore


def key(session: str = "s1", module: str = "planning", assistant: str | None = None) -> ActorKey:
    return ActorKey(module, ToolContext(session, assistant))


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[StateStore]:
    async with open_store(url) as store:
        yield store


class TestKeys:
    @pytest.mark.parametrize(
        "context",
        [
            ToolContext("s"),
            ToolContext("s", "none"),
            ToolContext("s", None, "t"),
            ToolContext('s","x', "a\u00e9", "t"),
        ],
    )
    def test_a_key_round_trips_and_absent_parts_stay_distinct(self, context: ToolContext) -> None:
        """An assistant named 'none' and no assistant are different keys, also when stored."""
        original = ActorKey("planning", context)
        assert decode_key(encode_key(original)) == original
        assert encode_key(ActorKey("planning", ToolContext("s", "none"))) != encode_key(
            ActorKey("planning", ToolContext("s"))
        )


class TestContract:
    async def test_nothing_is_stored_for_a_new_key(self, store_url: str) -> None:
        async with opened(store_url) as store:
            assert await store.load(key()) is None

    async def test_a_first_save_gets_a_version_and_each_later_one_adds_one(
        self, store_url: str
    ) -> None:
        """The first save expects nothing and gets a first version (random, at least 1,
        with room above it); each later one expects the version it read and adds one."""
        async with opened(store_url) as store:
            first = await store.save(key(), b"one", None)
            assert 1 <= first <= 2**52
            assert await store.save(key(), b"two", first) == first + 1
            assert await store.save(key(), b"three", first + 1) == first + 2
            stored = await store.load(key())
        assert stored == Stored(first + 2, b"three")

    @pytest.mark.parametrize("how", ["delete_session", "delete"])
    async def test_a_key_written_again_after_a_delete_repeats_no_version_of_its_past(
        self, store_url: str, how: str
    ) -> None:
        """A key saved twice, deleted, then saved again: its new life's versions are none
        of its earlier life's, so a writer still holding a version of that life (an actor
        in a process sharing the store) is refused rather than overwrite the new state."""
        async with opened(store_url) as store:
            first = await store.save(key(), b"one", None)
            earlier = [first, await store.save(key(), b"two", first)]
            if how == "delete_session":
                assert await store.delete_session("s1") == 1
            else:
                assert await store.delete(key()) is True
            again = await store.save(key(), b"again", None)
            later = [again, await store.save(key(), b"again, two", again)]
            with pytest.raises(VersionConflict) as caught:
                await store.save(key(), b"stale", earlier[-1])
            stored = await store.load(key())
        assert earlier == [first, first + 1]
        assert later == [again, again + 1]
        assert set(later).isdisjoint(earlier)
        assert caught.value.found == later[-1]
        assert stored == Stored(later[-1], b"again, two")

    async def test_the_version_is_the_stored_ones_key_by_key(self, store_url: str) -> None:
        """What a process sharing the store asks before each call: the version saved last,
        None before the first save and after a delete; many asked at once, each its own."""
        keys = [key(f"s{index}") for index in range(50)]
        saved: dict[ActorKey, int | None] = {}
        async with opened(store_url) as store:
            assert await store.version(key()) is None
            for index, each in enumerate(keys):
                saved[each] = None  # saved 0, 1 or 2 times: the version each save returned
                for _ in range(index % 3):
                    saved[each] = await store.save(each, b"x", saved[each])
            asked: dict[ActorKey, int | None] = {}

            async def ask(each: ActorKey) -> None:
                asked[each] = await store.version(each)

            async with trio.open_nursery() as nursery:  # asked together: one query
                for each in keys:
                    nursery.start_soon(ask, each)
            await store.delete_session("s2")
            deleted = await store.version(keys[2])
        assert asked == saved
        assert [asked[each] is None for each in keys] == [index % 3 == 0 for index in range(50)]
        assert deleted is None

    @pytest.mark.parametrize(
        ("stored_first", "expects"),
        [(True, "nothing"), (True, "one before"), (True, "one after"), (False, "a version")],
    )
    async def test_a_stale_writer_is_refused_and_nothing_changes(
        self, store_url: str, stored_first: bool, expects: str
    ) -> None:
        """The fence: a save expecting another version than the stored one writes nothing.
        It expects nothing, or the version before or after the stored one, or (nothing
        stored) some version."""
        async with opened(store_url) as store:
            found = await store.save(key(), b"kept", None) if stored_first else None
            expected = {
                "nothing": None,
                "one before": None if found is None else found - 1,
                "one after": None if found is None else found + 1,
                "a version": 1,
            }[expects]
            with pytest.raises(VersionConflict) as caught:
                await store.save(key(), b"stale", expected)
            stored = await store.load(key())
        assert (caught.value.expected, caught.value.found) == (expected, found)
        assert str(caught.value).startswith("state of planning(session='s1') changed under")
        assert (stored is None) == (found is None)
        if stored is not None:
            assert stored.blob == b"kept"

    async def test_concurrent_saves_of_many_keys_all_land(self, store_url: str) -> None:
        """Group commit: 200 saves waiting together are all acknowledged and all stored."""
        keys = [key(f"s{index}") for index in range(200)]
        async with opened(store_url) as store:
            async with trio.open_nursery() as nursery:
                for each in keys:
                    nursery.start_soon(store.save, each, each.context.session_id.encode(), None)
            loaded = [await store.load(each) for each in keys]
        assert [s.blob if s else None for s in loaded] == [
            k.context.session_id.encode() for k in keys
        ]

    async def test_two_writers_of_one_key_one_wins(self, store_url: str) -> None:
        """Both expect the stored version: exactly one save succeeds (and adds one), the
        other conflicts with what the winner wrote."""
        async with opened(store_url) as store:
            base = await store.save(key(), b"base", None)
            outcomes: list[tuple[str, int | None]] = []  # what each heard, and its version

            async def write(blob: bytes) -> None:
                try:
                    outcomes.append(("saved", await store.save(key(), blob, base)))
                except VersionConflict as exc:
                    outcomes.append(("conflict, found", exc.found))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write, b"a")
                nursery.start_soon(write, b"b")
            stored = await store.load(key())
        assert sorted(outcomes) == [("conflict, found", base + 1), ("saved", base + 1)]
        assert stored is not None
        assert stored.version == base + 1

    async def test_ending_a_session_deletes_its_keys_in_every_module_only(
        self, store_url: str
    ) -> None:
        async with opened(store_url) as store:
            for each in (
                key("s1"),
                key("s1", "content_store"),
                key("s1", assistant="a"),
                key("s2"),
            ):
                await store.save(each, b"x", None)
            assert await store.delete_session("s1") == 3
            assert await store.load(key("s1")) is None
            assert await store.load(key("s2")) is not None

    async def test_the_sweep_deletes_only_what_was_not_written_for_the_retention(
        self, store_url: str
    ) -> None:
        async with opened(store_url) as store:
            await store.save(key("old"), b"x", None)
            await trio.sleep(1.0)  # time.time() moves on, whatever the machine does
            await store.save(key("new"), b"x", None)
            # A cutoff halfway between the two writes: how long the saves took is not read.
            written = {entry.key: entry.used_at for entry in await store.entries()}
            halfway = (written[key("old")] + written[key("new")]) / 2
            assert await store.sweep(time.time() - halfway) == 1
            assert await store.load(key("old")) is None
            assert await store.load(key("new")) is not None

    async def test_a_touched_key_outlives_a_sweep_that_takes_an_untouched_one(
        self, store_url: str
    ) -> None:
        """Marking a key as used moves its used_at, not its version; the sweep goes by it."""
        async with opened(store_url) as store:
            read = await store.save(key("read"), b"r", None)
            await store.save(key("idle"), b"i", None)
            await store.touch([key("nothing stored")])  # skipped, not an error
            before = {entry.key: entry for entry in await store.entries()}
            await trio.sleep(1.0)  # time.time() moves on, whatever the machine does
            await store.touch([key("read")])
            after = {entry.key: entry for entry in await store.entries()}
            assert after[key("read")].used_at > before[key("read")].used_at
            assert after[key("read")].version == before[key("read")].version == read
            assert after[key("idle")] == before[key("idle")]
            # A cutoff halfway between the two: the idle key is older, the read one newer.
            halfway = (after[key("read")].used_at + after[key("idle")].used_at) / 2
            assert await store.sweep(time.time() - halfway) == 1
            assert await store.load(key("idle")) is None
            assert await store.load(key("read")) == Stored(read, b"r")

    async def test_entries_list_a_session_or_a_tenant_exactly(self, store_url: str) -> None:
        """A tenant is T and T/…, matched as text (no pattern); entries carry no blob."""
        sessions = ["alpha", "alpha/one", "alpha/two", "alphabet", "alpha_/x", "beta/one", "%/x"]
        async with opened(store_url) as store:
            for session in sessions:
                await store.save(key(session), session.encode() * 2, None)
            await store.save(key("alpha/one", "content_store"), b"c", None)
            tenant = [
                (entry.key.module, entry.key.context.session_id, entry.size)
                for entry in await store.entries(tenant="alpha")
            ]
            one = [entry.key for entry in await store.entries(session="alpha/one")]
            wild = [entry.key for entry in await store.entries(tenant="%")]
            everything = await store.entries()
        assert sorted(tenant) == [
            ("content_store", "alpha/one", 1),
            ("planning", "alpha", 10),
            ("planning", "alpha/one", 18),
            ("planning", "alpha/two", 18),
        ]
        assert sorted(one, key=str) == [key("alpha/one", "content_store"), key("alpha/one")]
        assert wild == [key("%/x")]
        assert len(everything) == len(sessions) + 1

    async def test_deleting_one_key_leaves_the_rest_of_its_session(self, store_url: str) -> None:
        async with opened(store_url) as store:
            await store.save(key("s1"), b"x", None)
            kept = await store.save(key("s1", "content_store"), b"y", None)
            assert await store.delete(key("s1")) is True
            assert await store.delete(key("s1")) is False
            assert await store.load(key("s1")) is None
            assert await store.load(key("s1", "content_store")) == Stored(kept, b"y")

    async def test_blobs_of_any_bytes_round_trip(self, store_url: str) -> None:
        """Every byte value, NUL included, in a blob of a mebibyte: loaded as saved."""
        blob = bytes(range(256)) * 4096
        async with opened(store_url) as store:
            await store.save(key(), blob, None)
            stored = await store.load(key())
        assert stored is not None
        assert stored.blob == blob

    async def test_hostile_session_ids_are_data_and_match_exactly(self, store_url: str) -> None:
        """SQL, quotes, wildcards and format marks in ids are stored as text, never run or
        matched as patterns: ending session '%' deletes that session only."""
        sessions = [
            "s1",
            "'; DROP TABLE actor_state; --",
            "%",
            "s_",
            "%s",
            "\\",
            'a","b',
            "\u00e9\U0001f642",
        ]
        async with opened(store_url) as store:
            for session in sessions:
                await store.save(key(session), session.encode(), None)
            loaded = [await store.load(key(session)) for session in sessions]
            assert await store.delete_session("%") == 1
            assert await store.delete_session("s_") == 1
            left = [session for session in sessions if await store.load(key(session))]
        assert [each.blob if each else None for each in loaded] == [s.encode() for s in sessions]
        assert left == [
            "s1",
            "'; DROP TABLE actor_state; --",
            "%s",
            "\\",
            'a","b',
            "\u00e9\U0001f642",
        ]


class TestSqlite:
    async def test_what_was_saved_is_there_after_reopening(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        async with opened(url) as store:
            await store.save(key(), b"kept", None)
        async with opened(url) as store:
            stored = await store.load(key())
        assert stored is not None
        assert stored.blob == b"kept"

    async def test_a_new_file_and_its_folders_are_private(self, tmp_path: Path) -> None:
        """Every session's state is in the file: only this user may read it, or its log."""
        path = tmp_path / "new" / "state.db"
        async with open_store(f"sqlite:///{path}", create="folders") as store:
            await store.save(key(), b"x", None)
            modes = {p.name: p.stat().st_mode & 0o777 for p in path.parent.iterdir()}
        assert (path.parent.stat().st_mode & 0o777) == 0o700
        assert modes["state.db"] == 0o600
        assert modes.get("state.db-wal", 0o600) == 0o600

    async def test_the_folders_of_a_new_file_are_made_only_when_asked(self, tmp_path: Path) -> None:
        """By default a missing folder is a typo named in the error, and nothing is made."""
        url = f"sqlite:///{tmp_path / 'a' / 'b' / 'state.db'}"
        with pytest.raises(
            StoreError,
            match=rf"^cannot open the state store {re.escape(url)}: the folder "
            rf"{re.escape(str(tmp_path / 'a' / 'b'))} does not exist \(is the path right\?\)",
        ):
            async with opened(url):
                pass
        assert not (tmp_path / "a").exists()
        async with open_store(url, create="folders") as store:
            await store.save(key(), b"x", None)
        assert (tmp_path / "a" / "b" / "state.db").is_file()

    async def test_a_missing_file_is_an_error_when_nothing_may_be_made(
        self, tmp_path: Path
    ) -> None:
        """What an operator's tool opens to read must be there; it makes no empty store."""
        path = tmp_path / "state.db"
        with pytest.raises(StoreError, match=r": there is no state store at .*state\.db"):
            async with open_store(f"sqlite:///{path}", create="nothing"):
                pass
        assert not path.exists()

    async def test_a_file_that_is_not_a_database_is_a_clear_error(self, tmp_path: Path) -> None:
        path = tmp_path / "state.db"
        path.write_bytes(b"this is not sqlite" * 100)
        with pytest.raises(
            StoreError, match=r"^cannot open the state store sqlite:///.*: file is not a database"
        ):
            async with opened(f"sqlite:///{path}"):
                pass
        assert path.read_bytes() == b"this is not sqlite" * 100  # left as it was

    async def test_a_path_that_cannot_be_made_is_a_clear_error(self, tmp_path: Path) -> None:
        """A folder in the path is a file: refused at open, even for root."""
        blocker = tmp_path / "file"
        blocker.write_bytes(b"")
        with pytest.raises(StoreError, match=r"^cannot open the state store sqlite:///.*/file/"):
            async with opened(f"sqlite:///{blocker / 'state.db'}"):
                pass

    async def test_a_locked_database_fails_the_save_and_the_store_goes_on(
        self, tmp_path: Path
    ) -> None:
        """Another process holds the write lock past the busy timeout: an error, not a hang."""
        path = tmp_path / "state.db"
        async with opened(f"sqlite:///{path}") as store:
            v1 = await store.save(key(), b"v1", None)
            blocker = sqlite3.connect(path, isolation_level=None)
            blocker.execute("BEGIN EXCLUSIVE")
            try:
                store._backend._writer.execute("PRAGMA busy_timeout=50")  # type: ignore[attr-defined]
                with pytest.raises(
                    StoreError, match=r"^save failed in sqlite:///.*: database is locked"
                ):
                    await store.save(key(), b"v2", v1)
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            assert await store.save(key(), b"v2", v1) == v1 + 1

    async def test_a_save_waits_for_a_session_delete_rather_than_fail_on_its_lock(
        self, tmp_path: Path
    ) -> None:
        """A session's delete holds SQLite's write lock (long, on a slow disk): a save of
        another session meanwhile waits its turn and succeeds, rather than failing its call
        with "database is locked" once the busy timeout runs out."""
        async with opened(f"sqlite:///{tmp_path / 'state.db'}") as store:
            await store.save(key("ending"), b"gone", None)
            busy = await store.save(key("busy"), b"v1", None)
            backend = store._backend  # type: ignore[attr-defined]
            backend._writer.execute("PRAGMA busy_timeout=50")
            holding, release = threading.Event(), threading.Event()

            def slow_delete(session: str) -> int:
                with backend._maintenance() as connection:
                    connection.execute("BEGIN IMMEDIATE")
                    deleted: int = connection.execute(
                        "DELETE FROM actor_state WHERE session = ?", (session,)
                    ).rowcount
                    holding.set()
                    release.wait(30)
                    connection.execute("COMMIT")
                    return deleted

            backend.delete_session = slow_delete
            outcomes: dict[str, object] = {}

            async def save() -> None:
                try:
                    outcomes["save"] = await store.save(key("busy"), b"v2", busy)
                except StoreError as error:
                    outcomes["save"] = error

            async def delete() -> None:
                outcomes["delete"] = await store.delete_session("ending")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(delete)
                await trio.to_thread.run_sync(holding.wait, 30)
                nursery.start_soon(save)
                writes: trio.CapacityLimiter = store._writes  # type: ignore[attr-defined]
                with trio.fail_after(30):
                    # Either the save failed on the lock, or it waits for its turn.
                    while "save" not in outcomes and not writes.statistics().tasks_waiting:  # noqa: ASYNC110
                        await trio.sleep(0.01)
                release.set()
            assert outcomes == {"delete": 1, "save": busy + 1}
            assert await store.entries(session="ending") == []

    @pytest.mark.parametrize(
        "url", ["sqlite://state.db", "sqlite:///", "redis://x", "file.db", "sqlite:////"]
    )
    async def test_a_url_of_no_known_form_is_refused(self, url: str) -> None:
        with pytest.raises(
            ValueError, match=r"(unknown state store URL|a SQLite URL names a file)"
        ):
            async with opened(url):
                pass


def test_the_memory_store_is_a_state_store() -> None:
    store: StateStore = MemoryStore()
    assert store.url == "memory"


def _client(url: str) -> psycopg.Connection[TupleRow]:
    """A connection of the test's own to the store's database, as another client would hold."""
    return psycopg.connect(url, autocommit=True)


def _lock_waiters(observer: psycopg.Connection[TupleRow]) -> list[int]:
    """The server processes of the observer's database that wait for a lock.

    The observer must be outside a transaction: a transaction sees one snapshot
    of pg_stat_activity from its first look on.
    """
    rows = observer.execute(
        "SELECT pid FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchall()
    return [pid for (pid,) in rows]


KNOWN_FIRST = 1_000_003
"""The first version of every key while `known_first_version` is on: not 1, so that a
backend that does not ask `first_version` is caught."""


@pytest.fixture(name="known_first_version")
def known_first_version_fixture(monkeypatch: pytest.MonkeyPatch) -> int:
    """The PostgreSQL backend's first versions made `KNOWN_FIRST`, for a test of one batch
    in which a write expects the version that an earlier write of the batch gives."""
    monkeypatch.setattr("actors.store._postgres.first_version", lambda: KNOWN_FIRST)
    return KNOWN_FIRST


# About 4 KB of four-byte characters that do not repeat, so the index cannot compress
# them below the 2 704 bytes PostgreSQL takes in a B-tree row.
INCOMPRESSIBLE = "".join(chr(0x10000 + (index * 7919) % 0xFFFF) for index in range(1000))


class TestPostgres:
    @pytest.mark.parametrize(
        ("written", "shown"),
        [
            (
                "postgresql://alice:hunter2@127.0.0.1:{port}/state",
                "postgresql://alice@127.0.0.1:{port}/state",
            ),
            (
                "postgresql://alice@127.0.0.1:{port}/state?password=hunter2&sslmode=disable",
                "postgresql://alice@127.0.0.1:{port}/state?sslmode=disable",
            ),
            (
                "postgres://alice:hunter2%21@127.0.0.1:{port}/state?password=hunter2",
                "postgres://alice@127.0.0.1:{port}/state",
            ),
            (
                "postgresql://alice@127.0.0.1:{port}/state?sslpassword=hunter2&connect_timeout=5",
                "postgresql://alice@127.0.0.1:{port}/state?connect_timeout=5",
            ),
        ],
    )
    async def test_an_unreachable_server_is_refused_at_open_without_the_password(
        self, written: str, shown: str
    ) -> None:
        """The error names the URL as written, minus the password, wherever it was given."""
        port = free_port()
        with pytest.raises(StoreError) as caught:
            async with opened(written.format(port=port)):
                pass
        message = str(caught.value)
        assert message.startswith(
            f"cannot open the state store {shown.format(port=port)}: connection failed"
        )
        assert "hunter2" not in "".join(traceback.format_exception(caught.value))

    async def test_a_password_that_libpq_quotes_back_is_hidden(self) -> None:
        """libpq repeats a malformed part of the URL in its error: the password is blanked there."""
        with pytest.raises(StoreError) as caught:
            async with opened("postgresql://alice:hunter2%zz@127.0.0.1:1/state"):
                pass
        assert str(caught.value) == (
            "cannot open the state store postgresql://alice@127.0.0.1:1/state: "
            'invalid percent-encoded token: "***"'
        )

    async def test_the_url_of_an_open_store_has_no_password(self, fresh_postgres_url: str) -> None:
        with_password = fresh_postgres_url.replace("postgres@", "postgres:hunter2@")
        async with opened(with_password) as store:  # the test server trusts any password
            assert store.url == fresh_postgres_url

    async def test_a_url_without_a_host_is_shown_whole_and_shared_by_default(
        self, fresh_postgres_url: str
    ) -> None:
        """libpq's ``postgresql:///DB?host=…``, the usual way to a local server: shown with
        its ``//``, and a PostgreSQL store all the same, whose processes share it (the
        check of `RuntimeConfig.shared_store` is on), however the URL is written."""
        parts = urllib.parse.urlsplit(fresh_postgres_url)
        query = f"host={parts.hostname}&port={parts.port}&user={parts.username}"
        hostless = f"postgresql://{parts.path}?{query}"
        async with opened(hostless) as store, opened(fresh_postgres_url) as other:
            assert store.url == hostless
            assert store.shared_by_default is other.shared_by_default is True  # type: ignore[attr-defined]

    async def test_the_largest_key_the_protocol_admits_fits_the_index(
        self, fresh_postgres_url: str
    ) -> None:
        """Three ids at the limits, quotes doubled by the key's JSON: still under the index's."""
        worst = '"' * 171 + INCOMPRESSIBLE[:85]  # 256 characters, 511 bytes, 682 as JSON
        context, _ = extract_context(
            {"__sessionId": worst, "__assistantId": worst, "__threadId": worst}
        )
        largest = ActorKey("a_module_with_a_long_name_for_good_measure", context)
        assert len(encode_key(largest).encode()) > 2000
        async with opened(fresh_postgres_url) as store:
            version = await store.save(largest, b"x", None)
            assert await store.load(largest) == Stored(version, b"x")

    def test_a_row_the_server_refuses_rolls_its_batch_back_whole(
        self, fresh_postgres_url: str
    ) -> None:
        """A key past the index's row limit: nothing of the batch lands, and it says so."""
        backend = PostgresBackend(fresh_postgres_url)
        huge = encode_key(key(INCOMPRESSIBLE))
        try:
            writes = [Write("a", "s", b"a", None), Write(huge, "s", b"x", None)]
            with pytest.raises(BatchRolledBack, match=r"^save failed in postgresql://.*index row"):
                backend.commit([*writes, Write("b", "s", b"b", None)], 0.0)
            assert backend.load_many(["a", "b"]) == [None, None]
            [version] = backend.commit([Write("a", "s", b"a", None)], 0.0)  # it goes on
            assert backend.load_many(["a", "b"]) == [(version, b"a"), None]
        finally:
            backend.close()

    async def test_one_bad_row_fails_no_other_save_of_its_batch(
        self, fresh_postgres_url: str
    ) -> None:
        """Group commit: the refused row's save fails alone; the others of the moment land."""
        huge = key(INCOMPRESSIBLE)
        outcomes: dict[str, str] = {}
        versions: dict[ActorKey, int] = {}
        async with opened(fresh_postgres_url) as store:

            async def save(each: ActorKey) -> None:
                try:
                    versions[each] = await store.save(each, b"x", None)
                except StoreError as exc:
                    outcomes[each.context.session_id[:8]] = str(exc)
                else:
                    outcomes[each.context.session_id[:8]] = "saved"

            async with trio.open_nursery() as nursery:
                for index in range(40):
                    nursery.start_soon(save, key(f"s{index}"))
                nursery.start_soon(save, huge)
                for index in range(40, 80):
                    nursery.start_soon(save, key(f"s{index}"))
            landed = [await store.load(key(f"s{index}")) for index in range(80)]
        assert "index row" in outcomes.pop(huge.context.session_id[:8])
        assert set(outcomes.values()) == {"saved"}
        assert landed == [Stored(versions[key(f"s{index}")], b"x") for index in range(80)]

    def test_a_conflict_in_the_middle_of_a_batch_leaves_the_others_committed(
        self, fresh_postgres_url: str
    ) -> None:
        """One transaction, yet a refused write is an answer, not a failure: the rest land."""
        backend = PostgresBackend(fresh_postgres_url)
        try:
            [taken] = backend.commit([Write("taken", "s", b"old", None)], 0.0)
            results = backend.commit(
                [
                    Write("a", "s", b"a", None),
                    Write("taken", "s", b"new", None),
                    Write("b", "s", b"b", None),
                    Write("gone", "s", b"x", 3),
                ],
                1.0,
            )
            loaded = backend.load_many(["a", "taken", "b", "gone"])
        finally:
            backend.close()
        a, b = results[0], results[2]
        assert isinstance(taken, int)
        assert isinstance(a, int)
        assert isinstance(b, int)
        assert results == [a, Conflict(taken), b, Conflict(None)]
        assert loaded == [(a, b"a"), (taken, b"old"), (b, b"b"), None]

    def test_writes_to_one_key_in_a_batch_apply_in_order(
        self, fresh_postgres_url: str, known_first_version: int
    ) -> None:
        """Rows are written in key order, yet one key's writes keep the order they came in:
        z's insert, then the update expecting its first version, and so on."""
        first = known_first_version
        backend = PostgresBackend(fresh_postgres_url)
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
        assert results == [first, first, first + 1, Conflict(first + 2), first + 2]
        assert loaded == [(first + 2, b"z3"), (first, b"a1")]

    async def test_two_processes_racing_on_shared_keys_one_save_wins_each_version(
        self, fresh_postgres_url: str
    ) -> None:
        """Two stores on one database, twenty writers over three keys, each loading then saving:
        every version of every key is won by exactly one save, the others conflict, and no
        batch fails (batches sharing keys wait for each other rather than deadlock)."""
        keys = [key(f"shared{index}") for index in range(3)]
        wins: dict[ActorKey, list[int]] = {each: [] for each in keys}
        conflicts = 0

        async def writer(store: StateStore, rng: random.Random) -> None:
            nonlocal conflicts
            for _ in range(15):
                each = rng.choice(keys)
                stored = await store.load(each)
                try:
                    wins[each].append(
                        await store.save(each, b"x", None if stored is None else stored.version)
                    )
                except VersionConflict:
                    conflicts += 1

        async with opened(fresh_postgres_url) as first, opened(fresh_postgres_url) as second:
            async with trio.open_nursery() as nursery:
                for index in range(20):
                    nursery.start_soon(writer, (first, second)[index % 2], random.Random(index))
            final = {each: await second.load(each) for each in keys}
        for each in keys:
            stored = final[each]
            assert stored is not None
            inserted = min(wins[each])  # the first version: the one save that expected nothing
            assert inserted >= 1
            assert sorted(wins[each]) == list(range(inserted, stored.version + 1))
        assert conflicts > 0

    def test_batches_locking_shared_keys_in_opposite_orders_do_not_deadlock(
        self, fresh_postgres_url: str
    ) -> None:
        """Process A saves k1, gate-a, k2; process B saves k2, gate-b, k1; both gates are held
        elsewhere until both batches wait on them. Taken in batch order, A would hold k1 and
        B k2, each waiting for the other (PostgreSQL aborts one batch). Taken in key order,
        both batches finish, and each shared key has exactly one winner."""
        names = ("k1", "k2", "gate-a", "gate-b")
        seed = PostgresBackend(fresh_postgres_url)
        try:
            seeded = seed.commit([Write(each, "s", b"v1", None) for each in names], 0.0)
        finally:
            seed.close()
        # Each batch expects the seeded versions, so that its updates match their rows and
        # wait for the locks on them (an update expecting another version waits for nothing).
        first: dict[str, int] = {}
        for each, version in zip(names, seeded, strict=True):
            assert isinstance(version, int)
            first[each] = version
        results: dict[str, dict[str, int | Conflict]] = {}
        errors: list[BaseException] = []

        def commit(name: str, order: list[str]) -> None:
            backend = PostgresBackend(fresh_postgres_url)
            try:
                outcome = backend.commit(
                    [Write(each, "s", b"x", first[each]) for each in order], 1.0
                )
                results[name] = dict(zip(order, outcome, strict=True))
            except BaseException as exc:
                errors.append(exc)
            finally:
                backend.close()

        threads = [
            threading.Thread(target=commit, args=("a", ["k1", "gate-a", "k2"])),
            threading.Thread(target=commit, args=("b", ["k2", "gate-b", "k1"])),
        ]
        with _client(fresh_postgres_url) as observer, _client(fresh_postgres_url) as locker:
            with locker.transaction():
                locker.execute("SELECT 1 FROM actor_state WHERE key LIKE 'gate-%' FOR UPDATE")
                for thread in threads:
                    thread.start()
                deadline = time.monotonic() + 30  # bounded: a batch that never waits fails
                while (waiting := len(_lock_waiters(observer))) < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
        for thread in threads:
            thread.join()
        assert errors == []
        assert waiting == 2  # both batches waited on their gate, holding a shared key
        assert (results["a"]["gate-a"], results["b"]["gate-b"]) == (
            first["gate-a"] + 1,
            first["gate-b"] + 1,
        )
        for shared in ("k1", "k2"):
            won = first[shared] + 1
            assert {results["a"][shared], results["b"][shared]} == {won, Conflict(won)}

    async def test_a_restarted_server_is_noticed_before_the_next_batch(
        self, postgres_server: PostgresServer, fresh_postgres_url: str
    ) -> None:
        """The server hung up on every connection: the next load and save reconnect first,
        so the restart costs no failed call, and what was saved before it is there."""
        async with opened(fresh_postgres_url) as store:
            v1 = await store.save(key(), b"v1", None)
            postgres_server.restart()
            stored = await store.load(key())
            assert await store.save(key(), b"v2", v1) == v1 + 1
        assert stored == Stored(v1, b"v1")

    async def test_a_store_works_again_once_its_server_is_back(
        self, postgres_server: PostgresServer, fresh_postgres_url: str
    ) -> None:
        """While the server is down every call fails (nothing acknowledged); after, all work."""
        async with opened(fresh_postgres_url) as store:
            v1 = await store.save(key(), b"v1", None)
            with postgres_server.stopped():
                failures = []
                for call in (
                    store.save(key(), b"lost", v1),
                    store.load(key()),
                    store.delete_session("s1"),
                ):
                    with pytest.raises(StoreError) as caught:
                        await call
                    failures.append(str(caught.value))
            assert await store.save(key(), b"v2", v1) == v1 + 1
            assert await store.delete_session("s1") == 1
        where = re.escape(fresh_postgres_url)
        for failure, action in zip(failures, ["save", "load", "delete_session"], strict=True):
            assert re.match(rf"^{action} failed in {where}: connection failed", failure)

    async def test_a_connection_killed_mid_save_fails_that_save_only(
        self, fresh_postgres_url: str
    ) -> None:
        """The writer's connection dies while its transaction waits for a row lock: that save
        is refused (and rolled back), and the next one goes out on a new connection."""
        async with opened(fresh_postgres_url) as store:
            v1 = await store.save(key(), b"v1", None)
            with (
                _client(fresh_postgres_url) as observer,
                _client(fresh_postgres_url) as locker,
                locker.transaction(),
            ):
                locker.execute("SELECT 1 FROM actor_state FOR UPDATE")
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._kill_the_lock_waiter, observer)
                    with pytest.raises(StoreError) as caught:
                        await store.save(key(), b"lost", v1)  # v1: it waits for the lock
            assert await store.save(key(), b"v2", v1) == v1 + 1
            assert await store.load(key()) == Stored(v1 + 1, b"v2")
        assert str(caught.value).startswith(f"save failed in {fresh_postgres_url}: ")

    @staticmethod
    async def _kill_the_lock_waiter(observer: psycopg.Connection[TupleRow]) -> None:
        # Polling the server: there is no event to wait for. Bounded, so that a save that
        # never waits (a conflict, say) fails the test rather than hang it.
        with trio.fail_after(30):
            while not (waiters := _lock_waiters(observer)):  # noqa: ASYNC110
                await trio.sleep(0.01)
        observer.execute("SELECT pg_terminate_backend(%s)", (waiters[0],))

    def test_processes_opening_a_new_database_together_all_succeed(
        self, fresh_postgres_url: str
    ) -> None:
        """Eight openers race to create the table: each one opens; none trips on another."""
        start = threading.Barrier(8)
        errors: list[BaseException] = []

        def open_one() -> None:
            start.wait()
            try:
                PostgresBackend(fresh_postgres_url).close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_one) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []

    async def test_a_table_of_another_shape_is_refused_at_open(
        self, fresh_postgres_url: str
    ) -> None:
        with _client(fresh_postgres_url) as other:
            other.execute("CREATE TABLE actor_state (key text PRIMARY KEY, value text)")
            with pytest.raises(
                StoreError,
                match=r'^cannot open the state store postgresql://.*: column "session" does not',
            ):
                async with opened(fresh_postgres_url):
                    pass
            columns = other.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'actor_state' ORDER BY ordinal_position"
            ).fetchall()
        assert columns == [("key",), ("value",)]

    async def test_a_user_who_may_not_create_tables_uses_the_existing_one(
        self, fresh_postgres_url: str
    ) -> None:
        """The table made by someone else (a migration); the store's user may only read and
        write rows: opening does not try to create anything."""
        PostgresBackend(fresh_postgres_url).close()
        role = f"app_{uuid.uuid4().hex}"
        with _client(fresh_postgres_url) as admin:
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            try:
                admin.execute(
                    sql.SQL(
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON actor_state, actor_parts TO {}"
                    ).format(sql.Identifier(role))
                )
                async with opened(fresh_postgres_url.replace("postgres@", f"{role}@")) as store:
                    version = await store.save(key(), b"x", None)
                    assert await store.save(key(), b"y", version) == version + 1
                    assert await store.load(key()) == Stored(version + 1, b"y")
            finally:
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
