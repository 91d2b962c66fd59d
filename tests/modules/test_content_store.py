"""The content_store module, driven through the runtime like a host would."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from actors import ArgumentsError, RuntimeConfig, open_runtime
from actors.modules import ContentLimits, content_store, content_store_with
from actors.modules._content_store import _line_count

from .._calls import ModuleCalls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actors import Runtime


_calls = ModuleCalls("content_store")
call, data, error = _calls.call, _calls.data, _calls.error


class TestIsolation:
    async def test_a_session_lists_only_its_own_content(self) -> None:
        """Session 1's listing names test1.txt and not session 2's test2.txt."""
        async with open_runtime([content_store]) as runtime:
            await data(runtime, "add_content", "sess_1", filename="test1.txt", content="Content 1")
            await data(runtime, "add_content", "sess_2", filename="test2.txt", content="Content 2")
            text1 = (await call(runtime, "list_contents", "sess_1")).first_text
            text2 = (await call(runtime, "list_contents", "sess_2")).first_text
        assert "test1.txt" in text1
        assert "test2.txt" not in text1
        assert "test2.txt" in text2
        assert "test1.txt" not in text2

    async def test_concurrent_adds_each_land_in_their_own_session(self) -> None:
        """Three concurrent adds in three sessions leave one item in each."""
        async with open_runtime([content_store]) as runtime:
            async with trio.open_nursery() as nursery:
                for n in (1, 2, 3):
                    nursery.start_soon(
                        functools.partial(
                            call,
                            runtime,
                            "add_content",
                            f"sess_{n}",
                            filename=f"concurrent{n}.txt",
                            content=f"Content {n}",
                        )
                    )
            listings = [await data(runtime, "list_contents", f"sess_{n}") for n in (1, 2, 3)]
        for n, listing in enumerate(listings, 1):
            assert listing["count"] == 1
            assert [item["filename"] for item in listing["items"]] == [f"concurrent{n}.txt"]

    async def test_search_sees_only_its_own_session(self) -> None:
        """A search never returns another session's documents, however well they match."""
        async with open_runtime([content_store]) as runtime:
            await data(runtime, "add_content", "s1", filename="trio.md", content="trio nurseries")
            await data(runtime, "add_content", "s2", filename="other.md", content="unrelated")
            found = await data(runtime, "search_content", "s2", query="trio nurseries")
        assert found == {"results": [], "count": 0}

    async def test_the_store_is_released_with_the_session_state(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """After the TTL the session's state is gone, and a new call starts an empty store."""
        # No deadline: the autojump clock runs on while a heavy tool's thread works.
        config = RuntimeConfig(ttl=10, call_timeout=None)
        async with open_runtime([content_store], config) as runtime:
            first = await data(runtime, "create_store", "s1")
            await data(runtime, "add_content", "s1", filename="a.txt", content="a")
            await trio.sleep(11)
            again = await data(runtime, "create_store", "s1")
            listing = await data(runtime, "list_contents", "s1")
        assert again["storeId"] != first["storeId"]
        assert listing["count"] == 0


class TestStoreAndAdd:
    async def test_create_store_returns_the_same_id_within_a_session(self) -> None:
        """One store per session: create_store twice gives one id; another session has its own."""
        async with open_runtime([content_store]) as runtime:
            first = await data(runtime, "create_store", "s1")
            second = await data(runtime, "create_store", "s1")
            other = await data(runtime, "create_store", "s2")
        assert first["storeId"] == second["storeId"]
        assert other["storeId"] != first["storeId"]

    async def test_add_reports_id_and_utf8_size(self) -> None:
        """add_content returns the new id, the filename, the UTF-8 byte size and the line count."""
        async with open_runtime([content_store]) as runtime:
            store = await data(runtime, "create_store", "s1")
            added = await data(
                runtime, "add_content", "s1", filename="인사.txt", content="안녕\nhi"
            )
        assert added == {
            "id": "c1",
            "filename": "인사.txt",
            "size": 9,  # 안녕 is six bytes, then newline and "hi"
            "lines": 2,
            "storeId": store["storeId"],
        }

    async def test_adding_a_filename_again_adds_a_new_item(self) -> None:
        """Duplicate filenames are kept as separate items with their own ids."""
        async with open_runtime([content_store]) as runtime:
            first = await data(runtime, "add_content", "s1", filename="a.txt", content="v1")
            second = await data(runtime, "add_content", "s1", filename="a.txt", content="v2")
            listing = await data(runtime, "list_contents", "s1")
        assert first["id"] != second["id"]
        assert listing["count"] == 2

    async def test_an_empty_filename_is_refused_and_nothing_is_added(self) -> None:
        """A blank filename is a tool error and the store stays as it was."""
        async with open_runtime([content_store]) as runtime:
            message = await error(runtime, "add_content", "s1", filename="  ", content="x")
            listing = await data(runtime, "list_contents", "s1")
        assert message == "Error: filename must not be empty"
        assert listing == {"items": [], "count": 0}

    async def test_an_empty_store_says_so(self) -> None:
        """Listing an empty store explains how to fill it."""
        async with open_runtime([content_store]) as runtime:
            result = await call(runtime, "list_contents", "s1")
        assert result.first_text == "The store is empty: add_content adds a document."


FIVE_LINES = "one\ntwo\nthree\nfour\nfive"


class TestRead:
    @pytest.fixture
    async def runtime(self) -> AsyncIterator[Runtime]:
        async with open_runtime([content_store]) as runtime:
            await data(runtime, "add_content", "s1", filename="five.txt", content=FIVE_LINES)
            await data(runtime, "add_content", "s1", filename="dup.txt", content="1")
            await data(runtime, "add_content", "s1", filename="dup.txt", content="2")
            yield runtime

    async def test_read_by_id_returns_the_whole_item(self, runtime: Runtime) -> None:
        """Read by id: the text is the content, the data says which lines it holds."""
        result = await call(runtime, "read_content", "s1", id="c1")
        assert result.first_text == FIVE_LINES
        assert result.structured_content is not None
        assert result.structured_content["fromLine"] == 1
        assert result.structured_content["toLine"] == 5

    async def test_read_by_filename(self, runtime: Runtime) -> None:
        """A filename that exactly one item has reads that item."""
        result = await call(runtime, "read_content", "s1", filename="five.txt")
        assert result.first_text == FIVE_LINES

    async def test_a_line_range_is_one_based_and_inclusive(self, runtime: Runtime) -> None:
        """from_line 2 to to_line 4 are lines two, three and four."""
        result = await call(runtime, "read_content", "s1", id="c1", from_line=2, to_line=4)
        assert result.first_text == "two\nthree\nfour"

    async def test_an_end_past_the_last_line_is_clamped(self, runtime: Runtime) -> None:
        """Asking for more lines than there are returns up to the last one."""
        result = await call(runtime, "read_content", "s1", id="c1", from_line=4, to_line=100)
        assert result.first_text == "four\nfive"
        assert result.structured_content is not None
        assert result.structured_content["toLine"] == 5

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ({}, "Error: give exactly one of id and filename"),
            ({"id": "c1", "filename": "five.txt"}, "Error: give exactly one of id and filename"),
            ({"id": "c9"}, "Error: content 'c9' not found; list_contents shows the ids"),
            (
                {"filename": "nope.txt"},
                "Error: no content named 'nope.txt'; list_contents shows the filenames",
            ),
            (
                {"filename": "dup.txt"},
                "Error: 2 items are named 'dup.txt' (c2, c3); read one by id",
            ),
            ({"id": "c1", "from_line": 0}, "Error: from_line must be 1 or more, got 0"),
            ({"id": "c1", "from_line": 6}, "Error: the range starts at line 6 but c1 has 5 lines"),
            (
                {"id": "c1", "from_line": 3, "to_line": 2},
                "Error: to_line (2) must not be less than from_line (3)",
            ),
        ],
    )
    async def test_bad_reads_say_what_is_wrong(
        self, runtime: Runtime, arguments: dict[str, Any], message: str
    ) -> None:
        """Each malformed read is a tool error naming the problem."""
        assert await error(runtime, "read_content", "s1", **arguments) == message

    async def test_a_line_number_of_the_wrong_type_is_refused_before_the_call(
        self, runtime: Runtime
    ) -> None:
        """Arguments are validated strictly against the schema: "2" is no integer."""
        with pytest.raises(ArgumentsError, match=r"\$\.from_line"):
            await call(runtime, "read_content", "s1", id="c1", from_line="2")


