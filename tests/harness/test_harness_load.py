"""``mcp-actors bench`` (`actors.harness`): load on real servers, counted and reported right.

Every server is real: ``python -m actors serve`` over stdio (a process per
session) and over ``--http`` on 127.0.0.1:0, a stdio command, and FastMCP
over Streamable HTTP when its environment exists (`find_fastmcp`), each
called through the official SDK client in the 2026-07-28 era (the default);
over HTTP, where such a client has no session, every session's calls carry
the handle it minted (``serve --http`` serves handles by default). The raw
servers that stop answering speak the initialize handshake alone: they are
driven in the 2025 era. Sizes are tiny: a few calls, two callers. Every test
checks that the processes it started are gone.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

from actors.harness import (
    JSON_FORMAT,
    Handles,
    HttpTarget,
    LoadPlan,
    LoadResult,
    MixCall,
    MixError,
    NoAnswer,
    StdioTarget,
    TargetError,
    load_mix,
    one_tool_mix,
    run_load,
    serve_command,
    serve_module_http,
    serve_module_in_process,
    to_json,
)
from actors.harness import Mix as MixOf
from actors.harness._cli import main as bench_main
from actors.harness._load import SILENCE_TIMEOUTS
from benchmarks._fastmcp_peer import FASTMCP_VERSION, find_fastmcp

from .._processes import descendants, left_after, run_leaving_nothing, running_with

if TYPE_CHECKING:
    from collections.abc import Iterator

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests._harness_module:harness"
BENCH = (sys.executable, "-m", "actors", "bench")
FASTMCP_SCRIPT = ROOT / "benchmarks" / "_fastmcp_server.py"
TOKEN = "harness-test-token-0123456789"
GUARD = 120  # seconds a whole bench command may take on a busy machine before the test fails
HANDLES = Handles()  # serve's: conversation__start, its handle passed as 'conversation'


def _mix(*calls: MixCall) -> MixOf:
    return MixOf(calls, "test")


def _echo() -> MixOf:
    return _mix(MixCall("harness__echo", {"text": "caller {caller}, call {n}"}))


@pytest.fixture
def no_process_left() -> Iterator[None]:
    """Fail the test if a process it started (a server) is still running after it."""
    before = descendants(os.getpid())
    yield
    assert left_after(descendants(os.getpid()) - before, 10) == []


def _bench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``python -m actors bench ARGS``; afterwards no process it started may be left."""
    return run_leaving_nothing([*BENCH, *args], cwd=cwd, timeout=GUARD)


def _histogram_count(result: LoadResult) -> int:
    return int(HdrHistogram.decode(result.latency.histogram).get_total_count())


# ---- the loops ---------------------------------------------------------------------------


@pytest.mark.usefixtures("no_process_left")
async def test_stdio_serve_counts_exactly_the_calls_asked_over_a_process_per_session() -> None:
    target = StdioTarget(tuple(serve_command([MODULE], "memory")))
    processes: list[tuple[int, ...]] = []

    def progress(line: str) -> None:
        if line.startswith("making"):  # the sessions are open: their servers are running
            processes.append(target.server_pids)

    plan = LoadPlan(mix=_echo(), sessions=2, callers=2, calls=7, warmup=0.2, seed=1)
    result = await run_load(target, plan, describe="serve", progress=progress)
    assert result.calls == 7
    assert _histogram_count(result) == 7
    assert result.errors == {}
    (pids,) = processes
    assert len(set(pids)) == 2, "one server process per session"
    assert result.server_cpu_seconds is not None
    assert result.server_cpu_seconds >= 0


async def test_in_process_serve_counts_exactly_the_calls_asked_each_session_its_own() -> None:
    """In this process: the calls asked, each session's echoes naming its own session only."""
    async with serve_module_in_process([MODULE], "memory") as target:
        plan = LoadPlan(mix=_echo(), sessions=3, callers=3, calls=9, warmup=0.0, seed=1)
        result = await run_load(target, plan, describe="in process")
        assert target.server_pid is None  # its CPU is this process's, counted as the client's
        live = target.runtime.statistics().live_actors
    assert result.calls == 9
    assert _histogram_count(result) == 9
    assert result.errors == {}
    assert result.server_cpu_seconds is None
    assert live == 3, "one actor per session: the clients in memory are three sessions"


