"""The PostgreSQL store: for several processes or machines sharing keys (psycopg 3).

psycopg's async API needs asyncio, so this is a blocking driver behind
`_batched`, like the SQLite one: its calls run in trio worker threads.

Three connections, each for one kind of work, because `_batched` may run a
load batch, a save batch and a maintenance call at the same time in three
threads: one for saves, one for loads, one (opened on first use) for
``delete_session`` and ``sweep``. A batch of saves is one transaction, sent
in one round trip (pipeline mode); each write is an insert that does nothing
if the key exists (expected ``None``) or an update of the expected version,
so a stale writer changes nothing, whichever process it is in. Rows are
written in key order, the same in every process, so two processes' batches
that share keys wait for each other instead of deadlocking.

A connection whose server went away (restart, failover, an administrator's
kill) is opened again for the next batch; the batch it failed is not
acknowledged. The URL's password appears in no ``url`` and no error.
"""

from __future__ import annotations

import selectors
import urllib.parse
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ._base import StoreError, first_version
from ._batched import BatchRolledBack, Conflict, gather_parts, scope_clause

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from psycopg.rows import TupleRow

    from ._batched import Loaded, Write

__all__ = ["PostgresBackend", "with_defaults", "without_password"]

# libpq settings the URL may give; these apply when it does not. Without them
# an unreachable host would hold open_store for over two minutes, and a server
# that stops answering mid-batch would hold every save until the kernel gives up.
_DEFAULTS: Final = {
    "connect_timeout": "10",  # seconds
    "tcp_user_timeout": "30000",  # milliseconds that sent data may stay unacknowledged
}
_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS actor_state (
        key text PRIMARY KEY,
        session text NOT NULL,
        version bigint NOT NULL,
        blob bytea NOT NULL,
        updated_at double precision NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS actor_state_session ON actor_state (session)",
    "CREATE INDEX IF NOT EXISTS actor_state_updated ON actor_state (updated_at)",
)
# `seq` orders a key's parts as first written (see the SQLite store).
_PARTS_SCHEMA: Final = """CREATE TABLE IF NOT EXISTS actor_parts (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    key text NOT NULL,
    part text NOT NULL,
    blob bytea NOT NULL,
    PRIMARY KEY (key, part)
)"""
_INSERT: Final = (
    "INSERT INTO actor_state (key, session, version, blob, updated_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING RETURNING version"
)
_UPDATE: Final = (
    "UPDATE actor_state SET version = version + 1, blob = %s, updated_at = %s "
    "WHERE key = %s AND version = %s RETURNING version"
)
# A part-wise save is one statement, so that the pipeline needs no answer
# before sending the next: the parts are written (and removed) only when the
# fenced write of the blob returned a row, in the same transaction. Parts are
# inserted in the order given (WITH ORDINALITY), which `seq` keeps; a changed
# part keeps its `seq`, a moved one takes a new one, after every other.
_PART_CHANGES: Final = """, written AS (
    INSERT INTO actor_parts (key, part, blob)
    SELECT %(key)s, changed.part, changed.blob
    FROM blob_written, unnest(%(kept)s::text[], %(kept_blobs)s::bytea[])
        WITH ORDINALITY AS changed (part, blob, n)
    ORDER BY changed.n
    ON CONFLICT (key, part) DO UPDATE SET blob = excluded.blob
), moved AS (
    INSERT INTO actor_parts (key, part, blob)
    SELECT %(key)s, changed.part, changed.blob
    FROM blob_written, unnest(%(moved)s::text[], %(moved_blobs)s::bytea[])
        WITH ORDINALITY AS changed (part, blob, n)
    ORDER BY changed.n
    ON CONFLICT (key, part) DO UPDATE SET blob = excluded.blob, seq = DEFAULT
), removed AS (
    DELETE FROM actor_parts
    WHERE key = %(key)s AND {removed} AND EXISTS (SELECT FROM blob_written)
) SELECT version FROM blob_written"""
_INSERT_WITH_PARTS: Final = (
    "WITH blob_written AS (INSERT INTO actor_state (key, session, version, blob, updated_at) "
    "VALUES (%(key)s, %(session)s, %(first)s, %(blob)s, %(now)s) ON CONFLICT (key) DO NOTHING "
    "RETURNING version)" + _PART_CHANGES.format(removed="part <> ALL(%(written)s::text[])")
    # A key written for the first time keeps no part an earlier life left.
)
_UPDATE_WITH_PARTS: Final = (
    "WITH blob_written AS (UPDATE actor_state SET version = version + 1, blob = %(blob)s, "
    "updated_at = %(now)s WHERE key = %(key)s AND version = %(expected)s RETURNING version)"
    + _PART_CHANGES.format(removed="part = ANY(%(removed)s::text[])")
)
# The blobs, then the parts in `seq` order, as of one moment (one statement); see
# `_batched.gather_parts`. Not a join: that would repeat each blob once per part.
_LOAD_WITH_PARTS: Final = (
    "SELECT 0, key, version, blob, NULL, 0::bigint FROM actor_state WHERE key = ANY(%s) "
    "UNION ALL SELECT 1, key, NULL, blob, part, seq FROM actor_parts WHERE key = ANY(%s) "
    "ORDER BY 1, 6"
)
# The keys' rows go first, locked until the end of the transaction; their parts go in
# a second statement, which sees every part a save that held those rows before us
# committed (one statement's snapshot would miss those, and leave them behind).
_DELETE_KEYS: Final = "DELETE FROM actor_state WHERE {} RETURNING key"
_DELETE_PARTS: Final = "DELETE FROM actor_parts WHERE key = ANY(%s)"
_SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword"})
_LOAD: Final = "SELECT key, version, blob FROM actor_state WHERE key = ANY(%s)"
_VERSIONS: Final = "SELECT key, version FROM actor_state WHERE key = ANY(%s)"
_TOUCH: Final = "UPDATE actor_state SET updated_at = %s WHERE key = ANY(%s)"
_ENTRIES: Final = (
    "SELECT key, version, octet_length(blob) + coalesce((SELECT sum(octet_length(p.blob)) "
    "FROM actor_parts AS p WHERE p.key = actor_state.key), 0), updated_at FROM actor_state"
)


