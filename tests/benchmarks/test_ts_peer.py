"""The ``ts_peer`` scenario: the TypeScript SDK's server beside ours (`benchmarks._ts_peer`).

The SDK is installed from ``benchmarks/ts_peer/package-lock.json`` by `tests._npm` (a
skip without Node.js and npm, a failure on CI); ``server.mjs`` runs beside it. Its tools
are driven through the official Python SDK client over stdio and Streamable HTTP, and
the scenario runs whole at the tiny sizes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING

import pytest
import trio

from benchmarks import PRESETS, run_suite
from benchmarks import _fastmcp_peer as fastmcp_peer
from benchmarks import _ts_peer as ts_peer

from .._mcp_helpers import LogFile
from .._npm import npm_installed

if TYPE_CHECKING:
    from pathlib import Path

    from mcp import ClientSession

NEEDED_BY = "the ts_peer benchmark's tests"
TRANSPORTS = pytest.mark.parametrize("transport", ts_peer.TRANSPORTS)
LISTENING = re.compile(r"listening on (http://\S+)")
# The SDK client's SSE reader leaves httpx2's response generators unexhausted when it has
# the result it waited for: client-side noise (as in tests/harness/test_benchmarks.py).
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
    pytest.mark.timeout(900),  # a hang guard: the whole scenario, tiny, on a busy machine
]


@pytest.fixture(scope="module")
def modules() -> Path:
    """The locked packages, installed once (``npm ci``) outside the source tree."""
    return npm_installed(ts_peer.SOURCE, "ts_peer", needed_by=NEEDED_BY)


@pytest.fixture
def script(modules: Path, tmp_path: Path) -> Path:
    """``server.mjs`` beside the installed packages."""
    return ts_peer.script_beside(modules, tmp_path)


def node() -> str:
    """Node.js, which `npm_installed` found."""
    found = shutil.which("node")
    assert found is not None
    return found


def text(result: object) -> tuple[bool, str]:
    """(is_error, the text items joined) of a CallToolResult."""
    content = getattr(result, "content", ())
    return bool(getattr(result, "is_error", True)), "".join(item.text for item in content)


@TRANSPORTS
async def test_it_keeps_a_plan_per_session_in_the_words_of_the_others(
    transport: str, script: Path, tmp_path: Path
) -> None:
    """create_goal and list_goals answer as ours and FastMCP's do, each session apart."""
    async with ts_peer.ts_served(transport, node(), script, tmp_path) as peer:
        assert peer.name == ts_peer.TS
        assert peer.pid is not None
        first, second = await peer.new_session("first"), await peer.new_session("second")
        assert first != second
        for number, goal in enumerate(("Learn Rust", "Ship it"), 1):
            created = await peer.call("create_goal", first, goal=goal)
            assert created == (False, f"Created goal g{number}: {goal}")
        listed = await peer.call("list_goals", first)
        assert listed == (False, "Goals (2):\n- g1: Learn Rust\n- g2: Ship it")
        assert await peer.call("list_goals", second) == (False, "No goals yet.")
        unknown = await peer.call("list_goals", "never-made")
        assert unknown == (True, 'Error: session "never-made" not found')


