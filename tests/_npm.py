"""npm packages a test needs, installed from a lock file kept in the source tree.

A folder such as ``tests/ts_client`` holds a ``package.json`` and its
``package-lock.json``; `npm_installed` installs them with ``npm ci`` once per lock file,
outside the source tree, under ``$XDG_CACHE_HOME/mcp-actors-tests/<name>/<hash>``
(``~/.cache`` by default), a file lock keeping parallel test processes from installing it
twice. The hash covers the manifests' content, so a changed lock gets a folder of its own
and a running test never sees its modules change under it.

``npm ci`` runs no package's scripts (``--ignore-scripts``): only the packages a caller
names in ``rebuild=`` run theirs, with ``npm rebuild`` (the ``node`` package's downloads a
Node.js binary, for instance).

Without Node.js and npm (or when the install fails) the test is skipped, or fails when
``CI`` is set: call `npm_installed` from a synchronous fixture, so that this happens at
setup, before a test's trio run (where the reason would come wrapped in an exception
group).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "INSTALL_TIMEOUT",
    "MANIFESTS",
    "cache_root",
    "digest",
    "npm_installed",
    "pinned_node",
    "tail",
    "unavailable",
]

MANIFESTS = ("package.json", "package-lock.json")
INSTALL_TIMEOUT = 600.0  # seconds per npm command: npm ci from the registry on a slow network
ROOT = Path(__file__).resolve().parent.parent
DONE = ".installed"  # written last: a folder without it is a broken or unfinished install


def tail(log: str, size: int = 4000) -> str:
    """The end of a log, for a failure message."""
    return log if len(log) <= size else "…" + log[-size:]


def unavailable(reason: str, needed_by: str) -> NoReturn:
    """Skip the test, or fail it on CI, where a missing tool must not pass unnoticed.

    `needed_by` names the tests, as in "CI is set, so {needed_by} must run".
    """
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so {needed_by} must run", pytrace=False)
    pytest.skip(reason)


def cache_root(name: str) -> Path:
    """Where installs of the packages called `name` live: one folder per lock file."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache, "mcp-actors-tests", name)


def digest(*parts: bytes) -> str:
    """A short hash of `parts`, each length-prefixed so that no two lists of parts collide."""
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big") + part)
    return hasher.hexdigest()[:16]


def _label(source: Path) -> str:
    """`source` as the messages name it: relative to the repository when it is inside."""
    return str(source.relative_to(ROOT)) if source.is_relative_to(ROOT) else str(source)


def _npm(command: list[str], folder: Path, what: str, needed_by: str) -> None:
    """Run npm `command` in `folder`; skip (fail on CI) with npm's stderr if it fails."""
    try:
        done = subprocess.run(
            command,
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        unavailable(f"{what} took over {INSTALL_TIMEOUT:.0f} s", needed_by)
    if done.returncode != 0:
        unavailable(f"{what} failed:\n{tail(done.stderr)}", needed_by)


def _install(source: Path, folder: Path, npm: str, rebuild: Sequence[str], needed_by: str) -> None:
    """``npm ci`` `source`'s lock into `folder` (empty or missing), then mark it done."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for manifest in MANIFESTS:
        shutil.copyfile(source / manifest, folder / manifest)
    quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
    label = _label(source)
    _npm([npm, "ci", "--ignore-scripts", *quiet], folder, f"`npm ci` of {label}", needed_by)
    if rebuild:
        # The named packages' install scripts run, and their binaries are linked into
        # node_modules/.bin, which `npm ci --ignore-scripts` skipped.
        what = f"`npm rebuild {' '.join(rebuild)}` of {label}"
        _npm([npm, "rebuild", *rebuild, *quiet], folder, what, needed_by)
    (folder / DONE).touch()


def npm_installed(source: Path, name: str, *, needed_by: str, rebuild: Sequence[str] = ()) -> Path:
    """The folder where `source`'s locked packages are installed (blocks: ``npm ci``).

    `source` holds ``package.json`` and ``package-lock.json``; `name` names the install in
    the cache; `rebuild` lists the packages whose install scripts must run. Skips the test
    (fails it under ``CI``, the message saying that `needed_by` must run) when Node.js or
    npm is missing or the install fails.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable(f"{needed_by} need Node.js and npm", needed_by)
    parts = [(source / manifest).read_bytes() for manifest in MANIFESTS]
    if rebuild:  # part of what is installed; left out when empty, so older hashes hold
        parts.append("\0".join(rebuild).encode())
    folder = cache_root(name) / digest(*parts)
    if not (folder / DONE).exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with (folder.parent / f"{folder.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be installing it
            if not (folder / DONE).exists():
                _install(source, folder, npm, rebuild, needed_by)
    return folder


def pinned_node(modules: Path, needed_by: str) -> Path:
    """The Node.js 22 a package pins (its ``node`` dependency) under `modules`, checked.

    A skip (or, under CI, a failure) when it does not run on this platform; a
    failure when it is not Node 22: a broken pin must fail, not run on the system's.
    """
    node = modules / "node" / "bin" / "node"
    try:
        version = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:  # no binary for this platform (the package downloads one)
        unavailable(f"the node package's Node.js does not run here: {error}", needed_by)
    assert version.stdout.startswith("v22."), f"{node}: {version.stdout}{version.stderr}"
    return node
