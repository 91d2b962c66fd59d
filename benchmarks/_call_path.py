"""Scenario ``call_path``: a warm no-op call through the runtime against its baselines.

For each number of keys, every design is opened and warmed (one call per
key), then each round runs one batch of calls on random keys with one
caller, design after design, then one with many likewise (`paired_rounds`).
Reported per key count: calls per second and CPU time per call of each
design, the runtime's calls per CPU second as a ratio of each baseline's
(paired batch by batch), and latency percentiles.

The ratios are judged by CPU time, not wall-clock time: every design runs
in this one process, so the process's CPU time during a batch is what that
batch cost, however much of the machine other processes take meanwhile —
which wall-clock calls/s are not, on a busy machine.
"""

from __future__ import annotations

import gc
import math
import os
import random
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, final

import attrs
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
from ._measure import (
    Batch,
    Contender,
    Phase,
    Results,
    Stats,
    interleave,
    latencies,
    merge,
    throughputs,
)
from ._pinning import pinned
from ._report import Figure, ScenarioResult, Series, Target, figure

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = [
    "BY_CPU",
    "NAME",
    "CpuTimed",
    "call_path_result",
    "cpu_per_call",
    "cpu_ratios",
    "frozen",
    "measure_call_path",
    "one_core",
    "paired_rounds",
    "run_call_path",
]

NAME: Final = "call_path"
BY_CPU: Final = "by CPU"
"""Names a ratio of CPU time: one design's calls per CPU second over another's (a ratio
without it is of wall-clock calls/s)."""
RATIO_TARGET: Final = Target(">=", 0.6)  # of the bare-channel floor, at every size
P50_TARGET: Final = Target("<=", 50)  # µs, light load
P99_TARGET: Final = Target("<=", 250)  # µs, light load
_RUNTIMES: Final = (RUNTIME, RUNTIME_NO_DEADLINE)
_ORDER: Final = (FLOOR, *_RUNTIMES, *(d for d in DESIGNS if d not in (FLOOR, *_RUNTIMES)))
"""The order the designs run in within a round: the judged pair first, side by side."""


@final
@attrs.frozen
class CpuTimed:
    """A contender whose batches also carry this process's CPU time (`Batch.cpu`).

    Process-wide (``time.process_time``): the CPU of every thread, so that a
    peer whose calls run in threads of its own (pykka) pays for them too.
    """

    inner: Contender
    """The contender measured."""

    @property
    def name(self) -> str:
        """The inner contender's."""
        return self.inner.name

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `benchmarks._measure.Contender.batch`; with the CPU seconds it took."""
        before = time.process_time()
        batch = await self.inner.batch(keys, callers)
        return attrs.evolve(batch, cpu=time.process_time() - before)


def _cpu_per_call(batch: Batch) -> float:
    """Seconds of CPU per call (``nan`` when the batch carries no CPU time or no calls)."""
    if batch.cpu is None or not batch.calls:
        return math.nan
    return batch.cpu / batch.calls


def cpu_per_call(batches: Sequence[Batch]) -> Stats:
    """Microseconds of CPU per call across rounds."""
    return Stats.of([_cpu_per_call(b) * 1e6 for b in batches])


def cpu_ratios(numerators: Sequence[Batch], denominators: Sequence[Batch]) -> Stats:
    """Calls per CPU second of one contender over another's, round by round (same round
    paired): above 1 when the numerator's call costs less CPU."""
    return Stats.of([_cpu_ratio(a, b) for a, b in zip(numerators, denominators, strict=True)])


def _cpu_ratio(numerator: Batch, denominator: Batch) -> float:
    cost = _cpu_per_call(numerator)
    return _cpu_per_call(denominator) / cost if cost else math.inf


def _phases(keys: int, callers: Sequence[int], calls: int) -> list[Phase]:
    """One batch per caller count, on keys drawn at random (the same draw for every design)."""
    phases = []
    for count in callers:
        draw = random.Random(f"{keys}/{count}")
        picks = tuple(draw.randrange(keys) for _ in range(calls))
        phases.append(Phase(f"callers={count}", picks, count))
    return phases


