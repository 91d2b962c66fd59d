"""``mcp-actors inspect``: open a module in the MCP Inspector, served over stdio.

The Inspector (``npx @modelcontextprotocol/inspector``, Node.js) starts the
server itself and shows its tools, to call by hand; ``mcp-actors inspect``
takes ``serve``'s options, checks them as ``serve`` does (so a typo in
``--module`` is one line here, not a blank page there), and hands the
Inspector the matching ``serve`` command. What follows ``--`` goes to the
Inspector (``-- --cli --method tools/list`` runs it without a browser).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, Final

from .._argparse import with_environment
from ._cli import checked_options
from ._cli import parser as serve_parser

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["INSPECTOR", "inspector_command", "main", "parser"]

_DESCRIPTION: Final = (
    "Open the modules in the MCP Inspector (Node.js), which starts the server over stdio and "
    "shows its tools in a web page. Takes the options of 'serve' and checks them first; what "
    "follows '--' goes to the Inspector ('-- --cli --method tools/list' prints the tools "
    "without a browser)."
)

INSPECTOR: Final = "@modelcontextprotocol/inspector@2"
"""The npm package run, the major version the command was tested with (``$MCP_ACTORS_INSPECTOR``
names another)."""


def inspector_command(serve: Sequence[str], inspector: Sequence[str], npx: str) -> list[str]:
    """The command that runs the Inspector (with `inspector`'s options) on ``serve SERVE``."""
    package = os.environ.get("MCP_ACTORS_INSPECTOR", INSPECTOR)
    return [npx, "-y", package, *inspector, sys.executable, "-m", "actors", "serve", *serve]


def parser(prog: str = "mcp-actors inspect") -> argparse.ArgumentParser:
    """``serve``'s parser, described and used as ``inspect``'s."""
    cli = serve_parser(prog)
    cli.usage = f"{prog} [serve options] [-- inspector options]"
    cli.description = _DESCRIPTION
    return cli


def main(argv: Sequence[str] | None = None, prog: str = "mcp-actors inspect") -> int:
    """Check `argv` as ``serve`` would, then become the Inspector running that server."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    split = arguments.index("--") if "--" in arguments else len(arguments)
    serve, inspector = arguments[:split], arguments[split + 1 :]
    cli = with_environment(parser(prog))
    args = cli.parse_args(serve)
    options = checked_options(cli, args)
    if options.http is not None:
        cli.error("--http: the Inspector starts the server itself, over stdio; leave --http out")
    npx = shutil.which("npx")
    if npx is None:
        cli.exit(1, f"{prog}: error: the Inspector runs on Node.js: install Node.js 22+ (npx)\n")
    command = inspector_command(serve, inspector, npx)
    sys.stderr.flush()
    os.execv(npx, command)  # the Inspector takes over this process: its signals, its exit
