"""URI templates of resource templates: ``notes://{session_note}`` and matching URIs against them.

Only simple string expansion is supported (RFC 6570 level 1: ``{name}``),
which is what MCP hosts and FastMCP users write: each variable stands for one
path segment or a part of one, never a ``/``, and its value is
percent-decoded. A template with any other expression (``{+path}``,
``{?query}``, ``{a,b}``) is refused when the module is declared, with the
reason, rather than matched in a way its author did not mean.

A variable is text in the URI, but its handler's parameter may be typed: the
template then reads the text as the JSON value the argument's schema takes
(`UriTemplate.typed`), and the one converter of tool arguments structures and
checks it as it does a tool's. A template matches a URI when its literal
parts do and each variable's text reads as one of its variable's JSON types,
in one syntax each, JSON's own: an integer is ``-?(0|[1-9][0-9]*)`` (no sign
``+``, no leading zero), a number adds a
fraction and an exponent, a boolean is ``true`` or ``false``. So
``users://abc/profile`` is no URI of ``users://{user_id}/profile`` when
``user_id`` is an int, and a later template that reads ``abc`` still gets
it. What the value must be beyond its type (bounds, a pattern, a Literal's or
an Enum's values) is checked after the match, on the template matched: such
a URI is refused saying why rather than handed to another template.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from typing import TYPE_CHECKING, Any, Final, final

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["STRING_ONLY", "URI_TYPES", "UriTemplate", "text_of"]

_EXPRESSION: Final = re.compile(r"\{([^{}]*)\}")
_VARIABLE: Final = re.compile(r"[a-z][a-z0-9_]*")
MAX_VARIABLE_LENGTH: Final = 1024
"""The longest value a variable may take, in characters of the URI (before decoding)."""

URI_TYPES: Final = frozenset({"string", "integer", "number", "boolean"})
"""The JSON types a variable's text may be read as."""
STRING_ONLY: Final = frozenset({"string"})
"""The types of a variable read as text as it is: the default, a prompt argument's."""
# int() reads at most 4300 digits; a variable is shorter (MAX_VARIABLE_LENGTH).
_INTEGER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_BOOLEANS: Final = {"true": True, "false": False}
_EXPECTED: Final = {"integer": "an integer", "number": "a number", "boolean": "true or false"}


@final
@attrs.frozen
class UriTemplate:
    """A parsed URI template: its text, its variables in order, and the pattern that matches."""

    text: str
    """The template as declared, e.g. ``content://documents/{document_id}``."""
    variables: tuple[str, ...]
    """The variables' names, in order of appearance."""
    _pattern: re.Pattern[str] = attrs.field(repr=False, eq=False, alias="_pattern")
    types: tuple[frozenset[str], ...] = attrs.field(kw_only=True)
    """Per variable, in order, the JSON types (of `URI_TYPES`) its text is read as."""

    @types.default
    def _all_strings(self) -> tuple[frozenset[str], ...]:
        return (STRING_ONLY,) * len(self.variables)

    @classmethod
    def parse(cls, text: str) -> UriTemplate:
        """Parse `text`; raises ValueError naming what is wrong with it."""
        if not text or any(character.isspace() for character in text):
            msg = f"URI template {text!r} must be a non-empty URI without spaces"
            raise ValueError(msg)
        if "://" not in text.split("{", 1)[0]:
            msg = f"URI template {text!r} must start with a scheme, e.g. 'notes://{{id}}'"
            raise ValueError(msg)
        literals: list[str] = []
        variables: list[str] = []
        position = 0
        for expression in _EXPRESSION.finditer(text):
            literal = text[position : expression.start()]
            _check_literal(text, literal)
            if not literal and variables:
                msg = (
                    f"URI template {text!r}: variables {variables[-1]!r} and "
                    f"{expression.group(1)!r} must be separated by a literal"
                )
                raise ValueError(msg)
            literals.append(literal)
            name = expression.group(1)
            _check_variable(text, name, variables)
            variables.append(name)
            position = expression.end()
        rest = text[position:]
        _check_literal(text, rest)
        return cls(text, tuple(variables), _pattern_of(literals, variables, rest))

    @property
    def is_static(self) -> bool:
        """Whether the template names one URI (it has no variables)."""
        return not self.variables

    def typed(self, types: Mapping[str, frozenset[str]]) -> UriTemplate:
        """This template, each variable read as the JSON types `types` names for it.

        A variable `types` leaves out stays a string. Raises ValueError naming
        a variable it does not have, or a type no text is read as.
        """
        for name, kinds in types.items():
            if name not in self.variables:
                msg = f"URI template {self.text!r} has no variable {name!r}"
                raise ValueError(msg)
            if not kinds or not kinds <= URI_TYPES:
                msg = f"URI template {self.text!r}: {name!r} cannot be read as {sorted(kinds)}"
                raise ValueError(msg)
        read_as = tuple(types.get(name, STRING_ONLY) for name in self.variables)
        return attrs.evolve(self, types=read_as)

    def match(self, uri: str) -> dict[str, Any] | None:
        """The variables' values if `uri` matches, percent-decoded and read; else ``None``.

        Each value is the JSON value its text reads as (a str for a string
        variable, an int for an integer one); ``None`` also when a variable's
        text reads as none of its types (see the module docstring).
        """
        read = self.read(uri)
        return read if isinstance(read, dict) else None

    def refusal(self, uri: str) -> str | None:
        """Why `uri`, which this template's literal parts match, is none of its URIs.

        Names the first variable whose text is not of its type, the text and
        the type; ``None`` when `uri` matches, or its literal parts do not.
        """
        read = self.read(uri)
        return read if isinstance(read, str) else None

    def read(self, uri: str) -> dict[str, Any] | str | None:
        """`match` and `refusal` at once: the variables' values if `uri` matches, why not
        (a str) if only a variable's type stops it, else ``None``."""
        found = self._pattern.fullmatch(uri)
        if found is None:
            return None
        values: dict[str, Any] = {}
        for name, kinds in zip(self.variables, self.types, strict=True):
            text = urllib.parse.unquote(found[name])
            try:
                values[name] = _value_of(text, kinds)
            except ValueError as exc:
                return f"variable {name!r} of {self.text!r} is {text!r:.80}, not {exc}"
        return values


