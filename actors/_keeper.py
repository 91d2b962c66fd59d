"""One actor's hold on its state: made fresh, or loaded from the store and written back.

The runtime gives every actor a `Keeper`. For a module that is not durable
(or a runtime without a store) it only holds the state the module's factory
made. For a durable module with a store it also

* loads the key's state when the actor starts (or makes it, when nothing is
  stored), remembering the stored version;
* writes the state after a call that may have changed it, expecting that
  version, before the call's reply goes out — so an acknowledged change is in
  the store; the blob's digest is kept, so a call that changed nothing writes
  nothing;
* for a state stored in parts (``Durable(parts=...)``), keeps the parts as
  last written, so that a write stores only the parts the call made,
  replaced or dropped, beside the state's header;
* marks the state stale when a write failed or a call timed out half-way: the
  in-memory copy may then hold changes the store does not, so it is dropped
  and loaded again before the next call.

Every failure here is a `StoreError`, a `VersionConflict` or a
`StateLoadError` (a blob that no longer fits the state class), for the
runtime to turn into the call's reply or an actor crash.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from .store import StoreError, VersionConflict

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol import ActorKey, CallResult

    from ._durable import Durable, PartSnapshot
    from ._module import ToolModule
    from ._observe import Observer
    from .store import PartChanges, StateStore, Stored

__all__ = ["Keeper"]

_LOAD_INLINE_BYTES: Final = 256 * 1024  # larger stored states are parsed in a worker thread


def _digest(blob: bytes) -> bytes:
    # Kept in memory only, to tell a changed state from an unchanged one. SHA-256 rather than
    # BLAKE2b: with the SHA extensions of current x86 and ARM CPUs, OpenSSL hashes about
    # twice as fast with it (docs/performance.md; slower on a CPU without them), and every
    # load and save of a state pays for it.
    return hashlib.sha256(blob).digest()


@attrs.define(eq=False)
class Keeper:
    """The state of one actor, and what the store knows of it."""

    key: ActorKey
    module: ToolModule[Any]
    store: StateStore | None
    """Where the state is written; ``None`` when it lives in memory only."""
    state: object = None
    version: int | None = None
    """The stored version the state was loaded from or last written as."""
    digest: bytes | None = None
    """The digest of the stored blob, to skip writes that would change nothing."""
    parts: PartSnapshot | None = None
    """A part-wise state's parts as stored (as loaded or last written); ``None`` when the
    store holds none of them (nothing stored, or a state stored whole by an older version)."""
    stale: bool = False
    """The in-memory state may differ from the store's: load it before the next call."""
    fresh: bool = False
    """Loaded for the call about to be served: `outdated` need not ask the store again."""
    unloadable: CallResult | None = None
    """What the last failed load told its call, while it stands (see `ActorLoop._reload`)."""
    retry_at: float = -math.inf
    """When a load may be tried again after `unloadable`'s failure."""
    observer: Observer | None = None
    """Told how long each load and write took, and how the write ended."""

    @property
    def durable(self) -> Durable[Any] | None:
        """The module's durability, when this runtime stores it."""
        return None if self.store is None else self.module.durable

    @property
    def heal(self) -> Callable[[], object] | None:
        """The current state's heal hook, if the module runs it before calls."""
        return getattr(self.state, "heal", None) if self.module.heal_before_call else None

    def make(self) -> None:
        """A new state, made by the module: what `start` does when nothing is stored."""
        self.state = self.module.state(self.key.context)

    async def start(self) -> None:
        """The state for a new actor: loaded from the store, or made by the module."""
        durable = self.durable
        if durable is None or self.store is None:
            self.make()
            return
        stored = await self._load(self.store, parts=durable.partwise)
        self.parts = None
        if stored is None:
            self.make()
            self.version = self.digest = None
        else:
            load = functools.partial(durable.load_parts, stored.blob, stored.parts, self.key)
            if stored.size > _LOAD_INLINE_BYTES:  # parsing would stall the event loop
                self.state, self.parts = await trio.to_thread.run_sync(load)
            else:
                self.state, self.parts = load()
            self.version, self.digest = stored.version, _digest(stored.blob)
        self.stale = False

    async def outdated(self) -> bool:
        """Whether the store holds another version than the one in memory (another process
        wrote it, or deleted it), so that the state must be loaded again; not asked right
        after the load that started the actor (`fresh`), which read it for this call."""
        if self.fresh:
            self.fresh = False
            return False
        assert self.store is not None
        try:
            return await self.store.version(self.key) != self.version
        except StoreError:
            # Cannot tell: load again, which either finds the store back or fails as a
            # load that cannot reach the store always has (the actor's calls say why).
            return True

    async def save(self, *, heavy: bool = False) -> bool:
        """Write the state if it changed, and say whether it did; StoreError or VersionConflict.

        `heavy` serializes it in a worker thread (after a heavy tool, whose
        state is likely large). On any failure the state is marked stale, so
        it is loaded again before the next call: what this call changed is not
        in the store.
        """
        durable = self.durable
        assert durable is not None
        assert self.store is not None
        self.stale = True  # until the write is known to have landed
        try:
            dump = functools.partial(self._dumped, durable)
            blob, changes, parts = await trio.to_thread.run_sync(dump) if heavy else dump()
        except Exception as exc:
            msg = f"the state of {self.key} cannot be stored: {type(exc).__name__}: {exc}"
            raise StoreError(msg) from exc
        digest = _digest(blob)
        changed = digest != self.digest or bool(changes and (changes.written or changes.removed))
        if changed:
            self.version = await self._save(self.store, blob, changes)
            self.digest, self.parts = digest, parts
        elif self.observer is not None:
            self.observer.state_saved(self.key, 0.0, "unchanged")
        self.stale = False
        return changed

    def _dumped(
        self, durable: Durable[Any]
    ) -> tuple[bytes, PartChanges | None, PartSnapshot | None]:
        """The state's stored form: the whole blob, or its header, changed parts and parts."""
        if not durable.partwise:
            return durable.dump(self.state), None, None
        changes = durable.changes(self.parts or {}, self.state)
        return durable.dump_header(self.state), changes, durable.snapshot(self.state)

    async def _load(self, store: StateStore, *, parts: bool) -> Stored | None:
        if self.observer is None:
            return await store.load(self.key, parts=parts)
        started = time.perf_counter()
        stored = await store.load(self.key, parts=parts)
        self.observer.state_loaded(
            self.key, time.perf_counter() - started, found=stored is not None
        )
        return stored

    async def _save(self, store: StateStore, blob: bytes, changes: PartChanges | None) -> int:
        if self.observer is None:
            return await store.save(self.key, blob, self.version, changes=changes)
        started = time.perf_counter()
        outcome = "failed"
        try:
            version = await store.save(self.key, blob, self.version, changes=changes)
            outcome = "written"
        except VersionConflict:
            outcome = "conflict"
            raise
        finally:
            self.observer.state_saved(self.key, time.perf_counter() - started, outcome)
        return version
