"""``--only call_path --against COMMIT``: this checkout's runtime and a commit's, interleaved.

The commit is checked out into a temporary detached worktree (removed
afterwards, whatever happens). Then each round of ``call_path`` runs twice,
each time in a fresh subprocess (`benchmarks._call_path_worker`): this
checkout's round 1, the commit's round 1, this checkout's round 2, … — so
that the machine's drift during the run touches both versions alike, and
both pay the same for a fresh process. In each subprocess ``sys.path``
starts with a directory holding only links to one version's ``actors`` and
``protocol``, then this checkout, so that the driver (the designs, the
baselines, the measuring loop) is always this checkout's and only the
runtime under it changes. The worker says where it imported both packages
from, and a round that measured the wrong code is an error, not a figure.

``--against REPORT.json`` needs none of this: `benchmarks.__main__` compares
the run with the saved report directly.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import attrs

from ._call_path import NAME, call_path_result
from ._call_path_worker import decode_round
from ._measure import merge

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ._measure import Progress, Results
    from ._report import ScenarioResult
    from ._sizes import Sizes

__all__ = [
    "ROOT",
    "AgainstError",
    "Interleaved",
    "RoundError",
    "Side",
    "checked_out",
    "is_saved_report",
    "resolve_commit",
    "run_interleaved",
    "run_round",
]

ROOT: Final = Path(__file__).resolve().parent.parent
"""This checkout: its ``benchmarks`` drives every round, its ``actors`` is "this" side."""
PACKAGES: Final = ("actors", "protocol")
"""What changes between the two sides."""


class AgainstError(Exception):
    """REF names no saved report and no commit, or git cannot check the commit out."""


class RoundError(Exception):
    """A round's subprocess failed, or measured other code than it was given; the message
    holds its command and its standard error."""


def is_saved_report(ref: str) -> bool:
    """Whether ``--against`` `ref` means a saved JSON report rather than a commit."""
    return ref.endswith(".json") or Path(ref).is_file()


def _git(*arguments: str) -> str:
    try:
        done = subprocess.run(
            ["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        msg = "git is not installed: --against a commit needs it"
        raise AgainstError(msg) from None
    if done.returncode != 0:
        msg = f"git {shlex.join(arguments)} failed: {done.stderr.strip()}"
        raise AgainstError(msg)
    return done.stdout.strip()


def resolve_commit(ref: str) -> str:
    """The full hash of the commit `ref` names in this checkout's repository."""
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except AgainstError:
        msg = f"{ref!r} is neither a saved report (no such file) nor a commit of {ROOT}"
        raise AgainstError(msg) from None


def _this_label() -> str:
    head = _git("rev-parse", "--short", "HEAD")
    changed = _git("status", "--porcelain", "--", *PACKAGES)
    return f"this checkout ({head}{', with uncommitted changes' if changed else ''})"


def _remove_worktree(where: Path) -> None:
    # --force: the rounds left bytecode caches in it. Never raise from here: it runs
    # while another error (or Ctrl-C) may be on its way out.
    try:
        _git("worktree", "remove", "--force", str(where))
    except AgainstError:
        shutil.rmtree(where, ignore_errors=True)
        _git_quietly("worktree", "prune")  # forgets a worktree whose directory is gone


def _git_quietly(*arguments: str) -> None:
    try:
        _git(*arguments)
    except AgainstError as exc:
        print(f"warning: {exc}", file=sys.stderr)


@contextmanager
def checked_out(commit: str, where: Path) -> Iterator[Path]:
    """`commit` in a detached worktree at `where`, removed on the way out, whatever happens."""
    _git("worktree", "add", "--detach", "--quiet", str(where), commit)
    try:
        yield where
    finally:
        _remove_worktree(where)


@final
@attrs.frozen
class Side:
    """One version of the runtime under test."""

    label: str
    """How the report names it."""
    root: Path
    """The tree whose ``actors`` and ``protocol`` are measured."""
    entry: Path
    """The ``sys.path`` entry that holds links to those two packages and nothing else."""

    @classmethod
    def of(cls, label: str, root: Path, entry: Path) -> Side:
        """A side for `root`'s packages, linking them into the new directory `entry`.

        Not `root` itself on ``sys.path``: it holds a ``benchmarks`` package
        too, and the driver must be this checkout's.
        """
        entry.mkdir(parents=True)
        for package in PACKAGES:
            (entry / package).symlink_to(root / package, target_is_directory=True)
        return cls(label, root, entry)


