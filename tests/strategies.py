"""Hypothesis strategies shared by the test modules."""

from __future__ import annotations

from hypothesis import strategies as st

from protocol import ToolContext

# Ids as a middleware may send them: printable, no control characters, short.
ids = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=20)
optional_ids = st.none() | ids

contexts = st.builds(ToolContext, ids, optional_ids, optional_ids)

# Tiny pools so that generated contexts collide often; "none" and "default"
# are the literals the replaced design's string keys confused with absent parts
# (docs/design.md).
small_contexts = st.builds(
    ToolContext,
    st.sampled_from(["s1", "s2", "none"]),
    st.sampled_from([None, "a1", "none"]),
    st.sampled_from([None, "t1", "default"]),
)

# Model-generated arguments: JSON-ish values under names without "__".
argument_names = st.text(min_size=1, max_size=10).filter(lambda name: not name.startswith("__"))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
model_arguments = st.dictionaries(argument_names, json_values, max_size=5)

# Look-alikes of the context fields' spellings: each letter may change case or
# become a letter of another script, a fullwidth or mathematical one that
# reads the same (l, 1 and | for I; 0 for o); anything that reads as nothing
# or as a separator may come before any letter. All keep the key's skeleton.
_READS_AS: dict[str, str] = {
    "a": "\u0430\u03b1\uff41\U0001d41a",  # Cyrillic, Greek, fullwidth, bold
    "A": "\u0410\u0391\uff21",
    "d": "\u0501\uff44",
    "D": "\uff24",
    "e": "\u0435\u03b5\uff45",
    "h": "\u04bb\u0570\uff48",
    "i": "\u0456\u03b9\u0131\uff49\u00ed",  # ... dotless i, i with acute
    "I": "\u0406\u0399\u04c0\uff29l1|",
    "n": "\u03b7\uff4e",
    "o": "\u043e\u03bf\u0585\uff4f0",
    "r": "\uff52",
    "s": "\u0455\uff53\U0001d42c\u017f",  # ... long s
    "S": "\u0405\uff33",
    "t": "\u03c4\uff54",
    "T": "\u0422\u03a4\uff34",
    "_": "\uff3f-. ",
}
_READS_AS_NOTHING = (
    " \t\u00a0\u3000_-."  # spaces and separators
    "\u00ad\u200b\u200c\u200d\u2060\ufeff\u202e"  # soft hyphen, zero-width, bidi override
    "\ufe0f\u034f\u3164\u115f"  # variation selector, grapheme joiner, Hangul fillers
)
_META_SPELLINGS = (
    "sessionId",
    "session_id",
    "assistantId",
    "assistant_id",
    "threadId",
    "thread_id",
)


@st.composite
def _reads_as(draw: st.DrawFn, word: str) -> str:
    """`word` with each letter possibly swapped for a look-alike and invisibles around."""
    parts = []
    for char in word:
        parts.append(draw(st.text(st.sampled_from(_READS_AS_NOTHING), max_size=1)))
        look_alikes = [char, char.swapcase(), *_READS_AS.get(char, "")]
        if char == "_":
            look_alikes.append("")
        parts.append(draw(st.sampled_from(look_alikes)))
    parts.append(draw(st.text(st.sampled_from(_READS_AS_NOTHING), max_size=1)))
    return "".join(parts)


lookalike_meta_keys = st.sampled_from(_META_SPELLINGS).flatmap(_reads_as)
"""Keys that read as a context field's ``_meta`` spelling (the spelling itself included)."""

# "__" as a reader sees it: low lines or fullwidth ones, invisibles around them.
_low_line = st.sampled_from(["_", "\uff3f"])
_invisibles = st.text(st.sampled_from([" ", "\t", "\u200b", "\ufeff"]), max_size=1)
lookalike_argument_keys = st.builds(
    lambda *parts: "".join(parts),
    _invisibles,
    _low_line,
    _invisibles,
    _low_line,
    lookalike_meta_keys,
)
"""Argument names that read as a ``__`` context field (the field itself included)."""
