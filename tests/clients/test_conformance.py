"""The official MCP conformance suite, every server scenario, against ``examples/conformance.py``.

``@modelcontextprotocol/conformance`` (pinned in ``tests/conformance/package-lock.json``,
with the Node.js 22 it needs: the ``node`` package) runs once per module, ``--suite all``,
against a real ``serve --http 127.0.0.1:0 --module examples.conformance:conformance --state
memory`` process. It writes one ``checks.json`` per scenario; each scenario is one test here,
so that a CI log names the scenario that broke and its failing checks.

A scenario passes when it ran, no check is a FAILURE, and its only WARNINGs are those in
`KNOWN_WARNINGS` — each of which must still occur, so that the list cannot go stale.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from .._mcp_helpers import LISTENING, SERVE, STARTUP_TIMEOUT
from .._npm import INSTALL_TIMEOUT, npm_installed, pinned_node, tail

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parents[1] / "conformance"
MODULE = "examples.conformance:conformance"
NEEDED_BY = "the conformance suite's tests"  # for the skip (CI: failure) messages
RUN_TIMEOUT = 300.0  # seconds for the whole suite: it takes ~5, a hung request 60 (the SDK)
STOP_GRACE = 10.0  # seconds for the server to stop on SIGTERM before it is killed

# Setting up the module's run (two npm commands, the server, the suite) happens in its
# first test, under that test's timeout: allow for every step's own limit.
pytestmark = pytest.mark.timeout(2 * INSTALL_TIMEOUT + STARTUP_TIMEOUT + RUN_TIMEOUT + 60)

# The 32 server scenarios of @modelcontextprotocol/conformance 0.1.16, in its order
# (`conformance list --server`); `test_the_pinned_scenarios_are_the_suites` keeps this list
# and the installed suite in step.
SCENARIOS = (
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
)

# KNOWN WARNINGS: the only WARNING checks tolerated, as (scenario, check id), e.g.
# ("server-sse-polling", "server-sse-priming-event"). Each listed one must still occur: when
# a fix makes it go away, its test fails until the entry is removed here, so the list cannot
# go stale. It is empty: the three warnings of server-sse-polling (priming event, retry
# field, disconnect-resume) went away with the SSE polling work (a session's requests served
# at its negotiated version whatever their header says; the test_reconnection fixture).
KNOWN_WARNINGS: frozenset[tuple[str, str]] = frozenset()

# A result folder: "server-" + the scenario + "-" + an ISO time with ':' and '.' as '-'.
RESULT_FOLDER = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z")

Check = dict[str, Any]
"""One check of a scenario: ``{id, name, description, status, errorMessage?, …}``."""


class Suite(NamedTuple):
    """The installed suite: its command line, and the PATH that puts its Node.js first."""

    command: tuple[str, ...]
    env: dict[str, str]


class Run(NamedTuple):
    """What the suite's one run gave: the checks of each scenario that wrote its results."""

    checks: dict[str, list[Check]]
    unknown_folders: list[str]
    returncode: int | None
    """None when the run was killed at `RUN_TIMEOUT`."""
    output: str
    server_log: str
    seconds: float

    def report(self) -> str:
        """The suite's summary (or the end of its output) and the end of the server's log,
        for a failure message."""
        ending = "killed at the timeout" if self.returncode is None else f"exit {self.returncode}"
        summary = self.output.rpartition("=== SUMMARY ===")[2] or self.output
        return (
            f"\n--- the suite's output ({ending}, {self.seconds:.0f} s):\n{tail(summary)}"
            f"\n--- the server's log:\n{tail(self.server_log, 2000)}"
        )

    def why_missing(self, scenario: str) -> str:
        """Why `scenario` has no results: what the suite printed when it threw, or how the
        run ended."""
        threw = re.search(
            rf"^Failed to run scenario {re.escape(scenario)}:.*(?:\n(?!\n|===).*){{0,20}}",
            self.output,
            re.MULTILINE,
        )
        if threw is not None:
            return threw.group(0)
        if self.returncode is None:
            return f"the suite was killed at the {RUN_TIMEOUT:.0f} s timeout before it finished it"
        return f"the suite never ran it (exit {self.returncode}){self.report()}"


