"""The ``content_store`` module: a per-session store of text items with BM25 search.

Each session has one store, and its actor owns it, so nothing here locks or
looks a session up. The store exists from the session's first call on;
``create_store`` reports its id, which stays the same for the life of the
session's state. Without a state store, that state goes when its actor stops
(TTL expiry, eviction, a crash, shutdown); with one (``content_store`` is
durable), it outlives its actors and goes only when the session ends
(``Runtime.end_session``) or when no call has changed it for the runtime's
``state_retention``.

Items
-----
``add_content`` always creates a new item with a new id, even when the
filename is already taken: a model that re-adds an edited file gets a second
version, not a silent overwrite. Reading by filename therefore refuses an
ambiguous name and lists the ids to read by instead.

Search
------
Ranking is Okapi BM25 (k1 = 1.5, b = 0.75) over whole items: a document is
one item's filename plus its content, so a search for a filename finds it.
Terms are lowercase runs of word characters (``\\w``, Unicode-aware, so
Korean prose tokenizes too). IDF is the non-negative variant
``ln(1 + (N - n + 0.5) / (n + 0.5))``: a term that appears in every item
still counts a little rather than pushing the score below zero. A word
repeated in the query counts as often as it is repeated.

BM25 is written out here (about thirty lines) rather than taken from
``rank-bm25``: that package is unmaintained since 2022 and pulls in numpy,
while the core depends only on trio, attrs and cattrs.

The index (each item's term counts) is built by a store's first search and
kept up to date by the adds after it, so each item is tokenized at most
once per actor. It is never stored: a store loaded again, after a restart
or a TTL expiry, reads only its items, and its first call costs no
tokenizing unless it is a search. That first search tokenizes the whole
store, in its worker thread. (Storing the term counts instead would double
what every write of the state stores, and parsing them back would cost more
than a restart's first call is allowed: the figures are in
``docs/performance.md``, "Figures the design rests on".)

Limits
------
Whatever a session asks for is bounded, so that no caller can make the server
hold much memory or compute for long (`ContentLimits`): items per store
(1 000), UTF-8 bytes per item (1 MiB) and per store (16 MiB), characters per
filename (256), and per search the query's characters (1 000) and distinct
words (32). Going past a limit is a tool error that names it, and nothing
changes. `content_store_with` builds the module with other limits;
``content_store`` is the module with these defaults.

Memory is what the byte limit is for, so an item is kept compactly: its
content as UTF-8 (a ``str`` takes up to four bytes per character: one emoji
in ASCII text is enough), its line count rather than its lines, and its term
counts as two arrays (`_Terms`), a few times more compact than a Counter
and a tuple of lines per item, measured with tracemalloc (the figures, and
what the byte limit costs at most, are in ``docs/performance.md``). The
first search tokenizes one item at a time, so that tokenizing's moment of
memory is one item's.

Time: ``add_content`` (counting lines in, and once the store is indexed
tokenizing, up to 1 MiB) and ``search_content`` are heavy tools, run in
worker threads. A search ranks with one lookup per item and distinct query
word, and reads at most 512 KiB in all (the start of each hit) to choose its
snippets, so that a search at the limits stays well under a second once the
index is built (``docs/performance.md`` has the figures).
"""

from __future__ import annotations

import math
import re
import secrets
from array import array
from bisect import bisect_left
from collections import Counter
from typing import Annotated, Any, Final, TypedDict, final

import attrs
import cattrs

from protocol import CallResult, Scope, ToolContext

from .._durable import Durable
from .._errors import ToolError
from .._module import ToolModule
from .._progress import Progress  # noqa: TC001 -- read by the schema builder at registration

__all__ = ["ContentLimits", "ContentStoreState", "content_store", "content_store_with"]

_K1: Final = 1.5
_B: Final = 0.75
_WORD: Final = re.compile(r"\w+")
_MAX_LIMIT: Final = 100
_SNIPPET_CHARS: Final = 160
_SNIPPET_BUDGET: Final = 512 * 1024
"""Bytes one search reads for snippets, shared by its hits: each one's first bytes."""
# What str.splitlines() splits at; "\r\n" is one break.
_LINE_BREAKS: Final = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_MIB: Final = 1024 * 1024


def _positive_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 1:
        msg = f"{attribute.name} must be a positive int, got {value!r}"
        raise ValueError(msg)


