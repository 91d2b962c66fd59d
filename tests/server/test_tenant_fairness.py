"""One tenant cannot block another (invariant 10) at any cap one principal can fill.

The server-wide caps a client can fill — ``subscriptions/listen`` streams,
parked 2026-era calls, open HTTP sessions — are shared per token *and* per
tenant (`actors.server._fair_shares`): a tenant's many tokens fill what they may,
and another tenant is still served. The event store evicts the heaviest
tenant's events first, however many tokens it spreads them over. And a
session's owner is (tenant, subject): an OAuth token of tenant beta with the
same ``sub`` as one of alpha replays none of alpha's events and cannot end
its session.

Each test runs what ``serve --http`` serves on a real socket of 127.0.0.1,
with small caps so that filling them is quick; the clients are the official
SDK client, or raw HTTP where the attack is a request the SDK would not send.
"""

from __future__ import annotations

import functools
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import attrs
import httpx2
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import LAST_EVENT_ID_HEADER, MCP_SESSION_ID_HEADER
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from actors import Ask, ToolModule, open_runtime
from actors.server import MCP_PATH, ServeOptions
from actors.server._fair_shares import FairShares, Principal
from actors.server._options import build_modules
from actors.server.http import _admission
from actors.server.http._app import _http_apps, http_adapter
from actors.server.http._responses import RefusalLog
from actors.server.http._server import WireLimits, serve_wire
from actors.server.mcp import _parked_calls, _subscriptions
from protocol import Scope

from .._mcp_helpers import bearer, initialize_request, texts, tools_call
from .test_oauth import Issuer, running, settings
from .test_resumable_http import raw_session, result_text

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

# The SDK client's SSE reader, and the raw readers here, leave httpx2's response
# generators unexhausted when a stream is cut: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

WAIT: Final = 60.0  # a generous bound on each test; none waits for time to pass
FORM: Final = {"type": "object", "properties": {"name": {"type": "string"}}}
BOARD: Final = "board://all"
ACCEPT: Final = {"Accept": "application/json, text/event-stream"}
VERSION: Final = "2025-11-25"
SECRET: Final = "alpha's secret"

board: ToolModule[None] = ToolModule("board", lambda _context: None, scope=Scope.SESSION)


@board.tool
async def ask_name(state: None, ask: Ask) -> str:
    """Ask the user a name: on a 2026-era client, the call parks until the answer comes."""
    answer = await ask.user("Who comes?", FORM)
    return f"{answer.action}: {answer.content}"


@board.tool(read_only=True)
def echo(state: None, text: str) -> str:
    """`text`, at once."""
    return text


@board.resource(BOARD, title="The board", mime_type="text/plain")
def everything(state: None) -> str:
    """What a listen stream follows."""
    return "the board"


def tokens_of(tenant: str, count: int) -> dict[str, str]:
    """`count` static tokens bound to `tenant`."""
    return {f"{tenant}-token-{number}-0123456789": tenant for number in range(count)}


@attrs.frozen
class Served:
    """What ``serve --http`` serves, on a real socket: where it is."""

    url: str


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[Served]:
    """The board served over HTTP on 127.0.0.1 with `options`, until the block ends.

    The caps are read as the server is built: patch them before.
    """
    served = ServeOptions(http=("127.0.0.1", 0), modules=(board,), **options)
    served.check()
    async with open_runtime(build_modules(served), served.runtime) as runtime:
        apps = _http_apps(http_adapter(runtime, served), served, RefusalLog(), None, None)
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            serve = functools.partial(
                serve_wire,
                apps.app,
                "127.0.0.1:0",
                stop,
                grace=1.0,
                limits=WireLimits(),
                fast=apps.fast,
            )
            urls: list[str] = await nursery.start(serve)
            try:
                yield Served(urls[0] + MCP_PATH)
            finally:
                stop.set()


