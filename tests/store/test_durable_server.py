"""Invariant 8 (durability) end to end: ``serve --state`` killed with SIGKILL mid-stream.

A real server process on a SQLite file gets hundreds of pipelined
``planning__create_goal`` calls across many sessions over raw stdio. The
instant after some replies have been read it is killed with SIGKILL, while
calls are still in flight; whatever replies it wrote before dying are read
too, since each one is an acknowledgement. The server is restarted on the
same file, more calls are sent and it is killed again; a last server lists
every session. Every acknowledged goal must be there under the id its reply
gave, nothing may appear twice or in another session, and calls that were
never answered may have landed or not, but only whole.

The rest checks what an operator sees when ``--state`` is wrong: a bad URL,
a file where a folder should be, a file that is not a database, a database of
another program, an unreachable PostgreSQL server. Each is refused with exit
code 2 (a usage error) or 1 (the store cannot be opened), one line naming the
store and the cause, no traceback, no password, and the file left as it was
(another program's database keeps its data). And ``--state memory`` keeps
nothing across a restart, where the default file keeps everything.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import pytest
import trio

from .._calls import check_goal_lists, listed_goals
from .._mcp_helpers import SERVE, RawServer, raw_server, reply_text, tools_call
from .._postgres import free_port

if TYPE_CHECKING:
    from collections.abc import Callable

SESSIONS: Final = [f"session-{index}" for index in range(20)]
CALLS_PER_ROUND: Final = 400
# Read this many replies, then kill. The server runs at most the stdout pipe's worth of
# replies (64 KiB, about 200 of them) plus --max-in-flight (32) ahead of its reader,
# so most of a round's calls are still unanswered when the kill comes.
KILL_AFTER: Final = 50
ROUNDS: Final = 5  # each kill comes at another point of a commit
_CREATED: Final = re.compile(r"Created goal (g\d+): (goal-\d+-\d+)")
_GUARD: Final = 60  # seconds: a hung server fails the test instead of hanging it


@attrs.define
class Ledger:
    """Every goal sent, and those whose creation a reply acknowledged."""

    sent: dict[str, str] = attrs.Factory(dict)
    """Goal text → the session it was sent to."""
    acknowledged: dict[str, tuple[str, str]] = attrs.Factory(dict)
    """Goal text → (session, goal id) as its reply gave them."""


class Lines:
    """A server's stdout, one JSON-RPC message per line, read without RawServer's buffer."""

    def __init__(self, server: RawServer) -> None:
        assert server.process.stdout is not None
        self._stream = server.process.stdout
        self._buffer = b""

    async def next(self) -> dict[str, Any] | None:
        """The next whole message; None at EOF (a line cut short by a kill is no message)."""
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some()
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


async def _initialize(server: RawServer, lines: Lines) -> None:
    await server.send(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "durability-test", "version": "0"},
            },
        }
    )
    reply = await lines.next()
    assert reply is not None
    assert "result" in reply, reply
    await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _record(ledger: Ledger, reply: dict[str, Any]) -> None:
    """Note what an acknowledgement says was created, checking it names the goal it was sent."""
    found = _CREATED.fullmatch(reply_text(reply))
    assert found is not None, reply
    goal_id, text = found.groups()
    assert reply["id"] == text, f"the reply to {reply['id']!r} created {text!r}"
    assert text not in ledger.acknowledged, f"{text!r} acknowledged twice"
    ledger.acknowledged[text] = (ledger.sent[text], goal_id)


async def _send_all(server: RawServer, requests: list[dict[str, Any]]) -> None:
    for request in requests:
        await server.send(request)


async def _hammer_then_kill(url: str, round_number: int, ledger: Ledger) -> None:
    """Pipeline a round of creates into a new server; SIGKILL it after KILL_AFTER replies."""
    requests = []
    for index in range(CALLS_PER_ROUND):
        text = f"goal-{round_number}-{index}"
        session = SESSIONS[index % len(SESSIONS)]
        ledger.sent[text] = session
        # The request's id is the goal's text: each reply names what it acknowledges.
        # Named as a host names it: in _meta.
        meta = {"sessionId": session}
        requests.append(
            tools_call("planning__create_goal", {"goal": text}, request_id=text, meta=meta)
        )
    before = len(ledger.acknowledged)
    async with raw_server("--state", url) as server:
        lines = Lines(server)
        with trio.fail_after(_GUARD):
            await _initialize(server, lines)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_send_all, server, requests)
                for _ in range(KILL_AFTER):
                    reply = await lines.next()
                    assert reply is not None, f"the server died early:\n{server.log.text()}"
                    _record(ledger, reply)
                server.process.kill()  # SIGKILL, with calls in flight
                nursery.cancel_scope.cancel()  # the rest of the requests are never sent
            assert await server.process.wait() == -9
            # Replies it wrote before it died are acknowledgements too.
            while (reply := await lines.next()) is not None:
                _record(ledger, reply)
    acknowledged = len(ledger.acknowledged) - before
    assert acknowledged < CALLS_PER_ROUND, "every call was answered before the kill"


async def _stored_goals(url: str) -> dict[str, list[tuple[str, str]]]:
    """Each session's goals (id, text) as a fresh server on `url` lists them."""
    stored = {}
    async with raw_server("--state", url) as server:
        lines = Lines(server)
        with trio.fail_after(_GUARD):
            await _initialize(server, lines)
            for session in SESSIONS:
                listing = tools_call(
                    "planning__list_goals", {}, request_id=session, meta={"sessionId": session}
                )
                await server.send(listing)
                reply = await lines.next()
                assert reply is not None
                assert reply["id"] == session, reply
                stored[session] = listed_goals(reply_text(reply))
    return stored


