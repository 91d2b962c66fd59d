"""Parsing a tools/call-shaped mapping into (tool name, context, clean arguments)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard, final

import attrs

from ._context import DEFAULT_POLICY, ContextPolicy, ToolContext, _split
from ._errors import CallFormatError

__all__ = ["ParsedCall", "parse_call"]


@final
@attrs.frozen
class ParsedCall:
    """A call taken apart: what to run, for whom, with which arguments."""

    name: str
    """The tool name exactly as the caller wrote it."""
    context: ToolContext
    """Who the call is for."""
    arguments: dict[str, Any]
    """The arguments without any context field: what the handler sees."""
    meta: Mapping[str, Any]
    """The call's ``_meta`` as given (empty when absent)."""
    session_defaulted: bool
    """True when the call named no session and the lenient policy supplied one."""


_EMPTY: Mapping[str, Any] = {}


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # A dict is the usual case; the Mapping ABC check costs several times more.
    return type(value) is dict or isinstance(value, Mapping)


def _mapping_field(params: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    value = params.get(field)
    if value is None:
        return _EMPTY
    if not _is_mapping(value):
        msg = f"{field!r} must be an object, got {type(value).__name__}"
        raise CallFormatError(msg)
    return value


def parse_call(params: Mapping[str, Any], policy: ContextPolicy = DEFAULT_POLICY) -> ParsedCall:
    """Parse ``{"name": ..., "arguments": {...}, "_meta": {...}}`` into a `ParsedCall`.

    ``arguments`` and ``_meta`` may be absent. Context comes from both; see
    `extract_context` for the rules. Raises `CallFormatError` for a malformed
    mapping and `ContextError` for a bad context field. `params` is not mutated.
    """
    if not _is_mapping(params):
        msg = f"a tool call must be an object, got {type(params).__name__}"
        raise CallFormatError(msg)
    name = params.get("name")
    if not isinstance(name, str) or not name:
        got = "nothing" if name is None else repr(name)
        msg = f"a tool call needs 'name', a non-empty string; got {got}"
        raise CallFormatError(msg)
    arguments = _mapping_field(params, "arguments")
    meta = _mapping_field(params, "_meta")
    context, clean, defaulted = _split(arguments, meta, policy)
    return ParsedCall(name, context, clean, meta, defaulted)
