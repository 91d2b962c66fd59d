"""``bench`` and ``check-isolation`` in both protocol eras, and through conversation handles.

The eras: 2026-07-28 (``server/discover``, no protocol session: the default, as the SDK's
``Client``) and the initialize handshake (``--era 2025``). Every kind of target opens in
the era asked, and a server that speaks the handshake alone is refused in 2026's, naming
``--era 2025``.

The servers, all real:

* FastMCP 4 over Streamable HTTP (``tests/leaky_servers/fastmcp_eras.py``, in FastMCP's
  own virtual environment): notes kept in the request context's state, which FastMCP
  keys by the transport's session, lose every write for a 2026-era client and fail the
  check in that era (they pass in 2025's); notes kept in FastMCP's session state, by the
  ids its ``create_session`` mints, pass in both, driven through those ids as handles
  (``--handle-tool create_session --handle-key result --handle-argument session_id``).
* ``python -m actors serve --handles`` (stdio, HTTP, in this process): passes driven
  through its handles in both eras; refuses 2026-era calls that carry none (the check
  says to give ``--handles``); and the check through handles is not vacuous against it:
  sessions that all name one shared session over their handles (a named session wins)
  are found leaking.
* the handle-pattern notes servers of ``tests/leaky_servers/handle_notes.py``: handles
  minted from 256 random bits pass; handles minted from the clock's second (they
  collide) and handles that name nothing (one list for all) fail, in this process and
  over stdio.

Without FastMCP's environment its tests are skipped, and fail under ``CI=true``
(``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from mcp import Client

from actors.harness import (
    Budget,
    HandleError,
    Handles,
    LoadPlan,
    MixCall,
    StdioTarget,
    ToolCall,
    check_isolation,
    serve_command,
    serve_module_http,
    serve_module_in_process,
)
from actors.harness import Mix as MixOf
from actors.harness._eras import version_of
from benchmarks._fastmcp_peer import FASTMCP_VERSION, fastmcp_venv, find_fastmcp

from .._npm import unavailable
from .._processes import run_leaving_nothing
from ..leaky_servers.handle_notes import Kind, notes_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from mcp import ClientSession

    from actors.harness import Era, Target

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a session
# closes: client-side noise, one per session closed.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

ROOT: Final = Path(__file__).resolve().parents[2]
SERVERS: Final = ROOT / "tests" / "leaky_servers"
ACTORS: Final = (sys.executable, "-m", "actors")
GUARD: Final = 240  # seconds one command may take on a busy machine before the test fails
LISTENING: Final = 60  # seconds FastMCP may take to listen
ERAS: Final = ("2026", "2025")
NOTES_WRITE: Final = ("--write", 'add_note {"text": "{mark}"}', "--read", "list_notes")
PLANNING: Final = (
    *("--write", 'planning__create_goal {"goal": "{mark}"}', "--read", "planning__list_goals"),
)
FASTMCP_IDS: Final = (
    *("--handle-tool", "create_session", "--handle-key", "result"),
    *("--handle-argument", "session_id"),
)
"""FastMCP's session state as handles: create_session's {"result": ID}, passed as session_id."""
SHORT_SHRINK: Final = ("--shrinks", "20")  # a failure found is shrunk a little: its cost bounded
PASSED: Final = "isolation check passed: no leak, no lost write ("
FAILED: Final = "isolation check FAILED ("


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m actors ARGS``; no process it started may be left afterwards."""
    return run_leaving_nothing([*ACTORS, *args], cwd=ROOT, timeout=GUARD)


def _handle_notes(kind: Kind) -> str:
    """The stdio command line of a `handle_notes` server of `kind`."""
    return shlex.join([sys.executable, str(SERVERS / "handle_notes.py"), kind])


# ---- the eras ------------------------------------------------------------------------------


@asynccontextmanager
async def _targets(era: Era, folder: Path) -> AsyncIterator[list[Target]]:
    """``actors serve`` of planning over stdio, over HTTP and in this process, in `era`."""
    stdio = StdioTarget(tuple(serve_command(["planning"], "memory")), era=era)
    async with (
        serve_module_http(["planning"], "memory", era=era) as http,
        serve_module_in_process(["planning"], f"sqlite:///{folder}/state.db", era=era) as inner,
    ):
        yield [stdio, http, inner]


