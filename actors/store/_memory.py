"""The memory store: the same contract as the others, kept in this process.

For tests and for hosts that want the runtime's reload-after-failure behaviour
without a file. Nothing survives the process.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, final

import trio

from ._base import Stored, StoredEntry, VersionConflict, encode_key, first_version, in_scope

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from protocol import ActorKey

    from ._base import PartChanges

__all__ = ["MemoryStore"]


@final
class MemoryStore:
    """A `StateStore` in a dict; each operation is one checkpoint, like a real store's."""

    url = "memory"
    """What the store is, for logs and errors."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        """`clock` tells the time in seconds; tests on trio's virtual clock pass
        ``trio.current_time`` so that retention runs on it too."""
        self._clock = clock
        self._states: dict[ActorKey, tuple[Stored, float]] = {}  # key -> (state, used at)

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        """The key's stored state, or ``None``; with a copy of its parts if `parts`."""
        await trio.lowlevel.checkpoint()
        entry = self._states.get(key)
        if entry is None:
            return None
        stored = entry[0]
        return Stored(stored.version, stored.blob, dict(stored.parts or {}) if parts else None)

    async def version(self, key: ActorKey) -> int | None:
        """The key's stored version, or ``None``."""
        await trio.lowlevel.checkpoint()
        entry = self._states.get(key)
        return None if entry is None else entry[0].version

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        """Write `blob` and `changes` if the stored version is `expected`; the new version."""
        await trio.lowlevel.checkpoint()
        entry = self._states.get(key)
        found = None if entry is None else entry[0].version
        if found != expected:
            raise VersionConflict(key, expected, found)
        version = first_version() if found is None else found + 1
        parts = dict(entry[0].parts or {}) if entry is not None else {}
        if changes is not None:
            _apply(parts, changes)
        self._states[key] = (Stored(version, blob, parts), self._clock())
        return version

    async def delete_session(self, session_id: str) -> int:
        """Delete every key of `session_id`; how many."""
        await trio.lowlevel.checkpoint()
        doomed = [key for key in self._states if key.context.session_id == session_id]
        for key in doomed:
            del self._states[key]
        return len(doomed)

    async def touch(self, keys: Collection[ActorKey]) -> None:
        """Mark `keys` as used now."""
        await trio.lowlevel.checkpoint()
        now = self._clock()
        for key in keys:
            entry = self._states.get(key)
            if entry is not None:
                self._states[key] = (entry[0], now)

    async def sweep(self, retention: float) -> int:
        """Delete the keys neither written nor used for `retention` seconds; how many."""
        await trio.lowlevel.checkpoint()
        cutoff = self._clock() - retention
        doomed = [key for key, (_stored, used) in self._states.items() if used < cutoff]
        for key in doomed:
            del self._states[key]
        return len(doomed)

    async def entries(
        self, *, session: str | None = None, tenant: str | None = None
    ) -> list[StoredEntry]:
        """What is stored for `session` or `tenant` (everything without either)."""
        await trio.lowlevel.checkpoint()
        found = [
            StoredEntry(key, stored.version, stored.size, used)
            for key, (stored, used) in self._states.items()
            if in_scope(key.context.session_id, only=session, tenant=tenant)
        ]
        return sorted(found, key=lambda entry: encode_key(entry.key))

    async def delete(self, key: ActorKey) -> bool:
        """Delete one key; whether it was stored."""
        await trio.lowlevel.checkpoint()
        return self._states.pop(key, None) is not None


def _apply(parts: dict[str, bytes], changes: PartChanges) -> None:
    """`changes` made to `parts`, in the order the other stores keep."""
    moved = set(changes.moved)
    for name, blob in changes.written:
        if name in moved:
            parts.pop(name, None)  # to the end
        parts[name] = blob
    for name in changes.removed:
        parts.pop(name, None)
