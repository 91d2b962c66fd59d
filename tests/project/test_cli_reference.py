"""The command-line reference (``docs/gen_cli.py``): every option of every parser, in tables.

The page is rendered here as the site build renders it, without MkDocs: the script's
``render()``. The commands are listed here on their own, not taken from the script, so a
command the script leaves out is caught.
"""

from __future__ import annotations

import argparse
import importlib
import re
import runpy
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from actors._cli import _parser as top_parser

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# Each `mcp-actors` command and the module whose `parser(prog)` builds its command line.
COMMANDS = {
    "serve": "actors.server._cli",
    "cluster": "actors.cluster._cli",
    "state": "actors.store._cli",
    "inspect": "actors.server._inspect",
    "bench": "actors.harness._cli",
    "check-isolation": "actors.harness._isolation_cli",
}
WIDTH = 88  # the longest code line the site shows unclipped
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
# A pipe that separates table cells: not escaped, and not inside a code span.
CELL_SEPARATOR = re.compile(r"(`[^`]*`)|(?<!\\)\|")


def _generator() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))  # `benchmarks` is imported from the checkout
    try:
        return runpy.run_path(str(DOCS / "gen_cli.py"), run_name="gen_cli")
    finally:
        sys.path.remove(str(ROOT))


@pytest.fixture(scope="module")
def page() -> str:
    """The page's Markdown, as the build writes it."""
    text: str = _generator()["render"]()
    return text


def sections(page: str) -> dict[str, str]:
    """Each command's heading (`mcp-actors serve`) and its text, to the next heading."""
    parts = re.split(r"^#{2,3} `([^`]+)`\n", page, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command and subcommand the page documents, and its parser."""
    top = top_parser()
    yield "mcp-actors", top
    yield "mcp-actors demo", _subcommands(top)["demo"]
    for command, module in COMMANDS.items():
        prog = f"mcp-actors {command}"
        parser = importlib.import_module(module).parser(prog)
        yield prog, parser
        for name, subcommand in _subcommands(parser).items():
            yield f"{prog} {name}", subcommand
    sys.path.insert(0, str(ROOT))
    try:
        benchmarks = importlib.import_module("benchmarks.__main__")
    finally:
        sys.path.remove(str(ROOT))
    yield "python -m benchmarks", benchmarks.parser()
    yield "python -m benchmarks compare", benchmarks.compare_parser()


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def leading_cells(row: str) -> str:
    """A row's option and argument cells: where its option or positional is named."""
    return " ".join(row.strip("| ").split(" | ")[:2])


def test_every_command_is_listed_here() -> None:
    """A new `mcp-actors` command fails this test until it is added to COMMANDS."""
    assert set(_subcommands(top_parser())) == {"demo", *COMMANDS}


def test_every_option_of_every_parser_is_a_row_of_its_section(page: str) -> None:
    """Each option string (and each positional's name) heads a row of its command's tables."""
    found = sections(page)
    for prog, parser in parsers():
        assert prog in found, f"no section for {prog}"
        rows = table_rows(found[prog])
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            names = action.option_strings or [action.metavar or action.dest]
            for name in names:
                assert any(f"`{name}`" in leading_cells(row) for row in rows), (prog, name)
        for name in _subcommands(parser):
            assert f"(#{f'{prog} {name}'.replace(' ', '-')})" in found[prog], (prog, name)


def test_the_page_is_tables_not_a_help_dump(page: str) -> None:
    """No block of argparse's --help output; a usage line of each command, within 88."""
    for language, block in FENCE.findall(page):
        assert not re.search(r"^\s*(usage:|options:|-h, --help)", block, re.MULTILINE), block
        assert "show this help message and exit" not in block
        if language == "text" and block.startswith(("mcp-actors", "python -m")):
            assert all(len(line) <= WIDTH for line in block.splitlines()), block
    usages = [block for _, block in FENCE.findall(page) if block.split(" ", 1)[0] == "mcp-actors"]
    assert len(usages) >= len(list(parsers())) - 2  # all but the two of python -m benchmarks
    assert page.count("| option | argument | default | what it does |") >= len(usages)


def test_every_table_row_has_its_columns(page: str) -> None:
    """A `|` in help text is escaped: each row has as many cells as its table's header."""
    for prog, text in sections(page).items():
        columns = 0
        for row in table_rows(text):
            separators = [match for match in CELL_SEPARATOR.finditer(row) if not match[1]]
            if row.startswith(("| option", "| command")):
                columns = len(separators)
            assert len(separators) == columns, (prog, row)


def test_the_defaults_are_the_built_in_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """An MCP_ACTORS_ variable of whoever builds the site does not become a default."""
    monkeypatch.setenv("MCP_ACTORS_SHARDS", "7")
    monkeypatch.setenv("MCP_ACTORS_STATE", "sqlite:///builder-only.db")
    text = sections(_generator()["render"]())
    (shards,) = [row for row in table_rows(text["mcp-actors cluster"]) if "`--shards`" in row]
    assert shards.split(" | ")[2] == "`2`"
    assert "builder-only" not in "".join(text.values())


def test_the_anchors_other_pages_link_to_exist(page: str) -> None:
    """``cli.md#mcp-actors-serve`` and the others name a heading of the page."""
    links = {
        anchor
        for path in DOCS.rglob("*.md")
        for anchor in re.findall(r"cli\.md#([\w-]+)", path.read_text(encoding="utf-8"))
    }
    assert links, "no page links to a section of the command-line reference"
    headings = {prog.replace(" ", "-") for prog in sections(page)}
    assert links <= headings
