"""Check the isolation of ``mcp-actors serve``'s planning module over stdio.

Run it: ``python docs_src/harness/isolation_check.py``; it prints the report and exits 1
when the check fails.
"""

# --8<-- [start:check]
import sys
from contextlib import asynccontextmanager

import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

from actors.harness import ToolCall, check_isolation

SERVE = ["-m", "actors", "serve", "--modules", "planning", "--state", "memory"]
# The check names each session in the arguments, as a host that injects them would: over
# stdio the operator allows that (by default a model's arguments stay in its session).
OPTIONS = ["--allow-session-naming", "--log-level", "warning"]
SERVER = StdioServerParameters(command=sys.executable, args=[*SERVE, *OPTIONS])


async def main() -> bool:
    async with (
        stdio_client(SERVER) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()

        @asynccontextmanager
        async def session():  # every session of the check on this one connection
            yield client

        report = await check_isolation(
            session,
            write=ToolCall.parse(
                'planning__create_goal {"goal": "{mark}", "__sessionId": "{session}"}'
            ),
            read=ToolCall.parse('planning__list_goals {"__sessionId": "{session}"}'),
        )
    print("\n".join(report.describe()))
    return report.passed


if __name__ == "__main__":
    sys.exit(0 if trio.run(main) else 1)
# --8<-- [end:check]
