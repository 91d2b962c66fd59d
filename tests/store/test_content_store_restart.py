"""A content store loaded again: it answers as before, and only a search pays for the index.

The index (each item's term counts) is never stored: a store read back from
its state store leaves it for the first search to build, so a restart's
first call costs no tokenizing. These tests restart over a real SQLite file
and check that searches rank exactly as before, that nothing but a search
builds the index, and that a store written by the previous version (schema
1, without line counts) still loads.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from hypothesis import given
from hypothesis import strategies as st

from actors import open_runtime
from actors.modules import ContentLimits, ContentStoreState, content_store, content_store_with
from actors.store import open_store
from protocol import ActorKey, CallResult, ToolContext

from .._calls import ModuleCalls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from actors import Runtime, ToolModule
    from actors.store import StateStore

_calls = ModuleCalls("content_store")
call, data = _calls.call, _calls.data

_DOCUMENTS = [
    ("trio.md", "Trio nurseries start tasks.\nA nursery waits for its tasks."),
    ("cancel.md", "Cancel scopes cancel tasks.\nDeadlines are cancel scopes too."),
    ("plan.txt", "write the tests first\nthen the nurseries, then the scopes"),
    ("same-a.md", "identical words here"),
    ("same-b.md", "identical words here"),  # ties: both score alike, insertion order decides
    ("notes.md", "Nothing about the others.\r\nA line after a CRLF\u2028and a Unicode break"),
]
_LATER = [
    ("more.md", "more nurseries and more tasks"),
    ("scopes.md", "scopes scopes scopes"),
]
_QUERIES = ["nurseries tasks", "cancel scopes", "identical", "trio.md", "the", "absent words"]


def _probed() -> ToolModule[ContentStoreState]:
    """The content store with one more read-only tool, saying whether the index is built."""
    module = content_store_with(ContentLimits())

    def indexed(state: ContentStoreState) -> CallResult:
        """Whether this session's store has built its search index."""
        return CallResult.both(str(state.indexed), {"indexed": state.indexed})

    module.tool(indexed, read_only=True)
    return module


async def _indexed(runtime: Runtime, session: str = "s1") -> bool:
    return bool((await data(runtime, "indexed", session))["indexed"])


@asynccontextmanager
async def _serving(store: StateStore | None) -> AsyncIterator[Runtime]:
    async with open_runtime([_probed()], store=store) as runtime:
        yield runtime


@asynccontextmanager
async def _restarted(path: Path) -> AsyncIterator[Runtime]:
    """A runtime over the SQLite file `path`, its store opened afresh: a restart."""
    async with open_store(f"sqlite:///{path}") as store, _serving(store) as runtime:
        yield runtime


async def _add(runtime: Runtime, documents: list[tuple[str, str]], session: str = "s1") -> None:
    for filename, content in documents:
        await data(runtime, "add_content", session, filename=filename, content=content)


async def _searches(runtime: Runtime, session: str = "s1") -> list[Any]:
    """Every query's whole answer: text and data (ids, scores, snippets), in order."""
    answers = []
    for query in _QUERIES:
        result = await call(runtime, "search_content", session, query=query, limit=100)
        answers.append((result.first_text, result.structured_content))
    return answers


class TestRestart:
    async def test_searches_answer_the_same_after_a_restart_and_after_adds(
        self, tmp_path: Path
    ) -> None:
        """Before a restart, after it, and after adds that follow it: the same answers.

        The reference is a store that never restarted and searched only at
        the end, so its index was built in one go from all its items.
        """
        path = tmp_path / "state.db"
        async with _restarted(path) as runtime:
            await _add(runtime, _DOCUMENTS)
            before = await _searches(runtime)
        async with _restarted(path) as runtime:
            after = await _searches(runtime)
            await _add(runtime, _LATER)  # into the index the searches just built
            after_adds = await _searches(runtime)
        async with _serving(None) as runtime:
            await _add(runtime, _DOCUMENTS + _LATER)
            reference = await _searches(runtime)
        assert after == before
        assert after_adds == reference
        assert after_adds != before  # the adds matter to the answers compared
        assert [hit["filename"] for hit in before[2][1]["results"]] == ["same-a.md", "same-b.md"]

    async def test_only_a_search_builds_the_index(self, tmp_path: Path) -> None:
        """After a restart, every other tool leaves the index unbuilt; a search builds it."""
        path = tmp_path / "state.db"
        async with _restarted(path) as runtime:
            await _add(runtime, _DOCUMENTS)
            assert not await _indexed(runtime)  # a new store's adds do not build it either
        async with _restarted(path) as runtime:
            await data(runtime, "list_contents", "s1")
            await data(runtime, "read_content", "s1", id="c1", from_line=2)
            await data(runtime, "create_store", "s1")
            await runtime.read_resource("content://documents/c2", meta={"sessionId": "s1"})
            await _add(runtime, _LATER)
            assert not await _indexed(runtime)
            found = await data(runtime, "search_content", "s1", query="scopes")
            assert await _indexed(runtime)
            assert found["results"][0]["filename"] == "scopes.md"  # added before the index

    async def test_each_session_builds_its_own_index(self, tmp_path: Path) -> None:
        """One session's search builds its own store's index, not another session's."""
        async with _restarted(tmp_path / "state.db") as runtime:
            await _add(runtime, _DOCUMENTS, "s1")
            await _add(runtime, _DOCUMENTS, "s2")
            await data(runtime, "search_content", "s1", query="trio")
            assert (await _indexed(runtime, "s1"), await _indexed(runtime, "s2")) == (True, False)


