"""The SQLite store: the embedded default, one file, write-ahead log, full fsync.

Two connections: one for batches of saves (``BEGIN IMMEDIATE`` … ``COMMIT``,
one transaction per batch) and one for loads and maintenance, so a load never
waits for a commit's fsync (WAL lets readers and one writer go on together).
Each is used by one worker thread at a time (`_batched` runs one batch of a
kind at a time); ``check_same_thread`` is off because that thread is not
always the same one.

``synchronous=FULL``: a commit returns only after the log is on disk, so an
acknowledged call survives a power loss as well as ``kill -9``. Several
processes may share the file (a busy writer is waited for up to
``busy_timeout``); for several machines, use PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from typing import TYPE_CHECKING, Final, final

from ._base import StoreError, first_version
from ._batched import BatchRolledBack, Conflict, StoreBusy, gather_parts, scope_clause

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from ._base import Creation
    from ._batched import Loaded, Write

__all__ = ["SqliteBackend"]

_BUSY_TIMEOUT_MS: Final = 5000
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS actor_state (
    key TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    version INTEGER NOT NULL,
    blob BLOB NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS actor_state_session ON actor_state (session);
CREATE INDEX IF NOT EXISTS actor_state_updated ON actor_state (updated_at);
CREATE TABLE IF NOT EXISTS actor_parts (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    part TEXT NOT NULL,
    blob BLOB NOT NULL,
    UNIQUE (key, part)
);
"""
_TABLES: Final = "SELECT name FROM sqlite_master WHERE type = 'table'"
# A save: an insert that does nothing if the key is stored (the writer found
# nothing), or an update of the version the writer loaded.
_INSERT: Final = (
    "INSERT INTO actor_state (key, session, version, blob, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING"
)
_UPDATE: Final = (
    "UPDATE actor_state SET version = version + 1, blob = ?, updated_at = ? "
    "WHERE key = ? AND version = ?"
)
_LOAD_CHUNK: Final = 500  # below SQLite's limit on bound parameters
# A part-wise save's parts, written only once its blob's fenced statement landed.
# A part keeps its `seq` when it is replaced: loaded in `seq` order, a key's parts
# come back in the order they were first written, as a dict keeps its keys.
_WRITE_PART: Final = (
    "INSERT INTO actor_parts (key, part, blob) VALUES (?, ?, ?) "
    "ON CONFLICT (key, part) DO UPDATE SET blob = excluded.blob"
)
# A moved part takes the next place after every part stored.
_MOVE_PART: Final = (
    "INSERT INTO actor_parts (key, part, blob) VALUES (?, ?, ?) ON CONFLICT (key, part) "
    "DO UPDATE SET blob = excluded.blob, seq = (SELECT max(seq) + 1 FROM actor_parts)"
)
_REMOVE_PART: Final = "DELETE FROM actor_parts WHERE key = ? AND part = ?"
# A key written for the first time starts with no part, whatever an earlier life left.
_CLEAR_PARTS: Final = "DELETE FROM actor_parts WHERE key = ?"
# A key's parts go with it, in the same transaction, whatever deletes it.
_PARTS_OF_DOOMED: Final = "DELETE FROM actor_parts WHERE key IN (SELECT key FROM actor_state{})"


# Blobs and parts of the keys asked for, as of one moment (one statement): the blobs
# first, then every part in `seq` order. Not a join: that would repeat the blob per part.
_LOAD_WITH_PARTS: Final = (
    "SELECT 0, key, version, blob, NULL, 0 FROM actor_state WHERE key IN ({marks}) "
    "UNION ALL SELECT 1, key, NULL, blob, part, seq FROM actor_parts WHERE key IN ({marks}) "
    "ORDER BY 1, 6"
)