@contextmanager
def frozen() -> Iterator[None]:
    """What lives now out of the garbage collector's sight (`gc.freeze`) until the exit.

    Entered once the contenders are warm, so that a full collection during
    the rounds scans only what the rounds made, not every contender's warm
    actors, tasks and states (a second's work with tens of thousands), which
    would land on whichever batch happened to trigger it — in a fresh process
    on the same design's batch every time.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def one_core() -> Iterator[None]:
    """This process on one core for the block (where the system can pin it), then back.

    Threads handing a call to each other (pykka's caller and actor) cost
    more CPU on two cores than on one, where no sleeping core is woken: so
    with an idle core a call costs more than beside a busy process, unless
    the process never has a second core to use.
    """
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    with pinned({max(os.sched_getaffinity(0))}):
        yield


def _only(phase: Phase) -> Callable[[int], Sequence[Phase]]:
    """Every round's phases: this one alone."""
    return lambda _number: (phase,)


async def paired_rounds(
    contenders: Sequence[Contender],
    phases: Sequence[Phase],
    rounds: int,
    progress: Progress,
    label: str,
) -> Results:
    """`rounds` rounds of every phase, each phase run by every contender in turn before
    the next phase (A, B, C for one caller, then A, B, C for many): the batches a ratio
    pairs are as close in time as they can be, under the same load."""
    parts = []
    for number in range(rounds):
        for phase in phases:
            where = f"{label}: round {number + 1}/{rounds}, {phase.label}"
            parts.append(await interleave(contenders, _only(phase), 1, progress, where))
    return merge(parts)


async def _measure(keys: int, phases: Sequence[Phase], rounds: int, progress: Progress) -> Results:
    names = key_names(keys)
    warm = Phase("warm", tuple(range(keys)), min(keys, 100))
    async with open_designs(names, _ORDER) as designs:
        contenders = [CpuTimed(design) for design in designs]
        progress(f"{NAME}: keys={keys}: warming {len(contenders)} designs")
        for contender in contenders:
            await contender.batch(warm.keys, warm.callers)
        with frozen():
            return await paired_rounds(contenders, phases, rounds, progress, f"{NAME}: keys={keys}")


def measure_call_path(
    call_keys: Sequence[int],
    callers: Sequence[int],
    calls: int,
    rounds: int,
    progress: Progress,
) -> dict[int, Results]:
    """Open, warm and measure every design `rounds` times at each key count.

    For each count, one batch of `calls` calls per caller count in `callers`
    per design per round, the warm designs `frozen`, the process on `one_core`;
    the results by key count.
    """
    with one_core():
        return {
            keys: trio.run(_measure, keys, _phases(keys, callers, calls), rounds, progress)
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
    figures += [
        figure(NAME, f"{design} CPU per call, {where}", cpu_per_call(results[design][phase]), "µs")
        for design in DESIGNS
    ]
    for runtime in _RUNTIMES:
        for baseline in BASELINES:
            target = RATIO_TARGET if baseline == FLOOR else None
            stats = cpu_ratios(results[runtime][phase], results[baseline][phase])
            name = f"{runtime} / {baseline}, {BY_CPU}, {where}"
            figures.append(figure(NAME, name, stats, "x", target))
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
        f"ratios {BY_CPU} are of calls per CPU second, each design's CPU time being this "
        "process's during its batch, the process on one core; each pairs the runtime's "
        "batch with the baseline's next to it in the same round; calls/s and latencies are "
        "wall-clock; latency targets apply at light load (one caller)",
    )
    return ScenarioResult(NAME, tuple(figures), notes, tuple(series))


def run_call_path(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the call path at every key count of `sizes`."""
    per_keys = measure_call_path(
        sizes.call_keys, sizes.call_callers, sizes.calls_per_batch, sizes.rounds, progress
    )
    return call_path_result(per_keys, sizes.call_callers)
