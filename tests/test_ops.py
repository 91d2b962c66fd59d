"""Readiness (actors.server._ops): draining, an unreachable store, and a probe shared by many."""

from __future__ import annotations

import json
import re
import signal
from typing import TYPE_CHECKING

import httpx2
import trio

from actors.server import MCP_PATH
from actors.server._ops import Readiness
from actors.store import MemoryStore, open_store

from ._mcp_helpers import bearer, http_server, raw_server, texts
from ._postgres import postgres_server_fixture, postgres_url_fixture  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from protocol import ActorKey

    from ._mcp_helpers import HttpServer
    from ._postgres import PostgresServer

TOKEN = "ops-test-token-0123456789"


class CountingStore(MemoryStore):
    """A memory store that counts its loads: how often readiness reaches the store."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, key: ActorKey) -> None:  # type: ignore[override]
        self.loads += 1
        await trio.sleep(0.01)  # a round trip, so that requests arrive while it runs
        return await super().load(key)


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


async def test_not_ready_while_draining_and_the_call_in_flight_still_finishes() -> None:
    """SIGTERM: /readyz turns 503 at once, /healthz stays 200, the slow call gets its result."""
    async with (
        http_server(*SLOW, "--log-level", "debug") as server,
        httpx2.AsyncClient() as http,
    ):
        base = _base(server)
        results: list[str] = []

        async def slow_call() -> None:
            async with server.session() as session:
                result = await session.call_tool("slow__wait", {"seconds": 2})
                results.append(texts(result))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_call)
            # Logged when the call reached its actor: it is in flight from here on.
            await server.log.wait_for(re.compile("actor started for"), server.process)
            server.process.send_signal(signal.SIGTERM)
            with trio.fail_after(5):
                # Polling another process: there is no event to wait on.
                while (ready := await http.get(f"{base}/readyz")).status_code == 200:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            assert ready.status_code == 503
            assert "shutting down" in ready.text
            assert (await http.get(f"{base}/healthz")).status_code == 200
        assert results == ["waited 2 s"]


async def test_json_logs_keep_one_object_per_line_whatever_the_client_sends() -> None:
    """A tool name with a newline and quotes cannot forge a record or break a line."""
    hostile = 'x"\n2026-01-01 INFO actors.mcp: tools/call forged outcome=ok\u2028'
    async with raw_server("--state", "memory", "--log-format", "json") as server:
        await server.initialize()
        await server.call("planning__create_goal", {"goal": "g", "__sessionId": "s1"})
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
