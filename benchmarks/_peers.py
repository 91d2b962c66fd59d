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
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import trio

from ._designs import FLOOR, RUNTIME, key_names, open_designs
from ._measure import (
    Batch,
    Contender,
    Phase,
    Results,
    ThreadContender,
    interleave,
    latencies,
    ratios,
    throughputs,
)
from ._report import INSTALL_HINT, Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_peers"]

NAME: Final = "peers"
RAY: Final = "ray (async actor per shard)"
PYKKA: Final = "pykka (thread actor per key)"
TARGETS: Final = {RAY: Target(">=", 10), PYKKA: Target(">=", 1.5)}
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


_PEERS: Final = {RAY: ("ray", _ray), PYKKA: ("pykka", _pykka)}


def _phases(sizes: Sizes) -> list[Phase]:
    keys = tuple(i % sizes.peer_keys for i in range(sizes.peer_calls))
    return [Phase(f"callers={c}", keys, c) for c in sorted({1, sizes.peer_callers})]


async def _measure(
    peers: Sequence[Contender], names: Sequence[str], sizes: Sizes, progress: Progress
) -> Results:
    warm = tuple(range(len(names)))
    # The floor runs too: what the runtime's design could reach at best, against the peers.
    async with open_designs(names, (RUNTIME, FLOOR)) as designs:
        contenders = [*designs, *peers]
        for contender in contenders:
            await contender.batch(warm, min(len(warm), 100))
        phases = _phases(sizes)
        return await interleave(contenders, lambda _number: phases, sizes.rounds, progress, NAME)


def _figures(results: Results, peers: Sequence[str]) -> list[Figure]:
    figures: list[Figure] = []
    for phase in next(iter(results.values())):
        for design in (RUNTIME, *peers):
            figures.append(
                figure(
                    NAME, f"{design} calls/s, {phase}", throughputs(results[design][phase]), "/s"
                )
            )
        for peer in peers:
            stats = ratios(results[RUNTIME][phase], results[peer][phase])
            figures.append(figure(NAME, f"{RUNTIME} / {peer}, {phase}", stats, "x", TARGETS[peer]))
            stats = ratios(results[FLOOR][phase], results[peer][phase])
            figures.append(figure(NAME, f"{FLOOR} / {peer}, {phase}", stats, "x"))
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
    missing = [p for p, (module, _) in _PEERS.items() if importlib.util.find_spec(module) is None]
    notes = [
        f"skipped {peer}: {_PEERS[peer][0]} is not installed ({INSTALL_HINT})" for peer in missing
    ]
    present = [p for p in _PEERS if p not in missing]
    if not present:
        return ScenarioResult(NAME, (), tuple(notes))
    with contextlib.ExitStack() as stack:
        progress(f"{NAME}: starting {', '.join(present)}")
        peers = [stack.enter_context(_PEERS[p][1](names)) for p in present]
        results = trio.run(_measure, peers, names, sizes, progress)
    notes.append(
        f"{sizes.peer_keys} keys; with many callers the peers send windows of that many calls "
        "(exact latencies only with one caller); the peers' threads (Ray's driver, one per "
        "pykka actor) share the process and its GIL with the runtime while it is measured"
    )
    return ScenarioResult(NAME, tuple(_figures(results, present)), tuple(notes))
