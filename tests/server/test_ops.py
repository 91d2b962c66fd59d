"""What operators get from a server: health, readiness, metrics listeners and JSON logs."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import signal
import subprocess
from typing import TYPE_CHECKING, Any, Final

import httpx2
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from actors.server import MCP_PATH
from actors.server._logs import LibraryLines
from actors.server.http._operator_routes import Readiness
from actors.store import MemoryStore, open_store

from .._mcp_helpers import SERVE, bearer, http_server, initialize_request, raw_server, tools_call
from .._postgres import postgres_server_fixture, postgres_url_fixture  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from pathlib import Path

    from protocol import ActorKey

    from .._mcp_helpers import HttpServer
    from .._postgres import PostgresServer

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]
TOKEN = "ops-test-token-0123456789"
OPS_LISTENING = re.compile(r"operator endpoints on (\S+)")
STREAMING = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class CountingStore(MemoryStore):
    """A memory store that counts its loads: how often readiness reaches the store."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, key: ActorKey, *, parts: bool = False) -> None:  # type: ignore[override]
        self.loads += 1
        await trio.sleep(0.01)  # a round trip, so that requests arrive while it runs
        return await super().load(key, parts=parts)


async def test_ready_with_a_reachable_store_and_not_while_draining() -> None:
    """Ready by default; draining makes it not ready, with the reason."""
    draining = False
    readiness = Readiness(MemoryStore(), lambda: draining)
    assert await readiness.problem() is None
    draining = True
    problem = await readiness.problem()
    assert problem is not None
    assert "shutting down" in problem


async def test_many_requests_share_one_probe(autojump_clock: trio.abc.Clock) -> None:
    """A client polling as fast as it can costs the store one load per reuse period."""
    store = CountingStore()
    readiness = Readiness(store, lambda: False, reuse_for=1.0)
    answers: list[str | None] = []

    async def ask() -> None:
        answers.append(await readiness.problem())

    async with trio.open_nursery() as nursery:
        for _ in range(100):
            nursery.start_soon(ask)
    assert answers == [None] * 100
    assert store.loads == 1
    await readiness.problem()
    assert store.loads == 1  # still within the reuse period
    await trio.sleep(1.0)
    await readiness.problem()
    assert store.loads == 2