@pytest.mark.parametrize("era", ERAS)
async def test_every_kind_of_target_opens_in_the_era_asked(era: Era, tmp_path: Path) -> None:
    async with _targets(era, tmp_path) as targets:
        for target in targets:
            async with target.session() as session:
                assert session.protocol_version == version_of(era), target


def test_a_server_of_the_handshake_alone_is_refused_in_2026_naming_the_era() -> None:
    """A raw server answering ``initialize`` only (its answer to ``server/discover`` is not
    one): exit 3, naming the era it does not speak and the option that fits it."""
    command = shlex.join([sys.executable, str(SERVERS / "unanswering.py"), "deaf"])
    done = _run("check-isolation", "--command", command, *NOTES_WRITE)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "the server does not speak the 2026-07-28 era" in done.stderr, done.stderr
    assert "(--era 2025)" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_era_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="the era must be one of 2026, 2025"):
        StdioTarget(("python",), era="2027")  # type: ignore[arg-type]  # what is checked
    done = _run("bench", "--module", "planning", "--era", "2027", "--tool", "x")
    assert done.returncode == 2
    assert "argument --era: invalid choice: '2027'" in done.stderr


# ---- FastMCP, in its own environment ---------------------------------------------------------


@pytest.fixture(scope="module")
def fastmcp() -> str:
    """The Python of FastMCP's environment: skipped without it, failed without it on CI."""
    python = find_fastmcp()
    if python is None:
        unavailable(
            f"FastMCP {FASTMCP_VERSION} is not installed in {fastmcp_venv()} (`python -c 'from "
            "benchmarks._fastmcp_peer import install_fastmcp; install_fastmcp(print)'`)",
            "the harness's FastMCP era tests",
        )
    return python


@pytest.fixture(scope="module")
def fastmcp_urls(fastmcp: str) -> Iterator[dict[str, str]]:
    """Both kinds of `fastmcp_eras` server, listening meanwhile: kind -> MCP endpoint."""
    urls: dict[str, str] = {}
    servers: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as folder:
        try:
            for kind in ("context", "session-id"):
                log = Path(folder, f"{kind}.log")
                with log.open("wb") as sink:
                    # -I keeps this project off FastMCP's path.
                    command = [fastmcp, "-I", str(SERVERS / "fastmcp_eras.py"), kind]
                    servers.append(subprocess.Popen(command, stdout=sink, stderr=sink))
                urls[kind] = _listening_url(log, servers[-1])
            yield urls
        finally:
            for server in servers:
                server.kill()
                server.wait()


def _listening_url(log: Path, server: subprocess.Popen[bytes]) -> str:
    """FastMCP's endpoint once uvicorn has printed the port it bound."""
    pattern = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")
    end = time.monotonic() + LISTENING
    while time.monotonic() < end and server.poll() is None:
        found = pattern.search(log.read_text(errors="replace"))
        if found:
            return f"{found.group(1)}/mcp"
        time.sleep(0.05)  # uvicorn writes the line: there is nothing else to wait on
    pytest.fail(f"FastMCP did not listen: {log.read_text(errors='replace')[-2000:]}")


@pytest.mark.parametrize(("era", "status"), [("2026", 1), ("2025", 0)])
def test_fastmcp_state_kept_per_transport_session_loses_every_write_in_2026(
    fastmcp_urls: dict[str, str], era: str, status: int
) -> None:
    """``ctx.set_state``: a connection per session, each its own Mcp-Session-Id in 2025's
    era (passes); no session in 2026's, so each read lacks its own write (fails, with
    lost writes and no leak, and a note on what to give instead)."""
    done = _run(
        "check-isolation", "--url", fastmcp_urls["context"], "--era", era, *NOTES_WRITE,
        *SHORT_SHRINK,
    )  # fmt: skip
    assert done.returncode == status, done.stdout + done.stderr
    if status == 0:
        assert done.stdout.startswith(PASSED), done.stdout
        return
    assert done.stdout.startswith(FAILED), done.stdout
    assert "\nlost write: session " in done.stdout
    assert "\nleak: " not in done.stdout
    assert "LOST WRITE: lacks its own wm-s" in done.stdout
    assert "give --handles; for the initialize handshake's sessions, --era 2025" in done.stderr


