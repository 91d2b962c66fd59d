"""The scenarios, their sizes, and running a selection of them into a `Report`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import attrs

from ._activation import run_activation
from ._call_path import run_call_path
from ._churn import run_churn
from ._cluster import run_cluster
from ._durable import run_durable
from ._embedding import run_embedding
from ._isolation import run_isolation
from ._measure import Progress
from ._memory import run_memory
from ._observer import run_observer
from ._over_mcp import run_over_mcp
from ._peers import run_peers
from ._progress import PlainView, View
from ._report import Failure, Figure, Load, Report, ScenarioResult, load_average
from ._sizes import Sizes
from ._ts_peer import run_ts_peer

__all__ = [
    "PRESETS",
    "SCENARIOS",
    "Scenario",
    "run_scenario",
    "run_suite",
    "stderr_progress",
]


TINY: Final = Sizes(
    name="tiny",
    judged=False,
    rounds=2,
    call_keys=(1, 10),
    call_callers=(1, 10),
    calls_per_batch=100,
    activation_keys=100,
    activation_callers=10,
    activation_latency_keys=20,
    memory_actors=(200,),
    memory_heap_max=200,
    memory_baseline_max=200,
    churn_calls=400,
    churn_keys=10,
    churn_callers=20,
    isolation_contexts=(2, 2, 2),
    isolation_goals=3,
    peer_keys=5,
    peer_calls=40,
    peer_callers=10,
    mcp_rounds=2,
    mcp_sessions=5,
    mcp_light_calls=10,
    mcp_calls=20,
    mcp_callers=5,
    http_seconds=1,
    http_rounds=1,
    http_warm_seconds=0,
    handle_calls=2_000,
    durable_keys=10,
    durable_callers=10,
    durable_light_calls=50,
    durable_calls=200,
    durable_reactivation_keys=50,
    durable_large_bytes=64 * 1024,
    durable_large_writes=3,
    durable_partwise_adds=2,
    fastmcp_install=False,
    fastmcp_rounds=1,
    fastmcp_sessions=5,
    fastmcp_calls=20,
    fastmcp_callers=5,
    fastmcp_appends=2,
    ts_install=False,
    ts_rounds=1,
    ts_stdio_calls=20,
    ts_http_calls=10,
    ts_sessions=5,
    embedding_keys=10,
    embedding_calls=100,
    embedding_callers=10,
    embedding_threads=4,
    embedding_http_sessions=5,
    embedding_http_light_requests=10,
    embedding_http_requests=40,
    embedding_http_clients=5,
    cluster_sessions=4,
    cluster_documents=2,
    cluster_calls=20,
    cluster_callers=4,
    cluster_handover_sessions=20,
    cluster_light_calls=40,
    cluster_light_callers=4,
)
QUICK: Final = Sizes(
    name="quick",
    judged=True,
    rounds=5,
    call_keys=(1, 100, 10_000),
    call_callers=(1, 100),
    calls_per_batch=2_000,
    activation_keys=3_000,
    activation_callers=100,
    activation_latency_keys=500,
    memory_actors=(1_000, 10_000, 100_000),
    memory_heap_max=10_000,
    memory_baseline_max=10_000,
    churn_calls=5_000,
    churn_keys=100,
    churn_callers=100,
    isolation_contexts=(4, 3, 3),
    isolation_goals=5,
    peer_keys=100,
    peer_calls=400,
    peer_callers=100,
    mcp_rounds=40,
    mcp_sessions=100,
    mcp_light_calls=100,
    mcp_calls=300,
    mcp_callers=50,
    http_seconds=3,
    http_rounds=3,
    http_warm_seconds=1,
    handle_calls=200_000,
    durable_keys=100,
    durable_callers=100,
    durable_light_calls=1_000,
    durable_calls=5_000,
    durable_reactivation_keys=2_000,
    durable_large_bytes=1024 * 1024,
    durable_large_writes=10,
    durable_partwise_adds=5,
    fastmcp_install=True,
    fastmcp_rounds=5,
    fastmcp_sessions=100,
    fastmcp_calls=300,
    fastmcp_callers=50,
    fastmcp_appends=4,
    ts_install=True,
    ts_rounds=5,
    ts_stdio_calls=1_000,
    ts_http_calls=300,
    ts_sessions=50,
    embedding_keys=100,
    embedding_calls=3_000,
    embedding_callers=100,
    embedding_threads=8,
    embedding_http_sessions=100,
    embedding_http_light_requests=300,
    embedding_http_requests=2_000,
    embedding_http_clients=100,
    cluster_sessions=8,
    cluster_documents=16,
    cluster_calls=100,
    cluster_callers=8,
    cluster_handover_sessions=300,
    cluster_light_calls=1_000,
    cluster_light_callers=50,
)
FULL: Final = Sizes(
    name="full",
    judged=True,
    rounds=5,
    call_keys=(1, 100, 10_000, 100_000),
    call_callers=(1, 10, 100, 1_000),
    calls_per_batch=10_000,
    activation_keys=20_000,
    activation_callers=100,
    activation_latency_keys=2_000,
    memory_actors=(1_000, 10_000, 100_000, 1_000_000),
    memory_heap_max=100_000,
    memory_baseline_max=100_000,
    churn_calls=50_000,
    churn_keys=1_000,
    churn_callers=200,
    isolation_contexts=(10, 5, 4),
    isolation_goals=10,
    peer_keys=1_000,
    peer_calls=3_000,
    peer_callers=100,
    mcp_rounds=60,
    mcp_sessions=1_000,
    mcp_light_calls=100,
    mcp_calls=2_000,
    mcp_callers=100,
    http_seconds=5,
    http_rounds=5,
    http_warm_seconds=1,
    handle_calls=1_000_000,
    durable_keys=100,
    durable_callers=100,
    durable_light_calls=3_000,
    durable_calls=20_000,
    durable_reactivation_keys=10_000,
    durable_large_bytes=1024 * 1024,
    durable_large_writes=20,
    durable_partwise_adds=10,
    fastmcp_install=True,
    fastmcp_rounds=5,
    fastmcp_sessions=100,
    fastmcp_calls=1_000,
    fastmcp_callers=50,
    fastmcp_appends=10,
    ts_install=True,
    ts_rounds=5,
    ts_stdio_calls=3_000,
    ts_http_calls=1_000,
    ts_sessions=100,
    embedding_keys=1_000,
    embedding_calls=10_000,
    embedding_callers=100,
    embedding_threads=16,
    embedding_http_sessions=1_000,
    embedding_http_light_requests=1_000,
    embedding_http_requests=10_000,
    embedding_http_clients=100,
    cluster_sessions=16,
    cluster_documents=10,
    cluster_calls=300,
    cluster_callers=16,
    cluster_handover_sessions=2_000,
    cluster_light_calls=3_000,
    cluster_light_callers=50,
)
PRESETS: Final = {sizes.name: sizes for sizes in (TINY, QUICK, FULL)}
"""The sizes by name: ``tiny`` (the tests), ``quick`` (the default), ``full``."""

Scenario = Callable[[Sizes, Progress], ScenarioResult]
"""A scenario: run at these sizes, reporting progress lines; what it measured."""


SCENARIOS: Final[Mapping[str, Scenario]] = {
    "call_path": run_call_path,
    "observer": run_observer,
    "activation": run_activation,
    "memory": run_memory,
    "churn": run_churn,
    "isolation": run_isolation,
    "mcp": run_over_mcp,
    "ts_peer": run_ts_peer,
    "durable": run_durable,
    "embedding": run_embedding,
    "peers": run_peers,
    "cluster": run_cluster,
}
"""Every scenario by name, in the order a full run takes them."""


def stderr_progress() -> Progress:
    """Progress lines on stderr, each with the seconds since the start."""
    began = time.perf_counter()

    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f}s] {line}", file=sys.stderr, flush=True)

    return progress


def run_scenario(name: str, scenario: Scenario, sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Run one scenario, timed, with the machine's load around it; a failure is recorded.

    An `Exception` becomes a result with its `Failure` and no figures, so that
    the suite goes on; Ctrl-C (`KeyboardInterrupt`) and exits are not caught.
    """
    before = load_average()
    began = time.perf_counter()
    try:
        result = scenario(sizes, progress)
    except Exception as exc:  # recorded: one broken scenario must not lose the others' figures
        result = ScenarioResult(name, failure=Failure.of(exc))
    if not sizes.judged:
        result = attrs.evolve(result, figures=tuple(_unjudged(f) for f in result.figures))
    return attrs.evolve(
        result, seconds=time.perf_counter() - began, load=Load(before, load_average())
    )