def _pattern_of(literals: list[str], variables: list[str], rest: str) -> re.Pattern[str]:
    """The pattern of a template: ``literals[i]``, then ``variables[i]``..., then `rest`.

    Each variable takes the shortest text (of one to `MAX_VARIABLE_LENGTH` characters, no
    ``/``) that the literal after it follows, and keeps it: the variable and that literal
    are an atomic group, never gone back into. Without it, a URI that nearly matches makes
    the engine try every way of cutting it between the variables — a second and more for
    ``x://{a}-{b}-{c}.json`` against a thousand dashes — on the loop every call shares.
    """
    variable = f"[^/]{{1,{MAX_VARIABLE_LENGTH}}}?"
    following = [*literals[1:], rest]
    parts = [re.escape(literals[0] if variables else rest)]
    for index, name in enumerate(variables):
        # The last variable reaches the URI's end: committed any earlier, it could not.
        end = r"\Z" if index == len(variables) - 1 else ""
        parts.append(f"(?>(?P<{name}>{variable}){re.escape(following[index])}{end})")
    return re.compile("".join(parts))


def _value_of(text: str, kinds: frozenset[str]) -> object:
    """`text` as the first of `kinds` it reads as; ValueError saying what it should be.

    Integer, number and boolean first: a variable that may be a string as
    well (``Literal[1, "a"]``) reads ``1`` as the number.
    """
    if "integer" in kinds and _INTEGER.fullmatch(text):
        return int(text)
    if "number" in kinds and _NUMBER.fullmatch(text):
        number = float(text)
        if math.isfinite(number):  # ``1e999`` reads as infinity, which JSON has not
            return number
    if "boolean" in kinds and text in _BOOLEANS:
        return _BOOLEANS[text]
    if "string" in kinds:
        return text
    raise ValueError(" or ".join(_EXPECTED[kind] for kind in sorted(kinds)))


def _check_literal(text: str, literal: str) -> None:
    if "{" in literal or "}" in literal:
        msg = f"URI template {text!r} has an unbalanced '{{' or '}}'"
        raise ValueError(msg)


def _check_variable(text: str, name: str, seen: list[str]) -> None:
    if not _VARIABLE.fullmatch(name):
        msg = (
            f"URI template {text!r}: {{{name}}} is not supported; a variable is a lowercase "
            "name (letters, digits, '_'), with no operator or list (RFC 6570 level 1)"
        )
        raise ValueError(msg)
    if name in seen:
        msg = f"URI template {text!r} names the variable {name!r} twice"
        raise ValueError(msg)


def text_of(value: object) -> str:
    """How a URI writes the JSON scalar `value` of a variable: the text it reads back as.

    A string as it is, a number or a boolean in JSON (``1``, ``2.5``, ``true``):
    what completing a variable typed ``Literal[1, 2]`` or an IntEnum suggests.
    """
    return value if isinstance(value, str) else json.dumps(value)
