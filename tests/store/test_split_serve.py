"""``serve`` and ``state`` over a store split by session: ``--state`` given once per partition.

The server runs as a subprocess driven by the official MCP SDK's client over
stdio; the partitions are fresh databases on the test session's PostgreSQL
server (``tests/_postgres.py``), read directly with psycopg to see where each
session's keys are.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING

import psycopg
import trio

from actors.store import open_store
from protocol import ActorKey, ToolContext, shard_for

from .._calls import listed_goals
from .._mcp_helpers import SERVE, stdio_session, texts
from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_urls_fixture,
    postgres_server_fixture,
)
from ..project.test_docs_examples import shell_lines
from .test_split_store import spread_sessions

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

STATE = (sys.executable, "-m", "actors", "state")
SESSIONS = [f"desk-{index}" for index in range(6)]
_GUARD = 120.0  # seconds: a hung subprocess fails the test instead of hanging CI


def sessions_held(url: str) -> set[str]:
    """The sessions a partition holds keys of, read by psycopg alone."""
    with psycopg.connect(url) as connection:
        return {row[0] for row in connection.execute("SELECT DISTINCT session FROM actor_state")}


def partition_id(url: str) -> str:
    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT id FROM actor_partition").fetchone()
    assert row is not None
    return str(row[0])


async def run(
    command: tuple[str, ...], *args: str, env: Mapping[str, str] | None = None
) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of ``command ARGS`` with nothing on stdin."""
    with trio.fail_after(_GUARD):
        done = await trio.run_process(
            [*command, *args],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**os.environ, **(env or {})},
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def page_serve_arguments(urls: list[str]) -> list[str]:
    """The arguments of the durable-state guide's ``mcp-actors serve`` line, its URLs
    replaced by `urls`, in order."""
    (line,) = shell_lines("guides/durable-state.md", "mcp-actors serve")
    argv = shlex.split(line)[2:]
    assert argv[::2] == ["--state"] * len(urls), line
    return [arg for url in urls for arg in ("--state", url)]


async def test_each_sessions_state_survives_a_restart_in_its_own_partition(
    fresh_postgres_urls: Callable[[int], list[str]],
) -> None:
    """Goals made through one server (the durable-state guide's command line) are listed by
    the next, each session's alone, and each session's keys sit in the one partition its
    hash picks."""
    urls = fresh_postgres_urls(2)
    state = page_serve_arguments(urls)
    with trio.fail_after(_GUARD):
        async with stdio_session(*state) as client:
            for session in SESSIONS:
                result = await client.call_tool(
                    "planning__create_goal",
                    {"goal": f"goal of {session}"},
                    meta={"sessionId": session},  # named by the host
                )
                assert not result.is_error, texts(result)
        async with stdio_session(*state) as client:
            for session in SESSIONS:
                result = await client.call_tool(
                    "planning__list_goals", {}, meta={"sessionId": session}
                )
                assert [goal for _, goal in listed_goals(texts(result))] == [f"goal of {session}"]
    ids = [partition_id(url) for url in urls]
    held = [sessions_held(url) for url in urls]
    assert held[0].isdisjoint(held[1])
    for session in SESSIONS:
        assert session in held[ids.index(shard_for(session, ids))]


async def test_serve_refuses_several_urls_that_are_not_all_postgresql(tmp_path: object) -> None:
    code, _, stderr = await run(
        SERVE, "--state", "postgresql://127.0.0.1:1/a", "--state", "sqlite:///state.db"
    )
    assert code == 2, stderr
    assert "--state: several URLs split the state by session over PostgreSQL databases, " in stderr
    assert "URL 2 is the SQLite store 'sqlite:///state.db'" in stderr


async def test_state_tooling_spans_the_partitions(
    fresh_postgres_urls: Callable[[int], list[str]],
) -> None:
    """list, show and delete reach every partition, with the URLs given as options or in
    MCP_ACTORS_STATE; one partition alone is refused."""
    urls = fresh_postgres_urls(2)
    async with open_store(urls) as store:
        sessions = spread_sessions(store, "desk-", 3)
        for session in sessions:
            await store.save(ActorKey("planning", ToolContext(session)), b'{"n":1}', None)
    state = ("--state", urls[0], "--state", urls[1])

    code, out, err = await run(STATE, "list", "--all", "--json", *state)
    assert code == 0, err
    assert [line["key"]["session"] for line in map(json.loads, out.splitlines())] == sessions
    assert all(sessions_held(url) for url in urls)

    code, out, err = await run(
        STATE, "show", "--session", sessions[3], "--module", "planning", *state
    )
    assert code == 0, err
    assert json.loads(out)["stored"] == {"n": 1}

    code, _, err = await run(STATE, "delete", "--session", sessions[3], *state)
    assert code == 0, err
    assert sessions[3] not in sessions_held(urls[0]) | sessions_held(urls[1])

    code, out, err = await run(
        STATE, "list", "--all", "--json", env={"MCP_ACTORS_STATE": f"{urls[0]} {urls[1]}"}
    )
    assert code == 0, err
    assert [line["key"]["session"] for line in map(json.loads, out.splitlines())] == [
        session for session in sessions if session != sessions[3]
    ]

    code, _, err = await run(STATE, "list", "--all", "--state", urls[1])
    assert code == 1
    assert f"{urls[1]} is one of the 2 partitions of a split store" in err

    # One --state before the command and one after it: both count.
    code, out, err = await run(
        STATE, "--state", urls[0], "list", "--all", "--json", "--state", urls[1]
    )
    assert code == 0, err
    assert len(out.splitlines()) == len(sessions) - 1
