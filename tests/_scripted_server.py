"""A stdio MCP server whose tools misbehave on purpose, for the transport tests.

Run as ``python tests/_scripted_server.py EOF_GRACE``. It serves with
`actors.server._stdio.serve_stdio` and, once that returns, writes to stderr whether
fds 0 and 1 are back as they were (same file, same blocking mode).
"""

from __future__ import annotations

import os
import subprocess
import sys

import trio

from actors import RuntimeConfig, ToolModule, open_runtime
from actors.server import McpAdapter
from actors.server._stdio import serve_stdio

scripted: ToolModule[None] = ToolModule("scripted", lambda _context: None)


@scripted.tool
def shout(state: None) -> str:
    """Write to stdout behind the transport's back, buffered and not, then answer."""
    print("stray print")  # no flush: it sits in sys.stdout's buffer
    os.write(1, b"stray write\n")
    return "answered"


@scripted.tool
async def nap(state: None, seconds: float) -> str:
    """Answer after `seconds`."""
    await trio.sleep(seconds)
    return "rested"


@scripted.tool
def child_stdin(state: None) -> str:
    """What a child process started with the default stdin reads from it."""
    child = subprocess.run(
        [sys.executable, "-c", "import sys; print(repr(sys.stdin.buffer.read()))"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return (child.stdout or child.stderr).decode().strip()


def fds() -> tuple[object, ...]:
    """Which files fds 0 and 1 are, and their blocking modes."""
    return tuple((os.fstat(fd).st_ino, os.fstat(fd).st_dev, os.get_blocking(fd)) for fd in (0, 1))


async def main(eof_grace: float) -> None:
    """Serve the scripted module until EOF, then report on the fds."""
    before = fds()
    async with open_runtime([scripted], RuntimeConfig(shutdown_grace=0.5)) as runtime:
        await serve_stdio(McpAdapter(runtime), 1 << 20, trio.Event(), eof_grace=eof_grace)
    print(f"fds restored: {fds() == before}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    trio.run(main, float(sys.argv[1]))
