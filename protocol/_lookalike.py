"""Look-alike context keys: keys that read as a context field but are not one.

Why
---
``_meta`` is shared with the protocol and with other software, so a
``_meta`` key the runtime does not know is left alone. But a key that a
person would read as ``sessionId`` -- ``sessionId `` with a trailing space,
``sessionId`` with a zero-width space inside or a Cyrillic e (U+0435) for
the Latin one, ``sesionId`` -- would then be ignored silently: the call
would fall into the default session and pool with unrelated conversations,
or run without its assistant and so without the playbook store's ownership
check. Such a key is refused instead.

The skeleton
------------
Two keys look alike when their *skeletons* are (nearly) equal. The skeleton
of a key is what is left of it after

1. compatibility decomposition (NFKD): the fullwidth s (U+FF53), the
   mathematical bold s (U+1D42C), the long s (U+017F) and the like become
   ``s``, and accents come off as separate marks;
2. replacing the Cyrillic, Greek, Armenian and Latin-extension letters that
   render like a Latin letter by that letter (``_LOOKALIKES`` below: a short
   explicit table, not Unicode's full confusables data);
3. case folding;
4. reading ``l``, ``1`` and ``|`` as ``i`` and ``0`` as ``o``;
5. keeping only letters and digits: separators (``_ - .``), whitespace,
   accents, and invisible characters (zero-width spaces and joiners, bidi
   marks, variation selectors, the Hangul fillers) all go.

So ``sessionId``, ``session_id``, ``SESSION-ID``, ``sessionld``, and
``sessionId`` in fullwidth letters or with Cyrillic letters for some Latin
ones, all have the skeleton ``sessionid``.

Near misses
-----------
A key is a look-alike of a context field when its skeleton is at most one
edit (insert, delete, replace, or swap two neighbours) away from the field's:
``sessionid``, ``assistantid`` or ``threadid``. One edit catches the usual
slip of the keyboard (``sesionId``, ``thredId``, ``sessionIds``). Two would
also catch ordinary keys of other software: ``versionId``, ``missionId`` and
``sectionId`` are two edits from ``sessionid``; ``readId``, ``headId`` and
``trendId`` from ``threadid``; ``resistantId`` from ``assistantid``. The
keys a call's ``_meta`` usually carries -- ``progressToken``, the trace
context (``traceparent``, ``tracestate``, ``baggage``), ids such as
``requestId``, ``userId``, ``clientId``, ``taskId``, ``traceId`` -- are far
from every field. The one known casualty is the word ``threaded``, one
replacement from ``threadid``: a host that sends it in ``_meta`` should put
it under a prefix of its own.

Prefixed keys
-------------
The MCP specification lets anyone put keys in ``_meta`` under a prefix of
their own (``com.example/…``, reverse DNS, ``io.modelcontextprotocol/`` for
the protocol itself). A key under someone else's prefix is theirs, whatever
its name: ``com.example/sessionId`` is that vendor's session, and refusing it
would break every call from that vendor's client. Keys under this project's
own prefix (the one `SERVICE_INFO_META_KEY` uses) are ours, and context is
never read from there, so a context field's look-alike under it is refused.
A prefix that is not a valid one (``/sessionId``, ``sessi on/Id``) or has
nothing after it (``sessionId/``) does not make a key foreign: the whole key
is compared.

Cost
----
Checking runs on every ``_meta`` key that is not an exact spelling, and on
every argument name that does not start with a letter or digit, so it is
bounded by what a caller can send. A key longer than ``LONGEST_LOOKALIKE``
characters, or whose decomposition is more than twice that, is not
compared: the longest accepted spelling has 14 characters, and nobody slips
into 18 more by mistake. (A caller who pads a key on purpose gains nothing:
an ignored key is the same as an absent one.) A pure-ASCII key is lowered
and filtered by bytes tables, in C; only other keys are normalised, and
only the letters and digits left after that go through the lookup tables.

Values are not normalised
-------------------------
Ids are compared exactly, as the caller sent them. An ``assistantId`` of
``alice`` spelt with a Cyrillic a (U+0430) is another assistant than
``alice``: it owns nothing of hers, and she nothing of its, which is
isolation working. A
normalising comparison could only ever *merge* ids that the host issued as
distinct -- two tenants' sessions, two assistants -- and merging is exactly
what must not happen. A look-alike value can mislead a person reading a log,
not the checks.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

from ._result import SERVICE_INFO_META_KEY

__all__ = [
    "LONGEST_LOOKALIKE",
    "claims_context",
    "describe",
    "meta_near_field",
    "near_field",
    "skeleton",
]

LONGEST_LOOKALIKE: Final = 32
"""Keys longer than this many characters are never taken for a look-alike."""

# Letters of other scripts that render like a Latin letter in common fonts,
# by name. Capitals and small letters are listed apart because some differ:
# Greek capital eta looks like H, its small letter like n.
_LOOKALIKES: Final = {
    "CYRILLIC SMALL LETTER A": "a",
    "CYRILLIC CAPITAL LETTER A": "A",
    "CYRILLIC CAPITAL LETTER VE": "B",
    "CYRILLIC SMALL LETTER ES": "c",
    "CYRILLIC CAPITAL LETTER ES": "C",
    "CYRILLIC SMALL LETTER KOMI DE": "d",
    "CYRILLIC SMALL LETTER IE": "e",
    "CYRILLIC CAPITAL LETTER IE": "E",
    "CYRILLIC SMALL LETTER SHHA": "h",
    "CYRILLIC CAPITAL LETTER EN": "H",
    "CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I": "i",
    "CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I": "I",
    "CYRILLIC LETTER PALOCHKA": "I",
    "CYRILLIC SMALL LETTER PALOCHKA": "l",
    "CYRILLIC SMALL LETTER JE": "j",
    "CYRILLIC CAPITAL LETTER JE": "J",
    "CYRILLIC CAPITAL LETTER KA": "K",
    "CYRILLIC CAPITAL LETTER EM": "M",
    "CYRILLIC SMALL LETTER O": "o",
    "CYRILLIC CAPITAL LETTER O": "O",
    "CYRILLIC SMALL LETTER ER": "p",
    "CYRILLIC CAPITAL LETTER ER": "P",
    "CYRILLIC SMALL LETTER QA": "q",
    "CYRILLIC CAPITAL LETTER QA": "Q",
    "CYRILLIC SMALL LETTER DZE": "s",
    "CYRILLIC CAPITAL LETTER DZE": "S",
    "CYRILLIC CAPITAL LETTER TE": "T",
    "CYRILLIC SMALL LETTER WE": "w",
    "CYRILLIC CAPITAL LETTER WE": "W",
    "CYRILLIC SMALL LETTER HA": "x",
    "CYRILLIC CAPITAL LETTER HA": "X",
    "CYRILLIC SMALL LETTER U": "y",
    "CYRILLIC CAPITAL LETTER U": "Y",
    "GREEK SMALL LETTER ALPHA": "a",
    "GREEK CAPITAL LETTER ALPHA": "A",
    "GREEK CAPITAL LETTER BETA": "B",
    "GREEK LUNATE SIGMA SYMBOL": "c",
    "GREEK CAPITAL LUNATE SIGMA SYMBOL": "C",
    "GREEK SMALL LETTER EPSILON": "e",
    "GREEK CAPITAL LETTER EPSILON": "E",
    "GREEK SMALL LETTER ETA": "n",
    "GREEK CAPITAL LETTER ETA": "H",
    "GREEK SMALL LETTER IOTA": "i",
    "GREEK CAPITAL LETTER IOTA": "I",
    "GREEK LETTER YOT": "j",
    "GREEK CAPITAL LETTER YOT": "J",
    "GREEK SMALL LETTER KAPPA": "k",
    "GREEK CAPITAL LETTER KAPPA": "K",
    "GREEK CAPITAL LETTER MU": "M",
    "GREEK SMALL LETTER NU": "v",
    "GREEK CAPITAL LETTER NU": "N",
    "GREEK SMALL LETTER OMICRON": "o",
    "GREEK CAPITAL LETTER OMICRON": "O",
    "GREEK SMALL LETTER RHO": "p",
    "GREEK CAPITAL LETTER RHO": "P",
    "GREEK SMALL LETTER TAU": "t",
    "GREEK CAPITAL LETTER TAU": "T",
    "GREEK SMALL LETTER UPSILON": "u",
    "GREEK CAPITAL LETTER UPSILON": "Y",
    "GREEK SMALL LETTER CHI": "x",
    "GREEK CAPITAL LETTER CHI": "X",
    "GREEK SMALL LETTER GAMMA": "y",
    "GREEK CAPITAL LETTER ZETA": "Z",
    "ARMENIAN SMALL LETTER HO": "h",
    "ARMENIAN SMALL LETTER VO": "n",
    "ARMENIAN SMALL LETTER OH": "o",
    "ARMENIAN SMALL LETTER SEH": "u",
    "LATIN SMALL LETTER ALPHA": "a",
    "LATIN SMALL LETTER SCRIPT G": "g",
    "LATIN SMALL LETTER IOTA": "i",
    "LATIN SMALL LETTER DOTLESS I": "i",
    "LATIN LETTER SMALL CAPITAL I": "i",
    "LATIN LETTER DENTAL CLICK": "l",
}
_CONFUSABLES: Final = str.maketrans(
    {unicodedata.lookup(name): latin for name, latin in _LOOKALIKES.items()}
)
# After case folding, l, 1 and | read as i, and 0 as o.
_READS_AS: Final = str.maketrans("l1|0", "iiio")
# Letters that render as nothing; NFKD turns the other Hangul fillers (U+3164,
# U+FFA0) into U+1160.
_FILLERS: Final = "\u115f\u1160"
# What a skeleton drops: all but letters and digits (and |), and the fillers.
# For an ASCII key, bytes tables do it all in C.
_NOT_SHOWN: Final = re.compile(rf"[^\w|]|[_{_FILLERS}]")
_ASCII_READS_AS: Final = bytes.maketrans(b"l1|0", b"iiio")
_ASCII_DROPPED: Final = bytes(code for code in range(128) if not chr(code).isalnum())
# What shows as nothing, or as blank, for `claims_context`: controls, format
# characters (zero-width, bidi) and spaces.
_INVISIBLE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs"})

# Field skeleton -> field.
_FIELDS: Final = {"sessionid": "session_id", "assistantid": "assistant_id", "threadid": "thread_id"}
_LONGEST_NEAR: Final = max(map(len, _FIELDS)) + 1
# Skeleton length -> the (field skeleton, field) pairs that are possibly one edit away.
_FIELDS_NEAR_LENGTH: Final = {
    length: [(sketch, field) for sketch, field in _FIELDS.items() if abs(len(sketch) - length) <= 1]
    for length in range(min(map(len, _FIELDS)) - 1, _LONGEST_NEAR + 1)
}

_LABEL: Final = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_PREFIX: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_OWN_PREFIX: Final = SERVICE_INFO_META_KEY.partition("/")[0].lower()


def skeleton(key: str) -> str:
    """`key` reduced to what a reader sees in it (see the module docstring)."""
    if key.isascii():  # O(1) in CPython: a flag of the string
        return key.encode().lower().translate(_ASCII_READS_AS, _ASCII_DROPPED).decode()
    return _read(_NOT_SHOWN.sub("", unicodedata.normalize("NFKD", key)))


def _read(shown: str) -> str:
    """The skeleton of a decomposed key's letters and digits: the table lookups."""
    return shown.translate(_CONFUSABLES).casefold().translate(_READS_AS)


