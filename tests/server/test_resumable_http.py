"""Resumable Streamable HTTP streams: priming ids, resuming a cut call, whose events are whose.

The server's side is `actors.server.http._event_store`: each session's SSE events are
kept, bounded, and only that session can resume from them. The tests on the
wire run ``serve --http`` with a module of their own whose ``hold`` tool
answers only once another session calls ``release``: a call as slow as the
test needs, with no clock involved.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
import trio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import LAST_EVENT_ID_HEADER, MCP_SESSION_ID_HEADER
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import ClientMessageMetadata
from mcp.types import JSONRPCResponse

from actors.server import ConfigurationError, ServeOptions
from actors.server._fair_shares import Principal
from actors.server.http._event_store import (
    EVENT_OVERHEAD,
    STREAM_OVERHEAD,
    BoundedEventStore,
    EventStoreStatistics,
    _scope,
    _SessionScope,
)

from .._mcp_helpers import (
    bearer,
    http_server,
    importable_module,
    initialize_request,
    open_session,
    texts,
    tools_call,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from mcp.server.streamable_http import EventMessage

    from .._mcp_helpers import HttpServer

# The SDK client's SSE reader, and the raw readers here, leave httpx2's response
# generators unexhausted when a stream is cut: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

ALPHA, BETA = "alpha-token-0123456789", "beta-token-0123456789"
VERSION = "2025-11-25"
SLOW_MODULE = """
import trio
from actors import ToolModule
from protocol import Scope

slow = ToolModule("slow", lambda context: None, scope=Scope.SESSION)
released = trio.Event()
holding = trio.Event()

@slow.tool
async def hold(state: None) -> str:
    '''Answer once `release` was called, from any session.'''
    holding.set()
    await released.wait()
    return "held and released"

@slow.tool
async def held(state: None) -> str:
    '''Answer once a `hold` is running.'''
    await holding.wait()
    return "holding"

@slow.tool
async def release(state: None) -> str:
    '''Let every `hold` answer.'''
    released.set()
    return "released"

@slow.tool
async def echo(state: None, text: str) -> str:
    '''`text`, at once.'''
    return text
"""


@pytest.fixture(name="slow_module")
def slow_module_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The spec of the test's slow module, importable by the servers the test starts."""
    importable_module(tmp_path, monkeypatch, "slowmod", SLOW_MODULE)
    return "slowmod:slow"


# -- a raw client: what the SDK client does not show -------------------------------------


class Events:
    """The SSE events of a streamed response, one at a time, each as its fields."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self) -> dict[str, str] | None:
        """The next event, or None at the end of the stream."""
        fields: dict[str, str] = {}
        async for line in self._lines:
            if not line:
                if fields:
                    return fields
                continue
            name, _, value = line.partition(":")
            if name:  # a line starting with ':' is a comment (sse-starlette's pings)
                fields[name] = value.removeprefix(" ")
        return fields or None


class RawSession:
    """One MCP session opened by hand over raw HTTP, with a token."""

    def __init__(self, client: httpx2.AsyncClient, url: str, session_id: str) -> None:
        self.client = client
        self.url = url
        self.session_id = session_id

    def headers(self, **extra: str) -> dict[str, str]:
        """The headers of a request in this session."""
        return {MCP_SESSION_ID_HEADER: self.session_id, "MCP-Protocol-Version": VERSION, **extra}

    @asynccontextmanager
    async def call(
        self, name: str, arguments: dict[str, Any], session: str = "s"
    ) -> AsyncIterator[Events]:
        """POST a tools/call and stream its answer; the connection closes when the block ends."""
        body = tools_call(name, arguments, request_id=7, meta={"sessionId": session})
        async with self.client.stream("POST", self.url, json=body, headers=self.headers()) as r:
            assert r.status_code == 200, await r.aread()
            yield Events(r)

    @asynccontextmanager
    async def resume(
        self, last_event_id: str, session_id: str | None = None
    ) -> AsyncIterator[Events]:
        """GET with ``Last-Event-ID`` (in this session, or as `session_id`)."""
        headers = self.headers(**{LAST_EVENT_ID_HEADER: last_event_id})
        if session_id is not None:
            headers[MCP_SESSION_ID_HEADER] = session_id
        async with self.client.stream("GET", self.url, headers=headers) as response:
            yield Events(response)


@asynccontextmanager
async def raw_session(server: HttpServer, token: str | None = None) -> AsyncIterator[RawSession]:
    """A raw session on `server`: initialize, then initialized."""
    headers = {"Accept": "application/json, text/event-stream", **bearer(token)}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30)) as client:
        opened = await client.post(server.url, json=initialize_request("raw"))
        assert opened.status_code == 200, opened.text
        session = RawSession(client, server.url, opened.headers[MCP_SESSION_ID_HEADER])
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sent = await client.post(server.url, json=initialized, headers=session.headers())
        assert sent.status_code == 202, sent.text
        yield session


def result_text(event: dict[str, str]) -> str:
    """The text of the tools/call result an SSE event carries."""
    result = types.CallToolResult.model_validate(json.loads(event["data"])["result"])
    return texts(result)


async def release(server: HttpServer) -> None:
    """Let the server's held calls answer, from a session of its own."""
    async with server.session() as other:
        released = await other.call_tool("slow__release", {}, meta={"sessionId": "releaser"})
    assert texts(released) == "released"


