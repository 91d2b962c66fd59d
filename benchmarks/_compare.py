"""Two benchmark reports side by side: ``python -m benchmarks compare A.json B.json``.

Each figure present in both is printed with A's value, B's, the change
(B / A and in percent) and whether the difference is *beyond the spread* of
the rounds. Figures present in only one report are listed as such.

Beyond spread means that the two min..max ranges of the rounds do not overlap:
every round of one side is above every round of the other. A report keeps,
per figure, the median of its rounds, the smallest and the largest round and
their number — not the rounds themselves — and this is the strongest
judgement those allow without assuming how the rounds are distributed. It is
also an exact test: if both sides' rounds came from one distribution (the
same code on a machine whose noise is the same for both), each of the
C(n + m, n) orders of the n + m rounds would be equally likely, and only 2
of them separate the sides entirely, so chance alone puts a difference
beyond spread with probability 2 / C(n + m, n) — 0.8 % for 5 rounds against
5 (the quick and full sizes), 33 % for 2 against 2 (the tiny sizes, which
are for smoke tests, not verdicts). It is conservative: a real difference
smaller than the noise shows as within spread. The comparison prints that
probability for the round counts it met.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from ._report import FORMAT, MACHINE_KEYS, format_value

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from ._report import Figure

__all__ = [
    "Compared",
    "Measured",
    "ReportFileError",
    "Row",
    "beyond_spread",
    "chance_beyond_spread",
    "compared_of",
    "figures_of",
    "pair",
    "read_json",
    "read_report",
    "render",
]

BEYOND: Final = "beyond spread"
WITHIN: Final = "within spread"
UNJUDGED: Final = "n/a (1 round)"


class ReportFileError(Exception):
    """A file that is not a benchmark report this harness can read; the message says why."""


@final
@attrs.frozen
class Measured:
    """One figure of a report, as far as a comparison needs it."""

    scenario: str
    """The scenario that measured it."""
    name: str
    """What it is."""
    value: float | None
    """The median of the rounds; None when the report has none (``nan`` is written as null)."""
    unit: str
    """Its unit."""
    low: float | None = None
    """The smallest round, when known."""
    high: float | None = None
    """The largest round, when known."""
    rounds: int = 1
    """How many rounds the median is of."""

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the figure across reports: its scenario and name."""
        return (self.scenario, self.name)

    def spread(self) -> str:
        """``low .. high``, or ``""`` without rounds to span."""
        if self.low is None or self.high is None or self.rounds < 2:
            return ""
        return f"{format_value(self.low)} .. {format_value(self.high)}"

    def text(self) -> str:
        """The value with its unit."""
        unit = self.unit if self.unit in ("", "x") else f" {self.unit}"
        return f"{format_value(self.value)}{unit}"


@final
@attrs.frozen
class Compared:
    """One side of a comparison: a label, a line about where it comes from, its figures."""

    label: str
    """How the table names it (``A``, a file name, a commit)."""
    about: str
    """One line: the run's size, versions and machine."""
    preset: str
    """The sizes it ran at (``tiny``, ``quick``, ``full``)."""
    figures: tuple[Measured, ...]
    """Its figures, in order."""
    machine: Mapping[str, Any] = attrs.field(factory=dict)
    """The machine it ran on, as the report says (empty when unknown)."""