def _within_one_edit(a: str, b: str) -> bool:
    """Whether one insertion, deletion, replacement or swap of neighbours turns `a` into `b`."""
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    if len(longer) - len(shorter) > 1:
        return False
    # One edit leaves the first or the last `half` characters alike: a cheap
    # way out for most unrelated keys, such as ``requestId`` for ``sessionId``.
    half = (len(shorter) - 1) // 2
    if longer[:half] != shorter[:half] and longer[-half:] != shorter[-half:]:
        return False
    first = 0  # the first position where they differ
    for x, y in zip(longer, shorter, strict=False):
        if x != y:
            break
        first += 1
    if len(longer) != len(shorter):
        return longer[first + 1 :] == shorter[first:]
    return longer[first + 1 :] == shorter[first + 1 :] or (
        longer[first + 2 :] == shorter[first + 2 :]
        and longer[first : first + 2] == shorter[first : first + 2][::-1]
    )


def near_field(name: str) -> str | None:
    """The context field (``"session_id"``, …) that `name` looks like, or None.

    Call it only for names that are not an accepted spelling. Names longer
    than `LONGEST_LOOKALIKE` are never look-alikes.
    """
    if len(name) > LONGEST_LOOKALIKE:
        return None
    if name.isascii():
        sketch = skeleton(name)
    else:  # `skeleton`, with a way out before each costly step
        decomposed = unicodedata.normalize("NFKD", name)
        if len(decomposed) > 2 * LONGEST_LOOKALIKE:  # one U+FDFA decomposes into 18
            return None
        shown = _NOT_SHOWN.sub("", decomposed)
        if len(shown) > _LONGEST_NEAR:  # the lookups never shorten it
            return None
        sketch = _read(shown)
    for field_skeleton, field in _FIELDS_NEAR_LENGTH.get(len(sketch), ()):
        if _within_one_edit(sketch, field_skeleton):
            return field
    return None


