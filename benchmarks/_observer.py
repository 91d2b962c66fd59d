"""Scenario ``observer``: what watching the runtime costs a call.

Three runtimes serve the same no-op call on the same keys, interleaved round
by round in one process:

* **no observer** — the runtime as embedded without telemetry: no timestamps,
  no records (the seam's cost when nobody listens is one ``is None`` test);
* **empty observer** — an `Observer` that does nothing: the seam itself, its
  timestamps and `CallRecord`s;
* **Prometheus** — `actors.telemetry.PrometheusMetrics`, what ``serve
  --metrics`` installs (skipped, with a note, without prometheus-client).

Reported: calls/s of each with one caller and with many, and each observed
runtime's throughput as a ratio of the unobserved one, paired round by
round. The issue's target: metrics cost at most 10 % at 100 callers.
"""

from __future__ import annotations

import importlib.util
import random
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Final

import trio

from actors import Observer, open_runtime

from ._baselines import bench_module
from ._designs import key_names, runtime_call
from ._measure import CallContender, Phase, Results, interleave, ratios, throughputs
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from ._measure import Progress
    from ._suite import Sizes

__all__ = ["EMPTY", "NONE", "PROMETHEUS", "run_observer"]

NAME: Final = "observer"
NONE: Final = "no observer"
EMPTY: Final = "empty observer"
PROMETHEUS: Final = "Prometheus metrics"
KEYS: Final = 100
METRICS_TARGET: Final = Target(">=", 0.9)  # of the unobserved runtime, with many callers


def _observers() -> dict[str, Observer | None]:
    observers: dict[str, Observer | None] = {NONE: None, EMPTY: Observer()}
    if importlib.util.find_spec("prometheus_client") is not None:
        from actors.telemetry import PrometheusMetrics

        observers[PROMETHEUS] = PrometheusMetrics()
    return observers


def _phases(sizes: Sizes) -> list[Phase]:
    draw = random.Random(NAME)
    phases = []
    for callers in sizes.call_callers:
        calls = tuple(draw.randrange(KEYS) for _ in range(sizes.calls_per_batch))
        phases.append(Phase(f"callers={callers}", calls, callers))
    return phases


async def _measure(sizes: Sizes, progress: Progress) -> Results:
    names = key_names(KEYS)
    async with AsyncExitStack() as stack:
        contenders = []
        for label, observer in _observers().items():
            runtime = await stack.enter_async_context(
                open_runtime([bench_module()], observer=observer)
            )
            contenders.append(CallContender(label, runtime_call(runtime, names)))
        warm = tuple(range(KEYS))
        for contender in contenders:
            await contender.batch(warm, 10)
        phases = _phases(sizes)
        return await interleave(contenders, lambda _round: phases, sizes.rounds, progress, NAME)


def _figures(results: Results, callers: int, many: int) -> list[Figure]:
    phase = f"callers={callers}"
    where = f"keys={KEYS}, callers={callers}"
    figures = [
        figure(NAME, f"{label} calls/s, {where}", throughputs(results[label][phase]), "/s")
        for label in results
    ]
    for label in results:
        if label != NONE:
            target = METRICS_TARGET if label == PROMETHEUS and callers == many else None
            stats = ratios(results[label][phase], results[NONE][phase])
            figures.append(figure(NAME, f"{label} / {NONE}, {where}", stats, "x", target))
    return figures


def run_observer(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the call path without an observer, with an empty one and with metrics."""
    results = trio.run(_measure, sizes, progress)
    many = max(sizes.call_callers)
    figures = [f for callers in sizes.call_callers for f in _figures(results, callers, many)]
    notes = ["ratios pair each observed runtime's round with the unobserved one's"]
    if PROMETHEUS not in results:
        notes.append("Prometheus skipped: pip install 'mcp-actors[metrics]'")
    return ScenarioResult(NAME, tuple(figures), tuple(notes))
