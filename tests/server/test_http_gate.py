"""The HTTP server's gate, Origin, Host, token and tenant checks, in process: no subprocess.

First the pieces on their own (`origin_allowed`, the tokens verifier,
`identify_http_caller`, `SessionTable`, `RefusalLog`), then the app `serve
--http` serves (`http_app`: gate, SDK app, runtime) driven through httpx2's
ASGI transport, mostly by the official SDK client. Each refusal is also
checked not to have reached the runtime: its count of calls stays where it
was. `tests/server/test_mcp_http.py` keeps one subprocess smoke test of the whole
server; `tests/server/test_mcp_http_limits.py` covers refusal floods on the wire and the
sessions-per-token table under load and idle time.
"""

from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import pytest
import trio
import trio.testing
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from actors.server import ServeOptions
from actors.server._fair_shares import Principal
from actors.server.http._admission import SessionTable
from actors.server.http._app import _StaticTokens, identify_http_caller, origin_allowed
from actors.server.http._responses import RefusalLog
from protocol import Caller

from .._mcp_helpers import (
    Era,
    InProcessHttp,
    bearer,
    in_process_http,
    initialize_request,
    service_of,
    texts,
    tools_call,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    import httpx2
    from mcp.server.auth.provider import AccessToken
    from mcp.shared.dispatcher import DispatchContext, Outbound

ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
ALPHA, BETA, GATEWAY = "alpha-token-5f1c0a", "beta-token-9e2d0b7", "gateway-token-77aa1"
TOKENS: Mapping[str, str | None] = {ALPHA: "alpha", BETA: "beta", GATEWAY: None}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = initialize_request("gate-test")
VERSION = INITIALIZE["params"]["protocolVersion"]

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]


# ---- the pieces ------------------------------------------------------------------------------


class TestOriginAllowed:
    """`origin_allowed`: loopback http(s) origins, exactly as a browser writes them, or extras."""

    @pytest.mark.parametrize(
        "origin",
        [
            "http://localhost",
            "https://localhost",
            "http://localhost:3000",
            "https://localhost:8443",
            "http://127.0.0.1",
            "http://127.0.0.1:8765",
            "https://127.0.0.1:1",
            "http://[::1]",
            "http://[::1]:8080",
            "https://[::1]:65535",
        ],
    )
    def test_loopback_origins_with_or_without_a_port_are_allowed(self, origin: str) -> None:
        """What a page served from this machine sends."""
        assert origin_allowed(origin, frozenset())

    @pytest.mark.parametrize(
        "origin",
        [
            "null",  # sandboxed iframes, file: pages, some redirects
            "",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://localhost.evil.example:80",
            "http://127.0.0.1.evil.example",
            "http://127.0.0.1@evil.example",  # the host is evil.example
            "http://localhost:80@evil.example",
            "http://evil.example@127.0.0.1",  # userinfo in front of a loopback host
            "http://user:password@localhost",
            "http://127.0.0.2",  # loopback, but not a name the server answers to
            "http://127.1",
            "http://0x7f.0.0.1",
            "http://[::ffff:127.0.0.1]",
            "http://[0:0:0:0:0:0:0:1]",
            "http://localhost/",  # an origin has no path, query or fragment
            "http://localhost/app",
            "http://localhost?x=1",
            "http://localhost#top",
            "http://localhost:99999",  # bad ports
            "http://localhost:abc",
            "http://localhost:-1",
            "http://localhost:+80",
            "http://localhost:80 ",
            "ws://localhost",  # other schemes
            "file://localhost",
            "chrome-extension://localhost",
            "localhost",
            "//localhost",
        ],
    )
    def test_anything_else_is_refused(self, origin: str) -> None:
        """Look-alikes, userinfo, paths, bad ports, other schemes and hosts."""
        assert not origin_allowed(origin, frozenset())

    @pytest.mark.parametrize(
        "origin", ["http://@localhost", "http://:secret@localhost", "http://local\thost"]
    )
    def test_an_origin_not_as_a_browser_writes_it_is_refused_too(self, origin: str) -> None:
        """An origin has no userinfo, empty or not, and no tab inside its host."""
        assert not origin_allowed(origin, frozenset())

    @pytest.mark.parametrize(
        ("origin", "allowed"),
        [
            ("https://app.example", True),
            ("https://app.example:8443", True),
            ("https://app.example/", False),
            ("https://app.example:443", False),
            ("https://APP.example", False),
            ("http://app.example", False),
            ("https://app.example.evil", False),
            ("https://evil.app.example", False),
            (" https://app.example", False),
            ("https://app.example:8443@evil.example", False),
        ],
    )
    def test_extra_origins_match_exactly(self, origin: str, *, allowed: bool) -> None:
        """--allow-origin values are compared as strings: no prefix, case or port leeway."""
        extra = frozenset({"https://app.example", "https://app.example:8443"})
        assert origin_allowed(origin, extra) is allowed


