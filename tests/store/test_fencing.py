"""Invariant 9 (one writer everywhere): two writers on one PostgreSQL database, same keys.

Routing normally sends a key to one process; these tests take that away and
let two runtimes serve the same five sessions at once, so that each keeps a
copy of the same keys' state and both write them. What must hold is the
store's fence: a save names the version its writer loaded, and a save
against a version someone else has replaced is refused and run again on the
state as stored. So

* every goal whose creation was acknowledged is in the final state, read by
  a fresh runtime, under the id its reply gave: no update lost;
* nothing is there twice, and nothing that was not acknowledged: a call
  whose write the fence refused on every attempt was answered with an error,
  so its change must never land, not even with a later call's write;
* ``write_conflicts`` (or, across processes, the servers' warnings) shows
  that the fence acted: the writers did collide.

Once in one process (two stores, two runtimes), once as two ``serve --state
postgresql://…`` processes over stdio, and once with a rival that writes the
key before every save, so that every attempt of a call meets the fence.
"""

from __future__ import annotations

import re
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import attrs
import trio

from actors import open_runtime
from actors.modules import planning
from actors.store import open_store

from .._calls import call_as, check_goal_lists, listed_goals
from .._mcp_helpers import RawServer, raw_server, tools_call
from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_url_fixture,
    postgres_server_fixture,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Collection

    from actors import Runtime
    from actors.store import PartChanges, StateStore, Stored
    from protocol import ActorKey

SESSIONS: Final = [f"shared-{index}" for index in range(5)]
CALLS_PER_WRITER: Final = 100
_CREATED: Final = re.compile(r"Created goal (g\d+): (.+)")
_CONFLICT: Final = "changed under this writer"
_GUARD: Final = 60  # seconds: a hung writer fails the test instead of hanging it


@attrs.define
class Ledger:
    """Every goal sent, and how its call was answered."""

    sent: dict[str, str] = attrs.Factory(dict)
    """Goal text → the session it was sent to."""
    acknowledged: dict[str, str] = attrs.Factory(dict)
    """Goal text → the goal id its reply gave."""
    refused: dict[str, str] = attrs.Factory(dict)
    """Goal text → the error its call got instead."""

    def plan(self, writer: str) -> list[tuple[str, str]]:
        """`writer`'s calls, (goal text, session), spread over every session in turn."""
        calls = [
            (f"goal-{writer}-{index}", SESSIONS[index % len(SESSIONS)])
            for index in range(CALLS_PER_WRITER)
        ]
        self.sent.update(calls)
        return calls

    def summary(self) -> str:
        return f"{len(self.acknowledged)} acknowledged, {len(self.refused)} refused,"

    def record(self, text: str, reply: str, *, is_error: bool) -> None:
        if is_error:
            self.refused[text] = reply
            return
        found = _CREATED.fullmatch(reply)
        assert found is not None, f"unreadable reply {reply!r}"
        assert found[2] == text, f"the call creating {text!r} answered {reply!r}"
        self.acknowledged[text] = found[1]


def check_final_state(ledger: Ledger, stored: dict[str, list[tuple[str, str]]]) -> None:
    """The store holds exactly the acknowledged goals, each under the id its reply gave."""
    assert len(ledger.acknowledged) + len(ledger.refused) == len(ledger.sent), "unanswered calls"
    check_goal_lists(stored, ledger.sent)
    held = {text: goal_id for goals in stored.values() for goal_id, text in goals}
    lost = {text: ack for text, ack in ledger.acknowledged.items() if held.get(text) != ack}
    assert not lost, f"{len(lost)} acknowledged goals lost or moved: {sorted(lost.items())[:5]}…"
    landed = sorted(set(held) & set(ledger.refused))
    assert not landed, f"refused, yet stored: {landed}; e.g. {ledger.refused[landed[0]]!r}"


async def stored_goals(url: str) -> dict[str, list[tuple[str, str]]]:
    """Each session's goals (id, text), as a fresh runtime on `url` lists them."""
    stored = {}
    async with open_store(url) as store, open_runtime([planning], store=store) as runtime:
        for session in SESSIONS:
            result = await call_as(runtime, "planning__list_goals", session)
            stored[session] = listed_goals(result.first_text)
    return stored


# ---- two runtimes in one process --------------------------------------------------


async def _create(runtime: Runtime, ledger: Ledger, text: str, session: str) -> None:
    result = await call_as(runtime, "planning__create_goal", session, goal=text)
    ledger.record(text, result.first_text, is_error=result.is_error)


