"""Part-wise durable state at its edges: an upgrade (a migration, a field newly stored in
parts), a part moved, part names the stores cannot take, a delete racing a save, and a
load that must read each blob once.

Each of these failed against the first version of part-wise state (a review's findings).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

import attrs
import psycopg
import trio

from actors import Durable, ToolModule, open_runtime
from actors.store import PartChanges, StoreError, open_store
from actors.store._base import encode_key
from actors.store._batched import Write
from actors.store._postgres import _LOAD_WITH_PARTS as _POSTGRES_LOAD
from actors.store._postgres import PostgresBackend, _statement
from actors.store._sqlite import _LOAD_WITH_PARTS as _SQLITE_LOAD
from actors.store._sqlite import SqliteBackend
from protocol import ActorKey, Scope, ToolContext

from .._calls import call_as
from .._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401

if TYPE_CHECKING:
    from pathlib import Path


# ---- a notebook at schema 1 (Note.text) and at schema 2 (Note.body) ---------------------


@attrs.frozen
class NoteV1:
    text: str


@attrs.define
class BookV1:
    title: str = "untitled"
    notes: dict[str, NoteV1] = attrs.field(factory=dict)


@attrs.frozen
class NoteV2:
    body: str


@attrs.define
class BookV2:
    title: str = "untitled"
    notes: dict[str, NoteV2] = attrs.field(factory=dict)


def _renamed_field(data: Any) -> Any:
    """Schema 1 -> 2: each note's `text` is now its `body`."""
    return {**data, "notes": {k: {"body": v["text"]} for k, v in data["notes"].items()}}


def _rekeyed(data: Any) -> Any:
    """Schema 1 -> 2 (another release): note ids get a prefix, the field is renamed too."""
    return {**data, "notes": {f"note-{k}": {"body": v["text"]} for k, v in data["notes"].items()}}


def book(version: int, migration: Any = _renamed_field) -> ToolModule[Any]:
    state_type: Any = BookV1 if version == 1 else BookV2
    durable = Durable(
        state_type,
        schema=version,
        migrations={1: migration} if version == 2 else {},
        parts=("notes",),
    )
    module: ToolModule[Any] = ToolModule(
        "book", lambda _context: state_type(), scope=Scope.SESSION, durable=durable
    )

    @module.tool()
    def put(state: Any, note_id: str, text: str) -> str:
        """Make or replace a note."""
        state.notes[note_id] = NoteV1(text) if version == 1 else NoteV2(text)
        return note_id

    @module.tool()
    def retitle(state: Any, title: str) -> str:
        """Change the header only."""
        state.title = title
        return title

    @module.tool()
    def to_end(state: Any, note_id: str) -> str:
        """Move a note to the end of the notebook (a new object in its place)."""
        note = state.notes.pop(note_id)
        state.notes[note_id] = attrs.evolve(note)
        return note_id

    @module.tool(read_only=True)
    def show(state: Any) -> str:
        """Title and notes, in order."""
        notes = [
            [k, getattr(n, "text", None) or getattr(n, "body", None)]
            for k, n in state.notes.items()
        ]
        return json.dumps([state.title, notes])

    return module


async def shown(runtime: Any, session: str = "s1") -> Any:
    result = await call_as(runtime, "book__show", session)
    assert not result.is_error, result.first_text
    return json.loads(result.first_text)


async def ok(runtime: Any, tool: str, session: str = "s1", **arguments: Any) -> None:
    result = await call_as(runtime, f"book__{tool}", session, **arguments)
    assert not result.is_error, result.first_text


