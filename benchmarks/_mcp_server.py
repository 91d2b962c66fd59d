"""The MCP server the ``mcp`` scenario talks to: ``python -m benchmarks._mcp_server DESIGN``.

It is ``actors serve`` on stdio — the same adapter, transport, SDK server and
logging (one INFO line per call) — serving the `bench_module` and a `probe`
that reports the process's CPU time, with one difference chosen by DESIGN:

* ``runtime``: calls go through a `Runtime`, one actor per session, as in
  production;
* ``direct``: `HandlersDirect` runs each handler in the request's own task on
  a dict of states — no actor hop, everything else the same.

The difference between the two is what the actor hop costs a round trip.
"""

from __future__ import annotations

import sys
import time
from typing import Final

import trio

from actors import RuntimeConfig, ToolModule, open_runtime

from ._baselines import HandlersDirect, bench_module

__all__ = ["CPU_PROBE", "DESIGNS", "DIRECT", "RUNTIME", "probe_module", "serve_design"]

RUNTIME: Final = "runtime"
DIRECT: Final = "direct"
DESIGNS: Final = (RUNTIME, DIRECT)
"""The designs this server can run, by the name it takes on its command line."""
CPU_PROBE: Final = "probe__cpu_seconds"
"""The tool that answers the server process's CPU time so far, in seconds, as text."""


def cpu_seconds(state: None) -> str:
    """The CPU time this process has used, all threads, in seconds."""
    return repr(time.process_time())


def probe_module() -> ToolModule[None]:
    """The module of `CPU_PROBE`."""
    probe = ToolModule("probe", lambda _context: None)
    probe.tool(cpu_seconds)
    return probe


async def serve_design(design: str) -> None:
    """Serve the bench module on stdio until EOF, through `design`."""
    # Imported here: the scenario imports this module's names without the server extra.
    from actors.server import McpAdapter
    from actors.server._options import DEFAULT_MAX_REQUEST_BYTES
    from actors.server._stdio import serve_stdio

    async with open_runtime([bench_module(), probe_module()], RuntimeConfig()) as runtime:
        target = runtime if design == RUNTIME else HandlersDirect(runtime)
        await serve_stdio(McpAdapter(target), DEFAULT_MAX_REQUEST_BYTES, trio.Event())


def main(argv: list[str]) -> int:
    """Check the one argument and serve."""
    if len(argv) != 1 or argv[0] not in DESIGNS:
        print(f"usage: python -m benchmarks._mcp_server {{{','.join(DESIGNS)}}}", file=sys.stderr)
        return 2
    from actors.server import configure_logging

    configure_logging("info")
    trio.run(serve_design, argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
