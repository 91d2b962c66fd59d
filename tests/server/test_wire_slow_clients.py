"""Slow clients cannot hold our HTTP listeners (`actors.server.http._server`; issue 34, class 2).

An attacker opens connections and sends nothing, or a byte, or a head it never
ends. Each such connection is closed by the header deadline; one address holds
at most `WireLimits.max_connections_per_address` of them, so that a client from
another address, and the address's own connections already served, go on being
served (invariant 10: one tenant cannot block another; here, one address); a
waiting connection holds about the bytes it sent, for seconds (invariant 5:
bounded resources); and ``serve`` raises its
soft limit on open files, which would otherwise run out long before the cap.

The "other address" is 127.0.0.2: Linux routes all of 127.0.0.0/8 to the
loopback interface, and a client socket bound there reaches 127.0.0.1. Every
wait is on a condition (an answer, a close) with a generous deadline.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import re
import resource
import sys
import tracemalloc
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import attrs
import httpx2
import pytest
import trio

from actors._runtime import open_runtime
from actors.server import ServeOptions
from actors.server._options import build_modules
from actors.server.http._app import _http_apps, http_adapter
from actors.server.http._responses import RefusalLog
from actors.server.http._server import WireLimits, _address_group
from benchmarks._http_floors import BODY, HEADERS, TOOL

from .._mcp_helpers import http_server, sdk_http_session
from .test_wire import Client, Response, Served, Toy, post, serving

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp import ClientSession

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]
DEADLINE: Final = 30.0
"""Seconds any awaited condition may take on a loaded machine: shorter than every
deadline the old code had (`WireLimits.request_timeout` is set to an hour here)."""
HOUR: Final = 3600.0
OTHER_ADDRESS: Final = "127.0.0.2"
ATTACKED: Final = WireLimits(
    header_timeout=0.5,
    request_timeout=HOUR,
    keep_alive_timeout=HOUR,
    max_connections=48,
    max_connections_per_address=16,
)
"""Small caps and a short header deadline; nothing else times out during a test."""
OPS_LISTENING: Final = re.compile(r"operator endpoints on (http://\S+)")


@asynccontextmanager
async def connect(port: int, address: str = "127.0.0.1") -> AsyncIterator[Client]:
    """A raw connection to 127.0.0.1:`port` from the client address `address`."""
    stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=address)
    async with stream:
        yield Client(stream=stream)


async def open_many(stack: contextlib.AsyncExitStack, port: int, count: int) -> list[Client]:
    """`count` raw connections from 127.0.0.1, closed with `stack`."""
    return [await stack.enter_async_context(connect(port)) for _ in range(count)]


async def answer_and_close(client: Client) -> Response:
    """The one response `client` gets before the server closes its connection."""
    assert await client.closed()
    assert len(client.done) == 1, client.done
    return client.done[0]


@asynccontextmanager
async def mcp_serving(limits: WireLimits) -> AsyncIterator[Served]:
    """What ``serve --http`` serves (gate, fast path, SDK), on the wire within `limits`."""
    options = ServeOptions(http=("127.0.0.1", 0))
    async with open_runtime(build_modules(options), options.runtime) as runtime:
        apps = _http_apps(http_adapter(runtime, options), options, RefusalLog(), None, None)
        async with serving(apps.app, limits=limits, fast=apps.fast) as served:
            yield served


@asynccontextmanager
async def session_from(url: str, address: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK session with `url` whose connections come from `address`."""
    transport = httpx2.AsyncHTTPTransport(local_address=address)
    async with httpx2.AsyncClient(transport=transport, timeout=DEADLINE) as http:
        async with sdk_http_session(url, http) as session:
            yield session


def mcp_call() -> bytes:
    """A 2026-era ``tools/call``, answered by the fast path."""
    headers = {**HEADERS, "Host": "127.0.0.1", "Content-Length": str(len(BODY))}
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"POST /mcp HTTP/1.1\r\n{head}\r\n{BODY}".encode()


@attrs.define(eq=False)
class Attack:
    """Connections from 127.0.0.1 that send nothing: held, or turned away with a 503."""

    clients: list[Client] = attrs.field(factory=list)
    answers: list[Response] = attrs.field(factory=list)
    turned_away: trio.Event = attrs.field(factory=trio.Event)
    expected_refusals: int = 0

    async def open(self, port: int, count: int, nursery: trio.Nursery) -> None:
        """Open `count` connections to `port`; each one's answer is collected as it comes."""
        for _ in range(count):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            client = Client(stream=stream)
            self.clients.append(client)
            nursery.start_soon(self._answered, client)

    async def _answered(self, client: Client) -> None:
        async with client.stream:
            self.answers.append(await answer_and_close(client))
        if sum(answer.status == 503 for answer in self.answers) == self.expected_refusals:
            self.turned_away.set()

    @property
    def held(self) -> list[Client]:
        """The connections the server holds (not answered yet)."""
        return [client for client in self.clients if not client.done]


