"""The ``isError`` result the MCP server sends for a call the runtime refused.

Over MCP, a call whose context, arguments or timing fails comes back as an
``isError`` result whose text is the error's message, stamped with the
tool's ServiceInfo, so the model reads what went wrong and corrects it. In
process, the same failures are raised (`RuntimeCallError`, `ProtocolError`).
`error_result` turns one into that result, so a host embedding the runtime
answers its model exactly as the MCP server would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol import CallError, CallResult

if TYPE_CHECKING:
    from protocol import ServiceInfo

__all__ = ["error_result"]


def error_result(error: CallError, service: ServiceInfo | None = None) -> CallResult:
    """The ``isError`` result whose text is `error`'s message, stamped with `service` if given.

    Pass the ServiceInfo of the tool that was called (``Tool.service``, from
    ``Registry.resolve``) when the name resolved. One difference remains: the
    MCP server answers an unknown tool name (`UnknownToolError`) with a
    JSON-RPC error rather than a result, as the MCP specification says; here it
    becomes a result with the same message, unstamped, since no tool was found.

    Only these errors are turned into results: their messages are written for
    the caller. Any other exception (a bug, a store failure) may carry details
    that are not the caller's to read, so it is refused with `TypeError`.
    """
    if not isinstance(error, CallError):
        msg = (
            f"error_result takes a CallError (a RuntimeCallError or a ProtocolError), got "
            f"{type(error).__name__}; let other exceptions propagate"
        )
        raise TypeError(msg)
    result = CallResult.error(str(error))
    return result if service is None else result.stamped(service)