def _kill_group(process: subprocess.Popen[Any]) -> None:
    """SIGKILL `process`'s process group (it was started in a session of its own)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


@contextmanager
def _own_group(process: subprocess.Popen[Any], grace: float = 0.0) -> Iterator[None]:
    """Whatever happens in the block, end `process` and what it started on the way out.

    SIGTERM first, when `grace` allows it time to stop cleanly; then SIGKILL to its group.
    """
    try:
        yield
    finally:
        if grace and process.poll() is None:
            process.terminate()
            with suppress(subprocess.TimeoutExpired):
                process.wait(grace)
        _kill_group(process)
        process.wait()


class _Log:
    """A pipe read to its end by a thread: nothing the process writes ever blocks it, and a
    line can be waited for without polling."""

    def __init__(self, pipe: Any) -> None:
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: Any) -> None:
        for line in pipe:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def text(self) -> str:
        """Everything read so far."""
        with self._changed:
            return "".join(self._lines)

    def wait_for(self, pattern: re.Pattern[str], seconds: float) -> re.Match[str] | None:
        """The first line matching `pattern`, once written; None if the pipe ends first, or
        after `seconds`."""
        deadline = time.monotonic() + seconds
        with self._changed:
            seen = 0
            while True:
                for line in self._lines[seen:]:
                    if match := pattern.search(line):
                        return match
                seen = len(self._lines)
                left = deadline - time.monotonic()
                if self._ended or left <= 0:
                    return None
                self._changed.wait(left)

    def close(self) -> None:
        """Wait for the end of the pipe (the process and its group are gone by then)."""
        self._thread.join(STOP_GRACE)


@contextmanager
def served(state: Path) -> Iterator[tuple[str, _Log]]:
    """``serve --http 127.0.0.1:0`` of the fixtures from the repository's root: its URL
    and log while the block runs; stopped (SIGTERM, then SIGKILL) whatever happens."""
    command = [*SERVE, "--http", "127.0.0.1:0", "--module", MODULE, "--state", "memory"]
    process = subprocess.Popen(
        command,
        cwd=ROOT,  # `examples` is importable from there
        env={**os.environ, "XDG_STATE_HOME": str(state)},  # nothing lands in the user's folder
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stderr is not None
    log = _Log(process.stderr)
    try:
        with _own_group(process, grace=STOP_GRACE):
            match = log.wait_for(LISTENING, STARTUP_TIMEOUT)
            if match is None:
                code = process.poll()
                state_of = "still starting" if code is None else f"exited with {code}"
                pytest.fail(
                    f"the server did not listen ({state_of}):\n{tail(log.text())}", pytrace=False
                )
            yield match.group(1), log
    finally:
        log.close()
        process.stderr.close()


def _run_suite(suite: Suite, arguments: Sequence[str], seconds: float) -> tuple[int | None, str]:
    """Run the suite with `arguments`: its exit code (None if killed after `seconds`) and its
    output, stdout and stderr interleaved."""
    process = subprocess.Popen(
        [*suite.command, *arguments],
        cwd=ROOT,
        env=suite.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    with _own_group(process):
        try:
            output, _ = process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            output, _ = process.communicate()
            return None, output
        return process.returncode, output


def _read_results(folder: Path) -> tuple[dict[str, list[Check]], list[str]]:
    """The checks of each scenario in the output folder, and the folders not understood."""
    checks: dict[str, list[Check]] = {}
    unknown = []
    for path in sorted(folder.iterdir()):
        match = RESULT_FOLDER.fullmatch(path.name)
        if match is None or not (path / "checks.json").is_file():
            unknown.append(path.name)
            continue
        scenario = match.group("scenario")
        if scenario in checks:  # one run writes one folder per scenario
            unknown.append(path.name)
            continue
        checks[scenario] = json.loads((path / "checks.json").read_text(encoding="utf-8"))
    return checks, unknown


@pytest.fixture(scope="module")
def suite() -> Suite:
    """The suite and its Node.js 22, installed (npm ci): a skip or failure at setup."""
    folder = npm_installed(SOURCE, "conformance", needed_by=NEEDED_BY, rebuild=["node"])
    modules = folder / "node_modules"
    node = pinned_node(modules, NEEDED_BY)  # the suite needs Node 22 (fs.globSync)
    cli = modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    # Node 22 first on PATH too, for anything the suite starts by the name `node`.
    env = {**os.environ, "PATH": f"{modules / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    return Suite((str(node), str(cli)), env)


@pytest.fixture(scope="module")
def run(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The suite's one run, ``--suite all``, against a fresh server (the suite's clients
    never end their sessions, so a server reused across runs would reach its session cap)."""
    output = tmp_path_factory.mktemp("conformance-results")
    with served(tmp_path_factory.mktemp("conformance-state")) as (url, log):
        started = time.monotonic()
        arguments = ["server", "--url", url, "--suite", "all", "-o", str(output)]
        returncode, printed = _run_suite(suite, arguments, RUN_TIMEOUT)
        seconds = time.monotonic() - started
    checks, unknown = _read_results(output)
    return Run(checks, unknown, returncode, printed, log.text(), seconds)


