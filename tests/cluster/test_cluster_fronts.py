"""Two fronts of one cluster behind a real nginx running examples/nginx-fronts.conf.

The cluster (a real local Ray, two shards, PostgreSQL) is served by its own
front, prefix ``a``, and by a ``--join`` front, prefix ``b``; nginx routes by
the prefix of ``Mcp-Session-Id`` and sends the rest round robin
(`tests._nginx`). Official SDK clients of the 2025 era each keep their session
on the front that opened it, through nginx: their calls, their GET streams,
a resumed stream and their DELETE reach that front only, and each sees its own
state. 2026-era requests, which carry no session, reach both fronts and see
one state. One test: it starts Ray, and that is slow.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import uuid
from collections import Counter
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final

import httpx2
import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import LAST_EVENT_ID_HEADER, MCP_SESSION_ID_HEADER
from mcp.shared._httpx_utils import create_mcp_http_client

from .._mcp_helpers import (
    CLUSTER,
    CLUSTER_STARTUP_TIMEOUT,
    Era,
    bearer,
    http_server,
    initialize_request,
    open_session,
    texts,
)
from .._nginx import PUBLIC_NAME, nginx_fixture  # noqa: F401  (a fixture)
from .._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401  (fixtures)

if importlib.util.find_spec("ray") is None:
    _REASON = "Ray is not installed: pip install -e '.[cluster]'"
    if os.environ.get("CI"):
        pytest.fail(f"{_REASON}; CI is set, so the cluster tests must run", pytrace=False)
    pytest.skip(_REASON, allow_module_level=True)

from .test_cluster_front import GATEWAY, ON_RAY  # needs Ray, checked above

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from .._nginx import Nginx, ReverseProxy

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

CLIENTS: Final = 4
"""2025-era clients at once: round robin gives each front two of them."""
BEHIND_NGINX: Final = ("--trusted-proxy", "127.0.0.1", "--allow-host", PUBLIC_NAME)
# One line of the access log of tests/_nginx.py.
ACCESS: Final = re.compile(
    r'"(?P<method>[A-Z]+) /mcp HTTP/1\.1" (?P<status>\d+) .*'
    r'session="(?P<session>[^"]*)" to=(?P<upstream>\S+)'
)
MODERN_CALL: Final = re.compile(r"tools/call planning__\w+ session='shared'")


@asynccontextmanager
async def through(
    proxy: ReverseProxy, era: Era, headers: Mapping[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """The official client, through nginx by the public name, with the gateway token."""
    sent = {**proxy.host_header, **bearer(GATEWAY), **(headers or {})}
    async with create_mcp_http_client(headers=sent) as http:
        async with streamable_http_client(proxy.url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                yield await open_session(session, era)


async def resume_once(proxy: ReverseProxy) -> tuple[str, str, str]:
    """By hand, through nginx: open a session, make a call on a stream, and resume that
    stream from its priming event; the session id, the call's and the replay's data."""
    sent = {
        **proxy.host_header,
        **bearer(GATEWAY),
        "Accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient(headers=sent, timeout=60) as http:
        opened = await http.post(proxy.url, json=initialize_request("resumer"))
        assert opened.status_code == 200, opened.text
        session = {MCP_SESSION_ID_HEADER: opened.headers[MCP_SESSION_ID_HEADER]}
        session["MCP-Protocol-Version"] = "2025-11-25"
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(proxy.url, json=initialized, headers=session)).status_code == 202
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "planning__create_goal", "arguments": {"goal": "resumed"}},
        }
        called = await http.post(proxy.url, json=call, headers=session)
        assert called.status_code == 200, called.text
        priming = re.search(r"^id: (\S+)", called.text, re.MULTILINE)
        assert priming is not None, called.text
        replay = {**session, LAST_EVENT_ID_HEADER: priming.group(1)}
        async with http.stream("GET", proxy.url, headers=replay) as resumed:
            assert resumed.status_code == 200
            # The replay, then the stream goes on live: leave after its first data.
            async for line in resumed.aiter_lines():
                if line.startswith("data: {"):  # not a priming event's empty data
                    replayed = line.removeprefix("data: ")
                    break
        assert (await http.delete(proxy.url, headers=session)).status_code == 200
    return session[MCP_SESSION_ID_HEADER], _data(called.text), replayed


def _data(body: str) -> str:
    """The first message in the SSE `body` (a priming event has empty data)."""
    return next(line[6:] for line in body.splitlines() if line.startswith("data: {"))


async def test_two_fronts_behind_nginx_keep_each_session_on_its_front_and_share_the_rest(
    fresh_postgres_url: str, nginx: Nginx, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"test-{uuid.uuid4().hex[:8]}"
    common = ("--state", fresh_postgres_url, "--name", name, "--token", GATEWAY, *BEHIND_NGINX)
    async with AsyncExitStack() as stack:
        front_a = await stack.enter_async_context(
            http_server(
                "--shards", "2", "--num-cpus", "2", *common, "--session-id-prefix", "a",
                command=CLUSTER, startup=CLUSTER_STARTUP_TIMEOUT,
            )
        )  # fmt: skip
        address = ON_RAY.search(front_a.log.text())
        assert address is not None, front_a.log.text()
        monkeypatch.setenv(
            "RAY_AUTH_MODE", "token"
        )  # as tests/cluster/test_cluster_front.py says why
        front_b = await stack.enter_async_context(
            http_server(
                "--address", address.group(1), "--join", *common, "--session-id-prefix", "b",
                command=CLUSTER, startup=CLUSTER_STARTUP_TIMEOUT,
            )
        )  # fmt: skip
        proxy = await stack.enter_async_context(nginx.in_front_of_fronts(front_a.url, front_b.url))
        upstreams = {"a": _netloc(front_a.url), "b": _netloc(front_b.url)}

        # 2025 era: several clients at once, each in its own HTTP session.
        seen: dict[int, list[str]] = {}

        async def legacy_client(number: int) -> None:
            async with through(proxy, "legacy") as client:
                made = await client.call_tool("planning__create_goal", {"goal": f"of {number}"})
                assert not made.is_error, texts(made)
                seen[number] = [
                    texts(await client.call_tool("planning__list_goals", {})) for _ in range(3)
                ]

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for number in range(CLIENTS):
                    nursery.start_soon(legacy_client, number)
            resumed_session, called, replayed = await resume_once(proxy)

        # 2026 era: no session; one state, whichever front answers.
        async with through(proxy, "modern") as modern:
            shared = {"sessionId": "shared"}
            await modern.call_tool("planning__create_goal", {"goal": "everyone's"}, meta=shared)
            modern_lists = [
                texts(await modern.call_tool("planning__list_goals", {}, meta=shared))
                for _ in range(6)
            ]
        # A session id of a front nobody reaches with it: answered 404 wherever it lands.
        async with httpx2.AsyncClient(headers={**proxy.host_header, **bearer(GATEWAY)}) as http:
            astray = await http.post(
                proxy.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={
                    MCP_SESSION_ID_HEADER: "c.0123456789abcdef0123456789abcdef",
                    "MCP-Protocol-Version": "2025-11-25",
                    "Accept": "application/json, text/event-stream",
                },
            )
        access = proxy.access_log()
        logs = {"a": front_a.log.text(), "b": front_b.log.text()}

    for number, lists in seen.items():
        assert lists == [f"Goals (1):\n- g1: of {number}"] * 3  # its own state, nobody else's
    requests = [match.groupdict() for match in ACCESS.finditer(access)]
    in_sessions = [request for request in requests if request["session"] != "-"]  # nginx's none
    opened = {request["session"] for request in in_sessions}
    assert len(opened) == CLIENTS + 2, access  # the clients', the resumer's, the stray one
    prefixes = Counter(session.partition(".")[0] for session in opened)
    assert prefixes["a"] >= 1, access  # initialize went round robin
    assert prefixes["b"] >= 1, access
    # Every request of a session reached the front its id names, and was served there.
    for request in in_sessions:
        prefix = request["session"].partition(".")[0]
        if prefix in upstreams:
            assert request["upstream"] == upstreams[prefix], request
            assert request["status"] in {"200", "202"}, request
    methods = Counter(request["method"] for request in in_sessions)
    assert methods["GET"] >= CLIENTS + 1  # the clients' standalone streams, and the resume
    deleted = [r for r in in_sessions if r["method"] == "DELETE"]
    assert len(deleted) == CLIENTS + 1, access  # each client's DELETE, and the resumer's
    assert json.loads(called)["result"] == json.loads(replayed)["result"]
    resumed = [r for r in in_sessions if r["session"] == resumed_session and r["method"] == "GET"]
    assert [r["upstream"] for r in resumed] == [upstreams[resumed_session[0]]], access
    assert astray.status_code == 404
    # 2026 era: both fronts served the calls, and every call saw the same state.
    assert modern_lists == ["Goals (1):\n- g1: everyone's"] * 6
    for prefix, log in logs.items():
        assert len(MODERN_CALL.findall(log)) >= 2, f"front {prefix} served no 2026-era call"
        assert "Traceback" not in log


def _netloc(url: str) -> str:
    return url.removeprefix("http://").split("/", 1)[0]