@pytest.mark.usefixtures("no_process_left")
async def test_errors_are_counted_by_kind() -> None:
    weighted = _mix(
        MixCall("harness__echo", {"text": "s{session}"}, weight=2),
        MixCall("harness__fail", weight=1),
        MixCall("harness__echo", {"text": "never"}, weight=0),
    )
    async with serve_module_http([MODULE], "memory") as target:
        runs = {}
        for name, mix, calls, timeout in (
            ("tool error", _mix(MixCall("harness__fail")), 3, 30.0),
            ("unknown tool", _mix(MixCall("harness__nope")), 2, 30.0),
            # A nap of a second: the server, stopped, waits for it before it exits.
            ("timeout", _mix(MixCall("harness__nap", {"seconds": 1})), 2, 0.2),
            ("weighted", weighted, 30, 30.0),
        ):
            plan = LoadPlan(
                mix=mix,
                sessions=2,
                callers=2,
                calls=calls,
                timeout=timeout,
                seed=7,
                check_tools=False,
                handles=HANDLES,
            )
            runs[name] = await run_load(target, plan, describe=name)
    assert runs["tool error"].errors == {"tool error (isError)": 3}
    assert runs["unknown tool"].errors == {"JSON-RPC -32602": 2}
    assert runs["timeout"].errors == {"timeout": 2}
    assert [run.calls for run in runs.values()] == [3, 2, 2, 30]
    assert runs["tool error"].failed == 3
    weighted_errors = runs["weighted"].errors
    assert set(weighted_errors) == {"tool error (isError)"}
    assert 0 < weighted_errors["tool error (isError)"] < 30, "both weighted entries are drawn"


@pytest.mark.usefixtures("no_process_left")
async def test_setup_calls_fill_placeholders_for_their_own_session(tmp_path: Path) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(
        '[[setup]]\ntool = "harness__echo"\narguments = { text = "s{session}" }\nname = "sid"\n'
        '[[setup]]\ntool = "harness__echo"\narguments = { text = "{sid}!" }\nname = "loud"\n'
        '[[call]]\ntool = "harness__same"\n'
        'arguments = { a = "{sid}/{loud}", b = "s{session}/s{session}!" }\n'
    )
    failing = MixOf(_echo().calls, "failing setup", (MixCall("harness__fail"),))
    async with serve_module_http([MODULE], "memory") as target:
        plan = LoadPlan(mix=load_mix(path), sessions=3, callers=3, calls=9, handles=HANDLES)
        result = await run_load(target, plan, describe="setup")
        failing_plan = LoadPlan(mix=failing, calls=1, handles=HANDLES)
        with pytest.raises(
            TargetError,
            match=r"session 0: setup 1 \(harness__fail\) answered an error: this tool fails",
        ):
            await run_load(target, failing_plan, describe="failing setup")
    assert (result.calls, result.errors) == (9, {}), "harness__same fails unless filled right"


@pytest.mark.usefixtures("no_process_left")
async def test_an_open_loop_the_server_cannot_keep_up_with_reports_late_and_dropped_calls() -> None:
    nap = _mix(MixCall("harness__nap", {"seconds": 0.05}))
    async with serve_module_http([MODULE], "memory") as target:
        # One caller, each call 50 ms, 100 due per second: call k (k >= 1) cannot start
        # before k * 50 ms, 40k ms after it was due. Latency counts from the due time.
        counted = await run_load(
            target,
            LoadPlan(mix=nap, callers=1, calls=10, rate=100, handles=HANDLES),
            describe="open, calls",
        )
        # 30 calls are due in 0.3 s; the one caller starts about 6 of them.
        timed = await run_load(
            target,
            LoadPlan(mix=nap, callers=1, duration=0.3, rate=100, handles=HANDLES),
            describe="open, 0.3 s",
        )
        # The same server in a closed loop: nothing is due, so nothing is late.
        closed = await run_load(
            target,
            LoadPlan(mix=_echo(), callers=2, duration=0.3, warmup=0.1, handles=HANDLES),
            describe="closed",
        )
    assert counted.calls == 10
    assert counted.late == 9
    assert counted.dropped == 0
    assert counted.max_start_lag_us >= 8 * 40_000
    assert counted.latency.max >= counted.max_start_lag_us + 50_000
    assert timed.calls + timed.dropped == 30
    assert timed.dropped > 0
    assert timed.calls >= 1
    assert closed.calls >= 1
    assert _histogram_count(closed) == closed.calls
    assert (closed.late, closed.dropped, closed.max_start_lag_us) == (0, 0, 0)
    assert to_json(closed)["schedule"] is None
    assert to_json(timed)["schedule"] == {
        "late": timed.late,
        "dropped": timed.dropped,
        "max_start_lag_us": timed.max_start_lag_us,
    }


