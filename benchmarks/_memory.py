"""Scenario ``memory``: what an idle actor costs, and what TTL expiry gives back.

Each measurement runs in a fresh subprocess (`benchmarks._memory_worker`),
the runtime and the bare-channel floor alternating at each size, each up to
twice: under tracemalloc for the live Python heap (only up to
``Sizes.memory_heap_max`` actors: tracemalloc triples the start-up time), and
without it for a resident set that tracemalloc's own bookkeeping does not
inflate. The floor's cost per task does not depend on the count, so it runs
only up to ``Sizes.memory_baseline_max``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._report import Figure, ScenarioResult, Series, Target, figure

if TYPE_CHECKING:
    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_memory"]

NAME: Final = "memory"
DESIGNS: Final = ("runtime", "floor")
_LABELS: Final = {"runtime": "runtime", "floor": "bare channel floor"}
HEAP_TARGET: Final = Target("<=", 6 * 1024)  # bytes of live heap per idle actor
RSS_TARGET: Final = Target("<", 1024)  # MiB of RSS with 100 000 idle actors
RSS_TARGET_ACTORS: Final = 100_000
RETURNED_TARGET: Final = Target(">=", 95)  # % of the actors' heap returned after expiry
LIVE_TARGET: Final = Target("==", 0, any_size=True)  # live actors after expiry
TTL: Final = 0.5
_ROOT: Final = Path(__file__).resolve().parent.parent
_WORKER_TIMEOUT: Final = 1800.0


def _worker(design: str, actors: int, *, trace: bool) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter and return its JSON."""
    command = [sys.executable, "-m", "benchmarks._memory_worker", str(actors), "--design", design]
    command += ["--ttl", str(TTL)] + ([] if trace else ["--no-trace"])
    path = os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=_WORKER_TIMEOUT,
        cwd=_ROOT,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )
    if done.returncode != 0:
        msg = f"memory worker {' '.join(command[2:])} failed:\n{done.stderr.strip()}"
        raise RuntimeError(msg)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _per_actor(run: dict[str, Any], measure: str) -> float:
    return float(run["filled"][measure] - run["before"][measure]) / int(run["actors"])


def _returned(run: dict[str, Any], measure: str) -> float:
    grown = run["filled"][measure] - run["before"][measure]
    given_back = run["filled"][measure] - run["drained"][measure]
    return 100.0 * given_back / grown if grown > 0 else float("nan")


Run = dict[str, Any]


def _heap_figures(label: str, heap: Run, runtime: bool) -> list[Figure]:
    def judged(target: Target) -> Target | None:
        return target if runtime else None

    per_actor = _per_actor(heap, "heap")
    returned = _returned(heap, "heap")
    return [
        figure(NAME, f"{label}: heap per idle actor", per_actor, "B", judged(HEAP_TARGET)),
        figure(
            NAME, f"{label}: heap returned after expiry", returned, "%", judged(RETURNED_TARGET)
        ),
    ]


def _rss_figures(label: str, actors: int, plain: Run, runtime: bool) -> list[Figure]:
    rss_target = RSS_TARGET if runtime and actors == RSS_TARGET_ACTORS else None
    live_target = LIVE_TARGET if runtime else None
    return [
        figure(NAME, f"{label}: RSS per idle actor", _per_actor(plain, "rss"), "B"),
        figure(NAME, f"{label}: process RSS", plain["filled"]["rss"] / 2**20, "MiB", rss_target),
        figure(NAME, f"{label}: RSS returned after expiry", _returned(plain, "rss"), "%"),
        figure(NAME, f"{label}: live after expiry", plain["live_drained"], "", live_target),
        figure(NAME, f"{label}: started per second", actors / plain["seconds"], "/s"),
    ]


def _series(runs: dict[tuple[str, str, int], Run]) -> list[Series]:
    series = []
    for design in DESIGNS:
        for measure in ("heap", "rss"):
            sizes = sorted(n for d, m, n in runs if (d, m) == (design, measure))
            grown = [
                runs[design, measure, n]["filled"][measure]
                - runs[design, measure, n]["before"][measure]
                for n in sizes
            ]
            if sizes:
                label = f"{_LABELS[design]}: {'live heap' if measure == 'heap' else 'RSS'} growth"
                series.append(
                    Series("memory", label, tuple(map(float, sizes)), tuple(map(float, grown)))
                )
    return series


def _plan(sizes: Sizes) -> list[tuple[str, str, int]]:
    """(design, measure, actors) for every worker run, the designs alternating at each size."""
    plan = []
    for actors in sizes.memory_actors:
        for design in DESIGNS:
            if design != "runtime" and actors > sizes.memory_baseline_max:
                continue
            if actors <= sizes.memory_heap_max:
                plan.append((design, "heap", actors))
            plan.append((design, "rss", actors))
    return plan


def run_memory(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure heap and RSS per idle actor at each size, in fresh subprocesses."""
    runs: dict[tuple[str, str, int], Run] = {}
    figures: list[Figure] = []
    for design, measure, actors in _plan(sizes):
        progress(f"{NAME}: {actors} actors, {_LABELS[design]}, {measure} (fresh process)")
        run = _worker(design, actors, trace=measure == "heap")
        runs[design, measure, actors] = run
        label = f"{_LABELS[design]}, {actors} actors"
        runtime = design == "runtime"
        if measure == "heap":
            figures += _heap_figures(label, run, runtime)
        else:
            figures += _rss_figures(label, actors, run, runtime)
    notes = (
        f"one measurement per size, design and measure, each in a fresh process; "
        f"TTL {TTL} s passed on a MockClock",
        "heap: tracemalloc after gc.collect(), up to "
        f"{sizes.memory_heap_max} actors; RSS: processes without tracemalloc",
        f"the floor runs up to {sizes.memory_baseline_max} actors (its cost per task does not "
        "depend on the count)",
    )
    return ScenarioResult(NAME, tuple(figures), notes, tuple(_series(runs)))
