"""A store split by session over PostgreSQL databases: the store contract over it, one
partition per session, and a changed list of partitions refused, never silently followed.

Each partition is a fresh database on the test session's one PostgreSQL server
(``tests/_postgres.py``); the partitions are read directly with psycopg to see
where each key really is.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import TYPE_CHECKING

import psycopg
import pytest
import trio
from psycopg import sql

from actors._argparse import with_environment
from actors.server._cli import parser
from actors.store import SplitStore, StoreError, check_store_url, open_split_store, open_store
from actors.store._base import encode_key
from protocol import ActorKey, ToolContext, shard_for

from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_urls_fixture,
    postgres_server_fixture,
)
from . import test_partwise, test_store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from actors.store import StateStore

    from .._postgres import PostgresServer


def key(session: str, module: str = "planning") -> ActorKey:
    return ActorKey(module, ToolContext(session))


def stored_keys(url: str) -> set[str]:
    """The encoded keys a partition holds, read by psycopg alone (no store code)."""
    with psycopg.connect(url) as connection:
        exists = connection.execute("SELECT to_regclass('actor_state')").fetchone()
        if exists == (None,):
            return set()
        return {row[0] for row in connection.execute("SELECT key FROM actor_state")}


def partition_ids(url: str) -> tuple[str, list[str]]:
    """A partition's own recorded id and the ids of its split."""
    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT id, split FROM actor_partition").fetchone()
    assert row is not None
    return row[0], row[1]


def spread_sessions(store: StateStore, prefix: str, each: int) -> list[str]:
    """`each` sessions named `prefix`N in every partition of the split `store`, sorted: the
    ids are random, so fixed names could all land in one partition."""
    assert isinstance(store, SplitStore)
    chosen: dict[int, list[str]] = {id(its): [] for its in store.partitions.values()}
    for number in itertools.count():
        name = f"{prefix}{number}"
        sessions = chosen[id(store.partition_of(name))]
        if len(sessions) < each:
            sessions.append(name)
        if all(len(sessions) == each for sessions in chosen.values()):
            return sorted(name for sessions in chosen.values() for name in sessions)
    raise AssertionError("unreachable")


async def save_sessions(store: StateStore, count: int) -> list[ActorKey]:
    keys = [key(f"s{index}", module) for index in range(count) for module in ("a", "b")]
    for each in keys:
        await store.save(each, b"x", None)
    return keys


@pytest.fixture(scope="module")
def contract_split(postgres_server: PostgresServer) -> Iterator[tuple[str, ...]]:
    """Two databases for the contract's cases, made once: emptying them is cheaper."""
    names = [postgres_server.create_database() for _ in range(2)]
    yield tuple(postgres_server.url(name) for name in names)
    for name in names:
        postgres_server.drop_database(name)


def empty_partitions(urls: Iterable[str]) -> None:
    """Delete every key's state and parts from the partitions `urls`; the split stays."""
    with contextlib.ExitStack() as stack:
        for url in urls:
            connection = stack.enter_context(psycopg.connect(url, autocommit=True))
            for table in ("actor_state", "actor_parts"):
                if connection.execute("SELECT to_regclass(%s)", (table,)).fetchone() != (None,):
                    connection.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))


@pytest.fixture
def store_url(contract_split: tuple[str, ...]) -> tuple[str, ...]:
    """The contract's split, recorded by the first case and empty for each."""
    empty_partitions(contract_split)
    return contract_split


class TestSplitStoreContract(test_store.TestContract):
    """Every case of the stores' contract (tests/store/test_store.py), over two partitions."""


class TestSplitStoreParts(test_partwise.TestStoreParts):
    """Every case of the parts' contract (tests/store/test_partwise.py), over two partitions."""