@final
@attrs.frozen
class ContentLimits:
    """What one session's content store accepts; going past a limit is a tool error naming it."""

    max_items: int = attrs.field(default=1_000, validator=_positive_int)
    """Items one store may hold.

    There is no delete: items go only with the session's state (see the module docstring)."""
    max_item_bytes: int = attrs.field(default=_MIB, validator=_positive_int)
    """Bytes of one item's content, in UTF-8."""
    max_store_bytes: int = attrs.field(default=16 * _MIB, validator=_positive_int)
    """Bytes of all the contents of one store, in UTF-8; it holds at most about 3.6 times that."""
    max_filename_chars: int = attrs.field(default=256, validator=_positive_int)
    """Characters of one item's filename."""
    max_query_chars: int = attrs.field(default=1_000, validator=_positive_int)
    """Characters of one search query, checked before it is split into words."""
    max_query_terms: int = attrs.field(default=32, validator=_positive_int)
    """Distinct words of one search query (a search costs a lookup per word and item)."""


def _terms(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _line_count(text: str) -> int:
    """``len(text.splitlines())``, without making the lines (short lines cost ~60 bytes each)."""
    if not text:
        return 0
    breaks = sum(text.count(char) for char in _LINE_BREAKS) - text.count("\r\n")
    return breaks if text[-1] in _LINE_BREAKS else breaks + 1


@final
@attrs.frozen(eq=False)
class _Terms:
    """How often each term occurs in one item, at 12 bytes per distinct term.

    A Counter keeps a str object and a dict entry per distinct term, about
    100 bytes, which made text of unique short words cost twenty times its
    size. Here the terms are kept as their hashes, sorted, beside their
    counts. Two terms sharing a 64-bit hash would count as one: with the few
    million terms of a full store, about one search in 10^11 could see it.
    """

    hashes: array[int]
    counts: array[int]
    total: int
    """How many terms the item has, repeats included (its BM25 length)."""

    @classmethod
    def of(cls, *texts: str) -> _Terms:
        """The terms of `texts` taken together."""
        counter: Counter[str] = Counter()
        for text in texts:  # one text's list of words alive at a time
            counter.update(_terms(text))
        order = sorted(counter, key=hash)
        hashes = array("q", map(hash, order))
        return cls(hashes, array("I", map(counter.__getitem__, order)), counter.total())

    def count(self, term_hash: int) -> int:
        """How often the term with this hash occurs."""
        at = bisect_left(self.hashes, term_hash)
        if at < len(self.hashes) and self.hashes[at] == term_hash:
            return self.counts[at]
        return 0


@attrs.frozen(eq=False)
class _Item:
    id: str
    filename: str
    content: bytes
    """UTF-8, the most compact form: see the module docstring."""
    lines: int

    @classmethod
    def new(cls, item_id: str, filename: str, content: str, encoded: bytes) -> _Item:
        return cls(item_id, filename, encoded, _line_count(content))

    def terms(self) -> _Terms:
        """Term frequencies of filename and content: what the search index keeps of the item."""
        return _Terms.of(self.filename, self.content.decode())

    @property
    def size(self) -> int:
        return len(self.content)

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "filename": self.filename, "size": self.size, "lines": self.lines}

    def read(self, first: int, last: int) -> str:
        """Lines `first` to `last` (1-based, inclusive), joined with newlines."""
        return "\n".join(self.content.decode().splitlines()[first - 1 : last])

    def snippet(self, query: set[str], window: int) -> str:
        """The line sharing the most terms with `query`, trimmed; the first line if none does.

        Only the lines in the first `window` bytes are looked at, so that a
        search costs the same however large its hits are.
        """
        # "ignore": the cut may fall inside a character.
        lines = self.content[:window].decode(errors="ignore").splitlines()
        if len(self.content) > window and len(lines) > 1:
            lines.pop()  # cut short: a word cut there could pass for a query word
        best = max(lines, key=lambda line: len(query.intersection(_terms(line))), default="")
        best = best.strip()
        if len(best) > _SNIPPET_CHARS:
            return best[: _SNIPPET_CHARS - 1] + "…"
        return best


