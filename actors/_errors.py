"""Errors a caller of the runtime can get, one class per failure.

Every one of them is a reply: the runtime never leaves an accepted call
without one (invariant 4). Their root, `RuntimeCallError`, derives from
`protocol.CallError`, as `protocol.ProtocolError` does: ``except CallError``
catches every reply that is not a result. `ToolError` is different: a handler
raises it to return an error result with a clean message (``Permission denied``).

Refused before an actor took the call (the observer's ``call_refused``):
`UnknownToolError`, `UnknownResourceError`, `UnknownPromptError`, `ArgumentsError`,
`SessionEndingError`. Taken, never run: `CapacityError` (the key's new actor found
no room). Failed at the actor: `CallTimeoutError`, `ActorCrashedError` (and
`StateUnreadableError`), `HandlerError`. `RuntimeClosedError` is any of these:
refused by a closed runtime, or cut short by its shutdown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol import CallError

if TYPE_CHECKING:
    from protocol import ActorKey

__all__ = [
    "ActorCrashedError",
    "ArgumentsError",
    "CallError",
    "CallTimeoutError",
    "CapacityError",
    "HandlerError",
    "RuntimeCallError",
    "RuntimeClosedError",
    "SessionEndingError",
    "StateUnreadableError",
    "ToolError",
    "UnknownPromptError",
    "UnknownResourceError",
    "UnknownToolError",
]


class RuntimeCallError(CallError):
    """Base of every failure the runtime reports for a call instead of a result.

    A `protocol.CallError`, as a malformed call's `protocol.ProtocolError` is:
    catch `CallError` for both.
    """


class UnknownToolError(RuntimeCallError, LookupError):
    """The tool name matches no enabled tool (or more than one)."""


class UnknownResourceError(RuntimeCallError, LookupError):
    """The URI matches no resource and no resource template."""

    def __init__(self, message: str, uri: str) -> None:
        super().__init__(message)
        self.uri = uri
        """The URI asked for."""


class UnknownPromptError(RuntimeCallError, LookupError):
    """The name matches no prompt."""


class HandlerError(RuntimeCallError):
    """A resource, prompt or completion handler failed; the message is its error text.

    A tool's failure is an error result the model reads; these have no such
    result, so the reader gets this (over MCP, a JSON-RPC error).
    """


class ArgumentsError(RuntimeCallError, ValueError):
    """The arguments do not fit the tool's input schema; the message names the field."""


class CallTimeoutError(RuntimeCallError, TimeoutError):
    """The handler overran the per-call deadline: cancelled, or (heavy) left to finish."""

    def __init__(self, tool: str, key: ActorKey, timeout: float, *, heavy: bool = False) -> None:
        ending = (
            "its worker thread cannot be stopped, so the key's next calls wait until it ends"
            if heavy
            else "it was cancelled; the key keeps being served"
        )
        super().__init__(f"tool {tool!r} for {key} overran its {timeout:g} s deadline; {ending}")


class ActorCrashedError(RuntimeCallError):
    """The actor owning the call's key died; the next call to that key gets a fresh actor."""

    def __init__(self, key: ActorKey, why: str) -> None:
        super().__init__(
            f"the actor for {key} crashed ({why}); "
            "what it held in memory is gone, and the next call starts a new actor "
            "(a durable module's loads what was stored)"
        )


class StateUnreadableError(ActorCrashedError):
    """The key's stored state cannot be read back; it is kept, and the key's calls fail."""

    def __init__(self, key: ActorKey, problem: str) -> None:
        RuntimeCallError.__init__(
            self,
            f"{problem}. It is kept as it is, and the calls of {key} fail until that changes: "
            "run a version of the module that reads it, give the module a migration "
            "(Durable(migrations=...)), or repair or delete it with 'mcp-actors state'",
        )


class RuntimeClosedError(RuntimeCallError):
    """The runtime is shutting down (or has shut down) and takes no more calls."""


class CapacityError(RuntimeCallError):
    """Every live actor is busy and the live-actor cap allows no new one."""


class ToolError(Exception):
    """Raise from a handler to return an error result whose text is exactly the message."""


class SessionEndingError(RuntimeCallError):
    """The call's session is being ended; once it is, the session starts afresh."""
