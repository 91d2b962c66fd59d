"""A store split by session at its edges: a recording of a split that stopped half-way,
URLs that are not what they should be, and what a split raises (a review's findings;
each failed against the first version)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest

from actors.server.http._operator_routes import Readiness
from actors.store import StoreError, check_store_url, open_split_store, open_store
from actors.store._option import state_urls
from actors.store._partitions import _claim_id, _record
from actors.store._postgres import without_password
from protocol import ActorKey, ToolContext, shard_for

from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_urls_fixture,
    postgres_server_fixture,
)
from .test_split_store import partition_ids

if TYPE_CHECKING:
    from collections.abc import Callable


def half_recorded(urls: list[str]) -> list[str]:
    """What a process that stopped between recording the first and the second database
    leaves: both have their id, the split is recorded in the first only."""
    shown = [without_password(url)[0] for url in urls]
    connections = [psycopg.connect(url, autocommit=True) for url in urls]
    try:
        ids = [_claim_id(connection) for connection in connections]
        _record(connections[0], shown[0], ids, shown)
    finally:
        for connection in connections:
            connection.close()
    return ids


class TestHalfRecorded:
    async def test_a_split_another_process_is_half_way_through_recording_is_finished(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """What a process opening at the same moment meets: every database has its id, the
        split is recorded in the first only. Opening finishes the recording, as the other
        process would have, instead of calling the second database a stranger."""
        urls = fresh_postgres_urls(2)
        ids = half_recorded(urls)
        async with open_split_store(urls) as store:
            assert sorted(store.partitions) == sorted(ids)
        assert [sorted(partition_ids(url)[1]) for url in urls] == [sorted(ids)] * 2

    async def test_a_partition_whose_recording_did_not_finish_is_not_opened_alone(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """Alone, it would take sessions the split places in the other partition."""
        urls = fresh_postgres_urls(2)
        half_recorded(urls)
        with pytest.raises(StoreError, match="the recording did not finish"):
            async with open_store(urls[1]):
                pass

    async def test_state_written_before_a_half_recorded_split_is_finished_is_refused(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """State in the unrecorded database (written by an older version, alone) would be
        hidden from the sessions the hash places elsewhere: the split is not finished."""
        urls = fresh_postgres_urls(2)
        ids = half_recorded(urls)
        session = next(f"s{n}" for n in range(1000) if shard_for(f"s{n}", sorted(ids)) == ids[0])
        with psycopg.connect(urls[1], autocommit=True) as older_version:
            older_version.execute(
                "CREATE TABLE actor_state (key text PRIMARY KEY, session text NOT NULL, "
                "version bigint NOT NULL, blob bytea NOT NULL, updated_at double precision "
                "NOT NULL)"
            )
            older_version.execute(
                "INSERT INTO actor_state VALUES (%s, %s, 1, 'x', 0)",
                (f'["planning","{session}",null,null]', session),
            )
        with pytest.raises(StoreError, match="holds the state of a store that is not split"):
            async with open_split_store(urls):
                pass


class TestUrls:
    async def test_a_conninfo_with_a_password_is_refused_and_its_password_not_shown(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """A keyword/value conninfo is no URL: its password would not be found to hide."""
        dsns = [
            psycopg.conninfo.make_conninfo(
                **psycopg.conninfo.conninfo_to_dict(url), password="hunter2"
            )
            for url in fresh_postgres_urls(2)
        ]
        with pytest.raises(ValueError, match="unknown state store URL") as caught:
            async with open_split_store(dsns):
                pass
        assert "hunter2" not in str(caught.value)

    def test_a_typo_in_one_of_several_urls_does_not_print_its_password(self) -> None:
        with pytest.raises(ValueError, match=r"postgresq://u:\*\*\*@h/b") as caught:
            check_store_url(["postgresql://u:secret@h/a", "postgresq://u:secret@h/b"])
        assert "secret" not in str(caught.value)

    def test_an_environment_list_with_a_typo_is_a_list_whose_typo_is_named(self) -> None:
        """Never one URL holding the others (whose passwords the errors would then quote)."""
        value = state_urls("postgresql://u:pw1@h/a postgresq://u:pw2@h/b")
        assert value == ("postgresql://u:pw1@h/a", "postgresq://u:pw2@h/b")
        with pytest.raises(ValueError, match="unknown state store URL") as caught:
            check_store_url(value)
        assert "pw2" not in str(caught.value)
        assert state_urls("sqlite:///my state.db") == "sqlite:///my state.db"

    async def test_one_string_is_not_a_list_of_urls(self) -> None:
        with pytest.raises(TypeError, match="a list of PostgreSQL URLs"):
            async with open_split_store("postgresql://h/a"):  # type: ignore[arg-type]
                pass


async def test_a_session_id_no_store_can_take_is_a_store_error_split_too(
    fresh_postgres_urls: Callable[[int], list[str]],
) -> None:
    """Built in process (parse_call refuses it at the boundary): a lone surrogate."""
    key = ActorKey("planning", ToolContext("a\ud800"))
    async with open_split_store(fresh_postgres_urls(2)) as split:
        with pytest.raises(StoreError, match="not valid Unicode"):
            await split.save(key, b"x", None)


async def test_readiness_reads_every_partition(
    fresh_postgres_urls: Callable[[int], list[str]],
) -> None:
    """Ready while every partition answers; not ready once one of them fails, whichever."""
    urls = fresh_postgres_urls(2)
    async with open_split_store(urls) as split:
        readiness = Readiness(split, lambda: False, reuse_for=0.0)
        assert await readiness.problem() is None
        for url in urls:  # the table gone: this partition's reads fail, the other's go on
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("ALTER TABLE actor_state RENAME TO gone")
            problem = await readiness.problem()
            assert problem is not None
            assert "is unreachable" in problem
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("ALTER TABLE gone RENAME TO actor_state")
        assert await readiness.problem() is None
