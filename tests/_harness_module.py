"""The tools ``mcp-actors bench``'s tests call: one that answers, one that fails, one that naps.

Served with ``serve --module tests._harness_module:harness``.
"""

from __future__ import annotations

import trio

from actors import ToolError, ToolModule

harness: ToolModule[None] = ToolModule("harness", lambda _context: None)


@harness.tool
def echo(state: None, text: str) -> str:
    """Answer `text`."""
    return text


@harness.tool
def fail(state: None) -> str:
    """Fail, always: a tool error (``isError``), not a protocol error."""
    raise ToolError("this tool fails on purpose")


@harness.tool
async def nap(state: None, seconds: float) -> str:
    """Sleep for `seconds`, then answer."""
    await trio.sleep(seconds)
    return f"napped {seconds:g} s"
