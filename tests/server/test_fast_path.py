"""The lean HTTP path answers what it takes exactly as the SDK would, and takes the right requests.

Each request is POSTed to ``serve --http``'s app and to the same adapter behind
the SDK's own transport (`benchmarks._sdk_transport_peer`, the peer the HTTP
benchmarks compare against), each with a runtime of its own that has seen the
same requests in the same order: what the fast path answers must have the
status, the content type and the JSON body the SDK gives. A spy on
`FastPath.answer` tells which requests the fast path answered itself: the
common ones (a call of a plain tool, ``tools/list``) must be, the rest must
be left to the SDK (a tool that reports progress, a malformed envelope, a
2025-era request, …).
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final

import attrs
import httpx2
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from mcp.server.streamable_http import check_accept_headers
from starlette.datastructures import Headers
from starlette.requests import Request

from actors import Log, Progress, ToolModule, open_runtime
from actors.server import ConfigurationError, ServeOptions
from actors.server._options import build_modules
from actors.server.http._fast_path import FastPath, accepts_both
from actors.server.http._fast_path_sessions import SessionCalls
from actors.server.mcp._plain import dumped
from benchmarks._sdk_transport_peer import sdk_transport_app

from .._mcp_helpers import Era, asgi_lifespan, in_process_http, initialize_request, texts

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

VERSION: Final = "2026-07-28"
_ENVELOPE: Final = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "lean-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@attrs.define
class _Tally:
    count: int = 0


lean_test: ToolModule[_Tally] = ToolModule("lean", lambda _context: _Tally())


@lean_test.tool
def bump(state: _Tally, by: int = 1) -> str:
    """Add `by` to this session's tally and say what it is now."""
    state.count += by
    return f"tally {state.count}"


@attrs.frozen
class Echoed:
    """What `echo` answers: the text, and its length."""

    text: str
    length: int


@lean_test.tool
def echo(state: _Tally, text: str) -> Echoed:
    """Return `text` with its length (a structured result)."""
    return Echoed(text, len(text))


@lean_test.tool
def fail(state: _Tally) -> str:
    """Fail, as a tool does when it meets a problem."""
    msg = "this tool always fails"
    raise ValueError(msg)


@lean_test.tool
def steps(state: _Tally, progress: Progress, log: Log) -> str:
    """Report progress and log: a tool the fast path leaves to the SDK."""
    progress.report(1, total=1)
    log.info("one step")
    return "stepped"


def _headers(method: str, name: str | None = None, **more: str) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Mcp-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return {**headers, **more}