DOCUMENTS = {
    "trio.md": "Trio nurseries give structured concurrency.\nA nursery owns its tasks.",
    "rust.md": "Rust has ownership and borrowing.\nCargo builds crates.",
    "cooking.md": "Boil the pasta, then add the sauce.\nServe it hot.",
}


class TestSearch:
    @pytest.fixture
    async def runtime(self) -> AsyncIterator[Runtime]:
        async with open_runtime([content_store]) as runtime:
            for filename, content in DOCUMENTS.items():
                await data(runtime, "add_content", "s1", filename=filename, content=content)
            yield runtime

    async def test_the_relevant_document_ranks_first(self, runtime: Runtime) -> None:
        """A query about nurseries puts the trio document first, with a matching snippet."""
        found = await data(runtime, "search_content", "s1", query="nursery tasks")
        first = found["results"][0]
        assert first["filename"] == "trio.md"
        assert first["snippet"] == "A nursery owns its tasks."
        assert first["score"] > 0

    async def test_only_matching_documents_are_returned(self, runtime: Runtime) -> None:
        """Documents sharing no term with the query are left out."""
        found = await data(runtime, "search_content", "s1", query="ownership")
        assert [hit["filename"] for hit in found["results"]] == ["rust.md"]
        assert found["count"] == 1

    async def test_filenames_are_searched_too(self, runtime: Runtime) -> None:
        """A document's filename is part of what BM25 ranks."""
        found = await data(runtime, "search_content", "s1", query="cooking")
        assert [hit["filename"] for hit in found["results"]] == ["cooking.md"]

    async def test_more_occurrences_rank_higher(self) -> None:
        """Term frequency counts: a document saying 'actor' thrice beats one saying it once."""
        async with open_runtime([content_store]) as runtime:
            await data(runtime, "add_content", "s1", filename="a", content="actor model here")
            await data(runtime, "add_content", "s1", filename="b", content="actor actor actor")
            found = await data(runtime, "search_content", "s1", query="actor")
        assert [hit["filename"] for hit in found["results"]] == ["b", "a"]

    async def test_limit_caps_the_results(self, runtime: Runtime) -> None:
        """limit bounds how many hits come back, best first."""
        found = await data(runtime, "search_content", "s1", query="the nursery rust", limit=2)
        assert found["count"] == 2

    async def test_the_text_lists_the_hits(self, runtime: Runtime) -> None:
        """The text channel names each hit for a model to read."""
        result = await call(runtime, "search_content", "s1", query="cargo")
        assert result.first_text.startswith("1 result(s) for 'cargo':\n1. c2: rust.md (score ")

    async def test_no_match_is_an_empty_result_not_an_error(self, runtime: Runtime) -> None:
        """A query nothing matches returns zero results."""
        result = await call(runtime, "search_content", "s1", query="kubernetes")
        assert not result.is_error
        assert result.first_text == "No content matches 'kubernetes'."
        assert result.structured_content == {"results": [], "count": 0}

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ({"query": "x", "limit": 0}, "Error: limit must be between 1 and 100, got 0"),
            ({"query": "x", "limit": 101}, "Error: limit must be between 1 and 100, got 101"),
            ({"query": ""}, "Error: query '' has no words to search for"),
            ({"query": " ?! "}, "Error: query ' ?! ' has no words to search for"),
        ],
    )
    async def test_bad_searches_say_what_is_wrong(
        self, runtime: Runtime, arguments: dict[str, Any], message: str
    ) -> None:
        """A limit out of range or a query without words is a tool error naming it."""
        assert await error(runtime, "search_content", "s1", **arguments) == message


