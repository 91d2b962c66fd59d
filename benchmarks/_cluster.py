"""Scenario ``cluster``: what shards on Ray buy on this machine, and what the Ray hop costs.

A local Ray (``num_cpus=2``) runs `actors.cluster` shards over the ``memory``
store (each session lives on one shard, so nothing needs sharing here).
Callers in this process, one thread each, call through `Cluster.call`:

* **heavy** — ``content_store__search_content`` over a session holding a few
  hundred KB of documents: CPU-bound in the shard, the case more shards are
  for. Reported: aggregate calls/s with 1 shard and with 2, and their ratio
  (target at least 1.6x on 2 cores);
* **light** — ``planning__list_goals``: the cost of the hop itself, against
  the same calls through `Runtime.call` in this process;
* **handover** — with live sessions on 2 shards over one SQLite file, a shard
  added then removed: how long each change of membership takes, how many
  sessions it moves, and the first call of a moved session (which loads its
  state on its new owner) against a call to a live one.

Skipped, with a note, without Ray (the ``cluster`` extra).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib.util
import itertools
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from actors import open_runtime
from actors.modules import planning
from protocol import shard_for

from ._measure import Stats
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from collections.abc import Callable

    from actors import Runtime
    from actors.cluster import Cluster

    from ._measure import Progress
    from ._suite import Sizes

__all__ = ["run_cluster"]

NAME: Final = "cluster"
MODULES: Final = ("actors.modules:planning", "actors.modules:content_store")
SCALE_TARGET: Final = Target(">=", 1.6)
POSTGRES: Final = "PostgreSQL"
POSTGRES_VARIABLE: Final = "MCP_ACTORS_BENCH_POSTGRES"
"""A libpq URL of a database the benchmark may write to (its ``actor_state`` table)."""
T = TypeVar("T")
_WORDS: Final = [
    "actor",
    "shard",
    "session",
    "state",
    "trio",
    "ray",
    "store",
    "write",
    "read",
    "owner",
    "key",
    "call",
]


def _document(number: int, size: int) -> str:
    words = [_WORDS[(number * 7 + n * 3) % len(_WORDS)] for n in range(size // 6)]
    return " ".join(words)


def _call(tool: str, session: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments, "_meta": {"sessionId": session}}


def _search(session: str) -> dict[str, Any]:
    return _call("content_store__search_content", session, query="shard owner write")


def _listing(session: str) -> dict[str, Any]:
    return _call("planning__list_goals", session)


def _fill(cluster: Cluster, sessions: list[str], sizes: Sizes) -> None:
    """Each session's store: `cluster_documents` documents of 32 KB."""
    for session in sessions:
        for number in range(sizes.cluster_documents):
            add = _call(
                "content_store__add_content",
                session,
                filename=f"doc-{number}.txt",
                content=_document(number, 32 * 1024),
            )
            result = cluster.call(add)
            assert not result.is_error, result.first_text


def _rate(
    call: Callable[[dict[str, Any]], object], calls: list[dict[str, Any]], callers: int
) -> float:
    """Calls per second of `calls` spread over `callers` threads."""
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(callers) as pool:
        for _ in pool.map(call, calls):
            pass
    return len(calls) / (time.perf_counter() - began)


def _sessions(count: int) -> list[str]:
    return [f"bench-{n}" for n in range(count)]


def _balanced_sessions(count: int) -> list[str]:
    """`count` sessions, half of them on each of two shards.

    A few sessions hashed onto two shards split unevenly (8 split 5 and 3 with the
    plain names), and the busier shard would cap the 2-shard run at 8/5 of the
    1-shard one whatever the shards can do: the scaling figure is about compute.
    """
    shards = ("shard-0", "shard-1")
    chosen: dict[str, list[str]] = {shard: [] for shard in shards}
    names = (f"bench-{n}" for n in itertools.count())
    while sum(map(len, chosen.values())) < count:
        session = next(names)
        placed = chosen[shard_for(session, shards)]
        if len(placed) < (count + 1) // 2:
            placed.append(session)
    return [s for pair in itertools.zip_longest(*chosen.values()) for s in pair if s]


