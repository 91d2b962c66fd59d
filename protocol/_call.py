"""Parsing a tools/call-shaped mapping into (tool name, context, clean arguments)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard, final

import attrs

from ._caller import NoSessionError
from ._context import (
    DEFAULT_POLICY,
    SESSION_REQUIRED,
    ContextPolicy,
    SessionSource,
    ToolContext,
    _split,
)
from ._errors import CallFormatError, ContextError
from ._handles import HANDLE_ARGUMENT, HANDLE_REQUIRED, HandleRequiredError

if TYPE_CHECKING:
    from ._caller import Caller
    from ._handles import HandleReader

__all__ = ["ParsedCall", "call_name", "parse_call", "parse_named_call", "split_call"]


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
    """True when neither the call nor its caller named a session and the lenient
    policy supplied its default one."""
    session_source: SessionSource
    """Where the session came from: the host's ``_meta``, the arguments (which a model
    may write), the caller's default session, or the policy's (`session_defaulted`)."""


_EMPTY: Mapping[str, Any] = {}


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # A dict is the usual case; the Mapping ABC check costs several times more.
    return type(value) is dict or isinstance(value, Mapping)


def _mapping_field(params: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    value = params.get(field)
    if value is None:
        return _EMPTY
    if type(value) is not dict and not _is_mapping(value):  # a dict, the usual case, inline
        msg = f"{field!r} must be an object, got {type(value).__name__}"
        raise CallFormatError(msg)
    return value


def call_name(params: Mapping[str, Any]) -> str:
    """The tool name of a tools/call-shaped mapping; raises CallFormatError if it has none.

    Read before the rest, so that an unknown tool can be refused the same way
    whatever the call's context or arguments.
    """
    if type(params) is not dict and not _is_mapping(params):  # a dict, the usual case, inline
        msg = f"a tool call must be an object, got {type(params).__name__}"
        raise CallFormatError(msg)
    name = params.get("name")
    if not isinstance(name, str) or not name:
        got = "nothing" if name is None else repr(name)
        msg = f"a tool call needs 'name', a non-empty string; got {got}"
        raise CallFormatError(msg)
    return name


def parse_call(
    params: Mapping[str, Any], policy: ContextPolicy = DEFAULT_POLICY, caller: Caller | None = None
) -> ParsedCall:
    """Parse ``{"name": ..., "arguments": {...}, "_meta": {...}}`` into a `ParsedCall`.

    ``arguments`` and ``_meta`` may be absent. Context comes from both; see
    `extract_context` for the rules. With a `caller` (who the transport says
    sent the call), its rules apply too: a call naming no session gets the
    caller's default one, and a named session must be one the caller may reach
    by that channel: in its tenant, and, for a caller whose arguments may not
    name sessions, its own unless ``_meta`` named it (see `Caller`). Raises
    `CallFormatError` for a malformed mapping and `ContextError` for a bad or
    forbidden context. `params` is not mutated.
    """
    return parse_named_call(params, call_name(params), policy, caller)


def parse_named_call(
    params: Mapping[str, Any], name: str, policy: ContextPolicy, caller: Caller | None
) -> ParsedCall:
    """`parse_call` for a mapping whose `name` was already read by `call_name`."""
    return ParsedCall(name, *split_call(params, policy, caller))


def split_call(
    params: Mapping[str, Any],
    policy: ContextPolicy,
    caller: Caller | None,
    *,
    stateless: bool = False,
) -> tuple[ToolContext, dict[str, Any], Mapping[str, Any], bool, SessionSource]:
    """`parse_named_call`'s parts, (context, arguments, meta, session_defaulted,
    session_source), as a tuple.

    For a router that keeps the parts in a record of its own: every tool call
    goes through here, and a `ParsedCall` more per call is measurable.
    `stateless` is for a tool that keeps no state: a call of it that names no
    session is never refused for that (it lands in the caller's or the policy's
    default session, harmlessly shared), unless the policy is strict.
    """
    arguments = _mapping_field(params, "arguments")
    meta = _mapping_field(params, "_meta")
    if caller is None:
        context, clean, source = _split(arguments, meta, policy)
    else:
        context, clean, source = _split(arguments, meta, _lenient(policy))
        handles = caller.handles
        if handles is not None:
            # Infrastructure, like __sessionId: never the handler's, sent or not.
            handle = clean.pop(HANDLE_ARGUMENT, None)
            if source == "policy":
                context, source = _from_handle(context, handle, handles, caller, stateless)
        context, source = _claim(context, source, policy, caller, stateless)
    return context, clean, meta, source == "policy", source


@functools.cache
def _lenient(policy: ContextPolicy) -> ContextPolicy:
    # The caller's default session comes first; the strict rule applies after it.
    return attrs.evolve(policy, require_session=False)


def _from_handle(
    context: ToolContext, handle: object, handles: HandleReader, caller: Caller, stateless: bool
) -> tuple[ToolContext, SessionSource]:
    """The context of a call that named no session, where handles are on: the handle's
    conversation; else, left to `_claim`, the transport's session, or a stateless tool's
    default; else HandleRequiredError."""
    if handle is not None:
        session = handles.session_for(handle, caller.tenant)
        return ToolContext(session, context.assistant_id, context.thread_id), "handle"
    if caller.transport_session is None and not stateless:
        raise HandleRequiredError(HANDLE_REQUIRED)
    return context, "policy"


def _claim(
    context: ToolContext,
    source: SessionSource,
    policy: ContextPolicy,
    caller: Caller,
    stateless: bool = False,
) -> tuple[ToolContext, SessionSource]:
    """Apply `caller`'s rules to a parsed context: (context, where its session came from)."""
    if source != "policy":
        caller.check(context, source)
        return context, source
    try:
        session = caller.default_session(policy)  # inside the caller's reach by construction
    except NoSessionError:
        if not stateless:
            raise
        session = None  # nothing to share: the policy's default will do
    if session is not None:
        return ToolContext(session, context.assistant_id, context.thread_id), "caller"
    if policy.require_session:
        raise ContextError(SESSION_REQUIRED)
    return context, "policy"
