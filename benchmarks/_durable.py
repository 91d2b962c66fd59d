"""Scenario ``durable``: what keeping state in a store costs a call, and a peer that keeps it too.

Each part runs its designs side by side in one process, interleaved round by
round; every design is a runtime, and they differ only in their store:

* ``memory`` — no store: the state lives and dies with its actor;
* ``memory store`` — the in-process `MemoryStore`: the durable path's own work
  (serializing, digesting, the store's round trip) without any I/O;
* ``SQLite`` — the embedded store (WAL, ``synchronous=FULL``, group commit),
  in a file in the temporary directory.

The parts:

* **call path** — a write to a small state (`Tally`, a counter per key) from
  one caller and from many, on random keys. A durable call's reply goes out
  only once its write is committed, so the SQLite design's calls per second
  are its acknowledged durable writes per second; how many rows each commit
  carried shows what group commit gathered. Afterwards each store is read
  back, and every acknowledged write must be in it.
* **reactivation** — first calls, from many callers, on keys whose actors
  expired (a short TTL): a durable design loads each state from its store
  (and the value read must be the one written); ``memory`` starts fresh.
* **large state** — a 1 KiB ``add_content`` to a ``content_store`` holding
  about 1 MiB, against the same add to an empty one, one caller: each write
  stores the item added and the store's header (its items are parts). Also
  the first call after a restart, which loads
  the 1 MiB state (the search index is left for the first search), and the
  first search after a restart, which loads it and builds the index.
* **part-wise writes** — the same 1 KiB add over ``actors serve --state sqlite:///…``
  to an empty, a 1 MiB and an 8 MiB store, written whole and part-wise: the
  bytes the server process writes and the time, in `benchmarks._partwise`;
* **peer** — FastMCP 4's session state over stdio, in `benchmarks._fastmcp_peer`.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio

from actors import Durable, RuntimeConfig, ToolModule, open_runtime
from actors.modules import content_store
from actors.store import MemoryStore, open_store

# Private on purpose: the SQLite design is what open_store builds, with a
# backend that counts the rows each commit carries (group commit's batches).
from actors.store._batched import open_batched
from actors.store._sqlite import SqliteBackend
from protocol import ActorKey, Scope, ToolContext

from ._designs import key_names
from ._fastmcp_peer import run_fastmcp_peer
from ._measure import (
    Batch,
    Phase,
    Results,
    Stats,
    drive,
    interleave,
    latencies,
    merge,
    ratios,
    throughputs,
)
from ._partwise import run_partwise
from ._report import Figure, ScenarioResult, Target, figure
from ._texts import prose

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from actors import Runtime
    from actors.store import StateStore
    from actors.store._batched import Loaded, Write

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["Tally", "missing_writes", "run_durable", "tally_module"]

NAME: Final = "durable"
MEMORY: Final = "memory"
MEMORY_STORE: Final = "memory store"
SQLITE: Final = "SQLite"
POSTGRES: Final = "PostgreSQL"
DESIGNS: Final = (MEMORY, MEMORY_STORE, SQLITE)
DURABLE_DESIGNS: Final = (MEMORY_STORE, SQLITE)
ADD: Final = "tally__add"
READ: Final = "tally__read"
ADD_CONTENT: Final = "content_store__add_content"
LIST_CONTENTS: Final = "content_store__list_contents"
SEARCH_CONTENT: Final = "content_store__search_content"
RATIO_TARGET: Final = Target(">=", 0.4)  # SQLite / memory calls/s, many callers
P50_TARGET: Final = Target("<=", 1000)  # µs, SQLite, one caller
WRITES_TARGET: Final = Target(">=", 20_000)  # acknowledged durable writes/s, many callers
NONE_TARGET: Final = Target("==", 0, any_size=True)
RESTART_TARGET: Final = Target("<=", 5)  # ms, the first call after a restart on the full store
REACTIVATION_TTL: Final = 0.25  # seconds: short, so that rounds need not wait long
NOTE_BYTES: Final = 1024
ITEM_BYTES: Final = 64 * 1024
FULL: Final = "full store"
EMPTY: Final = "empty store"


@attrs.define
class Tally:
    """A small state: how many writes its key has had."""

    count: int = 0


def add(state: Tally) -> str:
    """Count one more write."""
    state.count += 1
    return "ok"


def read(state: Tally) -> str:
    """The count so far, as text."""
    return str(state.count)


def tally_module() -> ToolModule[Tally]:
    """A durable, session-scoped module with `add` (a write) and `read` (read-only)."""
    module = ToolModule(
        "tally", lambda _context: Tally(), scope=Scope.SESSION, durable=Durable(Tally)
    )
    module.tool(add)
    module.tool(read, read_only=True)
    return module


@final
class _CountingBackend:
    """A SQLite backend that counts its commits and the rows they carried.

    The counters change in the store's worker thread, one batch at a time,
    and are read between batches of calls, when every commit has returned.
    """

    def __init__(self, inner: SqliteBackend) -> None:
        self.url = inner.url
        self._inner = inner
        self.commits = 0
        self.rows = 0

    def load_many(self, keys: Sequence[str]) -> list[tuple[int, bytes] | None]:
        """See `SqliteBackend.load_many`."""
        return self._inner.load_many(keys)

    def load_many_with_parts(self, keys: Sequence[str]) -> list[Loaded | None]:
        """See `SqliteBackend.load_many_with_parts`."""
        return self._inner.load_many_with_parts(keys)

    def version_at_once(self, key: str) -> int | None:
        """See `SqliteBackend.version_at_once`."""
        return self._inner.version_at_once(key)

    def versions_many(self, keys: Sequence[str]) -> list[int | None]:
        """See `SqliteBackend.versions_many`."""
        return self._inner.versions_many(keys)

    def commit(self, writes: Sequence[Write], now: float) -> list[Any]:
        """See `SqliteBackend.commit`; counts the commit and its rows."""
        results = self._inner.commit(writes, now)
        self.commits += 1
        self.rows += len(writes)
        return results

    def delete_session(self, session: str) -> int:
        """See `SqliteBackend.delete_session`."""
        return self._inner.delete_session(session)

    def touch(self, keys: Sequence[str], now: float) -> None:
        """See `SqliteBackend.touch`."""
        self._inner.touch(keys, now)

    def sweep(self, cutoff: float) -> int:
        """See `SqliteBackend.sweep`."""
        return self._inner.sweep(cutoff)

    def entries(self, session: str | None, tenant: str | None) -> list[tuple[str, int, int, float]]:
        """See `SqliteBackend.entries`."""
        return self._inner.entries(session, tenant)

    def delete(self, key: str) -> bool:
        """See `SqliteBackend.delete`."""
        return self._inner.delete(key)

    def close(self) -> None:
        """See `SqliteBackend.close`."""
        self._inner.close()


@final
@attrs.frozen
class _Design:
    """One design's store, open for the part that uses it."""

    name: str
    store: StateStore | None
    backend: _CountingBackend | None = None