@attrs.define
class ContentStoreState:
    """One session's store: items in the order they were added, within its limits."""

    store_id: str = attrs.field(factory=lambda: f"store_{secrets.token_hex(4)}")
    """The store's id, stable for the life of the session's state."""
    items: dict[str, _Item] = attrs.field(factory=dict)
    """Item id → item, in insertion order."""
    limits: ContentLimits = attrs.field(factory=ContentLimits, kw_only=True)
    """What the store accepts."""
    size: int = attrs.field(default=0, init=False)
    """Bytes of all the items' contents, in UTF-8."""
    _index: dict[str, _Terms] | None = attrs.field(default=None, init=False, repr=False)
    """Item id → its term counts, in item order; ``None`` until the first search builds it."""

    @property
    def indexed(self) -> bool:
        """Whether the search index is built: from the store's first search on, never before."""
        return self._index is not None

    def add(self, filename: str, content: str) -> _Item:
        """Store a new item and return it; a ToolError, and no change, if it breaks a limit."""
        limits = self.limits
        _check_filename(filename, limits.max_filename_chars)
        if len(self.items) >= limits.max_items:
            msg = (
                f"Error: the store already holds {len(self.items)} items, its limit "
                "(max_items); nothing was added"
            )
            raise ToolError(msg)
        encoded = _encoded(content, limits.max_item_bytes)
        if self.size + len(encoded) > limits.max_store_bytes:
            msg = (
                f"Error: the store holds {self.size} bytes and this content is {len(encoded)}, "
                f"together over the store's limit of {limits.max_store_bytes} bytes "
                "(max_store_bytes); nothing was added"
            )
            raise ToolError(msg)
        item = _Item.new(f"c{len(self.items) + 1}", filename, content, encoded)
        index = self._index
        if index is not None:  # kept up to date once built; until then the first search builds it
            index[item.id] = _Terms.of(filename, content)
        self.items[item.id] = item
        self.size += item.size
        return item

    def _built_index(self) -> dict[str, _Terms]:
        """The search index, built now if this is the store's first search."""
        if self._index is None:
            # Assigned only once complete, so that a failure half-way leaves no partial index.
            self._index = {item.id: item.terms() for item in self.items.values()}
        return self._index

    def find(self, item_id: str | None, filename: str | None) -> _Item:
        """The item named by exactly one of `item_id` and `filename`; ToolError otherwise."""
        if (item_id is None) == (filename is None):
            msg = "Error: give exactly one of id and filename"
            raise ToolError(msg)
        if item_id is not None:
            return self._by_id(item_id)
        assert filename is not None  # exactly one is set, checked above
        return self._by_filename(filename)

    def _by_id(self, item_id: str) -> _Item:
        item = self.items.get(item_id)
        if item is None:
            msg = f"Error: content {item_id!r} not found; list_contents shows the ids"
            raise ToolError(msg)
        return item

    def _by_filename(self, filename: str) -> _Item:
        matches = [item for item in self.items.values() if item.filename == filename]
        if not matches:
            msg = f"Error: no content named {filename!r}; list_contents shows the filenames"
            raise ToolError(msg)
        if len(matches) > 1:
            ids = ", ".join(item.id for item in matches)
            msg = f"Error: {len(matches)} items are named {filename!r} ({ids}); read one by id"
            raise ToolError(msg)
        return matches[0]

    def query_terms(self, query: str) -> Counter[str]:
        """The words of `query` and how often each is repeated; ToolError past the limits."""
        limits = self.limits
        if len(query) > limits.max_query_chars:  # before any work on it
            msg = (
                f"Error: the query is {len(query)} characters, over the limit of "
                f"{limits.max_query_chars} (max_query_chars); search for fewer words"
            )
            raise ToolError(msg)
        terms = Counter(_terms(query))
        if not terms:
            msg = f"Error: query {query!r} has no words to search for"
            raise ToolError(msg)
        if len(terms) > limits.max_query_terms:
            msg = (
                f"Error: the query has {len(terms)} distinct words, over the limit of "
                f"{limits.max_query_terms} (max_query_terms); keep the words that matter"
            )
            raise ToolError(msg)
        return terms

    def rank(self, query: Counter[str], limit: int) -> list[tuple[_Item, float]]:
        """The items scoring above zero for `query` under BM25, best first, at most `limit`."""
        index = self._built_index()
        items = list(self.items.values())
        if not items:
            return []
        terms = [index[item.id] for item in items]
        keys = [hash(term) for term in query]
        repeats = list(query.values())
        counts = [[its.count(key) for key in keys] for its in terms]
        average = sum(its.total for its in terms) / len(items) or 1.0
        idf = [_idf(sum(1 for row in counts if row[at]), len(items)) for at in range(len(keys))]
        scored = [
            (item, _bm25(its.total, row, repeats, idf, average))
            for item, its, row in zip(items, terms, counts, strict=True)
        ]
        hits = [(item, score) for item, score in scored if score > 0]
        hits.sort(key=lambda hit: hit[1], reverse=True)  # stable: ties keep insertion order
        return hits[:limit]


