"""Session ids that name their front (`actors.server.http._session_prefix`), in process.

A front given ``session_id_prefix`` shows each HTTP session id as
``<prefix>.<id>``, so that a load balancer routes a session's requests by it
(``tests/cluster/test_cluster_fronts.py`` runs two fronts behind nginx). Here the
server's app runs in the test's own trio run (`in_process_http`): the official
client keeps its session through the prefix; a request with another front's
id, or with the SDK's bare one, is answered 404 and reaches nothing; DELETE
and resuming a stream with ``Last-Event-ID`` work through the prefix.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio
from mcp.server.streamable_http import LAST_EVENT_ID_HEADER, MCP_SESSION_ID_HEADER

from actors._argparse import with_environment
from actors.server import MCP_PATH, ConfigurationError, ServeOptions
from actors.server._cli import _options, parser
from actors.server.http._session_prefix import check_session_id_prefix

from .._mcp_helpers import in_process_http, initialize_request, texts, tools_call

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    import httpx2

    from .._mcp_helpers import InProcessHttp

# The SDK client's SSE reader leaves httpx2's response generators unexhausted: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

HTTP: Final = ("127.0.0.1", 0)
VERSION: Final = "2025-11-25"
SDK_ID: Final = re.compile(r"[0-9a-f]{32}")
"""A session id as the SDK mints it: uuid4's hex."""
NOT_FOUND: Final = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Session not found"},
}
"""The SDK's own answer to an unknown session id."""


def _headers(session_id: str, **more: str) -> dict[str, str]:
    return {
        MCP_SESSION_ID_HEADER: session_id,
        "MCP-Protocol-Version": VERSION,
        "Accept": "application/json, text/event-stream",
        **more,
    }


async def _open(http: httpx2.AsyncClient) -> str:
    """Initialize a session by hand; the id its response named."""
    accept = {"Accept": "application/json, text/event-stream"}
    opened = await http.post(MCP_PATH, json=initialize_request("raw"), headers=accept)
    assert opened.status_code == 200, opened.text
    session_id = opened.headers[MCP_SESSION_ID_HEADER]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    sent = await http.post(MCP_PATH, json=initialized, headers=_headers(session_id))
    assert sent.status_code == 202, sent.text
    return session_id


def _sse_data(body: str) -> list[str]:
    """The ``data`` of each SSE event of `body` that has any."""
    return [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]


def _event_ids(body: str) -> list[str]:
    return [line.removeprefix("id: ") for line in body.splitlines() if line.startswith("id: ")]


@pytest.fixture
async def front_a() -> AsyncIterator[InProcessHttp]:
    """A server whose session ids are shown as ``a.<id>``."""
    options = ServeOptions(http=HTTP, state="memory", session_id_prefix="a")
    async with in_process_http(options) as server:
        yield server


class TestTheIdsClientsSee:
    async def test_a_new_session_id_is_the_prefix_a_dot_and_the_sdks_id(
        self, front_a: InProcessHttp
    ) -> None:
        async with front_a.http() as http:
            session_id = await _open(http)
        prefix, dot, sdk_id = session_id.partition(".")
        assert (prefix, dot) == ("a", ".")
        assert SDK_ID.fullmatch(sdk_id), session_id

    async def test_every_response_of_the_session_carries_it(self, front_a: InProcessHttp) -> None:
        async with front_a.http() as http:
            session_id = await _open(http)
            called = await http.post(
                MCP_PATH,
                json=tools_call("planning__list_goals", {}, request_id=2),
                headers=_headers(session_id),
            )
        assert called.status_code == 200, called.text
        assert called.headers.get_list(MCP_SESSION_ID_HEADER) == [session_id]

    async def test_without_a_prefix_the_ids_are_the_sdks_own(self) -> None:
        async with (
            in_process_http(ServeOptions(http=HTTP, state="memory")) as server,
            server.http() as http,
        ):
            session_id = await _open(http)
        assert SDK_ID.fullmatch(session_id), session_id


class TestRequestsWithThePrefix:
    async def test_the_official_client_keeps_its_session_and_its_own_state(
        self, front_a: InProcessHttp
    ) -> None:
        """Calls that name no session land in each client's own HTTP session."""
        async with front_a.session() as first, front_a.session() as second:
            created = await first.call_tool("planning__create_goal", {"goal": "first's"})
            mine = await first.call_tool("planning__list_goals", {})
            theirs = await second.call_tool("planning__list_goals", {})
        assert not created.is_error, texts(created)
        assert texts(mine) == "Goals (1):\n- g1: first's"
        assert texts(theirs).startswith("No goals yet.")

    async def test_a_2026_era_client_is_served_as_before(self, front_a: InProcessHttp) -> None:
        async with front_a.session(era="modern") as client:
            listed = await client.call_tool("planning__list_goals", {}, meta={"sessionId": "s"})
        assert texts(listed).startswith("No goals yet.")

    async def test_delete_ends_the_session_and_frees_its_place(self) -> None:
        """One session per client at most: a second opens only once DELETE ended the first."""
        options = ServeOptions(
            http=HTTP, state="memory", session_id_prefix="a", max_sessions_per_token=1
        )
        async with in_process_http(options) as server, server.http() as http:
            session_id = await _open(http)
            full = await http.post(MCP_PATH, json=initialize_request("second"))
            deleted = await http.delete(MCP_PATH, headers=_headers(session_id))
            after = await http.post(
                MCP_PATH,
                json=tools_call("planning__list_goals", {}, request_id=2),
                headers=_headers(session_id),
            )
            await _open(http)  # its place is free again
        assert full.status_code == 429
        assert deleted.status_code == 200, deleted.text
        assert after.status_code == 404
        assert after.json() == NOT_FOUND


