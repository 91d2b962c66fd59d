"""Scenario ``peers``: the same no-op keyed call through Ray and pykka, beside the runtime.

* Ray: one named async actor per shard (as many shards as CPUs Ray is given),
  the key choosing the shard, a dict of states inside — Ray's idiom for
  many small keyed states, since an actor per key would be a process each.
* pykka: one ``ThreadingActor`` per key, called with ``ask``.

The bare channel floor (`benchmarks._baselines.ChannelFloor`) runs beside them:
its ratio to a peer is the most the runtime's design could reach.

Both are blocking APIs; their batches run in a worker thread. With many
callers, a batch sends a window of that many calls and waits for all of
them before the next window, so only the one-caller latencies are exact.
Each peer is used only if installed.

pykka is judged by CPU time per call, as ``call_path`` judges the runtime:
its actors are threads of this process, so the process's CPU time during a
batch is all that batch cost, on a quiet machine or a busy one. Ray's calls
run in its worker processes, which this process's CPU time does not see: it
is judged by wall-clock calls/s.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio

from ._call_path import (
    BY_CPU,
    CpuTimed,
    cpu_per_call,
    cpu_ratios,
    frozen,
    one_core,
    paired_rounds,
)
from ._designs import FLOOR, RUNTIME, key_names, open_designs
from ._measure import (
    Batch,
    Contender,
    Phase,
    Results,
    Stats,
    ThreadContender,
    latencies,
    ratios,
    throughputs,
)
from ._report import INSTALL_HINT, Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_peers"]

NAME: Final = "peers"
RAY: Final = "ray (async actor per shard)"
PYKKA: Final = "pykka (thread actor per key)"
RAY_CPUS: Final = 2

Submit = Callable[[int], Callable[[], object]]
"""Send the call for a key index now; return how to wait for its reply."""


def _windowed(submit: Submit) -> Callable[[Sequence[int], int], Batch]:
    """A blocking batch: windows of `callers` calls in flight, each window awaited whole."""

    def run(keys: Sequence[int], callers: int) -> Batch:
        clock = time.perf_counter
        latencies: list[float] = []
        began = clock()
        for start in range(0, len(keys), callers):
            window = keys[start : start + callers]
            sent = clock()
            for wait in [submit(index) for index in window]:
                wait()
            latencies += [clock() - sent] * len(window)
        return Batch(len(keys), clock() - began, tuple(latencies))

    return run


@contextlib.contextmanager
def _ray(names: Sequence[str]) -> Iterator[ThreadContender]:
    import ray  # optional peer

    ray.init(
        num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR
    )
    try:

        class Shard:  # defined here so that Ray ships it by value to its workers
            def __init__(self) -> None:
                self.states: dict[str, dict[str, Any]] = {}

            async def call(self, key: str) -> str:
                self.states.setdefault(key, {"key": key})
                return "ok"

        shard_class: Any = ray.remote(Shard)
        shards = [shard_class.options(name=f"bench-shard-{i}").remote() for i in range(RAY_CPUS)]

        def submit(index: int) -> Callable[[], object]:
            ref = shards[index % len(shards)].call.remote(names[index])
            return lambda: ray.get(ref)

        yield ThreadContender(RAY, _windowed(submit))
    finally:
        ray.shutdown()


@contextlib.contextmanager
def _pykka(names: Sequence[str]) -> Iterator[ThreadContender]:
    import pykka  # optional peer

    class KeyActor(pykka.ThreadingActor):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.state = {"key": key}

        def on_receive(self, message: Any) -> str:
            return "ok"

    refs: dict[int, Any] = {}

    def submit(index: int) -> Callable[[], object]:
        ref = refs.get(index)
        if ref is None:
            ref = refs[index] = KeyActor.start(names[index])
        return ref.ask(None, block=False).get

    try:
        yield ThreadContender(PYKKA, _windowed(submit))
    finally:
        pykka.ActorRegistry.stop_all()


@final
@attrs.frozen
class _Peer:
    """How a peer is opened and judged."""

    module: str
    """The package it needs."""
    open: Callable[[Sequence[str]], AbstractContextManager[ThreadContender]]
    """Start it over these keys; stop it on exit."""
    target: Target
    """The runtime's ratio to it should meet this."""
    by_cpu: bool
    """Whether its ratios are of calls per CPU second (its work is this process's)
    rather than of wall-clock calls/s."""