@pytest.mark.parametrize("era", ERAS)
def test_fastmcp_session_state_by_its_minted_ids_passes_driven_as_handles(
    fastmcp_urls: dict[str, str], era: str
) -> None:
    """FastMCP's ``create_session`` ids are handles by another name: one connection for
    every session, each told apart by its id alone."""
    done = _run(
        "check-isolation", "--url", fastmcp_urls["session-id"], "--era", era, *FASTMCP_IDS,
        *NOTES_WRITE,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(PASSED), done.stdout


def test_bench_carries_fastmcp_minted_ids_as_handles(
    fastmcp_urls: dict[str, str], tmp_path: Path
) -> None:
    figures = tmp_path / "bench.json"
    done = _run(
        "bench", "--url", fastmcp_urls["session-id"], *FASTMCP_IDS, "--tool", "add_note",
        "--arguments", '{"text": "note {n}"}', "--sessions", "2", "--calls", "6",
        "--json", str(figures),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads(figures.read_text(encoding="utf-8"))
    assert (written["calls"], written["failed"]) == (6, 0)
    assert written["plan"]["handles"] == {
        "tool": "create_session",
        "key": "result",
        "argument": "session_id",
    }
    assert written["target"].endswith("(2026-07-28 era, handles)")


# ---- actors serve --handles ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served", "era"),
    [(("--http",), "2026"), (("--http",), "2025"), ((), "2026"), (("--in-process",), "2026")],
    ids=["http-2026", "http-2025", "stdio-2026", "in-process-2026"],
)
def test_actors_serve_passes_driven_through_its_handles(served: tuple[str, ...], era: str) -> None:
    """Every session on one connection (over HTTP, in 2025's era, one Mcp-Session-Id for
    all): the handles alone keep them apart."""
    done = _run(
        "check-isolation", "--module", "planning", *served, "--era", era, "--handles", *PLANNING,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(PASSED), done.stdout


def test_actors_serve_refuses_2026_calls_without_a_handle_and_the_check_says_why() -> None:
    done = _run("check-isolation", "--module", "planning", "--http", *PLANNING)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "call conversation__start to start a new conversation" in done.stderr  # the server
    assert "give --handles" in done.stderr  # the check's note


def test_the_check_through_handles_finds_sessions_that_name_one_shared_session() -> None:
    """Not vacuous against our server: a session named in the arguments wins over the
    handle, so sessions naming one session share it, and the check says so."""
    done = _run(
        "check-isolation", "--module", "planning", "--http", "--handles", *SHORT_SHRINK,
        "--write", 'planning__create_goal {"goal": "{mark}", "__sessionId": "everyone"}',
        "--read", 'planning__list_goals {"__sessionId": "everyone"}',
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "\nleak: session " in done.stdout, done.stdout
    assert re.search(r"open session \d: conversation__start -> conv_", done.stdout), done.stdout


@pytest.mark.parametrize("handles", [False, True])
def test_bench_through_handles_is_answered_and_without_them_refused(
    handles: bool, tmp_path: Path
) -> None:
    """2026-era calls over HTTP that carry no handle all fail (and bench says what to give);
    with ``--handles`` every one is answered."""
    figures = tmp_path / "bench.json"
    done = _run(
        "bench", "--module", "planning", "--http", *(["--handles"] if handles else []),
        "--tool", "planning__list_goals", "--sessions", "2", "--calls", "10",
        "--json", str(figures),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads(figures.read_text(encoding="utf-8"))
    assert written["calls"] == 10
    if handles:
        assert written["failed"] == 0, written["errors"]
        assert written["plan"]["handles"]["tool"] == "conversation__start"
        return
    assert written["errors"] == {"tool error (isError)": 10}
    assert written["plan"]["handles"] is None
    assert "every call failed\nnote: in the 2026-07-28 era" in done.stderr


# ---- servers of the handle pattern, isolated and broken --------------------------------------


def _one_connection(session: ClientSession) -> Any:
    @asynccontextmanager
    async def factory() -> AsyncIterator[ClientSession]:
        yield session

    return factory


@pytest.mark.parametrize("kind", ["minted", "clock", "ignored"])
async def test_handles_that_collide_or_name_nothing_are_found_leaking(kind: Kind) -> None:
    """In this process, the SDK's in-memory client (2026-07-28): minted handles pass;
    handles of the clock's second, and handles over one shared list, leak."""
    async with Client(notes_server(kind)) as client:
        report = await check_isolation(
            _one_connection(client.session),
            write=ToolCall.parse('add_note {"text": "{mark}"}'),
            read=ToolCall("list_notes"),
            handles=Handles(),
            budget=Budget(shrinks=50),
        )
    if kind == "minted":
        assert report.passed, report.describe()
        return
    assert report.leaks, report.describe()
    sequence = "\n".join(report.sequence)
    assert '"conversation": "conv_' in sequence  # each call carries its session's handle
    if kind == "clock":  # two sessions opened in one second got one handle
        assert re.search(r"conversation__start -> conv_\d+… \(session \d's too\)", sequence)


@pytest.mark.parametrize(("kind", "status"), [("minted", 0), ("clock", 1)])
def test_a_stdio_server_whose_handles_collide_fails_the_check(kind: Kind, status: int) -> None:
    done = _run(
        "check-isolation", "--command", _handle_notes(kind), "--handles", *NOTES_WRITE,
        *SHORT_SHRINK,
    )  # fmt: skip
    assert done.returncode == status, done.stdout + done.stderr
    assert done.stdout.startswith(PASSED if status == 0 else FAILED), done.stdout


# ---- handles described wrong ---------------------------------------------------------------


def test_a_handle_member_the_result_lacks_stops_the_check_naming_the_ones_it_has() -> None:
    done = _run(
        "check-isolation", "--command", _handle_notes("minted"), "--handle-key", "nope",
        *NOTES_WRITE,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "conversation__start's structured content has no string member 'nope'" in done.stderr
    assert "name the member: one of conversation" in done.stderr


def test_a_minting_tool_the_server_does_not_list_is_refused_before_any_call() -> None:
    done = _run(
        "bench", "--command", _handle_notes("minted"), "--handle-tool", "start_please",
        "--tool", "list_notes", "--calls", "1",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the tool that mints handles, 'start_please', is not in the server's tools/list" in (
        done.stderr
    )


def test_a_call_that_sets_the_handles_argument_itself_is_refused() -> None:
    done = _run(
        "check-isolation", "--module", "planning", "--handles",
        "--write", 'planning__create_goal {"goal": "{mark}", "conversation": "mine"}',
        "--read", "planning__list_goals",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "sets the argument 'conversation', which carries the session's handle" in done.stderr
    mix = MixOf((MixCall("t", {"conversation": "mine"}),), "test")
    with pytest.raises(HandleError, match=r"test: call 1 \(t\) sets the argument 'conversation'"):
        LoadPlan(mix=mix, calls=1, handles=Handles())


class _Result:
    """What a tool result holds, for `Handles.handle_of`."""

    def __init__(self, structured: object, text: str = "") -> None:
        self.structured_content = structured
        self.content = [type("Text", (), {"text": text})()]


@pytest.mark.parametrize(
    ("structured", "problem"),
    [
        (None, "conversation__start answered no structured content, so no handle under"),
        ({"result": "conv_x"}, "no string member 'conversation': name the member: one of result"),
        ({"conversation": 3}, "no string member 'conversation': none is a string"),
        ({"conversation": ""}, "no string member 'conversation'"),
    ],
)
def test_a_result_without_a_handle_says_what_it_holds(structured: object, problem: str) -> None:
    with pytest.raises(HandleError, match=re.escape(problem)):
        Handles().handle_of(_Result(structured, "hello"))
    assert Handles().handle_of(_Result({"conversation": "conv_abc"})) == "conv_abc"


@pytest.mark.parametrize("field", ["tool", "key", "argument"])
def test_handles_of_empty_names_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"Handles.{field} must be a non-empty string"):
        Handles(**{field: ""})