class TestMigrations:
    async def test_a_migrated_part_wise_state_still_reads_after_its_first_write(
        self, tmp_path: Path
    ) -> None:
        """Schema 1 stored in parts; schema 2 migrates, a call changes the header only; the
        store must not be left with a schema-2 header over schema-1 parts."""
        url = f"sqlite:///{tmp_path / 'state.db'}"
        async with open_store(url) as store:
            async with open_runtime([book(1)], store=store) as runtime:
                await ok(runtime, "put", note_id="n1", text="one")
                await ok(runtime, "put", note_id="n2", text="two")
            async with open_runtime([book(2)], store=store) as runtime:
                assert await shown(runtime) == ["untitled", [["n1", "one"], ["n2", "two"]]]
                await ok(runtime, "retitle", title="mine")  # acknowledged
            async with open_runtime([book(2)], store=store) as runtime:
                result = await call_as(runtime, "book__show", "s1")
                assert not result.is_error, result.first_text
                assert json.loads(result.first_text) == [
                    "mine",
                    [["n1", "one"], ["n2", "two"]],
                ]

    async def test_a_migration_that_renames_part_ids_is_stored_as_migrated(
        self, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        async with open_store(url) as store:
            async with open_runtime([book(1)], store=store) as runtime:
                await ok(runtime, "put", note_id="n1", text="one")
            async with open_runtime([book(2, _rekeyed)], store=store) as runtime:
                assert await shown(runtime) == ["untitled", [["note-n1", "one"]]]
                await ok(runtime, "put", note_id="n2", text="two")
            stored = await store.load(ActorKey("book", ToolContext("s1")), parts=True)
            assert stored is not None
            assert sorted(stored.parts or {}) == ["notes:n2", "notes:note-n1"]


class TestOrder:
    async def test_a_part_moved_to_the_end_in_one_call_stays_there_after_a_restart(
        self, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        async with open_store(url) as store:
            async with open_runtime([book(1)], store=store) as runtime:
                for note_id in ("a", "b", "c"):
                    await ok(runtime, "put", note_id=note_id, text=note_id)
                await ok(runtime, "to_end", note_id="a")
                before = await shown(runtime)
                assert before == ["untitled", [["b", "b"], ["c", "c"], ["a", "a"]]]
            async with open_runtime([book(1)], store=store) as runtime:
                assert await shown(runtime) == before


class TestPartNames:
    async def test_one_sessions_bad_part_name_fails_no_other_sessions_save(
        self, tmp_path: Path
    ) -> None:
        """A part id the driver cannot encode (a lone surrogate from a client's JSON) must
        fail its own save only, as a bad blob does, not every save of its batch."""
        url = f"sqlite:///{tmp_path / 'state.db'}"
        async with open_store(url) as store:
            await self._innocent_fails(store)

    async def test_postgres_a_nul_in_a_part_name_fails_no_other_save(
        self, fresh_postgres_url: str
    ) -> None:
        async with open_store(fresh_postgres_url) as store:
            await self._innocent_fails(store, bad="a\x00b")

    async def _innocent_fails(
        self, store: Any, bad: str = "\ud800", innocent: str = "innocent"
    ) -> None:
        outcomes: dict[str, object] = {}

        async def save(session: str, part: str) -> None:
            key = ActorKey("book", ToolContext(session))
            try:
                outcomes[session] = await store.save(
                    key, b'{"schema":1,"header":{}}', None, changes=PartChanges(((part, b"1"),))
                )
            except StoreError as exc:
                outcomes[session] = exc

        async with trio.open_nursery() as nursery:  # one batch
            nursery.start_soon(save, "hostile", f"notes:{bad}")
            nursery.start_soon(save, innocent, "notes:fine")
        assert isinstance(outcomes["hostile"], StoreError)
        version = outcomes[innocent]
        assert isinstance(version, int), version  # the innocent save landed, as stored:
        stored = await store.load(ActorKey("book", ToolContext(innocent)), parts=True)
        assert stored is not None
        assert (stored.version, stored.parts) == (version, {"notes:fine": b"1"})
        assert await store.load(ActorKey("book", ToolContext("hostile"))) is None

    async def test_through_the_runtime_a_bad_note_id_fails_another_tenants_call(
        self, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        results: dict[str, Any] = {}

        async def put(runtime: Any, session: str, note_id: str) -> None:
            results[session] = await call_as(
                runtime, "book__put", session, note_id=note_id, text="x"
            )

        async with open_store(url) as store, open_runtime([book(1)], store=store) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(put, runtime, "hostile", "\ud800")
                nursery.start_soon(put, runtime, "innocent", "n1")
        assert not results["innocent"].is_error, results["innocent"].first_text
        assert results["hostile"].is_error
        assert "is not valid Unicode" in results["hostile"].first_text


class TestPostgresDeleteRace:
    def test_a_delete_racing_a_save_leaves_no_part_to_leak_into_the_next_state(
        self, fresh_postgres_url: str
    ) -> None:
        """delete(key) while a save that adds a part is in flight: the key goes, and so must
        every part of it, or the key's next, fresh state loads the deleted part."""
        backend = PostgresBackend(fresh_postgres_url)
        key = encode_key(ActorKey("book", ToolContext("s1")))
        first = Write(key, "s1", b"h1", None, PartChanges((("notes:old", b"1"),)))
        (old_version,) = backend.commit([first], time.time())
        assert isinstance(old_version, int), old_version
        racing = Write(key, "s1", b"h2", old_version, PartChanges((("notes:secret", b"2"),)))
        with psycopg.connect(fresh_postgres_url) as saver:  # a transaction, like a batch
            saver.execute(*_statement(racing, time.time()))
            deleted: list[bool] = []
            thread = threading.Thread(target=lambda: deleted.append(backend.delete(key)))
            thread.start()
            _wait_for_a_lock_wait(fresh_postgres_url)  # the delete, behind the save's row lock
            saver.commit()
            thread.join()
        assert deleted == [True]
        fresh = Write(key, "s1", b"h-new", None, PartChanges((("notes:mine", b"3"),)))
        (fresh_version,) = backend.commit([fresh], time.time())  # a new life of the key
        assert isinstance(fresh_version, int), fresh_version
        assert fresh_version not in (old_version, old_version + 1)  # the deleted life's
        ((version, blob, parts),) = backend.load_many_with_parts([key])
        backend.close()
        assert (version, blob) == (fresh_version, b"h-new")
        assert list(parts) == ["notes:mine"], f"the deleted key's part came back: {parts}"


def _wait_for_a_lock_wait(url: str, within: float = 60.0) -> None:
    """Return once some session of the database waits for a lock (polled, no fixed wait);
    fail after `within` seconds, a bound no loaded machine comes near."""
    deadline = time.monotonic() + within
    with psycopg.connect(url, autocommit=True) as watcher:
        while watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchone() != (1,):
            assert time.monotonic() < deadline, "the delete never waited for the save's lock"
            time.sleep(0.01)


class TestLoadReadsEachBlobOnce:
    def test_the_sqlite_statement_returns_the_blob_once_and_each_part_once(
        self, tmp_path: Path
    ) -> None:
        """A blob and 50 parts: 51 rows, the blob in one of them (a join would repeat it in
        each of 50: quadratic in a large header with many parts)."""
        connection, version = self._filled_sqlite(tmp_path)
        key = encode_key(ActorKey("book", ToolContext("s1")))
        rows = connection.execute(_SQLITE_LOAD.format(marks="?"), (key, key)).fetchall()
        assert len(rows) == 51
        assert rows[0][2] == version  # the blob's row carries the version the save gave
        assert sum(len(row[3]) for row in rows) == 10_000 + 50

    def _filled_sqlite(self, tmp_path: Path) -> tuple[sqlite3.Connection, int]:
        """A store holding one key's blob and 50 parts: a connection to it, the key's version."""
        path = tmp_path / "state.db"
        backend = SqliteBackend(path)
        key = encode_key(ActorKey("book", ToolContext("s1")))
        parts = PartChanges(tuple((f"notes:{index}", b"p") for index in range(50)))
        (version,) = backend.commit([Write(key, "s1", b"h" * 10_000, None, parts)], time.time())
        assert isinstance(version, int), version
        backend.close()
        return sqlite3.connect(path), version

    def test_the_postgres_statement_returns_the_blob_once_and_each_part_once(
        self, fresh_postgres_url: str
    ) -> None:
        backend = PostgresBackend(fresh_postgres_url)
        key = encode_key(ActorKey("book", ToolContext("s1")))
        parts = PartChanges(tuple((f"notes:{index}", b"p") for index in range(50)))
        (version,) = backend.commit([Write(key, "s1", b"h" * 10_000, None, parts)], time.time())
        assert isinstance(version, int), version
        backend.close()
        with psycopg.connect(fresh_postgres_url) as connection:
            rows = connection.execute(_POSTGRES_LOAD, ([key], [key])).fetchall()
        assert len(rows) == 51
        assert rows[0][2] == version  # the blob's row carries the version the save gave
        assert sum(len(row[3]) for row in rows) == 10_000 + 50


@attrs.define
class Labelled:
    notes: dict[str, NoteV1] = attrs.field(factory=dict)
    labels: dict[str, str] = attrs.field(factory=dict)


def labelled(parts: tuple[str, ...]) -> ToolModule[Labelled]:
    module: ToolModule[Labelled] = ToolModule(
        "labelled",
        lambda _context: Labelled(),
        scope=Scope.SESSION,
        durable=Durable(Labelled, parts=parts),
    )

    @module.tool()
    def label(state: Labelled, name: str, text: str) -> str:
        """Set a label."""
        state.labels[name] = text
        return name

    @module.tool()
    def put(state: Labelled, note_id: str, text: str) -> str:
        """Make or replace a note."""
        state.notes[note_id] = NoteV1(text)
        return note_id

    @module.tool(read_only=True)
    def show(state: Labelled) -> str:
        """The labels."""
        return json.dumps(state.labels)

    return module


class TestPartsFieldsChange:
    async def test_declaring_one_more_field_as_parts_keeps_what_its_header_held(
        self, tmp_path: Path
    ) -> None:
        """Release N stores `labels` in the header; release N+1 makes it a parts field too
        (same plain data, so no schema change): the labels must not vanish."""
        url = f"sqlite:///{tmp_path / 'state.db'}"
        async with open_store(url) as store:
            async with open_runtime([labelled(("notes",))], store=store) as runtime:
                assert not (
                    await call_as(runtime, "labelled__label", "s1", name="a", text="A")
                ).is_error
                assert not (
                    await call_as(runtime, "labelled__put", "s1", note_id="n", text="t")
                ).is_error
            async with open_runtime([labelled(("notes", "labels"))], store=store) as runtime:
                result = await call_as(runtime, "labelled__show", "s1")
                assert json.loads(result.first_text) == {"a": "A"}


class TestSplitStillWorks:
    async def test_postgres_a_part_name_too_long_for_the_index_fails_alone(
        self, fresh_postgres_url: str
    ) -> None:
        """A refusal the server makes (54000) is split, so the innocent save lands."""
        async with open_store(fresh_postgres_url) as store:
            await TestPartNames()._innocent_fails(store, bad=os.urandom(10_000).hex())

    async def test_postgres_a_lone_surrogate_in_a_part_name_fails_no_other_save(
        self, fresh_postgres_url: str
    ) -> None:
        """The driver's refusal is split too, and its connection serves the next batch."""
        async with open_store(fresh_postgres_url) as store:
            await TestPartNames()._innocent_fails(store, bad="\ud800")
            await TestPartNames()._innocent_fails(store, bad="\ud801", innocent="innocent 2")
