"""Malformed JSON-RPC and batches: every request that can be answered is answered once, with its id.

The rules are in `actors.server.mcp._jsonrpc`; here they are checked on their own and
through real servers, on stdio and on Streamable HTTP, with the raw traffic
the SDK's client cannot send.
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from mcp import types
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER

from actors.server.mcp._jsonrpc import Accept, Answer, Ignore, plan_batch, screen

from .._mcp_helpers import RawServer, http_server, raw_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

PING = {"jsonrpc": "2.0", "method": "ping"}
GOAL = {
    "name": "planning__create_goal",
    "arguments": {"goal": "smuggled"},
    "_meta": {"sessionId": "s"},  # the host's channel: a stdio model's arguments could not
}
SCRIPTED = (sys.executable, str(Path(__file__).parents[1] / "_scripted_server.py"), "10")


def message(**fields: Any) -> dict[str, Any]:
    """A JSON-RPC ping request with `fields` changed (a field set to ... is removed)."""
    base: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    base.update(fields)
    return {key: value for key, value in base.items() if value is not ...}


class TestScreen:
    """The rules alone (sans-IO)."""

    @pytest.mark.parametrize(
        ("value", "reply_id", "code"),
        [
            (message(id=1.5), 1.5, types.INVALID_REQUEST),
            (message(id=None), None, types.INVALID_REQUEST),
            (message(id=True), None, types.INVALID_REQUEST),
            (message(id={}), None, types.INVALID_REQUEST),
            (message(id=[]), None, types.INVALID_REQUEST),
            (message(jsonrpc="1.0"), 7, types.INVALID_REQUEST),
            (message(jsonrpc=...), 7, types.INVALID_REQUEST),
            (message(id="x", params=[1, 2]), "x", types.INVALID_PARAMS),
            (message(params="text"), 7, types.INVALID_REQUEST),
            (message(method=...), 7, types.INVALID_REQUEST),
            (message(method=5), 7, types.INVALID_REQUEST),
            (message(id=1.5, jsonrpc="1.0"), 1.5, types.INVALID_REQUEST),
            (message(id=..., method=5), None, types.INVALID_REQUEST),
            ({"jsonrpc": "2.0", "id": 1.5, "result": 5}, None, types.INVALID_REQUEST),
            (5, None, types.INVALID_REQUEST),
            ("ping", None, types.INVALID_REQUEST),
        ],
        ids=[
            "id-fraction",
            "id-null",
            "id-true",
            "id-object",
            "id-array",
            "jsonrpc-1.0",
            "jsonrpc-missing",
            "params-array",
            "params-string",
            "method-missing",
            "method-number",
            "fraction-and-version",
            "notification-with-bad-method",
            "malformed-response",
            "number",
            "string",
        ],
    )
    def test_a_refused_message_is_answered_with_the_id_that_can_be_read(
        self, value: object, reply_id: object, code: int
    ) -> None:
        """The error echoes a string or numeric id, and is null when no id can be read."""
        verdict = screen(value)
        assert isinstance(verdict, Answer), verdict
        assert verdict.reply.id == reply_id
        assert type(verdict.reply.id) is type(reply_id)  # 1.5 stays 1.5, 7 stays 7
        assert verdict.reply.error.code == code

    def test_messages_the_sdk_takes_pass(self) -> None:
        """Requests, notifications and responses with string or integer ids go on unchanged."""
        for value in (message(), message(id="a"), PING, {"jsonrpc": "2.0", "id": 3, "result": {}}):
            assert isinstance(screen(value), Accept), value

    @pytest.mark.parametrize(
        ("value", "problem"),
        [
            (
                {"jsonrpc": "2.0", "id": 7, "result": 5},
                "result must be an object, got a JSON number",
            ),
            (
                {"jsonrpc": "2.0", "id": "q", "result": None},
                "result must be an object, got a JSON null",
            ),
            ({"jsonrpc": "1.0", "id": 7, "result": {}}, "jsonrpc must be \"2.0\", got '1.0'"),
            ({"jsonrpc": "2.0", "id": 7, "error": "no"}, "error must be an object"),
        ],
        ids=["result-number", "result-null", "jsonrpc-1.0", "error-string"],
    )
    def test_a_malformed_answer_settles_the_servers_request_as_an_error(
        self, value: dict[str, Any], problem: str
    ) -> None:
        """An answer to a question the server asked, with a usable id: never answered back (an
        error with that id could settle one of the client's requests), but handed on as an
        error response with that id, so the question ends now, saying what was wrong."""
        verdict = screen(value)
        assert isinstance(verdict, Accept), verdict
        settled = verdict.message
        assert isinstance(settled, types.JSONRPCError), settled
        assert settled.id == value["id"]
        assert settled.error.message.startswith(f"a malformed answer: {problem}")

    def test_a_notification_that_is_valid_jsonrpc_is_ignored_not_answered(self) -> None:
        """Array params are JSON-RPC but not MCP; a notification is never answered."""
        verdict = screen({**PING, "params": [1]})
        assert isinstance(verdict, Ignore)
        assert "params must be an object" in verdict.problem

    def test_the_messages_explain_themselves(self) -> None:
        """Each error names the field and what it must be."""
        texts = {
            name: verdict.reply.error.message
            for name, verdict in {
                "fraction": screen(message(id=1.5)),
                "version": screen(message(jsonrpc="1.0")),
                "params": screen(message(params=[1])),
            }.items()
            if isinstance(verdict, Answer)
        }
        assert texts == {
            "fraction": "Invalid Request: id must be a string or an integer (MCP), got 1.5",
            "version": "Invalid Request: jsonrpc must be \"2.0\", got '1.0'",
            "params": "Invalid params: params must be an object (MCP), got a JSON array",
        }

    def test_a_batch_is_processed_only_under_2025_03_26(self) -> None:
        """Other versions refuse each request with its id and drop the notifications."""
        batch = [message(id=1), PING, message(id=2)]
        allowed = plan_batch(batch, "2025-03-26", limit=32)
        assert len(allowed.dispatch) == 3
        assert allowed.answers == ()
        for version in ("2025-06-18", "2025-11-25", None):
            refused = plan_batch(batch, version, limit=32)
            assert refused.dispatch == ()
            assert [reply.id for reply in refused.answers] == [1, 2]
            assert len(refused.ignored) == 1

    def test_a_batch_refuses_initialize_and_bad_members_and_keeps_the_rest(self) -> None:
        """initialize may not be batched (2025-03-26); each bad member gets its own error."""
        batch = [message(id=1, method="initialize"), message(id=1.5), message(id=3), [PING]]
        plan = plan_batch(batch, "2025-03-26", limit=32)
        assert [m.id for m in plan.dispatch if isinstance(m, types.JSONRPCRequest)] == [3]
        assert [reply.id for reply in plan.answers] == [1, 1.5, None]

    def test_a_request_reusing_an_id_of_its_batch_is_refused(self) -> None:
        """The first request with an id goes on; a later one with that id gets an error."""
        batch = [message(id=1), message(id="1"), message(id=1, method="tools/list"), PING]
        plan = plan_batch(batch, "2025-03-26", limit=32)
        assert [m.id for m in plan.dispatch if isinstance(m, types.JSONRPCRequest)] == [1, "1"]
        assert len(plan.dispatch) == 3
        (reply,) = plan.answers
        assert reply.id == 1
        assert reply.error.message == (
            "Invalid Request: id 1 is taken by an earlier request of this batch; "
            "each request needs its own"
        )

    @pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25", None])
    def test_a_batch_over_the_limit_and_an_empty_one_are_refused_whole(
        self, version: str | None
    ) -> None:
        """The limit bounds the replies held for one batch; past it, or [], one error, id null."""
        too_long = plan_batch([message(id=n) for n in range(5)], version, limit=4)
        assert (too_long.dispatch, too_long.answers, too_long.ignored) == ((), (), ())
        assert too_long.whole is not None
        assert too_long.whole.id is None
        assert too_long.whole.error.message == (
            "Invalid Request: a batch holds at most 4 messages on this server; this one has 5"
        )
        empty = plan_batch([], version, limit=4)
        assert empty.answers == ()
        assert empty.whole is not None
        assert empty.whole.id is None

    def test_a_huge_batch_costs_one_error_not_one_per_member(self) -> None:
        """Half a million members in a 1 MiB body: no member is read, the answer stays small.

        Answering each would take seconds of CPU on the event loop and a 70 MB reply.
        """
        huge = [1] * 500_000
        for version in ("2025-03-26", "2025-11-25", None):
            plan = plan_batch(huge, version, limit=32)
            assert plan.whole is not None
            assert plan.answers == ()
            assert len(plan.whole.model_dump_json()) < 200


async def replies_until(server: RawServer, last: object, *, total: int = 1) -> list[Any]:
    """Every line the server writes (messages or arrays) until the reply whose id is `last`
    has come and `total` replies in all (arrays flattened).

    A ping sent last is no barrier by itself: JSON-RPC lets a server answer in any order,
    and the lean stdio path answers a ping before the SDK has answered what came first.
    """
    seen: list[Any] = []
    while not (
        any(isinstance(r, dict) and r.get("id") == last for r in seen)
        and len(ids_of(seen)) >= total
    ):
        seen.append(await server.receive_json())
    return seen


def without(replies: list[Any], last: object) -> list[Any]:
    """`replies` but the one whose id is `last` (the barrier's), in the order they came."""
    return [reply for reply in replies if not (isinstance(reply, dict) and reply.get("id") == last)]


def ids_of(replies: list[Any]) -> list[object]:
    """The ids of `replies`, arrays flattened."""
    flat = [item for reply in replies for item in (reply if isinstance(reply, list) else [reply])]
    return [item["id"] for item in flat]


class TestStdio:
    async def test_requests_with_unusable_ids_are_answered_once_and_never_run(self) -> None:
        """1.5 is echoed; null, true, {} and [] get id null; none of them runs its tool."""
        async with raw_server() as server:
            await server.initialize()
            for bad_id in (1.5, None, True, {}, []):
                call = message(id=bad_id, method="tools/call", params=GOAL)
                await server.send(call)
            await server.send(message(id="end"))
            replies = without(await replies_until(server, "end", total=6), "end")
            listed = await server.call("planning__list_goals", {}, {"sessionId": "s"})
        assert ids_of(replies) == [1.5, None, None, None, None]
        assert all(reply["error"]["code"] == types.INVALID_REQUEST for reply in replies)
        assert "id must be a string or an integer (MCP), got 1.5" in replies[0]["error"]["message"]
        assert "id must not be null" in replies[1]["error"]["message"]
        assert "smuggled" not in json.dumps(listed)

    async def test_a_readable_id_is_echoed_whatever_else_is_wrong(self) -> None:
        """A wrong jsonrpc version, array params or no method: the error carries the id."""
        async with raw_server() as server:
            await server.initialize()
            await server.send(message(id=11, jsonrpc="1.0"))
            await server.send(message(id="twelve", params=[1]))
            await server.send(message(id=13, method=...))
            await server.send({**PING, "params": [1]})  # valid JSON-RPC notification: no reply
            await server.send(message(id="end"))
            replies = without(await replies_until(server, "end", total=4), "end")
            # The notification goes to the SDK's task; the lean path may answer "end" first.
            dropped = re.compile(r"dropped a notification: params must be an object")
            await server.log.wait_for(dropped, server.process)
        assert ids_of(replies) == [11, "twelve", 13]
        assert [reply["error"]["code"] for reply in replies] == [
            types.INVALID_REQUEST,
            types.INVALID_PARAMS,
            types.INVALID_REQUEST,
        ]

    @pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
    async def test_a_batch_after_2025_03_26_is_refused_request_by_request(
        self, version: str
    ) -> None:
        """Each request gets an error with its id, in one array; the tool never runs."""
        async with raw_server() as server:
            await server.initialize(version)
            batch = [
                message(id=1, method="tools/call", params=GOAL),
                PING,
                message(id="two"),
            ]
            await server.send(json.dumps(batch).encode())
            refused = await server.receive_json()
            listed = await server.call("planning__list_goals", {}, {"sessionId": "s"})
        assert [reply["id"] for reply in refused] == [1, "two"]
        assert f"not part of protocol version {version}" in refused[0]["error"]["message"]
        assert "smuggled" not in json.dumps(listed)

    async def test_a_2025_03_26_batch_is_processed_and_answered_as_one_array(self) -> None:
        """Its requests run; their replies and the errors for bad members come back together."""
        async with raw_server() as server:
            await server.initialize("2025-03-26")
            batch = [
                message(id="a", method="tools/call", params=GOAL),
                message(id="b", method="tools/list", params={}),
                PING,  # a notification: nothing comes back for it
                message(id=1.5),
                message(id="i", method="initialize"),
            ]
            await server.send(json.dumps(batch).encode())
            answered = await server.receive_json()
            listed = await server.call("planning__list_goals", {}, {"sessionId": "s"})
        by_id = {reply["id"]: reply for reply in answered}
        assert sorted(by_id, key=str) == [1.5, "a", "b", "i"]
        assert by_id["a"]["result"]["isError"] is False
        assert by_id["b"]["result"]["tools"]
        assert by_id[1.5]["error"]["code"] == types.INVALID_REQUEST
        assert "initialize must not be part of a batch" in by_id["i"]["error"]["message"]
        assert "smuggled" in json.dumps(listed)

    async def test_batches_over_the_bound_and_empty_ones_are_refused(self) -> None:
        """More messages than the bound on requests in flight, or none: one error, id null."""
        async with raw_server() as server:
            await server.initialize("2025-03-26")
            await server.send(json.dumps([message(id=n) for n in range(40)]).encode())
            too_long = await server.receive()
            await server.send(b"[]")
            empty = await server.receive()
            served = await server.call("planning__list_goals", {}, {"sessionId": "s"})
        assert too_long["id"] is None
        assert (
            "a batch holds at most 32 messages on this server; this one has 40"
            in (too_long["error"]["message"])
        )
        assert empty["id"] is None
        assert "an empty batch" in empty["error"]["message"]
        assert "result" in served

    async def test_cancelled_requests_give_back_their_place(self) -> None:
        """Requests the client cancels (ids as numbers or strings) no longer count as in flight.

        31 slow calls are cancelled, 31 more are started: had the first ones kept
        their places, the server would stop reading before the ping.
        """
        async with raw_server(command=SCRIPTED) as server:
            await server.initialize()
            nap = {"name": "scripted__nap", "arguments": {"seconds": 600}}
            for number in range(31):
                await server.send(message(id=number, method="tools/call", params=nap))
            for number in range(31):
                request_id = str(number) if number % 2 else number
                cancel = {"requestId": request_id, "reason": "test"}
                await server.send({**PING, "method": "notifications/cancelled", "params": cancel})
            for number in range(100, 131):
                await server.send(message(id=number, method="tools/call", params=nap))
            await server.send(message(id="ping"))
            replies = await replies_until(server, "ping")
        assert ids_of(replies) == ["ping"]


TOKEN = "jsonrpc-token-5c7e91a2"
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Authorization": f"Bearer {TOKEN}",
}


class RawHttp:
    """One Streamable HTTP session driven by hand, with raw bodies."""

    def __init__(self, http: httpx2.AsyncClient, url: str, session: str, version: str) -> None:
        self.http = http
        self.url = url
        self.headers = {**HEADERS, MCP_SESSION_ID_HEADER: session}
        if version != "2025-03-26":  # that version had no such header
            self.headers[MCP_PROTOCOL_VERSION_HEADER] = version

    async def post(self, body: object) -> httpx2.Response:
        """POST `body` (bytes as they are, anything else as JSON) in this session."""
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.http.post(self.url, content=content, headers=self.headers)

    async def goals(self) -> str:
        """What planning__list_goals says in session 's' (the reply is an SSE event).

        The stream's first event is the empty priming event a dropped client
        resumes from; the reply is the event with data.
        """
        listing = message(id="list", method="tools/call", params=LIST)
        response = await self.post(listing)
        data = next(
            line.removeprefix("data:")
            for line in response.text.splitlines()
            if line.startswith("data:") and line.removeprefix("data:").strip()
        )
        return json.dumps(json.loads(data))


LIST = {"name": "planning__list_goals", "arguments": {}, "_meta": {"sessionId": "s"}}


@asynccontextmanager
async def http_session(version: str = "2025-11-25") -> AsyncIterator[RawHttp]:
    """A server with one token, and a session that negotiated `version`."""
    async with http_server("--token", TOKEN) as server, httpx2.AsyncClient() as http:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw-http", "version": "0"},
            },
        }
        opened = await http.post(server.url, json=initialize, headers=HEADERS)
        assert opened.status_code == 200, opened.text
        session = RawHttp(http, server.url, opened.headers[MCP_SESSION_ID_HEADER], version)
        initialized = await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202
        yield session


