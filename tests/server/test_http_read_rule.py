"""The read rule of our HTTP/1.1 server (`actors.server.http._server._ReadRule`).

Between requests a connection either tries the socket first (trio's way) or waits for
readability first, by what its last tries found. The rule itself is checked as the
two-bit count it is; then, on a real server on 127.0.0.1, that every way a client sends
(one request after another, two in one write, a request in pieces, ahead of its answer)
is served alike whichever way the rule reads, and that idleness, the server's stop, EOF
and a reset still close a connection that waits first. Which way each read went is
recorded by wrapping the rule's two methods (the real ones run): in-process, a fast
handler answers without a checkpoint, so the server is back to reading before the client
task sends again, and a sequential client's tries miss every time.

The system calls this saves are measured, not tested (under strace the server is slowed
so much that the client's next request is always there first): see the report of the
change.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs
import pytest
import trio
import trio.testing

from actors.server.http import _server
from actors.server.http._server import _PROBE_EVERY, FastAnswer, RawHeaders, WireLimits, _ReadRule

from .test_wire import DEADLINE, Client, Toy, post, serving

if TYPE_CHECKING:
    from collections.abc import Callable

LIMITS: Final = WireLimits(keep_alive_timeout=60.0, max_connections=1)
"""Idle connections stay (so a close seen is not the keep-alive timeout's); one at a time."""


@attrs.define
class Reads:
    """What the rule decided and was told, in order: try, wait, hit, miss."""

    events: list[str] = attrs.field(factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Record every decision of every connection's rule (the real methods run)."""
        tries_first, found = _ReadRule.tries_first, _ReadRule.found

        def spied_tries_first(rule: _ReadRule) -> bool:
            tries = tries_first(rule)
            self.events.append("try" if tries else "wait")
            return tries

        def spied_found(rule: _ReadRule, *, waiting: bool) -> None:
            self.events.append("hit" if waiting else "miss")
            found(rule, waiting=waiting)

        monkeypatch.setattr(_ReadRule, "tries_first", spied_tries_first)
        monkeypatch.setattr(_ReadRule, "found", spied_found)

    def waits(self) -> int:
        return self.events.count("wait")

    @property
    def waiting(self) -> bool:
        """Whether the last read waited first."""
        decisions = [event for event in self.events if event in ("try", "wait")]
        return decisions[-1:] == ["wait"]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    spy = Reads()
    spy.install(monkeypatch)
    return spy


async def echo(
    method: str, path: str, headers: RawHeaders, body: bytes, client: object
) -> FastAnswer | None:
    """A fast handler that answers at once, without a checkpoint: the body back.

    ``/app`` is left to the ASGI app.
    """
    if path == "/app":
        return None
    return 200, [(b"content-length", b"%d" % len(body))], body


def gated(gate: list[trio.Event]) -> Callable[..., object]:
    """A fast handler that answers once the next event of `gate` is set."""

    async def handler(
        method: str, path: str, headers: RawHeaders, body: bytes, client: object
    ) -> FastAnswer | None:
        await gate[0].wait()  # the test sets gate[0]: the one waited on
        gate.pop(0)
        return await echo(method, path, headers, body, client)

    return handler


async def one_by_one(client: Client, count: int, start: int = 0) -> list[bytes]:
    """`count` requests, each sent once the answer before it is in: their bodies back."""
    for number in range(start, start + count):
        await client.send(post(b"/", b"r%d" % number))
        await client.responses(number + 1)
    return [answer.body for answer in client.done[start : start + count]]


class TestTheRule:
    def test_a_new_connection_tries_first(self) -> None:
        assert _ReadRule().tries_first()

    def test_one_miss_among_hits_keeps_trying(self) -> None:
        """A two-bit count: a lone miss does not make it wait."""
        rule = _ReadRule()
        for _ in range(5):
            rule.found(waiting=False)
            assert rule.tries_first()
            rule.found(waiting=True)
            assert rule.tries_first()

    def test_two_misses_make_it_wait_with_a_probe_every_so_often(self) -> None:
        rule = _ReadRule()
        rule.found(waiting=False)
        rule.found(waiting=False)
        decisions = []
        for _ in range(3 * _PROBE_EVERY):
            tries = rule.tries_first()
            decisions.append(tries)
            if tries:
                rule.found(waiting=False)  # each probe misses: it stays waiting
        expected = ([False] * (_PROBE_EVERY - 1) + [True]) * 3
        assert decisions == expected

    def test_one_hit_among_misses_keeps_waiting_two_make_it_try(self) -> None:
        rule = _ReadRule()
        for _ in range(5):
            rule.found(waiting=False)  # saturated
        rule.found(waiting=True)
        assert not rule.tries_first()
        rule.found(waiting=True)
        assert rule.tries_first()


class TestServed:
    async def test_a_sequential_client_is_served_while_the_rule_waits_first(
        self, reads: Reads
    ) -> None:
        """Each try misses, then reads wait first (probes aside); every answer is right."""
        count = 3 * _PROBE_EVERY
        async with serving(Toy(), LIMITS, fast=echo) as served, served.connect() as client:
            bodies = await one_by_one(client, count)
        assert bodies == [b"r%d" % number for number in range(count)]
        # The first read of the connection tries (and may find the request there); then
        # each try misses, and from the second miss on the rule waits first, probing (and
        # missing) every _PROBE_EVERY-th read.
        decisions = [event for event in reads.events if event in ("try", "wait")]
        waited = decisions[decisions.index("wait") :]
        assert waited[: 2 * _PROBE_EVERY] == (["wait"] * (_PROBE_EVERY - 1) + ["try"]) * 2
        assert decisions.index("wait") <= 3
        assert "hit" not in reads.events[2:]

    async def test_the_asgi_app_is_served_alike_while_the_rule_waits_first(
        self, reads: Reads
    ) -> None:
        """Fast answers turn the rule to waiting; then requests for the app (`_watch`)."""
        toy = Toy()
        async with serving(toy, LIMITS, fast=echo) as served, served.connect() as client:
            await one_by_one(client, 4)
            assert reads.waiting
            await client.send(b"GET /app HTTP/1.1\r\nHost: t\r\n\r\n")
            (answer,) = (await client.responses(5))[4:]
            await client.send(b"GET /app HTTP/1.1\r\nHost: t\r\n\r\n")
            (again,) = (await client.responses(6))[5:]
        assert (answer.status, again.status) == (200, 200)
        assert [scope["path"] for scope in toy.scopes] == ["/app", "/app"]

    async def test_two_requests_in_one_write_are_answered_in_order_either_way(
        self, reads: Reads
    ) -> None:
        async with serving(Toy(), LIMITS, fast=echo) as served, served.connect() as client:
            await client.send(post(b"/", b"a") + post(b"/", b"b"))  # tried first
            await client.responses(2)
            await one_by_one(client, 3, start=2)
            assert reads.waiting
            for pair in range(4):  # each pair's first read waits first (or probes)
                first, second = b"p%da" % pair, b"p%db" % pair
                await client.send(post(b"/", first) + post(b"/", second))
                answers = await client.responses(5 + 2 * pair + 2)
                assert [answer.body for answer in answers[-2:]] == [first, second]
        assert [answer.body for answer in client.done[:2]] == [b"a", b"b"]

    async def test_a_request_in_pieces_is_read_whole_after_a_wait_first(self, reads: Reads) -> None:
        """Its first piece waits first; the rest of it is read as it comes."""
        request = post(b"/", b"in pieces")
        async with serving(Toy(), LIMITS, fast=echo) as served, served.connect() as client:
            await one_by_one(client, 3)
            assert reads.waiting
            for at in range(0, len(request), 7):
                await client.send(request[at : at + 7])
                await trio.testing.wait_all_tasks_blocked()  # the server read it and waits
            (answer,) = (await client.responses(4))[3:]
        assert answer.body == b"in pieces"

    async def test_a_client_that_sends_ahead_turns_the_rule_back_to_trying(
        self, reads: Reads
    ) -> None:
        """Its next request is in before the server reads: probes hit, tries come back."""
        gate: list[trio.Event] = []
        async with (
            serving(Toy(), LIMITS, fast=gated(gate)) as served,
            served.connect() as client,
        ):
            gate.extend(trio.Event() for _ in range(3))
            for event in gate[:]:
                event.set()
            await one_by_one(client, 3)
            assert reads.waiting
            marker = len(reads.events)
            count = 3 * _PROBE_EVERY
            gate.extend(trio.Event() for _ in range(count + 1))
            await client.send(post(b"/", b"s0"))
            for number in range(1, count + 1):
                await trio.testing.wait_all_tasks_blocked()  # s(number-1) held by its gate
                await client.send(post(b"/", b"s%d" % number))  # in before its read
                gate[0].set()
                await client.responses(3 + number)
            gate[0].set()
            answers = await client.responses(3 + count + 1)
        assert [answer.body for answer in answers[3:]] == [b"s%d" % n for n in range(count + 1)]
        later = reads.events[marker:]
        assert "wait" in later[:4]  # it was waiting first
        last_wait = len(later) - later[::-1].index("wait")
        # Trying first again, and finding each request there: two probe hits, then tries.
        assert later[last_wait:].count("hit") >= _PROBE_EVERY
        assert "wait" not in later[last_wait:]


class TestClosing:
    async def test_an_idle_connection_that_waits_first_is_closed_after_the_timeout(
        self, reads: Reads
    ) -> None:
        limits = WireLimits(keep_alive_timeout=0.3)
        async with serving(Toy(), limits, fast=echo) as served, served.connect() as client:
            await one_by_one(client, 3)
            assert await client.closed()
        assert reads.waiting

    async def test_the_server_stop_closes_an_idle_connection_that_waits_first(
        self, reads: Reads
    ) -> None:
        """Stopped while its keep-alive timeout (60 s) is far: the idle scope is cancelled."""
        async with serving(Toy(), LIMITS, fast=echo) as served, served.connect() as client:
            await one_by_one(client, 3)
            await trio.testing.wait_all_tasks_blocked()
            assert reads.waiting
            served.stop.set()
            assert await client.closed()

    @pytest.mark.parametrize("how", ["eof", "reset"])
    async def test_a_client_gone_while_the_rule_waits_first_frees_its_slot(
        self, reads: Reads, how: str
    ) -> None:
        """One connection at a time: the next is served only if the gone one was noticed."""
        async with serving(Toy(), LIMITS, fast=echo) as served:
            async with served.connect() as client:
                await one_by_one(client, 3)
                await trio.testing.wait_all_tasks_blocked()
                assert reads.waiting
                if how == "reset":  # close with SO_LINGER 0: an RST, not a FIN
                    linger = struct.pack("ii", 1, 0)
                    client.stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            with trio.fail_after(DEADLINE):
                await trio.testing.wait_all_tasks_blocked()
            async with served.connect() as second:
                assert await one_by_one(second, 1) == [b"r0"]


def test_the_stream_is_a_plain_socket_so_the_descriptor_is_the_clients() -> None:
    """The rule reads the file descriptor: the server must have no TLS stream to wrap."""
    assert "ssl" not in vars(_server)
    assert "SSLStream" not in Path(_server.__file__).read_text(encoding="utf-8")
