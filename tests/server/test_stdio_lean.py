"""The lean stdio path answers what it takes exactly as the SDK would, and takes the right lines.

Each test drives a real stdio server (`tests._lean_stdio_server`) over its pipes, with
the lean path on and with it off (``--sdk-only``: every request through the SDK), and
compares what the client reads. The server says at exit how many requests the lean path
took, so a test also pins *which* requests it takes: the plain ones, once the
connection's era is settled, and nothing else.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio

from tests._lean_stdio_server import SECRET
from tests._mcp_helpers import RawServer, initialize_request, raw_server, tools_call

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

_SERVER: Final = (sys.executable, str(Path(__file__).parents[1] / "_lean_stdio_server.py"))
_MODES: Final = ("lean", "sdk-only")
_MODERN: Final = "2026-07-28"
_ENVELOPE: Final = {
    "io.modelcontextprotocol/protocolVersion": _MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "lean-test", "version": "0"},
}
_TAKEN: Final = re.compile(r"lean requests: (\d+)")


def _request(
    request_id: Any, method: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _enveloped(message: dict[str, Any], envelope: Mapping[str, Any] = _ENVELOPE) -> dict[str, Any]:
    """`message` with the 2026 envelope in its params' ``_meta`` (beside what is there)."""
    params = dict(message.get("params") or {})
    params["_meta"] = {**params.get("_meta", {}), **envelope}
    return {**message, "params": params}


def _calls() -> list[tuple[dict[str, Any], bool]]:
    """Requests of every kind after the connection is open, each with whether it is plain."""
    s1 = {"sessionId": "s1"}
    return [
        (_request(2, "tools/list", {}), True),
        (tools_call("tally__add", {"amount": 2}, request_id=3, meta=s1), True),
        (tools_call("tally__add", {"amount": 3}, request_id=4, meta=s1), True),
        (tools_call("tally__show", {}, request_id="five", meta=s1), True),
        (tools_call("tally__show", {}, request_id=6, meta={"sessionId": "s2"}), True),
        (tools_call("tally__add", {"amount": "x"}, request_id=7, meta=s1), True),
        (tools_call("tally__nope", {}, request_id=8), False),  # no such tool: the SDK's words
        (tools_call("tally__show", request_id=9), True),  # no arguments: the default session
        (_request(10, "tools/list", {"cursor": "anything"}), True),
        (_request(11, "ping"), True),
        (_request(12, "tools/call", {"name": "tally__show", "task": {}}), False),
        (_request(13, "tools/call", {"arguments": {}}), False),
        (_request(14, "tools/call", {"name": 3}), False),
        (_request(15, "tools/call", {"name": "tally__show", "arguments": []}), False),
        ({**tools_call("tally__show", request_id=16), "extra": True}, False),
        (tools_call("tally__show", request_id=17.5), False),
        *_catalog_requests(s1),
    ]