async def never_called(_context: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
    """Declares the elicitation capability; the questions stay unanswered (parked)."""
    raise AssertionError("the test answers no question")


@asynccontextmanager
async def modern_client(served: Served, token: str) -> AsyncIterator[Client]:
    """A 2026-era SDK client of `served` with `token`, declaring elicitation."""
    async with create_mcp_http_client(headers=bearer(token)) as http:
        transport = streamable_http_client(served.url, http_client=http)
        async with Client(transport, mode="auto", elicitation_callback=never_called) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


async def open_listens(client: Client, stack: AsyncExitStack, most: int) -> list[str]:
    """Open listen streams on `client` (kept open by `stack`) until one is refused, at most
    `most`; the refusal's message, if any."""
    for _ in range(most):
        try:
            await stack.enter_async_context(client.listen(resource_subscriptions=[BOARD]))
        except MCPError as refused:
            return [refused.error.message]
    return []


class TestFairShares:
    @given(
        st.lists(
            st.tuples(st.sampled_from(["alpha", "beta"]), st.integers(0, 2), st.integers(-4, 8)),
            max_size=40,
        )
    )
    def test_two_tenants_never_take_every_place(self, steps: list[tuple[str, int, int]]) -> None:
        """Whatever two tenants' tokens take (a positive count) and give back (a negative
        one), a third tenant finds a place (invariant 10; `actors.server._fair_shares` says why)."""
        shares = FairShares(12, 8)
        for tenant, token, count in steps:
            principal = Principal(f"{tenant}-{token}", tenant)
            for _ in range(count):
                shares.take(principal)
            for _ in range(min(-count, shares.held(principal))):
                shares.give_back(principal)
        assert shares.take(Principal("gamma-0", "gamma")) is None


class TestListenStreams:
    async def test_one_tenants_tokens_fill_their_share_and_another_tenant_still_listens(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Alpha's three tokens open every listen stream they can (at most 2 each, 3 for
        alpha: half of the 6); beta still opens one (invariant 10)."""
        monkeypatch.setattr(_subscriptions, "MAX_LISTEN_STREAMS", 6)
        monkeypatch.setattr(_subscriptions, "MAX_LISTEN_STREAMS_PER_CALLER", 2)
        alpha, beta = tokens_of("alpha", 3), tokens_of("beta", 1)
        refusals: list[str] = []
        with trio.fail_after(WAIT):
            async with serving(tokens={**alpha, **beta}) as served, AsyncExitStack() as stack:
                for token in alpha:
                    client = await stack.enter_async_context(modern_client(served, token))
                    refusals += await open_listens(client, stack, 7)
                (token,) = beta
                client = await stack.enter_async_context(modern_client(served, token))
                async with client.listen(resource_subscriptions=[BOARD]) as stream:
                    honored = stream.honored.resource_subscriptions
        assert honored == [BOARD]
        assert len(refusals) == 3, refusals
        assert "2 listen streams of this client already are open" in refusals[0]
        assert "3 listen streams of tenant 'alpha' already are open" in refusals[1]
        assert refusals[2] == refusals[1]


class TestParkedCalls:
    async def test_one_tenants_tokens_park_their_share_and_another_tenants_call_still_asks(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Alpha's three tokens park every call they can (2 each, 3 for alpha: half of the
        6); beta's asking tool still parks, instead of failing at once (invariant 10)."""
        monkeypatch.setattr(_parked_calls, "MAX_PARKED", 6)
        monkeypatch.setattr(_parked_calls, "MAX_PARKED_PER_CALLER", 2)
        alpha, beta = tokens_of("alpha", 3), tokens_of("beta", 1)
        parked = 0
        refusals: list[str] = []
        with trio.fail_after(WAIT):
            async with serving(tokens={**alpha, **beta}) as served, AsyncExitStack() as stack:
                for number, token in enumerate(alpha):
                    client = await stack.enter_async_context(modern_client(served, token))
                    for call in range(7):  # each in a session of its own: no key waits
                        meta = {"sessionId": f"alpha/{number}-{call}"}
                        result = await client.session.call_tool(
                            "board__ask_name", {}, meta=meta, allow_input_required=True
                        )
                        if not isinstance(result, types.InputRequiredResult):
                            refusals.append(texts(result))
                            break
                        parked += 1
                (token,) = beta
                client = await stack.enter_async_context(modern_client(served, token))
                theirs = await client.session.call_tool(
                    "board__ask_name", {}, meta={"sessionId": "beta/b"}, allow_input_required=True
                )
        assert isinstance(theirs, types.InputRequiredResult), texts(theirs)
        assert parked == 3
        assert len(refusals) == 3, refusals
        assert "2 calls of this client already wait for answers" in refusals[0]
        assert "3 calls of tenant 'alpha' already wait for answers" in refusals[1]


class TestSessions:
    async def test_one_tenants_tokens_open_their_share_and_another_tenant_still_opens_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With 6 sessions in all (the SDK's bound, which the gate shares) and 2 per token,
        alpha's three tokens open 3 (half) and are refused; beta opens one (invariant 10)."""
        monkeypatch.setattr(_admission, "MAX_OPEN_SESSIONS", 6)
        alpha, beta = tokens_of("alpha", 3), tokens_of("beta", 1)
        opened = 0
        refusals: list[httpx2.Response] = []
        with trio.fail_after(WAIT):
            async with (
                serving(tokens={**alpha, **beta}, max_sessions_per_token=2) as served,
                httpx2.AsyncClient(headers=ACCEPT) as http,
            ):

                async def initialize(token: str) -> httpx2.Response:
                    body = initialize_request("fairness")
                    return await http.post(served.url, json=body, headers=bearer(token))

                for token in alpha:
                    for _ in range(7):
                        answer = await initialize(token)
                        if answer.status_code != 200:
                            refusals.append(answer)
                            break
                        opened += 1
                (token,) = beta
                theirs = await initialize(token)
        assert theirs.status_code == 200, theirs.text
        assert opened == 3
        assert [answer.status_code for answer in refusals] == [429, 429, 429]
        messages = [answer.json()["error"]["message"] for answer in refusals]
        assert "this token holds 2 open sessions already" in messages[0]
        assert "3 sessions of tenant 'alpha' already are open" in messages[1]


class TestEventStore:
    async def test_a_tenants_events_spread_over_many_tokens_are_evicted_before_anothers(
        self,
    ) -> None:
        """Beta's one call stores more than any one of alpha's six tokens does, alpha's
        together far more; when the store is full, alpha's events go, and beta still
        resumes its stream from its first event (invariant 10)."""
        alpha, beta = tokens_of("alpha", 6), tokens_of("beta", 1)
        (beta_token,) = beta
        with trio.fail_after(WAIT):
            async with serving(tokens={**alpha, **beta}, max_stored_event_bytes=100_000) as served:
                async with raw_session(served, beta_token) as theirs:
                    async with theirs.call("board__echo", {"text": "b" * 20_000}, "beta/s") as sent:
                        priming = await sent.next()
                        assert priming is not None
                    for token in alpha:  # each a little lighter than beta
                        async with (
                            raw_session(served, token) as mine,
                            mine.call("board__echo", {"text": "a" * 14_000}, "alpha/s") as sent,
                        ):
                            assert await sent.next() is not None  # priming
                            assert await sent.next() is not None  # the result
                    async with theirs.resume(priming["id"]) as resumed:
                        status = resumed.response.status_code
                        replayed = await resumed.next() if status == 200 else None
        assert status == 200
        assert replayed is not None
        assert result_text(replayed) == "b" * 20_000


class TestOwners:
    async def test_the_same_subject_in_another_tenant_reaches_nothing_of_the_session(
        self,
    ) -> None:
        """A session's owner is (tenant, subject): beta's token for alpha's ``sub`` replays
        none of alpha's events (404), nor calls in the session, nor DELETEs it; alpha still
        resumes and uses its session (invariant 10; a replay would break invariant 2)."""
        async with running(Issuer()) as issuer:
            alpha = issuer.token(sub="alice", tenant="alpha")
            beta = issuer.token(sub="alice", tenant="beta")
            with trio.fail_after(WAIT):
                async with (
                    serving(oauth=settings(issuer)) as served,
                    raw_session(served, alpha) as own,
                ):
                    async with own.call("board__echo", {"text": SECRET}, "alpha/s") as sent:
                        priming = await sent.next()
                        assert priming is not None
                        await sent.next()
                    stolen = await attempts(served, beta, own.session_id, priming["id"])
                    assert stolen == {"replay": 404, "call": 404, "delete": 404}
                    async with own.resume(priming["id"]) as resumed:
                        assert resumed.response.status_code == 200
                        replayed = await resumed.next()
                    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
                    alive = await own.client.post(own.url, json=ping, headers=own.headers())
        assert replayed is not None
        assert result_text(replayed) == SECRET
        assert alive.status_code == 200, alive.text


async def attempts(served: Served, token: str, session_id: str, event_id: str) -> Mapping[str, int]:
    """What `token` gets for a replay of `event_id`, a call and a DELETE in `session_id`."""
    headers = {
        **ACCEPT,
        **bearer(token),
        MCP_SESSION_ID_HEADER: session_id,
        "MCP-Protocol-Version": VERSION,
    }
    call = tools_call("board__echo", {"text": "x"}, request_id=8, meta={"sessionId": "s"})
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30)) as http:
        # A replay would stream on live after the events: read its status only.
        resume = {LAST_EVENT_ID_HEADER: event_id}
        async with http.stream("GET", served.url, headers=resume) as replay:
            replayed = replay.status_code
        called = await http.post(served.url, json=call)
        deleted = await http.delete(served.url)
    return {"replay": replayed, "call": called.status_code, "delete": deleted.status_code}