@asynccontextmanager
async def _designs(directory: Path, part: str) -> AsyncIterator[list[_Design]]:
    """Every design of `DESIGNS`, the SQLite one in a file of its own for `part`."""
    path = directory / f"{part}.db"
    backend = _CountingBackend(await trio.to_thread.run_sync(SqliteBackend, path))
    async with open_batched(backend) as sqlite:
        yield [
            _Design(MEMORY, None),
            _Design(MEMORY_STORE, MemoryStore()),
            _Design(SQLITE, sqlite, backend),
        ]


@asynccontextmanager
async def _runtimes(
    designs: Sequence[_Design], module: ToolModule[Any], config: RuntimeConfig
) -> AsyncIterator[list[Runtime]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(open_runtime([module], config, store=design.store))
            for design in designs
        ]


# ---- the call path ----------------------------------------------------------------


@attrs.define(eq=False)
class _Writes:
    """A design's `add` calls: acknowledged writes per key, failures, rows per commit."""

    name: str
    runtime: Runtime
    names: Sequence[str]
    backend: _CountingBackend | None
    acknowledged: list[int]
    failures: int = 0
    rows_per_commit: dict[int, list[float]] = attrs.field(factory=dict)
    """Callers → rows per commit, one entry per batch (SQLite only)."""

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`."""
        backend = self.backend
        before = (0, 0) if backend is None else (backend.commits, backend.rows)
        batch = await drive(self._call, keys, callers)
        if backend is not None:
            commits, rows = backend.commits - before[0], backend.rows - before[1]
            self.rows_per_commit.setdefault(callers, []).append(rows / max(commits, 1))
        return batch

    async def _call(self, index: int) -> object:
        result = await self.runtime.call_tool(ADD, {"__sessionId": self.names[index]})
        if result.is_error:  # a write that failed was not acknowledged
            self.failures += 1
        else:
            self.acknowledged[index] += 1
        return result


def _call_phases(sizes: Sizes) -> list[Phase]:
    """One caller, then many, on keys drawn at random (the same draw for every design)."""
    phases = []
    for calls, callers in (
        (sizes.durable_light_calls, 1),
        (sizes.durable_calls, sizes.durable_callers),
    ):
        draw = random.Random(f"durable/{callers}")
        keys = tuple(draw.randrange(sizes.durable_keys) for _ in range(calls))
        phases.append(Phase(f"callers={callers}", keys, callers))
    return phases


async def missing_writes(
    store: StateStore, names: Sequence[str], acknowledged: Sequence[int]
) -> int:
    """Writes acknowledged for each key (`names`, `tally` states) that `store` does not hold."""
    durable = Durable(Tally)
    missing = 0
    for name, count in zip(names, acknowledged, strict=True):
        key = ActorKey("tally", ToolContext(name))
        stored = await store.load(key)
        missing += max(0, count - (0 if stored is None else durable.load(stored.blob, key).count))
    return missing


@final
@attrs.frozen
class _CallPath:
    results: Results
    writers: dict[str, _Writes]
    missing: dict[str, int]
    """Durable design → acknowledged writes its store does not hold."""


async def _call_path(sizes: Sizes, directory: Path, progress: Progress) -> _CallPath:
    names = key_names(sizes.durable_keys)
    warm = tuple(range(len(names)))
    async with _designs(directory, "call_path") as designs:
        async with _runtimes(designs, tally_module(), RuntimeConfig()) as runtimes:
            writers = {
                d.name: _Writes(d.name, runtime, names, d.backend, [0] * len(names))
                for d, runtime in zip(designs, runtimes, strict=True)
            }
            for writer in writers.values():  # every key's first state stored
                await writer.batch(warm, min(len(warm), sizes.durable_callers))
            for writer in writers.values():
                writer.rows_per_commit.clear()
            phases = _call_phases(sizes)
            results = await interleave(
                list(writers.values()),
                lambda _round: phases,
                sizes.rounds,
                progress,
                f"{NAME}: call path",
            )
        missing = {
            d.name: await missing_writes(d.store, names, writers[d.name].acknowledged)
            for d in designs
            if d.store is not None
        }
    return _CallPath(results, writers, missing)


def _call_path_figures(part: _CallPath, sizes: Sizes) -> list[Figure]:
    results, figures = part.results, []
    for phase in results[MEMORY]:
        many = phase != "callers=1"
        where = f"keys={sizes.durable_keys}, {phase}"
        for design in DESIGNS:
            batches = results[design][phase]
            figures.append(figure(NAME, f"{design} calls/s, {where}", throughputs(batches), "/s"))
        for design in DURABLE_DESIGNS:
            target = RATIO_TARGET if many and design == SQLITE else None
            paired = ratios(results[design][phase], results[MEMORY][phase])
            figures.append(figure(NAME, f"{design} / {MEMORY}, {where}", paired, "x", target))
        for design in DESIGNS:
            for q in (0.5, 0.99):
                judged = P50_TARGET if design == SQLITE and not many and q == 0.5 else None
                stats = latencies(results[design][phase], q)
                figures.append(figure(NAME, f"{design} p{q * 100:g}, {where}", stats, "µs", judged))
        callers = sizes.durable_callers if many else 1
        per_commit = Stats.of(part.writers[SQLITE].rows_per_commit.get(callers, []))
        figures.append(figure(NAME, f"{SQLITE} rows per commit, {where}", per_commit, ""))
        if many:
            name = f"{SQLITE} acknowledged durable writes/s, {where}"
            writes = throughputs(results[SQLITE][phase])
            figures.append(figure(NAME, name, writes, "/s", WRITES_TARGET))
    for design in DURABLE_DESIGNS:
        failed = part.writers[design].failures
        figures.append(figure(NAME, f"{design} failed writes", failed, "", NONE_TARGET))
        lost = part.missing[design]
        name = f"{design} acknowledged writes missing from the store"
        figures.append(figure(NAME, name, lost, "", NONE_TARGET))
    return figures


# ---- reactivation -------------------------------------------------------------------


@attrs.define(eq=False)
class _Reactivations:
    """A design's first calls on keys whose actors expired; counts states read back wrong."""

    name: str
    runtime: Runtime
    names: Sequence[str]
    expected: Sequence[int] | None
    """Each key's stored count, or None when the design keeps no state across actors."""
    wrong: int = 0
    started: list[float] = attrs.field(factory=list)
    """Per batch: actors started per call (1 when every call reactivated its key)."""

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """Wait (untimed) until every actor expired, then call each key in `keys`."""
        with trio.fail_after(REACTIVATION_TTL * 20 + 5):  # a runtime that never expires is a bug
            while self.runtime.statistics().live_actors:  # noqa: ASYNC110 -- no event for it
                await trio.sleep(REACTIVATION_TTL / 4)
        before = self.runtime.statistics().started
        batch = await drive(self._call, keys, callers)
        self.started.append((self.runtime.statistics().started - before) / len(keys))
        return batch

    async def _call(self, index: int) -> object:
        result = await self.runtime.call_tool(READ, {"__sessionId": self.names[index]})
        if self.expected is not None and result.first_text != str(self.expected[index]):
            self.wrong += 1
        return result


async def _reactivation(
    sizes: Sizes, directory: Path, progress: Progress
) -> tuple[Results, list[_Reactivations]]:
    names = key_names(sizes.durable_reactivation_keys)
    keys = tuple(range(len(names)))
    callers = sizes.durable_callers
    config = RuntimeConfig(ttl=REACTIVATION_TTL)
    async with (
        _designs(directory, "reactivation") as designs,
        _runtimes(designs, tally_module(), config) as runtimes,
    ):
        contenders = []
        for design, runtime in zip(designs, runtimes, strict=True):
            writes = _Writes(design.name, runtime, names, None, [0] * len(names))
            await writes.batch(keys, callers)  # one stored write per key
            expected = None if design.store is None else writes.acknowledged
            contenders.append(_Reactivations(design.name, runtime, names, expected))
        phases = [Phase(f"callers={callers}", keys, callers)]
        results = await interleave(
            contenders, lambda _round: phases, sizes.rounds, progress, f"{NAME}: reactivation"
        )
    return results, contenders


def _reactivation_figures(
    results: Results, contenders: Sequence[_Reactivations], sizes: Sizes
) -> list[Figure]:
    callers = sizes.durable_callers
    where = f"{sizes.durable_reactivation_keys} expired keys, callers={callers}"
    phase = f"callers={callers}"
    figures = []
    for contender in contenders:
        design = contender.name
        rate = throughputs(results[design][phase])
        figures.append(figure(NAME, f"reactivation: {design} first calls/s, {where}", rate, "/s"))
        started = Stats.of(contender.started)
        figures.append(figure(NAME, f"reactivation: {design} actors started per call", started, ""))
        if contender.expected is not None:
            paired = ratios(results[design][phase], results[MEMORY][phase])
            figures.append(figure(NAME, f"reactivation: {design} / {MEMORY}", paired, "x"))
            name = f"reactivation: {design} states read back wrong"
            figures.append(figure(NAME, name, contender.wrong, "", NONE_TARGET))
    return figures


# ---- large state ---------------------------------------------------------------------


@attrs.define(eq=False)
class _Adds:
    """A design's 1 KiB adds to its full (key index 0) or its empty (index 1) content store."""

    name: str
    runtime: Runtime
    added: int = 0
    failures: int = 0

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`."""
        return await drive(self._call, keys, callers)

    async def _call(self, index: int) -> object:
        self.added += 1
        arguments = {
            "__sessionId": (FULL, EMPTY)[index],
            "filename": f"note-{self.added}.md",
            "content": _NOTE,
        }
        result = await self.runtime.call_tool(ADD_CONTENT, arguments)
        if result.is_error:
            self.failures += 1
        return result


_NOTE: Final = prose("note", NOTE_BYTES)


@final
@attrs.frozen
class _LargeState:
    results: Results
    reloads: tuple[float, ...]
    """Seconds of the first call on the full store in a fresh runtime, one per round."""
    searches: tuple[float, ...]
    """Seconds of the first search on the full store in a fresh runtime, one per round."""
    stored_bytes: int
    """What the full store's last write wrote: its header and the item it added."""
    failures: int


