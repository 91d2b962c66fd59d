"""The command line: ``python -m actors demo``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import trio

from ._demo import run_demo

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m actors",
        description="An actor-per-context runtime for stateful MCP tool servers.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="run interleaved calls from several sessions and show each saw only its own"
    )
    demo.add_argument("--sessions", type=int, default=3, help="how many sessions (default 3)")
    demo.add_argument(
        "--assistants", type=int, default=2, help="assistants per session (default 2)"
    )
    demo.add_argument("--goals", type=int, default=4, help="goals each context creates (default 4)")
    demo.set_defaults(run=_demo)
    return parser


def _demo(args: argparse.Namespace) -> int:
    ok = trio.run(run_demo, args.sessions, args.assistants, args.goals)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = _parser().parse_args(argv)
    exit_code: int = args.run(args)
    return exit_code
