"""Figures, targets and the report: terminal table, Markdown, JSON and PNG charts.

A `Figure` is one number with its unit, its spread across rounds and, when
the issue sets one, its target and whether it meets it. The report never
judges beyond that: a missed target is printed as ``MISSED`` and the harness
still exits 0. Targets are meant for the quick and full sizes: a tiny run
reports its figures without a verdict, except for the correctness counts
(nothing lost, leaked or wrong), which hold at any size.

A scenario that raised is a `ScenarioResult` with a `Failure` and no
figures; the others keep theirs, and the report shows which failed and why.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import sys
import tomllib
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO, final

import attrs

from ._measure import Stats

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "FORMAT",
    "INSTALL_HINT",
    "MACHINE_KEYS",
    "Failure",
    "Figure",
    "Load",
    "Report",
    "ScenarioResult",
    "Series",
    "Target",
    "figure",
    "load_average",
    "machine",
    "versions",
]

INSTALL_HINT = "pip install -e '.[bench]'"
"""What to run for the optional packages (peers, plots, rich)."""

FORMAT = 1
"""The version of the JSON layout `Report.to_json` writes, its ``format`` field.

Raise it when a field is renamed, goes away or changes meaning, so that
``python -m benchmarks compare`` refuses a file it would misread. Files
written before the field existed have the layout of version 1.
"""

Comparison = Literal[">=", "<=", "==", ">", "<"]
_CHECKS: dict[Comparison, Callable[[float, float], bool]] = {
    ">=": lambda value, bound: value >= bound,
    "<=": lambda value, bound: value <= bound,
    "==": lambda value, bound: value == bound,
    ">": lambda value, bound: value > bound,
    "<": lambda value, bound: value < bound,
}
_SYMBOLS: dict[Comparison, str] = {">=": "≥", "<=": "≤", "==": "=", ">": ">", "<": "<"}
NOT_JUDGED = "not judged"
"""The verdict column of a figure whose target is not meant for the run's sizes."""


@final
@attrs.frozen
class Target:
    """A bound a figure should meet, e.g. ``Target(">=", 20_000)``."""

    comparison: Comparison
    """How the value compares with the bound."""
    bound: float
    """The bound, in the figure's unit."""
    any_size: bool = False
    """Whether the bound holds at every size: a correctness count (nothing lost,
    leaked or wrong), judged even in a tiny run, unlike a speed or a size."""

    def meets(self, value: float) -> bool:
        """Whether `value` meets the target (``nan`` never does)."""
        return not math.isnan(value) and _CHECKS[self.comparison](value, self.bound)

    def describe(self, unit: str) -> str:
        """E.g. ``≥ 20000 /s``."""
        return f"{_SYMBOLS[self.comparison]} {format_value(self.bound)}{_suffix(unit)}"


def _suffix(unit: str) -> str:
    if unit in ("", "x"):
        return unit
    return f" {unit}"


@final
@attrs.frozen
class Figure:
    """One reported number."""

    scenario: str
    """The scenario that measured it."""
    name: str
    """What it is, e.g. ``runtime calls/s, keys=100, callers=1``."""
    value: float
    """The median across rounds (or the count, for correctness counters)."""
    unit: str
    """``/s``, ``µs``, ``B``, ``x``, ``%`` or ``""`` for a count."""
    target: str | None = None
    """The target as text (``≥ 0.6x``), or None when the figure has none."""
    meets: bool | None = None
    """Whether the value meets the target; None without a target."""
    low: float | None = None
    """The smallest round, when there were rounds."""
    high: float | None = None
    """The largest round, when there were rounds."""
    rounds: int = 1
    """How many rounds the median is of."""
    any_size: bool = False
    """Whether its target holds at every size (see `Target.any_size`)."""
    judged: bool = True
    """False when the run was too small for the target (a tiny run): `meets` is
    what the comparison gives, but no verdict is drawn from it."""

    def spread(self) -> str:
        """``low .. high`` or ``""`` for a single measurement."""
        if self.low is None or self.high is None or self.rounds < 2:
            return ""
        return f"{format_value(self.low)} .. {format_value(self.high)}"

    def verdict(self) -> str:
        """``ok``, ``MISSED``, ``not judged`` (a tiny run) or ``""`` (no target)."""
        if self.meets is None:
            return ""
        if not self.judged:
            return NOT_JUDGED
        return "ok" if self.meets else "MISSED"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping (``nan`` becomes null)."""
        data = attrs.asdict(self)
        return {
            k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in data.items()
        }


def figure(
    scenario: str,
    name: str,
    value: Stats | float,
    unit: str,
    target: Target | None = None,
) -> Figure:
    """A Figure from a round summary or a single value, judged against `target`."""
    stats = (
        value if isinstance(value, Stats) else Stats(float(value), float(value), float(value), 1)
    )
    return Figure(
        scenario=scenario,
        name=name,
        value=stats.median,
        unit=unit,
        target=None if target is None else target.describe(unit),
        meets=None if target is None else target.meets(stats.median),
        low=stats.low,
        high=stats.high,
        rounds=stats.rounds,
        any_size=target is not None and target.any_size,
    )


@final
@attrs.frozen
class Series:
    """Data for one line (or one distribution) of a chart."""

    chart: Literal["latency", "throughput", "callers", "memory"]
    """Which chart it belongs to."""
    label: str
    """The legend entry."""
    x: tuple[float, ...]
    """Abscissae; empty for a distribution."""
    y: tuple[float, ...]
    """Ordinates, or the samples of a distribution."""


LoadAverage = tuple[float, float, float]
"""The machine's load average over 1, 5 and 15 minutes."""


