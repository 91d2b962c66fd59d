"""``python -m benchmarks``: run the suite, print the table and the report.

    python -m benchmarks                       # the quick suite, about two minutes on 2 cores
    python -m benchmarks --full                # the larger sizes
    python -m benchmarks --only call_path,churn --json out.json --plot charts/
    python -m benchmarks --only call_path --against main      # this code beside main's
    python -m benchmarks compare before.json after.json       # two saved runs side by side

Exits 0 whatever the numbers: missed targets are reported, not raised. Bad
input (an unreadable report, an unknown commit) exits 2, a failed round of
``--against`` 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from actors._argparse import Parser, with_environment

from ._against import (
    ROOT,
    AgainstError,
    RoundError,
    is_saved_report,
    resolve_commit,
    run_interleaved,
)
from ._call_path import NAME as CALL_PATH
from ._compare import Compared, ReportFileError, compared_of, figures_of, read_report, render
from ._report import Report
from ._suite import PRESETS, SCENARIOS, run_suite, stderr_progress

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from ._against import Interleaved
    from ._suite import Sizes

__all__ = ["compare", "compare_parser", "main", "parser"]


def _names(values: Sequence[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def parser() -> argparse.ArgumentParser:
    """The command line."""
    cli = Parser(
        prog="python -m benchmarks",
        description="Benchmark and stress the actor runtime beside its baselines.",
        epilog="'python -m benchmarks compare A.json B.json' compares two saved runs "
        "(see its --help).",
    )
    size = cli.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="run the larger sizes (many minutes)")
    size.add_argument("--tiny", action="store_true", help="run tiny sizes (a smoke test, seconds)")
    cli.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these scenarios (repeatable or comma-separated): {', '.join(SCENARIOS)}",
    )
    cli.add_argument(
        "--against",
        metavar="REF",
        help="print this run beside another instead of the report: a saved --json file "
        "(its figures of the scenarios that ran), or a git commit, whose call_path "
        "(--only call_path) runs interleaved with this checkout's, each round in a "
        "subprocess of its own, and whose ratio figures are shown beside this one's",
    )
    cli.add_argument("--json", type=Path, metavar="PATH", help="write machine-readable results")
    cli.add_argument(
        "--markdown",
        type=Path,
        metavar="PATH",
        help="write the Markdown report (default: print it, unless --against)",
    )
    cli.add_argument("--plot", type=Path, metavar="DIR", help="write PNG charts (needs matplotlib)")
    return with_environment(cli)


def compare_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m benchmarks compare``."""
    cli = Parser(
        prog="python -m benchmarks compare",
        description="Print each figure of two saved runs side by side: A's value, B's, "
        "B/A, the change in percent, and whether the difference is beyond the spread of "
        "the rounds (their min..max ranges do not overlap). Figures only one run has are "
        "listed apart. Exits 2 when a file is missing or no benchmark report.",
    )
    cli.add_argument("a", type=Path, metavar="A.json", help="the reference run (--json PATH)")
    cli.add_argument("b", type=Path, metavar="B.json", help="the run compared with it")
    return cli


def compare(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks compare A.json B.json``: 0, or 2 on a bad file."""
    cli = compare_parser()
    args = cli.parse_args(argv)
    try:
        a, b = read_report(args.a), read_report(args.b)
    except ReportFileError as exc:
        cli.error(str(exc))
    print(render(a, b))
    return 0


def _beside_saved(saved: Compared, report: Report) -> str:
    """This run beside a saved one, whose figures are kept for the scenarios that ran only."""
    ran = {scenario.name for scenario in report.scenarios}
    kept = attrs.evolve(saved, figures=tuple(f for f in saved.figures if f.scenario in ran))
    return render(kept, compared_of(report.to_json(), "this run"))


def _beside_commit(interleaved: Interleaved, sizes: Sizes) -> str:
    """Both versions' ratio figures: each is paired within its own process, round by round."""
    sides = [
        Compared(
            label,
            about,
            sizes.name,
            tuple(f for f in figures_of(result.figures) if f.unit == "x"),
        )
        for label, about, result in (
            (interleaved.other_label, f"commit {interleaved.commit}", interleaved.other),
            (interleaved.this_label, str(ROOT), interleaved.this),
        )
    ]
    note = (
        f"{CALL_PATH} at the {sizes.name} sizes, {sizes.rounds} rounds a side, each round "
        "in a subprocess of its own, A's and B's in turn; the ratios pair each runtime's "
        "batch with the baselines' of the same process"
    )
    return render(*sides, notes=[note])


def _run_against(
    cli: argparse.ArgumentParser, ref: str, sizes: Sizes, only: list[str]
) -> tuple[Report, str]:
    """This run and its comparison with `ref`; usage errors exit 2, a failed round 1."""
    if is_saved_report(ref):
        try:
            saved = read_report(Path(ref))
        except ReportFileError as exc:
            cli.error(f"--against: {exc}")
        report = run_suite(sizes, only)
        return report, _beside_saved(saved, report)
    if only != [CALL_PATH]:
        cli.error(f"--against a commit runs {CALL_PATH} only: add --only {CALL_PATH}")
    try:
        commit = resolve_commit(ref)
        interleaved = run_interleaved(sizes, commit, stderr_progress())
    except AgainstError as exc:
        cli.error(f"--against: {exc}")
    except RoundError as exc:
        print(f"{cli.prog}: --against {ref}: {exc}", file=sys.stderr)
        sys.exit(1)
    report = Report(sizes.name, (interleaved.this,), interleaved.seconds)
    return report, _beside_commit(interleaved, sizes)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks (or ``compare``) as the command line says; 0 once they ran."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["compare"]:
        return compare(arguments[1:])
    cli = parser()
    args = cli.parse_args(arguments)
    only = _names(args.only)
    unknown = [name for name in only if name not in SCENARIOS]
    if unknown:
        cli.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    sizes = PRESETS["full" if args.full else "tiny" if args.tiny else "quick"]
    comparison = None
    if args.against is None:
        report = run_suite(sizes, only)
    else:
        report, comparison = _run_against(cli, args.against, sizes, only)
    print(file=sys.stderr)
    if comparison is None:
        report.print_table(sys.stdout)
    if args.json is not None:
        report.write_json(args.json)
        print(f"JSON written: {args.json}", file=sys.stderr)
    if args.plot is not None:
        for line in report.plot(args.plot):
            print(line, file=sys.stderr)
    markdown = report.to_markdown()
    if args.markdown is not None:
        args.markdown.write_text(markdown + "\n")
        print(f"Markdown written: {args.markdown}", file=sys.stderr)
    elif comparison is None:
        print()
        print(markdown)
    if comparison is not None:
        print(comparison)
    return 0


if __name__ == "__main__":
    sys.exit(main())
