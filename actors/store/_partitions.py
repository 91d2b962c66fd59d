"""Opening a split store: which PostgreSQL databases make one split, recorded in each.

A partition's id is a random one it keeps in its own table,
``actor_partition``, beside the ids (and, for messages, the URLs) of every
partition of its split. Placement hashes the ids, not the URLs, so a database
reached under another host name, or the URLs given in another order, place
every session where it was. Any other change would leave some sessions in a
partition the hash no longer picks, where they would look lost; so opening
refuses it, naming what differs: a partition missing or added, a database of
another split, one that holds the state of a store that is not split, and
(`check_not_partition`) a partition opened alone.

The first open of fresh databases records the split in two idempotent steps
(each database keeps the first id written to it; then the first list), so
two processes opening the same fresh databases at once agree, and two
opening different lists that share a database cannot both succeed.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Final, final

import attrs
import psycopg
import trio

from ._base import StoreError
from ._batched import open_batched
from ._postgres import PostgresBackend, with_defaults, without_password
from ._split import SplitStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Sequence

    from psycopg.rows import TupleRow

    from ._base import StateStore

__all__ = ["check_not_partition", "open_split"]

_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS actor_partition ("
    " one boolean PRIMARY KEY DEFAULT true CHECK (one),"  # at most one row
    " id text NOT NULL,"  # this database's own id
    " split text[],"  # the ids of every partition of its split; NULL until recorded
    " urls text[]"  # where they were when the split was recorded, for messages
    ")"
)
_WHAT_TO_DO: Final = (
    "open the store with the URLs of every partition of its split, one --state each (in any "
    "order); moving sessions between partitions is not supported"
)


@asynccontextmanager
async def open_split(urls: Sequence[str], *, record: bool = True) -> AsyncIterator[SplitStore]:
    """Open the split of the PostgreSQL databases `urls` names until the block ends.

    The order of `urls` does not matter. Fresh databases are recorded as one
    split (unless `record` is false: then an unrecorded split is an error);
    databases recorded together must all be given. Raises StoreError, naming
    what differs and what to do, for any other list, before the block starts;
    ValueError for fewer than two URLs.
    """
    if len(urls) < 2:
        msg = f"a split store needs two or more PostgreSQL URLs, got {len(urls)}"
        raise ValueError(msg)
    ids = await trio.to_thread.run_sync(_partition_ids, tuple(urls), record)
    async with AsyncExitStack() as stack:
        partitions: dict[str, StateStore] = {}
        for pid, url in zip(ids, urls, strict=True):
            backend = await trio.to_thread.run_sync(PostgresBackend, url)
            partitions[pid] = await stack.enter_async_context(open_batched(backend))
        shown = ", ".join(store.url for store in partitions.values())
        yield SplitStore(partitions, f"split of {len(urls)}: {shown}")


def check_not_partition(url: str) -> None:
    """Refuse `url` as a store of its own if it is a partition of a split (StoreError)."""
    with _connected(url) as connection:
        found = _read(connection, without_password(url)[0])
    shown = found.url
    if found.split is None and found.id is not None:
        msg = (
            f"{shown} was being made a partition of a split store, and the recording did not "
            f"finish; opened alone, it would take sessions that belong to the others: "
            f"{_WHAT_TO_DO}"
        )
        raise StoreError(msg)
    if found.split is not None:
        msg = (
            f"{shown} is one of the {len(found.split)} partitions of a split store "
            f"({', '.join(found.urls)}); opened alone, it would miss the sessions of the "
            f"others: {_WHAT_TO_DO}"
        )
        raise StoreError(msg)


@final
@attrs.frozen
class _Found:
    """What one database says of its place in a split."""

    url: str
    """Its URL without the password."""
    id: str | None
    split: tuple[str, ...] | None
    urls: tuple[str, ...]
    has_state: bool
    """Whether it holds any key's state."""

    def recorded_url(self, pid: str) -> str:
        """Where partition `pid` was when this database's split was recorded."""
        assert self.split is not None
        return self.urls[self.split.index(pid)]


def _partition_ids(urls: tuple[str, ...], record: bool) -> list[str]:
    """Each URL's partition id, once the split they make is checked (and recorded if new)."""
    shown = [without_password(url)[0] for url in urls]
    found = []
    for url, its_url in zip(urls, shown, strict=True):
        with _connected(url) as connection:
            found.append(_read(connection, its_url))
    if any(each.split is not None for each in found):
        return _checked(_finished(urls, found) if record else found)
    _refuse_unsplit_state(found)
    if not record:
        msg = f"no split store is recorded in {', '.join(shown)}: nothing is stored there yet"
        raise StoreError(msg)
    ids = []
    for url in urls:
        with _connected(url) as connection:
            ids.append(_claim_id(connection))
    _refuse_same_database([attrs.evolve(f, id=pid) for f, pid in zip(found, ids, strict=True)])
    recorded = []
    for url, its_url in zip(urls, shown, strict=True):
        with _connected(url) as connection:
            recorded.append(_record(connection, its_url, ids, shown))
    return _checked(recorded)