async def _reload(store: StateStore, tool: str = LIST_CONTENTS, **arguments: Any) -> float:
    """The first call on the large state in a fresh runtime: it loads the state again."""
    async with open_runtime([content_store], store=store) as runtime:
        began = time.perf_counter()
        result = await runtime.call_tool(tool, {"__sessionId": FULL, **arguments})
        elapsed = time.perf_counter() - began
    if result.is_error:
        msg = f"reloading the large state failed: {result.first_text}"
        raise RuntimeError(msg)
    return elapsed


async def _large_state(sizes: Sizes, directory: Path, progress: Progress) -> _LargeState:
    items = max(1, sizes.durable_large_bytes // ITEM_BYTES)
    fill = [prose(f"item-{n}", ITEM_BYTES) for n in range(items)]
    query = " ".join(fill[0].split()[:2])  # words that occur: the search has hits to quote
    writes = sizes.durable_large_writes
    phases = [Phase(FULL, (0,) * writes, 1), Phase(EMPTY, (1,) * writes, 1)]
    async with _designs(directory, "large_state") as every_design:
        designs = [d for d in every_design if d.name in (MEMORY, SQLITE)]
        sqlite = designs[-1].store
        assert sqlite is not None
        async with _runtimes(designs, content_store, RuntimeConfig()) as runtimes:
            adders = [_Adds(d.name, runtime) for d, runtime in zip(designs, runtimes, strict=True)]
            progress(f"{NAME}: large state: filling {items} items of {_size(ITEM_BYTES)}")
            for runtime in runtimes:
                for number, content in enumerate(fill):
                    arguments = {"__sessionId": FULL, "filename": f"item-{number}.md"}
                    result = await runtime.call_tool(ADD_CONTENT, {**arguments, "content": content})
                    if result.is_error:
                        msg = f"filling the large state failed: {result.first_text}"
                        raise RuntimeError(msg)
            parts, reloads, searches = [], [], []
            for number in range(sizes.rounds):
                label = f"{NAME}: large state: round {number + 1}/{sizes.rounds}"
                parts.append(await interleave(adders, lambda _round: phases, 1, progress, label))
                reloads.append(await _reload(sqlite))
                searches.append(await _reload(sqlite, SEARCH_CONTENT, query=query))
        stored = await sqlite.load(ActorKey("content_store", ToolContext(FULL)), parts=True)
    assert stored is not None
    assert stored.parts  # the items
    last_write = len(stored.blob) + len(list(stored.parts.values())[-1])
    failures = sum(adder.failures for adder in adders)
    return _LargeState(merge(parts), tuple(reloads), tuple(searches), last_write, failures)


def _size(size: int) -> str:
    return f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size / 1024:g} KiB"