class TestStaticTokens:
    """The verifier over the operator's tokens: each token's label and tenant, nothing else."""

    VERIFIER = _StaticTokens(TOKENS)

    async def verify(self, token: str) -> AccessToken | None:
        return await self.VERIFIER.verify_token(token)

    @pytest.mark.parametrize(
        ("token", "label", "tenant"),
        [(ALPHA, "token-1", "alpha"), (BETA, "token-2", "beta"), (GATEWAY, "token-3", None)],
    )
    async def test_a_known_token_gets_its_label_and_tenant(
        self, token: str, label: str, tenant: str | None
    ) -> None:
        """Labels are numbered in the order given; a gateway's token carries no tenant claim."""
        verified = await self.verify(token)
        assert verified is not None
        assert verified.client_id == label
        assert verified.scopes == []
        if tenant is None:
            assert verified.claims is None
        else:
            assert verified.claims == {"dev.mcp-actors/tenant": tenant}

    @pytest.mark.parametrize(
        "token",
        [
            "",
            "wrong-token-000000",
            ALPHA[:-1],  # a prefix
            ALPHA + "x",  # longer
            ALPHA.upper(),
            f" {ALPHA}",
            f"{ALPHA}\n",
            ALPHA[:8],  # another length
            ALPHA * 2,
            "alpha",  # the tenant's name is not its token
            "token-1",  # nor is the label
            ALPHA.replace("a", "\u0430"),  # Cyrillic look-alike
        ],
    )
    async def test_anything_else_is_refused(self, token: str) -> None:
        """Wrong, prefix, longer, empty, differently cased or spaced: ``None``."""
        assert await self.verify(token) is None

    async def test_no_tokens_refuses_everything(self) -> None:
        """A verifier over no tokens knows none."""
        assert await _StaticTokens({}).verify_token(ALPHA) is None


def request_context(
    headers: Mapping[str, str] | None = None,
    token: AccessToken | None = None,
    session: str | None = None,
) -> ServerRequestContext[Any, Any]:
    """The context the SDK hands a handler for an HTTP request with `headers` (and `token`),
    served on the connection of HTTP session `session` (None: the 2026 era's, sessionless)."""
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    if token is not None:
        scope["user"] = AuthenticatedUser(token)
    connection = Connection.for_loop(cast("Outbound", None), session_id=session)
    return ServerRequestContext(
        session=ServerSession(cast("DispatchContext[Any]", None), connection),
        lifespan_context={},
        protocol_version=VERSION,
        method="tools/call",
        request=Request(scope),
    )


class TestIdentifyHttpCaller:
    """Who an HTTP request comes from: its token's label and tenant, and its Mcp-Session-Id."""

    async def test_a_tenant_token_names_its_tenant_and_transport_session(self) -> None:
        """The label and tenant ride in the token's claims; the session is the SDK's."""
        token = await _StaticTokens(TOKENS).verify_token(ALPHA)
        context = request_context({MCP_SESSION_ID_HEADER: "abc"}, token, session="abc")
        assert identify_http_caller(context, token_required=True) == Caller(
            "token-1", "alpha", "abc"
        )

    def test_a_header_alone_is_no_session(self) -> None:
        """A 2026-era request carrying someone's Mcp-Session-Id is served in no session."""
        context = request_context({MCP_SESSION_ID_HEADER: "someone-elses"})
        assert identify_http_caller(context) == Caller("anonymous")

    async def test_a_gateway_token_has_no_tenant(self) -> None:
        """A token bound to no tenant may address any session."""
        token = await _StaticTokens(TOKENS).verify_token(GATEWAY)
        assert identify_http_caller(request_context(token=token)) == Caller("token-3")

    def test_without_tokens_the_caller_is_anonymous(self) -> None:
        """A loopback server without tokens: every client is 'anonymous', none a sole client."""
        context = request_context({MCP_SESSION_ID_HEADER: "s"}, session="s")
        assert identify_http_caller(context) == Caller("anonymous", None, "s")
        assert identify_http_caller(request_context()) == Caller("anonymous")

    @pytest.mark.parametrize("headers", [{}, {"Authorization": f"Bearer {ALPHA}"}])
    def test_a_request_without_a_verified_token_is_refused_where_tokens_are_required(
        self, headers: dict[str, str]
    ) -> None:
        """Should one ever get past the gate, it is not served as a trusted caller."""
        with pytest.raises(MCPError, match=r"^this server requires a bearer token$") as raised:
            identify_http_caller(request_context(headers), token_required=True)
        assert raised.value.code == types.INVALID_REQUEST


A, B = Principal("a"), Principal("b")