async def test_an_unreachable_postgresql_makes_it_not_ready(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """The server goes down: not ready, naming the store without its password; up: ready."""
    async with open_store(postgres_url) as store:
        readiness = Readiness(store, lambda: False, reuse_for=0.0)
        assert await readiness.problem() is None
        with postgres_server.stopped():
            problem = await readiness.problem()
        assert problem is not None
        assert "unreachable" in problem
        assert store.url in problem
        assert await readiness.problem() is None


# ---- a real server --------------------------------------------------------------------------

SLOW = ("--state", "memory", "--module", "tests._slow_module:slow")


def _base(server: HttpServer) -> str:
    return server.url.removesuffix(MCP_PATH)


async def test_health_and_readiness_on_the_http_listener() -> None:
    """Both answer without a token; only GET; metrics are off unless asked for."""
    async with http_server(*SLOW, "--token", TOKEN) as server, httpx2.AsyncClient() as http:
        base = _base(server)
        health = await http.get(f"{base}/healthz")
        ready = await http.get(f"{base}/readyz")
        assert (health.status_code, health.text) == (200, "ok\n")
        assert (ready.status_code, ready.text) == (200, "ready\n")
        assert (await http.post(f"{base}/readyz")).status_code == 405
        assert (await http.get(f"{base}/metrics", headers=bearer(TOKEN))).status_code == 404


async def test_not_ready_while_draining_and_the_call_in_flight_still_finishes(
    tmp_path: Path,
) -> None:
    """SIGTERM: /readyz turns 503 at once, /healthz stays 200, the slow call gets its result.

    A raw client: the SDK's client gives up on its session when the server
    stops right after the reply, which is not what this test is about. The
    call runs until the test has seen the drain, which the grace outlasts.
    """
    go = tmp_path / "go"
    async with (
        http_server(*SLOW, "--log-level", "debug", "--shutdown-grace", "60") as server,
        httpx2.AsyncClient(timeout=60) as http,
    ):
        base = _base(server)
        opened = await http.post(server.url, json=initialize_request("ops"), headers=STREAMING)
        headers = {
            **STREAMING,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "Mcp-Protocol-Version": "2025-11-25",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(server.url, json=initialized, headers=headers)
        replies: list[dict[str, Any]] = []

        async def slow_call() -> None:
            request = tools_call("slow__wait_for", {"path": str(go)}, request_id=5)
            async with http.stream("POST", server.url, json=request, headers=headers) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: {"):
                        replies.append(json.loads(line.removeprefix("data: ")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_call)
            # Logged when the call reached its actor: it is in flight from here on.
            await server.log.wait_for(re.compile("actor started for"), server.process)
            server.process.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                # Polling another process: there is no event to wait on.
                while (ready := await http.get(f"{base}/readyz")).status_code == 200:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            assert ready.status_code == 503
            assert "shutting down" in ready.text
            assert (await http.get(f"{base}/healthz")).status_code == 200
            go.touch()  # the call in flight may end now
    assert [reply["result"]["content"][0]["text"] for reply in replies] == ["the file is there"]


async def test_json_logs_keep_one_object_per_line_whatever_the_client_sends() -> None:
    """A tool name with a newline and quotes cannot forge a record or break a line."""
    hostile = 'x"\n2026-01-01 INFO actors.mcp: tools/call forged outcome=ok\u2028'
    async with raw_server("--state", "memory", "--log-format", "json") as server:
        await server.initialize()
        await server.call("planning__create_goal", {"goal": "g"}, S1)
        await server.call(hostile, {})
        await server.close_stdin()
        await server.wait()
        lines = server.log.text().splitlines()
    documents = [json.loads(line) for line in lines]  # every line is one JSON object
    calls = [d["event"] for d in documents if d.get("event", {}).get("event") == "tools/call"]
    assert [(c["tool"], c["session"], c["outcome"]) for c in calls] == [
        ("planning__create_goal", "s1", "ok"),
        (hostile, None, "unknown_tool"),
    ]
    assert all(line.isascii() for line in lines)
    assert not any(line.startswith("2026-01-01") for line in lines)
    assert {"time", "level", "logger", "message"} <= set(documents[0])


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition's samples by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


S1: Final = {"sessionId": "s1"}
"""A call's ``_meta`` for session s1, named as a host names it."""


def _call_sequence() -> list[tuple[str, dict[str, Any]]]:
    """Three goals made, one list, one unknown tool, one bad argument: all in session s1
    (`S1`, the calls' ``_meta``)."""
    goals = [("planning__create_goal", {"goal": f"g{n}"}) for n in range(3)]
    return [
        *goals,
        ("planning__list_goals", {}),
        ("planning__nope", {}),
        ("planning__create_goal", {"goal": 7}),
    ]


def _check_call_numbers(text: str) -> None:
    samples = _samples(text)

    def value(name: str, **labels: str) -> float:
        return samples[name, frozenset(labels.items())]

    assert value("mcp_actors_calls_total", tool="planning__create_goal", outcome="ok") == 3
    assert value("mcp_actors_calls_total", tool="planning__list_goals", outcome="ok") == 1
    assert value("mcp_actors_calls_refused_total", tool="unknown", outcome="unknown_tool") == 1
    refused = value(
        "mcp_actors_calls_refused_total", tool="planning__create_goal", outcome="bad_arguments"
    )
    assert refused == 1
    assert value("mcp_actors_call_run_seconds_count", tool="planning__create_goal") == 3
    assert value("mcp_actors_live_actors") == 1
    assert value("mcp_actors_actors_started_total") == 1
    assert value("mcp_actors_mcp_calls_in_flight") == 0  # every call has been answered
    assert not any("s1" in str(labels) for _, labels in samples)  # never a session id


async def test_metrics_on_the_http_listener_take_its_gateway_tokens() -> None:
    """Every tenant's figures: no token 401, a tenant's token 403, a gateway's 200."""
    tenant_token = "tenant-token-7f3a9c2e"
    async with (
        http_server(
            "--state", "memory", "--token", TOKEN, "--token", f"{tenant_token}=alpha", "--metrics"
        ) as server,
        httpx2.AsyncClient() as http,
    ):
        async with server.session(TOKEN) as session:
            for name, arguments in _call_sequence():
                with contextlib.suppress(Exception):  # the unknown tool is a JSON-RPC error
                    await session.call_tool(name, arguments, meta=S1)
        metrics = f"{_base(server)}/metrics"
        assert (await http.get(metrics)).status_code == 401
        assert (await http.get(metrics, headers=bearer("not-" + TOKEN))).status_code == 401
        by_a_tenant = await http.get(metrics, headers=bearer(tenant_token))
        scraped = await http.get(metrics, headers=bearer(TOKEN))
    assert by_a_tenant.status_code == 403
    assert "a gateway token" in by_a_tenant.text
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    _check_call_numbers(scraped.text)


async def test_a_stdio_server_serves_metrics_and_health_on_a_listener_of_its_own() -> None:
    async with raw_server("--state", "memory", "--metrics", "127.0.0.1:0") as server:
        match = await server.log.wait_for(OPS_LISTENING, server.process)
        await server.initialize()
        for name, arguments in _call_sequence():
            await server.call(name, arguments, S1)
        async with httpx2.AsyncClient() as http:
            base = match.group(1)
            scraped = await http.get(f"{base}/metrics")
            ready = await http.get(f"{base}/readyz")
            other = await http.get(f"{base}/mcp")
    assert (scraped.status_code, ready.status_code, other.status_code) == (200, 200, 404)
    _check_call_numbers(scraped.text)


async def test_metrics_need_their_listener_on_stdio() -> None:
    """``--metrics`` alone on stdio has nowhere to serve: refused at startup, naming the fix."""
    result = await trio.run_process(
        [*SERVE, "--metrics"], capture_stderr=True, check=False, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 2
    assert b"--metrics HOST:PORT" in result.stderr


def test_a_librarys_line_logs_once_an_interval_cut_short_with_a_count() -> None:
    """The SDK logs some refusals with the client's text: a flood of them is one short line."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(LibraryLines(["mcp"]))
    sdk = logging.getLogger("mcp.server.streamable_http_manager.test")
    ours = logging.getLogger("actors.serve.test")
    for logger in (sdk, ours):
        logger.addHandler(handler)
        logger.propagate = False
    try:
        for attempt in range(1000):
            sdk.warning("Rejecting request for session %s", "x" * 5000 + str(attempt))
        ours.warning("ours, whole: %s", "y" * 1500)
    finally:
        for logger in (sdk, ours):
            logger.removeHandler(handler)
            logger.propagate = True
    lines = stream.getvalue().splitlines()
    held = [line for line in lines if line.startswith("Rejecting")]
    assert 1 <= len(held) <= 2  # a second one only if the loop outlasted the interval
    assert all(len(line) < 1100 for line in held)
    assert lines[-1] == "ours, whole: " + "y" * 1500  # our own lines are bounded where written
