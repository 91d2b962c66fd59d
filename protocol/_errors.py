"""Errors raised by the sans-IO layer: the caller sent something malformed."""

from __future__ import annotations

__all__ = ["CallFormatError", "ContextError", "ProtocolError", "ToolNameError"]


class ProtocolError(ValueError):
    """A tool call (or part of one) is malformed; nothing was changed."""


class ContextError(ProtocolError):
    """A context field (`__sessionId`, `_meta.sessionId`, ...) breaks a rule.

    The message names the field, the rule and what to send instead.
    """


class CallFormatError(ProtocolError):
    """A tools/call-shaped mapping is malformed (missing name, arguments not an object, ...)."""


class ToolNameError(ProtocolError):
    """A tool name cannot be parsed, is unknown, or matches more than one tool."""
