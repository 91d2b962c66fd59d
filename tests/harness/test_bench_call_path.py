"""The in-process call path judged by CPU time: ``call_path`` and ``peers`` (issue #38, item 4).

No timing is asserted: only that each batch carries the CPU time of the
whole process, that the ratios are of CPU per call paired round by round,
and that the scenarios judge the issue's targets on those ratios.
"""

from __future__ import annotations

import importlib.util
import json
import math
import time
from typing import TYPE_CHECKING

import attrs
import pytest

from benchmarks import PRESETS
from benchmarks._call_path import (
    BY_CPU,
    CpuTimed,
    cpu_per_call,
    cpu_ratios,
    run_call_path,
)
from benchmarks._call_path_worker import decode_round, encode_round
from benchmarks._designs import DESIGNS, FLOOR, RUNTIME, RUNTIME_NO_DEADLINE
from benchmarks._measure import Batch, ThreadContender
from benchmarks._peers import PYKKA, RAY, run_peers

if TYPE_CHECKING:
    from collections.abc import Sequence

TINY = PRESETS["tiny"]
BURN = 0.02  # CPU seconds a worker thread spends in the batch below


def burning_thread_batch(burned: list[float]) -> ThreadContender:
    """A contender whose batch spins in a worker thread (as pykka's actors do) for `BURN`
    seconds of that thread's CPU, recording how much it spent."""

    def run(keys: Sequence[int], callers: int) -> Batch:
        began = time.thread_time()
        while time.thread_time() - began < BURN:
            pass
        burned.append(time.thread_time() - began)
        return Batch(len(keys), 1.0, ())

    return ThreadContender("burner", run)


class TestCpuTime:
    async def test_a_batch_carries_the_cpu_of_every_thread(self) -> None:
        """The worker thread's CPU is counted, not only the trio thread's (which waits)."""
        burned: list[float] = []
        timed = CpuTimed(burning_thread_batch(burned))
        batch = await timed.batch(range(4), 1)
        assert timed.name == "burner"
        assert batch.calls == 4
        assert batch.cpu is not None
        assert batch.cpu >= burned[0] >= BURN

    def test_ratios_are_of_cpu_per_call_paired_round_by_round(self) -> None:
        """Calls per CPU second over the other's, each round with its own: not calls/s."""
        # The runtime takes half the wall-clock time, yet twice, then four times the CPU.
        runtime = [Batch(100, 1.0, (), cpu=0.004), Batch(100, 1.0, (), cpu=0.008)]
        floor = [Batch(100, 2.0, (), cpu=0.002), Batch(200, 2.0, (), cpu=0.004)]
        assert attrs.astuple(cpu_ratios(runtime, floor)) == pytest.approx((0.375, 0.25, 0.5, 2))
        assert attrs.astuple(cpu_per_call(runtime)) == pytest.approx((60.0, 40.0, 80.0, 2))

    def test_a_batch_without_cpu_time_has_no_ratio(self) -> None:
        """Not measured is not a number, never a zero cost."""
        unknown = [Batch(10, 1.0, ())]
        assert math.isnan(cpu_per_call(unknown).median)
        assert math.isnan(cpu_ratios(unknown, [Batch(10, 1.0, (), cpu=0.1)]).median)

    def test_a_round_keeps_its_cpu_time_through_the_worker_file(self) -> None:
        """``--against COMMIT``'s rounds are JSON between processes: the CPU time survives."""
        per_keys = {10: {RUNTIME: {"callers=1": [Batch(5, 0.5, (0.1,) * 5, cpu=0.25)]}}}
        assert decode_round(json.loads(json.dumps(encode_round(per_keys)))) == per_keys


class TestJudgedByCpu:
    def test_call_path_judges_the_floor_ratio_by_cpu_at_every_size(self) -> None:
        """Each runtime / floor ratio, by CPU, carries the ≥ 0.6x target, from every round;
        each design's CPU per call is reported; no wall-clock ratio is left."""
        sizes = attrs.evolve(TINY, call_keys=(1, 3), call_callers=(1, 2), calls_per_batch=20)
        found = {f.name: f for f in run_call_path(sizes, lambda _line: None).figures}
        for keys in sizes.call_keys:
            for callers in sizes.call_callers:
                where = f"keys={keys}, callers={callers}"
                for runtime in (RUNTIME, RUNTIME_NO_DEADLINE):
                    judged = found[f"{runtime} / {FLOOR}, {BY_CPU}, {where}"]
                    assert (judged.target, judged.rounds) == ("≥ 0.6x", sizes.rounds)
                    assert math.isfinite(judged.value)
                    assert judged.value > 0
                    assert f"{runtime} / {FLOOR}, {where}" not in found
                for design in DESIGNS:
                    assert found[f"{design} CPU per call, {where}"].value > 0

    @pytest.mark.skipif(not importlib.util.find_spec("pykka"), reason="needs pykka")
    def test_peers_judge_pykka_by_cpu(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """runtime / pykka by CPU carries the ≥ 1.5x target at both caller counts."""
        real = importlib.util.find_spec
        monkeypatch.setattr(  # Ray takes seconds to start and is judged by calls/s
            importlib.util, "find_spec", lambda name: None if name == "ray" else real(name)
        )
        result = run_peers(TINY, lambda _line: None)
        found = {f.name: f for f in result.figures}
        assert not any(RAY in name for name in found)
        for callers in sorted({1, TINY.peer_callers}):
            judged = found[f"{RUNTIME} / {PYKKA}, {BY_CPU}, callers={callers}"]
            assert (judged.target, judged.rounds) == ("≥ 1.5x", TINY.rounds)
            assert judged.value > 0
            assert found[f"{FLOOR} / {PYKKA}, {BY_CPU}, callers={callers}"].target is None
            for design in (FLOOR, RUNTIME, PYKKA):
                assert found[f"{design} CPU per call, callers={callers}"].value > 0
