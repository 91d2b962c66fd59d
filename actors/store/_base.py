"""What every state store offers: versioned blobs per actor key.

The contract is small on purpose, so that a store is easy to add and easy to
reason about:

* ``load(key)`` → the key's `Stored` (version and blob), or ``None``;
* ``save(key, blob, expected)`` → the new version, when the stored version is
  still ``expected`` (``None``: nothing stored yet); otherwise `VersionConflict`
  and nothing is written. This is the fence that makes one writer per key
  certain even when two processes both believe they own it. A key's first
  version is `first_version()`, random, and each save adds one: a key deleted
  and written again does not repeat the versions of its earlier life, so a
  process holding a copy of that life sees the change by its version alone;
* a key may also hold *parts* beside its blob (a part-wise durable state: see
  ``actors._durable``): ``save(..., changes=PartChanges(...))`` writes the
  parts a call changed and removes those it dropped, in the same transaction
  and behind the same fence as the blob, and ``load(key, parts=True)`` reads
  the blob and every part as of one moment;
* ``delete_session(session_id)`` removes every key of a session;
* ``touch(keys)`` marks keys as used now, and ``sweep(retention)`` removes
  every key neither written nor marked for ``retention`` seconds: a key's
  ``used_at`` is the later of the two. The runtime marks the keys it loads
  and those its actors hold now and then, so a key read every day is never
  swept, nor one that any process serves (see `actors.Runtime`);
* ``entries(session=…, tenant=…)`` lists what is stored (no blobs), and
  ``delete(key)`` removes one key: what an operator looks at and repairs.

A store raises `StoreError` (or `VersionConflict`) and nothing else; a save
that raises was not acknowledged, whether or not it reached the disk.
"""

from __future__ import annotations

import functools
import json
import secrets
from typing import TYPE_CHECKING, Literal, Protocol, final

import attrs

from protocol import TENANT_SEPARATOR, ActorKey, ToolContext

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

__all__ = [
    "Creation",
    "PartChanges",
    "StateStore",
    "StoreError",
    "Stored",
    "StoredEntry",
    "VersionConflict",
    "decode_key",
    "encode_key",
    "first_version",
    "in_scope",
]

Creation = Literal["nothing", "file", "folders"]
"""What `open_store` may make for a SQLite URL whose file is missing: nothing (a
missing file is an error), the file in an existing folder, or the folders too.
Here, below both, because the SQLite store takes it and `open_store` passes it on."""


_FIRST_VERSION_BITS = 52
"""First versions below 2**52, and 2**52 saves of room above them: every version stays
exact as a JSON number (a store's dump) in any reader, doubles included."""


def first_version() -> int:
    """The version a key gets when first written (when nothing is stored): random.

    Versions never start over at one, so that a key deleted and written again, by this
    process or another, does not go back through the versions of its earlier life: a
    copy of that life (a live actor in a process sharing the store) sees by the version
    alone that it is stale. Two lives of a key share a version only by a chance of about
    one in 2**52 per save of the later life: not at all, in practice.
    """
    return secrets.randbits(_FIRST_VERSION_BITS) + 1


class StoreError(Exception):
    """The state store failed: unreachable, locked, corrupt, full. The message says which."""


class VersionConflict(StoreError):
    """Someone else wrote the key since it was loaded: this writer's copy is stale."""

    def __init__(self, key: ActorKey, expected: int | None, found: int | None) -> None:
        self.key = key
        """The key whose write was refused."""
        self.expected = expected
        """The version the writer had loaded (``None``: nothing stored)."""
        self.found = found
        """The version stored now (``None``: nothing stored)."""
        expected_text = "nothing stored" if expected is None else f"version {expected}"
        found_text = "nothing stored" if found is None else f"version {found}"
        super().__init__(
            f"state of {key} changed under this writer: expected {expected_text}, "
            f"found {found_text}; another process owns the key now"
        )


@final
@attrs.frozen
class StoredEntry:
    """What the store knows of one key, without its blob."""

    key: ActorKey
    """The actor key whose state it is."""
    version: int
    """The stored version (see `Stored.version`)."""
    size: int
    """The blob's length in bytes."""
    used_at: float
    """When the key was last written or marked as used (seconds since the epoch)."""


