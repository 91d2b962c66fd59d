"""Errors raised by the sans-IO layer: the caller sent something malformed.

`CallError` is the one root of every failure a call gets instead of a result,
here and in a runtime built on this layer (`actors.RuntimeCallError` derives
from it), so that a transport turns each into its error reply with one
``except``.
"""

from __future__ import annotations

__all__ = ["CallError", "CallFormatError", "ContextError", "ProtocolError", "ToolNameError"]


class CallError(Exception):
    """A call got this error instead of a result: refused, or failed before it had one.

    Catch it to handle every such reply in one place, as a transport does when it
    answers with an error: a malformed call (`ProtocolError`: nothing ran) and
    whatever a runtime refused or could not complete (``actors.RuntimeCallError``).
    A tool's own error result is a result, not a `CallError`. Whether the call
    reached an actor, the subclass says: `ProtocolError`, an unknown name, bad
    arguments and a session being ended never do; no capacity never ran; a timeout,
    a crash or a failed resource handler did (``actors.RuntimeClosedError`` can be
    any of these).
    """


class ProtocolError(CallError, ValueError):
    """A tool call (or part of one) is malformed; nothing was changed."""


class ContextError(ProtocolError):
    """A context field (`__sessionId`, `_meta.sessionId`, ...) breaks a rule.

    The message names the field, the rule and what to send instead.
    """


class CallFormatError(ProtocolError):
    """A tools/call-shaped mapping is malformed (missing name, arguments not an object, ...)."""


class ToolNameError(ProtocolError):
    """A tool name cannot be parsed, is unknown, or matches more than one tool."""
