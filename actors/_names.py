"""The rule for the names a module gives itself and its tools, resources and prompts, and
the "did you mean" of a name (a tool, prompt, URI, option or command) that names none.

A leaf, so that whatever checks a module name (`ToolModule`, the ``state``
command reading an export) imports it downward.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["check_name", "did_you_mean"]

_NAME: Final = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def check_name(kind: str, name: str) -> None:
    """Raise ValueError, naming the rule, unless `name` is lowercase snake_case.

    `kind` says what the name is for (``"module"``, ``"tool"``…), in the message.
    """
    if not _NAME.match(name):
        msg = (
            f"{kind} name {name!r} must be lowercase snake_case (letters, digits, single "
            "underscores): '__' separates module and tool in full names"
        )
        raise ValueError(msg)


_SUGGESTED: Final = 3  # how many close names an "unknown" error suggests
# difflib's similarity ratio a name (also a URI, a command-line option or choice) must
# reach to be suggested. Not its default 0.6: the ``module__`` prefix a module's names
# share alone exceeds that (``box__nope`` is 0.7 like ``box__append``, 0.82 like
# ``box__nap``); one letter missing, doubled, swapped or wrong in a name of seven or more
# letters scores at least 0.857.
_CLOSE: Final = 0.85


def did_you_mean(name: str, known: Iterable[str], meaning: Callable[[str], object] = str) -> str:
    """``did you mean 'a' or 'b'? `` (trailing space included) naming what `name` is likely
    a typo of; ``""`` when no known name is close.

    At most three, closest first. `meaning` says what a known name designates, when several
    names designate one thing: each thing is then suggested once, in its spelling nearest
    `name`.
    """
    candidates = list(known)
    every = max(len(candidates), 1)  # difflib refuses 0; with no names none match
    nearest: dict[object, str] = {}
    for match in difflib.get_close_matches(name, candidates, every, _CLOSE):
        nearest.setdefault(meaning(match), match)
    close = list(nearest.values())[:_SUGGESTED]
    return f"did you mean {' or '.join(map(repr, close))}? " if close else ""