def _create_private(path: Path, create: Creation) -> None:
    """Make the file (and, if `create` says so, missing folders) readable by this user only.

    The file holds every session's state; SQLite gives its -wal and -shm files
    the database file's permissions.
    """
    if create == "nothing" and not path.exists():
        msg = f"there is no state store at {path} (no such file)"
        raise FileNotFoundError(msg)
    not_a_folder = (
        f"{path.parent} is not a folder: a file stands where it or a folder above it goes"
    )
    if create == "folders":
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:  # mkdir's own words ("File exists") name no culprit
            raise NotADirectoryError(not_a_folder) from None
    elif not path.parent.is_dir():
        if path.parent.exists():
            raise NotADirectoryError(not_a_folder)
        msg = (
            f"the folder {path.parent} does not exist (is the path right?); create it first, "
            "or name a file in an existing folder"
        )
        raise FileNotFoundError(msg)
    if create != "nothing":
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    if not path.is_file():
        msg = f"{path} is not a file (a folder stands there)"
        raise IsADirectoryError(msg)


_COLUMNS: Final = {
    "actor_state": ("key", "session", "version", "blob", "updated_at"),
    "actor_parts": ("seq", "key", "part", "blob"),
}


def _check_file(path: Path) -> None:
    """Refuse, before changing anything in it, a database that is not ours.

    Opened read-only, so that a file of another program keeps its journal
    mode and gets no table of ours: only an empty database or one holding our
    table (and its indexes) is used.
    """
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in connection.execute(_TABLES)]
        others = [name for name in tables if name not in _COLUMNS]
        if others:
            msg = (
                f"the file holds another program's tables ({', '.join(others)}); "
                "give the state store a file of its own"
            )
            raise StoreError(msg)
        for table in tables:  # actor_parts is missing from a store made before it existed
            # The name is one of _COLUMNS' keys, never outside text.
            columns = tuple(row[1] for row in connection.execute(f"PRAGMA table_info({table})"))
            if columns != _COLUMNS[table]:
                msg = f"its table {table} has the columns {columns}, not {_COLUMNS[table]}"
                raise StoreError(msg)
    finally:
        connection.close()


def _connect(path: Path, *, busy_timeout: float = _BUSY_TIMEOUT_MS / 1000) -> sqlite3.Connection:
    connection = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
    )
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    return connection