def _listed(counts: Sequence[int]) -> str:
    return ",".join(map(str, counts))


def _environment(side: Side) -> dict[str, str]:
    paths = [str(side.entry), str(ROOT)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def run_round(side: Side, sizes: Sizes, out: Path) -> dict[int, Results]:
    """One round of ``call_path`` on `side`'s runtime in a fresh process; results by key count.

    Raises `RoundError` with the process's standard error when it fails.
    """
    command = [
        sys.executable,
        "-P",  # no current directory first on sys.path: PYTHONPATH alone decides
        "-m",
        "benchmarks._call_path_worker",
        "--keys",
        _listed(sizes.call_keys),
        "--callers",
        _listed(sizes.call_callers),
        "--calls",
        str(sizes.calls_per_batch),
        "--out",
        str(out),
    ]
    environment = _environment(side)
    done = subprocess.run(
        command,
        cwd=side.entry,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        msg = (
            f"{side.label}: a round's process exited with status {done.returncode}\n"
            f"command: PYTHONPATH={environment['PYTHONPATH']} {shlex.join(command)}\n"
            f"its standard error:\n{done.stderr.rstrip()}"
        )
        raise RoundError(msg)
    data = json.loads(out.read_text())
    out.unlink()
    for package in PACKAGES:
        expected = str((side.root / package).resolve())
        if data["imported"][package] != expected:
            msg = (
                f"{side.label}: the round imported {package} from "
                f"{data['imported'][package]}, not from {expected}"
            )
            raise RoundError(msg)
    return decode_round(data["round"])


@final
@attrs.frozen
class Interleaved:
    """What `run_interleaved` measured: each version's ``call_path`` result."""

    commit: str
    """The commit's full hash."""
    this_label: str
    """This checkout, as the report names it."""
    this: ScenarioResult
    """This checkout's figures."""
    other_label: str
    """The commit, as the report names it."""
    other: ScenarioResult
    """The commit's figures."""
    seconds: float
    """How long the whole run took."""


def _interleave(
    sides: Sequence[Side], sizes: Sizes, scratch: Path, progress: Progress
) -> list[dict[int, Results]]:
    """Every side's rounds, side after side within a round; each side's merged by key count."""
    collected: list[list[dict[int, Results]]] = [[] for _ in sides]
    for number in range(sizes.rounds):
        for side, rounds in zip(sides, collected, strict=True):
            progress(f"{NAME}: round {number + 1}/{sizes.rounds}: {side.label}")
            rounds.append(run_round(side, sizes, scratch / "round.json"))
    return [
        {keys: merge([round_[keys] for round_ in rounds]) for keys in sizes.call_keys}
        for rounds in collected
    ]


def run_interleaved(sizes: Sizes, commit: str, progress: Progress) -> Interleaved:
    """Run ``call_path`` on this checkout and on `commit` (a full hash), interleaved."""
    began = time.perf_counter()
    this_label = _this_label()
    other_label = _git("rev-parse", "--short", commit)
    with (
        tempfile.TemporaryDirectory(prefix="benchmarks-against-") as scratch_name,
        checked_out(commit, Path(scratch_name) / "tree") as tree,
    ):
        scratch = Path(scratch_name)
        progress(f"{NAME}: {other_label} checked out at {tree}")
        sides = (
            Side.of(this_label, ROOT, scratch / "this"),
            Side.of(other_label, tree, scratch / "other"),
        )
        this, other = _interleave(sides, sizes, scratch, progress)
    note = (
        f"measured against {other_label}: each round in a subprocess of its own, "
        "this checkout's and the commit's in turn"
    )
    this_result = call_path_result(this, sizes.call_callers)
    return Interleaved(
        commit=commit,
        this_label=this_label,
        this=attrs.evolve(this_result, notes=(*this_result.notes, note)),
        other_label=other_label,
        other=call_path_result(other, sizes.call_callers),
        seconds=time.perf_counter() - began,
    )
