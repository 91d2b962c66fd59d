"""The ``mcp-actors bench`` table (`actors.harness._report`): its times in one unit.

The table's value column holds every time of the run — latency percentiles, the open
loop's longest wait, CPU per call — and shows them all in the one unit its largest time
calls for, so that they can be compared at a glance down the column.
"""

from __future__ import annotations

import io
import re

import pytest

from actors.harness import Latency, LoadPlan, LoadResult, MachineLoad, MixCall, print_report
from actors.harness import Mix as MixOf
from actors.harness._report import rows, time_unit

CALLS = 1_000
TIMES = ("latency", "schedule", "CPU/call")  # the rows whose values are times
NUMBER_AND_UNIT = re.compile(r"(?:^|wait )([\d,.]+) (µs|ms|s)$")


def result(
    latency_us: tuple[int, int, int, int, int],
    *,
    server_us: float | None,
    client_us: float,
    rate: float | None = None,
    max_start_lag_us: int = 0,
) -> LoadResult:
    """A run of `CALLS` calls with these times (p50, p90, p99, p99.9, max), per call."""
    p50, p90, p99, p999, top = latency_us
    load = MachineLoad(0.5, 2)
    return LoadResult(
        target="a test",
        plan=LoadPlan(mix=MixOf((MixCall("t", {}),), "test"), calls=CALLS, rate=rate),
        calls=CALLS,
        errors={},
        seconds=10.0,
        latency=Latency(p50=p50, p90=p90, p99=p99, p999=p999, max=top, mean=p50, histogram=""),
        late=0,
        dropped=0,
        max_start_lag_us=max_start_lag_us,
        server_cpu_seconds=None if server_us is None else server_us * CALLS / 1e6,
        client_cpu_seconds=client_us * CALLS / 1e6,
        load_before=load,
        load_after=load,
    )


def times(run: LoadResult) -> dict[str, str]:
    """The table's time rows: figure → value."""
    return {name: value for name, value in rows(run) if any(t in name for t in TIMES)}


def units(run: LoadResult) -> set[str]:
    found = set()
    for name, value in times(run).items():
        match = NUMBER_AND_UNIT.search(value)
        assert match is not None or value == "unknown", (name, value)
        if match is not None:
            found.add(match[2])
    return found


def test_latency_in_ms_puts_the_cpu_per_call_in_ms_too() -> None:
    """The doc's run: percentiles of 150 µs to 45 ms and CPU of about 1 ms, all in ms."""
    run = result((150, 400, 2_000, 9_000, 45_000), server_us=993, client_us=1_968)
    assert units(run) == {"ms"}
    shown = times(run)
    assert shown["latency p50"] == "0.15 ms"
    assert shown["latency max"] == "45.00 ms"
    assert shown["server CPU/call"] == "0.99 ms"
    assert shown["client CPU/call"] == "1.97 ms"


def test_short_times_are_all_in_microseconds() -> None:
    run = result((40, 60, 90, 200, 9_000), server_us=30, client_us=55)
    assert units(run) == {"µs"}
    assert times(run)["latency max"] == "9,000 µs"


def test_the_open_loops_wait_and_an_unknown_cpu_keep_to_the_column() -> None:
    """The longest wait counts towards the unit; an unmeasured figure is `unknown`."""
    run = result(
        (300, 500, 800, 900, 1_000),
        server_us=None,
        client_us=400,
        rate=100.0,
        max_start_lag_us=12_000_000,
    )
    assert units(run) == {"s"}
    shown = times(run)
    assert shown["server CPU/call"] == "unknown"
    assert shown["schedule"].endswith("longest wait 12.000 s")
    assert shown["latency p50"] == "0.000 s"  # no finer than the 3 decimals of a second


@pytest.mark.parametrize(
    ("times_us", "expected"),
    [
        ([None, None], "3 µs"),  # nothing known: microseconds
        ([9_999, 3], "3 µs"),
        ([10_000, 3], "0.003 ms"),
        ([10_000, 5_000], "0.0 ms"),  # two digits of 5 ms: one decimal
        ([25_000_000, 3_000_000], "0.0 s"),
    ],
)
def test_the_unit_is_the_largest_times_and_the_decimals_the_smallest(
    times_us: list[float | None], expected: str
) -> None:
    assert time_unit(times_us).format(3) == expected


def test_the_plain_table_shows_the_same_rows() -> None:
    """In a pipe, one ``figure  value`` line per row, the values as `rows` gives them."""
    run = result((150, 400, 2_000, 9_000, 45_000), server_us=993, client_us=1_968)
    out = io.StringIO()
    print_report(run, out)
    assert re.search(r"^server CPU/call +0\.99 ms$", out.getvalue(), re.MULTILINE)
    assert len(out.getvalue().splitlines()) == len(rows(run))
