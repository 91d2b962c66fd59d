"""What the lean path of a 2025-era session keeps in the event store, and what it need not.

A client of 2025-11-25 reads a priming event before its call runs, and resumes
from it if its connection drops: the priming event and the result are kept, and
a cut call gets its result on the resumed stream. A client of 2025-03-26 or
2025-06-18 reads no priming event: it holds no event id until the result, which
ends the stream, so no GET can ever ask for the result again, and it is not
kept (`actors.server.http._fast_path_sessions`). These tests hold the official
client to that: it gets its results, its cut calls fail and it asks for nothing
(every request it sends is recorded), the result's id resumes nothing (404, not
an empty stream that never ends), and such results no longer push a resumable
stream's events out of the store.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
import trio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import LAST_EVENT_ID_HEADER, MCP_SESSION_ID_HEADER
from mcp.shared.message import ClientMessageMetadata

from .._mcp_helpers import http_server, texts
from .test_resumable_http import (
    CuttableProxy,
    raw_session,
    release,
    result_text,
    resume_until_live,
    slow_module_fixture,  # noqa: F401  (the fixture `slow_module`)
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from .._mcp_helpers import HttpServer

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

OLD_VERSIONS = ("2025-03-26", "2025-06-18")
"""The versions whose clients read no priming event, so can resume no call."""


class Recorded:
    """The requests an HTTP client sent: their methods, and their ``Last-Event-ID``."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None]] = []
        self.session_id: str | None = None
        self.resumed = trio.Event()
        """Set once a GET with ``Last-Event-ID`` was sent."""

    async def __call__(self, request: httpx2.Request) -> None:
        last_event_id = request.headers.get(LAST_EVENT_ID_HEADER)
        self.sent.append((request.method, last_event_id))
        self.session_id = request.headers.get(MCP_SESSION_ID_HEADER, self.session_id)
        if request.method == "GET" and last_event_id is not None:
            self.resumed.set()

    def resumptions(self) -> list[str | None]:
        """The ``Last-Event-ID`` of every GET that names one."""
        return [last for method, last in self.sent if method == "GET" and last is not None]


@asynccontextmanager
async def official_client(
    url: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ClientSession, Recorded]]:
    """The SDK's client in a session of `version`, and what it sends, recorded."""
    # The SDK's client offers the latest handshake version; the server takes an older one.
    monkeypatch.setattr("mcp.client.session.LATEST_HANDSHAKE_VERSION", version)
    recorded = Recorded()
    hooks = {"request": [recorded]}
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30), event_hooks=hooks) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        opened = await client.initialize()
        assert opened.protocol_version == version
        yield client, recorded


class Tokens:
    """The resumption tokens (event ids) the SDK's client was handed for one call."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.arrived = trio.Event()
        """Set once a first token arrived."""

    async def __call__(self, token: str) -> None:
        self.seen.append(token)
        self.arrived.set()


async def call_with_tokens(
    client: ClientSession, name: str, arguments: dict[str, Any], tokens: Tokens
) -> types.CallToolResult:
    """Call `name` as the SDK's client does, collecting the resumption tokens it is handed."""
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(name=name, arguments=arguments, _meta={"sessionId": "s"})
    )
    metadata = ClientMessageMetadata(on_resumption_token_update=tokens)
    return await client.send_request(request, types.CallToolResult, metadata=metadata)


async def resume_status(url: str, session_id: str, version: str, last_event_id: str) -> int:
    """The status a GET in `session_id` with ``Last-Event-ID`` gets (it is not read further)."""
    headers = {
        "Accept": "text/event-stream",
        MCP_SESSION_ID_HEADER: session_id,
        "MCP-Protocol-Version": version,
        LAST_EVENT_ID_HEADER: last_event_id,
    }
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http,
        http.stream("GET", url, headers=headers) as response,
    ):
        return response.status_code


