"""Invariant 11: a call that names no session lands in its connection's own session.

Desktop hosts, IDEs and the Inspector name no session. Each starts a stdio
server of its own, and the default options put every server of a user on one
SQLite file: these tests run real servers, driven by the official SDK client
as the README shows, two at once on one state directory, as two hosts would.
A connection's own session ends with it, so a thousand short connections
leave nothing behind.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
import trio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from actors import open_runtime
from actors.modules import planning
from actors.server import ServeOptions, http_app
from actors.server.http._app import http_adapter
from actors.store import MemoryStore, open_store

from .._mcp_helpers import (
    InProcessHttp,
    asgi_lifespan,
    http_server,
    initialize_request,
    raw_server,
    stdio_session,
    texts,
    tools_call,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

PLAN = "private plan of conversation A"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def state_file() -> Path:
    """The default store every server of this test's user opens (conftest sets XDG_STATE_HOME)."""
    return Path(os.environ["XDG_STATE_HOME"], "mcp-actors", "state.db")


def stored_sessions(path: Path) -> list[str]:
    """The sessions that have state in the SQLite file at `path`."""
    if not path.exists():
        return []
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT session FROM actor_state ORDER BY session")
        return [session for (session,) in rows]
    finally:
        connection.close()


class TestStdio:
    async def test_two_hosts_with_default_options_never_share_state(self) -> None:
        """Two servers at once on one state directory, as two apps would start them."""
        async with stdio_session() as first:
            created = await first.call_tool("planning__create_goal", {"goal": PLAN})
            async with stdio_session() as second:
                seen = texts(await second.call_tool("planning__list_goals", {}))
            again = texts(await first.call_tool("planning__list_goals", {}))
        async with stdio_session() as later:
            later_seen = texts(await later.call_tool("planning__list_goals", {}))
        assert not created.is_error, texts(created)
        assert seen == "No goals yet."
        assert later_seen == "No goals yet."
        assert PLAN in again
        assert stored_sessions(state_file()) == []  # each connection's own session ended

    async def test_a_named_session_is_shared_on_purpose_and_kept(self) -> None:
        """``--session work`` on both: the second server sees the first's goal, after restarts."""
        async with stdio_session("--session", "work") as first:
            await first.call_tool("planning__create_goal", {"goal": PLAN})
            async with stdio_session("--session", "work") as second:
                seen = texts(await second.call_tool("planning__list_goals", {}))
        async with stdio_session("--session", "work") as later:
            later_seen = texts(await later.call_tool("planning__list_goals", {}))
        assert PLAN in seen
        assert PLAN in later_seen
        assert stored_sessions(state_file()) == ["work"]

    async def test_the_session_can_come_from_the_environment(self) -> None:
        """$MCP_ACTORS_SESSION is --session for a host that can set variables but not options."""
        env = {**os.environ, "MCP_ACTORS_SESSION": "from-env"}
        async with raw_server(env=env) as server:
            await server.initialize()
            await server.call("planning__create_goal", {"goal": PLAN})
            await server.close_stdin()
            assert await server.wait() == 0
            log = server.log.text()
        assert "calls that name no session: session 'from-env' (--session)" in log
        assert stored_sessions(state_file()) == ["from-env"]

    @pytest.mark.parametrize("ending", ["eof", "sigterm"])
    async def test_the_connections_session_ends_however_the_server_stops(self, ending: str) -> None:
        """EOF or SIGTERM: the state goes with the connection; the log says which rule held."""
        async with raw_server() as server:
            await server.initialize()
            reply = await server.call("planning__create_goal", {"goal": PLAN})
            assert stored_sessions(state_file()) != []
            if ending == "eof":
                await server.close_stdin()
            else:
                server.process.send_signal(signal.SIGTERM)
            assert await server.wait() == 0
            log = server.log.text()
        assert "Created goal g1" in json.dumps(reply)
        assert (
            "calls that name no session: a session private to this connection, ended when it "
            "closes (--session NAME keeps one across restarts)"
        ) in log
        assert re.search(r"its session ended \(1 stored item\(s\) deleted\)", log), log
        assert stored_sessions(state_file()) == []

    async def test_a_server_killed_outright_leaves_its_session_to_the_retention(self) -> None:
        """kill -9 ends nothing: the session stays, unreachable, until the retention sweeps it."""
        async with raw_server() as server:
            await server.initialize()
            await server.call("planning__create_goal", {"goal": PLAN})
            server.process.kill()
            await server.wait()
        (left,) = stored_sessions(state_file())
        assert re.fullmatch(r"connection-[A-Za-z0-9_-]{24}", left), left

    @pytest.mark.parametrize(
        ("args", "problem"),
        [
            (("--session", ""), r"--session: must not be empty"),
            (("--session", "a\tb"), r"--session: contains the control character '\\t' at index 1"),
            (("--session", "x", "--require-session"), r"--session names where calls without"),
            (
                ("--session", "x", "--http", "127.0.0.1:0"),
                r"--session applies to stdio only: over HTTP each client's calls land in its "
                r"own Mcp-Session-Id",
            ),
        ],
    )
    async def test_a_bad_session_option_exits_2_naming_it(
        self, args: Sequence[str], problem: str
    ) -> None:
        done = await trio.run_process(
            [sys.executable, "-m", "actors", "serve", *args],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert done.returncode == 2
        assert re.search(problem, done.stderr.decode()), done.stderr.decode()


async def _short_connection(http: httpx2.AsyncClient, url: str, *, delete: bool) -> str:
    """Open an HTTP session, add a goal naming no session, maybe end it; its Mcp-Session-Id."""
    opened = await http.post(url, json=initialize_request("short"), headers=ACCEPT)
    session = opened.headers[MCP_SESSION_ID_HEADER]
    headers = {**ACCEPT, MCP_SESSION_ID_HEADER: session, "Mcp-Protocol-Version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
    call = tools_call("planning__create_goal", {"goal": PLAN}, request_id=2)
    answered = await http.post(url, json=call, headers=headers)
    assert f"Created goal g1: {PLAN}" in answered.text, answered.text
    if delete:
        assert (await http.delete(url, headers=headers)).status_code == 200
    return session


class TestHttp:
    async def test_a_thousand_short_connections_leave_no_state_behind(self, tmp_path: Path) -> None:
        """Each HTTP session's state ends with it: DELETE at once, an idle one once it expires."""
        path = tmp_path / "state.db"
        args = ("--state", f"sqlite:///{path}", "--session-idle-timeout", "2")
        async with http_server(*args, "--max-sessions-per-token", "2000") as server:
            opened: list[str] = []

            async def lane(count: int, *, delete: bool) -> None:
                async with httpx2.AsyncClient(timeout=60) as http:
                    for _ in range(count):
                        opened.append(await _short_connection(http, server.url, delete=delete))

            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(functools.partial(lane, 95, delete=True))
                nursery.start_soon(functools.partial(lane, 50, delete=False))
            assert len(set(opened)) == 1000
            ended = "closed: ended it (1 stored item(s) deleted)"

            def ending() -> bool:
                # Each end is logged just after its delete: a log read as soon as the
                # file holds no session may still lack the last ones.
                return bool(stored_sessions(path)) or server.log.text().count(ended) < 1000

            with trio.move_on_after(60):  # the idle ones end after 2 s without a request
                while ending():  # noqa: ASYNC110 -- the file and the log say nothing else
                    await trio.sleep(0.1)
            left = stored_sessions(path)
            log = server.log.text()
        warnings = [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line]
        assert not left, f"{len(left)} session(s) still stored, e.g. {left[:3]}; log: {warnings}"
        assert "calls that name no session: the client's own HTTP session" in log
        assert log.count(ended) == 1000

    async def test_a_connections_session_ends_with_it_in_process(self, tmp_path: Path) -> None:
        """The SDK client as the README shows it, in process: its state is gone once it leaves."""
        options = ServeOptions(http=("127.0.0.1", 0))
        async with (
            open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
            open_runtime([planning], store=store) as runtime,
        ):
            app = http_app(http_adapter(runtime, options), options)
            async with asgi_lifespan(app):
                sessions = [await _created_over(app) for _ in range(3)]
            entries = await store.entries()
        assert len(set(sessions)) == 3
        assert entries == []

    async def test_an_end_that_waits_long_for_its_turn_at_the_store_still_deletes_the_state(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """The SDK gives a closed connection's cleanup 5 s; ending its session may take longer.

        When many sessions end at once on a slow disk, each delete waits behind the
        others': an end cut short there left the state stored, out of every client's
        reach, until the retention. Here each delete waits a minute (virtual time).
        """
        store = _DeletesQueued(wait=60)
        options = ServeOptions(http=("127.0.0.1", 0))
        async with open_runtime([planning], store=store) as runtime:
            app = http_app(http_adapter(runtime, options), options)
            transport = httpx2.ASGITransport(app=app)
            async with (
                asgi_lifespan(app),
                httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
            ):
                session = await _short_connection(http, "http://127.0.0.1/mcp", delete=True)
                with trio.move_on_after(120):  # the server still serves: no end is hurried
                    while await store.entries(session=session):  # noqa: ASYNC110 -- no event
                        await trio.sleep(1)
                left = await store.entries(session=session)
                assert runtime.statistics().live_actors == 0
        assert left == []

    @pytest.mark.parametrize(("wait", "kept"), [(15, 0), (3600, 1)])
    async def test_a_server_that_stops_waits_for_the_ends_under_way_but_not_forever(
        self,
        autojump_clock: trio.testing.MockClock,
        caplog: pytest.LogCaptureFixture,
        wait: float,
        kept: int,
    ) -> None:
        """A DELETE just before the server stops: its end is waited for, up to
        ``shutdown_grace + stop_timeout`` (20 s), then its state is left to the retention."""
        store = _DeletesQueued(wait=wait)
        options = ServeOptions(http=("127.0.0.1", 0))
        async with open_runtime([planning], store=store) as runtime:
            app = http_app(http_adapter(runtime, options), options)
            async with asgi_lifespan(app):
                session = await _created_over(app)
                stopping = trio.current_time()
            stopped = trio.current_time() - stopping
            left = await store.entries(session=session)
        assert len(left) == kept
        assert stopped == pytest.approx(min(wait, 20), abs=0.5)
        left_behind = "stopping with the sessions of 1 closed connection(s) still being ended"
        assert (left_behind in caplog.text) == bool(kept)

    async def test_a_2026_era_request_cannot_borrow_or_end_another_clients_session(
        self, tmp_path: Path
    ) -> None:
        """Its Mcp-Session-Id header is not a session: refused, and the owner's state stays."""
        options = ServeOptions(http=("127.0.0.1", 0))
        async with (
            open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
            open_runtime([planning], store=store) as runtime,
        ):
            app = http_app(http_adapter(runtime, options), options)
            transport = httpx2.ASGITransport(app=app)
            async with (
                asgi_lifespan(app),
                httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
            ):
                victim = await _short_connection(http, "http://127.0.0.1/mcp", delete=False)
                borrowed = InProcessHttp(app, runtime)
                async with borrowed.session(
                    era="modern", headers={MCP_SESSION_ID_HEADER: victim}
                ) as intruder:
                    seen = await intruder.call_tool("planning__list_goals", {})
                kept = await store.entries(session=victim)
        assert seen.is_error
        assert texts(seen).startswith("this call names no session")
        assert [entry.key.module for entry in kept] == ["planning"]


class _DeletesQueued:
    """A memory store whose deletes of a session each wait `wait` seconds for their turn first,
    as they do behind one another when many sessions end at once on a slow disk."""

    def __init__(self, wait: float) -> None:
        store = MemoryStore(trio.current_time)
        self._wait = wait
        self._delete_session = store.delete_session
        self.url = store.url
        self.load = store.load
        self.save = store.save
        self.touch = store.touch
        self.sweep = store.sweep
        self.entries = store.entries
        self.delete = store.delete

    async def delete_session(self, session_id: str) -> int:
        await trio.sleep(self._wait)
        return await self._delete_session(session_id)


async def _created_over(app: Any) -> str:
    """Open an SDK session over `app`, add a goal naming no session, close; its session id."""
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        opened = await _short_connection(http, "http://127.0.0.1/mcp", delete=True)
    return opened