def load_average() -> LoadAverage | None:
    """The machine's load average now, or None where the system does not tell."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):  # Windows has none
        return None
    return (round(one, 2), round(five, 2), round(fifteen, 2))


@final
@attrs.frozen
class Load:
    """The machine's load around a span of the run: other work competing for its cores."""

    start: LoadAverage | None
    """The load average when the span began."""
    end: LoadAverage | None
    """The load average when it ended."""

    def to_json(self) -> dict[str, Any]:
        """``{"start": [1 min, 5 min, 15 min], "end": [...]}`` (null where unknown)."""
        return {"start": _listed(self.start), "end": _listed(self.end)}

    def describe(self) -> str:
        """E.g. ``load 1.52 -> 2.03``: the 1-minute averages, what the figures ran beside."""
        start, end = (format_value(None if v is None else v[0]) for v in (self.start, self.end))
        return f"load {start} -> {end}"


def _listed(value: LoadAverage | None) -> list[float] | None:
    return None if value is None else list(value)


_PROJECT_TOP: Final = Path(__file__).resolve().parent.parent


@final
@attrs.frozen
class Failure:
    """Why a scenario stopped: the error it raised, and where."""

    kind: str
    """The error's type, with its module unless a built-in: ``httpx2.ReadError``."""
    message: str
    """What it said."""
    where: str
    """The innermost frame of this project, ``benchmarks/_embedding.py:312 in _http``
    (or the innermost of all when none is the project's)."""
    traceback: str = ""
    """The whole traceback, for whoever debugs it."""

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        """The failure `exc` describes; a group of one error (trio, TaskGroup) is that error."""
        errors = _leaves(exc)
        first = errors[0]
        message = str(first)
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more errors in the same group)"
        kind = type(first).__qualname__
        module = type(first).__module__
        if module != "builtins":
            kind = f"{module.split('.')[0]}.{kind}"
        return cls(kind, message, _where(first), "".join(traceback.format_exception(exc)))

    def describe(self) -> str:
        """``ReadError: connection reset (benchmarks/_embedding.py:312 in _http)``."""
        return f"{self.kind}: {self.message} ({self.where})"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown"
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(_PROJECT_TOP)]
    frame = (ours or frames)[-1]
    path = Path(frame.filename).resolve()
    shown = path.relative_to(_PROJECT_TOP) if path.is_relative_to(_PROJECT_TOP) else path
    return f"{shown}:{frame.lineno} in {frame.name}"


@final
@attrs.frozen
class ScenarioResult:
    """What one scenario produced."""

    name: str
    """The scenario."""
    figures: tuple[Figure, ...] = ()
    """Its numbers."""
    notes: tuple[str, ...] = ()
    """Lines for the reader: what was skipped and why, how to read a figure."""
    series: tuple[Series, ...] = ()
    """Chart data."""
    failure: Failure | None = None
    """Why it stopped, when it raised (and then it has no figures)."""
    seconds: float | None = None
    """How long it ran, when the suite timed it."""
    load: Load | None = None
    """The machine's load while it ran, when the suite read it."""

    def record(self) -> dict[str, Any]:
        """Its entry in the JSON's ``scenarios`` list: status, time, load and failure."""
        return {
            "name": self.name,
            "status": "ok" if self.failure is None else "failed",
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "load": None if self.load is None else self.load.to_json(),
            "failure": None if self.failure is None else attrs.asdict(self.failure),
        }


MACHINE_KEYS: Final = ("cpu_count", "platform", "python")
"""What makes two runs' machines the same, for comparing them and for resuming a run."""


