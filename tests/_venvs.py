"""A framework's own virtual environment, installed once per list of requirements.

The agent frameworks the integration tests drive (pydantic-ai, openai-agents, …) pin
dependencies that are not this project's (some want ``mcp < 2``), so each gets a virtual
environment of its own: `framework_python` makes it with ``pip install`` of the caller's
pinned requirements, outside the source tree, under
``$XDG_CACHE_HOME/mcp-actors-tests/venvs/<name>-<hash>`` (``~/.cache`` by default), and
gives back its Python. The hash covers the requirements and this Python's version, so a
changed pin gets a folder of its own and a running test never sees its packages change
under it. A file lock keeps parallel test processes (xdist workers) from installing it
twice, and a marker written last tells a finished install from an interrupted one.

Without the package index (or when the install fails) the test is skipped, or fails when
``CI`` is set (`tests._npm.unavailable`): call `framework_python` from a synchronous,
module-scoped fixture, so that this happens at setup, before a test's trio run.

``tests/_integration_runs.run_script`` runs a script with that Python.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from ._npm import INSTALL_TIMEOUT, cache_root, digest, tail, unavailable

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["framework_python", "run_or_unavailable"]

DONE = ".installed"  # written last: a folder without it is a broken or unfinished install
# pip's own retries are cut short: without a package index the skip comes within a minute.
PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check", "--retries=1", "--timeout=30")


def run_or_unavailable(
    command: Sequence[str | Path], what: str, needed_by: str, cwd: Path | None = None
) -> str:
    """Run `command` (in `cwd`); its stdout, or a skip (a failure on CI) with its stderr if
    it fails or takes too long."""
    try:
        done = subprocess.run(
            [str(part) for part in command],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired:
        unavailable(f"{what} took over {INSTALL_TIMEOUT:.0f} s", needed_by)
    if done.returncode != 0:
        unavailable(f"{what} failed:\n{tail(done.stderr + done.stdout)}", needed_by)
    return done.stdout


def _install(folder: Path, requirements: Sequence[str], needed_by: str) -> None:
    """Make a virtual environment in `folder` (replacing what is there) and pip-install
    `requirements` into it, then mark it done."""
    shutil.rmtree(folder, ignore_errors=True)
    made = [sys.executable, "-m", "venv", folder]
    run_or_unavailable(made, f"`python -m venv {folder}`", needed_by)
    what = f"`pip install {' '.join(requirements)}` into {folder}"
    run_or_unavailable([folder / "bin" / "python", *PIP, *requirements], what, needed_by)
    (folder / DONE).touch()


def framework_python(name: str, requirements: Sequence[str], *, needed_by: str) -> Path:
    """The Python of a virtual environment holding `requirements` (blocks: ``pip install``).

    `name` names the environment in the cache (``pydantic-ai``, …); `requirements` are
    pip's requirement specifiers, pinned (``pydantic-ai-slim[mcp]==2.68.0``). Skips the
    test (fails it under ``CI``, the message saying that `needed_by` must run) when the
    environment cannot be made or the install fails.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}".encode()
    folder = cache_root("venvs") / f"{name}-{digest(version, *map(str.encode, requirements))}"
    if not (folder / DONE).exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with (folder.parent / f"{folder.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be installing it
            if not (folder / DONE).exists():
                _install(folder, requirements, needed_by)
    return folder / "bin" / "python"
