"""The wheel a user builds, installed where there is no checkout, runs and serves.

The Install page tells a reader to build a wheel with ``python -m build --wheel`` and
install it with an extra. This does exactly that: it copies the checkout's tracked files
to a folder of their own (the build writes ``build/`` and an ``egg-info`` beside the
sources, which must not land in the checkout other tests read), builds the wheel there,
installs it with ``[server]`` into a new virtual environment, and from a folder outside
the checkout (so nothing is imported from the sources) runs ``mcp-actors --version``, the
README's demo, and a tool call over stdio through the official ``mcp`` SDK client of that
environment. Without the package index the test is skipped (it fails on CI).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .._npm import INSTALL_TIMEOUT, tail
from .._venvs import run_or_unavailable

ROOT = Path(__file__).resolve().parents[2]
NEEDED_BY = "the wheel's smoke test"

# Run with the clean environment's Python: the SDK's client, as its docs show it, starts
# the installed `mcp-actors serve` over stdio, adds a goal and lists it.
STDIO_CALL = """
import shutil

import trio
from mcp import Client, StdioServerParameters


async def main():
    command = shutil.which("mcp-actors")
    server = StdioServerParameters(command=command, args=["serve", "--state", "memory"])
    async with Client(server) as client:
        await client.call_tool("planning__create_goal", {"goal": "Ship the wheel"})
        result = await client.call_tool("planning__list_goals", {})
        print(result.content[0].text)


trio.run(main)
"""


def _run(command: list[str | Path], cwd: Path, what: str) -> str:
    """Run `command` in `cwd`; its stdout, or a skip (a failure on CI) saying what failed."""
    return run_or_unavailable(command, what, NEEDED_BY, cwd)


def _tracked_copy(destination: Path) -> Path:
    """The checkout's tracked files, copied into `destination`: what a clone holds."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False, timeout=60
    )
    if listed.returncode != 0:
        pytest.skip("the checkout is not a git work tree: its tracked files are unknown")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` folder of a new virtual environment holding the built wheel with [server]."""
    sources = _tracked_copy(tmp_path_factory.mktemp("checkout"))
    dist = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", dist]
    _run(build, sources, "`python -m build --wheel`")
    (wheel,) = dist.glob("mcp_actors-*.whl")
    venv = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", venv], sources, "`python -m venv`")
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, f"{wheel}[server]"], sources, f"`pip install {wheel.name}[server]`")
    return venv / "bin"


def _smoke(command: list[str | Path], cwd: Path) -> str:
    """Run one of the wheel's own commands in `cwd`: it must succeed; its stdout."""
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{command[1:]} failed:\n{tail(done.stderr)}"
    return done.stdout


@pytest.mark.timeout(3 * INSTALL_TIMEOUT)
def test_the_installed_wheel_runs_the_demo_and_serves(installed: Path, tmp_path: Path) -> None:
    """Outside the checkout, the wheel's command, its demo and a served call all work."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version in _smoke([installed / "mcp-actors", "--version"], tmp_path)
    where = _smoke([installed / "python", "-c", "import actors; print(actors.__file__)"], tmp_path)
    assert not Path(where.strip()).is_relative_to(ROOT), where
    demo = _smoke([installed / "python", "-m", "actors", "demo"], tmp_path)
    assert "0 errors, 0 duplicate actors" in demo
    assert "Ship the wheel" in _smoke([installed / "python", "-c", STDIO_CALL], tmp_path)