def _call(name: str, arguments: Any = None, *, request_id: Any = 1, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": {**_ENVELOPE, **meta}}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


_LIST: Final = {
    "jsonrpc": "2.0",
    "id": "list",
    "method": "tools/list",
    "params": {"_meta": _ENVELOPE},
}


@attrs.frozen
class Case:
    """One request, and whether the fast path should answer it itself."""

    label: str
    body: Any
    headers: dict[str, str]
    lean: bool


CASES: Final = (
    Case("tools/list", _LIST, _headers("tools/list"), lean=True),
    Case("a call", _call("lean__bump", sessionId="s1"), _headers("tools/call", "lean__bump"), True),
    Case(
        "a call again, same session",
        _call("lean__bump", {"by": 2}, request_id="two", sessionId="s1"),
        _headers("tools/call", "lean__bump"),
        lean=True,
    ),
    Case(
        "another session",
        _call("lean__bump", request_id=3, sessionId="s2"),
        _headers("tools/call", "lean__bump"),
        lean=True,
    ),
    Case(
        "a structured result",
        _call("lean__echo", {"text": "héllo"}, sessionId="s1"),
        _headers("tools/call", "lean__echo"),
        lean=True,
    ),
    Case(
        "a tool error",
        _call("lean__fail", sessionId="s1"),
        _headers("tools/call", "lean__fail"),
        lean=True,
    ),
    Case(
        "arguments that fail the schema",
        _call("lean__bump", {"by": "many"}, sessionId="s1"),
        _headers("tools/call", "lean__bump"),
        lean=True,
    ),
    Case(
        "a context field of the wrong type",
        _call("lean__bump", sessionId=7),
        _headers("tools/call", "lean__bump"),
        lean=True,
    ),
    Case(
        "a progress token for a plain tool",
        _call("lean__bump", sessionId="s1", progressToken="p1"),
        _headers("tools/call", "lean__bump"),
        lean=True,
    ),
    Case(
        "no session: the caller's default",
        _call("lean__bump"),
        _headers("tools/call", "lean__bump"),
        lean=True,
    ),
    Case(
        "a tool that reports and logs",
        _call("lean__steps", sessionId="s1"),
        _headers("tools/call", "lean__steps"),
        lean=False,
    ),
    Case(
        "an unknown tool",
        _call("lean__nothing", sessionId="s1"),
        _headers("tools/call", "lean__nothing"),
        lean=False,
    ),
    Case(
        "Mcp-Name disagrees with the body",
        _call("lean__bump", sessionId="s1"),
        _headers("tools/call", "lean__echo"),
        lean=False,
    ),
    Case(
        "no envelope in _meta",
        {**_call("lean__bump"), "params": {"name": "lean__bump", "_meta": {"sessionId": "s1"}}},
        _headers("tools/call", "lean__bump"),
        lean=False,
    ),
    Case(
        "JSON only in Accept",
        _call("lean__bump", sessionId="s1"),
        _headers("tools/call", "lean__bump", Accept="application/json"),
        lean=False,
    ),
    Case(
        "arguments that are a list",
        _call("lean__bump", [1], sessionId="s1"),
        _headers("tools/call", "lean__bump"),
        lean=False,
    ),
    Case(
        "a member JSON-RPC does not have",
        {**_call("lean__bump", sessionId="s1"), "extra": True},
        _headers("tools/call", "lean__bump"),
        lean=False,
    ),
    Case(
        "an id that is a boolean",
        _call("lean__bump", request_id=True, sessionId="s1"),
        _headers("tools/call", "lean__bump"),
        lean=False,
    ),
    Case(
        "requestState: a parked call's retry",
        {
            **_call("lean__bump"),
            "params": {**_call("lean__bump")["params"], "requestState": "x"},
        },
        _headers("tools/call", "lean__bump"),
        lean=False,
    ),
    Case(
        "an Mcp-Param header",
        _call("lean__bump", {"by": 1}, sessionId="s1"),
        _headers("tools/call", "lean__bump", **{"Mcp-Param-By": "1"}),
        lean=False,
    ),
    Case("ping", {**_LIST, "method": "ping"}, _headers("ping"), lean=False),
    Case(
        "a 2025-era version header",
        _call("lean__bump", sessionId="s1"),
        _headers("tools/call", "lean__bump", **{"Mcp-Protocol-Version": "2025-11-25"}),
        lean=False,
    ),
)


@pytest.fixture
async def apps() -> AsyncIterator[tuple[httpx2.AsyncClient, httpx2.AsyncClient]]:
    """A client of ``serve --http``'s app and one of the same adapter behind the SDK's own
    transport (the benchmarks' peer), each over its own runtime."""
    options = ServeOptions(modules=(lean_test,), http=("127.0.0.1", 0))
    async with AsyncExitStack() as stack:
        served = await stack.enter_async_context(in_process_http(options))
        runtime = await stack.enter_async_context(
            open_runtime(build_modules(options), options.runtime)
        )
        sdk_only = sdk_transport_app(runtime, options)
        await stack.enter_async_context(asgi_lifespan(sdk_only))
        clients = []
        for app in (served.app, sdk_only):
            transport = httpx2.ASGITransport(app=app)
            client = httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1")
            clients.append(await stack.enter_async_context(client))
        yield clients[0], clients[1]


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the fast path answered each request it was asked, in order (both eras' spies)."""
    seen: list[bool] = []
    original = FastPath.answer

    async def spy(self: FastPath, *args: Any) -> Any:
        response = await original(self, *args)
        seen.append(response is not None)
        return response

    in_session = SessionCalls.answer

    def session_spy(self: SessionCalls, *args: Any) -> Any:
        response = in_session(self, *args)
        seen.append(response is not None)
        return response

    monkeypatch.setattr(FastPath, "answer", spy)
    monkeypatch.setattr(SessionCalls, "answer", session_spy)
    return seen


def _seen(response: httpx2.Response) -> tuple[int, str, Any]:
    kind = response.headers.get("content-type", "")
    body = json.loads(response.content) if kind.startswith("application/json") else response.text
    return response.status_code, kind, body


async def test_the_lean_path_answers_as_the_sdk_does(
    apps: tuple[httpx2.AsyncClient, httpx2.AsyncClient], answered: list[bool]
) -> None:
    """Each case the fast path answers: the status, type and body the SDK's transport gives;
    lean where it should be. (What it leaves goes on to the gate and the SDK, whose answer
    the gate may give in its own words: the SDK alone is no reference for those.)"""
    lean, sdk = apps
    for case in CASES:
        answered.clear()
        body = json.dumps(case.body).encode()
        mine = await lean.post("/mcp", content=body, headers=case.headers)
        theirs = await sdk.post("/mcp", content=body, headers=case.headers)
        assert answered == [case.lean], case.label
        if case.lean:
            assert _seen(mine) == _seen(theirs), case.label


async def test_a_request_elsewhere_is_the_sdks_app_to_answer(
    apps: tuple[httpx2.AsyncClient, httpx2.AsyncClient], answered: list[bool]
) -> None:
    """A 2026-era call POSTed to another path: the app's 404 either way, never answered lean."""
    body = json.dumps(_call("lean__bump", sessionId="s1")).encode()
    headers = _headers("tools/call", "lean__bump")
    lean, sdk = apps
    mine = await lean.post("/elsewhere", content=body, headers=headers)
    theirs = await sdk.post("/elsewhere", content=body, headers=headers)
    assert mine.status_code == theirs.status_code == 404
    assert mine.content == theirs.content
    assert answered == []


# ---- the 2025 era: requests in a session the handshake opened ---------------------------

HANDSHAKE: Final = "2025-11-25"


async def _open_session(http: httpx2.AsyncClient, **headers: str) -> str:
    """Initialize a 2025-era session over raw HTTP; its ``Mcp-Session-Id``."""
    opened = await http.post(
        "/mcp",
        json=initialize_request("lean-test", HANDSHAKE),
        headers={"Accept": "application/json, text/event-stream", **headers},
    )
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    sent = {"Mcp-Session-Id": session, "Mcp-Protocol-Version": HANDSHAKE, **headers}
    done = await http.post("/mcp", json=initialized, headers=_in_session(sent))
    assert done.status_code == 202, done.text
    return session


def _in_session(headers: dict[str, str]) -> dict[str, str]:
    return {"Accept": "application/json, text/event-stream", **headers}


def _message(response: httpx2.Response) -> Any:
    """The JSON-RPC message of a response: its JSON body, or its SSE stream's message."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return json.loads(response.content)
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(next(chunk for chunk in data if chunk))


def _legacy(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as a 2025-era client sends it: no 2026 envelope in its ``_meta``."""
    params = body.get("params", {})
    meta = {k: v for k, v in params.get("_meta", {}).items() if k not in _ENVELOPE}
    return {**body, "params": {**params, "_meta": meta}}


LEGACY_CASES: Final = (
    Case("tools/list", _legacy(_LIST), {}, lean=True),
    Case("a call", _legacy(_call("lean__bump", sessionId="s1")), {}, lean=True),
    Case("the session's own", _legacy(_call("lean__bump", request_id=2)), {}, lean=True),
    Case("a tool error", _legacy(_call("lean__fail", sessionId="s1")), {}, lean=True),
    Case("bad arguments", _legacy(_call("lean__bump", {"by": "x"})), {}, lean=True),
    Case("a tool that reports", _legacy(_call("lean__steps")), {}, lean=False),
    Case("an unknown tool", _legacy(_call("lean__none")), {}, lean=False),
    Case("the 2026 envelope", _call("lean__bump", sessionId="s1"), {}, lean=False),
    Case("arguments that are a list", _legacy(_call("lean__bump", [1])), {}, lean=False),
    Case(
        "a 2026 version header",
        _legacy(_call("lean__bump")),
        {"Mcp-Protocol-Version": VERSION},
        lean=False,
    ),
    Case(
        "JSON only in Accept",
        _legacy(_call("lean__bump")),
        {"Accept": "application/json"},
        lean=False,
    ),
)


async def test_in_a_session_the_lean_path_answers_the_message_the_sdk_would(
    apps: tuple[httpx2.AsyncClient, httpx2.AsyncClient], answered: list[bool]
) -> None:
    """The same JSON-RPC message and status in a 2025-era session, on a resumable stream."""
    lean, sdk = apps
    sessions = [await _open_session(client) for client in (lean, sdk)]
    for case in LEGACY_CASES:
        replies = []
        answered.clear()
        for client, session in zip((lean, sdk), sessions, strict=True):
            headers = {"Mcp-Session-Id": session, "Mcp-Protocol-Version": HANDSHAKE}
            sent = _in_session({**headers, **case.headers})
            replies.append(await client.post("/mcp", json=case.body, headers=sent))
        mine, theirs = replies
        assert mine.status_code == theirs.status_code, case.label
        assert _message(mine) == _message(theirs), case.label
        assert answered == [case.lean], case.label
        if case.lean:
            assert mine.headers["content-type"] == "text/event-stream"
            assert mine.headers["mcp-session-id"] == sessions[0]
            first = mine.text.split("\r\n\r\n")[0]  # the priming event: an id, retry, no data
            assert first.startswith("id: ")
            assert "retry: 1000" in first


async def test_a_session_the_lean_path_does_not_serve_is_the_sdks_to_refuse(
    answered: list[bool],
) -> None:
    """Another token's session, a made-up one, or one ended: never served here."""
    tokens = {"token-of-alpha-0123456789": None, "token-of-beta-01234567890": None}
    options = ServeOptions(modules=(lean_test,), http=("127.0.0.1", 0), tokens=tokens)
    alpha, beta = ({"Authorization": f"Bearer {token}"} for token in tokens)
    async with in_process_http(options) as served:
        transport = httpx2.ASGITransport(app=served.app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            session = await _open_session(http, **alpha)
            answered.clear()  # the notification that completed the handshake
            call = _legacy(_call("lean__bump"))
            headers = {"Mcp-Session-Id": session, "Mcp-Protocol-Version": HANDSHAKE}
            own = await http.post("/mcp", json=call, headers=_in_session({**headers, **alpha}))
            theirs = await http.post("/mcp", json=call, headers=_in_session({**headers, **beta}))
            made_up = {**headers, "Mcp-Session-Id": "0" * 32}
            unknown = await http.post("/mcp", json=call, headers=_in_session({**made_up, **alpha}))
            ended = await http.delete("/mcp", headers={**headers, **alpha})
            after = await http.post("/mcp", json=call, headers=_in_session({**headers, **alpha}))
    assert own.status_code == 200, own.text
    assert answered[0] is True
    assert [theirs.status_code, unknown.status_code] == [404, 404]
    assert ended.status_code == 200
    assert after.status_code == 404
    assert answered == [True]  # the others never reached it: the gate tracks no such session


async def test_lean_calls_keep_the_session_alive_and_it_still_ends_on_time(
    autojump_clock: trio.testing.MockClock, answered: list[bool]
) -> None:
    """Calls the SDK never sees hold off its idle timeout; once they stop, it runs out."""
    options = ServeOptions(modules=(lean_test,), http=("127.0.0.1", 0), session_idle_timeout=10)
    async with in_process_http(options) as served:
        transport = httpx2.ASGITransport(app=served.app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            session = await _open_session(http)
            answered.clear()  # the notification that completed the handshake
            call = _legacy(_call("lean__bump"))
            headers = _in_session({"Mcp-Session-Id": session, "Mcp-Protocol-Version": HANDSHAKE})
            kept = []
            for _ in range(4):  # 24 s in all, each gap within the 10 s timeout
                await trio.sleep(6)
                kept.append((await http.post("/mcp", json=call, headers=headers)).status_code)
            await trio.sleep(30)
            expired = await http.post("/mcp", json=call, headers=headers)
            live = served.runtime.statistics().live_actors
    assert kept == [200] * 4
    assert answered[:4] == [True] * 4
    assert expired.status_code == 404
    assert live == 0  # the connection's own session ended with it, though only lean calls used it


# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
@pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning")
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_sdk_client_is_served_by_the_lean_path(era: Era, answered: list[bool]) -> None:
    """The official client, used as the docs show: its calls and lists take the fast path."""
    options = ServeOptions(modules=(lean_test,), http=("127.0.0.1", 0))
    async with in_process_http(options) as served, served.session(era=era) as client:
        listed = await client.list_tools()
        first = await client.call_tool("lean__bump", {"by": 2}, meta={"sessionId": "s1"})
        second = await client.call_tool("lean__bump", {}, meta={"sessionId": "s1"})
    assert {tool.name for tool in listed.tools} >= {"lean__bump", "lean__echo"}
    assert texts(first) == "tally 2"
    assert texts(second) == "tally 3"
    assert answered.count(True) == 3


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON_VALUES)
def test_the_lean_path_writes_the_json_the_sdk_writes(value: Any) -> None:
    """The quick writer gives the same JSON value as `json`, the SDK's, for any JSON value."""
    assert json.loads(dumped(value)) == json.loads(json.dumps(value)) == value


_MEDIA = st.sampled_from(
    ["application/json", "text/event-stream", "*/*", "text/*", "application/*", "text/html"]
)
_ACCEPTS = st.lists(
    _MEDIA | st.text(st.characters(max_codepoint=255), max_size=300), max_size=4
).map(", ".join)


@given(_ACCEPTS)
def test_the_lean_paths_accept_verdict_is_the_sdks(accept: str) -> None:
    """Remembered or not (long ones are not), the verdict on an Accept is the SDK's own."""
    for _ in range(2):  # the second time, a short one's verdict is the remembered one
        headers = Headers({"accept": accept})
        has_json, has_sse = check_accept_headers(Request({"type": "http", "headers": headers.raw}))
        assert accepts_both(headers) == (has_json and has_sse)


# ---- ServeOptions.lean_http: deprecated ----------------------------------------------------


async def test_lean_http_true_warns_and_serves_as_without_it(answered: list[bool]) -> None:
    """The old default, given: a DeprecationWarning at the caller's line, and the same server
    (its calls answered on the fast path)."""
    with pytest.warns(DeprecationWarning, match=r"ServeOptions\.lean_http is deprecated") as seen:
        options = ServeOptions(modules=(lean_test,), http=("127.0.0.1", 0), lean_http=True)
    assert [warning.filename for warning in seen] == [__file__]
    options.check()
    async with in_process_http(options) as served, served.http() as http:
        call, headers = _call("lean__bump", sessionId="s1"), _headers("tools/call", "lean__bump")
        called = await http.post("/mcp", json=call, headers=headers)
    assert called.json()["result"]["content"][0]["text"] == "tally 1"
    assert answered == [True]


@pytest.mark.parametrize("http", [("127.0.0.1", 0), None])
def test_lean_http_false_is_refused_with_what_to_use_instead(http: tuple[str, int] | None) -> None:
    """The serving path through the SDK's transport is gone: saying so, and what to do."""
    with pytest.warns(DeprecationWarning, match="lean_http"):
        options = ServeOptions(http=http, lean_http=False)
    with pytest.raises(ConfigurationError) as refused:
        options.check()
    message = str(refused.value)
    assert "was removed" in message
    assert "leave lean_http out" in message
    assert "python -m benchmarks --only mcp" in message