@final
class PostgresBackend:
    """A PostgreSQL database as a `_batched.Backend`; opening makes the table if missing."""

    def __init__(self, url: str) -> None:
        self.url, self._secrets = without_password(url)
        with self._reported(f"cannot open the state store {self.url}"):
            conninfo = with_defaults(url)
        self._writer = _Link(conninfo)
        self._reader = _Link(conninfo)
        self._admin = _Link(conninfo)
        try:
            with self._reported(f"cannot open the state store {self.url}"):
                _make_schema(self._writer.connection())
                self._reader.connection()
        except BaseException:
            self.close()
            raise

    def load_many(self, keys: Sequence[str]) -> list[tuple[int, bytes] | None]:
        """(version, blob) or None per key, in order: one query for the whole batch."""
        with self._reported(f"load failed in {self.url}"):
            rows = (
                self._reader.connection()
                .execute(_LOAD, (list(keys),), binary=True)  # blobs as they are, not hex text
                .fetchall()
            )
        found = {key: (version, blob) for key, version, blob in rows}
        return [found.get(key) for key in keys]

    version_at_once = None
    """A round trip to the server costs what a worker thread does: asked in `versions_many`."""
    shared_by_default = True
    """PostgreSQL is the store for several processes: each call asks its key's version."""

    def versions_many(self, keys: Sequence[str]) -> list[int | None]:
        """The stored version or None per key, in order: one query for the whole batch."""
        with self._reported(f"version check failed in {self.url}"):
            rows = self._reader.connection().execute(_VERSIONS, (list(keys),)).fetchall()
        found: dict[str, int] = dict(rows)
        return [found.get(key) for key in keys]

    def load_many_with_parts(self, keys: Sequence[str]) -> list[Loaded | None]:
        """(version, blob, parts) or None per key, in order: one query (one snapshot)."""
        with self._reported(f"load failed in {self.url}"):
            rows = (
                self._reader.connection()
                .execute(_LOAD_WITH_PARTS, (list(keys), list(keys)), binary=True)
                .fetchall()
            )
        found: dict[str, Loaded] = {}
        gather_parts(rows, found)
        return [found.get(key) for key in keys]

    def commit(self, writes: Sequence[Write], now: float) -> list[int | Conflict]:
        """Apply `writes` in order, in one transaction.

        A row the server refuses for what it holds (a key too long for the
        index, a value it cannot take) rolls the transaction back; that is
        `BatchRolledBack`, so that the other rows are tried again on their own.
        """
        with self._reported(f"save failed in {self.url}"):
            connection = self._writer.connection()
            try:
                return _commit(connection, writes, now)
            except UnicodeEncodeError as exc:  # a part's name the driver cannot send as text
                raise _RowRefused(exc) from None
            except psycopg.Error as exc:
                if not connection.broken and _refused_for_content(exc):
                    raise _RowRefused(exc) from None
                raise

    def delete_session(self, session: str) -> int:
        """Delete every key of `session`."""
        return self._delete("delete_session", "session = %s", session)

    def touch(self, keys: Sequence[str], now: float) -> None:
        """Set the `used_at` of each of `keys` that is stored to `now`."""
        with self._reported(f"touch failed in {self.url}"):
            self._admin.connection().execute(_TOUCH, (now, list(keys)))

    def sweep(self, cutoff: float) -> int:
        """Delete every key last written or used before `cutoff`."""
        return self._delete("sweep", "updated_at < %s", cutoff)

    def entries(self, session: str | None, tenant: str | None) -> list[tuple[str, int, int, float]]:
        """(key, version, size, used at) of `session`'s keys, or `tenant`'s, or all."""
        where, arguments = scope_clause(session, tenant, mark="%s", prefix_of="left(session, %s)")
        statement = f'{_ENTRIES}{where} ORDER BY key COLLATE "C"'
        with self._reported(f"listing failed in {self.url}"):
            return self._admin.connection().execute(statement, arguments).fetchall()

    def delete(self, key: str) -> bool:
        """Delete one key; whether it was stored."""
        return self._delete("delete", "key = %s", key) == 1

    def _delete(self, what: str, condition: str, argument: str | float) -> int:
        """Delete the keys `condition` picks, with their parts, in one transaction; how many
        keys."""
        with self._reported(f"{what} failed in {self.url}"):
            connection = self._admin.connection()
            with connection.transaction():
                cursor = connection.execute(_DELETE_KEYS.format(condition), (argument,))
                keys = [key for (key,) in cursor.fetchall()]
                if keys:
                    connection.execute(_DELETE_PARTS, (keys,))
        return len(keys)

    def close(self) -> None:
        """Close the connections."""
        for link in (self._writer, self._reader, self._admin):
            link.close()

    @contextmanager
    def _reported(self, what: str) -> Iterator[None]:
        """psycopg's errors as StoreError: `what` failed, then the cause, without the password."""
        try:
            yield
        except (psycopg.Error, _RowRefused) as exc:
            cause = exc.cause if isinstance(exc, _RowRefused) else exc
            text = str(cause).strip() or type(cause).__name__
            for secret in self._secrets:
                text = text.replace(secret, "***")
            msg = f"{what}: {text}"
            kind = BatchRolledBack if isinstance(exc, _RowRefused) else StoreError
            # Not chained: the driver's error and its context may quote the password.
            raise kind(msg) from None