def _describe(scenario: str, checks: Sequence[Check]) -> str:
    """One line per check: scenario, check id, status, errorMessage (or description)."""
    return "\n".join(
        f"  {scenario} [{check.get('id')}] {check.get('status')}: "
        f"{check.get('errorMessage') or check.get('description')}"
        for check in checks
    )


def test_the_pinned_scenarios_are_the_suites(suite: Suite) -> None:
    """`SCENARIOS` is what the installed suite lists: a new lock with other scenarios fails
    here until the list (and `KNOWN_WARNINGS`) is brought in step."""
    code, output = _run_suite(suite, ["list", "--server"], 120.0)
    assert code == 0, output
    listed = tuple(re.findall(r"^  - (\S+)", output, re.MULTILINE))
    assert listed == SCENARIOS, output
    assert {scenario for scenario, _ in KNOWN_WARNINGS} <= set(SCENARIOS)


def test_the_run_completed_with_every_scenario(run: Run) -> None:
    """The suite exited 0 (no FAILURE anywhere) and wrote results for its scenarios only."""
    if run.returncode != 0:
        pytest.fail(f"the suite did not pass{run.report()}", pytrace=False)
    assert not run.unknown_folders, f"results not understood: {run.unknown_folders}"
    assert set(run.checks) <= set(SCENARIOS), (
        f"scenarios not pinned: {set(run.checks) - set(SCENARIOS)}"
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(run: Run, scenario: str) -> None:
    """The scenario ran; no check failed; its only warnings are its known ones, all of them."""
    checks = run.checks.get(scenario)
    if not checks:
        message = f"conformance scenario {scenario} wrote no checks: {run.why_missing(scenario)}"
        pytest.fail(message, pytrace=False)
    failures = [check for check in checks if check.get("status") == "FAILURE"]
    warnings = [check for check in checks if check.get("status") == "WARNING"]
    unexpected = [check for check in warnings if (scenario, check.get("id")) not in KNOWN_WARNINGS]
    known = {check_id for name, check_id in KNOWN_WARNINGS if name == scenario}
    gone = sorted(known - {check.get("id") for check in warnings})
    problems = []
    if failures:
        problems.append(f"failed checks:\n{_describe(scenario, failures)}")
    if unexpected:
        problems.append(f"warnings not in KNOWN_WARNINGS:\n{_describe(scenario, unexpected)}")
    if gone:
        listed = "\n".join(f"  {scenario} [{check_id}]" for check_id in gone)
        problems.append(
            f"known warnings no longer raised (remove them from KNOWN_WARNINGS):\n{listed}"
        )
    if problems:
        pytest.fail(f"conformance scenario {scenario}:\n" + "\n".join(problems), pytrace=False)