def _catalog_requests(s1: Mapping[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """Requests of the catalog (resources, prompts, completions), each with whether it is plain."""
    report = {"type": "ref/prompt", "name": "tally__report"}
    return [
        (_request(40, "resources/list", {}), True),
        (_request(41, "resources/templates/list"), True),
        (_request(42, "resources/read", {"uri": "tally://total", "_meta": s1}), True),
        (_request(43, "resources/read", {"uri": "tally://times/3", "_meta": s1}), True),
        (_request(44, "resources/read", {"uri": "tally://nope"}), True),  # an error, with its uri
        (_request(45, "resources/read", {"uri": "tally://times/x"}), True),  # not an integer
        (_request(46, "resources/read", {}), False),  # no uri: the SDK's refusal
        (_request(47, "prompts/list"), True),
        (_request(48, "prompts/get", {"name": "tally__report", "_meta": s1}), True),
        (
            _request(49, "prompts/get", {"name": "tally__report", "arguments": {"tone": "grave"}}),
            True,
        ),
        (_request(50, "prompts/get", {"name": "tally__report", "arguments": {"tone": 3}}), False),
        (_request(51, "prompts/get", {"name": "tally__nope"}), True),
        (
            _request(
                52,
                "completion/complete",
                {"ref": report, "argument": {"name": "tone", "value": "p"}, "_meta": s1},
            ),
            True,
        ),
        (_request(53, "completion/complete", {"ref": report}), False),  # no argument
        (_request(54, "logging/setLevel", {"level": "info"}), False),  # the connection's
        (_request(55, "resources/subscribe", {"uri": "tally://nope"}), False),
        (_request(56, "ping", {"extra": [1]}), True),
    ]


def _handshake_script() -> tuple[list[dict[str, Any]], int]:
    """A 2025-era connection: the handshake, then every kind of request; and how many are plain."""
    calls = _calls()
    calls.append((_enveloped(tools_call("tally__show", request_id=18)), False))  # the other era
    opening = [initialize_request("lean-test"), _initialized()]
    return [*opening, *(message for message, _ in calls)], sum(plain for _, plain in calls)


def _modern_script() -> tuple[list[dict[str, Any]], int]:
    """A 2026-era connection: every kind of request with its envelope; how many are plain."""
    # ping is no method of the 2026 era: the SDK's to refuse.
    calls = [(_enveloped(m), plain and m["method"] != "ping") for m, plain in _calls()]
    refused = [
        tools_call("tally__show", request_id=20),  # no envelope
        _enveloped(tools_call("tally__show", request_id=21), {**_ENVELOPE, _version(): "2099"}),
        _enveloped(tools_call("tally__show", request_id=22), {_version(): _MODERN}),
        initialize_request("lean-test"),
    ]
    # The first request is the SDK's: it settles the era.
    opening = [_enveloped(_request(1, "tools/list", {}))]
    messages = [*opening, *(message for message, _ in calls), *refused]
    return messages, sum(plain for _, plain in calls)


def _unsettled_script() -> tuple[list[dict[str, Any]], int]:
    """A first request of an unusual shape: the lean path leaves the connection to the SDK."""
    opening = [{**initialize_request("lean-test"), "extra": 1}, _initialized()]
    return [*opening, *(message for message, _ in _calls())], 0


def _undecodable_script() -> tuple[list[dict[str, Any] | bytes], int]:
    """A first request that is not UTF-8: the SDK reads it decoded with replacements, and
    so does the lean path, which settles the same era with it."""
    opening = json.dumps(initialize_request("lean-\udcff"), ensure_ascii=False)
    raw = opening.encode("utf-8", errors="surrogateescape")
    enveloped = [_enveloped(tools_call("tally__show", request_id=n)) for n in (30, 31)]
    calls = _calls()
    return [raw, _initialized(), *enveloped, *(m for m, _ in calls)], sum(p for _, p in calls)


def _cancellation(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }


def _version() -> str:
    return "io.modelcontextprotocol/protocolVersion"


def _initialized() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.fixture(params=_MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """The lean path on, or every request through the SDK."""
    return str(request.param)


def _arguments(mode: str, *more: str) -> list[str]:
    return [*(["--sdk-only"] if mode == "sdk-only" else []), *more]


async def _exchange(server: RawServer, messages: list[dict[str, Any] | bytes]) -> list[Any]:
    """Send `messages` one by one (a dict as JSON, bytes as they are: then a request),
    reading the reply of each request; the replies."""
    replies = []
    for message in messages:
        await server.send(message)
        if isinstance(message, bytes) or ("id" in message and "method" in message):
            replies.append(await server.receive())
    return replies


async def _taken(server: RawServer) -> int:
    """EOF, then how many requests the lean path took (the server says so as it exits)."""
    await server.close_stdin()
    assert await server.wait() == 0
    found = _TAKEN.search(server.log.text())
    assert found is not None, server.log.text()
    return int(found.group(1))


@pytest.mark.parametrize(
    "script",
    [_handshake_script, _modern_script, _unsettled_script, _undecodable_script],
    ids=lambda s: s.__name__,
)
async def test_the_lean_path_answers_as_the_sdk_does(script: Any) -> None:
    """The same lines get the same replies with the lean path on and off; it takes the plain."""
    messages, plain = script()
    replies: dict[str, list[Any]] = {}
    taken: dict[str, int] = {}
    for mode in _MODES:
        async with raw_server(*_arguments(mode), command=_SERVER) as server:
            replies[mode] = await _exchange(server, messages)
            taken[mode] = await _taken(server)
    assert replies["lean"] == replies["sdk-only"]
    assert taken == {"lean": plain, "sdk-only": 0}
    totals = [r["result"]["structuredContent"] for r in replies["lean"] if r["id"] in (3, 4)]
    assert totals in ([{"result": 2}, {"result": 5}], []), replies["lean"]
    # The catalog's answers are answers, not refusals: s1's total read, the tones completed.
    by_id = {reply["id"]: reply for reply in replies["lean"]}
    assert by_id[42]["result"]["contents"][0]["text"] == "5"
    assert by_id[52]["result"]["completion"]["values"] == ["plain", "playful"]


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_a_failure_below_a_catalog_request_is_an_internal_error_on_either_path(
    era: str,
) -> None:
    """A read whose runtime raises what no caller caused (a bug, a lost store): both paths
    answer the same -32603 with a fixed text, never the exception's (which names the
    store here), and log the details and ``outcome=internal_error``. (The SDK alone, in
    the handshake era, answered code 0 with the exception's text.)"""
    read = _request(2, "resources/read", {"uri": "tally://total"})
    if era == "handshake":
        messages = [initialize_request("lean-test"), _initialized(), read]
    else:
        messages = [_enveloped(_request(1, "tools/list", {})), _enveloped(read)]
    replies: dict[str, Any] = {}
    for mode in _MODES:
        async with raw_server(*_arguments(mode, "--break-total"), command=_SERVER) as server:
            replies[mode] = (await _exchange(server, messages))[-1]
            taken = await _taken(server)
            log = server.log.text()
        assert taken == (1 if mode == "lean" else 0)  # the read: lean, or the SDK's
        assert re.search(r"resources/read tally://total .* outcome=internal_error", log), log
        assert SECRET in log  # the details are kept, where only the operator reads them
    assert replies["lean"] == replies["sdk-only"]
    error = replies["lean"]["error"]
    assert error["code"] == -32603
    assert error["message"] == (
        "internal error while serving resources/read; the server log has the details"
    )
    assert SECRET not in json.dumps(replies["lean"])


async def test_a_lean_call_its_client_cancels_is_never_answered(mode: str, tmp_path: Path) -> None:
    """``notifications/cancelled`` ends the call; no reply ever comes for it, as from the SDK."""
    never = str(tmp_path / "never")
    async with raw_server(*_arguments(mode), command=_SERVER) as server:
        await server.initialize()
        await server.send(tools_call("tally__hold", {"path": never}, request_id=20))
        cancel = {"requestId": 20, "reason": "the user moved on"}
        await server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        await server.send(tools_call("tally__show", request_id=21, meta={"sessionId": "other"}))
        reply = await server.receive()
        await server.close_stdin()
        assert await server.wait() == 0
        rest = await _rest(server)
        log = server.log.text()
    assert reply["id"] == 21
    assert rest == []
    assert re.search(r"tools/call tally__hold .* outcome=cancelled", log), log


async def _rest(server: RawServer) -> list[Any]:
    """Whatever the server wrote after the replies read so far, up to its exit."""
    assert server.process.stdout is not None
    data = server._buffer
    while chunk := await server.process.stdout.receive_some():
        data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


async def test_a_lean_call_still_running_at_the_end_is_told_the_connection_closed(
    mode: str, tmp_path: Path
) -> None:
    """EOF, and the wait for replies is over: "Connection closed", as the SDK answers its own."""
    never = str(tmp_path / "never")
    async with raw_server(*_arguments(mode, "--eof-grace", "0.2"), command=_SERVER) as server:
        await server.initialize()
        await server.send(tools_call("tally__hold", {"path": never}, request_id=30))
        await server.close_stdin()
        assert await server.wait() == 0
        rest = await _rest(server)
        taken = _TAKEN.search(server.log.text())
    assert [(r["id"], r["error"]["message"]) for r in rest] == [(30, "Connection closed")]
    assert taken is not None
    assert int(taken.group(1)) == (1 if mode == "lean" else 0)


@pytest.fixture
async def bounded(tmp_path: Path) -> AsyncIterator[RawServer]:
    """A lean server that holds at most two requests in flight."""
    async with raw_server("--max-in-flight", "2", command=_SERVER) as server:
        await server.initialize()
        yield server


async def test_lean_calls_count_in_the_in_flight_bound(bounded: RawServer, tmp_path: Path) -> None:
    """At the bound no line is read: a third request waits until a held one is answered.

    Were the bound not kept, the ``show`` behind two held calls would be read and
    answered at once; it is only read once a held call's reply is written. (The wait
    below is for something that must *not* happen: it cannot fail on a slow machine.)
    """
    release = tmp_path / "release"
    for request_id in (40, 41):
        await bounded.send(tools_call("tally__hold", {"path": str(release)}, request_id=request_id))
    await bounded.send(tools_call("tally__show", request_id=42))
    with trio.move_on_after(1.0) as waited:
        early = await bounded.receive()
    assert waited.cancelled_caught, f"answered beyond the in-flight bound: {early}"
    release.touch()
    order = [(await bounded.receive())["id"] for _ in range(3)]
    assert order[0] in (40, 41), order
    assert sorted(order) == [40, 41, 42]


async def test_a_lean_call_still_running_at_a_signals_stop_is_told_the_connection_closed() -> None:
    """SIGTERM, and the drain's grace is over: "Connection closed", as the SDK's calls are told.

    `actors serve` itself (its signal handling and drain), the call a plain one of
    `tests._slow_module`, which the lean path takes.
    """
    module = ("--module", "tests._slow_module:slow", "--shutdown-grace", "0.3")
    async with raw_server(*module) as server:
        await server.initialize()
        long, short = ({"sessionId": name} for name in ("long", "short"))  # two actors
        await server.send(tools_call("slow__wait", {"seconds": 600}, request_id=50, meta=long))
        await server.send(tools_call("slow__wait", {"seconds": 0}, request_id=51, meta=short))
        assert (await server.receive())["id"] == 51  # the first call is running by now
        server.process.send_signal(signal.SIGTERM)
        rest = await _rest(server)
        assert await server.wait() == 0
    assert [(r["id"], r["error"]["message"]) for r in rest] == [(50, "Connection closed")]


async def test_a_cancellation_read_at_the_bound_reaches_its_lean_call(
    mode: str, tmp_path: Path
) -> None:
    """At ``--max-in-flight`` a cancellation is still read for the calls taken; never answered."""
    first, second = tmp_path / "first", tmp_path / "second"
    async with raw_server(*_arguments(mode, "--max-in-flight", "2"), command=_SERVER) as server:
        await server.initialize()
        for request_id, path in ((10, first), (11, second)):
            hold = tools_call("tally__hold", {"path": str(path)}, request_id=request_id)
            await server.send(
                {**hold, "params": {**hold["params"], "_meta": {"sessionId": path.name}}}
            )
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 10},
        }
        await server.send(cancel)
        second.touch()
        assert (await server.receive())["id"] == 11
        first.touch()
        await server.send(tools_call("tally__show", request_id=12))  # behind the cancellation
        assert (await server.receive())["id"] == 12
        await server.close_stdin()
        assert await server.wait() == 0
        assert await _rest(server) == []


@pytest.mark.parametrize(
    "not_a_cancellation",
    [
        {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "notifications/cancelled",
            "params": {"requestId": 10},
        },
        {"jsonrpc": "1.0", "method": "notifications/cancelled", "params": {"requestId": 10}},
    ],
    ids=["with an id", "jsonrpc 1.0"],
)
async def test_only_a_well_formed_cancellation_cancels(
    mode: str, tmp_path: Path, not_a_cancellation: dict[str, Any]
) -> None:
    """A message the SDK refuses as a cancellation is refused, and the call it names goes on."""
    release = tmp_path / "release"
    async with raw_server(*_arguments(mode), command=_SERVER) as server:
        await server.initialize()
        await server.send(tools_call("tally__hold", {"path": str(release)}, request_id=10))
        await server.send(not_a_cancellation)
        refusal = await server.receive()
        release.touch()
        answer = await server.receive()
    assert "error" in refusal
    assert answer["id"] == 10
    assert answer["result"]["content"][0]["text"] == "released"


async def test_pipelined_calls_to_one_session_run_in_the_order_they_were_read() -> None:
    """Twenty adds in one write reach the session's actor in order: totals 1, 2, … 20."""
    adds = [
        tools_call("tally__add", {"amount": 1}, request_id=100 + n, meta={"sessionId": "o"})
        for n in range(20)
    ]
    async with raw_server(command=_SERVER) as server:
        await server.initialize()
        await server.send(b"\n".join(json.dumps(add).encode() for add in adds))
        replies = [await server.receive() for _ in adds]
    totals = {r["id"]: r["result"]["structuredContent"]["result"] for r in replies}
    assert [totals[100 + n] for n in range(20)] == list(range(1, 21))