# SQLSTATE classes of errors caused by what a row holds: data exception,
# integrity constraint violation, program limit exceeded (an index row too large).
_ROW_ERRORS: Final = frozenset({"22", "23", "54"})


def _refused_for_content(exc: psycopg.Error) -> bool:
    """Whether `exc` is about what a row holds: the server's word (`_ROW_ERRORS`), or the
    driver's own refusal to send a value (a NUL in text: a DataError with no SQLSTATE)."""
    if exc.sqlstate is None:
        return isinstance(exc, psycopg.DataError)
    return exc.sqlstate[:2] in _ROW_ERRORS


class _RowRefused(Exception):
    """A transaction rolled back because of a row's content (see `_refused_for_content`)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


@final
class _Link:
    """One connection for one kind of work, opened on first use and again after it breaks."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._connection: psycopg.Connection[TupleRow] | None = None

    def connection(self) -> psycopg.Connection[TupleRow]:
        """The connection, new if there was none, or the last one broke or was hung up on."""
        if self._connection is not None and not _usable(self._connection):
            self.close()
        if self._connection is None:
            self._connection = psycopg.connect(self._conninfo, autocommit=True)
        return self._connection

    def close(self) -> None:
        """Close the connection, if open; the next use opens a new one."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _usable(connection: psycopg.Connection[TupleRow]) -> bool:
    """Whether an idle connection can take work, found without a round trip.

    Between batches the server has nothing to say, unless it is saying
    goodbye: a restart or an administrator's kill sends an error and closes
    the socket. So a readable socket means the connection is done for, and
    the batch about to use it goes to a new one instead of failing.
    """
    if connection.closed or connection.broken:
        return False
    with selectors.DefaultSelector() as selector:  # no limit on descriptor numbers, unlike select()
        selector.register(connection.fileno(), selectors.EVENT_READ)
        return not selector.select(timeout=0)


def _make_schema(connection: psycopg.Connection[TupleRow]) -> None:
    """Create the table if it is missing, and check that it has the columns the store uses."""
    with connection.transaction():
        missing = connection.execute(
            "SELECT to_regclass('actor_state') IS NULL, to_regclass('actor_parts') IS NULL"
        ).fetchone()
        if missing is not None and any(missing):  # actor_parts is new: older stores lack it
            # Two processes creating the table at once can both fail the catalog's
            # unique checks, IF NOT EXISTS notwithstanding: creators take turns.
            connection.execute("SELECT pg_advisory_xact_lock(hashtext('mcp-actors schema'))")
            for statement in (*_SCHEMA, _PARTS_SCHEMA):
                connection.execute(statement)
        connection.execute(
            "SELECT key, session, version, blob, updated_at FROM actor_state LIMIT 0"
        )
        connection.execute("SELECT seq, key, part, blob FROM actor_parts LIMIT 0")


def _commit(
    connection: psycopg.Connection[TupleRow], writes: Sequence[Write], now: float
) -> list[int | Conflict]:
    # Key order for the row locks (no deadlock between processes); the sort is
    # stable, so writes to one key keep their order, the only one that matters.
    order = sorted(range(len(writes)), key=lambda index: writes[index].key)
    with connection.pipeline(), connection.transaction():
        cursors = {index: connection.execute(*_statement(writes[index], now)) for index in order}
    rows = [cursors[index].fetchone() for index in range(len(writes))]
    refused = [write.key for write, row in zip(writes, rows, strict=True) if row is None]
    found: dict[str, int] = {}
    if refused:
        found = dict(connection.execute(_VERSIONS, (refused,)).fetchall())
    return [
        Conflict(found.get(write.key)) if row is None else row[0]
        for write, row in zip(writes, rows, strict=True)
    ]


def _statement(write: Write, now: float) -> tuple[str, tuple[object, ...] | dict[str, object]]:
    changes = write.changes
    if changes is None:
        if write.expected is None:
            return _INSERT, (write.key, write.session, first_version(), write.blob, now)
        return _UPDATE, (write.blob, now, write.key, write.expected)
    moving = set(changes.moved)
    kept = [(name, blob) for name, blob in changes.written if name not in moving]
    moved = [(name, blob) for name, blob in changes.written if name in moving]
    arguments: dict[str, object] = {
        "key": write.key,
        "session": write.session,
        "blob": write.blob,
        "now": now,
        "expected": write.expected,
        "first": first_version() if write.expected is None else None,
        "kept": [name for name, _blob in kept],
        "kept_blobs": [blob for _name, blob in kept],
        "moved": [name for name, _blob in moved],
        "moved_blobs": [blob for _name, blob in moved],
        "written": [name for name, _blob in changes.written],
        "removed": list(changes.removed),
    }
    return (_INSERT_WITH_PARTS if write.expected is None else _UPDATE_WITH_PARTS), arguments


def with_defaults(url: str) -> str:
    """The libpq connection string for `url`, with `_DEFAULTS` where it is silent."""
    given = conninfo_to_dict(url)
    return make_conninfo(
        url, **{name: value for name, value in _DEFAULTS.items() if name not in given}
    )


def without_password(url: str) -> tuple[str, list[str]]:
    """`url` without its secrets, and their spellings.

    The secrets are the password (in the user part or the query) and the
    client key's ``sslpassword``. Their spellings, as written and decoded
    (libpq decodes %XX only), are what error messages must not contain: libpq
    quotes parts of a malformed URL back.
    """
    scheme, netloc, path, query, fragment = urllib.parse.urlsplit(url)
    userinfo, at, hosts = netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    secrets = [password] if colon else []
    kept = []
    for item in query.split("&") if query else []:
        name, _, value = item.partition("=")
        if urllib.parse.unquote(name) in _SECRET_PARAMETERS:
            secrets.append(value)
        else:
            kept.append(item)
    spellings = {
        spelling for secret in secrets for spelling in (secret, urllib.parse.unquote(secret))
    }
    shown = urllib.parse.urlunsplit((scheme, f"{user}{at}{hosts}", path, "&".join(kept), fragment))
    if not hosts and url.startswith(f"{scheme}://"):  # no host: urlunsplit drops the "//"
        shown = f"{scheme}://{shown.removeprefix(f'{scheme}:')}"
    # Longest first, so that no shorter spelling leaves part of a longer one.
    return shown, sorted((s for s in spellings if s), key=len, reverse=True)
