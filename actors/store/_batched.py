"""Group commit: a trio front for a store whose driver blocks (sqlite3, psycopg).

Every load and save waits in a queue; one task per queue takes everything
waiting, hands it to the driver in a worker thread as one batch (one
transaction for saves), and wakes each caller with its own result. While a
batch runs, the next one gathers, and it is taken only once the items stop
coming for a moment (two scheduler passes), so that the callers the last
batch answered, who write again a few passes later, join it: under load the
cost of a commit (an fsync for SQLite) is shared by every busy writer, and
with no load a single save goes out after those two passes. The event loop
never blocks on the driver.

Cancellation: a caller cancelled while its save waits in the queue withdraws
it; once its batch has gone to the driver the save completes or fails as a
whole, and a cancelled caller just does not hear which. Either way nothing
was acknowledged to the caller's caller, which is what durability promises.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar, final

import attrs
import trio

from protocol import TENANT_SEPARATOR

from ._base import Stored, StoredEntry, StoreError, VersionConflict, decode_key, encode_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence

    from protocol import ActorKey

    from ._base import PartChanges

__all__ = [
    "Backend",
    "BatchRolledBack",
    "Conflict",
    "Loaded",
    "Write",
    "gather_parts",
    "open_batched",
    "scope_clause",
]

Loaded = tuple[int, bytes, dict[str, bytes]]
"""A key loaded with its parts: version, blob, part name → part."""

_MAX_BATCH: Final = 1000  # bounds one transaction's size and one thread hop's latency
_GATHER_PASSES: Final = 32  # bounds how long a steady stream of items holds a batch back
_QUIET_PASSES: Final = 2  # passes without a new item that end the gathering
_GATHERED_ENOUGH: Final = 128  # items waiting that end it at once

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


@final
@attrs.frozen
class Write:
    """One save as the driver sees it."""

    key: str
    """`encode_key` of the actor key."""
    session: str
    """The key's session, kept in its own column for `delete_session`."""
    blob: bytes
    expected: int | None
    """The version the writer loaded; ``None`` when it found nothing stored."""
    changes: PartChanges | None = None
    """What the save does to the key's parts, written only if the blob is (same fence)."""


class StoreBusy(StoreError):
    """A read asked at once found the store busy (another connection holds a lock it
    needs): ask again the usual way, in a worker thread that may wait."""


class BatchRolledBack(StoreError):
    """A batch of saves failed because of what one of its rows holds, and was rolled back
    whole: nothing of it was written, and each save may be tried again on its own."""


@final
@attrs.frozen
class Conflict:
    """A save refused because the stored version was not the expected one."""

    found: int | None
    """The version stored now; ``None`` if there is none (it was deleted)."""


class Backend(Protocol):
    """A blocking driver. Called from one worker thread at a time per method kind (the
    two loads count as one kind, as do `commit` and the maintenance calls)."""

    url: str

    @property
    def shared_by_default(self) -> bool:
        """Whether other processes are expected to write the same store (PostgreSQL's)."""
        ...

    @property
    def version_at_once(self) -> Callable[[str], int | None] | None:
        """The stored version of one key, asked on the event loop itself, for a store whose
        read of it costs less than a worker thread's round trip (SQLite's, on a connection
        of its own); it raises `StoreBusy` rather than wait. None: asked in `versions_many`."""
        ...

    def load_many(self, keys: Sequence[str]) -> list[tuple[int, bytes] | None]:
        """(version, blob) or None for each key, in order."""
        ...

    def load_many_with_parts(self, keys: Sequence[str]) -> list[Loaded | None]:
        """(version, blob, parts) or None for each key, in order; each key as of one moment."""
        ...

    def versions_many(self, keys: Sequence[str]) -> list[int | None]:
        """The stored version, or None, for each key, in order."""
        ...

    def commit(self, writes: Sequence[Write], now: float) -> list[int | Conflict]:
        """Apply `writes` in order in one transaction; the new version or a Conflict each.

        Raises BatchRolledBack when a row's content failed the transaction (a key
        too long for an index, say) and it was rolled back, StoreError otherwise.
        """
        ...

    def delete_session(self, session: str) -> int:
        """Delete every key of `session`; how many."""
        ...

    def touch(self, keys: Sequence[str], now: float) -> None:
        """Set the `used_at` of each of `keys` that is stored to `now`."""
        ...

    def sweep(self, cutoff: float) -> int:
        """Delete every key last written or used before `cutoff` (seconds since the epoch)."""
        ...

    def entries(self, session: str | None, tenant: str | None) -> list[tuple[str, int, int, float]]:
        """(key, version, blob size, used at) of `session`'s keys, or `tenant`'s, or all."""
        ...

    def delete(self, key: str) -> bool:
        """Delete one key; whether it was stored."""
        ...

    def close(self) -> None:
        """Release the connections."""
        ...


