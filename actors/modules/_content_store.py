"""The ``content_store`` module: a per-session store of text items with BM25 search.

Each session has one store (seed 001's ``SessionContentStore``); its actor
owns it, so nothing here locks or looks a session up. The store exists from
the session's first call on; ``create_store`` reports its id, which stays the
same for the life of the session's state (until its TTL expires).

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
still counts a little rather than pushing the score below zero.

BM25 is written out here (about thirty lines) rather than taken from
``rank-bm25``: that package is unmaintained since 2022 and pulls in numpy,
while the core depends only on trio, attrs and cattrs. Term counts are
computed once per item when it is added; a search computes document
frequencies over the session's items, which is cheap at the scale of one
conversation's documents.
"""

from __future__ import annotations

import math
import re
import secrets
from collections import Counter
from typing import Annotated, Any, Final

import attrs

from protocol import CallResult, Scope, ToolContext

from .._errors import ToolError
from .._module import ToolModule

__all__ = ["ContentStoreState", "content_store"]

_K1: Final = 1.5
_B: Final = 0.75
_WORD: Final = re.compile(r"\w+")
_MAX_LIMIT: Final = 100
_SNIPPET_CHARS: Final = 160


def _terms(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@attrs.frozen(eq=False)  # the term Counter is unhashable; items are found by id anyway
class _Item:
    id: str
    filename: str
    content: str
    lines: tuple[str, ...]
    terms: Counter[str]
    """Term frequencies of filename and content, computed once for search."""

    @classmethod
    def new(cls, item_id: str, filename: str, content: str) -> _Item:
        terms = Counter(_terms(filename) + _terms(content))
        return cls(item_id, filename, content, tuple(content.splitlines()), terms)

    @property
    def size(self) -> int:
        return len(self.content.encode("utf-8"))

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "filename": self.filename,
            "size": self.size,
            "lines": len(self.lines),
        }

    def snippet(self, query: set[str]) -> str:
        """The line sharing the most terms with `query`, trimmed; the first line if none does."""
        best = max(self.lines, key=lambda line: len(query.intersection(_terms(line))), default="")
        best = best.strip()
        if len(best) > _SNIPPET_CHARS:
            return best[: _SNIPPET_CHARS - 1] + "…"
        return best


@attrs.define
class ContentStoreState:
    """One session's store: items in the order they were added."""

    store_id: str = attrs.field(factory=lambda: f"store_{secrets.token_hex(4)}")
    """The store's id, stable for the life of the session's state."""
    items: dict[str, _Item] = attrs.field(factory=dict)
    """Item id → item, in insertion order."""

    def add(self, filename: str, content: str) -> _Item:
        """Store a new item and return it."""
        item = _Item.new(f"c{len(self.items) + 1}", filename, content)
        self.items[item.id] = item
        return item

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

    def rank(self, query: list[str], limit: int) -> list[tuple[_Item, float]]:
        """The items scoring above zero for `query` under BM25, best first, at most `limit`."""
        items = list(self.items.values())
        if not items:
            return []
        average = sum(item.terms.total() for item in items) / len(items) or 1.0
        idf = {term: _idf(term, items) for term in set(query)}
        scored = [(item, _bm25(item, query, idf, average)) for item in items]
        hits = [(item, score) for item, score in scored if score > 0]
        hits.sort(key=lambda hit: hit[1], reverse=True)  # stable: ties keep insertion order
        return hits[:limit]


def _idf(term: str, items: list[_Item]) -> float:
    containing = sum(1 for item in items if term in item.terms)
    return math.log(1 + (len(items) - containing + 0.5) / (containing + 0.5))


def _bm25(item: _Item, query: list[str], idf: dict[str, float], average: float) -> float:
    norm = _K1 * (1 - _B + _B * item.terms.total() / average)
    score = 0.0
    for term in query:
        tf = item.terms[term]
        score += idf[term] * tf * (_K1 + 1) / (tf + norm)
    return score


def _new_store(_context: ToolContext) -> ContentStoreState:
    return ContentStoreState()


content_store: ToolModule[ContentStoreState] = ToolModule(
    "content_store",
    _new_store,
    scope=Scope.SESSION,
    description="Text documents kept per session, readable by line range and searchable (BM25).",
)


@content_store.tool
def create_store(state: ContentStoreState) -> CallResult:
    """Return the id of this session's content store; calling it again returns the same id."""
    return CallResult.both(
        f"Content store {state.store_id} holds {len(state.items)} item(s).",
        {"storeId": state.store_id, "count": len(state.items)},
    )


@content_store.tool
def add_content(
    state: ContentStoreState,
    filename: Annotated[str, "A name for the content, e.g. notes.md; need not be unique."],
    content: Annotated[str, "The text to store."],
) -> CallResult:
    """Store a text document and return its id; adding a filename again adds a new item."""
    if not filename.strip():
        msg = "Error: filename must not be empty"
        raise ToolError(msg)
    item = state.add(filename, content)
    return CallResult.both(
        f"Added {item.id}: {item.filename} ({item.size} bytes, {len(item.lines)} lines)",
        {**item.summary(), "storeId": state.store_id},
    )


@content_store.tool
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


@content_store.tool
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
    text = "\n".join(item.lines[first - 1 : last])
    data = {**item.summary(), "fromLine": first, "toLine": last, "content": text}
    return CallResult.both(text, data)


def _line_range(item: _Item, from_line: int | None, to_line: int | None) -> tuple[int, int]:
    """Check a requested range against `item`; an end past the last line is clamped to it."""
    total = len(item.lines)
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


@content_store.tool
def search_content(
    state: ContentStoreState,
    query: Annotated[str, "Words to look for; ranked by BM25 over filename and content."],
    limit: Annotated[int, "How many results at most, 1 to 100."] = 5,
) -> CallResult:
    """Search this session's documents and return the best matches with a snippet each."""
    if not 1 <= limit <= _MAX_LIMIT:
        msg = f"Error: limit must be between 1 and {_MAX_LIMIT}, got {limit}"
        raise ToolError(msg)
    terms = _terms(query)
    if not terms:
        msg = f"Error: query {query!r} has no words to search for"
        raise ToolError(msg)
    words = set(terms)
    results = [
        {"id": item.id, "filename": item.filename, "score": score, "snippet": item.snippet(words)}
        for item, score in state.rank(terms, limit)
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
