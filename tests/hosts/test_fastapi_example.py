"""``examples/fastapi_service.py`` under a real ASGI server: uvicorn as a process, httpx2 as client.

The example runs the runtime in trio's guest mode on uvicorn's asyncio loop;
these tests drive it over a socket, as a deployment would, and read uvicorn's
log for what only the process shows (its lifespan's shutdown). One test runs
the app in process, to reach a state no request can: calls after its runtime
has stopped.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import httpx2
import pytest
import trio

from .._mcp_helpers import HttpServer, LogFile, texts

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
ALPHA_TOKEN = "alpha-token-0123456789"
GATEWAY_TOKEN = "gateway-token-0123456789"
UVICORN = (sys.executable, "-m", "uvicorn", "examples.fastapi_service:app", "--app-dir", str(ROOT))
SESSIONS = 100
STOP_TIMEOUT = 30.0
JSON = {"Content-Type": "application/json"}
_RUNNING = re.compile(r"Uvicorn running on (http://\S+)")


@attrs.frozen
class Service:
    """The example under uvicorn, the URL it listens on, and its log."""

    process: trio.Process
    log: LogFile
    url: str

    async def stop(self) -> int:
        """SIGTERM, as a process manager stops it; its exit status once it has shut down."""
        self.process.send_signal(signal.SIGTERM)
        with trio.fail_after(STOP_TIMEOUT):
            return await self.process.wait()


@asynccontextmanager
async def service(state: str = "memory", tokens: Path | None = None) -> AsyncIterator[Service]:
    """The example on an ephemeral 127.0.0.1 port; killed and reaped when the block ends."""
    env = {**os.environ, "MCP_ACTORS_STATE": state}
    if tokens is not None:
        env["MCP_ACTORS_TOKENS"] = str(tokens)
    # Port 0: the kernel picks a free port, and uvicorn's "running on" line names it.
    command = [*UVICORN, "--host", "127.0.0.1", "--port", "0"]
    # One file for both: uvicorn writes its server log to stderr, its access log to stdout.
    with tempfile.TemporaryFile() as file:
        process = await trio.lowlevel.open_process(
            command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=file, stderr=file
        )
        try:
            log = LogFile(file)
            match = await log.wait_for(_RUNNING, process)
            yield Service(process, log, match.group(1))
        finally:
            with trio.CancelScope(shield=True):  # reaped even when the test is cancelled
                if process.returncode is None:
                    process.kill()
                await process.wait()


def goals_path(session: str) -> str:
    return f"/sessions/{session}/goals"


async def concurrently(
    http: httpx2.AsyncClient, method: str, bodies: Mapping[str, Mapping[str, str] | None]
) -> dict[str, httpx2.Response]:
    """One request per session, all at once; each session's response, and the rate printed."""
    responses: dict[str, httpx2.Response] = {}

    async def send(session: str, body: Mapping[str, str] | None) -> None:
        responses[session] = await http.request(method, goals_path(session), json=body)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for session, body in bodies.items():
            nursery.start_soon(send, session, body)
    elapsed = trio.current_time() - start
    # Reported, never asserted: the machine is shared.
    print(f"{method} x{len(bodies)} concurrent: {len(bodies) / elapsed:.0f} requests/s")
    return responses


async def refusals(http: httpx2.AsyncClient) -> dict[str, httpx2.Response]:
    """What a hostile or careless client sends, each aimed at a session of the run."""
    post = goals_path("s0")
    return {
        "blank goal": await http.post(post, json={"goal": "   "}),
        "goal not a string": await http.post(post, json={"goal": 5}),
        "no goal": await http.post(post, json={}),
        "goal too long": await http.post(post, json={"goal": "x" * 1001}),
        "not JSON": await http.post(post, content=b"{goal", headers=JSON),
        "session in the body": await http.post(post, json={"goal": "x", "__sessionId": "s1"}),
        "control character": await http.get(goals_path("s%00")),
        "session id too long": await http.get(goals_path("s" * 257)),
    }


async def test_a_hundred_concurrent_sessions_each_see_only_their_own_goal() -> None:
    """100 sessions at once: each lists exactly its goal; bad input is a 422 that changes
    nothing; SIGTERM runs the lifespan's shutdown, which stops the runtime."""
    sessions = [f"s{n}" for n in range(SESSIONS)]
    async with service() as server:
        async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
            goals = {s: {"goal": f"goal of {s}"} for s in sessions}
            created = await concurrently(http, "POST", goals)
            refused = await refusals(http)
            # A context field in the query string is not the example's to read: ignored.
            smuggled = await http.get(goals_path("s2"), params={"__sessionId": "s3"})
            listed = await concurrently(http, "GET", dict.fromkeys(sessions))
        code = await server.stop()
        log = server.log.text()

    for session in sessions:
        assert created[session].json() == {
            "text": f"Created goal g1: goal of {session}",
            "data": None,
        }
        assert listed[session].json()["text"] == f"Goals (1):\n- g1: goal of {session}"
    assert smuggled.json()["text"] == "Goals (1):\n- g1: goal of s2"

    assert {why: r.status_code for why, r in refused.items()} == dict.fromkeys(refused, 422)
    detail = {why: r.json()["detail"] for why, r in refused.items()}
    assert detail["blank goal"] == "Error: goal must not be empty"  # the tool's own refusal
    assert detail["session in the body"][0]["loc"] == ["body", "__sessionId"]
    assert detail["control character"] == (
        "context field '_meta.sessionId' contains the control character '\\x00' at index 1"
    )
    assert detail["session id too long"] == (
        "context field '_meta.sessionId' is 257 characters long; the limit is 256"
    )

    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again with its
    # default action restored, so that the parent sees how the process ended.
    assert code == -signal.SIGTERM, log
    # 200 calls of the run, the blank goal (the tool refused it) and the query-string
    # one; the other refusals never reached the runtime.
    assert "runtime stopped: 202 calls, 0 live actors" in log
    assert log.index("runtime stopped") < log.index("Application shutdown complete.")
    assert "Traceback" not in log
    assert '" 500 ' not in log