# ---- the command line ----------------------------------------------------------------------

JSON_KEYS = {
    "format",
    "target",
    "plan",
    "calls",
    "failed",
    "errors",
    "seconds",
    "calls_per_second",
    "latency_us",
    "histogram",
    "schedule",
    "cpu",
    "machine",
}


def test_bench_over_http_prints_the_table_and_writes_the_json(tmp_path: Path) -> None:
    output = tmp_path / "bench.json"
    mix = tmp_path / "mix.toml"
    mix.write_text(
        '[[call]]\ntool = "harness__echo"\narguments = { text = "{session}/{n}" }\nweight = 3\n'
        '[[call]]\ntool = "harness__fail"\nweight = 1\n'
    )
    # With a token the server refuses a request without it: every call carries it, and the
    # handle its session minted (bound to the token's tenant).
    done = _bench(
        *("--module", MODULE, "--http", "--mix", str(mix), "--sessions", "2", "--callers", "2"),
        *("--calls", "8", "--seed", "3", "--json", str(output), "--token", TOKEN, "--handles"),
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(output.read_text())
    assert set(figures) == JSON_KEYS
    assert figures["format"] == JSON_FORMAT
    assert figures["calls"] == 8
    assert figures["failed"] == sum(figures["errors"].values())
    assert set(figures["errors"]) <= {"tool error (isError)"}
    assert set(figures["latency_us"]) == {"p50", "p90", "p99", "p99.9", "max", "mean"}
    assert figures["plan"]["loop"] == "closed"
    assert figures["plan"]["mix"]["calls"] == [
        {"tool": "harness__echo", "weight": 3.0},
        {"tool": "harness__fail", "weight": 1.0},
    ]
    assert figures["cpu"]["server_us_per_call"] is not None, "serve --http is a local process"
    assert figures["cpu"]["client_us_per_call"] > 0
    assert figures["machine"]["cores"] >= 1
    # Not a terminal: plain lines, one per figure, the calls among them.
    assert re.search(r"^calls +8 in ", done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^server CPU/call +[\d,.]+ (µs|ms)$", done.stdout, re.MULTILINE)


def test_a_bench_ended_by_sigterm_stops_its_server_and_says_nothing_was_measured() -> None:
    marker = f"HARNESS_TEST_{uuid.uuid4().hex}"
    bench = subprocess.Popen(
        [*BENCH, "--module", MODULE, "--http", "--tool", "harness__echo", "--duration", "600"],
        cwd=ROOT,
        env={**os.environ, marker: "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert bench.stderr is not None
        lines = []
        while not lines or "measuring for 600 s" not in lines[-1]:
            lines.append(bench.stderr.readline())
            assert lines[-1], f"bench ended before measuring: {lines}"
        assert len(running_with(marker)) == 2, "bench and its server"
        bench.terminate()
        assert bench.wait(timeout=GUARD) == 130
        assert "interrupted: nothing measured" in bench.stderr.read()
    finally:
        bench.kill()
        bench.wait()
        bench.stderr.close()  # type: ignore[union-attr]
    assert running_with(marker) == []


def test_bench_runs_a_stdio_command_per_session(tmp_path: Path) -> None:
    command = " ".join([*serve_command([MODULE], "memory")])
    output = tmp_path / "bench.json"
    done = _bench(
        *("--command", command, "--tool", "harness__echo", "--arguments", '{"text": "{n}"}'),
        *("--sessions", "2", "--calls", "4", "--json", str(output)),
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(output.read_text())
    assert (figures["calls"], figures["failed"]) == (4, 0)
    assert figures["cpu"]["server_us_per_call"] is not None


@pytest.mark.usefixtures("no_process_left")
def test_a_tool_the_server_does_not_list_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mix = tmp_path / "mix.toml"
    mix.write_text('[[call]]\ntool = "harness__echo"\n\n[[call]]\ntool = "harness__missing"\n')
    with pytest.raises(SystemExit) as exited:
        bench_main(["--module", MODULE, "--mix", str(mix), "--calls", "2"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"{mix}: call 2: tool 'harness__missing' is not in the server's tools/list" in error
    assert "harness__echo" in error, "the message lists the tools there are"


@pytest.fixture
def fastmcp() -> str:
    """The Python of FastMCP's environment; the test is skipped when there is none."""
    python = find_fastmcp()
    if python is None:
        pytest.skip(
            f"FastMCP {FASTMCP_VERSION} is not installed (python -m benchmarks installs it)"
        )
    return python


def test_bench_loads_a_fastmcp_servers_session_state_over_http_and_reads_its_cpu(
    fastmcp: str, tmp_path: Path
) -> None:
    # As benchmarks/_over_http.py runs it: -I keeps this project off FastMCP's path;
    # uvicorn prints the port it bound.
    argv = [fastmcp, "-I", str(FASTMCP_SCRIPT), "memory", "--http", "0", "--quiet"]
    log = tmp_path / "fastmcp.log"
    # FastMCP's state is keyed by a session id its create_session mints: one per session.
    mix = tmp_path / "mix.toml"
    mix.write_text(
        '[[setup]]\ntool = "create_session"\nname = "sid"\n'
        '[[call]]\ntool = "create_goal"\narguments = { session_id = "{sid}", goal = "g{n}" }\n'
        '[[call]]\ntool = "list_goals"\narguments = { session_id = "{sid}" }\n'
    )
    with log.open("wb") as sink:
        server = subprocess.Popen(argv, stdout=sink, stderr=sink, stdin=subprocess.DEVNULL)
    try:
        port = _wait_for_port(log, server)
        output = tmp_path / "bench.json"
        done = _bench(
            *("--url", f"http://127.0.0.1:{port}/mcp", "--server-pid", str(server.pid)),
            *("--mix", str(mix), "--sessions", "2", "--calls", "6", "--json", str(output)),
        )
    finally:
        server.kill()
        server.wait()
    assert done.returncode == 0, done.stderr
    figures = json.loads(output.read_text())
    assert (figures["calls"], figures["failed"]) == (6, 0)
    assert figures["cpu"]["server_us_per_call"] is not None


def _wait_for_port(log: Path, server: subprocess.Popen[bytes]) -> int:
    pattern = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
    end = time.monotonic() + GUARD
    while time.monotonic() < end and server.poll() is None:
        found = pattern.search(log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        time.sleep(0.05)  # the server writes the line; there is nothing to wait on
    pytest.fail(f"FastMCP did not listen: {log.read_text(errors='replace')[-2000:]}")


# ---- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '[[call]]\ntool = "t"\narguments = { a = "{nope}" }\n',
            "call 1 (t): arguments.a: unknown placeholder {nope}",
        ),
        ('[[call]]\ntool = "t"\nweight = -1\n', "call 1 (t): 'weight' must be zero or more"),
        (
            '[[call]]\ntool = "t"\nwieght = 2\n',
            "call 1: unknown key(s) wieght (expected tool, arguments",
        ),
        ("[[call]]\nweight = 2\n", "call 1: 'tool' must be a tool's name"),
        ('[[call]]\ntool = "t"\nweight = 0\n', "every weight is zero"),
        ("calls = 3\n", "unknown key(s) calls"),
        ("", "no calls"),
        ("[[call]\n", "not valid TOML"),
        ('[[call]]\ntool = "t"\narguments = { a = ["{x:q}"] }\n', "unknown placeholder {x}"),
        ('[[call]]\ntool = "t"\narguments = { a = "{n:q}" }\n', "is not a valid template"),
        ('[[setup]]\ntool = "s"\nname = "a b"\n[[call]]\ntool = "t"\n', "setup 1 (s): 'name' must"),
        ('[[setup]]\ntool = "s"\nname = "n"\n[[call]]\ntool = "t"\n', "the name 'n' is taken"),
        (
            '[[setup]]\ntool = "s"\nweight = 2\n[[call]]\ntool = "t"\n',
            "setup 1: unknown key(s) weight",
        ),
        (
            '[[setup]]\ntool = "s"\narguments = { a = "{later}" }\n'
            '[[setup]]\ntool = "s"\nname = "later"\n[[call]]\ntool = "t"\n',
            "setup 1 (s): arguments.a: unknown placeholder {later}",
        ),
        ('setup = 3\n[[call]]\ntool = "t"\n', "'setup' must be a list"),
    ],
)
def test_a_bad_mix_file_is_refused_naming_the_file_the_entry_and_the_problem(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(text)
    with pytest.raises(MixError) as raised:
        load_mix(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert problem in str(raised.value)


def test_a_template_fills_every_placeholder_at_any_depth() -> None:
    (call,) = load_mix_from(
        '[[call]]\ntool = "t"\narguments = { a = ["{session}-{caller}", '
        '{ b = "{n:03}" }], c = 5, d = "{{literal}}" }\n'
    ).calls
    arguments, meta = call.render({"session": 1, "caller": 2, "n": 3, "random": 4})
    assert arguments == {"a": ["1-2", {"b": "003"}], "c": 5, "d": "{literal}"}
    assert meta is None


def load_mix_from(text: str) -> MixOf:
    """A mix parsed from `text` (written to a temporary file)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "mix.toml")
        path.write_text(text)
        return load_mix(path)


def test_bad_one_tool_arguments_are_refused() -> None:
    with pytest.raises(MixError, match="--arguments is not valid JSON"):
        one_tool_mix("t", "{")
    with pytest.raises(MixError, match="'arguments' must be a table, not list"):
        one_tool_mix("t", "[1]")


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--module", "planning", "--tool", "t", "--sessions", "0"], "--sessions: must be a whole"),
        (
            ["--module", "planning", "--tool", "t", "--sessions", "3", "--callers", "2"],
            "3 sessions for 2 callers",
        ),
        (["--url", "http://127.0.0.1:1/mcp", "--http", "--tool", "t"], "--http: see --help"),
        (["--module", "planning", "--url", "http://x/mcp", "--tool", "t"], "not allowed with"),
        (
            ["--module", "planning", "--arguments", "{}", "--mix", "m.toml"],
            "--arguments goes with --tool",
        ),
        (["--module", "no_such_package:thing", "--tool", "t"], "--module: module "),
        (["--module", "planning", "--tool", "t", "--rate", "-1"], "--rate: must be a positive"),
        (
            ["--module", "planning", "--tool", "t", "--calls", "5", "--duration", "1"],
            "not allowed with",
        ),
        (
            ["--module", "planning", "--tool", "t", "--json", "/no/such/folder/out.json"],
            "--json: the folder /no/such/folder does not exist",
        ),
        (["--module", "planning"], "one of the arguments --mix --tool is required"),
        (["--command", "  ", "--tool", "t"], "--command is empty"),
        (["--module", "planning", "--mix", "/no/such/mix.toml"], "cannot read the mix file"),
        (
            ["--module", "planning", "--tool", "t", "--arguments", '{"a": "{who}"}'],
            "--tool/--arguments: call 1 (t): arguments.a: unknown placeholder {who}",
        ),
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], args: list[str], problem: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        bench_main(args)
    assert exited.value.code == 2
    assert problem in capsys.readouterr().err


async def test_a_server_that_cannot_start_is_an_error_naming_it() -> None:
    target = StdioTarget(
        (sys.executable, "-c", "import sys; print('no MCP here', file=sys.stderr)")
    )
    plan = LoadPlan(mix=_echo(), calls=1)
    with pytest.raises(TargetError, match="did not open an MCP session") as raised:
        await run_load(target, plan, describe="nothing")
    assert "no MCP here" in str(raised.value)
    unreachable = HttpTarget("http://127.0.0.1:1/mcp")
    with pytest.raises(TargetError, match=r"http://127\.0\.0\.1:1/mcp did not open"):
        await run_load(unreachable, plan, describe="nothing")


def test_python_m_benchmarks_bench_is_mcp_actors_bench(capsys: pytest.CaptureFixture[str]) -> None:
    """The suite's command line hands ``bench`` to the harness: the same refusal, its name."""
    from benchmarks.__main__ import main as suite_main

    with pytest.raises(SystemExit) as refused:
        suite_main(["bench", "--url", "http://127.0.0.1:9/mcp", "--calls", "1"])
    assert refused.value.code == 2
    assert "python -m benchmarks bench: error:" in capsys.readouterr().err


# ---- servers that stop answering: a clear failure, not a hang ----------------------------

UNANSWERING = ROOT / "tests" / "leaky_servers" / "unanswering.py"
ENDLESS = ("--tool", "add_note", "--calls", "1000000", "--timeout", "0.5")
"""A million calls of half a second each: before, a server that never answered held bench
for days; now it stops after a few."""
HANDSHAKE = ("--era", "2025")
"""The raw servers answer ``initialize``, not 2026-07-28's ``server/discover``."""


def _unanswering(mode: str) -> str:
    return shlex.join([sys.executable, str(UNANSWERING), mode])


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("unlisted", "the server did not answer tools/list within 0.5 s"),
        ("deaf", f"the server answered no call for {SILENCE_TIMEOUTS * 0.5:g} s"),
        ("garbage", f"the server answered no call for {SILENCE_TIMEOUTS * 0.5:g} s"),
        ("closes", "session 0's connection closed under call 0"),
    ],
)
def test_bench_against_a_server_that_stops_answering_fails_naming_it(mode: str, why: str) -> None:
    """tools/list never answered, calls never answered (or answered with what is not JSON),
    or a server that exits at its first call: exit 1 with what happened, after a few calls."""
    done = _bench("--command", _unanswering(mode), *HANDSHAKE, *ENDLESS)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"error: {why}" in done.stderr, done.stderr
    assert "answers MCP on its transport" in done.stderr  # what to check
    assert "Traceback" not in done.stderr
    started = re.search(r"(\d+) calls? started in the phase", done.stderr)
    if started is not None:  # every caller (one) waited out a few timeouts, no more
        assert int(started.group(1)) <= SILENCE_TIMEOUTS + 1, done.stderr
    if mode == "garbage":
        assert "not JSON-RPC, the first: 'this is not JSON-RPC'" in done.stderr, done.stderr


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("era", "opening"), [("2026", "server/discover"), ("2025", "initialize")])
def test_bench_against_a_server_that_never_answers_its_opening_fails_naming_it(
    era: str, opening: str
) -> None:
    done = _bench("--command", _unanswering("mute"), "--era", era, "--open-timeout", "1", *ENDLESS)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"did not open an MCP session (NoAnswer: no answer to {opening} within 1 s" in (
        done.stderr
    )


@pytest.mark.usefixtures("no_process_left")
async def test_a_load_run_whose_server_stops_answering_raises_no_answer() -> None:
    """`run_load` itself: `NoAnswer`, a `TargetError`, naming the silence and its calls."""
    target = StdioTarget((sys.executable, str(UNANSWERING), "deaf"), era="2025")
    plan = LoadPlan(mix=_mix(MixCall("add_note")), calls=1_000_000, timeout=0.5)
    with pytest.raises(NoAnswer, match="answered no call for") as raised:
        await run_load(target, plan, describe="deaf")
    assert isinstance(raised.value, TargetError)
    assert "failed unanswered since its last answer (timeout x" in str(raised.value)
