"""Scenario ``activation``: first calls on new keys, which start actors.

Each round opens every design afresh, one at a time, and gives it new keys:
a batch of first calls from many callers (activations per second), then
first calls from one caller on other fresh keys and the same keys again,
warm (latency of a first call against a warm one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from ._designs import DESIGNS, FLOOR, RUNTIME, RUNTIME_NO_DEADLINE, key_names, open_designs
from ._measure import Phase, Results, interleave, latencies, merge, ratios, throughputs
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_activation"]

NAME: Final = "activation"
RATE_TARGET: Final = Target(">=", 20_000)  # activations per second
FLOOR_TARGET: Final = Target(">=", 0.6)  # of the bare channel floor's activations per second
_FIRST_MANY: Final = "first, many callers"
_FIRST_ONE: Final = "first, one caller"
_WARM_ONE: Final = "warm, one caller"


def _phases(sizes: Sizes) -> list[Phase]:
    many, one = sizes.activation_keys, sizes.activation_latency_keys
    fresh = tuple(range(many))
    single = tuple(range(many, many + one))
    return [
        Phase(_FIRST_MANY, fresh, sizes.activation_callers),
        Phase(_FIRST_ONE, single, 1),
        Phase(_WARM_ONE, single, 1),
    ]


async def _measure(sizes: Sizes, progress: Progress) -> Results:
    names = key_names(sizes.activation_keys + sizes.activation_latency_keys)
    phases = _phases(sizes)
    parts = []
    for number in range(sizes.rounds):
        progress(f"{NAME}: round {number + 1}/{sizes.rounds}")
        for design in DESIGNS:
            # Each design opened alone and afresh: its keys are new to it, and
            # no other design's actors sit in the heap while it starts its own.
            async with open_designs(names, (design,)) as contenders:
                parts.append(await interleave(contenders, lambda _: phases, 1, _quiet, NAME))
    return merge(parts)


def _quiet(_line: str) -> None:
    """Progress is reported per round above, not per design."""


def _figures(results: Results, callers: int) -> list[Figure]:
    figures: list[Figure] = []
    for design in DESIGNS:
        runtime = design in (RUNTIME, RUNTIME_NO_DEADLINE)
        rate = throughputs(results[design][_FIRST_MANY])
        name = f"{design} activations/s, {callers} callers"
        figures.append(figure(NAME, name, rate, "/s", RATE_TARGET if runtime else None))
        if runtime:
            paired = ratios(results[design][_FIRST_MANY], results[FLOOR][_FIRST_MANY])
            name = f"{design} / {FLOOR}, activations"
            figures.append(figure(NAME, name, paired, "x", FLOOR_TARGET))
        for phase in (_FIRST_ONE, _WARM_ONE):
            for q in (0.5, 0.99):
                stats = latencies(results[design][phase], q)
                figures.append(figure(NAME, f"{design} p{q * 100:g}, {phase}", stats, "µs"))
    return figures


def run_activation(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure activations per second and first-call latency."""
    results = trio.run(_measure, sizes, progress)
    notes = (
        "every round opens fresh designs; the warm batch repeats the keys of the one-caller "
        "first batch",
    )
    return ScenarioResult(NAME, tuple(_figures(results, sizes.activation_callers)), notes)
