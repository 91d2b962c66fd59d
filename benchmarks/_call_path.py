"""Scenario ``call_path``: a warm no-op call through the runtime against its baselines.

For each number of keys, every design is opened and warmed (one call per
key), then each round runs, per design, one batch of calls on random keys
with one caller and one with many. Reported per key count: calls per second
of each design, the runtime's throughput as a ratio of each baseline's
(paired round by round), and latency percentiles.
"""

from __future__ import annotations

import gc
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
    from collections.abc import Mapping, Sequence

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["NAME", "call_path_result", "measure_call_path", "run_call_path"]

NAME: Final = "call_path"
RATIO_TARGET: Final = Target(">=", 0.6)  # of the bare-channel floor, at every key count
P50_TARGET: Final = Target("<=", 50)  # µs, light load
P99_TARGET: Final = Target("<=", 250)  # µs, light load
_RUNTIMES: Final = (RUNTIME, RUNTIME_NO_DEADLINE)


def _phases(keys: int, callers: Sequence[int], calls: int) -> list[Phase]:
    """One batch per caller count, on keys drawn at random (the same draw for every design)."""
    phases = []
    for count in callers:
        draw = random.Random(f"{keys}/{count}")
        picks = tuple(draw.randrange(keys) for _ in range(calls))
        phases.append(Phase(f"callers={count}", picks, count))
    return phases


async def _measure(
    keys: int, phases: Sequence[Phase], rounds: int, progress: Progress, freeze: bool
) -> Results:
    names = key_names(keys)
    warm = Phase("warm", tuple(range(keys)), min(keys, 100))
    async with open_designs(names) as contenders:
        progress(f"{NAME}: keys={keys}: warming {len(contenders)} designs")
        for contender in contenders:
            await contender.batch(warm.keys, warm.callers)
        if freeze:
            gc.collect()
            gc.freeze()
        try:
            return await interleave(
                contenders, lambda _round: phases, rounds, progress, f"{NAME}: keys={keys}"
            )
        finally:
            if freeze:
                gc.unfreeze()


def measure_call_path(
    call_keys: Sequence[int],
    callers: Sequence[int],
    calls: int,
    rounds: int,
    progress: Progress,
    *,
    freeze: bool = False,
) -> dict[int, Results]:
    """Open, warm and measure every design `rounds` times at each key count.

    For each count, one batch of `calls` calls per caller count in `callers`
    per design per round; the results by key count. With `freeze`, what
    lives once the designs are warm (their actors, tasks and states) is moved
    out of the garbage collector's sight (`gc.freeze`) for the rounds, so that
    a full collection only scans what the rounds made: for processes that
    run one round each, whose collections fall at the same point every time.
    """
    return {
        keys: trio.run(_measure, keys, _phases(keys, callers, calls), rounds, progress, freeze)
        for keys in call_keys
    }


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


def _throughput_series(per_keys: Mapping[int, Results], callers: int) -> list[Series]:
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


def _callers_series(results: Results, keys: int, callers: Sequence[int]) -> list[Series]:
    return [
        Series(
            "callers",
            f"{design}, keys={keys}",
            tuple(float(c) for c in callers),
            tuple(throughputs(results[design][f"callers={c}"]).median for c in callers),
        )
        for design in DESIGNS
    ]


def call_path_result(per_keys: Mapping[int, Results], callers: Sequence[int]) -> ScenarioResult:
    """The scenario's figures, notes and chart data from `measure_call_path`'s results."""
    figures: list[Figure] = []
    for keys, results in per_keys.items():
        for count in callers:
            figures += _figures(keys, count, results)
    call_keys = list(per_keys)
    plotted = call_keys[min(1, len(call_keys) - 1)]
    series = _latency_series(per_keys[plotted], plotted) if 1 in callers else []
    series += _throughput_series(per_keys, max(callers))
    if len(callers) > 1:
        most = max(call_keys)
        series += _callers_series(per_keys[most], most, sorted(callers))
    notes = (
        "ratios pair the runtime's round with the baseline's round of the same number; "
        "latency targets apply at light load (one caller)",
    )
    return ScenarioResult(NAME, tuple(figures), notes, tuple(series))


def run_call_path(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the call path at every key count of `sizes`."""
    per_keys = measure_call_path(
        sizes.call_keys, sizes.call_callers, sizes.calls_per_batch, sizes.rounds, progress
    )
    return call_path_result(per_keys, sizes.call_callers)