class TestHttp:
    async def test_requests_with_unusable_ids_are_answered_and_never_run(self) -> None:
        """The SDK would take them as notifications (202, no reply): here each gets its error."""
        async with http_session() as session:
            answers = [
                await session.post(message(id=bad_id, method="tools/call", params=GOAL))
                for bad_id in (1.5, None, True, {}, [])
            ]
            goals = await session.goals()
        assert [answer.status_code for answer in answers] == [400] * 5
        assert [answer.json()["id"] for answer in answers] == [1.5, None, None, None, None]
        assert "smuggled" not in goals

    async def test_a_readable_id_is_echoed_whatever_else_is_wrong(self) -> None:
        """The SDK answers these with id null; here the error carries the request's id."""
        async with http_session() as session:
            version = await session.post(message(id=11, jsonrpc="1.0"))
            params = await session.post(message(id="twelve", params=[1]))
            notification = await session.post({**PING, "params": [1]})
            garbage = await session.post(b'{"jsonrpc": "2.0", "id": 13, "meth')
        assert (version.status_code, version.json()["id"]) == (400, 11)
        assert version.json()["error"]["code"] == types.INVALID_REQUEST
        assert (params.status_code, params.json()["id"]) == (400, "twelve")
        assert params.json()["error"]["code"] == types.INVALID_PARAMS
        assert (notification.status_code, notification.content) == (202, b"")
        assert garbage.json()["error"]["code"] == types.PARSE_ERROR

    async def test_a_2025_03_26_batch_is_processed_and_answered_as_one_array(self) -> None:
        """Each message goes to the SDK; the replies come back as one JSON array."""
        async with http_session("2025-03-26") as session:
            batch = [
                message(id="a", method="tools/call", params=GOAL),
                message(id="b", method="tools/list", params={}),
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
                message(id=1.5),
                message(id="i", method="initialize"),
            ]
            answered = await session.post(batch)
            goals = await session.goals()
        assert answered.status_code == 200
        assert answered.headers["content-type"] == "application/json"
        by_id = {reply["id"]: reply for reply in answered.json()}
        assert sorted(by_id, key=str) == [1.5, "a", "b", "i"]
        assert by_id["a"]["result"]["isError"] is False
        assert by_id["b"]["result"]["tools"]
        assert "initialize must not be part of a batch" in by_id["i"]["error"]["message"]
        assert "smuggled" in goals

    async def test_a_batch_reusing_an_id_is_answered_not_left_hanging(self) -> None:
        """Two requests with one id: the SDK would answer one; here the other gets an error."""
        async with http_session("2025-03-26") as session:
            twice = [message(id=1, method="tools/list", params={})] * 2
            answered = await session.post(twice)  # without an answer: the client's timeout
        assert answered.status_code == 200
        first, second = sorted(answered.json(), key=lambda reply: "error" in reply)
        assert first["result"]["tools"]
        assert "id 1 is taken by an earlier request of this batch" in second["error"]["message"]

    async def test_a_huge_batch_is_refused_whole_and_at_once(self) -> None:
        """A 1 MiB body of 500 000 members gets one small error, even before any handshake."""
        async with http_session("2025-11-25") as session:
            huge = await session.post(b"[" + b",".join([b"1"] * 500_000) + b"]")
            del session.headers[MCP_SESSION_ID_HEADER]
            unbound = await session.post(b"[" + b",".join([b"{}"] * 300_000) + b"]")
        for answer in (huge, unbound):
            assert answer.status_code == 400
            assert len(answer.content) < 300
            assert answer.json()["id"] is None
            assert (
                "a batch holds at most 32 messages on this server"
                in (answer.json()["error"]["message"])
            )

    async def test_a_batch_on_a_later_version_is_refused_request_by_request(self) -> None:
        """2025-11-25 has no batches: each request gets an error with its id; nothing runs."""
        async with http_session("2025-11-25") as session:
            batch = [
                message(id=1, method="tools/call", params=GOAL),
                PING,
                message(id="two"),
            ]
            refused = await session.post(batch)
            goals = await session.goals()
        assert refused.status_code == 200
        assert [reply["id"] for reply in refused.json()] == [1, "two"]
        assert "not part of protocol version 2025-11-25" in refused.json()[0]["error"]["message"]
        assert "smuggled" not in goals