@final
@attrs.frozen
class Stored:
    """One key's state as stored."""

    version: int
    """`first_version()` (random) on the first save, then one more with every save."""
    blob: bytes
    """The serialized state, opaque to the store (for a part-wise state, its header)."""
    parts: Mapping[str, bytes] | None = None
    """Part name → part, when loaded with ``parts=True``; ``None`` when not asked for."""

    @property
    def size(self) -> int:
        """Bytes of the blob and of the parts loaded with it."""
        return len(self.blob) + sum(map(len, (self.parts or {}).values()))


@final
@attrs.frozen
class PartChanges:
    """What one save does to a key's parts besides writing its blob."""

    written: tuple[tuple[str, bytes], ...] = ()
    """(name, blob) of each part made or changed; a name at most once. A part made keeps
    its place after those stored; a part changed keeps its own (a key's parts load in
    that order)."""
    removed: tuple[str, ...] = ()
    """The names of the parts dropped; none of them among `written`."""
    moved: tuple[str, ...] = ()
    """Names among `written` that go after every other part, in the order written."""

    def __attrs_post_init__(self) -> None:
        names = [name for name, _blob in self.written]
        if len(set(names)) != len(names) or set(names) & set(self.removed):
            msg = "a part may be written once or removed in one save, not both nor twice"
            raise ValueError(msg)
        if not set(self.moved) <= set(names):
            msg = "a part moved must be written"
            raise ValueError(msg)

    @property
    def size(self) -> int:
        """Bytes of the parts written."""
        return sum(len(blob) for _name, blob in self.written)


class StateStore(Protocol):
    """Where durable module state lives: one versioned blob per actor key."""

    @property
    def url(self) -> str:
        """Where the store is, for logs and errors (no password)."""
        ...

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        """The key's stored state, or ``None`` when it has none; with its parts if `parts`."""
        ...

    async def version(self, key: ActorKey) -> int | None:
        """The key's stored version now, or ``None`` when it has none: what a process that
        shares the store asks before serving a key from memory (`RuntimeConfig.shared_store`).
        Asked at the same time for many keys, it is one query for all of them."""
        ...

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        """Write `blob` (and `changes` to the key's parts) if the stored version is
        `expected`; return the new version.

        Raises VersionConflict (nothing written) or StoreError. Saves waiting at
        the same time are committed together (group commit).
        """
        ...

    async def delete_session(self, session_id: str) -> int:
        """Delete every key of `session_id`, in every module; return how many."""
        ...

    async def touch(self, keys: Collection[ActorKey]) -> None:
        """Mark `keys` as used now, so that a sweep keeps them; keys not stored are skipped."""
        ...

    async def sweep(self, retention: float) -> int:
        """Delete the keys neither written nor used for `retention` seconds; return how many."""
        ...

    async def entries(
        self, *, session: str | None = None, tenant: str | None = None
    ) -> list[StoredEntry]:
        """What is stored for `session`, or for `tenant`'s sessions (``T`` and ``T/…``), or
        everything when both are None; in key order."""
        ...

    async def delete(self, key: ActorKey) -> bool:
        """Delete one key; whether it was stored."""
        ...


@functools.lru_cache(maxsize=4096)  # an actor's key is encoded at every save
def encode_key(key: ActorKey) -> str:
    """The key as one unambiguous text: a JSON array, absent parts ``null``."""
    context = key.context
    return json.dumps(
        [key.module, context.session_id, context.assistant_id, context.thread_id],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_key(text: str) -> ActorKey:
    """The inverse of `encode_key`."""
    module, session, assistant, thread = json.loads(text)
    return ActorKey(module, ToolContext(session, assistant, thread))


def in_scope(session: str, *, only: str | None, tenant: str | None) -> bool:
    """Whether `session` is the one `only` names, or one of `tenant`'s; any without either."""
    if only is not None:
        return session == only
    if tenant is not None:
        return session == tenant or session.startswith(tenant + TENANT_SEPARATOR)
    return True
