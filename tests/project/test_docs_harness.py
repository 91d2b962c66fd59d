"""The harness guides' examples do what the pages say.

``docs/guides/harness.md`` and ``docs/guides/isolation-check.md``: every mix file on them
loads, every command line is one the command's parser takes, and those that can run here
(this project's modules, its own server, through its handles too) run; the Python
examples are included from ``docs_src/harness`` and run on a real server; the JSON the
load guide shows has the members a run writes.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio

from actors.harness import load_mix
from actors.harness._cli import parser as bench_parser
from actors.harness._isolation_cli import parser as isolation_parser

from .._mcp_helpers import http_server
from .._processes import run_leaving_nothing

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

ROOT: Final = Path(__file__).resolve().parents[2]
LOAD_PAGE: Final = ROOT / "docs" / "guides" / "harness.md"
ISOLATION_PAGE: Final = ROOT / "docs" / "guides" / "isolation-check.md"
PAGES: Final = (LOAD_PAGE, ISOLATION_PAGE)
LOAD_EXAMPLE: Final = ROOT / "docs_src" / "harness" / "load_from_python.py"
INCLUDE: Final = re.compile(r'--8<-- "([^":]+)(?::[^"]*)?"')
GUARD: Final = 180  # seconds a command may take on a busy machine before the test fails
# What the pages' shell variables stand for.
SHELL_VALUES: Final = {"$!": "4242", '"$FASTMCP_PID"': "4343", '"$TOKEN"': "a-token"}
PARSERS: Final[dict[str, Callable[[], argparse.ArgumentParser]]] = {
    "bench": bench_parser,
    "check-isolation": isolation_parser,
}


def _blocks(page: Path, language: str) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def _command_lines(page: Path) -> list[list[str]]:
    """The ``mcp-actors`` command lines of the page's shell blocks, as argument lists."""
    lines = []
    for block in _blocks(page, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            for variable, value in SHELL_VALUES.items():
                line = line.replace(variable, value)
            words = shlex.split(line, comments=True)
            if words[:1] == ["mcp-actors"] and words[1] in PARSERS:
                lines.append(words[1:])
    return lines


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_block_says_its_language_and_python_is_included(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert all(opening.strip() for opening in re.findall(r"^```(.*)$", text, re.M)[::2])
    for block in _blocks(page, "python"):
        assert INCLUDE.fullmatch(block.strip()), f"{page.name}: inline Python:\n{block}"
    for path in INCLUDE.findall(text):
        assert (ROOT / path).is_file(), f"{page.name} includes {path}, which is not there"


def test_every_mix_on_the_load_page_loads(tmp_path: Path) -> None:
    mixes = _blocks(LOAD_PAGE, "toml")
    assert len(mixes) == 2
    for number, mix in enumerate(mixes):
        path = tmp_path / f"mix{number}.toml"
        path.write_text(mix, encoding="utf-8")
        assert load_mix(path).calls


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_command_line_on_the_pages_is_one_its_parser_takes(page: Path) -> None:
    commands = _command_lines(page)
    assert commands, f"{page.name} shows no mcp-actors command"
    for command, *arguments in commands:
        try:
            PARSERS[command]().parse_args(arguments)
        except SystemExit:
            pytest.fail(f"{page.name}: the parser refuses {shlex.join([command, *arguments])}")


def test_the_load_pages_first_mix_runs_against_the_module_it_names(tmp_path: Path) -> None:
    """The page's planning mix on the planning module: every call answered, none failed."""
    mix, figures = tmp_path / "mix.toml", tmp_path / "run.json"
    mix.write_text(_blocks(LOAD_PAGE, "toml")[0], encoding="utf-8")
    served = ("--module", "planning", "--in-process", "--sessions", "2")
    load = ("--mix", str(mix), "--calls", "40", "--json", str(figures))
    done = run_leaving_nothing(
        [sys.executable, "-m", "actors", "bench", *served, *load], cwd=tmp_path, timeout=GUARD
    )
    assert done.returncode == 0, done.stderr
    written = json.loads(figures.read_text(encoding="utf-8"))
    assert (written["calls"], written["failed"]) == (40, 0)
    (shown,) = _blocks(LOAD_PAGE, "json")
    assert _members(json.loads(shown)) == _members(written)


def _members(value: Any, where: str = "") -> set[str]:
    """Every member's path in a JSON value (a list's members are those of its first item)."""
    if isinstance(value, dict):
        found = set()
        for key, item in value.items():
            found |= {f"{where}.{key}"} | _members(item, f"{where}.{key}")
        return found
    if isinstance(value, list) and value:
        return _members(value[0], f"{where}[]")
    return set()


@pytest.mark.parametrize("served", ["--in-process", "--handles"])
def test_the_isolation_pages_command_that_serves_a_module_passes(served: str) -> None:
    """The page's check of a module in this process, and through handles over HTTP."""
    (command,) = [
        words for words in _command_lines(ISOLATION_PAGE) if served in words and "--module" in words
    ]
    done = run_leaving_nothing([sys.executable, "-m", "actors", *command], cwd=ROOT, timeout=GUARD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("isolation check passed: no leak, no lost write (")


async def test_the_python_example_loads_a_served_module(tmp_path: Path) -> None:
    """``python load_from_python.py URL mix.toml`` against ``serve --http``: its report."""
    mix = tmp_path / "mix.toml"
    mix.write_text(_blocks(LOAD_PAGE, "toml")[0], encoding="utf-8")
    async with http_server("--modules", "planning", "--state", "memory") as server:
        done = await trio.run_process(
            [sys.executable, str(LOAD_EXAMPLE), server.url, str(mix)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert re.search(r"^calls +500 in .* \(0 failed\)$", out, re.MULTILINE), out