def gather_parts(rows: Iterable[Sequence[Any]], found: dict[str, Loaded]) -> None:
    """Add to `found` the keys of `rows` with their blobs and parts.

    Each row is (is a part, key, version, blob, part name, seq): the keys' blobs
    first, then their parts in the order they load in, as both drivers select
    them. A part of a key with no blob belongs to nothing stored and is left out.
    """
    for is_part, key, version, blob, part, _seq in rows:
        if not is_part:
            found[key] = (version, blob, {})
        elif key in found:
            found[key][2][part] = blob


def scope_clause(
    session: str | None, tenant: str | None, *, mark: str, prefix_of: str
) -> tuple[str, tuple[str | int, ...]]:
    """The WHERE clause (and its arguments) for one session, a tenant's sessions, or all.

    `mark` is the driver's parameter mark; `prefix_of` the SQL that takes the
    first characters of ``session`` (its length a parameter). No LIKE: a
    tenant's ``_`` would match any character.
    """
    if session is not None:
        return f" WHERE session = {mark}", (session,)
    if tenant is not None:
        prefix = tenant + TENANT_SEPARATOR
        return f" WHERE session = {mark} OR {prefix_of} = {mark}", (tenant, len(prefix), prefix)
    return "", ()


@attrs.define(eq=False)
class _Waiter(Generic[ItemT, ResultT]):
    item: ItemT
    task: trio.lowlevel.Task | None
    """The caller, parked until its batch is done; None once it was answered or went away."""
    result: ResultT | None = None
    error: StoreError | None = None

    def answer(self, outcome: ResultT | StoreError) -> None:
        """Give the caller its outcome and wake it (nothing, if it went away)."""
        if isinstance(outcome, StoreError):
            self.error = outcome
        else:
            self.result = outcome
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task)

    def cancelled(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        """The caller was cancelled: withdraw the item if it is still queued, and stop waiting."""
        self.task = None  # a queued item is skipped; a taken one is not heard of
        return trio.lowlevel.Abort.SUCCEEDED


@attrs.define(eq=False)
class _Queue(Generic[ItemT, ResultT]):
    """Items waiting for the next batch, and the task that runs the batches."""

    run: Callable[[list[ItemT]], list[ResultT]]
    """The driver call, made in a worker thread with a whole batch."""
    describe: str
    """What a batch does, for errors: "save", "load"."""
    url: str
    split: bool = False
    """Whether a batch that failed on one row's content (BatchRolledBack) is run again
    one item at a time, so that no row fails another's."""
    limiter: trio.CapacityLimiter | None = None
    """What the worker thread of a batch waits for (None: trio's default)."""
    waiting: list[_Waiter[ItemT, ResultT]] = attrs.field(factory=list)
    wake: trio.Event = attrs.field(factory=trio.Event)

    async def submit(self, item: ItemT) -> ResultT:
        # Each caller parks its own task rather than waiting on an Event of its
        # own: what an Event would do, without making one per item.
        waiter: _Waiter[ItemT, ResultT] = _Waiter(item, trio.lowlevel.current_task())
        self.waiting.append(waiter)
        self.wake.set()
        await trio.lowlevel.wait_task_rescheduled(waiter.cancelled)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result  # type: ignore[return-value]  # set whenever error is not

    def fail_waiting(self, error: StoreError) -> None:
        """Answer everything still queued with `error` (the store is closing)."""
        for waiter in self.waiting:
            waiter.answer(error)
        self.waiting.clear()

    async def serve(self) -> None:
        """Run batches for as long as the store is open."""
        while True:
            await self.wake.wait()
            self.wake = trio.Event()
            while self.waiting:
                await self._gather()
                batch = [w for w in self.waiting[:_MAX_BATCH] if w.task is not None]
                del self.waiting[:_MAX_BATCH]
                if batch:
                    await self._run(batch)

    async def _gather(self) -> None:
        """Let the batch grow while items keep coming, a scheduler pass at a time.

        The callers a batch just answered write again a few passes later (the
        reply, the caller's next call, the actor's write). Taken at once, the
        next batch would leave them out: the busy writers would split into two
        halves taking turns, each commit (each fsync) shared by half of them,
        and the worker thread could not overlap the halves' work anyway, since
        it needs the GIL between its statements while the event loop holds it.
        So the batch is taken once two passes in a row brought nothing new (the
        tasks of a pass run in either order, so one quiet pass may only mean
        that this task ran first): with one caller, after two passes. Or once
        it holds `_GATHERED_ENOUGH` items: past a hundred or so rows a commit
        costs each one less than the event loop spends on its call, so more
        company gains little, while waiting for it holds back every writer
        already in the batch.
        """
        quiet = 0
        for _ in range(_GATHER_PASSES):
            before = len(self.waiting)
            if before >= _GATHERED_ENOUGH:
                return
            await trio.lowlevel.cancel_shielded_checkpoint()
            quiet = quiet + 1 if len(self.waiting) == before else 0
            if quiet == _QUIET_PASSES:
                return

    async def _run(self, batch: list[_Waiter[ItemT, ResultT]]) -> None:
        items = [waiter.item for waiter in batch]
        # Shielded: a batch taken from the queue is run and answered whole, and a
        # commit in flight is waited for, so that closing the store never leaves
        # a transaction half-told nor a caller unanswered.
        with trio.CancelScope(shield=True):
            outcomes = await trio.to_thread.run_sync(self._outcomes, items, limiter=self.limiter)
        for waiter, outcome in zip(batch, outcomes, strict=True):
            waiter.answer(outcome)

    def _outcomes(self, items: list[ItemT]) -> list[ResultT | StoreError]:
        """Each item's result or error (in the worker thread): the batch, else one by one."""
        try:
            return list(self._attempt(items))
        except BatchRolledBack as exc:
            if not self.split or len(items) == 1:
                return [exc] * len(items)
        # Nothing of the batch was written: each item alone, so only the bad ones fail.
        return [self._alone(item) for item in items]

    def _alone(self, item: ItemT) -> ResultT | StoreError:
        try:
            (result,) = self._attempt([item])
        except StoreError as exc:
            return exc
        return result

    def _attempt(self, items: list[ItemT]) -> list[ResultT] | list[StoreError]:
        """The driver's results for `items`, or one StoreError for all (BatchRolledBack raised)."""
        try:
            return self.run(items)
        except BatchRolledBack:
            raise
        except StoreError as exc:
            return [exc] * len(items)
        except Exception as exc:  # the driver's own error: name the store and the action
            return [StoreError(f"{self.describe} failed in {self.url}: {exc}")] * len(items)


@final
class BatchedStore:
    """A `StateStore` over a blocking `Backend`, with group commit. Open with `open_batched`."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        # Saves and the rare other writes (deleting a session, marking keys used,
        # sweeping) take turns: run side by side on connections of their own, a
        # burst of session ends could hold SQLite's write lock while a save waited
        # past its busy timeout ("database is locked") and failed its call.
        self._writes = trio.CapacityLimiter(1)
        self._saves: _Queue[Write, int | Conflict] = _Queue(
            lambda writes: backend.commit(writes, time.time()),
            "save",
            backend.url,
            split=True,
            limiter=self._writes,
        )
        # The two kinds of load share the driver's one reading connection: they take turns.
        reads = trio.CapacityLimiter(1)
        self._loads: _Queue[str, tuple[int, bytes] | None] = _Queue(
            backend.load_many, "load", backend.url, limiter=reads
        )
        # A queue of its own, so that whole states load as they always did: a
        # store with no part-wise module pays nothing for parts.
        self._part_loads: _Queue[str, Loaded | None] = _Queue(
            backend.load_many_with_parts, "load", backend.url, limiter=reads
        )
        # Versions are asked before each call of a store several processes share: one
        # query for all the keys asked at once, on the same reading connection.
        self._versions: _Queue[str, int | None] = _Queue(
            backend.versions_many, "version check", backend.url, limiter=reads
        )

    @property
    def url(self) -> str:
        """Where the store is."""
        return self._backend.url

    @property
    def shared_by_default(self) -> bool:
        """Whether other processes are expected to write it (`RuntimeConfig.shared_store`)."""
        return self._backend.shared_by_default

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        """The key's stored state, or ``None``; with its parts if `parts`."""
        if parts:
            loaded = await self._part_loads.submit(encode_key(key))
            return None if loaded is None else Stored(*loaded)
        found = await self._loads.submit(encode_key(key))
        return None if found is None else Stored(*found)

    async def version(self, key: ActorKey) -> int | None:
        """The key's stored version, or ``None``: at once where the backend can tell it
        without waiting (no checkpoint then: the caller's call is about to make one), else
        asked together with the others waiting."""
        encoded = encode_key(key)
        at_once = self._backend.version_at_once
        if at_once is not None:
            try:
                return at_once(encoded)
            except StoreBusy:
                pass  # a lock held elsewhere: wait for it in a worker thread, not here
        return await self._versions.submit(encoded)

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        """Write `blob` and `changes` if the stored version is `expected`; the new version."""
        outcome = await self._saves.submit(
            Write(encode_key(key), key.context.session_id, blob, expected, changes)
        )
        if isinstance(outcome, Conflict):
            raise VersionConflict(key, expected, outcome.found)
        return outcome

    async def delete_session(self, session_id: str) -> int:
        """Delete every key of `session_id`; how many."""
        return await self._admin_call("delete_session", self._backend.delete_session, session_id)

    async def touch(self, keys: Collection[ActorKey]) -> None:
        """Mark `keys` as used now."""
        encoded = [encode_key(key) for key in keys]
        await self._admin_call("touch", self._backend.touch, encoded, time.time())

    async def sweep(self, retention: float) -> int:
        """Delete the keys neither written nor used for `retention` seconds; how many."""
        cutoff = time.time() - retention
        return await self._admin_call("sweep", self._backend.sweep, cutoff)

    async def entries(
        self, *, session: str | None = None, tenant: str | None = None
    ) -> list[StoredEntry]:
        """What is stored for `session` or `tenant` (everything without either)."""
        rows = await self._admin_call("listing", self._backend.entries, session, tenant)
        return [
            StoredEntry(decode_key(key), version, size, used_at)
            for key, version, size, used_at in rows
        ]

    async def delete(self, key: ActorKey) -> bool:
        """Delete one key; whether it was stored."""
        return await self._admin_call("delete", self._backend.delete, encode_key(key))

    async def _admin_call(
        self, what: str, call: Callable[..., ResultT], *arguments: Any
    ) -> ResultT:
        try:
            return await trio.to_thread.run_sync(call, *arguments, limiter=self._writes)
        except StoreError:
            raise
        except Exception as exc:
            msg = f"{what} failed in {self.url}: {exc}"
            raise StoreError(msg) from exc

    async def _serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._saves.serve)
            nursery.start_soon(self._loads.serve)
            nursery.start_soon(self._part_loads.serve)
            nursery.start_soon(self._versions.serve)
            task_status.started()


@asynccontextmanager
async def open_batched(backend: Backend) -> AsyncIterator[BatchedStore]:
    """Serve `backend` with group commit until the block ends, then close it."""
    store = BatchedStore(backend)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(store._serve)
            try:
                yield store
            finally:
                nursery.cancel_scope.cancel()
                closed = StoreError(f"the state store {backend.url} is closed")
                store._saves.fail_waiting(closed)
                store._loads.fail_waiting(closed)
                store._part_loads.fail_waiting(closed)
    finally:
        await trio.to_thread.run_sync(backend.close)