class TestHeaderDeadline:
    async def test_a_head_that_does_not_come_is_408_while_a_slow_body_goes_on(self) -> None:
        """A head begun is answered 408 and closed 0.5 s on; a body has `request_timeout`.

        The body's request began before the head's, so its own header deadline has
        passed by the time the head's is answered: it is served all the same.
        (Invariant 5: what a client makes the server hold is bounded in time.)
        """
        async with serving(Toy(), limits=ATTACKED) as served:
            async with connect(served.port) as body, connect(served.port) as head:
                await body.send(post(b"/", b"0123456789")[:-5])
                await _read_by_now(served)
                await head.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Never: end")
                late = await answer_and_close(head)
                await body.send(b"56789")
                (served_body,) = await body.responses(1)
        assert late.status == 408
        assert b"line and headers" in late.body
        assert served_body.status == 200
        assert b"0123456789" in served_body.body


class TestPerAddressCap:
    async def test_a_valid_client_is_served_while_one_address_holds_every_slot_it_can(
        self,
    ) -> None:
        """48 silent connections from 127.0.0.1, the whole cap: 16 are held, 32 get 503.

        Meanwhile an SDK session from 127.0.0.2 calls a tool, and a connection of
        127.0.0.1 that was served before keeps being served. Then each held one
        sends a byte and is closed by the header deadline (408); 127.0.0.1 is
        served again. (Invariant 10, for addresses: one cannot block another.)
        """
        cap = ATTACKED.max_connections_per_address
        attack = Attack(expected_refusals=ATTACKED.max_connections - cap)
        with trio.fail_after(DEADLINE):
            async with mcp_serving(ATTACKED) as served, connect(served.port) as regular:
                await regular.send(mcp_call())
                assert (await regular.responses(1))[0].status == 200
                async with trio.open_nursery() as nursery:
                    await attack.open(served.port, ATTACKED.max_connections, nursery)
                    await attack.turned_away.wait()
                    assert len(attack.held) == cap
                    url = f"http://127.0.0.1:{served.port}/mcp"
                    async with session_from(url, OTHER_ADDRESS) as session:
                        result = await session.call_tool(TOOL, {})
                    await regular.send(mcp_call())
                    (_, again) = await regular.responses(2)
                    assert len(attack.held) == cap  # all of it while the attack held on
                    for client in attack.held:
                        await client.send(b"P")
                async with connect(served.port) as after:
                    await after.send(mcp_call())
                    (after_attack,) = await after.responses(1)
        assert not result.is_error
        assert again.status == 200
        statuses = collections.Counter(answer.status for answer in attack.answers)
        assert statuses == {503: ATTACKED.max_connections - cap, 408: cap}
        refused = next(answer for answer in attack.answers if answer.status == 503)
        assert refused.headers[b"retry-after"] == b"1"  # ceil(header_timeout)
        assert b"from your address" in refused.body
        assert after_attack.status == 200


@pytest.mark.parametrize("listener", ["--http", "--metrics"])
async def test_both_listeners_of_serve_cap_each_address_and_close_slow_heads(
    listener: str,
) -> None:
    """``serve --max-connections-per-address 4``: of 5 silent connections from
    127.0.0.1, one gets 503 and Retry-After, on the MCP listener and on the
    ``--metrics`` one; 127.0.0.2 is served; the 4 held, once they send a byte, are
    answered 408 and closed by the default 5 s header deadline (not the 30 s one)."""
    cap = 4
    attack = Attack(expected_refusals=1)
    args = ("--state", "memory", "--metrics", "127.0.0.1:0", "--max-connections-per-address")
    async with http_server(*args, str(cap)) as server:
        if listener == "--http":
            url = server.url
        else:
            url = (await server.log.wait_for(OPS_LISTENING, server.process)).group(1)
        port = httpx2.URL(url).port
        assert port is not None
        transport = httpx2.AsyncHTTPTransport(local_address=OTHER_ADDRESS)
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                await attack.open(port, cap + 1, nursery)
                await attack.turned_away.wait()
                for client in attack.held:
                    await client.send(b"G")
                async with httpx2.AsyncClient(transport=transport) as http:
                    other = await http.get(url.removesuffix("/mcp") + "/healthz")
    assert other.status_code == 200
    statuses = collections.Counter(answer.status for answer in attack.answers)
    assert statuses == {503: 1, 408: cap}
    refused = next(answer for answer in attack.answers if answer.status == 503)
    assert refused.headers[b"retry-after"] == b"5"