async def test_every_acknowledged_goal_survives_sigkill_mid_stream(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    ledger = Ledger()
    for round_number in range(ROUNDS):
        await _hammer_then_kill(url, round_number, ledger)
    stored = await _stored_goals(url)

    check_goal_lists(stored, ledger.sent)
    lost = {
        text: where
        for text, (session, goal_id) in ledger.acknowledged.items()
        if (where := (goal_id, text)) not in stored[session]
    }
    assert not lost, f"{len(lost)} acknowledged goals lost in a SIGKILL: {sorted(lost)[:5]}…"
    # Unanswered calls may have landed (their reply died with the server) or not.
    landed = sum(len(goals) for goals in stored.values()) - len(ledger.acknowledged)
    print(f"{len(ledger.acknowledged)} acknowledged, {landed} landed unanswered")


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file under `root` with its bytes (None for a folder)."""
    return {
        str(item.relative_to(root)): None if item.is_dir() else item.read_bytes()
        for item in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    ("state", "listed"),
    [
        (("--state", "memory"), "No goals yet."),
        ((), "Goals (1):\n- g1: kept?"),  # the default: a file in the XDG state folder
    ],
    ids=["memory", "default"],
)
async def test_memory_keeps_nothing_across_a_restart_and_the_default_file_keeps_all(
    state: tuple[str, ...], listed: str
) -> None:
    replies = []
    for name, arguments in (("create_goal", {"goal": "kept?"}), ("list_goals", {})):
        async with raw_server(*state) as server:
            await server.initialize()
            reply = await server.call(f"planning__{name}", arguments, {"sessionId": "s"})
            replies.append(reply_text(reply))
            await server.close_stdin()
            assert await server.wait() == 0
    assert replies == ["Created goal g1: kept?", listed]
    written = _snapshot(Path(os.environ["XDG_STATE_HOME"]))
    assert sorted(written) == ([] if state else ["mcp-actors", "mcp-actors/state.db"])


# ---- --state refused ----------------------------------------------------------------

_PROG: Final = "python -m actors serve"


def _not_a_database(root: Path) -> Path:
    path = root / "state.db"
    path.write_bytes(b"not a database\n" * 300)
    return path


def _a_file_where_the_folder_goes(root: Path) -> Path:
    (root / "blocker").write_text("a file, not a folder\n")
    return root / "blocker" / "state.db"


def _a_folder_that_does_not_exist(root: Path) -> Path:
    return root / "nowhere" / "state.db"  # a typo: only the default path makes folders


def _a_folder_where_the_file_goes(root: Path) -> Path:
    path = root / "state.db"
    path.mkdir()
    return path


async def _serve_exit(*args: str) -> tuple[int, str]:
    """The exit code and stderr of ``serve ARGS`` with nothing on stdin."""
    with trio.fail_after(_GUARD):
        done = await trio.run_process(
            [*SERVE, *args],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.stdout == b"", "nothing may reach stdout, the protocol's channel"
    stderr = done.stderr.decode()
    assert "Traceback" not in stderr, stderr
    return done.returncode, stderr


@pytest.mark.parametrize(
    ("make", "cause"),
    [
        (_not_a_database, r"file is not a database"),
        (_a_file_where_the_folder_goes, r".*/blocker is not a folder: a file stands where it .*"),
        (_a_folder_where_the_file_goes, r".*/state\.db is not a file \(a folder stands there\)"),
        (
            _a_folder_that_does_not_exist,
            r"the folder .*/nowhere does not exist \(is the path right\?\); create it first, "
            r"or name a file in an existing folder",
        ),
    ],
)
async def test_a_state_file_that_cannot_be_used_is_refused_and_left_as_it_was(
    tmp_path: Path, make: Callable[[Path], Path], cause: str
) -> None:
    path = make(tmp_path)
    before = _snapshot(tmp_path)
    await _refused(f"sqlite:///{path}", cause)
    assert _snapshot(tmp_path) == before


async def test_another_programs_database_is_refused_and_its_data_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("CREATE TABLE actor_state (name TEXT PRIMARY KEY, notes TEXT)")
        connection.execute("INSERT INTO actor_state VALUES ('theirs', 'keep me')")
    connection.close()
    await _refused(f"sqlite:///{path}", r"its table actor_state has the columns .*")
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT * FROM actor_state").fetchall()
        tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
    finally:
        connection.close()
    assert rows == [("theirs", "keep me")]
    assert tables == [("actor_state",), ("sqlite_autoindex_actor_state_1",)]
    assert not path.with_name("state.db-wal").exists()  # its journal mode was left alone


async def test_a_database_with_other_tables_is_refused_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("CREATE TABLE users (name TEXT)")
    connection.close()
    before = path.read_bytes()
    await _refused(f"sqlite:///{path}", r"the file holds another program's tables \(users\).*")
    assert path.read_bytes() == before


async def _refused(url: str, cause: str) -> None:
    """``serve --state URL`` exits 1 with one line: the store could not be opened, and why."""
    code, stderr = await _serve_exit("--state", url)
    assert code == 1, stderr
    opening = re.escape(f"{_PROG}: error: cannot serve: cannot open the state store {url}: ")
    assert re.fullmatch(f"{opening}{cause}\n", stderr), stderr


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("foo://bar", "unknown state store URL 'foo://bar'; expected 'memory', "),
        ("", "unknown state store URL ''; expected 'memory', "),
        ("Memory", "unknown state store URL 'Memory'; expected 'memory', "),
        ("sqlite://state.db", "a SQLite URL names a file: sqlite:///state.db or "),
        ("sqlite:///", "a SQLite URL names a file: sqlite:///state.db or "),
        ("sqlite:////", "a SQLite URL names a file: sqlite:///state.db or "),
    ],
)
async def test_a_state_url_of_no_known_form_is_a_usage_error(url: str, problem: str) -> None:
    code, stderr = await _serve_exit("--state", url)
    assert code == 2, stderr
    error, hint = stderr.splitlines()
    assert error.startswith(f"{_PROG}: error: --state: {problem}"), stderr
    assert hint == f"(see '{_PROG} --help')"


async def test_an_unreachable_postgresql_server_is_refused_without_its_password() -> None:
    url = f"postgresql://alice:hunter2-secret@127.0.0.1:{free_port()}/state"
    shown = url.replace(":hunter2-secret", "")
    code, stderr = await _serve_exit("--state", url)
    assert code == 1, stderr
    assert stderr.startswith(
        f"{_PROG}: error: cannot serve: cannot open the state store {shown}: connection failed"
    ), stderr
    assert "hunter2" not in stderr
