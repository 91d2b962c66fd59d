"""Invariants 2 (no leakage) and 3 (order) through the MCP front end of a real cluster.

`IsolationMachine` (``tests/isolation/test_isolation_stateful.py``) runs here against
``python -m actors cluster``: the MCP Streamable HTTP front end routing each
call to the shard that owns its session, two shards in two Ray actor
processes on a local Ray, the state in PostgreSQL. The machine's concurrent
batches travel through the SDK client and the front end and are spread over
both shards, and every call still sees exactly its own key's state, in
order: nothing in the HTTP transport, the routing or the Ray hop mixes up
contexts or reorders one key's calls.

One cluster serves the whole module (it takes seconds to start); each
Hypothesis example opens its own MCP client session and gives the pool's
sessions (``s1``..``s3``) a prefix of its own (``ex7-s1``), so that every
example starts from empty state although the cluster keeps everything.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import signal
import subprocess
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import attrs
import pytest
from hypothesis.stateful import run_state_machine_as_test
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from protocol import CallResult, TextContent, service_info_of, shard_for

from .._mcp_helpers import CLUSTER, CLUSTER_STARTUP_TIMEOUT, LISTENING, open_session
from .._postgres import postgres_server_fixture  # noqa: F401  (a fixture)
from .._processes import Process, descendants, left_after, name_of
from .._stateful_harness import machine_settings
from ..isolation.test_isolation_stateful import IsolationMachine, Log

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Mapping

    from mcp import types

    from actors import ToolModule

    from .._postgres import PostgresServer

pytest.importorskip("ray")  # the cluster command's shards run on Ray

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

ROOT: Final = Path(__file__).resolve().parents[2]
SHARDS: Final = ("shard-0", "shard-1")  # the names the cluster command gives its two shards
MODULE_SPECS: Final = tuple(
    f"tests.isolation.test_isolation_stateful:{name}"
    for name in ("THREAD_LOG", "ASSISTANT_LOG", "SESSION_LOG")
)
# Each example starts a new client session and checks its keys after every step over
# HTTP and Ray: few examples keep the module around a minute.
SETTINGS: Final = machine_settings(max_examples=10, stateful_step_count=6)
STOP_TIMEOUT: Final = 60.0  # SIGTERM stops the shards, then the local Ray: seconds
# Every spelling of the session id that protocol accepts, by where it travels.
SESSION_FIELDS: Final = {
    "arguments": ("__sessionId", "__session_id"),
    "_meta": ("sessionId", "session_id"),
}


# ---- the cluster: one server process for the module ----------------------------


@attrs.define
class ClusterServer:
    """The running ``actors cluster`` command: the URL it serves MCP at."""

    url: str
    examples: Iterator[int] = attrs.field(factory=itertools.count)
    """Numbers the examples, for the prefix that keeps each one's sessions fresh."""


def _read(log: IO[bytes]) -> str:
    return os.pread(log.fileno(), 1 << 24, 0).decode("utf-8", errors="replace")


