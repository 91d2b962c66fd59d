"""Put a mix's load on a Streamable HTTP MCP server from a program; print the report.

Run it: ``python docs_src/harness/load_from_python.py URL MIX.toml``.
"""

import sys

# --8<-- [start:load]
from pathlib import Path

import trio

from actors.harness import (
    Handles,
    HttpTarget,
    LoadPlan,
    load_mix,
    print_report,
    run_load,
)


async def main(url: str, mix: Path) -> None:
    # Each session mints a conversation handle (conversation__start) that its calls
    # carry: in the 2026-07-28 era, the default, no call names a protocol session.
    plan = LoadPlan(
        mix=load_mix(mix),
        sessions=10,
        callers=20,
        calls=500,
        handles=Handles(),
    )
    result = await run_load(HttpTarget(url, era="2026"), plan, describe="mine")
    print_report(result)


# --8<-- [end:load]

if __name__ == "__main__":
    trio.run(main, sys.argv[1], Path(sys.argv[2]))
