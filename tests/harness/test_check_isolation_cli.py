"""``mcp-actors check-isolation``, run as a user runs it: its verdicts and exit statuses.

The servers: this project's planning module in the command's own process, the notes
servers of ``tests/leaky_servers/sdk_notes.py`` over stdio (``current``, the replaced
design, leaks when calls overlap; ``keyed`` does not), and the servers of
``tests/leaky_servers/unanswering.py`` that stop answering (over stdio, and one on
127.0.0.1 that accepts connections and never answers). The checks speak the default
2026-07-28 era, but for the raw stdio servers, which answer the initialize handshake
alone (``--era 2025``). Each command gets a marker in its environment; no process
carrying it may be left afterwards.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from actors.harness import Budget

from .._processes import run_leaving_nothing

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT: Final = Path(__file__).resolve().parents[2]
CHECK: Final = (sys.executable, "-m", "actors", "check-isolation")
GUARD: Final = 180  # seconds one check may take on a busy machine before the test fails
PLANNING_WRITE: Final = 'planning__create_goal {"goal": "{mark}"}'
NOTES_WRITE: Final = 'add_note {"session": "{session}", "text": "{mark}"}'
NOTES_READ: Final = 'list_notes {"session": "{session}"}'
UNANSWERING: Final = ROOT / "tests" / "leaky_servers" / "unanswering.py"
QUICK: Final = ("--call-timeout", "0.5")  # a call unanswered for half a second is no answer
STOPPED: Final = 240  # seconds: the old check waited 60 s a call, then shrank through 200 more
HANDSHAKE: Final = ("--era", "2025")  # the raw servers answer initialize, not server/discover
NO_VERDICT: Final = 4


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


def test_a_server_that_does_not_start_cannot_run_the_check_exit_3() -> None:
    done = _check("--command", "false", "--write", NOTES_WRITE, "--read", NOTES_READ)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "could not run the check" in done.stderr
    assert done.stdout == ""


def test_a_call_answered_with_an_error_cannot_run_the_check_exit_3_naming_the_call() -> None:
    """A write tool the server does not have: the check stops at its first call."""
    done = _check(
        "--module", "planning", "--in-process", "--write", 'planning__nope {"goal": "{mark}"}',
        "--read", "planning__list_goals",
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "could not run the check" in done.stderr
    assert "planning__nope" in done.stderr
    assert "Traceback" not in done.stderr


# ---- servers that stop answering: no verdict, exit 4, at the first call ----------------


def _unanswering(mode: str) -> str:
    """The stdio command line of an `unanswering.py` server of `mode`."""
    return shlex.join([sys.executable, str(UNANSWERING), mode])


def _made_and_failed(stderr: str) -> tuple[int, int]:
    """The calls the no-verdict says were made, and those it says failed (all of a batch)."""
    made = re.search(r", (\d+) calls? made; nothing shrunk\):", stderr)
    unanswered = re.search(r"did not answer (\d+) requests?", stderr)
    broken = re.search(r"answered what is not MCP on (\d+) calls?", stderr)
    assert made is not None, stderr
    failed = sum(int(found.group(1)) for found in (unanswered, broken) if found is not None)
    return int(made.group(1)), failed


def _assert_stopped_at_the_first_call(done: subprocess.CompletedProcess[str], why: str) -> None:
    """Exit 4 with the no-verdict, after one sequence whose every call failed, unshrunk."""
    assert done.returncode == NO_VERDICT, done.stdout + done.stderr
    assert done.stdout == ""
    assert "no verdict: the server " in done.stderr, done.stderr
    assert "(after 1 sequence, " in done.stderr, done.stderr
    made, failed = _made_and_failed(done.stderr)
    assert 1 <= made == failed <= Budget().batch, done.stderr  # one step, no replay
    assert f"failed: {why}" in done.stderr, done.stderr
    assert "answers MCP on its transport" in done.stderr  # what to check
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(STOPPED)
@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("deaf", "no answer within 0.5 s"),
        ("garbage", "no answer within 0.5 s"),
        ("wrong-id", "no answer within 0.5 s"),
        ("stalls", "no answer within 0.5 s"),
        ("not-mcp", "an answer that is not MCP (ValidationError: "),
        ("closes", "the connection closed"),
    ],
)
def test_a_server_that_stops_answering_is_no_verdict_exit_4_unshrunk(mode: str, why: str) -> None:
    """Answers never sent, not JSON, for another id, cut off mid-line, not a tool result, or
    a server that exits: the check stops at once, naming the calls, and shrinks nothing.

    The old check waited 60 s for each call, then replayed up to 200 more sequences.
    """
    args = ("--write", NOTES_WRITE, "--read", NOTES_READ)
    done = _check("--command", _unanswering(mode), *HANDSHAKE, *QUICK, *args)
    _assert_stopped_at_the_first_call(done, why)


@pytest.mark.timeout(STOPPED)
def test_what_the_server_wrote_that_is_not_json_rpc_is_quoted() -> None:
    """A stdio server printing to its stdout: the no-verdict quotes the first such line,
    once (the SDK's traceback for each is not printed)."""
    args = ("--write", NOTES_WRITE, "--read", NOTES_READ)
    done = _check("--command", _unanswering("garbage"), *HANDSHAKE, *QUICK, *args)
    assert done.returncode == NO_VERDICT, done.stdout + done.stderr
    # One garbage line per session's request: how many arrived before the first call's
    # deadline depends on the machine's load, so the count is not asserted.
    assert re.search(
        r"\d+ messages? that (is|are) not JSON-RPC, the first: 'this is not JSON-RPC'", done.stderr
    ), done.stderr
    assert "Failed to parse JSONRPC message" not in done.stderr


@pytest.mark.timeout(STOPPED)
def test_a_process_per_session_that_never_answers_is_no_verdict_at_its_first_call() -> None:
    """Templates naming no session: each session its own process, the first unanswered."""
    done = _check(
        "--command", _unanswering("deaf"), *HANDSHAKE, *QUICK,
        "--write", 'add_note {"text": "{mark}"}', "--read", "list_notes",
    )  # fmt: skip
    _assert_stopped_at_the_first_call(done, "no answer within 0.5 s")


@pytest.mark.timeout(STOPPED)
@pytest.mark.parametrize("era", ["2026", "2025"])
def test_a_stdio_server_that_never_answers_its_opening_is_no_verdict(era: str) -> None:
    """Not even the opening (``server/discover``, ``initialize``) is answered: the first
    session's, one request (the check's bound and the target's, both 1 s, race to say so)."""
    done = _check(
        "--command", _unanswering("mute"), "--era", era, *QUICK, "--open-timeout", "1",
        "--write", 'add_note {"text": "{mark}"}', "--read", "list_notes",
    )  # fmt: skip
    assert done.returncode == NO_VERDICT, done.stdout + done.stderr
    assert "no verdict: the server did not answer 1 request (after 1 sequence, 0 sessions" in (
        done.stderr
    )
    assert "open session 0 failed: " in done.stderr
    assert "within 1 s" in done.stderr


@contextmanager
def _mute_http_server() -> Iterator[str]:
    """`unanswering.py --http` meanwhile: its URL (it accepts and never answers)."""
    with subprocess.Popen(
        [sys.executable, str(UNANSWERING), "--http"], stdout=subprocess.PIPE, text=True
    ) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline()  # printed once it listens
            found = re.search(r"listening on (http://\S+)", line)
            assert found is not None, line
            yield found.group(1)
        finally:
            server.kill()


@pytest.mark.timeout(STOPPED)
@pytest.mark.parametrize("templates", ["naming sessions", "a connection per session"])
def test_an_http_server_that_accepts_and_never_answers_is_no_verdict(templates: str) -> None:
    """Over Streamable HTTP: the one connection, or the first session's, never opens."""
    calls = ("--write", NOTES_WRITE, "--read", NOTES_READ)
    if templates == "a connection per session":
        calls = ("--write", 'add_note {"text": "{mark}"}', "--read", "list_notes")
    with _mute_http_server() as url:
        done = _check("--url", url, *QUICK, "--open-timeout", "1", *calls)
    assert done.returncode == NO_VERDICT, done.stdout + done.stderr
    assert "no verdict: " in done.stderr
    assert "within 1 s" in done.stderr, done.stderr


@pytest.mark.timeout(STOPPED)
def test_a_check_past_its_max_time_is_no_verdict_naming_how_far_it_got() -> None:
    """A search too long for its --max-time stops there: exit 4, not a pass."""
    done = _check(
        "--module", "planning", "--in-process", "--write", PLANNING_WRITE,
        "--read", "planning__list_goals", "--examples", "1000000", "--max-time", "2",
    )  # fmt: skip
    assert done.returncode == NO_VERDICT, done.stdout + done.stderr
    assert "no verdict: the check's 2 s ran out after " in done.stderr, done.stderr
    assert "of 1000000, " in done.stderr
    assert "none failing" in done.stderr