_FIELD: Final = b"X-Field: " + b"f" * 600 + b"\r\n"


class TestMemory:
    @pytest.mark.parametrize(
        ("head", "refused"),
        [
            (b"GET / HTTP/1.1\r\nHost: t\r\nX-Long: " + b"v" * (60 << 10), False),
            (b"GET / HTTP/1.1\r\nHost: t\r\n" + _FIELD * 98, False),
            (b"GET / HTTP/1.1\r\nHost: t\r\n" + b"a:\r\n" * (12 << 10), True),
        ],
        ids=["one-long-value", "98-fields-of-600-bytes", "12288-empty-fields"],
    )
    async def test_a_connection_waiting_with_a_partial_head_holds_about_its_bytes(
        self, head: bytes, refused: bool
    ) -> None:
        """16 connections each send ~60 KiB of a head and stop: traced memory per
        connection stays within 1.25 times that plus 32 KiB (a task, a socket, a
        parser). Empty fields, which would cost 22 times their bytes in Python objects,
        are refused past 100 (431). (Invariant 5: bounded in size.)"""
        count = 16
        limits = attrs.evolve(ATTACKED, header_timeout=HOUR)
        async with serving(Toy(), limits=limits) as served, contextlib.AsyncExitStack() as stack:
            await served.get("/")  # imports and caches, before tracing
            clients, per_connection = await _held_memory(stack, served, head, count)
            assert per_connection <= len(head) * 1.25 + (32 << 10), (
                f"{per_connection / 1024:.0f} KiB per connection, {len(head) / 1024:.0f} KiB head"
            )
            if refused:
                answers = [await answer_and_close(client) for client in clients]
                assert {answer.status for answer in answers} == {431}


async def _held_memory(
    stack: contextlib.AsyncExitStack, served: Served, head: bytes, count: int
) -> tuple[list[Client], float]:
    """`count` connections that sent `head`, and the memory traced per connection."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        clients = await open_many(stack, served.port, count)
        for client in clients:
            await client.send(head)
        await _read_by_now(served)
        gc.collect()
        return clients, (tracemalloc.get_traced_memory()[0] - before) / count
    finally:
        tracemalloc.stop()


async def _read_by_now(served: Served) -> None:
    """Return once the server has read and handled what every client sent before.

    The server's tasks woken by those bytes run before the one a later request on
    a connection of its own wakes, and this waits for a few such round trips (from
    the other address, which the per-address cap leaves alone).
    """
    for _ in range(3):
        async with connect(served.port, OTHER_ADDRESS) as probe:
            await probe.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert (await probe.responses(1))[0].status == 200


_LOWERED_THEN_SERVE: Final = (
    "import os, resource, sys\n"
    "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'actors', 'serve', *sys.argv[1:]])\n"
)


async def test_serve_raises_its_soft_open_file_limit_to_the_hard_one_and_says_so() -> None:
    """Started with a soft limit of 256, ``serve --http`` runs with the hard one, and
    its log names both: a thousand slow clients no longer exhaust its descriptors."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard <= 256:
        pytest.skip(f"the hard limit on open files is {hard}: nothing to raise")
    command = (sys.executable, "-c", _LOWERED_THEN_SERVE)
    async with http_server("--state", "memory", command=command) as server:
        limits = await trio.Path(f"/proc/{server.process.pid}/limits").read_text()
        log = server.log.text()  # logged before it listens
    (soft_now,) = re.findall(r"Max open files\s+(\d+)", limits)
    assert int(soft_now) == hard
    assert f"open files: soft limit 256, now {hard} (the hard limit)" in log


@pytest.mark.parametrize(
    ("host", "group"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::ffff:127.0.0.2", "127.0.0.2"),
        ("2001:db8::1", "2001:db8::/64"),
        ("2001:db8::ffff:ffff:ffff:ffff", "2001:db8::/64"),
        ("2001:db8:0:1::1", "2001:db8:0:1::/64"),
        ("fe80::1%eth0", "fe80::/64"),
    ],
)
def test_an_ipv6_client_counts_as_its_64(host: str, group: str) -> None:
    """One IPv6 subscriber is given a /64: its 2**64 addresses share one cap."""
    assert _address_group(host) == group