class TestIdsOfOtherFronts:
    @pytest.mark.parametrize("shown", ["b.{id}", "{id}", "a{id}", "A.{id}", "a.a.{id}", ""])
    @pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
    async def test_they_get_404_and_reach_no_session(
        self,
        front_a: InProcessHttp,
        shown: str,
        method: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Another front's prefix, none, or this one spelt otherwise: the SDK's 404, no
        call made, no session ended, and a line in the log for the operator."""
        async with front_a.http() as http:
            session_id = await _open(http)
            sdk_id = session_id.removeprefix("a.")
            call = tools_call("planning__create_goal", {"goal": "astray"}, request_id=2)
            before = front_a.calls()
            with caplog.at_level(logging.WARNING, "actors.serve"):
                refused = await http.request(
                    method,
                    MCP_PATH,
                    json=call if method == "POST" else None,
                    headers=_headers(shown.format(id=sdk_id)),
                )
            calls = front_a.calls() - before
            still = await http.post(
                MCP_PATH,
                json=tools_call("planning__list_goals", {}, request_id=2),
                headers=_headers(session_id),
            )
        assert refused.status_code == 404, refused.text
        assert refused.json() == NOT_FOUND
        assert MCP_SESSION_ID_HEADER not in refused.headers
        assert calls == 0
        assert still.status_code == 200, still.text
        assert "No goals yet." in still.text  # the goal went nowhere, and the session lives
        if shown != "a.a.{id}":  # that one has this front's prefix: the SDK's own 404
            assert "refused a session id without this front's prefix" in caplog.text

    async def test_the_token_is_checked_first(self) -> None:
        """Without a valid token, 401 whatever the id: the prefix tells a stranger nothing."""
        token = "prefix-token-0123456789"
        options = ServeOptions(
            http=HTTP, state="memory", session_id_prefix="a", tokens={token: None}
        )
        async with in_process_http(options) as server, server.http() as http:
            answers = [
                await http.post(
                    MCP_PATH,
                    json=tools_call("planning__list_goals", {}, request_id=2),
                    headers=_headers(shown),
                )
                for shown in ("a.0123", "b.0123", "0123")
            ]
        assert [answer.status_code for answer in answers] == [401, 401, 401]

    async def test_the_log_names_the_prefix_never_the_id(
        self, front_a: InProcessHttp, caplog: pytest.LogCaptureFixture
    ) -> None:
        async with front_a.http() as http:
            with caplog.at_level(logging.WARNING, "actors.serve"):
                await http.post(
                    MCP_PATH,
                    json=tools_call("planning__list_goals", {}, request_id=2),
                    headers=_headers("b.0123456789abcdef"),
                )
        assert "'prefix b'" in caplog.text
        assert "0123456789abcdef" not in caplog.text

    async def test_every_copy_of_the_header_must_have_the_prefix(
        self, front_a: InProcessHttp
    ) -> None:
        """A request that sends the header twice cannot slip a foreign id past the check."""
        async with front_a.http() as http:
            session_id = await _open(http)
            headers = [
                (MCP_SESSION_ID_HEADER, session_id),
                (MCP_SESSION_ID_HEADER, "b." + session_id.removeprefix("a.")),
                ("MCP-Protocol-Version", VERSION),
                ("Accept", "application/json, text/event-stream"),
            ]
            refused = await http.post(
                MCP_PATH, json=tools_call("planning__list_goals", {}, request_id=2), headers=headers
            )
        assert refused.status_code == 404

    async def test_a_2026_era_request_is_served_whatever_session_header_it_carries(
        self,
    ) -> None:
        """The SDK serves a 2026-era request without a session, so its header means nothing:
        left alone."""
        modern = "2026-07-28"
        envelope = {
            "io.modelcontextprotocol/protocolVersion": modern,
            "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope}}
        headers = {
            MCP_SESSION_ID_HEADER: "b.0123",
            "Accept": "application/json, text/event-stream",
            "Mcp-Protocol-Version": modern,
            "Mcp-Method": "tools/list",
        }
        options = ServeOptions(http=HTTP, state="memory", session_id_prefix="a")
        async with in_process_http(options) as server, server.http() as http:
            listed = await http.post(MCP_PATH, json=body, headers=headers)
        assert listed.status_code == 200, listed.text
        assert "planning__list_goals" in listed.text


async def _get_until_data(app: Any, headers: Mapping[str, str]) -> tuple[int, str, str]:
    """GET `MCP_PATH` from `app` itself until the first SSE event with data arrives, then
    leave; the status, the ``Mcp-Session-Id`` of the response, and the body so far.

    A resumed stream goes on live after its replay: httpx2's ASGI transport would
    wait for its end, which never comes.
    """
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "headers": [(b"host", b"127.0.0.1"), *raw],
        "scheme": "http",
        "path": MCP_PATH,
        "raw_path": MCP_PATH.encode(),
        "query_string": b"",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 50000),
        "root_path": "",
    }
    status = 0
    session_id = ""
    body = bytearray()
    enough = trio.Event()
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await enough.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, session_id
        if message["type"] == "http.response.start":
            status = message["status"]
            found = dict(message.get("headers", [])).get(MCP_SESSION_ID_HEADER.encode(), b"")
            session_id = found.decode()
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))
            if status != 200 or _sse_data(body.decode()) or not message.get("more_body"):
                enough.set()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app, scope, receive, send)
            await enough.wait()
            nursery.cancel_scope.cancel()  # the client left: its live tail is of no interest
    return status, session_id, body.decode()


class TestResuming:
    async def test_a_stream_resumes_with_last_event_id_through_the_prefix(
        self, front_a: InProcessHttp
    ) -> None:
        """GET with Last-Event-ID (the priming event of a call's stream) and the prefixed id:
        the call's result again, on a stream that names the session as the client knows it."""
        async with front_a.http() as http:
            session_id = await _open(http)
            created = await http.post(
                MCP_PATH,
                json=tools_call("planning__create_goal", {"goal": "resumed"}, request_id=2),
                headers=_headers(session_id),
            )
        assert created.headers["content-type"].startswith("text/event-stream")
        priming = _event_ids(created.text)[0]
        resume = {LAST_EVENT_ID_HEADER: priming}
        sdk_id = session_id.removeprefix("a.")
        status, named, body = await _get_until_data(front_a.app, _headers(session_id, **resume))
        refused = [
            await _get_until_data(front_a.app, _headers(other, **resume))
            for other in (f"b.{sdk_id}", sdk_id)
        ]
        assert status == 200, body
        assert named == session_id
        assert "Created goal g1: resumed" in _sse_data(body)[0]
        for other_status, other_named, other_body in refused:
            assert other_status == 404
            assert other_named == ""
            assert "resumed" not in other_body


class TestTheOption:
    @pytest.mark.parametrize("prefix", ["a", "front-2", "A9", "x" * 32])
    def test_letters_digits_and_dashes_are_a_prefix(self, prefix: str) -> None:
        ServeOptions(http=HTTP, state="memory", session_id_prefix=prefix).check()

    @pytest.mark.parametrize("prefix", ["", "a.b", "x" * 33, "a b", "a_b", "é", "a\n", "a/b"])
    def test_anything_else_is_refused_naming_the_problem(self, prefix: str) -> None:
        options = ServeOptions(http=HTTP, state="memory", session_id_prefix=prefix)
        expected = (
            f"--session-id-prefix: {prefix!r} is no session id prefix: expected 1 to 32 ASCII "
            "letters, digits or '-', like 'a' or 'front-2'"
        )
        with pytest.raises(ConfigurationError, match=f"^{re.escape(expected)}$"):
            options.check()

    def test_it_applies_to_http_only(self) -> None:
        with pytest.raises(ConfigurationError, match=r"^--session-id-prefix applies to --http"):
            ServeOptions(state="memory", session_id_prefix="a").check()

    def test_the_command_line_and_its_variable_set_it(self) -> None:
        given = _options(parser().parse_args(["--session-id-prefix", "a"]))
        environ = {"MCP_ACTORS_SESSION_ID_PREFIX": "b"}
        from_environment = _options(with_environment(parser(), environ).parse_args([]))
        unset = _options(with_environment(parser(), {}).parse_args([]))
        assert given.session_id_prefix == "a"
        assert from_environment.session_id_prefix == "b"
        assert unset.session_id_prefix is None

    def test_a_bad_value_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exited:
            parser().parse_args(["--session-id-prefix", "a.b"])
        assert exited.value.code == 2
        assert "argument --session-id-prefix: 'a.b' is no session id prefix" in (
            capsys.readouterr().err
        )

    def test_the_cluster_takes_it_too(self) -> None:
        cluster = parser("mcp-actors cluster", cluster=True)
        assert cluster.parse_args(["--session-id-prefix", "b"]).session_id_prefix == "b"

    def test_the_layer_refuses_a_bad_prefix_too(self) -> None:
        with pytest.raises(ValueError, match=r"^'a\.' is no session id prefix"):
            check_session_id_prefix("a.")
