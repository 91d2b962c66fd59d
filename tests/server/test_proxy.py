"""Behind a real nginx: MCP calls, progress on a stream, a cut stream resumed, forwarded headers.

nginx runs examples/nginx.conf (see `tests._nginx`), in front of a
``serve --http`` subprocess; clients reach the server through it by the
public name ``mcp.example.test``, as they would through DNS. The server
modules' ``hold`` answers only once another session calls ``release``
(see `tests.server.test_resumable_http`): a call as slow as the test needs, with no
clock involved.
"""

from __future__ import annotations

import re
import textwrap
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx2
import pytest
import trio
from mcp import ClientSession, types
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import ClientMessageMetadata

from .._mcp_helpers import (
    http_server,
    importable_module,
    initialize_request,
    sdk_http_session,
    texts,
)
from .._nginx import PUBLIC_NAME, nginx_fixture  # noqa: F401  (a fixture)
from .test_resumable_http import SLOW_MODULE, CuttableProxy, release

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path

    from .._nginx import Nginx

# The SDK client's SSE reader leaves httpx2's response generators unexhausted
# when a stream is cut: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

MEMORY = ("--state", "memory")  # what these tests check is the transport's, not the store's
TOKEN = "proxy-token-0123456789abcdef"
TRUSTING_NGINX = ("--token", TOKEN, "--trusted-proxy", "127.0.0.1", "--allow-host", PUBLIC_NAME)
FORWARDED_CLIENT = "203.0.113.7"  # TEST-NET-3: nobody's address
PROGRESS_TOOL = """
from actors import Progress

@slow.tool
async def halfway(state: None, progress: Progress) -> str:
    '''Report halfway, then answer once `release` was called.'''
    progress.report(1, total=2, message="halfway")
    await released.wait()
    return "finished"
"""


@pytest.fixture
def proxy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """test_resumable_http's slow module and a tool that reports progress while it holds."""
    source = textwrap.dedent(SLOW_MODULE) + textwrap.dedent(PROGRESS_TOOL)
    importable_module(tmp_path, monkeypatch, "proxymod", source)
    return "proxymod:slow"


@asynccontextmanager
async def sdk_session(url: str, headers: Mapping[str, str]) -> AsyncIterator[ClientSession]:
    """The official client over Streamable HTTP at `url`, sending `headers`, initialized."""
    async with create_mcp_http_client(headers=dict(headers)) as http:
        async with sdk_http_session(url, http) as session:
            yield session


def refused_from(address: str) -> re.Pattern[str]:
    """The server's log line for a request without a token from `address`."""
    return re.compile(
        rf"http: refused a request without a valid bearer token from '{re.escape(address)}'"
    )


async def test_the_sdk_client_works_through_nginx_by_the_public_name(nginx: Nginx) -> None:
    """Through nginx, by a public name the server allows, the official client lists
    the tools and keeps a session's planning state across calls."""
    meta = {"sessionId": "proxied"}
    with trio.fail_after(60):
        async with (
            http_server(*MEMORY, "--allow-host", PUBLIC_NAME) as server,
            nginx.in_front_of(server.url) as proxy,
            sdk_session(proxy.url, proxy.host_header) as client,
        ):
            listed = {tool.name for tool in (await client.list_tools()).tools}
            created = await client.call_tool("planning__create_goal", {"goal": "Ship"}, meta=meta)
            goals = await client.call_tool("planning__list_goals", {}, meta=meta)
        access = proxy.access_log()
    assert {"planning__create_goal", "planning__list_goals"} <= listed
    assert not created.is_error, texts(created)
    assert "g1: Ship" in texts(goals)
    assert f"host={PUBLIC_NAME}" in access  # the requests went through nginx


async def test_a_public_name_the_server_was_not_given_gets_421_naming_the_option(
    nginx: Nginx,
) -> None:
    """Without --allow-host, a request that nginx passes on with the public name is
    refused with 421 before any session opens, and the error names the option to add."""
    headers = {"Accept": "application/json, text/event-stream", "Host": PUBLIC_NAME}
    with trio.fail_after(60):
        async with http_server(*MEMORY) as server, nginx.in_front_of(server.url) as proxy:
            async with httpx2.AsyncClient(headers=headers) as http:
                response = await http.post(proxy.url, json=initialize_request("proxied"))
            await server.log.wait_for(
                re.compile(r"refused a request for a Host this server does not serve"),
                server.process,
            )
    assert response.status_code == 421, response.text
    assert MCP_SESSION_ID_HEADER not in response.headers
    message = response.json()["error"]["message"]
    assert message.startswith(f"Host '{PUBLIC_NAME}' is not served here:"), message
    assert message.endswith(f"the operator adds --allow-host '{PUBLIC_NAME}'"), message