@pytest.mark.parametrize("version", OLD_VERSIONS)
async def test_a_result_no_client_can_resume_from_is_sent_with_an_id_but_not_kept(
    slow_module: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official client of an old version gets its results, each with an event id as the
    SDK sends it; it never asks for one again, and a GET naming one is a 404 (kept, it was
    an empty stream that never ends)."""
    tokens = Tokens()
    with trio.fail_after(60):
        async with (
            http_server("--module", slow_module) as server,
            official_client(server.url, version, monkeypatch) as (client, recorded),
        ):
            first = await call_with_tokens(client, "slow__echo", {"text": "one"}, tokens)
            second = await call_with_tokens(client, "slow__echo", {"text": "two"}, tokens)
            assert recorded.session_id is not None
            statuses = [
                await resume_status(server.url, recorded.session_id, version, token)
                for token in tokens.seen
            ]
            asked = recorded.resumptions()
            log = server.log.text()
    assert (texts(first), texts(second)) == ("one", "two")
    assert len(tokens.seen) == 2  # one event each, the result, and it carries an id
    assert statuses == [404, 404]
    assert asked == []
    assert "Traceback" not in log


@pytest.mark.parametrize("version", OLD_VERSIONS)
async def test_a_cut_call_of_an_old_version_fails_and_asks_for_nothing(
    slow_module: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut mid-call by a proxy, the official client of an old version has no event id to
    resume from: the call fails, no GET with ``Last-Event-ID`` is ever sent, and the
    server goes on serving the session."""
    with trio.fail_after(60):
        async with http_server("--module", slow_module) as server, trio.open_nursery() as nursery:
            url, proxy = await proxied(server, nursery)
            async with official_client(url, version, monkeypatch) as (client, recorded):
                failed: list[BaseException] = []
                tokens = Tokens()

                async def call() -> None:
                    try:
                        await call_with_tokens(client, "slow__hold", {}, tokens)
                    except Exception as error:  # which error the client raises is its affair
                        failed.append(error)

                async with trio.open_nursery() as calls:
                    calls.start_soon(call)
                    await until_held(server)
                    proxy.cut()
                await release(server)
                after = await client.call_tool("slow__echo", {"text": "still here"})
                asked = recorded.resumptions()
            log = server.log.text()
            nursery.cancel_scope.cancel()
    assert len(failed) == 1, failed
    assert tokens.seen == []
    assert asked == []
    assert texts(after) == "still here"
    assert "Traceback" not in log


async def test_old_sessions_results_do_not_push_out_a_resumable_stream(
    slow_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2025-11-25 call cut after its priming event resumes and gets its result, though
    a 2025-06-18 client has meanwhile been sent many times the store's bound in results:
    kept, they would have evicted the priming event (the same principal's oldest)."""
    bound = 64 * 1024
    text = "x" * 1000
    with trio.fail_after(90):
        async with (
            http_server("--module", slow_module, "--max-stored-event-bytes", str(bound)) as server,
            raw_session(server) as resumable,
        ):
            async with resumable.call("slow__hold", {}) as events:
                priming = await events.next()
            assert priming is not None
            async with official_client(server.url, "2025-06-18", monkeypatch) as (client, _):
                for _ in range(3 * bound // len(text)):
                    flooded = await client.call_tool("slow__echo", {"text": text})
                    assert texts(flooded) == text
            async with resume_until_live(resumable, priming["id"]) as (events, replayed):
                await release(server)
                answer = await events.next()
    assert replayed == []
    assert answer is not None
    assert result_text(answer) == "held and released"


async def test_a_resumable_result_is_kept_though_it_was_sent_whole(slow_module: str) -> None:
    """A 2025-11-25 result written whole is still replayed from the priming event: the
    kernel taking a write is not the client reading it."""
    with trio.fail_after(60):
        async with http_server("--module", slow_module) as server, raw_session(server) as session:
            async with session.call("slow__echo", {"text": "kept"}) as events:
                priming = await events.next()
                answer = await events.next()
                assert await events.next() is None  # the whole response was read
            assert priming is not None
            async with session.resume(priming["id"]) as replayed:
                again = await replayed.next()
    assert answer is not None
    assert again is not None
    assert (again["id"], result_text(again)) == (answer["id"], "kept")


async def test_the_official_client_of_2025_11_25_resumes_a_cut_call(
    slow_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut mid-call, the official client of 2025-11-25 resumes from the priming event on
    its own and returns the result; its requests show the GET it resumed with."""
    tokens = Tokens()
    with trio.fail_after(60):
        async with http_server("--module", slow_module) as server, trio.open_nursery() as nursery:
            url, proxy = await proxied(server, nursery)
            async with official_client(url, "2025-11-25", monkeypatch) as (client, recorded):
                result: list[types.CallToolResult] = []

                async def call() -> None:
                    result.append(await call_with_tokens(client, "slow__hold", {}, tokens))

                async with trio.open_nursery() as calls:
                    calls.start_soon(call)
                    await until_held(server)
                    await tokens.arrived.wait()  # the priming event's id
                    proxy.cut()
                    await recorded.resumed.wait()
                    await release(server)
                asked = recorded.resumptions()
            nursery.cancel_scope.cancel()
    assert len(result) == 1
    assert texts(result[0]) == "held and released"
    assert asked[0] == tokens.seen[0]


# -- helpers -------------------------------------------------------------------------------


async def proxied(server: HttpServer, nursery: trio.Nursery) -> tuple[str, CuttableProxy]:
    """`server`'s URL through a `CuttableProxy` started in `nursery`, and the proxy."""
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    proxy = CuttableProxy(nursery, port)
    proxy_port = await nursery.start(proxy.serve)
    return server.url.replace(f":{port}/", f":{proxy_port}/"), proxy


async def until_held(server: HttpServer) -> None:
    """Return once a ``hold`` runs on `server` (asked from a session of its own)."""
    async with server.session() as other:
        answered = await other.call_tool("slow__held", {}, meta={"sessionId": "watcher"})
    assert texts(answered) == "holding"