SMALL = ContentLimits(
    max_items=2,
    max_item_bytes=10,
    max_store_bytes=15,
    max_filename_chars=8,
    max_query_chars=20,
    max_query_terms=3,
)


class TestLimits:
    @pytest.fixture
    async def runtime(self) -> AsyncIterator[Runtime]:
        """A store with small limits, holding one item of six bytes."""
        async with open_runtime([content_store_with(SMALL)]) as runtime:
            await data(runtime, "add_content", "s1", filename="a.txt", content="hello!")
            yield runtime

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            (
                {"filename": "abcdefghi.txt", "content": "x"},
                "Error: the filename is 13 characters, over the limit of 8 "
                "(max_filename_chars); nothing was added",
            ),
            (
                {"filename": "b.txt", "content": "x" * 11},
                "Error: the content is 11 characters, more than the limit of 10 bytes per item "
                "(max_item_bytes); nothing was added",
            ),
            (
                {"filename": "b.txt", "content": "é" * 6},  # six characters, twelve bytes
                "Error: the content is 12 bytes of UTF-8, over the limit of 10 bytes per item "
                "(max_item_bytes); nothing was added",
            ),
            (
                {"filename": "b.txt", "content": "x" * 10},
                "Error: the store holds 6 bytes and this content is 10, together over the "
                "store's limit of 15 bytes (max_store_bytes); nothing was added",
            ),
            (
                {"filename": "b.txt", "content": "ok \ud800"},  # JSON can carry a lone surrogate
                "Error: the content is not valid Unicode text (surrogates not allowed at "
                "character 3); nothing was added",
            ),
            (
                {"filename": "\udfff.txt", "content": "x"},
                "Error: the filename is not valid Unicode text (surrogates not allowed at "
                "character 0); nothing was added",
            ),
        ],
    )
    async def test_an_add_past_a_limit_is_refused_naming_it_and_changes_nothing(
        self, runtime: Runtime, arguments: dict[str, Any], message: str
    ) -> None:
        """Each limit of an add is a tool error naming it; the store stays as it was."""
        before = await data(runtime, "list_contents", "s1")
        assert await error(runtime, "add_content", "s1", **arguments) == message
        assert await data(runtime, "list_contents", "s1") == before
        # and the room it did not take is still there
        assert (await data(runtime, "add_content", "s1", filename="b", content="x" * 9))[
            "id"
        ] == "c2"

    async def test_a_full_store_refuses_another_item(self, runtime: Runtime) -> None:
        """max_items counts items whatever their size."""
        await data(runtime, "add_content", "s1", filename="b.txt", content="")
        before = await data(runtime, "list_contents", "s1")
        assert await error(runtime, "add_content", "s1", filename="c.txt", content="") == (
            "Error: the store already holds 2 items, its limit (max_items); nothing was added"
        )
        assert await data(runtime, "list_contents", "s1") == before

    async def test_limits_are_per_session(self, runtime: Runtime) -> None:
        """Another session's store has all of its own room."""
        added = await data(runtime, "add_content", "s2", filename="b", content="x" * 10)
        assert added["size"] == 10

    @pytest.mark.parametrize(
        ("query", "message"),
        [
            (
                "a" * 21,
                "Error: the query is 21 characters, over the limit of 20 (max_query_chars); "
                "search for fewer words",
            ),
            (
                "one two three four",
                "Error: the query has 4 distinct words, over the limit of 3 (max_query_terms); "
                "keep the words that matter",
            ),
        ],
    )
    async def test_a_query_past_a_limit_is_refused_naming_it(
        self, runtime: Runtime, query: str, message: str
    ) -> None:
        """Long or many-worded queries are tool errors naming the limit."""
        assert await error(runtime, "search_content", "s1", query=query) == message

    async def test_repeated_words_count_once_against_the_term_limit(self, runtime: Runtime) -> None:
        """max_query_terms counts distinct words: repeating one is no more work."""
        found = await data(runtime, "search_content", "s1", query="Hello hello HELLO x")
        assert [hit["id"] for hit in found["results"]] == ["c1"]

    async def test_a_huge_query_is_refused_by_the_default_limits(self) -> None:
        """A hostile megabyte of query is refused by its length, whatever it holds."""
        async with open_runtime([content_store]) as runtime:
            message = await error(runtime, "search_content", "s1", query="ab " * 400_000)
        assert message == (
            "Error: the query is 1200000 characters, over the limit of 1000 (max_query_chars); "
            "search for fewer words"
        )

    async def test_an_item_of_exactly_the_default_limit_fits_and_one_byte_more_does_not(
        self,
    ) -> None:
        """The default item limit is 1 MiB of UTF-8."""
        mib = 1024 * 1024
        async with open_runtime([content_store]) as runtime:
            added = await data(runtime, "add_content", "s1", filename="a", content="x" * mib)
            message = await error(
                runtime, "add_content", "s1", filename="b", content="x" * (mib + 1)
            )
        assert added["size"] == mib
        assert message.endswith(
            "more than the limit of 1048576 bytes per item (max_item_bytes); nothing was added"
        )

    def test_the_defaults(self) -> None:
        """The documented defaults, and which tools run off the event loop."""
        assert ContentLimits() == ContentLimits(
            max_items=1_000,
            max_item_bytes=1024 * 1024,
            max_store_bytes=16 * 1024 * 1024,
            max_filename_chars=256,
            max_query_chars=1_000,
            max_query_terms=32,
        )
        heavy = {name for name, tool in content_store.tools.items() if tool.heavy}
        assert heavy == {"add_content", "search_content"}

    @pytest.mark.parametrize("value", [0, -1, True, 1.5])
    def test_a_limit_must_be_a_positive_int(self, value: object) -> None:
        """A nonsensical limit is refused when the limits are made, naming it."""
        with pytest.raises(ValueError, match=rf"^max_items must be a positive int, got {value!r}$"):
            ContentLimits(max_items=value)  # type: ignore[arg-type]


