"""A module whose tools take as long as they are told, or report progress as often as told.

Served with ``serve --module tests._slow_module:slow``: calls in flight for
shutdown tests (for a time, or until the test makes a file), and progress for
the progress tests.
"""

from __future__ import annotations

import trio

from actors import Progress, ToolModule

slow: ToolModule[None] = ToolModule("slow", lambda _context: None)


@slow.tool
async def wait(state: None, seconds: float) -> str:
    """Sleep for `seconds`, then say so."""
    await trio.sleep(seconds)
    return f"waited {seconds:g} s"


@slow.tool
async def wait_for(state: None, path: str) -> str:
    """Answer once a file exists at `path`: the test makes it when the call may end."""
    while not await trio.Path(path).exists():  # noqa: ASYNC110 -- a file another process makes
        await trio.sleep(0.01)
    return "the file is there"


@slow.tool
def report(state: None, progress: Progress, times: int) -> str:
    """Report progress `times` times in a tight loop, without yielding."""
    for step in range(1, times + 1):
        progress.report(step, total=times)
    return f"reported {times} times"


@slow.tool
async def pace(state: None, progress: Progress, steps: int) -> str:
    """Report `steps` times, letting the event loop run between reports."""
    for step in range(1, steps + 1):
        progress.report(step, total=steps, message=f"step {step}")
        await trio.lowlevel.checkpoint()
    return f"paced {steps} steps"
