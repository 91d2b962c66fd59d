"""ToolContext, the context policy, and extracting/injecting context fields.

Context fields are infrastructure: a trusted middleware adds them to a call's
arguments (``__sessionId``, ``__assistantId``, ``__threadId`` or the snake_case
``__session_id`` ...) or to its ``_meta`` (``sessionId`` ..., without ``__``).
Handlers never see them. Rules, all checked before anything else happens:

* every ``__``-prefixed argument must be a known context field: a typo such as
  ``__sessionid`` is an error, never a silent fall into the default session;
  so is an argument name that only looks ``__``-prefixed (`` __sessionId``,
  or ``__sessionId`` with fullwidth low lines);
* a ``_meta`` key that looks like a context field without being one of its
  accepted spellings (``SessionID``, ``sessionId `` with a trailing space,
  ``sessionId`` with a Cyrillic e, ``sesionId``) is an error for the same
  reason; other ``_meta`` keys, and keys under another party's prefix
  (``com.example/sessionId``), are not ours and are left alone. What "looks
  like" means, and why ids themselves are compared exactly, is explained in
  `protocol._lookalike`;
* ids are non-empty strings of at most ``max_id_length`` characters and
  ``max_id_bytes`` bytes of UTF-8, with no control characters;
* one field given twice (camelCase and snake_case, or arguments and ``_meta``)
  must carry one value.

The two places are two channels, and a call's parse says which one named its
session (`SessionSource`): ``_meta`` is the host's alone, while a model that
writes a tool's arguments can write ``__sessionId`` among them. A transport's
`Caller` may therefore trust the one and not the other (stdio does, see
`Caller.arguments_may_name_sessions`). A session both name, alike, counts as the
host's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, Literal, final

import attrs

from ._errors import ContextError
from ._lookalike import claims_context, describe, meta_near_field, near_field

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_POLICY",
    "SESSION_REQUIRED",
    "ContextPolicy",
    "SessionSource",
    "ToolContext",
    "extract_context",
    "inject_context",
]


@final
@attrs.frozen(cache_hash=True)
class ToolContext:
    """Who a call is for: a session, optionally an assistant and a thread in it.

    Absent parts are ``None``, a value distinct from every string, so an
    assistant literally named ``"none"`` can never collide with "no assistant".
    """

    session_id: str
    """The conversation the call belongs to; always present."""
    assistant_id: str | None = None
    """The assistant (agent) making the call, if the host names one."""
    thread_id: str | None = None
    """The thread within the session, if the host names one."""


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        msg = f"{attribute.name} must be at least 1, got {value}"
        raise ValueError(msg)


@final
@attrs.frozen(cache_hash=True)  # hashed per call by `_lenient`
class ContextPolicy:
    """How strictly context fields are checked."""

    require_session: bool = False
    """Strict mode: a call without a session id is rejected instead of defaulted."""
    default_session: str = "default"
    """The session a call without one lands in under the lenient policy."""
    max_id_length: int = attrs.field(default=256, validator=_positive)
    """The longest id accepted, in characters."""
    max_id_bytes: int = attrs.field(default=512, validator=_positive)
    """The longest id accepted, in bytes of UTF-8: with `max_id_length`, what bounds the
    key a store indexes (PostgreSQL refuses index rows of over 2 704 bytes, and one
    refused row would fail the other writes of its transaction)."""


DEFAULT_POLICY: Final = ContextPolicy()
"""Lenient: a missing session becomes ``"default"``; ids up to 256 characters."""
SESSION_REQUIRED: Final = (
    "a session id is required: add '__sessionId' to the arguments or 'sessionId' to _meta"
)
"""What the strict policy says to a call that names no session."""

SessionSource = Literal["meta", "arguments", "handle", "caller", "policy"]
"""Where a call's session came from: the request's ``_meta`` (the host's channel), its
arguments (``__sessionId``, which the model may have written), a conversation handle the
server minted (`protocol.HandleKeys`), the caller's own default session
(`Caller.default_session`), or the lenient policy's default one."""

# Field name on ToolContext -> the spellings accepted in arguments and in _meta.
_ARGUMENT_SPELLINGS: Final = {
    "__sessionId": "session_id",
    "__session_id": "session_id",
    "__assistantId": "assistant_id",
    "__assistant_id": "assistant_id",
    "__threadId": "thread_id",
    "__thread_id": "thread_id",
}
_META_SPELLINGS: Final = {
    "sessionId": "session_id",
    "session_id": "session_id",
    "assistantId": "assistant_id",
    "assistant_id": "assistant_id",
    "threadId": "thread_id",
    "thread_id": "thread_id",
}
_META_PREFIX: Final = "_meta."  # how an error, and `_record`, name a field found in _meta
_CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ACCEPTED_ARGUMENTS: Final = ", ".join(_ARGUMENT_SPELLINGS)
_ACCEPTED_META: Final = ", ".join(_META_SPELLINGS)
# How errors spell a field when they suggest it.
_CAMEL_CASE: Final = {
    "session_id": "sessionId",
    "assistant_id": "assistantId",
    "thread_id": "threadId",
}


def _describe(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _check_id(source: str, value: object, policy: ContextPolicy) -> str:
    if not isinstance(value, str):
        msg = f"context field {source!r} must be a string, got {_describe(value)}"
        raise ContextError(msg)
    if not value:
        msg = f"context field {source!r} must not be empty"
        raise ContextError(msg)
    length = len(value)
    if length > policy.max_id_length:
        msg = (
            f"context field {source!r} is {length} characters long; "
            f"the limit is {policy.max_id_length}"
        )
        raise ContextError(msg)
    # Control characters and lone surrogates are unprintable: most ids skip both searches.
    if not str.isprintable(value):  # str's own: a subclass cannot vouch for itself
        _refuse_unprintable(source, value)
    # A character takes at most 4 bytes: only a long id can be over the byte limit.
    if length * 4 > policy.max_id_bytes and len(value.encode()) > policy.max_id_bytes:
        msg = (
            f"context field {source!r} takes {len(value.encode())} bytes of UTF-8; "
            f"the limit is {policy.max_id_bytes}"
        )
        raise ContextError(msg)
    return value


def _refuse_unprintable(source: str, value: str) -> None:
    """Raise for a control character or a lone surrogate in `value`, if it holds one."""
    if match := _CONTROL_CHARACTER.search(value):
        msg = (
            f"context field {source!r} contains the control character "
            f"{match.group()!r} at index {match.start()}"
        )
        raise ContextError(msg)
    if match := _SURROGATE.search(value):
        # JSON's "\ud800" escape decodes to a lone surrogate, which no store,
        # log or wire encoding can write: it would fail other keys' saves too.
        msg = (
            f"context field {source!r} contains the lone surrogate "
            f"{match.group()!r} at index {match.start()}; ids must be valid Unicode text"
        )
        raise ContextError(msg)


def _unknown_field(
    source: str, key: str, suggestion: str | None, accepted: str, where: str = ""
) -> ContextError:
    """The error for a context field that is not one: named, with what to send instead."""
    hint = "" if suggestion is None else f"did you mean {suggestion!r}? "
    named = describe(source, key)
    msg = f"unknown context field {named}{where}; {hint}the accepted ones are {accepted}"
    return ContextError(msg)


def _record(found: dict[str, tuple[str, str]], field: str, source: str, value: str) -> None:
    """Record `field`'s value, unless it was found already: then the two must agree.

    Of two that agree, the ``_meta`` one is kept as the source: the host vouched for it.
    """
    earlier = found.get(field)
    if earlier is None:
        found[field] = (source, value)
    elif earlier[1] == value:
        if source.startswith(_META_PREFIX):
            found[field] = (source, value)
    else:
        msg = (
            f"conflicting values for {field}: {earlier[0]!r} is {earlier[1]!r} "
            f"but {source!r} is {value!r}; send one value"
        )
        raise ContextError(msg)


def _split_arguments(
    arguments: Mapping[str, Any], found: dict[str, tuple[str, str]], policy: ContextPolicy
) -> dict[str, Any]:
    clean: dict[str, Any] = {}
    for key, value in arguments.items():
        field = _ARGUMENT_SPELLINGS.get(key)
        if field is not None:  # a context field, spelled as accepted: the common case first
            _record(found, field, key, _check_id(key, value, policy))
            continue
        if not isinstance(key, str):
            msg = f"argument names must be strings, got {_describe(key)} {key!r}"
            raise ContextError(msg)
        if claims_context(key):
            near = near_field(key)
            suggestion = None if near is None else f"__{_CAMEL_CASE[near]}"
            raise _unknown_field(key, key, suggestion, _ACCEPTED_ARGUMENTS, where=" in arguments")
        clean[key] = value
    return clean


def _scan_meta(
    meta: Mapping[str, Any], found: dict[str, tuple[str, str]], policy: ContextPolicy
) -> None:
    for key, value in meta.items():
        field = _META_SPELLINGS.get(key)
        if field is not None:
            source = _META_PREFIX + key
            _record(found, field, source, _check_id(source, value, policy))
        elif not isinstance(key, str):
            msg = f"_meta keys must be strings, got {_describe(key)} {key!r}"
            raise ContextError(msg)
        elif (near := meta_near_field(key)) is not None:
            source = _META_PREFIX + key
            raise _unknown_field(source, key, _CAMEL_CASE[near], _ACCEPTED_META)


def _split(
    arguments: Mapping[str, Any], meta: Mapping[str, Any] | None, policy: ContextPolicy
) -> tuple[ToolContext, dict[str, Any], SessionSource]:
    """Return (context, clean arguments, where the session came from)."""
    found: dict[str, tuple[str, str]] = {}
    clean = _split_arguments(arguments, found, policy)
    if meta:
        _scan_meta(meta, found, policy)
    session = found.get("session_id")
    source: SessionSource
    if session is None:
        if policy.require_session:
            raise ContextError(SESSION_REQUIRED)
        source = "policy"
    else:
        source = "meta" if session[0].startswith(_META_PREFIX) else "arguments"
    assistant = found.get("assistant_id")
    thread = found.get("thread_id")
    context = ToolContext(
        policy.default_session if session is None else session[1],
        None if assistant is None else assistant[1],
        None if thread is None else thread[1],
    )
    return context, clean, source


def extract_context(
    arguments: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
) -> tuple[ToolContext, dict[str, Any]]:
    """Split a call's arguments into its ToolContext and a clean copy of the rest.

    The caller's mapping is never mutated. Raises `ContextError` for any
    broken rule (see the module docstring); under the lenient policy a call
    without a session id gets ``policy.default_session``.
    """
    context, clean, _ = _split(arguments, meta, policy)
    return context, clean


def inject_context(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
    """Return a copy of model-generated `arguments` with `context` added as ``__`` fields.

    The arguments are kept exactly. A ``__``-prefixed key already present, or
    one that only reads as such (`` __sessionId``), is refused: a model must
    not be able to claim a context of its own.
    """
    for key in arguments:
        if isinstance(key, str) and claims_context(key):
            msg = (
                "model-generated arguments must not contain context fields; "
                f"found {describe(key, key)}"
            )
            raise ContextError(msg)
    injected = dict(arguments)
    injected["__sessionId"] = context.session_id
    if context.assistant_id is not None:
        injected["__assistantId"] = context.assistant_id
    if context.thread_id is not None:
        injected["__threadId"] = context.thread_id
    return injected