@asynccontextmanager
async def resume_until_live(
    session: RawSession, last_event_id: str
) -> AsyncIterator[tuple[Events, list[dict[str, str]]]]:
    """Resume from `last_event_id` until the stream goes on live; the events replayed before.

    A GET that arrives before the server has seen the old connection drop gets
    the replay and an ended stream, as the protocol allows; a client then
    reconnects, as this does.
    """
    while True:
        async with session.resume(last_event_id) as events:
            assert events.response.status_code == 200
            replayed: list[dict[str, str]] = []
            while (event := await events.next()) is not None:
                if not event.get("data"):  # the resumed stream's own priming event: live
                    yield events, replayed
                    return
                replayed.append(event)
                last_event_id = event["id"]
            if replayed:
                yield events, replayed
                return


# -- on the wire --------------------------------------------------------------------------


async def test_a_call_stream_starts_with_an_event_id_and_a_retry_interval(
    slow_module: str,
) -> None:
    """The first SSE event of a tools/call is a priming event: an id, ``retry``, no data."""
    with trio.fail_after(60):
        async with http_server("--module", slow_module) as server, raw_session(server) as session:
            async with session.call("slow__echo", {"text": "hi"}) as events:
                first = await events.next()
                answer = await events.next()
    assert first is not None
    assert first["id"]
    assert first["retry"] == "1000"
    assert first.get("data", "") == ""
    assert answer is not None
    assert answer["id"] != first["id"]
    assert result_text(answer) == "hi"


async def test_a_cut_call_is_resumed_with_last_event_id_and_gets_its_result(
    slow_module: str,
) -> None:
    """POST a slow call, drop the connection after its priming event, GET with
    Last-Event-ID: the call's result arrives on the resumed stream."""
    with trio.fail_after(60):
        async with http_server("--module", slow_module) as server, raw_session(server) as session:
            async with session.call("slow__hold", {}) as events:
                priming = await events.next()
            assert priming is not None
            async with resume_until_live(session, priming["id"]) as (events, replayed):
                await release(server)
                answer = await events.next()
            log = server.log.text()
    assert replayed == []
    assert answer is not None
    assert result_text(answer) == "held and released"
    assert "Traceback" not in log


