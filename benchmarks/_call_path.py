"""Scenario ``call_path``: a warm no-op call through the runtime against its baselines.

For each number of keys, every design is opened and warmed (one call per
key), then each round runs, per design, one batch of calls on random keys
with one caller and one with many. Reported per key count: calls per second
of each design, the runtime's throughput as a ratio of each baseline's
(paired round by round), and latency percentiles.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

import trio

from ._designs import (
    BASELINES,
    DESIGNS,
    FLOOR,
    RUNTIME,
    RUNTIME_NO_DEADLINE,
    key_names,
    open_designs,
)
from ._measure import Phase, Results, interleave, latencies, ratios, throughputs
from ._report import Figure, ScenarioResult, Series, Target, figure

if TYPE_CHECKING:
    from ._measure import Progress
    from ._suite import Sizes

__all__ = ["run_call_path"]

NAME: Final = "call_path"
RATIO_TARGET: Final = Target(">=", 0.6)  # of the bare-channel floor, at every key count
P50_TARGET: Final = Target("<=", 50)  # µs, light load
P99_TARGET: Final = Target("<=", 250)  # µs, light load
_RUNTIMES: Final = (RUNTIME, RUNTIME_NO_DEADLINE)


def _phases(keys: int, sizes: Sizes) -> list[Phase]:
    """One batch per caller count, on keys drawn at random (the same draw for every design)."""
    phases = []
    for callers in sizes.call_callers:
        draw = random.Random(f"{keys}/{callers}")
        calls = tuple(draw.randrange(keys) for _ in range(sizes.calls_per_batch))
        phases.append(Phase(f"callers={callers}", calls, callers))
    return phases


async def _measure(keys: int, sizes: Sizes, progress: Progress) -> Results:
    names = key_names(keys)
    warm = Phase("warm", tuple(range(keys)), min(keys, 100))
    async with open_designs(names) as contenders:
        progress(f"{NAME}: keys={keys}: warming {len(contenders)} designs")
        for contender in contenders:
            await contender.batch(warm.keys, warm.callers)
        phases = _phases(keys, sizes)
        return await interleave(
            contenders, lambda _round: phases, sizes.rounds, progress, f"{NAME}: keys={keys}"
        )


def _figures(keys: int, callers: int, results: Results) -> list[Figure]:
    phase = f"callers={callers}"
    where = f"keys={keys}, callers={callers}"
    light = callers == 1
    figures = [
        figure(NAME, f"{design} calls/s, {where}", throughputs(results[design][phase]), "/s")
        for design in DESIGNS
    ]
    for runtime in _RUNTIMES:
        for baseline in BASELINES:
            target = RATIO_TARGET if baseline == FLOOR else None
            stats = ratios(results[runtime][phase], results[baseline][phase])
            figures.append(figure(NAME, f"{runtime} / {baseline}, {where}", stats, "x", target))
    for design in DESIGNS if light else (*_RUNTIMES, FLOOR):
        for q, target in ((0.5, P50_TARGET), (0.99, P99_TARGET)):
            judged = target if light and design in _RUNTIMES else None
            stats = latencies(results[design][phase], q)
            figures.append(figure(NAME, f"{design} p{q * 100:g}, {where}", stats, "µs", judged))
    return figures


def _latency_series(results: Results, keys: int) -> list[Series]:
    return [
        Series(
            "latency",
            f"{design}, keys={keys}",
            (),
            tuple(
                latency * 1e6
                for batch in results[design]["callers=1"]
                for latency in batch.latencies
            ),
        )
        for design in DESIGNS
    ]


def _throughput_series(per_keys: dict[int, Results], callers: int) -> list[Series]:
    keys = tuple(sorted(per_keys))
    return [
        Series(
            "throughput",
            f"{design}, callers={callers}",
            tuple(float(k) for k in keys),
            tuple(throughputs(per_keys[k][design][f"callers={callers}"]).median for k in keys),
        )
        for design in DESIGNS
    ]


def run_call_path(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the call path at every key count of `sizes`."""
    per_keys: dict[int, Results] = {}
    for keys in sizes.call_keys:
        per_keys[keys] = trio.run(_measure, keys, sizes, progress)
    figures: list[Figure] = []
    for keys, results in per_keys.items():
        for callers in sizes.call_callers:
            figures += _figures(keys, callers, results)
    plotted = sizes.call_keys[min(1, len(sizes.call_keys) - 1)]
    series = _latency_series(per_keys[plotted], plotted) if 1 in sizes.call_callers else []
    series += _throughput_series(per_keys, max(sizes.call_callers))
    notes = (
        "ratios pair the runtime's round with the baseline's round of the same number; "
        "latency targets apply at light load (one caller)",
    )
    return ScenarioResult(NAME, tuple(figures), notes, tuple(series))