def machine() -> dict[str, Any]:
    """The machine the numbers were taken on."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_count": os.cpu_count(),
        "cores_usable": None if usable is None else len(usable),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
    }


def _project_version() -> str:
    try:
        return importlib.metadata.version("mcp-actors")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def versions() -> dict[str, str]:
    """Versions of the core dependencies, the project and the optional peers."""
    found = {"mcp-actors": _project_version()}
    for name in ("trio", "attrs", "cattrs", "ray", "pykka", "matplotlib", "rich"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def format_value(value: float | None) -> str:
    """A number with as many digits as it deserves."""
    if value is None or math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "inf"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}".replace(",", " ")
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}".replace(",", " ")
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _value_text(fig: Figure) -> str:
    return f"{format_value(fig.value)}{_suffix(fig.unit)}"


_COLUMNS = ("scenario", "figure", "value", "spread (min-max)", "target", "")


def _rows(figures: Iterable[Figure]) -> list[tuple[str, ...]]:
    return [
        (f.scenario, f.name, _value_text(f), f.spread(), f.target or "", f.verdict())
        for f in figures
    ]


@final
@attrs.frozen
class Report:
    """Everything a run measured, and where."""

    preset: str
    """``tiny``, ``quick`` or ``full``."""
    scenarios: tuple[ScenarioResult, ...]
    """In the order they ran."""
    seconds: float
    """How long the run took."""
    machine: dict[str, Any] = attrs.field(factory=machine)
    """See `machine`."""
    versions: dict[str, str] = attrs.field(factory=versions)
    """See `versions`."""
    load: Load | None = None
    """The machine's load at the start and the end of the run, when read."""
    planned: tuple[str, ...] = ()
    """The scenarios the run was asked for, in order (``--resume`` runs those missing)."""

    @property
    def figures(self) -> tuple[Figure, ...]:
        """Every figure, scenario by scenario."""
        return tuple(f for s in self.scenarios for f in s.figures)

    @property
    def missed(self) -> tuple[Figure, ...]:
        """The figures that miss a target meant for the run's sizes."""
        return tuple(f for f in self.figures if f.meets is False and f.judged)

    @property
    def failed(self) -> tuple[ScenarioResult, ...]:
        """The scenarios that raised."""
        return tuple(s for s in self.scenarios if s.failure is not None)

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report."""
        return {
            "format": FORMAT,
            "preset": self.preset,
            "seconds": round(self.seconds, 3),
            "machine": self.machine,
            "load": None if self.load is None else self.load.to_json(),
            "versions": self.versions,
            "planned": list(self.planned),
            "scenarios": [s.record() for s in self.scenarios],
            "figures": [f.to_json() for f in self.figures],
            "notes": {s.name: list(s.notes) for s in self.scenarios if s.notes},
            "missed": [f"{f.scenario}: {f.name}" for f in self.missed],
            "failed": [s.name for s in self.failed],
        }

    def write_json(self, path: Path) -> None:
        """Write `to_json` to `path` atomically: a reader (or a crash) never sees half a file.

        The text goes to a temporary file beside `path`, renamed over it once
        complete, so that a run stopped at any moment leaves the previous
        complete file.
        """
        text = json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            partial.write_text(text, encoding="utf-8")
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)

    def _header(self) -> str:
        m = self.machine
        v = self.versions
        load = "" if self.load is None else f", {self.load.describe()}"
        return (
            f"{self.preset} run, {self.seconds:.0f} s on {m['cpu_count']} CPUs{load}, "
            f"{m['platform']}, Python {m['python']}; mcp-actors {v['mcp-actors']}, "
            f"trio {v['trio']}, attrs {v['attrs']}, cattrs {v['cattrs']}"
        )

    def _summary(self) -> str:
        judged = [f for f in self.figures if f.meets is not None and f.judged]
        unjudged = sum(f.meets is not None and not f.judged for f in self.figures)
        summary = f"{len(judged) - len(self.missed)} of {len(judged)} targets met"
        if unjudged:
            summary += f"; {unjudged} {NOT_JUDGED} at {self.preset} sizes"
        if self.failed:
            names = ", ".join(s.name for s in self.failed)
            summary += f"; {len(self.failed)} scenario{'s' if len(self.failed) > 1 else ''} "
            summary += f"FAILED: {names}"
        return summary

    def _failures(self) -> list[str]:
        return [f"{s.name} FAILED: {s.failure.describe()}" for s in self.scenarios if s.failure]

    def to_markdown(self) -> str:
        """The report as a Markdown document: one table per scenario, then the misses."""
        lines = ["# Benchmark report", "", self._header(), "", self._summary(), ""]
        for scenario in self.scenarios:
            lines += [f"## {scenario.name}", ""]
            if scenario.failure is not None:
                lines += [f"**Failed**: `{scenario.failure.describe()}`", ""]
            lines += [f"- {note}" for note in scenario.notes]
            if scenario.notes:
                lines.append("")
            if scenario.figures:
                lines += ["| " + " | ".join(_COLUMNS[1:]) + " |", "|---|--:|--:|---|---|"]
                for row in _rows(scenario.figures):
                    lines.append(
                        "| " + " | ".join(cell.replace("|", "\\|") for cell in row[1:]) + " |"
                    )
                lines.append("")
        if self.missed:
            lines += ["## Targets missed", ""]
            lines += [
                f"- {f.scenario}: {f.name} = {_value_text(f)} (target {f.target})"
                for f in self.missed
            ]
            lines.append("")
        return "\n".join(lines)

    def print_table(self, out: TextIO) -> None:
        """The figures as a table on `out`, with rich when it is installed."""
        try:
            import rich.console  # optional: the plain table otherwise
            import rich.table
        except ImportError:
            self._print_plain(out)
            return
        table = rich.table.Table(title=self._header(), caption=self._summary())
        for column in _COLUMNS:
            table.add_column(column, justify="right" if column in ("value",) else "left")
        for row in _rows(self.figures):
            style = "red" if row[-1] == "MISSED" else None
            table.add_row(*row, style=style)
        console = rich.console.Console(file=out, width=max(170, rich.console.Console().width))
        console.print(table)
        for scenario in self.scenarios:
            for note in scenario.notes:
                console.print(f"[{scenario.name}] {note}", highlight=False, markup=False)
        for line in self._failures():
            console.print(line, style="red", highlight=False, markup=False)

    def _print_plain(self, out: TextIO) -> None:
        rows = [_COLUMNS, *_rows(self.figures)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
        print(self._header(), file=out)
        for number, row in enumerate(rows):
            cells = [
                cell.rjust(width) if index == 2 else cell.ljust(width)
                for index, (cell, width) in enumerate(zip(row, widths, strict=True))
            ]
            print("  ".join(cells).rstrip(), file=out)
            if number == 0:
                print("  ".join("-" * w for w in widths), file=out)
        print(self._summary(), file=out)
        for scenario in self.scenarios:
            for note in scenario.notes:
                print(f"[{scenario.name}] {note}", file=out)
        for line in self._failures():
            print(line, file=out)

    def plot(self, directory: Path) -> list[str]:
        """Write the charts as PNG files into `directory`; return lines saying what happened.

        Only scenarios run in this process have chart data: a saved run's
        (``--resume``) keeps its figures, not the samples behind them.
        """
        series = [s for scenario in self.scenarios for s in scenario.series]
        return write_charts(series, directory)


_CHARTS: dict[str, tuple[str, str, str]] = {
    # chart -> (file name, title, axis labels as "x|y")
    "latency": (
        "latency.png",
        "Latency of one warm call, light load",
        "latency (µs)|share of calls ≤ x",
    ),
    "throughput": ("throughput.png", "Throughput against the number of keys", "keys|calls/s"),
    "callers": (
        "callers.png",
        "Throughput against the number of concurrent callers",
        "callers|calls/s",
    ),
    "memory": ("memory.png", "Memory against the number of idle actors", "actors|bytes"),
}


def write_charts(series: Sequence[Series], directory: Path) -> list[str]:
    """Write one PNG per chart that has data; return lines saying what was written or skipped."""
    try:
        import matplotlib as mpl  # optional: charts are skipped without it

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [f"charts skipped: matplotlib is not installed ({INSTALL_HINT})"]
    directory.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for chart, (file_name, title, labels) in _CHARTS.items():
        lines = [s for s in series if s.chart == chart]
        if not lines:
            continue
        fig, ax = plt.subplots(figsize=(8, 5))
        for line in lines:
            _draw(ax, chart, line)
        x_label, y_label = labels.split("|")
        ax.set(title=title, xlabel=x_label, ylabel=y_label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small", loc="best")
        fig.tight_layout()
        fig.savefig(directory / file_name, dpi=100)
        plt.close(fig)
        written.append(f"chart written: {directory / file_name}")
    return written or ["charts skipped: no scenario with chart data ran"]


def _draw(ax: Any, chart: str, line: Series) -> None:
    if chart == "latency":
        samples = sorted(line.y)
        shares = [(i + 1) / len(samples) for i in range(len(samples))]
        ax.plot(samples, shares, label=line.label)
        ax.set_xscale("log")
    else:
        ax.plot(line.x, line.y, marker="o", label=line.label)
        ax.set_xscale("log")
        ax.set_yscale("log")
