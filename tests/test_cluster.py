"""Shards on a real local Ray (num_cpus=2) over a real PostgreSQL: placement and failover.

One Ray instance for the module (it takes seconds to start); each test opens
its own cluster on a fresh database.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any

import pytest

from actors import UnknownToolError
from protocol import ProtocolError

from ._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401  (fixtures)

ray = pytest.importorskip("ray")

from actors.cluster import open_cluster  # noqa: E402  (needs ray)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from actors.cluster import Cluster


@pytest.fixture(scope="module", autouse=True)
def _ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def goal(session: str, text: str) -> dict[str, Any]:
    return {
        "name": "planning__create_goal",
        "arguments": {"goal": text},
        "_meta": {"sessionId": session},
    }


def goals(cluster: Cluster, session: str) -> str:
    listing = {"name": "planning__list_goals", "arguments": {}, "_meta": {"sessionId": session}}
    return cluster.call(listing).first_text


SESSIONS = [f"s{n}" for n in range(12)]
PLANNING = ["actors.modules:planning"]


def test_each_session_lives_on_its_shard_and_sees_only_its_state(fresh_postgres_url: str) -> None:
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        placed = {session: cluster.shard_of(session) for session in SESSIONS}
        assert set(placed.values()) == set(cluster.shards)  # both shards hold sessions
        for session in SESSIONS:
            result = cluster.call(goal(session, f"goal of {session}"))
            assert not result.is_error, result.first_text
        for session in SESSIONS:
            assert goals(cluster, session) == f"Goals (1):\n- g1: goal of {session}"
        assert cluster.pid_of("shard-0") != cluster.pid_of("shard-1")


def test_bad_input_is_refused_before_it_crosses(fresh_postgres_url: str) -> None:
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        with pytest.raises(UnknownToolError):
            cluster.call({"name": "planning__nope", "_meta": {"sessionId": "s"}})
        with pytest.raises(ProtocolError):
            cluster.call({"name": "planning__list_goals", "_meta": {"sessionId": 7}})
        bad = cluster.call(
            {"name": "planning__create_goal", "arguments": {"goal": 3}, "_meta": {"sessionId": "s"}}
        )
        assert bad.is_error
        assert "$.goal: expected a string" in bad.first_text


def test_a_killed_shard_comes_back_with_every_acknowledged_change(fresh_postgres_url: str) -> None:
    """kill -9 of a shard's process: Ray restarts it and its sessions load from PostgreSQL."""
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        victim = "shard-0"
        mine = [session for session in SESSIONS if cluster.shard_of(session) == victim]
        assert mine
        for session in mine:
            assert not cluster.call(goal(session, "before")).is_error
        old = cluster.pid_of(victim)
        os.kill(old, signal.SIGKILL)
        answers = _until_back(cluster, mine[0])
        assert cluster.pid_of(victim) != old
        for session in mine:
            listed = goals(cluster, session)
            assert listed.startswith("Goals ("), listed
            assert "- g1: before" in listed  # acknowledged before the kill: still there
        # Calls refused while the shard was down said so; none was silently dropped.
        assert all("was lost during the call" in text for text in answers[:-1])


def _until_back(cluster: Cluster, session: str) -> list[str]:
    """Call until the restarted shard answers; every answer's text, the last a success."""
    answers = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result = cluster.call(goal(session, "after"))
        answers.append(result.first_text)
        if not result.is_error:
            return answers
        time.sleep(0.2)
    pytest.fail(f"the shard did not come back: {answers[-3:]}")


def test_two_owners_of_one_session_lose_no_update(fresh_postgres_url: str) -> None:
    """Two clusters (as during a handover) both serve one session: the store fences them.

    Each stale owner's write is refused and its call runs again on the state
    as stored, so every acknowledged append is in the store, and the refusals
    show up as write conflicts.
    """
    session, appends = "contested", 15
    with (
        open_cluster(PLANNING, shards=1, state=fresh_postgres_url) as first,
        open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as second,
    ):
        acknowledged = [
            not cluster.call(goal(session, f"{label}{n}")).is_error
            for n in range(appends)
            for cluster, label in ((first, "a"), (second, "b"))  # turn by turn: always stale
        ]
        fenced = sum(s.write_conflicts for c in (first, second) for s in c.statistics().values())
    # Read through a new owner: a stale one's read-only calls see its own copy (no handover yet).
    with open_cluster(PLANNING, shards=1, state=fresh_postgres_url) as fresh:
        listed = goals(fresh, session)
    assert acknowledged.count(True) == 2 * appends
    assert listed.startswith(f"Goals ({2 * appends}):"), listed
    assert fenced > 0  # the two owners did meet, and the store refused the stale one
