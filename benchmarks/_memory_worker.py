"""One memory measurement in a fresh process: ``python -m benchmarks._memory_worker``.

Starts N idle actors of one design, samples the live Python heap
(tracemalloc) and the resident set, lets the TTL expire and samples again,
then prints one JSON object on stdout. Trio runs on a `MockClock`, so time
stands still while the actors start (none expires early, however long
starting a million takes) and the TTL passes in one jump.

Why a fresh process: RSS only means something in a process that did nothing
else, and an allocator's high-water mark from one size would blur the next.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, overload

import trio
import trio.testing

from actors import RuntimeConfig, open_runtime

from ._baselines import ChannelFloor, bench_module, noop
from ._designs import runtime_call
from ._measure import KeyedCall, drive

__all__ = ["main", "measure"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Names(Sequence[str]):
    """Key names made on demand, so that the driver holds none of them."""

    def __init__(self, count: int) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [f"key-{i}" for i in range(self._count)[index]]
        return f"key-{index}"


def rss() -> int:
    """This process's resident set, in bytes (Linux: now; elsewhere: the peak)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except OSError:
        import resource  # not on Windows; /proc is Linux-only

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _sample() -> dict[str, int]:
    gc.collect()
    heap = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
    return {"heap": heap, "rss": rss(), "tracemalloc": tracemalloc.get_tracemalloc_memory()}


Live = Callable[[], int]


@asynccontextmanager
async def _open(design: str, ttl: float, actors: int) -> AsyncIterator[tuple[KeyedCall, Live]]:
    names = _Names(actors + 1)
    if design == "runtime":
        async with open_runtime([bench_module()], RuntimeConfig(ttl=ttl)) as runtime:
            yield runtime_call(runtime, names), lambda: runtime.statistics().live_actors
        return
    async with trio.open_nursery() as nursery:
        floor = ChannelFloor(nursery, noop, ttl=ttl)

        async def call(index: int) -> object:
            return await floor.call(names[index])

        yield call, lambda: floor.live
        nursery.cancel_scope.cancel()


async def _expire(clock: trio.testing.MockClock, ttl: float, live: Live) -> None:
    clock.jump(ttl * 2)
    for _ in range(1000):  # a few rounds of the run loop suffice; bounded all the same
        await trio.testing.wait_all_tasks_blocked()
        if live() == 0:
            return


async def measure(
    design: str, actors: int, ttl: float, clock: trio.testing.MockClock
) -> dict[str, Any]:
    """Start `actors` idle actors of `design`, let them expire, and report the samples."""
    async with _open(design, ttl, actors) as (call, live):
        await call(actors)  # load every lazy code path once before the baseline
        await trio.testing.wait_all_tasks_blocked()
        before = _sample()
        began = time.perf_counter()
        batch = await drive(call, range(actors), min(actors, 100))
        seconds = time.perf_counter() - began
        del batch  # the latencies are not the actors' memory
        await trio.testing.wait_all_tasks_blocked()
        live_filled = live()
        filled = _sample()
        await _expire(clock, ttl, live)
        drained = _sample()
        return {
            "design": design,
            "actors": actors,
            "seconds": seconds,
            "live_filled": live_filled,
            "live_drained": live(),
            "before": before,
            "filled": filled,
            "drained": drained,
        }


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line, measure, print one JSON object."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks._memory_worker")
    parser.add_argument("actors", type=int, help="idle actors to start")
    parser.add_argument("--design", choices=("runtime", "floor"), default="runtime")
    parser.add_argument("--ttl", type=float, default=0.5, help="idle TTL in (mock) seconds")
    parser.add_argument("--no-trace", action="store_true", help="RSS only, without tracemalloc")
    args = parser.parse_args(argv)
    if not args.no_trace:
        tracemalloc.start()
    clock = trio.testing.MockClock()
    result = trio.run(measure, args.design, args.actors, args.ttl, clock, clock=clock)
    result["traced"] = not args.no_trace
    print(json.dumps(result))


if __name__ == "__main__":
    main()