def _wait_for_url(process: subprocess.Popen[bytes], log: IO[bytes]) -> str:
    """The URL the server prints once it serves; fails if it exits first."""
    deadline = time.monotonic() + CLUSTER_STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        match = LISTENING.search(_read(log))
        if match is not None:
            return match.group(1)
        if process.poll() is not None:
            pytest.fail(f"the cluster exited with {process.returncode}:\n{_read(log)}")
        time.sleep(0.05)
    pytest.fail(f"the cluster did not listen within {CLUSTER_STARTUP_TIMEOUT} s:\n{_read(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, so that the command stops its shards and its Ray; SIGKILL only if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


@pytest.fixture(scope="module", name="cluster_url")
def cluster_url_fixture(postgres_server: PostgresServer) -> Iterator[str]:
    """A database for the module's cluster, dropped after it."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.drop_database(name)


@pytest.fixture(scope="module", name="cluster")
def cluster_fixture(cluster_url: str) -> Iterator[ClusterServer]:
    """``actors cluster`` with two shards on a local Ray, for the module.

    Stopped with SIGTERM at the end; it must exit 0 and leave none of its
    processes (Ray's daemons, workers, shards) running.
    """
    modules = [arg for spec in MODULE_SPECS for arg in ("--module", spec)]
    command = [
        *CLUSTER,
        *("--shards", str(len(SHARDS)), "--num-cpus", "2"),
        *("--state", cluster_url, "--http", "127.0.0.1:0", *modules),
    ]
    with tempfile.TemporaryFile() as log:
        # From the project root: the command puts the cwd on the shards' path for --module.
        process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=log)
        below: set[Process] = set()
        try:
            yield ClusterServer(_wait_for_url(process, log))
            below = descendants(process.pid)  # all started by now
            # The check below watches the right processes: the local Ray's own daemons.
            assert {"raylet", "gcs_server"} <= {name_of(pid) for pid, _ in below}, below
        finally:
            _stop(process)
        # The command stopped its Ray before exiting; the daemons may take a moment to go.
        left = left_after(below, 60)
        text = _read(log)
        assert process.returncode == 0, f"exit code {process.returncode} on SIGTERM:\n{text}"
        assert "Traceback" not in text, text
        assert not left, f"processes of the stopped cluster still run: {left}"


# ---- the machine's target: one MCP client session per example ----------------------


def with_session_prefix(params: Mapping[str, Any], prefix: str) -> tuple[dict[str, Any], str]:
    """`params` with its session id prefixed by `prefix`, wherever it travels; that id.

    `call_params` (``tests/_stateful_harness.py``) puts the session in the
    arguments or in ``_meta``, always exactly once: anything else means the
    harness changed, and a session left unprefixed would share state with
    other examples, so it fails here.
    """
    rewritten = dict(params)
    found = []
    for field, names in SESSION_FIELDS.items():
        if field not in params:
            continue
        part = dict(params[field])
        for name in names:
            if name in part:
                part[name] = f"{prefix}{part[name]}"
                found.append(part[name])
        rewritten[field] = part
    assert len(found) == 1, f"not one session id in {params}: {found}"
    return rewritten, found[0]


def to_call_result(result: types.CallToolResult) -> CallResult:
    """The SDK's result as the machine reads it: text items (with provenance), data, error flag."""
    items = tuple(
        TextContent(item.text, service_info_of(item))
        for item in result.content
        if item.type == "text"
    )
    return CallResult(items, result.structured_content, result.is_error)


@attrs.define
class ClusterTarget:
    """One example's view of the cluster: an MCP client session, and its session prefix."""

    client: ClientSession
    prefix: str
    sessions: set[str]
    """Every (prefixed) session id sent so far, shared by all examples of a test."""

    async def call(self, params: Mapping[str, Any]) -> CallResult:
        rewritten, session = with_session_prefix(params, self.prefix)
        self.sessions.add(session)
        result = await self.client.call_tool(
            rewritten["name"], rewritten.get("arguments"), meta=rewritten.get("_meta")
        )
        return to_call_result(result)


@asynccontextmanager
async def open_cluster_target(
    cluster: ClusterServer, sessions: set[str], modules: list[ToolModule[Log]]
) -> AsyncIterator[ClusterTarget]:
    """A new MCP client session to `cluster`, on the example's own trio loop.

    The cluster imported `modules` by spec (`MODULE_SPECS`): check it serves
    their tools, so the machine's model describes what runs.
    """
    prefix = f"ex{next(cluster.examples)}-"
    async with (
        create_mcp_http_client() as http,
        streamable_http_client(cluster.url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await open_session(client, "legacy")
        listed = {tool.name for tool in (await client.list_tools()).tools}
        wanted = {f"{module.name}__{tool}" for module in modules for tool in ("append", "read")}
        assert wanted <= listed, f"the cluster serves {sorted(listed)}"
        yield ClusterTarget(client, prefix, sessions)


# ---- the test ----------------------------------------------------------------------


def test_no_leakage_and_order_through_the_front_end_and_ray_shards(
    cluster: ClusterServer,
) -> None:
    """The isolation machine's examples, each on fresh sessions of the one cluster."""
    sessions: set[str] = set()

    class ClusterIsolationMachine(IsolationMachine):
        open_target = staticmethod(functools.partial(open_cluster_target, cluster, sessions))

    run_state_machine_as_test(ClusterIsolationMachine, settings=SETTINGS)

    # Every call succeeded (the machine checks each result), and a shard runs a call
    # only for a session it owns (others it answers Moved), so the sessions' owners are
    # the shards that served them: both must have.
    assert sessions, "the machine made no call"
    assert all(re.fullmatch(r"ex\d+-s\d", session) for session in sessions), sessions
    served = {shard_for(session, SHARDS) for session in sessions}
    assert served == set(SHARDS), f"every session used lives on {served}: {sorted(sessions)}"