# What the previous version (schema 1) stored for a store of two items: each
# item's id, filename and text, no line count.
_SCHEMA_1 = json.dumps(
    {
        "schema": 1,
        "state": {
            "store_id": "store_0ld5ha9e",
            "items": [
                ["c1", "notes.md", "trio nurseries\r\nstructured concurrency\rcancel\u2028scopes"],
                ["c2", "plan.txt", "write the tests first\nthen the nurseries"],
            ],
        },
    },
    ensure_ascii=False,
    separators=(",", ":"),
).encode()


class TestOldShape:
    async def test_a_store_written_by_the_previous_version_loads_and_is_written_anew(
        self, tmp_path: Path
    ) -> None:
        """Schema 1 loads (lines counted on loading) and answers as the same items added now.

        Its first change writes it back in schema 3, in parts: a header with the store's
        id, and each item (the old ones too) a part with its line count.
        """
        path = tmp_path / "state.db"
        key = ActorKey("content_store", ToolContext("s1"))
        async with open_store(f"sqlite:///{path}") as store:
            await store.save(key, _SCHEMA_1, None)
        old = json.loads(_SCHEMA_1)["state"]["items"]
        async with _restarted(path) as runtime:
            listed = await data(runtime, "list_contents", "s1")
            read = await data(runtime, "read_content", "s1", id="c1", from_line=2, to_line=3)
            store_id = (await data(runtime, "create_store", "s1"))["storeId"]
            searched = await _searches(runtime)
            await data(runtime, "add_content", "s1", filename="new.md", content="one\ntwo")
        async with _serving(None) as runtime:
            await _add(runtime, [(filename, content) for _, filename, content in old])
            fresh_listing = await data(runtime, "list_contents", "s1")
            fresh = await _searches(runtime)
        assert listed == fresh_listing
        assert [item["lines"] for item in listed["items"]] == [4, 2]
        assert (read["content"], store_id) == ("structured concurrency\ncancel", "store_0ld5ha9e")
        assert searched == fresh
        async with open_store(f"sqlite:///{path}") as store:
            stored = await store.load(key, parts=True)
        assert stored is not None
        assert json.loads(stored.blob) == {"schema": 3, "header": {"store_id": "store_0ld5ha9e"}}
        assert stored.parts is not None
        assert {name: json.loads(part) for name, part in stored.parts.items()} == {
            f"items:{old[0][0]}": [*old[0][1:], 4],
            f"items:{old[1][0]}": [*old[1][1:], 2],
            "items:c3": ["new.md", "one\ntwo", 2],
        }


# ---- the index kept up to date, against one built in one go -------------------------

_words = st.sampled_from(["trio", "nursery", "cancel", "scope", "task", "deadline", "the"])
_texts = st.lists(_words, max_size=12).map(" ".join)
_steps = st.lists(
    st.tuples(st.just("add"), _words, _texts) | st.tuples(st.just("search"), _texts, _words),
    max_size=16,
)


def _ranked(state: ContentStoreState, query: str) -> list[tuple[str, float]]:
    return [(item.id, score) for item, score in state.rank(state.query_terms(query), 100)]


class TestIndexUpkeep:
    @given(steps=_steps)
    def test_searches_between_adds_rank_as_a_store_loaded_again(
        self, steps: list[tuple[str, str, str]]
    ) -> None:
        """At every search, the live store ranks exactly as its stored copy loaded again.

        The live store's index is built by its first search and then kept
        up to date by each add; the loaded copy builds its own from scratch.
        """
        durable = content_store.durable
        assert durable is not None
        key = ActorKey("content_store", ToolContext("s1"))
        state = content_store.state(ToolContext("s1"))
        for step, first, second in steps:
            if step == "add":
                state.add(first, second)
                continue
            query = f"{first} {second}"
            loaded = durable.load(durable.dump(state), key)
            assert not loaded.indexed
            assert _ranked(state, query) == _ranked(loaded, query)
            assert state.indexed
