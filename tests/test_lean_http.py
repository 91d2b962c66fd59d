"""The lean HTTP path answers what it takes exactly as the SDK would, and takes the right requests.

Each request is POSTed to two apps that differ only in ``lean_http``, each with
a runtime of its own that has seen the same requests in the same order: the
status, the content type and the JSON body must be the same. A spy on
`LeanPath.answer` tells which requests the lean path answered itself: the
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

from actors import Log, Progress, ToolModule
from actors.server import ServeOptions
from actors.server._lean import LeanPath

from ._mcp_helpers import in_process_http

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
    """Report progress and log: a tool the lean path leaves to the SDK."""
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
    """One request, and whether the lean path should answer it itself."""

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
    """A client of the lean app and one of the SDK-only app, each over its own runtime."""
    async with AsyncExitStack() as stack:
        clients = []
        for lean in (True, False):
            options = ServeOptions(modules=(lean_test,), http=("127.0.0.1", 0), lean_http=lean)
            served = await stack.enter_async_context(in_process_http(options))
            transport = httpx2.ASGITransport(app=served.app)
            client = httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1")
            clients.append(await stack.enter_async_context(client))
        yield clients[0], clients[1]


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the lean path answered each request, in order (a spy on `LeanPath.answer`)."""
    seen: list[bool] = []
    original = LeanPath.answer

    async def spy(self: LeanPath, *args: Any) -> Any:
        response = await original(self, *args)
        seen.append(response is not None)
        return response

    monkeypatch.setattr(LeanPath, "answer", spy)
    return seen


def _seen(response: httpx2.Response) -> tuple[int, str, Any]:
    kind = response.headers.get("content-type", "")
    body = json.loads(response.content) if kind.startswith("application/json") else response.text
    return response.status_code, kind, body


async def test_the_lean_path_answers_as_the_sdk_does(
    apps: tuple[httpx2.AsyncClient, httpx2.AsyncClient], answered: list[bool]
) -> None:
    """Each case: the same status, type and body either way; lean where it should be."""
    lean, sdk = apps
    for case in CASES:
        answered.clear()
        body = json.dumps(case.body).encode()
        mine = await lean.post("/mcp", content=body, headers=case.headers)
        theirs = await sdk.post("/mcp", content=body, headers=case.headers)
        assert _seen(mine) == _seen(theirs), case.label
        assert mine.content == theirs.content, case.label
        assert answered == [case.lean], case.label
    # The SDK-only app never asked the lean path.
    assert len(answered) == 1


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