def _milliseconds(stats: Stats) -> Stats:
    return Stats(stats.median / 1000, stats.low / 1000, stats.high / 1000, stats.rounds)


def _large_state_figures(part: _LargeState, sizes: Sizes) -> list[Figure]:
    results = part.results
    full = f"{FULL} ({_size(sizes.durable_large_bytes)})"
    add = f"a {_size(NOTE_BYTES)} add_content"
    figures = []
    for phase, where in ((FULL, full), (EMPTY, EMPTY)):
        for design in (MEMORY, SQLITE):
            stats = _milliseconds(latencies(results[design][phase], 0.5))
            figures.append(
                figure(NAME, f"large state: {design} p50 of {add} to the {where}", stats, "ms")
            )
    costs = [
        (s.latency(0.5) - m.latency(0.5)) * 1000
        for s, m in zip(results[SQLITE][FULL], results[MEMORY][FULL], strict=True)
    ]
    name = f"large state: what storing adds to {add} to the {full} (SQLite - memory, p50)"
    figures.append(figure(NAME, name, Stats.of(costs), "ms"))
    name = f"large state: bytes written per write to the {full} (header and item added)"
    figures.append(figure(NAME, name, part.stored_bytes, "B"))
    name = f"large state: bytes written per byte added, {full}"
    figures.append(figure(NAME, name, part.stored_bytes / NOTE_BYTES, "x"))
    reload = Stats.of([seconds * 1000 for seconds in part.reloads])
    name = f"large state: first call after a restart, {full}"
    figures.append(figure(NAME, name, reload, "ms", RESTART_TARGET))
    search = Stats.of([seconds * 1000 for seconds in part.searches])
    name = f"large state: first search after a restart (it builds the index), {full}"
    figures.append(figure(NAME, name, search, "ms"))
    figures.append(figure(NAME, "large state: failed writes", part.failures, "", NONE_TARGET))
    return figures