def meta_near_field(key: str) -> str | None:
    """`near_field` for a ``_meta`` key: keys under another party's prefix are theirs."""
    if len(key) > LONGEST_LOOKALIKE:  # before `partition` copies a huge key
        return None
    return _meta_near_short_field(key)


@functools.lru_cache(maxsize=1024)
def _meta_near_short_field(key: str) -> str | None:
    # Cached: a client sends the same few _meta keys (progressToken, ...) on
    # every call. Keys are at most LONGEST_LOOKALIKE characters here, so the
    # cache holds at most 32 Ki characters of them however many a client makes up.
    prefix, slash, name = key.partition("/")
    if slash and name and _PREFIX.fullmatch(prefix):
        return near_field(name) if prefix.lower() == _OWN_PREFIX else None
    return near_field(key)


def claims_context(name: str) -> bool:
    """Whether an argument name starts with ``__``, or reads as if it did.

    `` __sessionId``, ``\\u200b__sessionId`` and ``__sessionId`` written with
    fullwidth low lines (U+FF3F) all read so. A name starting with a letter
    or digit never does.
    """
    if name[:1].isalnum():
        return False
    if name.startswith("__"):
        return True
    low_lines = 0
    for char in unicodedata.normalize("NFKC", name[:LONGEST_LOOKALIKE]):
        if char == "_":
            low_lines += 1
            if low_lines == 2:
                return True
        elif char not in _FILLERS and unicodedata.category(char) not in _INVISIBLE_CATEGORIES:
            return False
    return False


def describe(source: str, key: str) -> str:
    """`source` quoted for an error message, with the first character a reader may miss.

    ``'_meta.s\\u0435ssionId'`` becomes ``'_meta.s\\u0435ssionId' (U+0435 CYRILLIC
    SMALL LETTER IE at index 1 of the key)``, the escape standing for the letter.
    Over-long keys are cut, so a hostile one cannot bloat the error and logs.
    """
    if len(source) > LONGEST_LOOKALIKE:
        shown = f"{source[:LONGEST_LOOKALIKE]!r}… ({len(source)} characters)"
    else:
        shown = repr(source)
    index = next((n for n, char in enumerate(key[:LONGEST_LOOKALIKE]) if _unclear(char)), None)
    if index is None:
        return shown
    char = key[index]
    name = unicodedata.name(char, "unnamed character")
    return f"{shown} (U+{ord(char):04X} {name} at index {index} of the key)"


def _unclear(char: str) -> bool:
    """Whether `char` reads as something else, or as nothing: all but visible ASCII."""
    return not ("!" <= char <= "~")
