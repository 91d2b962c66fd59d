"""``open_store(url)``: a state store from a URL, open for the length of a block."""

from __future__ import annotations

import os
import re
import urllib.parse
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import trio

from ._base import Creation, StoreError
from ._batched import open_batched
from ._memory import MemoryStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from ._base import StateStore
    from ._batched import Backend

__all__ = [
    "Creation",
    "Transport",
    "check_store_url",
    "default_state_url",
    "open_split_store",
    "open_store",
]

_FORMS = "'memory', 'sqlite:///path/to/state.db' or 'postgresql://user@host/db'"


Transport = Literal["stdio", "http"]
"""Which server a default state file is for: a desktop host's stdio one, or an HTTP one."""

_DEFAULT_FILES: Final[dict[Transport, str]] = {"stdio": "state.db", "http": "http-state.db"}
"""One file per transport. An HTTP server keeps its tenants' state in sessions named
``TENANT/…``; were the files one, a desktop stdio server of the same user would open the
same sessions, and any call it lets name a session (``_meta`` from its host, or arguments
with ``--allow-session-naming``) would read and write a tenant's state."""


@asynccontextmanager
async def open_store(
    url: str | Sequence[str], *, create: Creation = "file"
) -> AsyncIterator[StateStore]:
    """Open the store `url` names until the block ends.

    ``memory``; ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` (a
    file, made if missing, in a folder that must exist unless `create` is
    ``"folders"``: a typo in a path is an error naming the folder, not a new
    tree of folders); ``postgresql://…`` (a libpq URL; needs the ``postgres``
    extra). Raises ValueError for a URL of no known form and StoreError for a
    store that cannot be opened (missing or unwritable path, not a database,
    server unreachable), before the block starts.

    Several PostgreSQL URLs open one store split by session over them (see
    `open_split_store`); with `create` ``"nothing"``, only a split already
    recorded. A sequence of one URL is that URL.
    """
    kind = check_store_url(url)
    if not isinstance(url, str):
        if len(url) > 1:
            async with open_split_store(url, record=create != "nothing") as split:
                yield split
            return
        (url,) = url
    if kind == "memory":
        yield MemoryStore()
        return
    if kind == "sqlite":
        backend = await trio.to_thread.run_sync(_sqlite_backend, url, create)
    else:
        backend = await trio.to_thread.run_sync(_lone_postgres_backend, url)
    async with open_batched(backend) as store:
        yield store


def default_state_url(transport: Transport = "stdio") -> str:
    """``sqlite:///`` the `transport`'s file in the XDG state directory
    (``~/.local/state/mcp-actors``): ``state.db`` for stdio, ``http-state.db`` for HTTP,
    so that the two servers of one user never share state."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return f"sqlite:///{Path(base, 'mcp-actors', _DEFAULT_FILES[transport]).absolute()}"


def check_store_url(url: str | Sequence[str]) -> str:
    """The kind of store `url` names (memory, sqlite, postgresql); ValueError if none.

    Of a sequence, the kind of its one URL, or ``postgresql`` for a split store:
    several URLs must all be PostgreSQL ones, none given twice.
    """
    if not isinstance(url, str):
        return _check_split_urls(url)
    if url == "memory":
        return "memory"
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "sqlite":
        _sqlite_path(url)
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    msg = f"unknown state store URL {_masked(url)!r}; expected {_FORMS}"
    raise ValueError(msg)


def _masked(url: str) -> str:
    """`url` with any password in it shown as ``***``: a mistyped URL may still hold one."""
    try:
        password = urllib.parse.urlsplit(url).password
    except ValueError:  # a netloc urlsplit cannot read: show nothing of it
        return "<a URL that cannot be read>"
    if password:
        url = url.replace(f":{password}@", ":***@", 1)
    return re.sub(r"((?:ssl)?password=)[^&]*", r"\1***", url)


def _check_split_urls(urls: Sequence[str]) -> str:
    if not urls:
        msg = f"no state store URL given; expected {_FORMS}"
        raise ValueError(msg)
    kinds = [check_store_url(url) for url in urls]
    if len(urls) == 1:
        return kinds[0]
    for position, (url, kind) in enumerate(zip(urls, kinds, strict=True), start=1):
        if kind != "postgresql":
            shown = url if kind == "memory" else f"the SQLite store {url!r}"
            msg = (
                f"several URLs split the state by session over PostgreSQL databases, but "
                f"URL {position} is {shown}; give one URL, or only postgresql:// ones"
            )
            raise ValueError(msg)
        if url in urls[: position - 1]:
            # By position: the URL may hold a password.
            msg = (
                f"URL {position} repeats URL {urls.index(url) + 1}; each partition of a "
                "split store is a database of its own"
            )
            raise ValueError(msg)
    return "postgresql"


def _sqlite_path(url: str) -> Path:
    # As SQLAlchemy spells it: sqlite:///relative.db, sqlite:////absolute.db.
    rest = url.removeprefix("sqlite://")
    if not rest.startswith("/") or not rest[1:].strip("/"):
        msg = (
            f"a SQLite URL names a file: sqlite:///state.db or sqlite:////abs/state.db, got {url!r}"
        )
        raise ValueError(msg)
    return Path(rest[1:]).expanduser()


def _sqlite_backend(url: str, create: Creation) -> Backend:
    from ._sqlite import SqliteBackend

    return SqliteBackend(_sqlite_path(url), create=create)


def _lone_postgres_backend(url: str) -> Backend:
    """The backend of `url` as a store of its own, which a split's partition is not."""
    _needs_psycopg()
    from ._partitions import check_not_partition
    from ._postgres import PostgresBackend

    backend = PostgresBackend(url)  # first: an unreachable server is its error, as ever
    try:
        check_not_partition(url)
    except BaseException:
        backend.close()
        raise
    return backend


@asynccontextmanager
async def open_split_store(
    urls: Sequence[str], *, record: bool = True
) -> AsyncIterator[StateStore]:
    """The store split by session over the PostgreSQL databases `urls` names, until the block
    ends (`actors.store.SplitStore`): fresh databases are recorded as one split unless
    `record` is false; recorded ones must be given all, in any order. StoreError (naming
    what differs and what to do) for any other list, before the block starts; ValueError
    for fewer than two URLs or any that is not a postgresql:// URL."""
    if isinstance(urls, str):
        msg = "open_split_store takes a list of PostgreSQL URLs, not one string"
        raise TypeError(msg)
    if len(urls) < 2 or _check_split_urls(urls) != "postgresql":
        msg = f"a split store needs two or more postgresql:// URLs, got {len(urls)}"
        raise ValueError(msg)
    _needs_psycopg()
    from ._partitions import open_split

    async with open_split(urls, record=record) as store:
        yield store


def _needs_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        msg = f"a PostgreSQL store needs psycopg: pip install 'mcp-actors[postgres]' ({exc})"
        raise StoreError(msg) from None