# ---- a shared store ------------------------------------------------------------------

StoreOpener = Callable[[str], AbstractAsyncContextManager["StateStore"]]
"""A new, empty store of one kind, for the design of this name."""


@attrs.define(eq=False)
class _Timed:
    """A design's calls of one tool, with the process's CPU time around each batch (the
    store's worker thread included)."""

    name: str
    runtime: Runtime
    names: Sequence[str]
    tool: str

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`."""
        began = time.process_time()
        batch = await drive(self._call, keys, callers)
        return attrs.evolve(batch, cpu=time.process_time() - began)

    async def _call(self, index: int) -> object:
        result = await self.runtime.call_tool(self.tool, {"__sessionId": self.names[index]})
        assert not result.is_error, result.first_text
        return result


def _cpu_ratios(numerators: Sequence[Batch], denominators: Sequence[Batch]) -> Stats:
    """CPU per call of one design over another's, round by round."""
    return Stats.of(
        [
            (a.cpu or 0.0) / a.calls / ((b.cpu or math.inf) / b.calls)
            for a, b in zip(numerators, denominators, strict=True)
        ]
    )


def _shared_label(kind: str, shared: bool) -> str:
    return f"{kind}, {'shared' if shared else 'not shared'}"


async def _shared_store(
    sizes: Sizes, kind: str, open_one: StoreOpener, progress: Progress
) -> Results:
    """A read and a write on a store of `kind` told it is shared and not, each on a store
    of its own: what the version check asked before each call costs, one caller and many,
    on live actors."""
    names = key_names(sizes.durable_keys)
    warm = tuple(range(len(names)))
    async with AsyncExitStack() as stack:
        contenders: list[_Timed] = []
        for shared in (False, True):
            label = _shared_label(kind, shared)
            store = await stack.enter_async_context(open_one(label))
            config = RuntimeConfig(shared_store=shared)
            runtime = await stack.enter_async_context(
                open_runtime([tally_module()], config, store=store)
            )
            for tool in (ADD, READ):
                contenders.append(_Timed(f"{label}, {tool}", runtime, names, tool))
        for contender in contenders:  # every key stored and its actor live
            await contender.batch(warm, min(len(warm), sizes.durable_callers))
        phases = _call_phases(sizes)
        return await interleave(
            contenders, lambda _round: phases, sizes.rounds, progress, f"{NAME}: shared {kind}"
        )


def _sqlite_opener(directory: Path) -> StoreOpener:
    @asynccontextmanager
    async def open_one(label: str) -> AsyncIterator[StateStore]:
        path = directory / f"{label.replace(', ', '-').replace(' ', '-')}.db"
        backend = await trio.to_thread.run_sync(SqliteBackend, path)
        async with open_batched(backend) as store:
            yield store

    return open_one


def run_shared_postgres(sizes: Sizes, progress: Progress) -> tuple[list[Figure], tuple[str, ...]]:
    """The shared store's figures on PostgreSQL (a server started for the run, a database
    per design); a note alone when PostgreSQL cannot be started."""
    try:
        from tests._postgres import PostgresServer, _find_bindir
    except ImportError as exc:  # run from outside the checkout, or without pytest
        return [], (f"shared store: PostgreSQL skipped: its test helper is missing ({exc})",)
    bindir = _find_bindir()
    if bindir is None:
        return [], ("shared store: PostgreSQL skipped: it is not installed",)
    progress(f"{NAME}: shared store: starting a PostgreSQL server")
    server = PostgresServer.launch(bindir)
    try:
        labels = (_shared_label(POSTGRES, shared) for shared in (False, True))
        urls = {label: server.url(server.create_database()) for label in labels}
        results = trio.run(
            _shared_store, sizes, POSTGRES, lambda label: open_store(urls[label]), progress
        )
    finally:
        server.destroy()
    return _shared_store_figures(results, sizes, POSTGRES), ()


def _shared_store_figures(results: Results, sizes: Sizes, kind: str) -> list[Figure]:
    figures = []
    shared_label, unshared_label = _shared_label(kind, True), _shared_label(kind, False)
    for tool, what in ((READ, "a read"), (ADD, "a write")):
        for phase in results[f"{shared_label}, {tool}"]:
            where = f"{what}, keys={sizes.durable_keys}, {phase}"
            shared = results[f"{shared_label}, {tool}"][phase]
            unshared = results[f"{unshared_label}, {tool}"][phase]
            paired = _cpu_ratios(shared, unshared)
            name = f"shared store: CPU per call, {shared_label} / {unshared_label}, {where}"
            figures.append(figure(NAME, name, paired, "x"))
            for label, batches in ((shared_label, shared), (unshared_label, unshared)):
                stats = latencies(batches, 0.5)
                figures.append(figure(NAME, f"shared store: {label} p50, {where}", stats, "µs"))
    return figures


# ---- the scenario ---------------------------------------------------------------------


async def _measure(
    sizes: Sizes, directory: Path, progress: Progress
) -> tuple[list[Figure], list[str]]:
    call_path = await _call_path(sizes, directory, progress)
    reactivations, contenders = await _reactivation(sizes, directory, progress)
    large = await _large_state(sizes, directory, progress)
    shared = await _shared_store(sizes, SQLITE, _sqlite_opener(directory), progress)
    partwise_figures, partwise_notes = await run_partwise(sizes, directory, progress)
    figures = [
        *_call_path_figures(call_path, sizes),
        *_reactivation_figures(reactivations, contenders, sizes),
        *_large_state_figures(large, sizes),
        *_shared_store_figures(shared, sizes, SQLITE),
        *partwise_figures,
    ]
    return figures, partwise_notes


def run_durable(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the durable call path, reactivation, a large state, part-wise writes, the peer."""
    with tempfile.TemporaryDirectory(prefix="mcp-actors-durable-") as directory:
        figures, partwise_notes = trio.run(_measure, sizes, Path(directory), progress)
    # Imported here: the partitions' part builds on this module's tally.
    from ._partitions import run_partitions

    partition_figures, partition_notes = run_partitions(sizes, progress)
    shared_figures, shared_notes = run_shared_postgres(sizes, progress)
    peer_figures, peer_notes = run_fastmcp_peer(sizes, progress)
    notes = (
        f"designs: {MEMORY} (no store), {MEMORY_STORE} (the durable path without I/O), "
        f"{SQLITE} (WAL, synchronous=FULL, group commit) in {tempfile.gettempdir()}; "
        "on a tmpfs an fsync costs nothing, so put TMPDIR on a disk",
        "every call of the call path is a write whose reply waits for its commit: the SQLite "
        "calls/s are acknowledged durable writes/s; rows per commit is group commit's batch",
        f"reactivation: actors expire after {REACTIVATION_TTL} s idle; each round waits (untimed) "
        f"until all have, then reads every key once; {MEMORY} starts empty states instead",
        "large state: the content store's items are parts, so a 1 KiB add to a full store writes "
        "that item and the header; the first call after a restart loads and parses every item, "
        "and the first search indexes them",
        "shared store: a design told its store is shared asks each live key's stored "
        "version before every call, as a process sharing its store with others does (SQLite "
        "on the event loop; PostgreSQL one query for the keys asked at once); one not told "
        "asks nothing; CPU per call is this process's, the store's threads included (not "
        "PostgreSQL's server)",
        *shared_notes,
        *partwise_notes,
        *partition_notes,
        *peer_notes,
    )
    every = figures + shared_figures + partition_figures + peer_figures
    return ScenarioResult(NAME, tuple(every), notes)
