"""The measuring loop every scenario shares, and the statistics of its rounds.

A *contender* is one design under test (the runtime, a baseline, a peer). It
runs a *batch*: a sequence of keyed calls spread over some number of
concurrent callers, each call timed on its own. `interleave` runs every
contender's batches round by round — A, B, C, A, B, C — so that drift of the
machine (turbo, other load, the garbage collector's mood) touches all of them
alike, and the spread across rounds says how far a median can be trusted.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, final

import attrs
import trio

__all__ = [
    "Batch",
    "CallContender",
    "Contender",
    "Phase",
    "Progress",
    "Stats",
    "ThreadContender",
    "drive",
    "interleave",
    "latencies",
    "merge",
    "percentile",
    "ratios",
    "throughputs",
]

Progress = Callable[[str], None]
"""Where a scenario reports what it is doing (one short line at a time)."""

KeyedCall = Callable[[int], Awaitable[object]]
"""One call of a contender for the key with this index."""


@final
@attrs.frozen
class Batch:
    """What one contender did with one sequence of calls."""

    calls: int
    """Calls made (and answered)."""
    elapsed: float
    """Wall-clock seconds from the first call to the last reply."""
    latencies: tuple[float, ...]
    """Seconds each call took, caller-side, in call order."""
    cpu: float | None = None
    """CPU seconds the serving process spent on the batch, when a contender can tell."""

    @property
    def throughput(self) -> float:
        """Calls per second."""
        return self.calls / self.elapsed if self.elapsed > 0 else math.inf

    def latency(self, q: float) -> float:
        """The `q`-quantile of the latencies, in seconds (``q`` in 0..1)."""
        return percentile(sorted(self.latencies), q)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-quantile of already sorted values (``nan`` when empty)."""
    if not ordered:
        return math.nan
    rank = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


@final
@attrs.frozen
class Stats:
    """The median of some rounds and their spread."""

    median: float
    """The median across rounds."""
    low: float
    """The smallest round."""
    high: float
    """The largest round."""
    rounds: int
    """How many rounds."""

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        """Summarise `values`, one per round."""
        if not values:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(statistics.median(values), min(values), max(values), len(values))


@final
@attrs.frozen
class Phase:
    """One batch each contender runs in a round: a label, the keys to call, the callers."""

    label: str
    """Names the batch in the results (``callers=1``, ``first``, ``warm``)."""
    keys: tuple[int, ...]
    """The key index of each call, in order."""
    callers: int
    """Concurrent callers sharing the calls round-robin."""


class Contender(Protocol):
    """A design under test."""

    @property
    def name(self) -> str:
        """Its label in figures."""
        ...

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """Make one call per entry of `keys` with `callers` concurrent callers."""
        ...


async def drive(call: KeyedCall, keys: Sequence[int], callers: int) -> Batch:
    """Run `call` once per key from `callers` concurrent trio tasks, timing each call.

    Caller ``c`` takes calls ``c, c + callers, c + 2 * callers, ...`` in order.
    """
    latencies = [0.0] * len(keys)
    clock = time.perf_counter

    async def caller(first: int) -> None:
        for index in range(first, len(keys), callers):
            began = clock()
            await call(keys[index])
            latencies[index] = clock() - began

    began = clock()
    async with trio.open_nursery() as nursery:
        for first in range(min(callers, len(keys))):
            nursery.start_soon(caller, first)
    return Batch(len(keys), clock() - began, tuple(latencies))


@final
@attrs.frozen
class CallContender:
    """A trio-native contender: an async keyed call driven by `drive`."""

    name: str
    """Its label in figures."""
    call: KeyedCall = attrs.field(repr=False)
    """One call for a key index."""

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`."""
        return await drive(self.call, keys, callers)


@final
@attrs.frozen
class ThreadContender:
    """A blocking contender (Ray, pykka), run in a worker thread so trio stays responsive."""

    name: str
    """Its label in figures."""
    run: Callable[[Sequence[int], int], Batch] = attrs.field(repr=False)
    """The blocking batch: keys and callers in, a `Batch` out."""

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`."""
        return await trio.to_thread.run_sync(self.run, keys, callers)


Results = dict[str, dict[str, list[Batch]]]
"""contender name → phase label → one batch per round."""


async def interleave(
    contenders: Sequence[Contender],
    phases: Callable[[int], Sequence[Phase]],
    rounds: int,
    progress: Progress,
    label: str,
) -> Results:
    """Run `rounds` rounds; in each, every contender in turn runs the round's phases.

    `phases(round)` gives the batches of a round (fresh keys per round, for
    instance); each contender runs them in order before the next contender.
    Collecting the young generations before each batch (not timed) keeps
    one contender's garbage from being collected on the next one's time; a
    full collection would take seconds once a hundred thousand actors live.
    """
    results: Results = {c.name: {} for c in contenders}
    for number in range(rounds):
        progress(f"{label}: round {number + 1}/{rounds}" if rounds > 1 else label)
        plan = phases(number)
        for contender in contenders:
            for phase in plan:
                gc.collect(1)
                batch = await contender.batch(phase.keys, phase.callers)
                results[contender.name].setdefault(phase.label, []).append(batch)
    return results


def merge(parts: Sequence[Results]) -> Results:
    """Results of consecutive `interleave` runs as one (the rounds in order)."""
    merged: Results = {}
    for part in parts:
        for name, phases in part.items():
            for label, batches in phases.items():
                merged.setdefault(name, {}).setdefault(label, []).extend(batches)
    return merged


def throughputs(batches: Sequence[Batch]) -> Stats:
    """Calls per second across rounds."""
    return Stats.of([b.throughput for b in batches])


def latencies(batches: Sequence[Batch], q: float) -> Stats:
    """The `q`-quantile latency of each round, in microseconds, across rounds."""
    return Stats.of([b.latency(q) * 1e6 for b in batches])


def ratios(numerators: Sequence[Batch], denominators: Sequence[Batch]) -> Stats:
    """Throughput of one contender over another's, round by round (same round paired)."""
    return Stats.of(
        [a.throughput / b.throughput for a, b in zip(numerators, denominators, strict=True)]
    )