async def test_over_http_its_sessions_live_in_one_mcp_session(script: Path) -> None:
    """A session minted in one MCP session is unknown in another: a server per MCP session."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def minted(session: ClientSession) -> str:
        await session.initialize()
        failed, minted = text(await session.call_tool("create_session", {}))
        assert not failed
        return minted

    with tempfile.TemporaryFile() as log:
        process = await trio.lowlevel.open_process(
            [node(), str(script), "http", "0"], stdin=subprocess.DEVNULL, stderr=log
        )
        try:
            url = (await LogFile(log).wait_for(LISTENING, process)).group(1)
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as one,
                streamable_http_client(url) as (other_read, other_write),
                ClientSession(other_read, other_write) as other,
            ):
                theirs = await minted(one)
                await minted(other)
                created = await one.call_tool("create_goal", {"session_id": theirs, "goal": "A"})
                assert text(created) == (False, "Created goal g1: A")
                refused = await other.call_tool("list_goals", {"session_id": theirs})
                assert text(refused) == (True, f'Error: session "{theirs}" not found')
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()


@pytest.mark.parametrize("arguments", [[], ["http"], ["http", "65536"], ["http", "8000x"], ["x"]])
def test_the_server_refuses_a_command_line_it_does_not_know(
    arguments: list[str], script: Path
) -> None:
    """Usage and exit status 2, never a server on a port it was not asked for."""
    done = subprocess.run(
        [node(), str(script), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "usage: node server.mjs stdio | node server.mjs http PORT",
    )


@TRANSPORTS
async def test_every_answer_is_checked(transport: str, script: Path, tmp_path: Path) -> None:
    """A batch passes on the right answers; a goal it never had listed fails the check."""
    async with ts_peer.ts_served(transport, node(), script, tmp_path) as peer:
        checked = await ts_peer.Checked.of(peer, 3)
        batch, client = await checked.batch(12, 4)
        assert (batch.calls, len(batch.latencies)) == (12, 12)
        assert batch.cpu is not None
        assert client > 0
        assert sum(map(len, checked.acknowledged.values())) == 6  # every other call creates
        await checked.verify()
        some = next(iter(checked.acknowledged))
        checked.acknowledged[some].append("a goal never sent")
        with pytest.raises(ts_peer.WrongAnswer, match=re.escape(f"{ts_peer.TS} answered")):
            await checked.verify()


@pytest.mark.parametrize(
    ("answer", "goals"),
    [
        ("No goals yet.", []),
        ("Goals (2):\n- g1: a\n- g2: b: c", ["a", "b: c"]),
        ("Goals (2):\n- g1: a", None),  # the count is wrong
        ("Goals (2):\n- g1: a\n- g3: b", None),  # an id is missing
        ("Created goal g1: a", None),
        ("Goals (1):\n- g1: a\n", None),  # a line too many
    ],
)
def test_a_list_is_read_only_when_it_is_one(answer: str, goals: list[str] | None) -> None:
    """The goals of a list_goals answer, in order, or None when the text is anything else."""
    assert ts_peer._listed(answer) == goals


def test_the_tiny_run_measures_every_server_on_both_transports(
    modules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--only ts_peer`` at the tiny sizes: server CPU per call of each server, each
    transport, sequential and 16 in flight, and the ratios the issue sets targets for."""
    monkeypatch.setattr(ts_peer, "find_ts_peer", lambda: modules)
    report = run_suite(PRESETS["tiny"], only=["ts_peer"], progress=lambda _line: None)
    (result,) = report.scenarios
    assert result.failure is None, result.failure and result.failure.describe()
    figures = {f.name: f for f in result.figures}
    servers = [ts_peer.OURS, ts_peer.TS]
    if fastmcp_peer.find_fastmcp() is not None:
        servers.append(fastmcp_peer.FASTMCP_MEMORY)
    tiny = PRESETS["tiny"]
    for transport in ts_peer.TRANSPORTS:
        for callers in (1, ts_peer.IN_FLIGHT):
            where = f"{transport}, callers={callers}, {tiny.ts_sessions} sessions, create/list"
            for name in servers:
                # Read from /proc in clock ticks: a tiny batch may well take none.
                assert figures[f"{name} server CPU per call, {where}"].value >= 0
                assert figures[f"{name} client CPU per call, {where}"].value > 0
                assert figures[f"{name} calls/s, {where}"].value > 0
            ratio = f"server CPU per call, {ts_peer.OURS} / {ts_peer.TS}, {where}"
            if ratio in figures:  # absent when a batch took less than a clock tick
                assert figures[ratio].target == ("≤ 1.5x" if transport == "stdio" else "≤ 0.5x")
                assert not figures[ratio].judged  # tiny
    assert any("every answer checked" in note for note in result.notes)


def test_a_tiny_run_never_installs_and_says_how_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an install the tiny run is skipped with a note; npm is never run."""

    def refuse(_progress: object) -> Path:
        raise AssertionError("a tiny run installed the TypeScript SDK")

    monkeypatch.setattr(ts_peer, "find_ts_peer", lambda: None)
    monkeypatch.setattr(ts_peer, "install_ts_peer", refuse)
    result = ts_peer.run_ts_peer(PRESETS["tiny"], lambda _line: None)
    assert result.figures == ()
    (note,) = result.notes
    assert note.startswith(f"skipped: @modelcontextprotocol/sdk {ts_peer.TS_SDK_VERSION} is not")
    assert "--only ts_peer (quick or --full) installs it" in note


def test_the_quick_run_installs_the_locked_sdk_where_it_looks_for_it(
    modules: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`install_ts_peer` runs ``npm ci`` into the cache folder that `find_ts_peer` reads."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ts_peer.find_ts_peer() is None
    installed = ts_peer.install_ts_peer(lambda _line: None)
    assert installed == ts_peer.find_ts_peer() == ts_peer.ts_peer_modules()
    assert installed.is_relative_to(tmp_path / "mcp-actors-bench" / "ts_peer")
    sdk = installed / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    assert f'"version": "{ts_peer.TS_SDK_VERSION}"' in sdk.read_text()
    assert [p.name for p in installed.parent.iterdir()] == [installed.name]  # nothing partial