class TestSessionTable:
    """The gate's view of each principal's open sessions (`SessionTable`)."""

    @pytest.mark.parametrize(
        ("limit", "idle", "message"),
        [
            (0, 1.0, r"^max_sessions_per_token must be at least 1, got 0$"),
            (1, 0.0, r"^session_idle_timeout must be positive, got 0.0$"),
            (1, float("nan"), r"^session_idle_timeout must be positive, got nan$"),
        ],
    )
    def test_nonsense_settings_are_refused(self, limit: int, idle: float, message: str) -> None:
        """The error names the setting and the value."""
        with pytest.raises(ValueError, match=message):
            SessionTable(limit, idle)

    async def test_places_are_held_up_to_the_limit_per_principal(self) -> None:
        """Requests being served that may open a session hold places; a freed one is reusable."""
        table = SessionTable(2, 600.0)
        assert [table.reserve(A) is None for _ in range(3)] == [True, True, False]
        assert table.reserve(B) is None  # another principal has its own places
        table.unreserve(A)  # that request opened nothing
        assert table.held(A) == 1
        assert table.reserve(A) is None
        assert table.reserve(A) is not None

    async def test_an_opened_session_holds_its_place_until_deleted(self) -> None:
        """Once its opening request is over the session alone holds the place."""
        table = SessionTable(1, 600.0)
        open_session(table, "s1", A)
        assert table.held(A) == 1
        assert table.reserve(A) is not None
        assert table.enter("s1", A, "/mcp") is not None
        table.leave("s1", status=200, deleted=True)
        assert table.held(A) == 0
        assert table.reserve(A) is None

    @pytest.mark.parametrize("status", [None, 400, 403, 405, 500])
    async def test_a_delete_that_did_not_succeed_keeps_the_session(
        self, status: int | None
    ) -> None:
        """A DELETE refused, failed, or whose client left before the answer, ends nothing."""
        table = SessionTable(1, 600.0)
        open_session(table, "s1", A)
        table.enter("s1", A, "/mcp")
        table.leave("s1", status=status, deleted=True)
        assert table.held(A) == 1

    @pytest.mark.parametrize("deleted", [False, True], ids=["GET", "DELETE"])
    async def test_a_404_for_the_session_ends_nothing(self, deleted: bool) -> None:
        """A 404 may come from the event store for a live session: only DELETE and idling end it."""
        table = SessionTable(1, 600.0)
        open_session(table, "s1", A)
        table.enter("s1", A, "/mcp")
        table.leave("s1", status=404, deleted=deleted)
        assert table.held(A) == 1

    async def test_only_its_principal_at_its_path_reaches_a_session(self) -> None:
        """Another principal, another path or no id: not this session, so nothing it can free."""
        table = SessionTable(1, 600.0)
        open_session(table, "s1", A)
        assert table.enter("s1", B, "/mcp") is None
        assert table.enter("s1", A, "/elsewhere") is None
        assert table.enter(None, A, "/mcp") is None
        assert table.enter("s2", A, "/mcp") is None
        assert table.version("s1", A) == VERSION
        assert table.version("s1", B) is None
        table.leave("unknown", status=404, deleted=True)  # not tracked: ignored
        assert table.held(A) == 1

    async def test_an_idle_session_expires_after_the_timeout(
        self, mock_clock: trio.testing.MockClock
    ) -> None:
        """Idle time counts from the end of the last request; at the timeout the place is free."""
        table = SessionTable(1, 600.0)
        open_session(table, "s1", A)
        mock_clock.jump(599.9)
        assert table.held(A) == 1
        mock_clock.jump(0.1)
        assert table.held(A) == 0
        assert table.version("s1", A) is None

    async def test_a_session_with_a_request_in_flight_never_expires(
        self, mock_clock: trio.testing.MockClock
    ) -> None:
        """A long request (an open GET stream) keeps its session; the clock restarts after it."""
        table = SessionTable(1, 600.0)
        open_session(table, "s1", A)
        assert table.enter("s1", A, "/mcp") is not None
        mock_clock.jump(10_000)
        assert table.held(A) == 1
        table.leave("s1", status=200, deleted=False)
        mock_clock.jump(599)
        assert table.held(A) == 1
        mock_clock.jump(1)
        assert table.held(A) == 0

    async def test_a_session_is_not_counted_twice_while_its_opening_request_ends(self) -> None:
        """Between the response naming the session and the request's end, it is one session."""
        table = SessionTable(2, 600.0)
        assert table.reserve(A) is None
        table.opened("s1", A, VERSION, "/mcp")  # the response has started, not yet ended
        assert table.held(A) == 1


def open_session(table: SessionTable, session_id: str, principal: Principal) -> None:
    """What the gate does for a request that opens `session_id`, from start to end."""
    assert table.reserve(principal) is None
    table.opened(session_id, principal, VERSION, "/mcp")  # the place becomes the session's
    table.leave(session_id, status=200, deleted=False)


