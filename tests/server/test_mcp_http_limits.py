"""``serve --http`` under hostile traffic: refusal floods, session hoarding, malformed JSON-RPC.

The rules live in `actors.server.http._admission` and `actors.server.mcp._jsonrpc`. The
servers here are real: a subprocess for what our HTTP server does on the wire, and
otherwise the ASGI app in process, driven by a mock clock where idle time matters.
"""

from __future__ import annotations

import re
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from mcp.server.streamable_http import LAST_EVENT_ID_HEADER, MCP_SESSION_ID_HEADER

from actors.server import MCP_PATH, ServeOptions
from actors.server.http._admission import DEFAULT_MAX_SESSIONS_PER_TOKEN

from .._mcp_helpers import bearer, http_server, in_process_http, initialize_request

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    import httpx2

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

TOKEN = "limits-token-3b9f27c1"
BIG = 2_000_000


async def refused_upload(port: int, headers: str) -> bytes:
    """POST a large body and stop sending once the answer is in; hang up; the answer's first line.

    What a client does on a refusal: it reads the early answer and gives up
    its upload, leaving the connection half-read on the server's side.
    """
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}"
        f"Content-Type: application/json\r\nContent-Length: {BIG}\r\n\r\n"
    )
    answer = b""
    async with stream:
        await stream.send_all(head.encode())

        async def upload() -> None:
            # The server closes the connection once it has answered: the upload breaks off.
            with trio.move_on_after(5), suppress(trio.BrokenResourceError):
                for _ in range(BIG // 10_000):
                    await stream.send_all(b"x" * 10_000)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(upload)
            try:
                with trio.fail_after(10):
                    while b"\r\n" not in answer:
                        chunk = await stream.receive_some()
                        if not chunk:
                            break
                        answer += chunk
            except trio.BrokenResourceError:
                pass
            nursery.cancel_scope.cancel()
    return answer.split(b"\r\n", 1)[0]


class TestRefusalFloods:
    @pytest.mark.parametrize(
        ("headers", "status", "logged"),
        [
            ("", b"401", "refused a request without a valid bearer token"),
            ("Origin: http://evil.example\r\n", b"403", "refused a request from a foreign origin"),
            (f"Authorization: Bearer {TOKEN}\r\n", b"413", "refused an oversized body"),
        ],
        ids=["no-token", "foreign-origin", "oversized"],
    )
    async def test_a_flood_of_early_refusals_logs_a_few_warnings_and_no_traceback(
        self, headers: str, status: bytes, logged: str
    ) -> None:
        """Clients hanging up mid-upload on a refusal: no ERROR, and a summary, not a line each."""
        attempts = 60
        async with http_server("--token", TOKEN, "--max-request-bytes", "1000") as server:
            port = int(server.url.rsplit(":", 1)[1].split("/", 1)[0])
            answers: list[bytes] = []

            async def one() -> None:
                answers.append(await refused_upload(port, headers))

            for _ in range(attempts // 10):
                async with trio.open_nursery() as nursery:
                    for _ in range(10):
                        nursery.start_soon(one)
            server.process.terminate()
            with trio.fail_after(15):
                await server.process.wait()
            log = server.log.text()
        assert all(
            answer.endswith(status) or answer.startswith(b"HTTP/1.1 " + status)
            for answer in answers
        ), answers
        assert "Traceback" not in log, log
        assert "ERROR" not in log, log
        lines = [line for line in log.splitlines() if logged in line]
        assert 1 <= len(lines) <= 4, lines
        counted = sum(int(n) for n in re.findall(r"(\d+) more since", "\n".join(lines)))
        assert counted + sum("more since" not in line for line in lines) == attempts


async def _raw_get(port: int, path: str, host: bytes, extra: bytes = b"") -> bytes:
    """A GET of `path` with the Host header `host` (bytes as sent); the answer's status line."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(
            b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (path.encode(), host, extra)
        )
        answer = b""
        with trio.fail_after(10):
            while b"\r\n" not in answer:
                chunk = await stream.receive_some()
                if not chunk:
                    break
                answer += chunk
    return answer.split(b"\r\n", 1)[0]


class TestHostAndOrigin:
    async def test_a_flood_of_huge_foreign_hosts_logs_a_few_short_ascii_lines(self) -> None:
        """Every path refuses them (421); the log holds our bounded, escaped, rate-limited lines."""
        host = b"evil.example" + bytes(range(0x80, 0x100)) * 40  # 5 KB of obs-text
        async with http_server("--token", TOKEN, "--metrics") as server:
            port = int(server.url.rsplit(":", 1)[1].split("/", 1)[0])
            paths = ["/mcp", "/healthz", "/readyz", "/metrics"] * 50
            answers = [await _raw_get(port, path, host) for path in paths]
            server.process.terminate()
            with trio.fail_after(15):
                await server.process.wait()
            log = server.log.text()
        assert set(answers) == {b"HTTP/1.1 421 "}
        lines = [line for line in log.splitlines() if "Host" in line or "evil" in line]
        assert 1 <= len(lines) <= 4, lines
        assert all(len(line) < 1200 and line.isascii() for line in lines), lines
        counted = sum(int(n) for n in re.findall(r"(\d+) more since", "\n".join(lines)))
        assert counted + sum("more since" not in line for line in lines) == len(paths)

    @pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
    async def test_the_operators_paths_check_host_and_origin_like_mcp(self, path: str) -> None:
        """A DNS-rebinding page cannot read /metrics of a tokenless loopback server."""
        async with http_server("--metrics") as server:
            port = int(server.url.rsplit(":", 1)[1].split("/", 1)[0])
            own = await _raw_get(port, path, b"127.0.0.1")
            rebound = await _raw_get(port, path, b"attacker.example:80")
            foreign = await _raw_get(
                port, path, b"127.0.0.1", b"Origin: http://attacker.example\r\n"
            )
        assert own == b"HTTP/1.1 200 "
        assert rebound == b"HTTP/1.1 421 "
        assert foreign == b"HTTP/1.1 403 "


INITIALIZE = initialize_request("limits-test")
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ALPHA, BETA = "alpha-token-a1b2c3d4", "beta-token-e5f6a7b8"


class InProcess:
    """The HTTP app (gate, SDK, runtime) in this process, reached through httpx's ASGI transport."""

    def __init__(self, client: httpx2.AsyncClient) -> None:
        self.client = client

    async def open(self, token: str | None = None) -> httpx2.Response:
        """An initialize request without a session: it opens one, unless refused."""
        return await self.client.post(MCP_PATH, json=INITIALIZE, headers=_headers(token))

    async def delete(self, session_id: str, token: str | None = None) -> httpx2.Response:
        """End a session (HTTP DELETE)."""
        headers = {**_headers(token), MCP_SESSION_ID_HEADER: session_id}
        return await self.client.delete(MCP_PATH, headers=headers)

    async def ping(self, session_id: str, token: str | None = None) -> httpx2.Response:
        """A ping in session `session_id`."""
        headers = {**_headers(token), MCP_SESSION_ID_HEADER: session_id}
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        return await self.client.post(MCP_PATH, json=ping, headers=headers)


def _headers(token: str | None) -> dict[str, str]:
    return {**ACCEPT, **bearer(token)}


@asynccontextmanager
async def in_process(
    tokens: Mapping[str, str | None],
    *,
    limit: int = DEFAULT_MAX_SESSIONS_PER_TOKEN,
    idle: float = 600.0,
) -> AsyncIterator[InProcess]:
    """The app with `tokens`, `limit` sessions per token and an `idle` timeout, started."""
    options = ServeOptions(
        http=("127.0.0.1", 0),
        tokens=tokens,
        max_sessions_per_token=limit,
        session_idle_timeout=idle,
    )
    async with in_process_http(options) as server, server.http() as client:
        yield InProcess(client)


def session_of(response: httpx2.Response) -> str:
    """The Mcp-Session-Id a successful initialize answered with."""
    assert response.status_code == 200, response.text
    return response.headers[MCP_SESSION_ID_HEADER]


class TestSessionsPerToken:
    async def test_a_token_holds_at_most_its_share_of_sessions(self) -> None:
        """The fourth session of alpha is refused (429, naming the limit); beta is unaffected."""
        async with in_process({ALPHA: "alpha", BETA: "beta"}, limit=3) as app:
            alphas = [session_of(await app.open(ALPHA)) for _ in range(3)]
            refused = await app.open(ALPHA)
            beta = await app.open(BETA)
            ended = await app.delete(alphas[0], ALPHA)
            again = await app.open(ALPHA)
            pinged = await app.ping(alphas[1], ALPHA)
        assert refused.status_code == 429
        body = refused.json()
        assert body["id"] == INITIALIZE["id"]  # the request's own id, so a client can match it
        assert body["error"]["message"].startswith(
            "this token holds 3 open sessions already, the most allowed (--max-sessions-per-token)"
        )
        assert beta.status_code == 200
        assert ended.status_code == 200
        assert again.status_code == 200
        assert pinged.status_code == 200  # the sessions it has keep working

    async def test_many_openings_at_once_cannot_overshoot_the_limit(self) -> None:
        """Twenty initialize requests sent together: exactly three sessions open."""
        statuses: list[int] = []
        async with in_process({ALPHA: "alpha"}, limit=3) as app:

            async def one() -> None:
                statuses.append((await app.open(ALPHA)).status_code)

            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(one)
        assert sorted(statuses) == [200] * 3 + [429] * 17

    async def test_anonymous_clients_share_one_limit(self) -> None:
        """Without tokens every client is the same principal."""
        async with in_process({}, limit=2) as app:
            opened = [(await app.open()).status_code for _ in range(3)]
            refused = await app.open()
        assert opened == [200, 200, 429]
        assert (
            "anonymous clients together hold 2 open sessions already"
            in refused.json()["error"]["message"]
        )

    async def test_idle_sessions_expire_and_give_their_place_back(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """After the idle timeout the SDK has closed the session and the token may open another."""
        async with in_process({ALPHA: "alpha"}, limit=2, idle=600.0) as app:
            first = session_of(await app.open(ALPHA))
            session_of(await app.open(ALPHA))
            assert (await app.open(ALPHA)).status_code == 429
            await trio.sleep(599)
            assert (await app.open(ALPHA)).status_code == 429  # not idle long enough yet
            await trio.sleep(2)
            reopened = await app.open(ALPHA)
            expired = await app.ping(first, ALPHA)
        assert reopened.status_code == 200
        assert expired.status_code == 404  # the SDK closed it too

    async def test_a_session_in_use_does_not_expire(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Requests keep a session alive: idle time counts from the last one."""
        async with in_process({ALPHA: "alpha"}, limit=1, idle=600.0) as app:
            session = session_of(await app.open(ALPHA))
            for _ in range(3):
                await trio.sleep(400)
                assert (await app.ping(session, ALPHA)).status_code == 200
            refused = await app.open(ALPHA)
        assert refused.status_code == 429

    async def test_another_token_cannot_free_a_place_by_naming_a_session(self) -> None:
        """beta deleting alpha's session gets 404, and alpha still holds its sessions."""
        async with in_process({ALPHA: "alpha", BETA: "beta"}, limit=1) as app:
            alpha = session_of(await app.open(ALPHA))
            stolen = await app.delete(alpha, BETA)
            refused = await app.open(ALPHA)
            pinged = await app.ping(alpha, ALPHA)
        assert stolen.status_code == 404
        assert refused.status_code == 429
        assert pinged.status_code == 200

    async def test_a_made_up_last_event_id_does_not_free_a_place(self) -> None:
        """The event store's 404 on one's own live session: the session still counts."""
        async with in_process({ALPHA: "alpha"}, limit=1) as app:
            alpha = session_of(await app.open(ALPHA))
            headers = {
                **_headers(ALPHA),
                MCP_SESSION_ID_HEADER: alpha,
                "Accept": "text/event-stream",
                LAST_EVENT_ID_HEADER: "made-up",
            }
            replays = [await app.client.get(MCP_PATH, headers=headers) for _ in range(5)]
            refused = await app.open(ALPHA)
            pinged = await app.ping(alpha, ALPHA)
        assert [replay.status_code for replay in replays] == [404] * 5
        assert refused.status_code == 429
        assert pinged.status_code == 200

    @pytest.mark.parametrize("method", ["GET", "DELETE"])
    async def test_a_404_from_another_path_does_not_free_a_place(self, method: str) -> None:
        """The app's 404 for /elsewhere says nothing about the session: it still counts."""
        async with in_process({ALPHA: "alpha"}, limit=1) as app:
            alpha = session_of(await app.open(ALPHA))
            headers = {**_headers(ALPHA), MCP_SESSION_ID_HEADER: alpha}
            elsewhere = await app.client.request(method, "/elsewhere", headers=headers)
            refused = await app.open(ALPHA)
            pinged = await app.ping(alpha, ALPHA)
        assert elsewhere.status_code == 404
        assert refused.status_code == 429
        assert pinged.status_code == 200


async def test_the_default_limit_is_100_sessions_per_token() -> None:
    """With serve's defaults (--max-sessions-per-token's too), alpha's 101st session is refused."""
    assert DEFAULT_MAX_SESSIONS_PER_TOKEN == ServeOptions().max_sessions_per_token == 100
    async with in_process({ALPHA: "alpha", BETA: "beta"}) as app:
        opened = [(await app.open(ALPHA)).status_code for _ in range(100)]
        refused = await app.open(ALPHA)
        beta = await app.open(BETA)
    assert opened == [200] * 100
    assert refused.status_code == 429
    assert beta.status_code == 200