async def test_progress_reaches_the_client_through_nginx_while_the_call_runs(
    nginx: Nginx, proxy_module: str
) -> None:
    """A progress notification crosses nginx while its call is still held, so nginx
    passes the event stream on as it comes (no buffering)."""
    heard: list[tuple[float, float | None, str | None]] = []
    reported = trio.Event()
    results: list[types.CallToolResult] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))
        reported.set()

    with trio.fail_after(60):
        async with (
            http_server(*MEMORY, "--module", proxy_module, "--allow-host", PUBLIC_NAME) as server,
            nginx.in_front_of(server.url) as proxy,
            sdk_session(proxy.url, proxy.host_header) as client,
        ):

            async def call() -> None:
                result = await client.call_tool(
                    "slow__halfway", {}, progress_callback=on_progress, meta={"sessionId": "s"}
                )
                assert isinstance(result, types.CallToolResult)
                results.append(result)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await reported.wait()
                held_when_heard = not results
                await release(server)
    assert held_when_heard
    assert heard == [(1, 2, "halfway")]
    assert [texts(result) for result in results] == ["finished"]


async def test_a_call_cut_between_client_and_nginx_is_resumed_through_nginx(
    nginx: Nginx, proxy_module: str
) -> None:
    """The official client, its connection to nginx cut mid-call, reconnects through
    nginx with Last-Event-ID and returns the call's result."""
    tokens: list[str] = []
    token_arrived = trio.Event()

    async def on_token(token: str) -> None:
        nonlocal token_arrived
        tokens.append(token)
        token_arrived.set()
        token_arrived = trio.Event()

    request = types.CallToolRequest(
        params=types.CallToolRequestParams(
            name="slow__hold", arguments={}, _meta={"sessionId": "s"}
        )
    )
    result: list[types.CallToolResult] = []
    with trio.fail_after(60):
        async with (
            http_server(*MEMORY, "--module", proxy_module, "--allow-host", PUBLIC_NAME) as server,
            nginx.in_front_of(server.url) as proxy,
            trio.open_nursery() as nursery,
        ):
            cutter = CuttableProxy(nursery, proxy.port)
            cutter_port = await nursery.start(cutter.serve)
            url = proxy.url.replace(f":{proxy.port}/", f":{cutter_port}/")
            async with sdk_session(url, proxy.host_header) as client:

                async def call() -> None:
                    metadata = ClientMessageMetadata(on_resumption_token_update=on_token)
                    result.append(
                        await client.send_request(request, types.CallToolResult, metadata=metadata)
                    )

                async with trio.open_nursery() as calls:
                    calls.start_soon(call)
                    await token_arrived.wait()  # the call's priming event
                    cutter.cut()
                    await token_arrived.wait()  # the resumed stream's priming event
                    await release(server)
            nursery.cancel_scope.cancel()
        access = proxy.access_log()
    assert [texts(answer) for answer in result] == ["held and released"]
    assert len(set(tokens)) == len(tokens) >= 3  # priming, resumed priming, result
    resumed = re.compile(rf'"GET /mcp HTTP/1\.1" 200 \S+ last_event_id="{re.escape(tokens[0])}"')
    assert resumed.search(access), access


async def test_a_trusted_nginx_makes_the_log_name_the_forwarded_client(nginx: Nginx) -> None:
    """With nginx's address trusted, a refused request is logged with the client address
    from X-Forwarded-For, not nginx's."""
    headers = {"Host": PUBLIC_NAME, "X-Forwarded-For": FORWARDED_CLIENT}
    with trio.fail_after(60):
        async with (
            http_server(*MEMORY, *TRUSTING_NGINX) as server,
            nginx.in_front_of(server.url) as proxy,
        ):
            async with httpx2.AsyncClient(headers=headers) as http:
                response = await http.post(proxy.url, json=initialize_request("proxied"))
            await server.log.wait_for(refused_from(FORWARDED_CLIENT), server.process)
    assert response.status_code == 401, response.text


async def test_a_client_behind_a_trusted_nginx_cannot_name_someone_else(nginx: Nginx) -> None:
    """A client that is not a trusted proxy writes X-Forwarded-For itself: the log names
    the address nginx saw it come from, the nearest untrusted hop."""
    headers = {"Host": PUBLIC_NAME, "X-Forwarded-For": FORWARDED_CLIENT}
    transport = httpx2.AsyncHTTPTransport(local_address="127.0.0.5")
    with trio.fail_after(60):
        async with (
            http_server(*MEMORY, *TRUSTING_NGINX) as server,
            nginx.in_front_of(server.url) as proxy,
        ):
            async with httpx2.AsyncClient(headers=headers, transport=transport) as http:
                response = await http.post(proxy.url, json=initialize_request("proxied"))
            await server.log.wait_for(refused_from("127.0.0.5"), server.process)
            log = server.log.text()
    assert response.status_code == 401, response.text
    assert FORWARDED_CLIENT not in log


async def test_forwarded_headers_from_a_peer_that_is_not_trusted_are_ignored() -> None:
    """Sent straight to the server by a peer it does not trust, X-Forwarded-For is
    ignored: the log names the peer."""
    headers = {"X-Forwarded-For": FORWARDED_CLIENT}
    with trio.fail_after(60):
        async with http_server(*MEMORY, "--token", TOKEN, "--trusted-proxy", "10.9.9.9") as server:
            async with httpx2.AsyncClient(headers=headers) as http:
                response = await http.post(server.url, json=initialize_request("direct"))
            await server.log.wait_for(refused_from("127.0.0.1"), server.process)
            log = server.log.text()
    assert response.status_code == 401, response.text
    assert FORWARDED_CLIENT not in log
