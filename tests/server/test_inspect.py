"""``mcp-actors inspect``: the MCP Inspector (from the npm registry) on a module, over stdio.

The Inspector's CLI mode (``-- --cli --method tools/list``) runs it without a
browser, so the test sees what its web page would list.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = str(Path(sys.executable).with_name("mcp-actors"))


@pytest.fixture
def npx() -> str:
    found = shutil.which("npx")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("the Inspector's test needs Node.js (npx), and CI must run it")
        pytest.skip("Node.js (npx) is not installed")
    return found


def listed_by_the_inspector(inspect: list[str], cwd: Path) -> set[str]:
    """The tool names the Inspector lists, in CLI mode, for ``mcp-actors inspect INSPECT``."""
    done = subprocess.run(
        [CONSOLE_SCRIPT, "inspect", *inspect, "--", "--cli", "--method", "tools/list"],
        capture_output=True,
        text=True,
        timeout=600,  # the first run downloads the Inspector from the npm registry
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {tool["name"] for tool in json.loads(done.stdout)["tools"]}


@pytest.mark.usefixtures("npx")
def test_the_inspector_lists_a_modules_tools() -> None:
    """A module of the repository, named as serve names it; the Inspector's own listing."""
    serve = ["--state", "memory", "--module", "examples.notes:notes"]
    listed = listed_by_the_inspector(serve, ROOT)
    assert listed == {"notes__add_note", "notes__count_notes", "notes__clear_notes"}


@pytest.mark.usefixtures("npx")
def test_the_desktop_hosts_pages_command_inspects_the_notes_module() -> None:
    """The page's command, run where the page runs it: in the folder of ``notes.py``."""
    page = (ROOT / "docs/getting-started/desktop-hosts.md").read_text(encoding="utf-8")
    (line,) = re.findall(r"^mcp-actors inspect .*$", page, re.MULTILINE)
    inspect = shlex.split(line)[2:]
    listed = listed_by_the_inspector(["--state", "memory", *inspect], ROOT / "docs_src/start")
    assert listed == {"notes__add_note", "notes__list_notes"}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["--module", "nope:x"], "module 'nope:x': cannot import 'nope'"),
        (["--http", "127.0.0.1:0"], "--http: the Inspector starts the server itself, over stdio"),
    ],
)
def test_what_serve_would_refuse_is_refused_before_the_inspector_starts(
    arguments: list[str], problem: str
) -> None:
    done = subprocess.run(
        [CONSOLE_SCRIPT, "inspect", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert problem in done.stderr.splitlines()[0]