def _check_filename(filename: str, most: int) -> None:
    if not filename.strip():
        msg = "Error: filename must not be empty"
        raise ToolError(msg)
    if len(filename) > most:
        msg = (
            f"Error: the filename is {len(filename)} characters, over the limit of {most} "
            "(max_filename_chars); nothing was added"
        )
        raise ToolError(msg)
    _utf8(filename, "filename")


def _encoded(content: str, most: int) -> bytes:
    """`content` in UTF-8, at most `most` bytes (max_item_bytes); ToolError otherwise."""
    if len(content) > most:  # every character takes a byte or more: refuse before encoding
        msg = (
            f"Error: the content is {len(content)} characters, more than the limit of {most} "
            "bytes per item (max_item_bytes); nothing was added"
        )
        raise ToolError(msg)
    encoded = _utf8(content, "content")
    if len(encoded) > most:
        msg = (
            f"Error: the content is {len(encoded)} bytes of UTF-8, over the limit of {most} "
            "bytes per item (max_item_bytes); nothing was added"
        )
        raise ToolError(msg)
    return encoded


def _utf8(text: str, what: str) -> bytes:
    """`text` in UTF-8; a ToolError for a lone surrogate, which JSON can carry but UTF-8 cannot."""
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        msg = (
            f"Error: the {what} is not valid Unicode text ({exc.reason} at character "
            f"{exc.start}); nothing was added"
        )
        raise ToolError(msg) from None


def _idf(containing: int, total: int) -> float:
    return math.log(1 + (total - containing + 0.5) / (containing + 0.5))


def _bm25(
    length: int, counts: list[int], repeats: list[int], idf: list[float], average: float
) -> float:
    norm = _K1 * (1 - _B + _B * length / average)
    return sum(
        times * weight * tf * (_K1 + 1) / (tf + norm)
        for tf, times, weight in zip(counts, repeats, idf, strict=True)
    )


# ---- the tools ------------------------------------------------------------------
# Each TypedDict is the shape of one tool's structured data, its outputSchema.


class _StoreData(TypedDict):
    storeId: str
    count: int


class _ItemData(TypedDict):
    """One item's summary (`_Item.summary`)."""

    id: str
    filename: str
    size: int
    """Bytes of content, in UTF-8."""
    lines: int


class _AddedData(_ItemData):
    storeId: str


class _ItemsData(TypedDict):
    items: list[_ItemData]
    count: int


class _ReadData(_ItemData):
    fromLine: int
    toLine: int
    content: str


class _HitData(TypedDict):
    id: str
    filename: str
    score: float
    snippet: str


class _SearchData(TypedDict):
    results: list[_HitData]
    count: int


def create_store(state: ContentStoreState) -> CallResult:
    """Return the id of this session's content store; calling it again returns the same id."""
    return CallResult.both(
        f"Content store {state.store_id} holds {len(state.items)} item(s).",
        {"storeId": state.store_id, "count": len(state.items)},
    )


def add_content(
    state: ContentStoreState,
    filename: Annotated[str, "A name for the content, e.g. notes.md; need not be unique."],
    content: Annotated[str, "The text to store."],
) -> CallResult:
    """Store a text document and return its id; adding a filename again adds a new item.

    A store holds a limited number of items and bytes; an error names the limit reached.
    """
    item = state.add(filename, content)
    return CallResult.both(
        f"Added {item.id}: {item.filename} ({item.size} bytes, {item.lines} lines)",
        {**item.summary(), "storeId": state.store_id},
    )


def list_contents(state: ContentStoreState) -> CallResult:
    """List the documents in this session's store with their ids and sizes."""
    summaries = [item.summary() for item in state.items.values()]
    if summaries:
        lines = [
            f"- {s['id']}: {s['filename']} ({s['size']} bytes, {s['lines']} lines)"
            for s in summaries
        ]
        text = f"{len(summaries)} item(s):\n" + "\n".join(lines)
    else:
        text = "The store is empty: add_content adds a document."
    return CallResult.both(text, {"items": summaries, "count": len(summaries)})