class TestBoundedWork:
    async def test_a_snippet_is_chosen_from_the_start_of_a_large_item(self) -> None:
        """A search reads at most 512 KiB for snippets: a match past that is ranked, not quoted."""
        filler = "filler words only\n" * 40_000  # 720 000 bytes
        async with open_runtime([content_store]) as runtime:
            await data(
                runtime,
                "add_content",
                "s1",
                filename="big.txt",
                content=f"first line\n{filler}the needle is here\nlast line",
            )
            found = await data(runtime, "search_content", "s1", query="needle")
        assert [(hit["filename"], hit["snippet"]) for hit in found["results"]] == [
            ("big.txt", "first line")
        ]

    async def test_lines_are_split_as_str_splitlines_splits_them(self) -> None:
        """\\r\\n, \\r and the other Unicode breaks each end a line; the count says so too."""
        content = "a\r\nb\rc\u2028d\n"
        async with open_runtime([content_store]) as runtime:
            added = await data(runtime, "add_content", "s1", filename="f", content=content)
            read = await data(runtime, "read_content", "s1", id="c1", from_line=2, to_line=3)
        assert added["lines"] == 4
        assert read["content"] == "b\nc"

    @given(st.text(alphabet=st.sampled_from("ab\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")))
    def test_the_line_count_matches_splitlines(self, text: str) -> None:
        """Lines are counted without being made, and the count is that of str.splitlines."""
        assert _line_count(text) == len(text.splitlines())
