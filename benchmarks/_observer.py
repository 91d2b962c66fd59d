"""Scenario ``observer``: what watching the runtime costs a call.

Three runtimes serve the same no-op call on the same keys, interleaved round
by round in one process:

* **no observer** — the runtime as embedded without telemetry: no timestamps,
  no records (the seam's cost when nobody listens is one ``is None`` test);
* **empty observer** — an `Observer` that does nothing: the seam itself, its
  timestamps and `CallRecord`s;
* **Prometheus** — `actors.telemetry.PrometheusMetrics`, what ``serve
  --metrics`` installs (skipped, with a note, without prometheus-client).

Beside them runs the bare-channel floor of the ``call_path`` scenario, the
same no-op behind one trio channel and task per key. The runtime before the
seam cannot run in the same process, so "no observer" as a ratio of the
floor, judged like ``call_path``'s, is where a cost of the seam to callers
nobody watches would show.

Reported: calls/s of each with one caller and with many, each observed
runtime's throughput as a ratio of the unobserved one, and the unobserved
one's as a ratio of the floor, all paired round by round. The issue's
target: metrics cost at most 10 % at 100 callers.
"""

from __future__ import annotations

import gc
import importlib.util
import random
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from actors import open_runtime
from actors.lowlevel import Observer

from ._baselines import bench_module
from ._call_path import RATIO_TARGET
from ._designs import FLOOR, key_names, open_designs, runtime_call
from ._fastmcp_peer import OURS_MEMORY, cpu_ratios, serve_stdio, warmed
from ._measure import CallContender, Phase, Results, interleave, ratios, throughputs
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from ._measure import Batch, Progress
    from ._sizes import Sizes

__all__ = ["EMPTY", "NONE", "NO_CALL_LINES", "PROMETHEUS", "run_observer"]

NAME: Final = "observer"
NONE: Final = "no observer"
EMPTY: Final = "empty observer"
PROMETHEUS: Final = "Prometheus metrics"
NO_CALL_LINES: Final = "no call log lines"
"""``serve --log-level warning``: the server without its per-call log line."""
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
        contenders += await stack.enter_async_context(open_designs(names, (FLOOR,)))
        warm = tuple(range(KEYS))
        for contender in contenders:
            await contender.batch(warm, 10)
        phases = _phases(sizes)
        # Three runtimes' warm heaps make an old-generation collection slow enough to halve
        # whichever batch it lands in; frozen, the collector skips them, for every contender
        # alike, and a round's ratio pairs like with like.
        gc.freeze()
        try:
            return await interleave(contenders, lambda _round: phases, sizes.rounds, progress, NAME)
        finally:
            gc.unfreeze()


def _figures(results: Results, callers: int, many: int) -> list[Figure]:
    phase = f"callers={callers}"
    where = f"keys={KEYS}, callers={callers}"
    figures = [
        figure(NAME, f"{label} calls/s, {where}", throughputs(results[label][phase]), "/s")
        for label in results
    ]
    observed = [label for label in results if label not in (NONE, FLOOR)]
    for label in observed:
        target = METRICS_TARGET if label == PROMETHEUS and callers == many else None
        stats = ratios(results[label][phase], results[NONE][phase])
        figures.append(figure(NAME, f"{label} / {NONE}, {where}", stats, "x", target))
    floor = ratios(results[NONE][phase], results[FLOOR][phase])
    figures.append(figure(NAME, f"{NONE} / {FLOOR}, {where}", floor, "x", RATIO_TARGET))
    return figures


async def _over_stdio(sizes: Sizes, progress: Progress) -> dict[str, list[Batch]]:
    """``serve`` over stdio without and with ``--metrics``: one batch per round each."""
    async with AsyncExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        servers = {}
        variants = (
            (NONE, ()),
            (PROMETHEUS, ("--metrics", "127.0.0.1:0")),
            (NO_CALL_LINES, ("--log-level", "warning")),
        )
        for label, extra in variants:
            served = serve_stdio(OURS_MEMORY, "", directory, extra)
            servers[label] = await warmed(await stack.enter_async_context(served), sizes)
        results: dict[str, list[Batch]] = {label: [] for label in servers}
        for number in range(sizes.fastmcp_rounds):
            progress(f"{NAME}: serve over stdio: round {number + 1}")
            for label, server in servers.items():
                batch = await server.mixed(sizes.fastmcp_calls, sizes.fastmcp_callers)
                results[label].append(batch)
    return results


def _stdio_figures(results: dict[str, list[Batch]], sizes: Sizes) -> list[Figure]:
    where = f"serve over stdio, {sizes.fastmcp_callers} callers, create/list"
    none, metrics = results[NONE], results[PROMETHEUS]
    figures = [
        figure(NAME, f"{label} calls/s, {where}", throughputs(batches), "/s")
        for label, batches in results.items()
    ]
    label = f"{PROMETHEUS} / {NONE}, {where}"
    figures.append(figure(NAME, label, ratios(metrics, none), "x", METRICS_TARGET))
    cpu = cpu_ratios(metrics, none)
    if cpu is not None:  # unknown without /proc
        figures.append(figure(NAME, f"server CPU per call, {label}", cpu, "x"))
    # What the per-call log line (``serve``'s default, info) costs a call.
    lines = cpu_ratios(none, results[NO_CALL_LINES])
    if lines is not None:
        label = f"server CPU per call, {NONE} / {NO_CALL_LINES}, {where}"
        figures.append(figure(NAME, label, lines, "x"))
    return figures


def run_observer(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the call path without an observer, with an empty one and with metrics."""
    results = trio.run(_measure, sizes, progress)
    many = max(sizes.call_callers)
    figures = [f for callers in sizes.call_callers for f in _figures(results, callers, many)]
    notes = [
        "ratios pair each observed runtime's round with the unobserved one's, "
        "and the unobserved one's with the bare channel floor's"
    ]
    if PROMETHEUS not in results:
        notes.append("Prometheus skipped: pip install 'mcp-actors[metrics]'")
        return ScenarioResult(NAME, tuple(figures), tuple(notes))
    if importlib.util.find_spec("mcp") is None:
        notes.append("serve over stdio skipped: pip install -e '.[server]'")
        return ScenarioResult(NAME, tuple(figures), tuple(notes))
    figures += _stdio_figures(trio.run(_over_stdio, sizes, progress), sizes)
    notes.append(
        "serve over stdio: python -m actors serve --state memory, the same with --metrics "
        "HOST:PORT and with --log-level warning (no per-call log line), each driven by the "
        "SDK client (the durable scenario's peer sizes)"
    )
    return ScenarioResult(NAME, tuple(figures), tuple(notes))
