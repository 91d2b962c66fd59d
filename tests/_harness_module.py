"""The tools ``mcp-actors bench``'s tests call: they answer, compare, fail or nap.

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
def same(state: None, a: str, b: str) -> str:
    """Answer "same" if `a` equals `b`, else fail: a template's check on the server's side."""
    if a != b:
        raise ToolError(f"{a!r} is not {b!r}")
    return "same"


@harness.tool
def fail(state: None) -> str:
    """Fail, always: a tool error (``isError``), not a protocol error."""
    raise ToolError("this tool fails on purpose")


@harness.tool
async def nap(state: None, seconds: float) -> str:
    """Sleep for `seconds`, then answer."""
    await trio.sleep(seconds)
    return f"napped {seconds:g} s"