def _measure_shards(sizes: Sizes, progress: Progress) -> dict[int, tuple[list[float], list[float]]]:
    """Heavy and light calls/s per round, by shard count (1 and 2), rounds interleaved.

    Both clusters are up at once (an idle shard costs no CPU), and each round
    runs one then the other, so a noisy moment on this shared machine falls on
    both alike and the ratio pairs like with like.
    """
    from actors.cluster import open_cluster

    sessions = _balanced_sessions(sizes.cluster_sessions)
    searches = [_search(sessions[n % len(sessions)]) for n in range(sizes.cluster_calls)]
    listings = [_listing(sessions[n % len(sessions)]) for n in range(sizes.cluster_calls)]
    measured: dict[int, tuple[list[float], list[float]]] = {1: ([], []), 2: ([], [])}
    with contextlib.ExitStack() as stack:
        clusters = {
            shards: stack.enter_context(open_cluster(MODULES, shards=shards, state="memory"))
            for shards in measured
        }
        for shards, cluster in clusters.items():
            progress(f"{NAME}: {shards} shard(s): filling {len(sessions)} sessions")
            _fill(cluster, sessions, sizes)
            _rate(cluster.call, searches[: len(sessions)], sizes.cluster_callers)  # warm
        for number in range(sizes.rounds):
            progress(f"{NAME}: 1 and 2 shards: round {number + 1}")
            for shards, cluster in clusters.items():
                heavy, light = measured[shards]
                heavy.append(_rate(cluster.call, searches, sizes.cluster_callers))
                light.append(_rate(cluster.call, listings, 1))
    return measured


def _goal(session: str) -> dict[str, Any]:
    return _call("planning__create_goal", session, goal="handed over")


def _timed(call: Callable[[], T]) -> tuple[T, float]:
    """What `call` returns, and the seconds it took."""
    began = time.perf_counter()
    value = call()
    return value, time.perf_counter() - began


def _first_calls(cluster: Cluster, sessions: list[str]) -> float:
    """Mean seconds of one call to each of `sessions`, one after the other."""
    _, seconds = _timed(lambda: [cluster.call(_listing(s)) for s in sessions])
    return seconds / max(len(sessions), 1)


def _measure_handover(sizes: Sizes, progress: Progress) -> dict[str, list[float]]:
    """Per round: seconds to add and to remove a shard, sessions moved, calls after."""
    from actors.cluster import open_cluster

    sessions = _sessions(sizes.cluster_handover_sessions)
    measured: dict[str, list[float]] = {}

    def keep(name: str, value: float) -> None:
        measured.setdefault(name, []).append(value)

    with tempfile.TemporaryDirectory(prefix="mcp-actors-handover-") as directory:
        state = f"sqlite:///{Path(directory) / 'state.db'}"
        with open_cluster(MODULES, shards=2, state=state) as cluster:
            progress(f"{NAME}: handover: {len(sessions)} live sessions")
            _rate(cluster.call, [_goal(s) for s in sessions], sizes.cluster_callers)
            for number in range(sizes.rounds):
                progress(f"{NAME}: handover: round {number + 1}")
                before = {s: cluster.shard_of(s) for s in sessions}
                added, seconds = _timed(cluster.add_shard)
                keep("add", seconds)
                moved = [s for s in sessions if cluster.shard_of(s) != before[s]]
                stayed = [s for s in sessions if cluster.shard_of(s) == before[s]]
                keep("moved", len(moved))
                keep("first call, moved", _first_calls(cluster, moved))
                keep("call, stayed", _first_calls(cluster, stayed[: len(moved)]))
                keep("remove", _timed(functools.partial(cluster.remove_shard, added))[1])
                # Every session live again, for the next round to hand over as many.
                _rate(cluster.call, [_listing(s) for s in sessions], sizes.cluster_callers)
    return measured


async def _writes_per_second(url: str, sizes: Sizes) -> list[float]:
    """Acknowledged durable writes/s on the store `url`, in process, one round each.

    ``durable_callers`` callers append goals to ``durable_keys`` sessions: every
    call is one versioned write. What one store takes from every shard together
    bounds a cluster (the model in docs/performance.md).
    """
    from actors.store import open_store

    sessions = _sessions(sizes.durable_keys)
    calls = [_goal(sessions[n % len(sessions)]) for n in range(sizes.durable_light_calls)]
    rates = []
    async with open_store(url) as store, open_runtime([planning], store=store) as runtime:
        for _ in range(sizes.rounds):
            began = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for lane in range(sizes.durable_callers):
                    nursery.start_soon(_call_all, runtime, calls[lane :: sizes.durable_callers])
            rates.append(len(calls) / (time.perf_counter() - began))
    return rates


async def _call_all(runtime: Runtime, calls: list[dict[str, Any]]) -> None:
    for call in calls:
        result = await runtime.call(call)
        assert not result.is_error, result.first_text


async def _in_process(sizes: Sizes) -> list[float]:
    """planning__list_goals through `Runtime.call` here, one caller: the hop's baseline."""
    sessions = _sessions(sizes.cluster_sessions)
    rates = []
    async with open_runtime([planning]) as runtime:
        for _ in range(sizes.rounds):
            began = time.perf_counter()
            for n in range(sizes.cluster_calls):
                await runtime.call(_listing(sessions[n % len(sessions)]))
            rates.append(sizes.cluster_calls / (time.perf_counter() - began))
    return rates


