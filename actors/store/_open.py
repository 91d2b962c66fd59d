"""``open_store(url)``: a state store from a URL, open for the length of a block."""

from __future__ import annotations

import os
import urllib.parse
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import trio

from ._base import StoreError
from ._batched import open_batched
from ._memory import MemoryStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ._base import StateStore
    from ._batched import Backend

__all__ = ["Creation", "check_store_url", "default_state_url", "open_store"]

_FORMS = "'memory', 'sqlite:///path/to/state.db' or 'postgresql://user@host/db'"


Creation = Literal["nothing", "file", "folders"]
"""What `open_store` may make for a SQLite URL whose file is missing: nothing (a
missing file is an error), the file in an existing folder, or the folders too."""


@asynccontextmanager
async def open_store(url: str, *, create: Creation = "file") -> AsyncIterator[StateStore]:
    """Open the store `url` names until the block ends.

    ``memory``; ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` (a
    file, made if missing, in a folder that must exist unless `create` is
    ``"folders"``: a typo in a path is an error naming the folder, not a new
    tree of folders); ``postgresql://…`` (a libpq URL; needs the ``postgres``
    extra). Raises ValueError for a URL of no known form and StoreError for a
    store that cannot be opened (missing or unwritable path, not a database,
    server unreachable), before the block starts.
    """
    kind = check_store_url(url)
    if kind == "memory":
        yield MemoryStore()
        return
    if kind == "sqlite":
        backend = await trio.to_thread.run_sync(_sqlite_backend, url, create)
    else:
        backend = await trio.to_thread.run_sync(_postgres_backend, url)
    async with open_batched(backend) as store:
        yield store


def default_state_url() -> str:
    """``sqlite:///`` a file in the XDG state directory (``~/.local/state/mcp-actors``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return f"sqlite:///{Path(base, 'mcp-actors', 'state.db').absolute()}"


def check_store_url(url: str) -> str:
    """The kind of store `url` names (memory, sqlite, postgresql); ValueError if none."""
    if url == "memory":
        return "memory"
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "sqlite":
        _sqlite_path(url)
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    msg = f"unknown state store URL {url!r}; expected {_FORMS}"
    raise ValueError(msg)


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


def _postgres_backend(url: str) -> Backend:
    try:
        from ._postgres import PostgresBackend
    except ImportError as exc:
        msg = f"a PostgreSQL store needs psycopg: pip install 'mcp-actors[postgres]' ({exc})"
        raise StoreError(msg) from None
    return PostgresBackend(url)
