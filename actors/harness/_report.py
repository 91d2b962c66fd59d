"""A load run's figures: one table on the terminal, the same figures as JSON.

The table is drawn with rich when standard output is a terminal and printed
as plain ``figure: value`` lines otherwise (a log, a pipe, CI). `to_json`
gives the JSON document ``--json FILE`` writes; its shape (`JSON_FORMAT`) is
stable: fields are added, never renamed or removed, without a new format.
"""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Final, TextIO

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from ._load import LoadResult

__all__ = ["JSON_FORMAT", "TimeUnit", "print_report", "rows", "time_unit", "to_json", "write_json"]

JSON_FORMAT: Final = "mcp-actors-bench/1"
"""The ``format`` member of the JSON document: its shape's name and version."""


@attrs.frozen
class TimeUnit:
    """The one unit every time in the table is shown in, chosen from those times."""

    name: str
    """``µs``, ``ms`` or ``s``."""
    microseconds: int
    """Microseconds in one of it."""
    decimals: int
    """Decimals shown: enough for two significant digits of the smallest time."""

    def format(self, us: float | None) -> str:
        """`us` microseconds in this unit (``unknown`` for None)."""
        if us is None:
            return "unknown"
        return f"{us / self.microseconds:,.{self.decimals}f} {self.name}"


_UNITS: Final = (("s", 1_000_000), ("ms", 1_000), ("µs", 1))
_MAX_DECIMALS: Final = 3  # 3 decimals of ms are µs: finer than the µs the run measures
_LARGE: Final = 10  # a unit is chosen once the largest time is this many of it


def time_unit(times: Iterable[float | None]) -> TimeUnit:
    """The unit of the largest of `times` (10 ms and more: ms), with the decimals that show
    the smallest one to two significant digits."""
    known = [us for us in times if us is not None and us > 0]
    if not known:
        return TimeUnit("µs", 1, 0)
    name, microseconds = next(
        (unit for unit in _UNITS if max(known) >= _LARGE * unit[1]), _UNITS[-1]
    )
    smallest = min(known) / microseconds
    decimals = min(_MAX_DECIMALS, max(0, 1 - math.floor(math.log10(smallest))))
    return TimeUnit(name, microseconds, 0 if microseconds == 1 else decimals)


def _count(number: int, thing: str) -> str:
    return f"{number:,} {thing}{'s' * (number != 1)}"


def _load(result: LoadResult) -> str:
    before, after = result.load_before, result.load_after
    return f"{before.load_1m:.2f} -> {after.load_1m:.2f} (1-min average, {after.cores} cores)"


def _loop(result: LoadResult) -> str:
    plan = result.plan
    if plan.rate is None:
        return "closed (each caller calls again as its answer comes)"
    return f"open, {plan.rate:g} calls/s scheduled (latency from the due time)"


def rows(result: LoadResult) -> list[tuple[str, str]]:
    """The report's (figure, value) rows, in the order shown; its times in one unit."""
    plan, latency = result.plan, result.latency
    schedule = plan.rate is not None
    unit = time_unit(
        [
            *(latency.p50, latency.p90, latency.p99, latency.p999, latency.max),
            result.max_start_lag_us if schedule else None,
            result.server_us_per_call,
            result.client_us_per_call,
        ]
    )
    size = f"{_count(plan.sessions, 'session')}, {_count(plan.callers, 'caller')}"
    errors = ", ".join(f"{kind}: {count}" for kind, count in result.errors.items()) or "none"
    table = [
        ("target", result.target),
        ("load", f"{size}, {_loop(result)}"),
        ("calls", f"{result.calls:,} in {result.seconds:.2f} s ({result.failed:,} failed)"),
        ("calls/s", f"{result.calls_per_second:,.1f}"),
        ("latency p50", unit.format(latency.p50)),
        ("latency p90", unit.format(latency.p90)),
        ("latency p99", unit.format(latency.p99)),
        ("latency p99.9", unit.format(latency.p999)),
        ("latency max", unit.format(latency.max)),
        ("errors", errors),
    ]
    if schedule:
        late = f"{result.late:,} started late, {result.dropped:,} dropped"
        wait = unit.format(result.max_start_lag_us)
        table.append(("schedule", f"{late}; longest wait {wait}"))
    table += [
        ("server CPU/call", unit.format(result.server_us_per_call)),
        ("client CPU/call", unit.format(result.client_us_per_call)),
        ("machine load", _load(result)),
    ]
    return table


def print_report(result: LoadResult, file: TextIO | None = None) -> None:
    """The table: rich on a terminal, plain lines otherwise."""
    out = sys.stdout if file is None else file
    if out.isatty():
        from rich.console import Console  # the harness extra
        from rich.table import Table

        table = Table(title="mcp-actors bench", show_header=False)
        table.add_column("figure", style="bold")
        table.add_column("value")
        for name, value in rows(result):
            table.add_row(name, value)
        Console(file=out).print(table)
        return
    width = max(len(name) for name, _ in rows(result))
    for name, value in rows(result):
        print(f"{name:<{width}}  {value}", file=out)


def to_json(result: LoadResult) -> dict[str, object]:
    """The figures as a JSON-ready document of shape `JSON_FORMAT`.

    Times are in microseconds (``_us``) or seconds (``_seconds``); a figure that
    could not be measured (the server's CPU of a remote server) is null.
    """
    plan, latency = result.plan, result.latency
    return {
        "format": JSON_FORMAT,
        "target": result.target,
        "plan": {
            "sessions": plan.sessions,
            "callers": plan.callers,
            "loop": "closed" if plan.rate is None else "open",
            "rate": plan.rate,
            "duration_seconds": plan.duration,
            "calls": plan.calls,
            "warmup_seconds": plan.warmup,
            "timeout_seconds": plan.timeout,
            "handles": None
            if plan.handles is None
            else {
                "tool": plan.handles.tool,
                "key": plan.handles.key,
                "argument": plan.handles.argument,
            },
            "mix": {
                "source": plan.mix.source,
                "setup": [{"tool": call.tool, "name": call.name} for call in plan.mix.setup],
                "calls": [{"tool": call.tool, "weight": call.weight} for call in plan.mix.calls],
            },
        },
        "calls": result.calls,
        "failed": result.failed,
        "errors": dict(result.errors),
        "seconds": result.seconds,
        "calls_per_second": result.calls_per_second,
        "latency_us": {
            "p50": latency.p50,
            "p90": latency.p90,
            "p99": latency.p99,
            "p99.9": latency.p999,
            "max": latency.max,
            "mean": latency.mean,
        },
        "histogram": latency.histogram,
        "schedule": None
        if plan.rate is None
        else {
            "late": result.late,
            "dropped": result.dropped,
            "max_start_lag_us": result.max_start_lag_us,
        },
        "cpu": {
            "server_seconds": result.server_cpu_seconds,
            "server_us_per_call": result.server_us_per_call,
            "client_seconds": result.client_cpu_seconds,
            "client_us_per_call": result.client_us_per_call,
        },
        "machine": {
            "cores": result.load_after.cores,
            "load_1m_before": result.load_before.load_1m,
            "load_1m_after": result.load_after.load_1m,
        },
    }


def write_json(result: LoadResult, path: Path) -> None:
    """Write `to_json` of `result` to `path`, indented."""
    path.write_text(json.dumps(to_json(result), indent=2) + "\n", encoding="utf-8")