def read_content(
    state: ContentStoreState,
    id: Annotated[str | None, "The item's id, from add_content or list_contents."] = None,
    filename: Annotated[str | None, "The item's filename, if exactly one item has it."] = None,
    from_line: Annotated[int | None, "First line to read, 1-based (default 1)."] = None,
    to_line: Annotated[int | None, "Last line to read, inclusive (default: the last line)."] = None,
) -> CallResult:
    """Read a document, whole or a 1-based inclusive line range; name it by id or by filename."""
    item = state.find(id, filename)
    first, last = _line_range(item, from_line, to_line)
    text = item.read(first, last)
    data = {**item.summary(), "fromLine": first, "toLine": last, "content": text}
    return CallResult.both(text, data)


def _line_range(item: _Item, from_line: int | None, to_line: int | None) -> tuple[int, int]:
    """Check a requested range against `item`; an end past the last line is clamped to it."""
    total = item.lines
    first = 1 if from_line is None else from_line
    last = total if to_line is None else min(to_line, total)
    if from_line is None and to_line is None:
        return first, last  # the whole item, even when it is empty
    if first < 1:
        msg = f"Error: from_line must be 1 or more, got {first}"
        raise ToolError(msg)
    if first > total:
        msg = f"Error: the range starts at line {first} but {item.id} has {total} lines"
        raise ToolError(msg)
    if to_line is not None and to_line < first:
        msg = f"Error: to_line ({to_line}) must not be less than from_line ({first})"
        raise ToolError(msg)
    return first, last


def search_content(
    state: ContentStoreState,
    query: Annotated[
        str,
        "A few words to look for (long queries are refused); "
        "ranked by BM25 over filename and content.",
    ],
    progress: Progress,
    limit: Annotated[int, "How many results at most, 1 to 100."] = 5,
) -> CallResult:
    """Search this session's documents and return the best matches with a snippet each."""
    if not 1 <= limit <= _MAX_LIMIT:
        msg = f"Error: limit must be between 1 and {_MAX_LIMIT}, got {limit}"
        raise ToolError(msg)
    terms = state.query_terms(query)
    hits = state.rank(terms, limit)
    # Two steps: ranking (the long one), then the snippets; the result says the second is done.
    progress.report(1, total=2, message=f"ranked {len(state.items)} document(s)")
    words, window = set(terms), _SNIPPET_BUDGET // max(len(hits), 1)
    results = [
        {
            "id": item.id,
            "filename": item.filename,
            "score": score,
            "snippet": item.snippet(words, window),
        }
        for item, score in hits
    ]
    return CallResult.both(
        _search_text(query, results), {"results": results, "count": len(results)}
    )


def _search_text(query: str, results: list[dict[str, Any]]) -> str:
    if not results:
        return f"No content matches {query!r}."
    lines = [f"{len(results)} result(s) for {query!r}:"]
    lines.extend(
        f"{rank}. {r['id']}: {r['filename']} (score {r['score']:.3f}) {r['snippet']}"
        for rank, r in enumerate(results, 1)
    )
    return "\n".join(lines)


@attrs.frozen
class _StoredStore:
    """What is stored of a content store: its id and, per item id, filename, text and lines.

    Stored in parts (schema 3): each item is a part of its own, so that adding
    an item writes that item, not the store. The line count is derived but
    stored (schema 2): counting costs more than all the rest of loading,
    and ``list_contents`` shows it. Sizes are computed again
    on loading, the search index by the first search (see the module
    docstring); the limits are the module's, not the store's.
    """

    store_id: str
    items: dict[str, tuple[str, str, int]]


_SCHEMA: Final = 3
"""1: items were a list of (id, filename, text); 2: (id, filename, text, lines);
3: a dict of id → (filename, text, lines), stored in parts."""


def _with_line_counts(data: Any) -> Any:
    """Schema 1's plain data as schema 2's: each item gains its line count, counted now."""
    return {**data, "items": [[*item, _line_count(item[2])] for item in data["items"]]}


def _keyed_by_id(data: Any) -> Any:
    """Schema 2's plain data as schema 3's: the items keyed by their id, in the same order."""
    return {**data, "items": {item[0]: item[1:] for item in data["items"]}}