def _figures(
    per_shards: dict[int, tuple[list[float], list[float]]], local: list[float], sizes: Sizes
) -> list[Figure]:
    where = f"{sizes.cluster_sessions} sessions, {sizes.cluster_callers} callers"
    figures = []
    for shards, (heavy, light) in per_shards.items():
        figures.append(
            figure(NAME, f"heavy search calls/s, {shards} shard(s), {where}", Stats.of(heavy), "/s")
        )
        figures.append(
            figure(
                NAME,
                f"light calls/s through a shard, {shards} shard(s), 1 caller",
                Stats.of(light),
                "/s",
            )
        )
    one, two = per_shards[1][0], per_shards[2][0]
    scaled = Stats.of([b / a for a, b in zip(one, two, strict=True)])
    figures.append(
        figure(NAME, f"heavy search, 2 shards / 1 shard, {where}", scaled, "x", SCALE_TARGET)
    )
    figures.append(figure(NAME, "light calls/s in process, 1 caller", Stats.of(local), "/s"))
    hop = Stats.of(
        [1e6 / far - 1e6 / near for far, near in zip(per_shards[1][1], local, strict=True)]
    )
    figures.append(
        figure(NAME, "the Ray hop per call (through a shard - in process), 1 caller", hop, "µs")
    )
    return figures


def run_cluster(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure 1 and 2 shards on a local Ray, and the hop, when Ray is installed."""
    if importlib.util.find_spec("ray") is None:
        return ScenarioResult(NAME, notes=("skipped: needs Ray (pip install -e '.[cluster]')",))
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        per_shards = _measure_shards(sizes, progress)
        handover = _measure_handover(sizes, progress)
    finally:
        ray.shutdown()
    local = trio.run(_in_process, sizes)
    writes = _store_rates(sizes, progress)
    notes = (
        f"local Ray, num_cpus=2; shards over the memory store; {sizes.cluster_documents} "
        "documents of 32 KB per session; callers are threads of this process calling "
        "Cluster.call (ray.get)",
        f"handover: {sizes.cluster_handover_sessions} live planning sessions on 2 shards over "
        "one SQLite file; per round a third shard is added, then removed; calls one at a time",
        f"store writes: in process, {sizes.durable_callers} callers on {sizes.durable_keys} "
        f"sessions; PostgreSQL when {POSTGRES_VARIABLE} names a database to use "
        f"({'measured' if POSTGRES in writes else 'not set: skipped'})",
    )
    where = f"{sizes.durable_callers} callers, in process"
    figures = [
        *_figures(per_shards, local, sizes),
        *_handover_figures(handover, sizes),
        *(
            figure(NAME, f"store: acknowledged writes/s, {store}, {where}", Stats.of(rates), "/s")
            for store, rates in writes.items()
        ),
    ]
    return ScenarioResult(NAME, tuple(figures), notes)


def _store_rates(sizes: Sizes, progress: Progress) -> dict[str, list[float]]:
    """Writes/s on SQLite, and on PostgreSQL when the environment names a database."""
    rates = {}
    with tempfile.TemporaryDirectory(prefix="mcp-actors-store-") as directory:
        progress(f"{NAME}: store writes: SQLite")
        url = f"sqlite:///{Path(directory) / 'state.db'}"
        rates["SQLite"] = trio.run(_writes_per_second, url, sizes)
    postgres = os.environ.get(POSTGRES_VARIABLE)
    if postgres:
        progress(f"{NAME}: store writes: PostgreSQL")
        rates[POSTGRES] = trio.run(_writes_per_second, postgres, sizes)
    return rates


def _handover_figures(measured: dict[str, list[float]], sizes: Sizes) -> list[Figure]:
    live = f"{sizes.cluster_handover_sessions} live sessions"
    ms = {name: Stats.of([v * 1e3 for v in measured[name]]) for name in measured}
    return [
        figure(NAME, f"handover: add a 3rd shard (starts its process), {live}", ms["add"], "ms"),
        figure(NAME, f"handover: remove it again, {live}", ms["remove"], "ms"),
        figure(
            NAME, f"handover: sessions moved by one change, {live}", Stats.of(measured["moved"]), ""
        ),
        figure(
            NAME,
            "handover: first call of a moved session (loads its state)",
            ms["first call, moved"],
            "ms",
        ),
        figure(NAME, "handover: call of a session that stayed", ms["call, stayed"], "ms"),
    ]