async def test_goals_in_a_sqlite_store_survive_a_restart(tmp_path: Path) -> None:
    """MCP_ACTORS_STATE names the store: a goal created before a restart is listed after it."""
    state = f"sqlite:///{tmp_path}/s.db"
    async with service(state) as first:
        async with httpx2.AsyncClient(base_url=first.url) as http:
            created = await http.post(goals_path("s"), json={"goal": "Persist"})
        await first.stop()
    async with service(state) as second:
        async with httpx2.AsyncClient(base_url=second.url) as http:
            listed = await http.get(goals_path("s"))
            other = await http.get(goals_path("t"))
        await second.stop()
    assert created.status_code == 200
    assert listed.json()["text"] == "Goals (1):\n- g1: Persist"
    assert other.json()["text"] == "No goals yet."


def test_a_request_after_the_runtime_stopped_is_a_503_saying_why() -> None:
    """The runtime's own errors map to 503 with their message, not a 500 with a traceback."""
    from examples.fastapi_service import app

    async def scenario() -> httpx2.Response:
        async with app.router.lifespan_context(app):
            pass
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.get(goals_path("s"))

    response = asyncio.run(scenario())
    assert response.status_code == 503
    assert response.json() == {
        "detail": "the runtime is closed: its open_asyncio_runtime block has ended"
    }


async def test_the_mounted_mcp_endpoint_shares_the_state_under_servers_rules(
    tmp_path: Path,
) -> None:
    """MCP clients at /mcp reach the REST endpoints' state, with tokens and tenants enforced."""
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{ALPHA_TOKEN}=alpha\n{GATEWAY_TOKEN}\n", encoding="utf-8")
    async with service(tokens=tokens) as running:
        mcp = HttpServer(running.process, running.log, running.url + "/mcp")
        async with mcp.session(ALPHA_TOKEN) as alpha:
            created = await alpha.call_tool(
                "planning__create_goal", {"goal": "over MCP"}, meta={"sessionId": "alpha"}
            )
            outside = await alpha.call_tool("planning__list_goals", {}, meta={"sessionId": "beta"})
        async with mcp.session(GATEWAY_TOKEN) as gateway:
            await gateway.call_tool(
                "planning__create_goal", {"goal": "beta's"}, meta={"sessionId": "beta"}
            )
        async with httpx2.AsyncClient(base_url=running.url) as http:
            over_rest = await http.get(goals_path("alpha"))
            anonymous = await http.post("/mcp", json={}, headers=JSON)
            foreign = await http.post(
                "/mcp",
                json={},
                headers={**JSON, "Authorization": f"Bearer {ALPHA_TOKEN}", "Origin": "http://evil"},
            )
        status = await running.stop()
        log = running.log.text()
    assert not created.is_error
    assert outside.is_error
    assert texts(outside).startswith("session 'beta' is outside tenant 'alpha'")
    assert "beta's" not in texts(outside)
    assert "over MCP" in over_rest.json()["text"]
    assert anonymous.status_code == 401
    assert foreign.status_code == 403
    assert status == -signal.SIGTERM
    assert "runtime stopped" in log
    assert "Traceback" not in log


def test_the_run_line_serves_it_on_its_own_port_not_mkdocs_serves() -> None:
    """The docstring's uvicorn line and the MCP endpoint name one port, and it is not 8000,
    which uvicorn takes by default and so does ``mkdocs serve``: both can run at once."""
    import examples.fastapi_service as example

    (line,) = re.findall(r"``(uvicorn examples\.fastapi_service:app [^`]*)``", example.__doc__)
    argv = shlex.split(line)
    port = int(argv[argv.index("--port") + 1])
    assert port == example.PORT
    assert port != 8000


def test_the_benchmark_server_keeps_an_idle_connection_longer_than_its_clients_do() -> None:
    """A connection idle for as long as the benchmark's clients reuse one is still served.

    The embedding scenario once crashed with a ReadError: uvicorn closed a
    connection idle for its keep-alive (5 s) while the client, whose own 5 s
    countdown starts later, wrote its next request on it. The server must
    outlast the client: here nothing but the server closing the connection
    ends the wait early, and it may not come before the client's expiry and a
    second more (load only delays a server's close, never hastens it).
    """
    from benchmarks import _embedding as embedding

    request = b"GET /sessions/s/goals HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with embedding._serve_example() as server:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=STOP_TIMEOUT) as sock:
            sock.sendall(request)
            assert _response(sock).startswith(b"HTTP/1.1 200 ")
            closed, _, _ = select.select([sock], [], [], embedding.CLIENT_KEEP_ALIVE + 1)
            assert not closed, "the server closed an idle connection its client would reuse"
            sock.sendall(request)
            assert _response(sock).startswith(b"HTTP/1.1 200 ")


def _response(sock: socket.socket) -> bytes:
    """One whole HTTP/1.1 response with a Content-Length, read from `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += _received(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += _received(sock)
    return head + b"\r\n\r\n" + body


def _received(sock: socket.socket) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        msg = "the server closed the connection"
        raise ConnectionError(msg)
    return chunk
