"""A state store split by session: `SplitStore`, a front over partitions, each a whole store.

Each session's keys, in every module, live in exactly one partition: the one
that rendezvous hashing (`protocol.shard_for`, the hash cluster placement
uses) picks among the partitions' ids. Each call goes to the partition of its
key's session; what spans sessions (touch, sweep, listing) goes to every
partition concerned at once, and each partition keeps its own group commit.
Opening, and recording which databases make a split, is `_partitions`.
"""

from __future__ import annotations

import functools
import heapq
from typing import TYPE_CHECKING, TypeVar, final

import attrs
import trio

from protocol import shard_for

from ._base import StoreError, encode_key

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

    from protocol import ActorKey

    from ._base import PartChanges, StateStore, Stored, StoredEntry

__all__ = ["SplitStore"]


@final
@attrs.frozen
class SplitStore:
    """A `StateStore` over partitions, each session's keys in one of them. Open with
    `open_split_store` (or `open_store` with several URLs)."""

    partitions: Mapping[str, StateStore]
    """Each partition's store by its recorded id."""
    url: str
    """The partitions' URLs (no passwords), for logs and errors."""
    _ids: tuple[str, ...] = attrs.field(init=False)

    @_ids.default
    def _sorted_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self.partitions))

    def partition_of(self, session_id: str) -> StateStore:
        """The partition that holds `session_id`'s keys; StoreError for an id that is not
        text (a lone surrogate), which no store can take either."""
        return self.partitions[self._placed(session_id)]

    def _placed(self, session_id: str) -> str:
        try:
            return _placed(session_id, self._ids)
        except UnicodeEncodeError:
            msg = f"the session id {session_id!r} is not valid Unicode text"
            raise StoreError(msg) from None

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        """The key's stored state (with its parts if `parts`), from its session's partition."""
        return await self._of(key).load(key, parts=parts)

    @property
    def shared_by_default(self) -> bool:
        """Whether other processes are expected to write any of the partitions."""
        return any(getattr(p, "shared_by_default", False) for p in self.partitions.values())

    async def version(self, key: ActorKey) -> int | None:
        """The key's stored version, from its session's partition."""
        return await self._of(key).version(key)

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        """Write `blob` (and `changes` to the key's parts) to the key's session's partition if
        it holds version `expected`."""
        return await self._of(key).save(key, blob, expected, changes=changes)

    async def delete_session(self, session_id: str) -> int:
        """Delete every key of `session_id` (all in its partition)."""
        return await self.partition_of(session_id).delete_session(session_id)

    async def touch(self, keys: Collection[ActorKey]) -> None:
        """Mark `keys` as used now, each partition's keys in one call to it."""
        grouped: dict[str, list[ActorKey]] = {}
        for key in keys:
            grouped.setdefault(self._placed(key.context.session_id), []).append(key)
        await _each(
            [functools.partial(self.partitions[pid].touch, its) for pid, its in grouped.items()]
        )

    async def sweep(self, retention: float) -> int:
        """Sweep every partition; how many keys they deleted together."""
        counts = await _each(
            [functools.partial(store.sweep, retention) for store in self.partitions.values()]
        )
        return sum(counts)

    async def entries(
        self, *, session: str | None = None, tenant: str | None = None
    ) -> list[StoredEntry]:
        """What is stored for `session` (its partition), or for `tenant` or everything (every
        partition), in key order as one store lists it."""
        if session is not None:
            return await self.partition_of(session).entries(session=session)
        listings = await _each(
            [functools.partial(store.entries, tenant=tenant) for store in self.partitions.values()]
        )
        # A single store orders by the encoded key's bytes (UTF-8, so code points).
        return list(heapq.merge(*listings, key=lambda entry: encode_key(entry.key)))

    async def load_from_every_partition(self, key: ActorKey) -> None:
        """Load `key` from each partition at once (a readiness probe: any of them can be down
        alone); StoreError naming the first that failed."""
        await _each([functools.partial(store.load, key) for store in self.partitions.values()])

    async def delete(self, key: ActorKey) -> bool:
        """Delete one key from its session's partition; whether it was stored."""
        return await self._of(key).delete(key)

    def _of(self, key: ActorKey) -> StateStore:
        return self.partition_of(key.context.session_id)


@functools.lru_cache(maxsize=4096)  # a session is placed at every save: hash it once
def _placed(session_id: str, ids: tuple[str, ...]) -> str:
    return shard_for(session_id, ids)


ResultT = TypeVar("ResultT")


async def _each(calls: Sequence[Callable[[], Awaitable[ResultT]]]) -> list[ResultT]:
    """Run `calls` side by side; their results in order.

    A partition that fails raises StoreError, as a store does, and not the
    exception group a nursery would wrap it in: the others still run to their
    end (a sweep or a mark that went through is not undone by another's failure).
    """
    results: list[ResultT | None] = [None] * len(calls)
    failures: list[StoreError] = []

    async def run(index: int) -> None:
        try:
            results[index] = await calls[index]()
        except StoreError as exc:  # kept out of the nursery's exception group
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        for index in range(len(calls)):
            nursery.start_soon(run, index)
    if failures:
        raise failures[0]
    return results  # type: ignore[return-value]  # every slot is filled when none failed