def _unjudged(fig: Figure) -> Figure:
    """`fig` without a verdict, unless its target is a correctness count (any size)."""
    return fig if fig.any_size or fig.target is None else attrs.evolve(fig, judged=False)


def run_suite(
    sizes: Sizes,
    only: Iterable[str] = (),
    progress: Progress | None = None,
    *,
    view: View | None = None,
    kept: Sequence[ScenarioResult] = (),
    planned: Sequence[str] = (),
    saved: Callable[[Report], None] | None = None,
    scenarios: Mapping[str, Scenario] = SCENARIOS,
) -> Report:
    """Run the scenarios named in `only` (every one when empty) at `sizes`.

    `kept` are results of an earlier run (``--resume``, ``--failed``): shown
    in the report, not run again. `planned` is what the whole run was asked
    for (default: `only` with `kept`). After each scenario, `saved` gets the
    report so far, so that a crash or Ctrl-C loses only the scenario it
    stopped. Progress goes to `view` (default: plain lines through
    `progress`, default `stderr_progress`). `scenarios` is the registry the
    names are looked up in, in the order they run.
    """
    chosen = list(only) or [name for name in scenarios if name not in {k.name for k in kept}]
    unknown = [name for name in chosen if name not in scenarios]
    if unknown:
        msg = (
            f"unknown scenario {', '.join(map(repr, unknown))}; choose from {', '.join(scenarios)}"
        )
        raise ValueError(msg)
    watch = view or PlainView(progress or stderr_progress())
    order = list(scenarios)  # the canonical order, whatever order they were asked in
    todo = [name for name in order if name in chosen]
    wanted = list(planned) or _in_order([*chosen, *(k.name for k in kept)], order)
    before = load_average()
    began = time.perf_counter()
    results = {result.name: result for result in kept}

    def report() -> Report:
        ran = [results[name] for name in _in_order(results, order)]
        load = Load(before, load_average())
        return Report(
            sizes.name, tuple(ran), time.perf_counter() - began, load=load, planned=tuple(wanted)
        )

    for number, name in enumerate(todo, 1):
        watch.started(name, number, len(todo))
        results[name] = run_scenario(name, scenarios[name], sizes, watch.line)
        watch.ended(results[name])
        if saved is not None:
            saved(report())
    return report()


def _in_order(names: Iterable[str], order: Sequence[str]) -> list[str]:
    """`names` in `order`, those not in it (a saved run's unknown scenarios) at the end."""
    rank = {name: index for index, name in enumerate(order)}
    return sorted(dict.fromkeys(names), key=lambda name: rank.get(name, len(rank)))