def _finished(urls: Sequence[str], found: Sequence[_Found]) -> list[_Found]:
    """`found`, with the recording of a split that another process is making finished.

    That process gives every database its id, then records the split in one after
    another: a database with no split is read again (it may have had no id either when
    first read), and if its id is in the split it is one that process has not reached
    yet. Recording the same split there, as it will, is what makes opening at the same
    moment agree.
    """
    model = next(each for each in found if each.split is not None)
    assert model.split is not None
    finished = []
    for url, each in zip(urls, found, strict=True):
        if each.split is not None:
            finished.append(each)
            continue
        with _connected(url) as connection:
            now = _read(connection, each.url)
            if now.split is None and now.id is not None and now.id in model.split:
                # Served alone since the recording stopped, it may hold sessions the
                # split would look for elsewhere: refused, as for fresh databases.
                _refuse_unsplit_state([now])
                now = _record(connection, each.url, model.split, model.urls)
        finished.append(now)
    return finished


def _checked(found: Sequence[_Found]) -> list[str]:
    """The ids of `found` if they are exactly the partitions of one recorded split."""
    model = next(each for each in found if each.split is not None)
    assert model.split is not None
    for each in found:
        if each.split is None:
            msg = (
                f"{each.url} is not a partition of the split store recorded in {model.url} "
                f"({len(model.split)} partitions: {', '.join(model.urls)}); adding a partition "
                f"would move sessions: {_WHAT_TO_DO}"
            )
            raise StoreError(msg)
        if set(each.split) != set(model.split):
            msg = (
                f"{each.url} belongs to another split store than {model.url}: "
                f"({', '.join(each.urls)}) against ({', '.join(model.urls)}); {_WHAT_TO_DO}"
            )
            raise StoreError(msg)
    _refuse_same_database(found)
    given = {each.id for each in found}
    missing = [pid for pid in model.split if pid not in given]
    if missing:
        names = ", ".join(model.recorded_url(pid) for pid in missing)
        msg = (
            f"{len(missing)} of the {len(model.split)} partitions of the split store recorded "
            f"in {model.url} are missing: {names} (as recorded); without them, their "
            f"sessions would look lost: {_WHAT_TO_DO}"
        )
        raise StoreError(msg)
    return [each.id for each in found if each.id is not None]


def _refuse_same_database(found: Sequence[_Found]) -> None:
    seen: dict[str | None, str] = {}
    for each in found:
        if each.id in seen:
            msg = (
                f"{seen[each.id]} and {each.url} are one database (partition id {each.id}); "
                "each partition of a split store is a database of its own"
            )
            raise StoreError(msg)
        seen[each.id] = each.url


def _refuse_unsplit_state(found: Sequence[_Found]) -> None:
    for each in found:
        if each.has_state:
            msg = (
                f"{each.url} holds the state of a store that is not split; in a split store "
                "some of its sessions would belong to other partitions and look lost: "
                "open it alone, or split fresh databases"
            )
            raise StoreError(msg)


@contextmanager
def _connected(url: str) -> Iterator[psycopg.Connection[TupleRow]]:
    """A short-lived connection to `url`; its failures as StoreError, without the password."""
    shown, secrets = without_password(url)
    try:
        with psycopg.connect(with_defaults(url), autocommit=True) as connection:
            yield connection
    except psycopg.Error as exc:
        text = str(exc).strip() or type(exc).__name__
        for secret in secrets:
            text = text.replace(secret, "***")
        msg = f"cannot open the partition {shown} of a split store: {text}"
        # Not chained: the driver's error may quote the password.
        raise StoreError(msg) from None


def _read(connection: psycopg.Connection[TupleRow], url: str) -> _Found:
    """What the database at `connection` records of its split, and whether it holds state."""
    record = None
    if connection.execute("SELECT to_regclass('actor_partition')").fetchone() != (None,):
        record = connection.execute("SELECT id, split, urls FROM actor_partition").fetchone()
    has_state = False
    if connection.execute("SELECT to_regclass('actor_state')").fetchone() != (None,):
        row = connection.execute("SELECT EXISTS (SELECT 1 FROM actor_state)").fetchone()
        has_state = bool(row and row[0])
    if record is None:
        return _Found(url, None, None, (), has_state)
    pid, split, urls = record
    return _Found(url, pid, None if split is None else tuple(split), tuple(urls or ()), has_state)


def _claim_id(connection: psycopg.Connection[TupleRow]) -> str:
    """This database's partition id: the first one ever written to it, this one if none was."""
    with connection.transaction():
        # Creators take turns: two making the table at once can both fail the catalog's checks.
        connection.execute("SELECT pg_advisory_xact_lock(hashtext('mcp-actors schema'))")
        connection.execute(_TABLE)
        connection.execute(
            "INSERT INTO actor_partition (id) VALUES (%s) ON CONFLICT DO NOTHING",
            (uuid.uuid4().hex,),
        )
    row = connection.execute("SELECT id FROM actor_partition").fetchone()
    assert row is not None  # inserted above, or before
    return str(row[0])


def _record(
    connection: psycopg.Connection[TupleRow], url: str, ids: Sequence[str], urls: Sequence[str]
) -> _Found:
    """Record the split `ids` in this database unless one is recorded; what it records now."""
    connection.execute(
        "UPDATE actor_partition SET split = %s, urls = %s WHERE split IS NULL",
        (list(ids), list(urls)),
    )
    return _read(connection, url)
