"""``mcp-actors check-isolation``, run as a user runs it: its verdicts and exit statuses.

The servers: this project's planning module in the command's own process, and the
notes servers of ``tests/leaky_servers/sdk_notes.py`` over stdio (``current``, the
replaced design, leaks when calls overlap; ``keyed`` does not). Each command gets a
marker in its environment; no process carrying it may be left afterwards.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from ._processes import run_leaving_nothing

if TYPE_CHECKING:
    import subprocess

ROOT: Final = Path(__file__).resolve().parents[1]
CHECK: Final = (sys.executable, "-m", "actors", "check-isolation")
GUARD: Final = 180  # seconds one check may take on a busy machine before the test fails
PLANNING_WRITE: Final = 'planning__create_goal {"goal": "{mark}"}'
NOTES_WRITE: Final = 'add_note {"session": "{session}", "text": "{mark}"}'
NOTES_READ: Final = 'list_notes {"session": "{session}"}'


def _notes(kind: str) -> str:
    """The stdio command line of a notes server of `kind`."""
    program = (
        f"from tests.leaky_servers.sdk_notes import notes_server; notes_server({kind!r}).run()"
    )
    return shlex.join([sys.executable, "-c", program])


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m actors check-isolation ARGS``; no process it started may be left."""
    return run_leaving_nothing([*CHECK, *args], cwd=ROOT, timeout=GUARD)


def test_this_projects_sessions_pass_served_in_process() -> None:
    """Each session its own client in memory, naming no session: exit 0, and the counts."""
    done = _check(
        "--module", "planning", "--in-process", "--write", PLANNING_WRITE,
        "--read", "planning__list_goals",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("isolation check passed: no leak, no lost write ("), done.stdout


def test_the_replaced_design_is_found_leaking_with_the_shortest_sequence() -> None:
    """Sessions named in the arguments share one connection: the overlap shows, exit 1."""
    done = _check("--command", _notes("current"), "--write", NOTES_WRITE, "--read", NOTES_READ)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("isolation check FAILED")
    assert any(line.startswith("leak: session ") for line in lines), done.stdout
    shortest = lines[lines.index("shortest failing sequence:") + 1 :]
    assert any("LEAK: shows session" in line for line in shortest), done.stdout
    assert any(line.strip().startswith("batch of ") for line in shortest), done.stdout


def test_the_same_server_keyed_by_session_passes() -> None:
    done = _check("--command", _notes("keyed"), "--write", NOTES_WRITE, "--read", NOTES_READ)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_server_that_keeps_only_recent_history_loses_writes_unless_told() -> None:
    """``latest`` keeps one note a session: lost writes (exit 1), or a pass with
    ``--recent-only``."""
    args = ("--command", _notes("latest"), "--write", NOTES_WRITE, "--read", NOTES_READ)
    strict = _check(*args, "--examples", "100")
    lenient = _check(*args, "--recent-only")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert any(line.startswith("lost write: ") for line in strict.stdout.splitlines())
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("--write", "planning__list_goals", "--read", "planning__list_goals"), "{mark}"),
        (("--write", "add_note {not json", "--read", "list_notes"), "not JSON"),
        (("--write", PLANNING_WRITE, "--read", "list {mark}"), "argument --read"),
        (("--write", PLANNING_WRITE, "--read", "x", "--sessions", "1"), "sessions must be"),
        (("--write", PLANNING_WRITE), "--read"),
    ],
)
def test_bad_usage_exits_2_naming_the_problem(args: tuple[str, ...], problem: str) -> None:
    done = _check("--module", "planning", "--in-process", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert problem in done.stderr
    assert done.stdout == ""


def test_a_server_that_does_not_start_is_no_verdict_exit_3() -> None:
    done = _check("--command", "false", "--write", NOTES_WRITE, "--read", NOTES_READ)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "could not run the check" in done.stderr
    assert done.stdout == ""


def test_a_call_that_fails_is_no_verdict_exit_3_naming_the_call() -> None:
    """A write tool the server does not have: the check stops at its first call."""
    done = _check(
        "--module", "planning", "--in-process", "--write", 'planning__nope {"goal": "{mark}"}',
        "--read", "planning__list_goals",
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "could not run the check" in done.stderr
    assert "planning__nope" in done.stderr
    assert "Traceback" not in done.stderr