class TestPlacement:
    async def test_each_key_is_in_exactly_the_partition_of_its_session(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """Read alone, the partitions hold disjoint keys, together all of them, each where
        the rendezvous hash of its session over the recorded ids says."""
        urls = fresh_postgres_urls(3)
        async with open_store(urls) as store:
            keys = await save_sessions(store, 30)
        held = [stored_keys(url) for url in urls]
        assert sum(map(len, held)) == len(keys)
        assert set().union(*held) == {encode_key(each) for each in keys}
        ids = [partition_ids(url)[0] for url in urls]
        for each in keys:
            owner = ids.index(shard_for(each.context.session_id, ids))
            assert encode_key(each) in held[owner]

    async def test_sessions_spread_over_every_partition(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = fresh_postgres_urls(2)
        async with open_store(urls) as store:
            await save_sessions(store, 40)
        assert all(stored_keys(url) for url in urls)

    async def test_a_session_spans_no_partition_boundary_and_ends_whole(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """Every module's key of a session is in one partition; ending it empties it there."""
        urls = fresh_postgres_urls(2)
        async with open_store(urls) as store:
            await save_sessions(store, 10)
            assert await store.delete_session("s3") == 2
            remaining = await store.entries()
        assert {entry.key.context.session_id for entry in remaining} == {
            f"s{index}" for index in range(10) if index != 3
        }
        assert [entry.key for entry in remaining] == sorted(
            (entry.key for entry in remaining), key=encode_key
        )

    async def test_a_tenants_listing_and_a_sweep_span_the_partitions(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = fresh_postgres_urls(2)
        async with open_store(urls) as store:
            sessions = spread_sessions(store, "acme/", 3)
            for session in [*sessions, "other"]:
                await store.save(key(session), b"x", None)
            listed = await store.entries(tenant="acme")
            assert {entry.key.context.session_id for entry in listed} == set(sessions)
            assert all(stored_keys(url) & {encode_key(key(s)) for s in sessions} for url in urls)
            await store.touch([key(sessions[0]), key("other")])
            assert await store.sweep(0.0) == len(sessions) + 1
        assert not any(stored_keys(url) for url in urls)

    async def test_a_partition_that_fails_is_a_store_error_and_the_others_still_sweep(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """A split store raises what a store raises (StoreError), never a nursery's group."""
        urls = fresh_postgres_urls(2)
        async with open_store(urls) as store:
            assert isinstance(store, SplitStore)
            for session in spread_sessions(store, "s", 2):  # two in each partition
                await store.save(key(session), b"x", None)
            broken, working = urls
            with psycopg.connect(broken, autocommit=True) as admin:
                admin.execute("ALTER TABLE actor_state RENAME TO gone")
            with pytest.raises(StoreError, match="sweep failed"):
                await store.sweep(0.0)
            with pytest.raises(StoreError, match="listing failed"):
                await store.entries()
        assert not stored_keys(working)  # its sweep went through

    async def test_the_urls_in_another_order_find_every_session(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """Placement hashes the recorded ids, not the URLs' positions."""
        urls = fresh_postgres_urls(3)
        async with open_store(urls) as store:
            keys = await save_sessions(store, 10)
        async with open_store(urls[::-1]) as store:
            assert all([await store.load(each) is not None for each in keys])

    async def test_one_url_opens_a_store_of_its_own(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        """Zero cost for one URL: no split store in front, nothing recorded."""
        (url,) = fresh_postgres_urls(1)
        async with open_store([url]) as store:
            assert not isinstance(store, SplitStore)
            await store.save(key("s"), b"x", None)
        with psycopg.connect(url) as connection:
            assert connection.execute("SELECT to_regclass('actor_partition')").fetchone() == (None,)

    async def test_processes_opening_fresh_databases_at_once_record_one_split(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = fresh_postgres_urls(2)
        opened: list[list[str]] = []

        async def open_and_look() -> None:
            async with open_split_store(urls) as store:
                assert isinstance(store, SplitStore)
                opened.append(sorted(store.partitions))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(open_and_look)
        assert len(opened) == 4
        assert all(ids == opened[0] for ids in opened)
        assert [sorted(partition_ids(url)[1]) for url in urls] == [opened[0], opened[0]]


class TestChangedList:
    """Each change that would hide sessions is refused, naming what differs."""

    async def split_of(
        self, fresh_postgres_urls: Callable[[int], list[str]], count: int
    ) -> list[str]:
        urls = fresh_postgres_urls(count)
        async with open_store(urls) as store:
            await save_sessions(store, 10)
        return urls

    async def refused(self, urls: list[str], match: str) -> None:
        with pytest.raises(StoreError, match=match):
            async with open_store(urls):
                pass

    async def test_a_missing_partition(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = await self.split_of(fresh_postgres_urls, 3)
        await self.refused(
            urls[:2], rf"1 of the 3 partitions .* are missing: {urls[2]} \(as recorded\)"
        )

    async def test_an_added_partition(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = await self.split_of(fresh_postgres_urls, 2)
        (added,) = fresh_postgres_urls(1)
        await self.refused([*urls, added], rf"{added} is not a partition of the split store")
        assert stored_keys(added) == set()

    async def test_a_partition_of_another_split(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        first = await self.split_of(fresh_postgres_urls, 2)
        second = await self.split_of(fresh_postgres_urls, 2)
        await self.refused([first[0], second[1]], rf"{second[1]} belongs to another split store")

    async def test_a_partition_opened_alone(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = await self.split_of(fresh_postgres_urls, 2)
        await self.refused([urls[1]], rf"{urls[1]} is one of the 2 partitions of a split store")

    async def test_a_database_with_the_state_of_an_unsplit_store(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = fresh_postgres_urls(2)
        async with open_store(urls[0]) as store:
            await store.save(key("s"), b"x", None)
        await self.refused(urls, rf"{urls[0]} holds the state of a store that is not split")

    async def test_one_database_under_two_urls(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        (url,) = fresh_postgres_urls(1)
        alias = f"{url}?application_name=alias"
        await self.refused([url, alias], "are one database")

    async def test_a_split_not_recorded_is_not_made_by_a_tool_that_makes_nothing(
        self, fresh_postgres_urls: Callable[[int], list[str]]
    ) -> None:
        urls = fresh_postgres_urls(2)
        with pytest.raises(StoreError, match="no split store is recorded"):
            async with open_store(urls, create="nothing"):
                pass


class TestUrls:
    @pytest.mark.parametrize(
        ("urls", "problem"),
        [
            (["postgresql://h/a", "sqlite:///x.db"], "URL 2 is the SQLite store 'sqlite:///x.db'"),
            (["memory", "postgresql://h/a"], "URL 1 is memory"),
            (["postgresql://u:secret@h/a", "postgresql://u:secret@h/a"], "URL 2 repeats URL 1"),
            ([], "no state store URL given"),
        ],
    )
    def test_several_urls_are_postgresql_and_distinct(self, urls: list[str], problem: str) -> None:
        with pytest.raises(ValueError, match=problem) as caught:
            check_store_url(urls)
        assert "secret" not in str(caught.value)

    def test_a_libpq_multi_host_url_is_one_url(self) -> None:
        """Commas belong to the URL (libpq's several hosts): nothing splits on them."""
        assert check_store_url(["postgresql://h1:5432,h2:5432/a"]) == "postgresql"

    def test_the_command_line_replaces_the_environments_urls(self) -> None:
        """One --state wins over MCP_ACTORS_STATE, as for any option that does not repeat."""
        environ = {"MCP_ACTORS_STATE": "postgresql://h/a postgresql://h/b"}
        cli = with_environment(parser(), environ)
        assert cli.parse_args([]).state == ("postgresql://h/a", "postgresql://h/b")
        assert cli.parse_args(["--state", "sqlite:///x.db"]).state == "sqlite:///x.db"
        given = ["--state", "postgresql://h/c", "--state", "postgresql://h/d"]
        assert cli.parse_args(given).state == ("postgresql://h/c", "postgresql://h/d")

    def test_a_sqlite_path_with_spaces_in_the_environment_is_one_url(self) -> None:
        cli = with_environment(parser(), {"MCP_ACTORS_STATE": "sqlite:///my state.db"})
        assert cli.parse_args([]).state == "sqlite:///my state.db"
