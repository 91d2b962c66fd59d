"""The command line: ``python -m actors demo``, ``serve``, ``cluster``, ``bench``, ….

``serve`` lives in `actors.server` and needs the ``server`` extra (the MCP
SDK and httptools), ``cluster`` in `actors.cluster` and the ``cluster``
extra (Ray besides), ``bench`` and ``check-isolation`` in `actors.harness` and the
``harness`` extra; each is imported only on its path, so ``demo`` and the library
work without them.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Final

import trio

from ._argparse import Parser, command_name
from ._demo import run_demo

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["main"]


_SERVE_HELP: Final = "serve tool modules over MCP (stdio, or Streamable HTTP with --http)"
_CLUSTER_HELP: Final = "serve tool modules over MCP Streamable HTTP from shards on Ray"
_STATE_HELP: Final = "look at and repair stored state: list, show, export, import, delete"
_INSPECT_HELP: Final = "open your modules in the MCP Inspector (Node.js), served over stdio"
_BENCH_HELP: Final = "load-test any MCP server (a module, a stdio command or a URL) with a call mix"
_ISOLATION_HELP: Final = "check that no session of any MCP server ever sees another's state"


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=command_name(),
        description="An actor-per-context runtime for stateful MCP tool servers.",
        epilog=f"'{command_name()} COMMAND --help' lists a command's options.",
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
    # Listed for --help only: `main` hands serve's arguments to its own parser.
    commands.add_parser("serve", help=_SERVE_HELP, add_help=False)
    commands.add_parser("cluster", help=_CLUSTER_HELP, add_help=False)
    commands.add_parser("state", help=_STATE_HELP, add_help=False)
    commands.add_parser("inspect", help=_INSPECT_HELP, add_help=False)
    commands.add_parser("bench", help=_BENCH_HELP, add_help=False)
    commands.add_parser("check-isolation", help=_ISOLATION_HELP, add_help=False)
    return parser


def _require(command: str, extra: str, packages: Sequence[str]) -> None:
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        _parser().error(
            f"{command} needs the '{extra}' extra ({', '.join(missing)} missing): "
            f"pip install 'mcp-actors[{extra}]'"
        )


def _serve(argv: Sequence[str]) -> int:
    _require("serve", "server", ("mcp", "httptools"))
    from .server import main as serve_main  # lazily: it needs the extra

    return serve_main(argv, prog=f"{command_name()} serve")


def _cluster(argv: Sequence[str]) -> int:
    _require("cluster", "cluster", ("mcp", "httptools", "ray", "psycopg"))
    from .cluster._cli import main as cluster_main  # lazily: it needs the extra

    return cluster_main(argv, prog=f"{command_name()} cluster")


def _inspect(argv: Sequence[str]) -> int:
    _require("inspect", "server", ("mcp", "httptools"))
    from .server._inspect import main as inspect_main  # lazily: it needs the extra

    return inspect_main(argv, prog=f"{command_name()} inspect")


def _bench(argv: Sequence[str]) -> int:
    _require("bench", "harness", ("mcp", "httptools", "rich", "hdrh"))
    from .harness._cli import main as bench_main  # lazily: it needs the extra

    return bench_main(argv, prog=f"{command_name()} bench")


def _check_isolation(argv: Sequence[str]) -> int:
    _require("check-isolation", "harness", ("mcp", "httptools", "hypothesis"))
    from .harness._isolation_cli import main as check_main  # lazily: it needs the extra

    return check_main(argv, prog=f"{command_name()} check-isolation")


def _state(argv: Sequence[str]) -> int:
    from .store._cli import main as state_main  # lazily: only this command needs it

    return state_main(argv, prog=f"{command_name()} state")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:
        return _serve(arguments[1:])
    if arguments[:1] == ["cluster"]:
        return _cluster(arguments[1:])
    if arguments[:1] == ["state"]:
        return _state(arguments[1:])
    if arguments[:1] == ["inspect"]:
        return _inspect(arguments[1:])
    if arguments[:1] == ["bench"]:
        return _bench(arguments[1:])
    if arguments[:1] == ["check-isolation"]:
        return _check_isolation(arguments[1:])
    args = _parser().parse_args(arguments)
    ok = trio.run(run_demo, args.sessions, args.assistants, args.goals)
    return 0 if ok else 1
