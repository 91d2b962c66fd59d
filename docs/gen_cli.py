"""Write the command-line reference (``cli.md``) from the argument parsers themselves.

mkdocs-gen-files runs this at build time, so the page is what ``--help`` prints for the
code being documented and cannot drift from it. Each parser is imported from where the
command builds it; one that cannot be imported (an extra is missing) fails the build
instead of leaving a command out.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import mkdocs_gen_files

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 80  # help text wraps to fit the page, whatever terminal runs the build
PROG = "mcp-actors"

INTRO = f"""\
# Command line

Installing the package installs the `{PROG}` command; `python -m actors` is the same command.
Every section below is the command's `--help`, generated from its argument parser when this
site is built. Each option that takes a value can also come from an environment variable, as
its help says.
"""


def _load(module: str, attribute: str) -> Callable[..., argparse.ArgumentParser]:
    try:
        factory: Callable[..., argparse.ArgumentParser] = getattr(
            importlib.import_module(module), attribute
        )
    except ImportError as exc:
        msg = (
            f"docs/gen_cli.py: cannot import {module}.{attribute} for the command-line reference "
            f"({exc}); install the docs extra: pip install -e '.[docs]'"
        )
        raise RuntimeError(msg) from exc
    return factory


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    # argparse keeps its subparsers in a private action; it has looked like this since 2.7.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser, prog: str) -> str:
    parser.prog = prog
    parser.formatter_class = functools.partial(parser.formatter_class, width=WIDTH)
    return parser.format_help().rstrip()


def _sections() -> Iterator[tuple[str, str, str]]:
    """(heading, prose, help text) for each command, in the order a reader meets them."""
    top = _load("actors._cli", "_parser")()
    yield PROG, "", _help(top, PROG)
    demo = _subcommands(top)["demo"]
    yield f"{PROG} demo", "", _help(demo, f"{PROG} demo")
    for command, module in (
        ("serve", "actors.server._cli"),
        ("cluster", "actors.cluster._cli"),
        ("state", "actors.store._cli"),
        ("inspect", "actors.server._inspect"),
        ("bench", "actors.harness._cli"),
        ("check-isolation", "actors.harness._isolation_cli"),
    ):
        prog = f"{PROG} {command}"
        yield prog, "", _help(_load(module, "parser")(prog), prog)
    yield (
        "python -m benchmarks",
        "The benchmark harness runs from a checkout of the repository (it is not installed "
        "with the package); its optional parts need the `bench` extra.",
        _help(_load("benchmarks.__main__", "parser")(), "python -m benchmarks"),
    )
    yield (
        "python -m benchmarks compare",
        "",
        _help(_load("benchmarks.__main__", "compare_parser")(), "python -m benchmarks compare"),
    )


def render() -> str:
    """The page's Markdown."""
    parts = [INTRO]
    for heading, prose, text in _sections():
        parts.append(f"## `{heading}`\n")
        if prose:
            parts.append(f"{prose}\n")
        parts.append(f"```text\n{text}\n```\n")
    return "\n".join(parts)


def main() -> None:
    # `benchmarks` is not installed with the package: import it from this checkout.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # The parsers name the command as it was run (`command_name()` reads argv[0]): here it
    # is MkDocs, and the page shows the installed command.
    argv0, sys.argv[0] = sys.argv[0], PROG
    try:
        text = render()
    finally:
        sys.argv[0] = argv0
    with mkdocs_gen_files.open("cli.md", "w") as page:
        page.write(text)


main()
