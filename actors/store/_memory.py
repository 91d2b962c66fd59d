"""The memory store: the same contract as the others, kept in this process.

For tests and for hosts that want the runtime's reload-after-failure behaviour
without a file. Nothing survives the process.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, final

import trio

from ._base import Stored, VersionConflict

if TYPE_CHECKING:
    from protocol import ActorKey

__all__ = ["MemoryStore"]


@final
class MemoryStore:
    """A `StateStore` in a dict; each operation is one checkpoint, like a real store's."""

    url = "memory"

    def __init__(self) -> None:
        self._states: dict[ActorKey, tuple[Stored, float]] = {}

    async def load(self, key: ActorKey) -> Stored | None:
        """The key's stored state, or ``None``."""
        await trio.lowlevel.checkpoint()
        entry = self._states.get(key)
        return None if entry is None else entry[0]

    async def save(self, key: ActorKey, blob: bytes, expected: int | None) -> int:
        """Write `blob` if the stored version is `expected`; the new version."""
        await trio.lowlevel.checkpoint()
        entry = self._states.get(key)
        found = None if entry is None else entry[0].version
        if found != expected:
            raise VersionConflict(key, expected, found)
        version = 1 if found is None else found + 1
        self._states[key] = (Stored(version, blob), time.time())
        return version

    async def delete_session(self, session_id: str) -> int:
        """Delete every key of `session_id`; how many."""
        await trio.lowlevel.checkpoint()
        doomed = [key for key in self._states if key.context.session_id == session_id]
        for key in doomed:
            del self._states[key]
        return len(doomed)

    async def sweep(self, retention: float) -> int:
        """Delete the keys not written for `retention` seconds; how many."""
        await trio.lowlevel.checkpoint()
        cutoff = time.time() - retention
        doomed = [key for key, (_stored, written) in self._states.items() if written < cutoff]
        for key in doomed:
            del self._states[key]
        return len(doomed)