def _number(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{what} is {value!r}, not a number"
        raise ReportFileError(msg)
    return float(value)


def _measured(data: object, index: int) -> Measured:
    where = f"figure {index}"
    if not isinstance(data, Mapping):
        msg = f"{where} is not an object"
        raise ReportFileError(msg)
    for field in ("scenario", "name", "unit"):
        if not isinstance(data.get(field), str):
            msg = f"{where} has no text {field!r}"
            raise ReportFileError(msg)
    rounds = data.get("rounds", 1)
    if isinstance(rounds, bool) or not isinstance(rounds, int):
        msg = f"{where}: rounds is {rounds!r}, not a whole number"
        raise ReportFileError(msg)
    return Measured(
        scenario=data["scenario"],
        name=data["name"],
        value=_number(data.get("value"), f"{where}: value"),
        unit=data["unit"],
        low=_number(data.get("low"), f"{where}: low"),
        high=_number(data.get("high"), f"{where}: high"),
        rounds=rounds,
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _about(data: Mapping[str, Any]) -> str:
    machine, versions = _mapping(data.get("machine")), _mapping(data.get("versions"))
    parts = [f"{data.get('preset', '?')} run"]
    if isinstance(data.get("seconds"), int | float):
        parts.append(f"{data['seconds']:.0f} s")
    parts.append(f"mcp-actors {versions.get('mcp-actors', '?')}")
    parts.append(f"Python {machine.get('python', '?')}")
    parts.append(f"{machine.get('cpu_count', '?')} CPUs")
    parts.append(str(machine.get("platform", "?")))
    return ", ".join(parts)


def compared_of(data: object, label: str) -> Compared:
    """A report's JSON (`Report.to_json`, or a file of it) as one side of a comparison.

    Raises `ReportFileError` when `data` is not a report of the format this
    harness writes.
    """
    if not isinstance(data, Mapping):
        msg = f"not a benchmark report: the top level is a {type(data).__name__}, not an object"
        raise ReportFileError(msg)
    version = data.get("format", FORMAT)  # reports written before the field are version 1
    if version != FORMAT:
        msg = f"a benchmark report of format version {version!r}; this harness reads {FORMAT}"
        raise ReportFileError(msg)
    figures = data.get("figures")
    if not isinstance(figures, list):
        msg = "not a benchmark report: it has no 'figures' list"
        raise ReportFileError(msg)
    return Compared(
        label=label,
        about=_about(data),
        preset=str(data.get("preset", "?")),
        figures=tuple(_measured(item, index) for index, item in enumerate(figures, 1)),
        machine=_mapping(data.get("machine")),
    )


def read_json(path: Path) -> object:
    """The JSON in `path`; raises `ReportFileError` when it is missing, unreadable or not JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"{path}: no such file"
        raise ReportFileError(msg) from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot be read ({exc})"
        raise ReportFileError(msg) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{path}: not JSON ({exc})"
        raise ReportFileError(msg) from None


def read_report(path: Path, label: str | None = None) -> Compared:
    """Read a file written by ``python -m benchmarks --json`` (labelled with its name).

    Raises `ReportFileError` naming the file and what is wrong with it.
    """
    data = read_json(path)
    try:
        return compared_of(data, label or str(path))
    except ReportFileError as exc:
        msg = f"{path}: {exc}"
        raise ReportFileError(msg) from None


def figures_of(figures: Iterable[Figure]) -> tuple[Measured, ...]:
    """This run's figures as `Measured` ones (through their JSON, as a saved report has them)."""
    return tuple(_measured(f.to_json(), index) for index, f in enumerate(figures, 1))


def beyond_spread(a: Measured, b: Measured) -> bool | None:
    """Whether the min..max ranges of `a`'s and `b`'s rounds do not overlap.

    None when either side lacks rounds to judge by (a single measurement, or
    no spread recorded): a lone value has no spread to be beyond. See the
    module's docstring for why this test, and how often chance passes it.
    """
    if a.rounds < 2 or b.rounds < 2:
        return None
    if a.low is None or a.high is None or b.low is None or b.high is None:
        return None
    return a.high < b.low or b.high < a.low


def chance_beyond_spread(rounds_a: int, rounds_b: int) -> float:
    """How often identical sides' ranges fail to overlap by chance alone: 2 / C(n + m, n)."""
    return 2 / math.comb(rounds_a + rounds_b, rounds_a)


@final
@attrs.frozen
class Row:
    """One figure of the comparison: A's and B's, or only one of them."""

    a: Measured | None
    """A's figure, None when only B has it."""
    b: Measured | None
    """B's figure, None when only A has it."""

    @property
    def figure(self) -> Measured:
        """Whichever side has it (A's when both)."""
        found = self.a or self.b
        assert found is not None, "a row has at least one side"
        return found

    @property
    def ratio(self) -> float | None:
        """B / A, when both values are there and comparable."""
        a, b = self.a, self.b
        if a is None or b is None or a.value is None or b.value is None or a.unit != b.unit:
            return None
        if a.value == b.value:
            return 1.0  # 0 against 0 too: the same count is no change
        if a.value == 0:
            return None
        return b.value / a.value

    def verdict(self) -> str:
        """``beyond spread``, ``within spread``, or why it cannot say."""
        if self.a is None or self.b is None:
            return ""
        if self.a.unit != self.b.unit:
            return "units differ"
        judged = beyond_spread(self.a, self.b)
        if judged is None:
            return UNJUDGED
        return BEYOND if judged else WITHIN


def pair(a: Compared, b: Compared) -> list[Row]:
    """A row per figure: A's order first, then the figures only B has, in B's order."""
    theirs = {f.key: f for f in b.figures}
    ours = {f.key for f in a.figures}
    rows = [Row(f, theirs.get(f.key)) for f in a.figures]
    rows += [Row(None, f) for f in b.figures if f.key not in ours]
    return rows


def _change(row: Row) -> tuple[str, str]:
    ratio = row.ratio
    if ratio is None:
        return "n/a", "n/a"
    return f"{ratio:.3f}", f"{(ratio - 1) * 100:+.1f} %"


def _table(rows: Sequence[Row]) -> list[str]:
    header = ("scenario", "figure", "A", "A min..max", "B", "B min..max", "B/A", "change", "")
    cells = [header]
    for row in rows:
        if row.a is None or row.b is None:
            continue
        ratio, change = _change(row)
        cells.append(
            (
                row.figure.scenario,
                row.figure.name,
                row.a.text(),
                row.a.spread(),
                row.b.text(),
                row.b.spread(),
                ratio,
                change,
                row.verdict(),
            )
        )
    numeric = {2, 4, 6, 7}  # right-aligned: the values and the change
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    lines = []
    for number, line in enumerate(cells):
        text = "  ".join(
            cell.rjust(width) if index in numeric else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(line, widths, strict=True))
        )
        lines.append(text.rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    return lines


def _notes(rows: Sequence[Row], a: Compared, b: Compared) -> list[str]:
    notes = []
    if a.preset != b.preset:
        notes.append(
            f"A is a {a.preset} run and B a {b.preset} run: a figure of the same name "
            "may be of batches of different sizes"
        )
    if a.machine and b.machine:
        here = [a.machine.get(k) for k in MACHINE_KEYS]
        there = [b.machine.get(k) for k in MACHINE_KEYS]
        if here != there:
            notes.append("A and B ran on different machines or Pythons: compare with care")
    counts = sorted(
        {
            (row.a.rounds, row.b.rounds)
            for row in rows
            if row.a is not None and row.b is not None and row.a.rounds > 1 and row.b.rounds > 1
        }
    )
    for n, m in counts:
        chance = chance_beyond_spread(n, m) * 100
        notes.append(
            f"{BEYOND}: the min..max ranges of the rounds do not overlap; with {n} rounds "
            f"against {m}, chance alone does that {chance:.1f} % of the time"
        )
    return notes


def render(a: Compared, b: Compared, notes: Sequence[str] = ()) -> str:
    """The comparison as text: who A and B are, the table, the figures only one side has.

    `notes` are printed at the end, after the comparison's own.
    """
    rows = pair(a, b)
    lines = [f"A: {a.label} ({a.about})", f"B: {b.label} ({b.about})", ""]
    both = [row for row in rows if row.a is not None and row.b is not None]
    if both:
        lines += _table(rows)
        beyond = sum(row.verdict() == BEYOND for row in both)
        lines.append(f"{len(both)} figures in both, {beyond} of them {BEYOND}")
    else:
        lines.append("no figure is in both")
    for side, label, only in (
        ("A", a.label, [row.a for row in rows if row.b is None]),
        ("B", b.label, [row.b for row in rows if row.a is None]),
    ):
        if only:
            lines += ["", f"only in {side} ({label}):"]
            lines += [f"  {f.scenario}: {f.name} = {f.text()}" for f in only if f is not None]
    every_note = [*_notes(rows, a, b), *notes]
    if every_note:
        lines.append("")
        lines += [f"note: {note}" for note in every_note]
    return "\n".join(lines)