def _stored_form(limits: ContentLimits) -> cattrs.Converter:
    """The strict converter, storing a `ContentStoreState` as a `_StoredStore`."""
    converter = cattrs.Converter(forbid_extra_keys=True)

    def dump_item(item: _Item) -> Any:
        return (item.filename, item.content.decode(), item.lines)

    def dump(state: ContentStoreState) -> Any:
        items = {item.id: dump_item(item) for item in state.items.values()}
        return converter.unstructure(_StoredStore(state.store_id, items))

    def load(data: Any, _kind: object) -> ContentStoreState:
        stored = converter.structure(data, _StoredStore)
        state = ContentStoreState(stored.store_id, limits=limits)
        for item_id, (filename, content, lines) in stored.items.items():
            item = _Item(item_id, filename, content.encode(), lines)
            state.items[item.id] = item
            state.size += item.size
        return state

    converter.register_unstructure_hook(_Item, dump_item)
    converter.register_unstructure_hook(ContentStoreState, dump)
    converter.register_structure_hook(ContentStoreState, load)
    return converter


def content_store_with(
    limits: ContentLimits, *, partwise: bool = True
) -> ToolModule[ContentStoreState]:
    """A ``content_store`` module whose stores keep to `limits`.

    ``content_store`` is the one with the default limits; a host that wants
    others serves ``content_store_with(ContentLimits(max_store_bytes=...))``
    instead (both are named ``content_store``). `partwise` stores each item as
    a part of its own (see `Durable`), so that an add writes the item, not the
    store; ``False`` writes the whole store at every change, which only a
    comparison wants (the benchmarks measure the two side by side).
    """

    def new_store(_context: ToolContext) -> ContentStoreState:
        return ContentStoreState(limits=limits)

    module: ToolModule[ContentStoreState] = ToolModule(
        "content_store",
        new_store,
        scope=Scope.SESSION,
        description=(
            "Text documents kept per session, readable by line range and searchable (BM25)."
        ),
        durable=Durable(
            ContentStoreState,
            schema=_SCHEMA,
            converter=_stored_form(limits),
            migrations={1: _with_line_counts, 2: _keyed_by_id},
            parts=("items",) if partwise else (),
        ),
    )
    adds: dict[str, Any] = {"destructive": False, "open_world": False}
    reads: dict[str, Any] = {"open_world": False}
    # Not read-only: it stores the store's id on first use.
    module.tool(
        create_store, title="Get the content store", idempotent=True, structured=_StoreData, **adds
    )
    # Tokenizes up to max_item_bytes; never overwrites: a filename again is a new item.
    module.tool(
        add_content,
        heavy=True,
        title="Add a document",
        idempotent=False,
        structured=_AddedData,
        **adds,
    )
    module.tool(
        list_contents, read_only=True, title="List documents", structured=_ItemsData, **reads
    )
    module.tool(
        read_content, read_only=True, title="Read a document", structured=_ReadData, **reads
    )
    # Ranks the store and scans its hits for snippets.
    module.tool(
        search_content,
        heavy=True,
        read_only=True,
        title="Search documents",
        structured=_SearchData,
        **reads,
    )
    module.resource("content://documents", title="Documents", mime_type="application/json")(
        documents
    )
    module.resource("content://documents/{document_id}", title="A document")(document)
    module.completion("content://documents/{document_id}", "document_id")(document_ids)
    return module


def documents(state: ContentStoreState) -> dict[str, Any]:
    """The documents of this session's store: id, filename, size and lines of each (JSON)."""
    return {"items": [item.summary() for item in state.items.values()]}


def document(
    state: ContentStoreState,
    document_id: Annotated[str, "The document's id, from content://documents."],
) -> str:
    """One document of this session's store, whole, as text."""
    item = state.items.get(document_id)
    if item is None:
        msg = f"Error: no document {document_id!r} in this session's store"
        raise ToolError(msg)
    return item.content.decode()


def document_ids(state: ContentStoreState, typed: str) -> list[str]:
    """The ids of this session's documents that start with what was typed."""
    return [item_id for item_id in state.items if item_id.startswith(typed)]


content_store: Final[ToolModule[ContentStoreState]] = content_store_with(ContentLimits())
"""The content store with the default `ContentLimits`."""
