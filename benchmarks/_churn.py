"""Scenario ``churn``: a TTL near zero under load, so actors stop and start all the time.

Many callers call `whoami` on random keys of a runtime whose actors expire
after 1 ms idle, so that calls keep arriving at actors in the middle of
stopping. Every reply is checked: a call with no reply (within a generous
deadline) is lost, a reply naming another key is wrong. Two live actors for
one key are looked for twice: the runtime's own counter, and `LiveStates`,
which the states join when created and leave in their ``on_stop`` hook. The
same load on a runtime with a long TTL, interleaved, gives the cost of churn.
"""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Final

import attrs
import trio

from actors import RuntimeCallError, RuntimeConfig, open_runtime

from ._baselines import LiveStates, bench_module
from ._designs import key_names
from ._measure import CallContender, Phase, Results, interleave, ratios, throughputs
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actors import Runtime

    from ._measure import KeyedCall, Progress
    from ._sizes import Sizes

__all__ = ["run_churn"]

NAME: Final = "churn"
CHURN_TTL: Final = 0.001
CALM_TTL: Final = 3600.0
LOST_AFTER: Final = 30.0  # seconds without a reply after which a call counts as lost
ZERO: Final = Target("==", 0, any_size=True)


@attrs.define
class _Tally:
    """What one design's calls came back with, over all rounds."""

    ttl: float
    tracker: LiveStates = attrs.field(factory=LiveStates)
    wrong: int = 0
    errors: int = 0
    lost: int = 0
    runtime: Runtime | None = None

    @property
    def label(self) -> str:
        return (
            f"runtime, ttl={self.ttl * 1000:g} ms"
            if self.ttl < 1
            else f"runtime, ttl={self.ttl:g} s"
        )


def _checked_call(runtime: Runtime, names: Sequence[str], tally: _Tally) -> KeyedCall:
    """A whoami call that records a lost, failed or wrong reply in `tally`."""

    async def call(index: int) -> object:
        key = names[index]
        with trio.move_on_after(LOST_AFTER):
            try:
                result = await runtime.call_tool("bench__whoami", {"__sessionId": key})
            except RuntimeCallError:
                tally.errors += 1
                return None
            if result.first_text != key:
                tally.wrong += 1
            return result
        tally.lost += 1
        return None

    return call


def _phases(number: int, sizes: Sizes) -> list[Phase]:
    draw = random.Random(f"churn/{number}")
    keys = tuple(draw.randrange(sizes.churn_keys) for _ in range(sizes.churn_calls))
    return [Phase("load", keys, sizes.churn_callers)]


async def _measure(sizes: Sizes, tallies: Sequence[_Tally], progress: Progress) -> Results:
    names = key_names(sizes.churn_keys)
    async with AsyncExitStack() as stack:
        contenders = []
        for tally in tallies:
            module = bench_module(tracker=tally.tracker)
            runtime = await stack.enter_async_context(
                open_runtime([module], RuntimeConfig(ttl=tally.ttl))
            )
            tally.runtime = runtime
            contenders.append(CallContender(tally.label, _checked_call(runtime, names, tally)))
        return await interleave(
            contenders, lambda number: _phases(number, sizes), sizes.rounds, progress, NAME
        )


def _correctness(tally: _Tally) -> list[Figure]:
    assert tally.runtime is not None
    stats = tally.runtime.statistics()
    label = tally.label
    counters = [
        ("lost calls", tally.lost),
        ("wrong replies", tally.wrong),
        ("error replies", tally.errors),
        ("duplicate actors (runtime counter)", stats.duplicate_actors),
        ("duplicate live states (on_stop check)", tally.tracker.duplicates),
        (
            "states not stopped once after shutdown",
            tally.tracker.live + tally.tracker.unknown_stops,
        ),
    ]
    figures = [figure(NAME, f"{label}: actors started", stats.started, "")]
    figures += [figure(NAME, f"{label}: {name}", count, "", ZERO) for name, count in counters]
    return figures


def run_churn(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Hammer a 1 ms-TTL runtime and count lost, wrong and duplicated calls."""
    churning, calm = _Tally(CHURN_TTL), _Tally(CALM_TTL)
    results = trio.run(_measure, sizes, (churning, calm), progress)
    figures = [
        figure(NAME, f"{t.label}: calls/s", throughputs(results[t.label]["load"]), "/s")
        for t in (churning, calm)
    ]
    paired = ratios(results[churning.label]["load"], results[calm.label]["load"])
    figures.append(figure(NAME, f"{churning.label} / {calm.label}, calls/s", paired, "x"))
    figures += _correctness(churning) + _correctness(calm)
    notes = (
        f"{sizes.churn_calls} calls per round from {sizes.churn_callers} callers on "
        f"{sizes.churn_keys} random keys; a call with no reply after {LOST_AFTER:g} s is lost",
    )
    return ScenarioResult(NAME, tuple(figures), notes)
