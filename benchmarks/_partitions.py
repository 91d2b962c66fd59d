"""Part of scenario ``durable``: acknowledged writes/s on a store split by session over 1, 2
and 4 PostgreSQL partitions, all on this machine.

Each design is a runtime in this process with the ``tally`` module (a counter
per session, every call one versioned write whose reply waits for its commit)
over ``open_store(urls)``: one URL is the plain PostgreSQL store, several a
`actors.store.SplitStore`. The partitions are laid out two ways:

* **one server** — databases on one PostgreSQL server: they share its WAL,
  so every commit of every partition waits for the same log flushes;
* **a server each** — one PostgreSQL server per partition, each with its own
  WAL and fsyncs (on the same disk).

The servers are started for the run (``tests/_postgres.py``: the system's
PostgreSQL, fsync on, data in the temporary directory) and removed after it.
The designs run interleaved, round by round, the same calls each. This
process's CPU per write is reported too: one Python process drives every
partition, and on a small machine it shares the cores with the servers, so
what more partitions can give is bounded by it (see the notes of a run).
Afterwards each store is read back, and every acknowledged write must be in it.
Skipped, with a note, without PostgreSQL.
"""

from __future__ import annotations

import random
import time
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final, final

import attrs
import trio

from actors import RuntimeConfig, open_runtime
from actors.store import open_store

from ._designs import key_names
from ._durable import NAME, NONE_TARGET, _Writes, missing_writes, tally_module
from ._measure import Batch, Phase, Stats, interleave, ratios, throughputs
from ._report import Figure, figure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from actors.store import StateStore

    from ._measure import Progress, Results
    from ._sizes import Sizes

__all__ = ["run_partitions"]

ONE: Final = "1 partition"
LAYOUTS: Final = (
    (ONE, (1,)),
    ("2 partitions, one server", (2,)),
    ("4 partitions, one server", (4,)),
    ("2 partitions, a server each", (1, 1)),
    ("4 partitions, a server each", (1, 1, 1, 1)),
)
"""Each design: its name, and how many of its partitions are databases on each server."""
SERVERS: Final = max(len(layout) for _, layout in LAYOUTS)


@final
@attrs.frozen
class _Writer:
    """A design's writes (the call path's `tally` adds), and this process's CPU per batch."""

    writes: _Writes
    store: StateStore

    @property
    def name(self) -> str:
        """The design."""
        return self.writes.name

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `benchmarks._measure.Contender.batch`; with this process's CPU time."""
        cpu = time.process_time()
        batch = await self.writes.batch(keys, callers)
        return attrs.evolve(batch, cpu=time.process_time() - cpu)


def run_partitions(sizes: Sizes, progress: Progress) -> tuple[list[Figure], tuple[str, ...]]:
    """The partitions' figures and notes; a note alone when PostgreSQL cannot be started."""
    try:
        from tests._postgres import PostgresServer, _find_bindir
    except ImportError as exc:  # run from outside the checkout, or without pytest
        return [], (f"partitions: skipped: the test suite's PostgreSQL helper is missing ({exc})",)
    bindir = _find_bindir()
    if bindir is None:
        return [], (
            "partitions: skipped: PostgreSQL is not installed (apt-get install postgresql)",
        )
    progress(f"{NAME}: partitions: starting {SERVERS} PostgreSQL servers")
    with ExitStack() as stack:
        servers = []
        for _ in range(SERVERS):
            server = PostgresServer.launch(bindir)
            stack.callback(server.destroy)
            servers.append(server)
        urls = [
            [
                server.url(server.create_database())
                for server, count in zip(servers, layout, strict=False)
                for _ in range(count)
            ]
            for _, layout in LAYOUTS
        ]
        measured = trio.run(_measure, sizes, urls, progress)
    return _figures(*measured, sizes), _notes(sizes, bindir.parent.name)


async def _measure(
    sizes: Sizes, urls: Sequence[Sequence[str]], progress: Progress
) -> tuple[Results, list[_Writer], dict[str, int]]:
    names = key_names(sizes.durable_keys)
    draw = random.Random("durable/partitions")
    keys = tuple(draw.randrange(len(names)) for _ in range(sizes.durable_calls))
    phases = [Phase(f"callers={sizes.durable_callers}", keys, sizes.durable_callers)]
    async with _writers(urls, names) as writers:
        results = await interleave(
            writers, lambda _round: phases, sizes.rounds, progress, f"{NAME}: partitions"
        )
        missing = {
            w.name: await missing_writes(w.store, names, w.writes.acknowledged) for w in writers
        }
    return results, writers, missing


@asynccontextmanager
async def _writers(
    urls: Sequence[Sequence[str]], names: Sequence[str]
) -> AsyncIterator[list[_Writer]]:
    async with AsyncExitStack() as stack:
        writers = []
        for (name, _), its_urls in zip(LAYOUTS, urls, strict=True):
            store = await stack.enter_async_context(open_store(its_urls))
            runtime = await stack.enter_async_context(
                open_runtime([tally_module()], RuntimeConfig(), store=store)
            )
            writes = _Writes(name, runtime, names, None, [0] * len(names))
            writers.append(_Writer(writes, store))
        yield writers


def _figures(
    results: Results, writers: Sequence[_Writer], missing: dict[str, int], sizes: Sizes
) -> list[Figure]:
    phase = f"callers={sizes.durable_callers}"
    where = f"{sizes.durable_callers} callers on {sizes.durable_keys} sessions"
    figures = []
    for writer in writers:
        batches = results[writer.name][phase]
        name = f"partitions: acknowledged writes/s, {writer.name}, {where}"
        figures.append(figure(NAME, name, throughputs(batches), "/s"))
        if writer.name != ONE:
            paired = ratios(batches, results[ONE][phase])
            figures.append(figure(NAME, f"partitions: {writer.name} / {ONE}", paired, "x"))
        cpu = Stats.of([(b.cpu or 0.0) / b.calls * 1e6 for b in batches])
        figures.append(
            figure(NAME, f"partitions: this process's CPU per write, {writer.name}", cpu, "µs")
        )
    for writer in writers:
        failed = figure(
            NAME,
            f"partitions: {writer.name} failed writes",
            writer.writes.failures,
            "",
            NONE_TARGET,
        )
        lost = figure(
            NAME,
            f"partitions: {writer.name} acknowledged writes missing from the store",
            missing[writer.name],
            "",
            NONE_TARGET,
        )
        figures += [failed, lost]
    return figures


def _notes(sizes: Sizes, version: str) -> tuple[str, ...]:
    return (
        f"partitions: PostgreSQL {version}, {SERVERS} servers started for the run (fsync on, "
        "data in the temporary directory); 'one server': the partitions are databases of one "
        "server and share its WAL; 'a server each': a server per partition, same disk",
        f"partitions: the tally module, {sizes.durable_calls} writes a batch from "
        f"{sizes.durable_callers} callers in this one process, which drives every partition "
        "and shares the machine's cores with the servers: its CPU per write bounds the scaling",
    )
