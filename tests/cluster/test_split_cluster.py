"""Shards on a real local Ray (num_cpus=2) over a store split by session in two PostgreSQL
databases: every shard opens the same split, and each session's state is in its partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest

from protocol import shard_for

from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_urls_fixture,
    postgres_server_fixture,
)

ray = pytest.importorskip("ray")

from actors.cluster import open_cluster  # noqa: E402  (needs ray)

from .._calls import call_params  # noqa: E402
from .test_cluster import _ray  # noqa: E402, F401  (the module's Ray, a fixture)

if TYPE_CHECKING:
    from collections.abc import Callable

SESSIONS = [f"s{n}" for n in range(8)]
PLANNING = ["actors.modules:planning"]


def held(url: str) -> tuple[str, set[str]]:
    """A partition's id and the sessions it holds keys of, read by psycopg alone."""
    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT id FROM actor_partition").fetchone()
        sessions = {s for (s,) in connection.execute("SELECT DISTINCT session FROM actor_state")}
    assert row is not None
    return row[0], sessions


def test_shards_share_a_split_store_and_a_new_cluster_finds_every_session(
    fresh_postgres_urls: Callable[[int], list[str]],
) -> None:
    urls = tuple(fresh_postgres_urls(2))
    with open_cluster(PLANNING, shards=2, state=urls) as cluster:
        for session in SESSIONS:
            result = cluster.call_blocking(
                call_params("planning__create_goal", session, goal=f"goal of {session}")
            )
            assert not result.is_error, result.first_text
    with open_cluster(PLANNING, shards=2, state=urls[::-1]) as cluster:
        for session in SESSIONS:
            listed = cluster.call_blocking(call_params("planning__list_goals", session)).first_text
            assert listed == f"Goals (1):\n- g1: goal of {session}"
    partitions = dict(map(held, urls))
    ids = sorted(partitions)
    for session in SESSIONS:
        assert session in partitions[shard_for(session, ids)]