async def test_two_runtimes_writing_the_same_keys_lose_no_acknowledged_goal(
    fresh_postgres_url: str,
) -> None:
    url = fresh_postgres_url
    ledger = Ledger()
    # Interleaved: a's call, b's call, a's, ... so that both hold every key at once.
    calls = list(zip(ledger.plan("a"), ledger.plan("b"), strict=True))
    async with (
        open_store(url) as store_a,
        open_store(url) as store_b,
        open_runtime([planning], store=store_a) as a,
        open_runtime([planning], store=store_b) as b,
    ):
        with trio.fail_after(_GUARD):
            async with trio.open_nursery() as nursery:
                for (text_a, session_a), (text_b, session_b) in calls:
                    nursery.start_soon(_create, a, ledger, text_a, session_a)
                    nursery.start_soon(_create, b, ledger, text_b, session_b)
        stats = [a.statistics(), b.statistics()]
    check_final_state(ledger, await stored_goals(url))
    conflicts = sum(s.write_conflicts for s in stats)
    print(ledger.summary(), f"{conflicts} conflicts")
    assert conflicts > 0, f"the writers never collided: {stats}"
    assert sum(s.write_failures for s in stats) == 0, stats
    assert sum(s.state_writes for s in stats) == len(ledger.acknowledged), stats


# ---- two server processes ----------------------------------------------------------


async def _send_all(server: RawServer, calls: list[tuple[str, str]]) -> None:
    for text, session in calls:
        # The request's id is the goal's text: each reply names what it answers.
        # The host's channel (_meta): a stdio call's arguments stay in its own session.
        meta = {"sessionId": session}
        await server.send(
            tools_call("planning__create_goal", {"goal": text}, request_id=text, meta=meta)
        )


async def _pipeline(server: RawServer, ledger: Ledger, calls: list[tuple[str, str]]) -> None:
    """Send every call without waiting for replies, while reading the replies."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_send_all, server, calls)
        for _ in calls:
            reply = await server.receive()
            result = reply["result"]
            ledger.record(reply["id"], result["content"][0]["text"], is_error=result["isError"])


async def test_two_server_processes_writing_the_same_keys_lose_no_acknowledged_goal(
    fresh_postgres_url: str,
) -> None:
    url = fresh_postgres_url
    ledger = Ledger()
    async with raw_server("--state", url) as a, raw_server("--state", url) as b:
        with trio.fail_after(_GUARD):
            await a.initialize()
            await b.initialize()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_pipeline, a, ledger, ledger.plan("a"))
                nursery.start_soon(_pipeline, b, ledger, ledger.plan("b"))
        logs = [a.log.text(), b.log.text()]
    check_final_state(ledger, await stored_goals(url))
    conflicts = sum(log.count(_CONFLICT) for log in logs)
    print(ledger.summary(), f"{conflicts} conflicts")
    assert conflicts > 0, "the two servers never collided"
    assert "Traceback" not in "".join(logs)


# ---- a rival that writes before every save -----------------------------------------


@attrs.define(eq=False)
class RivalBeforeEverySave:
    """A store whose every save finds the key just rewritten by another writer, while armed.

    The rival writes the stored blob back unchanged, through a second
    connection to the same database: a real writer the first one does not
    know about, which changes only the version.
    """

    store: StateStore
    rival: StateStore
    armed: bool = False

    @property
    def url(self) -> str:
        return self.store.url

    async def load(self, key: ActorKey, *, parts: bool = False) -> Stored | None:
        return await self.store.load(key, parts=parts)

    async def version(self, key: ActorKey) -> int | None:
        return await self.store.version(key)

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        if self.armed:
            stored = await self.rival.load(key)
            assert stored is not None, "the rival rewrites a key that is stored"
            await self.rival.save(key, stored.blob, stored.version)
        return await self.store.save(key, blob, expected, changes=changes)

    async def delete_session(self, session_id: str) -> int:
        return await self.store.delete_session(session_id)

    async def touch(self, keys: Collection[ActorKey]) -> None:
        await self.store.touch(keys)

    async def sweep(self, retention: float) -> int:
        return await self.store.sweep(retention)


@asynccontextmanager
async def rival_store(url: str) -> AsyncIterator[RivalBeforeEverySave]:
    async with open_store(url) as store, open_store(url) as rival:
        yield RivalBeforeEverySave(store, rival)


async def test_a_change_the_fence_refused_every_time_never_lands(fresh_postgres_url: str) -> None:
    session = SESSIONS[0]
    ledger = Ledger(sent={text: session for text in ("first", "refused", "after")})
    async with (
        rival_store(fresh_postgres_url) as store,
        open_runtime([planning], store=store) as runtime,
    ):
        await _create(runtime, ledger, "first", session)
        store.armed = True
        await _create(runtime, ledger, "refused", session)
        store.armed = False
        listed = await call_as(runtime, "planning__list_goals", session)
        await _create(runtime, ledger, "after", session)
        stats = runtime.statistics()
    assert list(ledger.acknowledged) == ["first", "after"], ledger
    assert "another process writes the same key" in ledger.refused["refused"]
    # A read-only call right after shows what is stored, not the refused change.
    assert listed.first_text == "Goals (1):\n- g1: first"
    assert ledger.acknowledged["after"] == "g2"
    check_final_state(ledger, {session: (await stored_goals(fresh_postgres_url))[session]})
    assert stats.write_conflicts >= 3, stats
