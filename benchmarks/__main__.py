"""``python -m benchmarks``: run the suite, print the table and the report.

    python -m benchmarks                       # the quick suite, about two minutes on 2 cores
    python -m benchmarks --full                # the larger sizes
    python -m benchmarks --only call_path,churn --json out.json --plot charts/

Exits 0 whatever the numbers: missed targets are reported, not raised.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from actors._argparse import Parser, with_environment

from ._suite import PRESETS, SCENARIOS, run_suite

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["main"]


def _names(values: Sequence[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def parser() -> argparse.ArgumentParser:
    """The command line."""
    cli = Parser(
        prog="python -m benchmarks",
        description="Benchmark and stress the actor runtime beside its baselines.",
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
    cli.add_argument("--json", type=Path, metavar="PATH", help="write machine-readable results")
    cli.add_argument(
        "--markdown",
        type=Path,
        metavar="PATH",
        help="write the Markdown report (default: print it)",
    )
    cli.add_argument("--plot", type=Path, metavar="DIR", help="write PNG charts (needs matplotlib)")
    return with_environment(cli)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks as the command line says; always 0 once they ran."""
    cli = parser()
    args = cli.parse_args(argv)
    only = _names(args.only)
    unknown = [name for name in only if name not in SCENARIOS]
    if unknown:
        cli.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    preset = "full" if args.full else "tiny" if args.tiny else "quick"
    report = run_suite(PRESETS[preset], only)
    print(file=sys.stderr)
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
    else:
        print()
        print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