class CuttableProxy:
    """A TCP proxy in front of a server whose connections the test can cut, all at once."""

    def __init__(self, nursery: trio.Nursery, target: int) -> None:
        self._nursery = nursery
        self._target = target
        self._connections: set[trio.CancelScope] = set()

    async def serve(self, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Accept connections on an ephemeral port (started with it) and pass them on."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._relay, listeners)

    def cut(self) -> None:
        """Close every connection open now, both ways."""
        for scope in self._connections:
            scope.cancel()

    async def _relay(self, client: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            self._connections.add(scope)
            try:
                async with client, await trio.open_tcp_stream("127.0.0.1", self._target) as server:
                    async with trio.open_nursery() as pumps:
                        pumps.start_soon(self._pump, client, server)
                        pumps.start_soon(self._pump, server, client)
            finally:
                self._connections.discard(scope)

    @staticmethod
    async def _pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            async for chunk in source:
                await sink.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the other direction closed
        with trio.CancelScope(shield=True):
            await sink.aclose()


async def test_the_sdk_client_resumes_a_cut_call_on_its_own(slow_module: str) -> None:
    """The official client, its connection cut mid-call by a proxy, reconnects with
    Last-Event-ID after the ``retry`` interval and returns the call's result."""
    tokens: list[str] = []
    token_arrived = trio.Event()

    async def on_token(token: str) -> None:
        nonlocal token_arrived
        tokens.append(token)
        token_arrived.set()
        token_arrived = trio.Event()

    with trio.fail_after(60):
        async with http_server("--module", slow_module) as server, trio.open_nursery() as nursery:
            port = int(server.url.rsplit(":", 1)[1].split("/")[0])
            proxy = CuttableProxy(nursery, port)
            proxy_port = await nursery.start(proxy.serve)
            url = server.url.replace(f":{port}/", f":{proxy_port}/")
            async with (
                create_mcp_http_client() as http,
                streamable_http_client(url, http_client=http) as (read, write),
            ):
                async with ClientSession(read, write) as client:
                    await open_session(client, "legacy")
                    request = types.CallToolRequest(
                        params=types.CallToolRequestParams(
                            name="slow__hold", arguments={}, _meta={"sessionId": "s"}
                        )
                    )
                    result: list[types.CallToolResult] = []

                    async def call() -> None:
                        result.append(
                            await client.send_request(
                                request,
                                types.CallToolResult,
                                metadata=ClientMessageMetadata(on_resumption_token_update=on_token),
                            )
                        )

                    async with trio.open_nursery() as calls:
                        calls.start_soon(call)
                        await token_arrived.wait()  # the call's priming event
                        proxy.cut()
                        await token_arrived.wait()  # the resumed stream's priming event
                        await release(server)
            nursery.cancel_scope.cancel()
    assert len(result) == 1
    assert texts(result[0]) == "held and released"
    assert len(set(tokens)) == len(tokens) >= 3  # priming, resumed priming, result


# -- attackers ----------------------------------------------------------------------------


async def test_only_the_session_that_was_sent_an_event_can_resume_from_it(
    slow_module: str,
) -> None:
    """Alpha's event ids resume alpha's stream; another session of alpha, a session of
    another token, and another token naming alpha's session all get 404 and nothing
    of alpha's; so does a made-up id."""
    with trio.fail_after(60):
        async with (
            http_server(
                "--module", slow_module, "--token", f"{ALPHA}=alpha", "--token", f"{BETA}=beta"
            ) as server,
            raw_session(server, ALPHA) as alpha,
            raw_session(server, ALPHA) as alpha_again,
            raw_session(server, BETA) as beta,
        ):
            async with alpha.call("slow__echo", {"text": "alpha's secret"}, "alpha/1") as events:
                priming = await events.next()
                answer = await events.next()
            assert priming is not None
            assert answer is not None
            assert result_text(answer) == "alpha's secret"
            attempts = {
                "another session of the same token": alpha_again.resume(priming["id"]),
                "a session of another token": beta.resume(priming["id"]),
                "another token naming alpha's session": beta.resume(
                    priming["id"], session_id=alpha.session_id
                ),
                "a made-up id in alpha's session": alpha.resume("not-an-event-id"),
            }
            refused: dict[str, tuple[int, bytes]] = {}
            for what, attempt in attempts.items():
                async with attempt as events:
                    refused[what] = (events.response.status_code, await events.response.aread())
            async with alpha.resume(priming["id"]) as events:
                own = await events.next()
    for what, (status, body) in refused.items():
        assert status == 404, (what, body)
        assert b"secret" not in body, what
    assert own == answer


# -- the store's bounds -------------------------------------------------------------------


@contextmanager
def in_session(serial: int, owner: str = "anonymous") -> Iterator[None]:
    """Act as a request of session `serial` opened by `owner` (what `SessionScopes` does)."""
    token = _scope.set(_SessionScope(serial, Principal(owner)))
    try:
        yield
    finally:
        _scope.reset(token)


def reply(text: str, request_id: int = 1) -> JSONRPCResponse:
    """A JSON-RPC response carrying `text`."""
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result={"text": text})


def size_of(message: JSONRPCResponse, stream: str) -> int:
    """The bytes the store counts for `message` alone on `stream`: the event and its stream."""
    data = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
    del stream  # a stream costs the same whatever its id
    return EVENT_OVERHEAD + sys.getsizeof(data) + STREAM_OVERHEAD


async def replay(store: BoundedEventStore, last_event_id: str) -> tuple[str | None, list[Any]]:
    """What the store replays after `last_event_id`: the stream id, and the messages."""
    sent: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        sent.append(event)

    stream = await store.replay_events_after(last_event_id, collect)
    return stream, [event.message for event in sent]


class TestBoundedEventStore:
    async def test_it_replays_what_followed_an_event_of_the_same_session_only(self) -> None:
        """After the priming event: the stream's later messages, in order; another
        session asking for the same id gets nothing, even with the same stream id."""
        store = BoundedEventStore(1 << 20)
        with in_session(1):
            priming = await store.store_event("1", None)
            await store.store_event("1", reply("one"))
            await store.store_event("2", reply("elsewhere", 2))
            await store.store_event("1", reply("two"))
        with in_session(2):
            await store.store_event("1", reply("session two"))
            assert await replay(store, priming) == (None, [])
            assert not store.knows(priming)
        with in_session(1):
            assert await replay(store, priming) == ("1", [reply("one"), reply("two")])

    async def test_what_is_stored_while_the_client_reads_the_replay_is_replayed_too(
        self,
    ) -> None:
        """The SDK goes on live only once the replay returns: a result stored while
        the client is still reading the replay must not fall between the two."""
        store = BoundedEventStore(1 << 20)
        sent: list[Any] = []

        async def slow_client(event: EventMessage) -> None:
            sent.append(event.message)
            if len(sent) == 1:
                await store.store_event("1", reply("result"))

        with in_session(1):
            priming = await store.store_event("1", None)
            await store.store_event("1", reply("progress"))
            assert await store.replay_events_after(priming, slow_client) == "1"
        assert sent == [reply("progress"), reply("result")]

    async def test_a_replay_stops_where_its_stream_lost_events(self) -> None:
        """Events evicted while the client reads the replay: the rest is not sent with
        a hole in front of it."""
        store = BoundedEventStore(1 << 20, max_events_per_stream=2)
        sent: list[Any] = []

        async def slow_client(event: EventMessage) -> None:
            sent.append(event.message)
            for number in range(3):  # evicts the priming event, then the one being read
                await store.store_event("1", reply(f"later {number}"))

        with in_session(1):
            priming = await store.store_event("1", None)
            await store.store_event("1", reply("first"))
            assert await store.replay_events_after(priming, slow_client) == "1"
        assert sent == [reply("first")]

    async def test_events_outside_a_session_are_not_kept(self) -> None:
        store = BoundedEventStore(1 << 20)
        event_id = await store.store_event("1", reply("nobody's"))
        assert store.statistics() == EventStoreStatistics(events=0, streams=0, bytes=0)
        with in_session(1):
            assert not store.knows(event_id)

    async def test_many_large_results_stay_within_the_byte_bound_oldest_first(self) -> None:
        """100 results of 1 KB in a 10 KB store: never more than 10 KB; the newest
        are held, the oldest gone, and a gone event is unknown (never a replay with a hole)."""
        big = reply("x" * 1000)
        store = BoundedEventStore(10 * size_of(big, "100"))
        ids = []
        with in_session(1):
            for number in range(100, 200):
                ids.append(await store.store_event(str(number), big))
                assert store.statistics().bytes <= 10 * size_of(big, "100")
            assert store.statistics() == EventStoreStatistics(
                events=10, streams=10, bytes=10 * size_of(big, "100")
            )
            assert [store.knows(event_id) for event_id in ids] == [False] * 90 + [True] * 10

    async def test_a_stream_keeps_its_last_events(self) -> None:
        store = BoundedEventStore(1 << 20, max_events_per_stream=3)
        with in_session(1):
            ids = [await store.store_event("1", reply(str(n))) for n in range(5)]
            assert [store.knows(event_id) for event_id in ids] == [False, False, True, True, True]
            assert await replay(store, ids[2]) == ("1", [reply("3"), reply("4")])

    async def test_an_event_larger_than_the_store_is_not_kept_nor_what_came_before(self) -> None:
        """Its stream's earlier events go too: a resume from them would miss it."""
        small = reply("small")
        store = BoundedEventStore(4 * size_of(small, "1"))
        with in_session(1):
            before = await store.store_event("1", small)
            other = await store.store_event("2", small)
            too_big = await store.store_event("1", reply("x" * 10_000))
            assert not store.knows(before)
            assert not store.knows(too_big)
            assert store.knows(other)
        assert store.statistics() == EventStoreStatistics(1, 1, size_of(small, "2"))

    async def test_one_principals_flood_evicts_its_own_events_first(self) -> None:
        """Beta stores 100 large results; alpha's one small event, stored first, stays
        (invariant 10), and beta keeps what is left of the bound."""
        big, small = reply("x" * 1000), reply("alpha's")
        bound = 10 * size_of(big, "1")
        store = BoundedEventStore(bound)
        with in_session(1, "token-1"):
            alphas = await store.store_event("1", small)
        with in_session(2, "token-2"):
            for number in range(100):
                await store.store_event(str(number), big)
            held = store.statistics()
        assert held.bytes <= bound
        assert held.events > 1  # beta keeps the rest of the bound
        with in_session(1, "token-1"):
            assert store.knows(alphas)

    @pytest.mark.parametrize(
        "text", [None, "", "x" * 200, "x" * 5000], ids=["priming", "0", "200", "5000"]
    )
    @pytest.mark.parametrize("sessions", [1, 500])
    async def test_what_it_holds_in_memory_stays_within_the_bound(
        self, text: str | None, sessions: int
    ) -> None:
        """Measured with tracemalloc, not counted: tiny events in many streams and sessions
        cost more than their JSON, and the bound is for what is held."""
        bound = 2 << 20
        store = BoundedEventStore(bound)
        message = None if text is None else reply(text)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for serial in range(sessions):
                with in_session(serial, f"token-{serial % 7}"):
                    for number in range(20_000 // sessions):
                        await store.store_event(str(number % 500), message)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert store.statistics().events > 100  # it was filled, and evicted to stay in bound
        assert held <= bound * 1.05, f"{held / bound:.2f} x the bound"

    def test_its_bounds_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match=r"^max_bytes and max_events_per_stream must be"):
            BoundedEventStore(0)

    def test_the_option_must_be_positive(self) -> None:
        options = ServeOptions(http=("127.0.0.1", 0), max_stored_event_bytes=0, state="memory")
        with pytest.raises(
            ConfigurationError, match=r"^--max-stored-event-bytes must be at least 1"
        ):
            options.check()
