"""``python -m benchmarks``: run the suite, print the table and the report.

    python -m benchmarks                       # the quick suite, about two minutes on 2 cores
    python -m benchmarks --full                # the larger sizes
    python -m benchmarks --only call_path,churn --json out.json --plot charts/
    python -m benchmarks --only call_path --against main      # this code beside main's
    python -m benchmarks compare before.json after.json       # two saved runs side by side
    python -m benchmarks bench --url http://127.0.0.1:8000/mcp --tool t   # any MCP server
    python -m benchmarks --json run.json       # run.json rewritten as each scenario ends
    python -m benchmarks --resume run.json     # the scenarios run.json has no record of yet
    python -m benchmarks --failed run.json     # again, those run.json records as failed

Exits 0 whatever the numbers: missed targets are reported, not raised. A
scenario that raised is recorded as failed and the others run: the exit
status is then 1 (so is a failed round of ``--against``). Bad input (an
unreadable report, an unknown commit) exits 2; Ctrl-C 130, once the
scenarios that ended are saved.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, final

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
from ._progress import terminal_view
from ._report import Report, ScenarioResult, machine
from ._resume import read_saved
from ._suite import PRESETS, SCENARIOS, run_suite, stderr_progress

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence

    from ._against import Interleaved
    from ._sizes import Sizes
    from ._suite import Scenario

__all__ = ["compare", "compare_parser", "main", "parser"]


def _names(values: Sequence[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def parser() -> argparse.ArgumentParser:
    """The command line."""
    cli = Parser(
        prog="python -m benchmarks",
        description="Benchmark and stress the actor runtime beside its baselines.",
        epilog="'python -m benchmarks compare A.json B.json' compares two saved runs; "
        "'python -m benchmarks bench ...' loads any MCP server, as 'mcp-actors bench' does "
        "(see their --help).",
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
    cli.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="write machine-readable results, rewritten as each scenario ends",
    )
    again = cli.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        type=Path,
        metavar="FILE",
        help="go on with the run saved in FILE (by --json): run, at its sizes, the scenarios "
        "it planned that have no record in it yet, keeping its figures; written into FILE "
        "(or --json PATH)",
    )
    again.add_argument(
        "--failed",
        type=Path,
        metavar="FILE",
        help="run again the scenarios FILE records as failed, at its sizes, keeping its "
        "other figures; written into FILE (or --json PATH)",
    )
    cli.add_argument("--markdown", type=Path, metavar="PATH", help="write the Markdown report")
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


@final
@attrs.frozen
class _Plan:
    """What a run is to do: at which sizes, which scenarios, what it keeps, where it saves."""

    sizes: Sizes
    only: list[str]
    """The scenarios to run (empty: every one)."""
    kept: tuple[ScenarioResult, ...] = ()
    """Results of a saved run, shown and saved again, not run again."""
    planned: tuple[str, ...] = ()
    """What the whole run is for, when it goes on with a saved one."""
    output: Path | None = None
    """Where the JSON is written as each scenario ends."""

    @property
    def done(self) -> bool:
        """Whether the saved run it goes on with has nothing left to run."""
        return bool(self.kept) and not self.only


def _plan(
    cli: argparse.ArgumentParser, args: argparse.Namespace, scenarios: Mapping[str, Scenario]
) -> _Plan:
    """The run the command line asks for; a usage error exits 2."""
    only = _names(args.only)
    unknown = [name for name in only if name not in scenarios]
    if unknown:
        cli.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(scenarios)}")
    asked = "full" if args.full else "tiny" if args.tiny else None
    path = args.resume or args.failed
    if path is None:
        return _Plan(PRESETS[asked or "quick"], only, output=args.json)
    option = "--resume" if args.resume else "--failed"
    if only or args.against:
        cli.error(f"{option} runs what {path} says: it takes no --only or --against")
    try:
        saved = read_saved(path)
    except ReportFileError as exc:
        cli.error(f"{option}: {exc}")
    if saved.preset not in PRESETS or asked not in (None, saved.preset):
        cli.error(f"{option}: {path} is a {saved.preset} run; run it at its own sizes")
    other = saved.other_machine(machine())
    if other is not None:
        cli.error(f"{option}: {path} ran on another machine ({other}); start a new run")
    unknown = [name for name in saved.planned if name not in scenarios]
    if unknown:
        cli.error(f"{option}: {path} plans scenarios this harness lacks: {', '.join(unknown)}")
    names = saved.missing() if args.resume else saved.failed()
    return _Plan(
        PRESETS[saved.preset],
        names,
        tuple(r for r in saved.results if r.name not in names),
        saved.planned,
        args.json or path,
    )


def _run(plan: _Plan, scenarios: Mapping[str, Scenario]) -> Report:
    """Run `plan`, saving its JSON as each scenario ends."""
    if plan.done:  # the saved run as it is, its file left untouched
        print("nothing to run: the saved run has no scenario left to run", file=sys.stderr)
        return Report(plan.sizes.name, plan.kept, 0.0, planned=plan.planned)
    output = plan.output
    with terminal_view(stderr_progress()) as view:
        return run_suite(
            plan.sizes,
            plan.only,
            view=view,
            kept=plan.kept,
            planned=plan.planned,
            saved=None if output is None else lambda report: report.write_json(output),
            scenarios=scenarios,
        )


def _interrupted(plan: _Plan) -> int:
    """Say what Ctrl-C kept; the exit status of a run stopped by SIGINT."""
    if plan.output is None:
        said = "nothing saved (--json PATH saves each scenario as it ends)"
    else:
        said = (
            f"the scenarios that ended are in {plan.output}; "
            f"'python -m benchmarks --resume {plan.output}' runs the rest"
        )
    print(f"\ninterrupted: {said}", file=sys.stderr)
    return 130


def main(
    argv: Sequence[str] | None = None, *, scenarios: Mapping[str, Scenario] = SCENARIOS
) -> int:
    """Run the benchmarks (or ``compare``) as the command line says.

    0 once they ran, 1 when a scenario failed (the others' figures are kept).
    `scenarios` is the registry ``--only`` and the run choose from.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["compare"]:
        return compare(arguments[1:])
    if arguments[:1] == ["bench"]:
        from actors.harness._cli import main as bench_main  # the harness, for any server

        return bench_main(arguments[1:], prog="python -m benchmarks bench")
    cli = parser()
    args = cli.parse_args(arguments)
    plan = _plan(cli, args, scenarios)
    comparison = None
    try:
        if args.against is None:
            report = _run(plan, scenarios)
        else:
            report, comparison = _run_against(cli, args.against, plan.sizes, plan.only)
    except KeyboardInterrupt:
        return _interrupted(plan)
    print(file=sys.stderr)
    if comparison is None:
        report.print_table(sys.stdout)  # the one table: the Markdown goes to --markdown only
    else:
        print(comparison)
    if plan.output is not None and not plan.done:
        report.write_json(plan.output)
        print(f"JSON written: {plan.output}", file=sys.stderr)
    if args.plot is not None:
        for line in report.plot(args.plot):
            print(line, file=sys.stderr)
    if args.markdown is not None:
        args.markdown.write_text(report.to_markdown() + "\n")
        print(f"Markdown written: {args.markdown}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