@final
class SqliteBackend:
    """A SQLite file as a `_batched.Backend`; opening checks that it is a usable database."""

    shared_by_default = False
    """A file is one process's, unless it is said to be shared (`RuntimeConfig.shared_store`)."""

    def __init__(self, path: Path, *, create: Creation = "file") -> None:
        self.url = f"sqlite:///{path}"
        self._path = path
        try:
            _create_private(path, create)
            _check_file(path)
            self._writer = _connect(path)
            self._writer.executescript(_SCHEMA)
            self._reader = _connect(path)
            # Used on the event loop only, and never waits for a lock (`version_at_once`).
            self._checker = _connect(path, busy_timeout=0.0)
        except (OSError, sqlite3.Error, StoreError) as exc:
            msg = f"cannot open the state store {self.url}: {exc}"
            raise StoreError(msg) from None

    def load_many(self, keys: Sequence[str]) -> list[tuple[int, bytes] | None]:
        """(version, blob) or None per key, in order."""
        found: dict[str, tuple[int, bytes]] = {}
        for start in range(0, len(keys), _LOAD_CHUNK):
            chunk = keys[start : start + _LOAD_CHUNK]
            marks = ",".join("?" * len(chunk))
            # Only '?' marks are formatted into the statement; the keys are bound.
            rows = self._reader.execute(
                f"SELECT key, version, blob FROM actor_state WHERE key IN ({marks})",
                chunk,
            )
            found.update((key, (version, blob)) for key, version, blob in rows)
        return [found.get(key) for key in keys]

    def version_at_once(self, key: str) -> int | None:
        """The stored version of `key`, or None: one indexed read on a connection of its own,
        a few microseconds in the page cache, cheaper than a worker thread's round trip.
        WAL readers wait for no writer, and this connection waits for no lock (a busy
        timeout of 0): a lock held elsewhere is `StoreBusy` at once. (The first reader
        after a crash replays the WAL, which can take it a while: once.) Any other error
        is `StoreBusy` too, for the worker thread to meet again and report."""
        try:
            row = self._checker.execute(
                "SELECT version FROM actor_state WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error as exc:  # busy, locked, or worse: the worker thread's to tell
            msg = f"version check of {self.url} could not be made at once: {exc}"
            raise StoreBusy(msg) from None
        return None if row is None else int(row[0])

    def versions_many(self, keys: Sequence[str]) -> list[int | None]:
        """The stored version or None per key, in order."""
        found: dict[str, int] = {}
        for start in range(0, len(keys), _LOAD_CHUNK):
            chunk = keys[start : start + _LOAD_CHUNK]
            marks = ",".join("?" * len(chunk))
            # Only '?' marks are formatted into the statement; the keys are bound.
            rows = self._reader.execute(
                f"SELECT key, version FROM actor_state WHERE key IN ({marks})", chunk
            )
            found.update(rows)
        return [found.get(key) for key in keys]

    def load_many_with_parts(self, keys: Sequence[str]) -> list[Loaded | None]:
        """(version, blob, parts) or None per key, in order; one statement per chunk, so
        that a key's blob and parts are read as of one moment."""
        found: dict[str, Loaded] = {}
        chunk_size = _LOAD_CHUNK // 2  # each key is bound twice
        for start in range(0, len(keys), chunk_size):
            chunk = keys[start : start + chunk_size]
            marks = ",".join("?" * len(chunk))
            # Only '?' marks are formatted into the statement; the keys are bound.
            rows = self._reader.execute(_LOAD_WITH_PARTS.format(marks=marks), (*chunk, *chunk))
            gather_parts(rows, found)
        return [found.get(key) for key in keys]

    def commit(self, writes: Sequence[Write], now: float) -> list[int | Conflict]:
        """Apply `writes` in order, in one transaction.

        A row SQLite refuses for what it holds rolls the batch back as
        `BatchRolledBack`, so that the others are tried again on their own.
        """
        connection = self._writer
        # Two writes of one key depend on their order, which the two statements
        # of `_apply_together` would not keep: such a batch goes one at a time.
        together = len({write.key for write in writes}) == len(writes)
        connection.execute("BEGIN IMMEDIATE")
        try:
            results = self._apply_together(writes, now) if together else None
            if results is None:  # one write at a time, each with its own outcome
                if not connection.in_transaction:
                    connection.execute("BEGIN IMMEDIATE")
                results = [self._apply(write, now) for write in writes]
            connection.execute("COMMIT")
        # UnicodeEncodeError: a part's name that is no valid text (a lone surrogate).
        except (
            sqlite3.IntegrityError,
            sqlite3.DataError,
            sqlite3.InterfaceError,
            UnicodeEncodeError,
        ) as exc:
            connection.execute("ROLLBACK")
            msg = f"save failed in {self.url}: {exc}"
            raise BatchRolledBack(msg) from exc
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return results

    def _apply_together(self, writes: Sequence[Write], now: float) -> list[int | Conflict] | None:
        """Every write of the open transaction at once, with one statement per kind; their
        new versions, or None (and the transaction rolled back) when not all of them landed.

        `executemany` binds and steps each row in C: a batch costs one call (and
        one cursor) per kind of write instead of one per row, and holds the GIL
        in the worker thread that much less. It tells only how many rows changed in all:
        when that falls short, some write met another version (another writer),
        and since nothing says which, the batch is rolled back for `commit` to
        apply one write at a time.
        """
        versions = [first_version() if w.expected is None else w.expected + 1 for w in writes]
        inserts = [
            (w.key, w.session, version, w.blob, now)
            for w, version in zip(writes, versions, strict=True)
            if w.expected is None
        ]
        updates = [(w.blob, now, w.key, w.expected) for w in writes if w.expected is not None]
        landed = 0
        if inserts:
            landed += self._writer.executemany(_INSERT, inserts).rowcount
        if updates:
            landed += self._writer.executemany(_UPDATE, updates).rowcount
        if landed < len(writes):
            self._writer.execute("ROLLBACK")
            return None
        self._write_parts(writes)
        return list(versions)

    def _write_parts(self, writes: Sequence[Write]) -> None:
        """The part changes of `writes`, whose blobs all landed in the open transaction."""
        cleared: list[tuple[str]] = []
        kept: list[tuple[str, str, bytes]] = []
        moved: list[tuple[str, str, bytes]] = []
        removed: list[tuple[str, str]] = []
        for write in writes:
            changes = write.changes
            if changes is None:
                continue
            if write.expected is None:
                cleared.append((write.key,))
            moving = set(changes.moved)
            for name, blob in changes.written:
                (moved if name in moving else kept).append((write.key, name, blob))
            removed.extend((write.key, name) for name in changes.removed)
        for statement, rows in (
            (_CLEAR_PARTS, cleared),
            (_WRITE_PART, kept),
            (_MOVE_PART, moved),
            (_REMOVE_PART, removed),
        ):
            if rows:
                self._writer.executemany(statement, rows)

    def _apply(self, write: Write, now: float) -> int | Conflict:
        connection = self._writer
        if write.expected is None:
            new_version = first_version()
            cursor = connection.execute(
                _INSERT, (write.key, write.session, new_version, write.blob, now)
            )
        else:
            cursor = connection.execute(_UPDATE, (write.blob, now, write.key, write.expected))
            new_version = write.expected + 1
        if cursor.rowcount == 1:
            self._write_parts([write])
            return new_version
        row = connection.execute(
            "SELECT version FROM actor_state WHERE key = ?", (write.key,)
        ).fetchone()
        return Conflict(None if row is None else row[0])

    def delete_session(self, session: str) -> int:
        """Delete every key of `session`."""
        return self._delete(" WHERE session = ?", session)

    def touch(self, keys: Sequence[str], now: float) -> None:
        """Set the `used_at` of each of `keys` that is stored to `now`."""
        with self._maintenance() as connection:
            for start in range(0, len(keys), _LOAD_CHUNK):
                chunk = keys[start : start + _LOAD_CHUNK]
                marks = ",".join("?" * len(chunk))
                connection.execute(
                    f"UPDATE actor_state SET updated_at = ? WHERE key IN ({marks})", (now, *chunk)
                )

    def sweep(self, cutoff: float) -> int:
        """Delete every key last written or used before `cutoff`."""
        return self._delete(" WHERE updated_at < ?", cutoff)

    def entries(self, session: str | None, tenant: str | None) -> list[tuple[str, int, int, float]]:
        """(key, version, size, used at) of `session`'s keys, or `tenant`'s, or all."""
        where, arguments = scope_clause(
            session, tenant, mark="?", prefix_of="substr(session, 1, ?)"
        )
        with self._maintenance() as connection:
            return list(
                connection.execute(
                    "SELECT key, version, length(blob) + coalesce((SELECT sum(length(p.blob)) "
                    "FROM actor_parts AS p WHERE p.key = actor_state.key), 0), updated_at "
                    f"FROM actor_state{where} ORDER BY key",
                    arguments,
                )
            )

    def delete(self, key: str) -> bool:
        """Delete one key; whether it was stored."""
        return self._delete(" WHERE key = ?", key) == 1

    def _delete(self, where: str, argument: str | float) -> int:
        """Delete the keys `where` picks, with their parts, in one transaction; how many."""
        with self._maintenance() as connection:
            connection.execute("BEGIN IMMEDIATE")  # nothing to roll back if this fails
            try:
                connection.execute(_PARTS_OF_DOOMED.format(where), (argument,))
                count = connection.execute(f"DELETE FROM actor_state{where}", (argument,)).rowcount
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            return count

    @contextlib.contextmanager
    def _maintenance(self) -> Iterator[sqlite3.Connection]:
        # Rare, and may run beside a load or a commit: a connection of its own.
        connection = _connect(self._path)
        try:
            yield connection
        finally:
            connection.close()

    def close(self) -> None:
        """Close the connections."""
        self._writer.close()
        self._reader.close()
        self._checker.close()