_PEERS: Final = {
    RAY: _Peer("ray", _ray, Target(">=", 10), by_cpu=False),
    PYKKA: _Peer("pykka", _pykka, Target(">=", 1.5), by_cpu=True),
}


def _phases(sizes: Sizes) -> list[Phase]:
    keys = tuple(i % sizes.peer_keys for i in range(sizes.peer_calls))
    return [Phase(f"callers={c}", keys, c) for c in sorted({1, sizes.peer_callers})]


async def _measure(
    peers: Sequence[Contender], names: Sequence[str], sizes: Sizes, progress: Progress
) -> Results:
    warm = tuple(range(len(names)))
    # The floor runs too: what the runtime's design could reach at best, against the peers.
    async with open_designs(names, (FLOOR, RUNTIME)) as designs:
        contenders = [CpuTimed(contender) for contender in (*designs, *peers)]
        for contender in contenders:
            await contender.batch(warm, min(len(warm), 100))
        phases = _phases(sizes)
        with frozen():
            return await paired_rounds(contenders, phases, sizes.rounds, progress, NAME)


def _ratio(results: Results, phase: str, design: str, peer: str) -> tuple[str, Stats]:
    """The name of `design`'s ratio to `peer` and its rounds' summary, by CPU time where
    this process does the peer's work."""
    paired = (results[design][phase], results[peer][phase])
    if _PEERS[peer].by_cpu:
        return f"{design} / {peer}, {BY_CPU}, {phase}", cpu_ratios(*paired)
    return f"{design} / {peer}, {phase}", ratios(*paired)


def _figures(results: Results, peers: Sequence[str]) -> list[Figure]:
    figures: list[Figure] = []
    by_cpu = [FLOOR, RUNTIME, *(p for p in peers if _PEERS[p].by_cpu)]
    for phase in next(iter(results.values())):
        for design in (RUNTIME, *peers):
            stats = throughputs(results[design][phase])
            figures.append(figure(NAME, f"{design} calls/s, {phase}", stats, "/s"))
        for design in by_cpu:
            stats = cpu_per_call(results[design][phase])
            figures.append(figure(NAME, f"{design} CPU per call, {phase}", stats, "µs"))
        for peer in peers:
            for design, target in ((RUNTIME, _PEERS[peer].target), (FLOOR, None)):
                name, stats = _ratio(results, phase, design, peer)
                figures.append(figure(NAME, name, stats, "x", target))
    for design in (RUNTIME, *peers):
        figures.append(
            figure(
                NAME, f"{design} p50, callers=1", latencies(results[design]["callers=1"], 0.5), "µs"
            )
        )
    return figures


def run_peers(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Run the keyed call through the installed peers and the runtime, interleaved."""
    names = key_names(sizes.peer_keys)
    missing = [p for p, peer in _PEERS.items() if importlib.util.find_spec(peer.module) is None]
    notes = [
        f"skipped {peer}: {_PEERS[peer].module} is not installed ({INSTALL_HINT})"
        for peer in missing
    ]
    present = [p for p in _PEERS if p not in missing]
    if not present:
        return ScenarioResult(NAME, (), tuple(notes))
    with contextlib.ExitStack() as stack:
        progress(f"{NAME}: starting {', '.join(present)}")
        peers = [stack.enter_context(_PEERS[p].open(names)) for p in present]
        with one_core():  # pinned after Ray has started its processes: they keep every core
            results = trio.run(_measure, peers, names, sizes, progress)
    notes.append(
        f"{sizes.peer_keys} keys; with many callers the peers send windows of that many calls "
        "(exact latencies only with one caller); the peers' threads (Ray's driver, one per "
        "pykka actor) share the process and its GIL with the runtime while it is measured; "
        f"ratios {BY_CPU} are of calls per CPU second, paired round by round, a batch's "
        "CPU time being this process's during it, all threads counted, the process on one "
        "core; Ray's, whose calls run in other processes, are of wall-clock calls/s"
    )
    return ScenarioResult(NAME, tuple(_figures(results, present)), tuple(notes))