class TestRefusalLog:
    """`RefusalLog`: a line at once, then a count per kind at most every interval."""

    def lines(self, caplog: pytest.LogCaptureFixture) -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "actors.serve"]

    async def test_a_flood_of_one_kind_is_summarised(
        self, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The first refusal is logged, the next ones counted onto the next line after 10 s."""
        caplog.set_level(logging.WARNING, logger="actors.serve")
        log = RefusalLog(10.0)
        log.refused("a request from a foreign origin", "http://evil.example")
        for _ in range(5):
            log.refused("a request from a foreign origin", "http://other.example")
        assert self.lines(caplog) == [
            "http: refused a request from a foreign origin: 'http://evil.example'"
        ]
        mock_clock.jump(10.0)
        log.refused("a request from a foreign origin", "http://third.example")
        assert self.lines(caplog)[1:] == [
            "http: refused a request from a foreign origin: 'http://third.example' "
            "(and 5 more since the last such line)"
        ]
        assert all(r.levelno == logging.WARNING for r in caplog.records)

    async def test_kinds_are_counted_apart_and_flushed_at_the_end(
        self, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        """One kind's flood does not silence another; `flush` reports what was only counted."""
        caplog.set_level(logging.WARNING, logger="actors.serve")
        log = RefusalLog(10.0)
        for _ in range(3):
            log.refused("a request without a valid bearer token")
        log.refused("an oversized body")
        mock_clock.jump(1.0)
        log.flush()
        log.flush()  # nothing more to say
        assert self.lines(caplog) == [
            "http: refused a request without a valid bearer token",
            "http: refused an oversized body",
            "http: refused a request without a valid bearer token: 2 more since the last such line",
        ]


# ---- the app, in process ---------------------------------------------------------------------


@asynccontextmanager
async def serving(
    tokens: Mapping[str, str | None] = TOKENS, **settings: Any
) -> AsyncIterator[InProcessHttp]:
    """`http_app` on a loopback bind with `tokens` and other ServeOptions `settings`."""
    settings.setdefault("http", ("127.0.0.1", 8765))
    async with in_process_http(ServeOptions(tokens=tokens, **settings)) as server:
        yield server


def refused_by(pattern: str) -> pytest.RaisesGroup[MCPError]:
    """What the SDK client raises when the server refuses its handshake, `pattern` in the text."""
    # Raised inside the SDK client's task groups.
    return pytest.RaisesGroup(pytest.RaisesExc(MCPError, match=pattern), flatten_subgroups=True)


def sse_message(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message in a response's body: JSON, or the last event of an SSE stream."""
    if response.headers.get("content-type", "").startswith("application/json"):
        message: dict[str, Any] = response.json()
        return message
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    assert data, response.text
    message = json.loads(data[-1])
    return message


class RawSession:
    """A session opened and driven by hand, for requests the SDK client cannot be made to send."""

    def __init__(self, http: httpx2.AsyncClient, session_id: str, token: str | None) -> None:
        self.http = http
        self.session_id = session_id
        self.token = token

    @classmethod
    async def open(cls, http: httpx2.AsyncClient, token: str | None) -> RawSession:
        """initialize, then notifications/initialized."""
        opened = await http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **bearer(token)})
        assert opened.status_code == 200, opened.text
        session = cls(http, opened.headers[MCP_SESSION_ID_HEADER], token)
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await session.post(initialized)).status_code == 202
        return session

    def headers(self) -> dict[str, str]:
        return {
            **ACCEPT,
            **bearer(self.token),
            MCP_SESSION_ID_HEADER: self.session_id,
            "MCP-Protocol-Version": VERSION,
        }

    async def post(
        self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> httpx2.Response:
        """POST `message` in this session; `headers` replace or add to the session's own."""
        sent = {**self.headers(), **(headers or {})}
        return await self.http.post("/mcp", content=json.dumps(message), headers=sent)


CREATE = tools_call("planning__create_goal", {"goal": "g", "__sessionId": "alpha/s"}, request_id=7)


class TestNothingRefusedReachesTheRuntime:
    """One valid call, tampered with in each way the gate or the tenant rule refuses."""

    @pytest.mark.parametrize(
        ("tamper", "status"),
        [
            ({"headers": {"Origin": "http://evil.example"}}, 403),
            ({"headers": {"Origin": "null"}}, 403),
            ({"headers": {"Authorization": ""}}, 401),
            ({"headers": {"Authorization": f"Bearer {ALPHA[:-1]}"}}, 401),
            ({"headers": {"Authorization": f"Bearer {BETA}"}}, 404),  # alpha's session
            ({"headers": {"Authorization": f"Bearer {GATEWAY}"}}, 404),  # a gateway's too
            ({"headers": {MCP_SESSION_ID_HEADER: "0" * 32}}, 404),
            ({"headers": {"Host": "evil.example:8765"}}, 421),
            ({"goal": "x" * 5000}, 413),
            ({"session": "beta/s"}, 200),  # answered with an error result
            ({"session": "alphabet"}, 200),
        ],
        ids=[
            "foreign-origin",
            "null-origin",
            "no-token",
            "wrong-token",
            "another-tenants-token",
            "gateway-token-on-alphas-session",
            "unknown-session",
            "rebound-host",
            "oversized",
            "another-tenants-session",
            "tenant-prefix",
        ],
    )
    async def test_a_refused_call_never_reaches_the_runtime(
        self, tamper: dict[str, Any], status: int
    ) -> None:
        """Whatever the refusal, the runtime counts no call and starts no actor; the same call
        untampered goes through (so the count would show a leak)."""
        async with serving(max_request_bytes=4096) as server, server.http() as http:
            alpha = await RawSession.open(http, ALPHA)
            arguments = {
                "goal": tamper.get("goal", "g"),
                "__sessionId": tamper.get("session", "alpha/s"),
            }
            refused = await alpha.post(
                tools_call("planning__create_goal", arguments, request_id=7), tamper.get("headers")
            )
            statistics = server.runtime.statistics()
            control = await alpha.post(CREATE)
            after = server.runtime.statistics()
        assert refused.status_code == status, refused.text
        if status == 200:
            result = sse_message(refused)["result"]
            assert result["isError"] is True
            assert "is outside tenant 'alpha' of this token" in result["content"][0]["text"]
        assert statistics.calls == 0
        assert statistics.started == 0
        assert control.status_code == 200
        assert sse_message(control)["result"]["isError"] is False
        assert after.calls == 1


class TestOrigin:
    @pytest.mark.parametrize(
        "origin",
        [
            "http://evil.example",
            "http://localhost.evil.example:80",
            "http://127.0.0.1@evil.example",
            "http://user:pw@localhost",
            "null",
            "https://app.example/",
        ],
    )
    async def test_a_foreign_origin_gets_403_even_with_a_valid_token(self, origin: str) -> None:
        """The message names the origin and the option; no session is opened."""
        settings = {"max_sessions_per_token": 1, "allow_origins": ("https://app.example",)}
        async with serving(**settings) as server, server.http(ALPHA, ACCEPT) as http:
            refused = await http.post("/mcp", json=INITIALIZE, headers={"Origin": origin})
            opened = await http.post("/mcp", json=INITIALIZE)  # the one place is still free
        assert refused.status_code == 403
        assert refused.json()["error"]["message"] == (
            f"origin {origin!r} is not allowed; loopback origins are, "
            "and the operator can allow others with --allow-origin"
        )
        assert opened.status_code == 200

    async def test_the_sdk_client_gets_the_403_as_an_error(self) -> None:
        """What a browser-hosted client sees: the refusal's text."""
        async with serving() as server:
            with refused_by(r"origin 'http://evil\.example' is not allowed"):
                async with server.session(ALPHA, headers={"Origin": "http://evil.example"}):
                    pass
            assert server.calls() == 0

    @pytest.mark.parametrize(
        "origin",
        ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443", "https://app.example"],
    )
    async def test_loopback_and_allowed_origins_get_a_working_session(self, origin: str) -> None:
        """The gate and the SDK's own Origin check (on a loopback bind) agree: calls go through."""
        async with serving(allow_origins=("https://app.example",)) as server:
            async with server.session(ALPHA, headers={"Origin": origin}) as alpha:
                result = await alpha.call_tool(
                    "planning__create_goal", {"goal": "g", "__sessionId": "alpha"}
                )
        assert not result.is_error
        assert server.calls() == 1


class TestHost:
    """DNS rebinding: on a loopback bind the SDK answers only to loopback Host names."""

    @pytest.mark.parametrize(
        "host", ["evil.example", "evil.example:8765", "localhost.evil.example", "127.0.0.1.nip.io"]
    )
    async def test_a_foreign_host_is_refused_on_a_loopback_bind(self, host: str) -> None:
        """421, no session kept, no call run; the principal's place is free again."""
        async with serving(max_sessions_per_token=1) as server:
            async with server.http(ALPHA, ACCEPT) as http:
                refused = [
                    await http.post("/mcp", json=INITIALIZE, headers={"Host": host})
                    for _ in range(3)
                ]
                opened = await http.post("/mcp", json=INITIALIZE)
        assert [response.status_code for response in refused] == [421] * 3
        assert opened.status_code == 200
        assert server.calls() == 0

    @pytest.mark.parametrize("host", ["localhost:8765", "127.0.0.1", "127.0.0.1:1", "[::1]:9"])
    async def test_loopback_hosts_are_accepted_with_any_port(self, host: str) -> None:
        """Whatever port a proxy or a client writes, a loopback name is this server."""
        async with serving() as server, server.http(ALPHA, ACCEPT) as http:
            opened = await http.post("/mcp", json=INITIALIZE, headers={"Host": host})
        assert opened.status_code == 200

    async def test_a_public_bind_does_not_check_the_host(self) -> None:
        """Its names are not known in advance: tokens (and Origin) are what guards it."""
        async with serving(http=("0.0.0.0", 8765)) as server:
            async with server.http(ALPHA, ACCEPT) as http:
                opened = await http.post("/mcp", json=INITIALIZE, headers={"Host": "mcp.example"})
            async with server.http(None, ACCEPT) as http:
                anonymous = await http.post("/mcp", json=INITIALIZE, headers={"Host": "x.example"})
        assert opened.status_code == 200
        assert anonymous.status_code == 401


class TestTokens:
    @pytest.mark.parametrize(
        "authorization",
        [
            None,
            "",
            "Bearer",
            "Bearer ",
            "Bearer wrong-token-00000",
            f"Bearer {ALPHA[:-1]}",
            f"Bearer {ALPHA}x",
            f"Bearer  {ALPHA}",
            f"Bearer {ALPHA} ",
            f"Basic {ALPHA}",
            f"Token {ALPHA}",
            ALPHA,
        ],
    )
    async def test_a_missing_or_wrong_bearer_token_gets_401(
        self, authorization: str | None
    ) -> None:
        """401 with WWW-Authenticate and a JSON-RPC error saying what to send; nothing opened."""
        headers = {} if authorization is None else {"Authorization": authorization}
        async with serving(max_sessions_per_token=1) as server:
            async with server.http(None, ACCEPT) as http:
                refused = await http.post("/mcp", json=INITIALIZE, headers=headers)
            async with server.http(ALPHA, ACCEPT) as http:
                opened = await http.post("/mcp", json=INITIALIZE)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="mcp"'
        assert refused.json()["error"] == {
            "code": types.INVALID_REQUEST,
            "message": "a valid bearer token is required: send 'Authorization: Bearer <token>'",
        }
        assert opened.status_code == 200  # no place was taken by the refused ones

    @pytest.mark.parametrize("method", ["GET", "DELETE"])
    async def test_every_method_needs_the_token(self, method: str) -> None:
        """Without it a session cannot be listened to or ended, even by its id."""
        async with serving() as server, server.http() as http:
            alpha = await RawSession.open(http, ALPHA)
            headers = {k: v for k, v in alpha.headers().items() if k != "Authorization"}
            refused = await http.request(method, "/mcp", headers=headers)
            still = await alpha.post({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert refused.status_code == 401
        assert still.status_code == 200

    async def test_the_sdk_client_with_a_wrong_token_gets_the_message(self) -> None:
        """Raised from the handshake, with the text of the 401's body."""
        async with serving() as server:
            with refused_by(r"bearer token is required"):
                async with server.session("not-a-token-at-all"):
                    pass

    async def test_a_session_answers_only_the_token_that_opened_it(self) -> None:
        """Another tenant's token, or a gateway's, naming alpha's session id: 404, as if unknown."""
        async with serving() as server, server.http() as http:
            alpha = await RawSession.open(http, ALPHA)
            ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
            others = [
                await alpha.post(ping, {"Authorization": f"Bearer {token}"})
                for token in (BETA, GATEWAY)
            ]
            deleted = await http.delete(
                "/mcp", headers={**alpha.headers(), "Authorization": f"Bearer {BETA}"}
            )
            still = await alpha.post(ping)
        assert [response.status_code for response in others] == [404, 404]
        assert deleted.status_code == 404
        assert still.status_code == 200


class TestBodySize:
    async def test_a_declared_oversized_body_gets_413(self) -> None:
        """Refused from its Content-Length, before it is read; the message names the option."""
        async with serving(max_request_bytes=1000) as server:
            async with server.http(ALPHA, ACCEPT) as http:
                refused = await http.post("/mcp", content=b" " * 1001)
        assert refused.status_code == 413
        assert refused.json()["error"]["message"] == (
            "the request body is 1001 bytes; this server accepts at most 1000 bytes "
            "(--max-request-bytes)"
        )

    @pytest.mark.parametrize("declared", [None, "10", "abc", "-5"])
    async def test_an_oversized_body_is_cut_whatever_its_declared_length(
        self, declared: str | None
    ) -> None:
        """Chunked (no length), or a length that lies or is not a number: read up to the limit."""

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(50):
                yield b" " * 100

        headers = {} if declared is None else {"Content-Length": declared}
        async with serving(max_request_bytes=1000) as server:
            async with server.http(ALPHA, ACCEPT) as http:
                refused = await http.post("/mcp", content=chunks(), headers=headers)
        assert refused.status_code == 413
        assert refused.json()["error"]["message"] == (
            "the request body is larger; this server accepts at most 1000 bytes "
            "(--max-request-bytes)"
        )

    async def test_a_body_of_exactly_the_limit_is_accepted(self) -> None:
        """The limit is inclusive; one byte more is refused."""
        body = json.dumps(INITIALIZE).encode()
        async with serving(max_request_bytes=len(body)) as server:
            async with server.http(ALPHA, ACCEPT) as http:
                exact = await http.post("/mcp", content=body)
                over = await http.post("/mcp", content=body + b" ")
        assert exact.status_code == 200
        assert over.status_code == 413

    async def test_the_sdk_client_gets_the_413_and_the_session_goes_on(self) -> None:
        """Surfaced as an error naming the limit; the next call is served; only it ran."""
        async with serving(max_request_bytes=8192) as server, server.session(ALPHA) as alpha:
            with pytest.raises(MCPError) as raised:
                await alpha.call_tool("planning__create_goal", {"goal": "x" * 20_000})
            after = await alpha.call_tool("planning__create_goal", {"goal": "small"})
        assert "at most 8192 bytes" in raised.value.message
        assert not after.is_error
        assert server.calls() == 1


class TestSessionsPerToken:
    async def test_the_sdk_client_is_refused_past_the_limit_until_a_session_ends(self) -> None:
        """alpha's third session gets the 429's text; ending one (DELETE) frees its place."""
        async with serving(max_sessions_per_token=2) as server:
            async with server.session(ALPHA) as first:
                async with server.session(ALPHA):
                    with refused_by(r"^this token holds 2 open sessions already"):
                        async with server.session(ALPHA):
                            pass
                    async with server.session(BETA) as beta:  # another token is unaffected
                        await beta.call_tool("planning__list_goals", {})
                async with server.session(ALPHA) as again:  # the second one was deleted
                    await again.call_tool("planning__list_goals", {})
                await first.call_tool("planning__list_goals", {})
        assert server.calls() == 3

    async def test_anonymous_clients_share_one_limit(self) -> None:
        """On a loopback server without tokens, every client counts against the same places."""
        async with serving({}, max_sessions_per_token=1) as server:
            async with server.session():
                with refused_by(r"^anonymous clients together hold 1 open sessions already"):
                    async with server.session():
                        pass


class TestTenants:
    @ERAS
    async def test_a_tenant_token_reaches_only_its_own_sessions(
        self, era: Era, caplog: pytest.LogCaptureFixture
    ) -> None:
        """alpha works in alpha and alpha/…; any other session is an error result naming the
        tenant, logged as a warning, and never reaches the runtime."""
        caplog.set_level(logging.INFO, logger="actors.mcp")
        async with serving() as server:
            async with server.session(BETA, era) as beta:
                await beta.call_tool(
                    "planning__create_goal", {"goal": "beta's secret", "__sessionId": "beta/s"}
                )
            async with server.session(ALPHA, era) as alpha:
                mine = await alpha.call_tool(
                    "planning__create_goal", {"goal": "alpha's", "__sessionId": "alpha/s"}
                )
                own = await alpha.call_tool("planning__list_goals", {"__sessionId": "alpha"})
                before = server.calls()
                theirs = [
                    await alpha.call_tool("planning__list_goals", {"__sessionId": session})
                    for session in ("beta/s", "beta", "alphabet", "Alpha/s", " alpha", "/alpha")
                ]
                by_meta = await alpha.call_tool(
                    "planning__list_goals", {}, meta={"sessionId": "beta/s"}
                )
                refused_calls = server.calls() - before
        assert not mine.is_error
        assert not own.is_error
        assert service_of(mine)["serverName"] == "planning"  # item _meta survives HTTP
        for result in [*theirs, by_meta]:
            assert result.is_error
            assert "beta's secret" not in texts(result)
        assert texts(theirs[0]) == (
            "session 'beta/s' is outside tenant 'alpha' of this token; "
            "name a session 'alpha' or 'alpha/…'"
        )
        assert refused_calls == 0
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 7
        assert all("caller=token-1 tenant='alpha' outcome=outside_tenant" in w for w in warnings)
        assert "session='beta/s' assistant=- thread=-" in warnings[0]  # what it reached for

    async def test_a_call_naming_no_session_stays_in_the_tenant(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A tenant token lands in alpha/<Mcp-Session-Id>, per connection, or in alpha/default
        under the 2026 era, which has no transport session."""
        caplog.set_level(logging.INFO, logger="actors.mcp")
        async with serving() as server:
            async with server.session(ALPHA) as first:
                await first.call_tool("planning__create_goal", {"goal": "first connection"})
                again = texts(await first.call_tool("planning__list_goals", {}))
            async with server.session(ALPHA) as second:
                other = texts(await second.call_tool("planning__list_goals", {}))
            async with server.session(ALPHA, "modern") as modern:
                await modern.call_tool("planning__create_goal", {"goal": "modern"})
            async with server.session(GATEWAY) as gateway:
                bucket = texts(
                    await gateway.call_tool(
                        "planning__list_goals", {"__sessionId": "alpha/default"}
                    )
                )
        log = "\n".join(r.getMessage() for r in caplog.records)
        assert "first connection" in again
        assert "first connection" not in other
        assert "tools/call planning__create_goal session='alpha/" in log
        assert "modern" in bucket

    async def test_a_gateway_token_may_address_any_session(self) -> None:
        """A token bound to no tenant is a trusted gateway; every caller sees the same tools."""
        async with serving() as server:
            async with server.session(ALPHA) as alpha:
                await alpha.call_tool(
                    "planning__create_goal", {"goal": "g", "__sessionId": "alpha"}
                )
                alpha_tools = (await alpha.list_tools()).tools
            async with server.session(GATEWAY) as gateway:
                seen = texts(
                    await gateway.call_tool("planning__list_goals", {"__sessionId": "alpha"})
                )
                await gateway.call_tool(
                    "planning__create_goal", {"goal": "h", "__sessionId": "beta/x"}
                )
                gateway_tools = (await gateway.list_tools()).tools
            async with server.session(BETA) as beta:
                beta_sees = texts(
                    await beta.call_tool("planning__list_goals", {"__sessionId": "beta/x"})
                )
        assert "g1: g" in seen
        assert "g1: h" in beta_sees
        assert alpha_tools == gateway_tools


class TestAnonymous:
    """A loopback server without tokens: every client is trusted, none shares a default."""

    async def test_each_connection_defaults_to_its_own_session(self) -> None:
        """Mcp-Session-Id is the default session of an older-era client that names none."""
        async with serving({}) as server:
            async with server.session() as first:
                await first.call_tool("planning__create_goal", {"goal": "mine"})
                own = texts(await first.call_tool("planning__list_goals", {}))
                named = await first.call_tool(
                    "planning__create_goal", {"goal": "x"}, meta={"sessionId": "any/where"}
                )
            async with server.session() as second:
                other = texts(await second.call_tool("planning__list_goals", {}))
                there = texts(
                    await second.call_tool("planning__list_goals", {"__sessionId": "any/where"})
                )
        assert "mine" in own
        assert "mine" not in other
        assert not named.is_error
        assert "x" in there  # bound to no tenant: any session

    async def test_a_2026_era_client_must_name_its_session(self) -> None:
        """Without Mcp-Session-Id its default would be shared by every such client: refused."""
        async with serving({}) as server, server.session(era="modern") as client:
            refused = await client.call_tool("planning__create_goal", {"goal": "mine"})
            calls = server.calls()
            named = await client.call_tool(
                "planning__create_goal", {"goal": "m"}, meta={"sessionId": "s1"}
            )
        assert refused.is_error
        assert texts(refused).startswith(
            "this call names no session, and without an Mcp-Session-Id"
        )
        assert calls == 0
        assert not named.is_error

    async def test_one_client_uses_many_sessions_concurrently(self) -> None:
        """Twenty sessions over one connection at once; each sees just its own goals, in order."""
        seen: dict[str, str] = {}
        async with serving({}) as server, server.session() as client:

            async def work(session: str) -> None:
                for number in range(3):
                    await client.call_tool(
                        "planning__create_goal",
                        {"goal": f"{session}-{number}"},
                        meta={"sessionId": session},
                    )
                listed = await client.call_tool("planning__list_goals", {"__sessionId": session})
                seen[session] = texts(listed)

            async with trio.open_nursery() as nursery:
                for index in range(20):
                    nursery.start_soon(work, f"s{index}")
        assert len(seen) == 20
        for session, text in seen.items():
            lines = [line for line in text.splitlines() if line.startswith("- ")]
            assert [line.split(": ", 1)[1] for line in lines] == [
                f"{session}-{n}" for n in range(3)
            ]

    async def test_an_unknown_tool_is_a_jsonrpc_error(self) -> None:
        """-32602 over HTTP too, and nothing runs."""
        async with serving({}) as server, server.session() as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("nothing__here", {"__sessionId": "s"})
            after = await client.call_tool("planning__list_goals", {"__sessionId": "s"})
        assert raised.value.code == types.INVALID_PARAMS
        assert "unknown tool 'nothing__here'" in raised.value.message
        assert not after.is_error
        assert server.calls() == 1
