"""URI templates of resource templates: ``notes://{session_note}`` and matching URIs against them.

Only simple string expansion is supported (RFC 6570 level 1: ``{name}``),
which is what MCP hosts and FastMCP users write: each variable stands for one
path segment or a part of one, never a ``/``, and its value is
percent-decoded. A template with any other expression (``{+path}``,
``{?query}``, ``{a,b}``) is refused when the module is declared, with the
reason, rather than matched in a way its author did not mean.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Final, final

import attrs

__all__ = ["UriTemplate"]

_EXPRESSION: Final = re.compile(r"\{([^{}]*)\}")
_VARIABLE: Final = re.compile(r"[a-z][a-z0-9_]*")
MAX_VARIABLE_LENGTH: Final = 1024
"""The longest value a variable may take, in characters of the URI (before decoding)."""


@final
@attrs.frozen
class UriTemplate:
    """A parsed URI template: its text, its variables in order, and the pattern that matches."""

    text: str
    """The template as declared, e.g. ``content://documents/{document_id}``."""
    variables: tuple[str, ...]
    """The variables' names, in order of appearance."""
    _pattern: re.Pattern[str] = attrs.field(repr=False, eq=False, alias="_pattern")

    @classmethod
    def parse(cls, text: str) -> UriTemplate:
        """Parse `text`; raises ValueError naming what is wrong with it."""
        if not text or any(character.isspace() for character in text):
            msg = f"URI template {text!r} must be a non-empty URI without spaces"
            raise ValueError(msg)
        if "://" not in text.split("{", 1)[0]:
            msg = f"URI template {text!r} must start with a scheme, e.g. 'notes://{{id}}'"
            raise ValueError(msg)
        pattern: list[str] = []
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
            pattern.append(re.escape(literal))
            name = expression.group(1)
            _check_variable(text, name, variables)
            variables.append(name)
            pattern.append(f"(?P<{name}>[^/]{{1,{MAX_VARIABLE_LENGTH}}}?)")
            position = expression.end()
        rest = text[position:]
        _check_literal(text, rest)
        pattern.append(re.escape(rest))
        return cls(text, tuple(variables), re.compile("".join(pattern)))

    @property
    def is_static(self) -> bool:
        """Whether the template names one URI (it has no variables)."""
        return not self.variables

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables' values if `uri` matches, percent-decoded; ``None`` if it does not."""
        found = self._pattern.fullmatch(uri)
        if found is None:
            return None
        return {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}


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
