"""A stdio server for the lean path's tests: a tally per session, the lean path on or off.

Run as ``python tests/_lean_stdio_server.py [--sdk-only] [--max-in-flight N]``. It serves
`tally` with `actors.server._stdio.serve_stdio` as ``actors serve`` does (one fixed
caller, so the lean path is on) or, with ``--sdk-only``, with a caller told per request
(so every request goes through the SDK). At exit it writes to stderr how many requests
the lean path took: ``lean requests: N``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Final

import attrs
import trio

from actors import Runtime, RuntimeConfig, ToolModule, open_runtime
from actors.server import McpAdapter
from actors.server._stdio import serve_stdio
from actors.server._stdio_lean import LeanStdio
from actors.server.mcp._adapter import connection_session, stdio_caller


@attrs.define
class Tally:
    """A running total, one per session."""

    total: int = 0


tally: ToolModule[Tally] = ToolModule("tally", Tally)


@tally.tool
def add(state: Tally, amount: int) -> int:
    """Add `amount`; the new total."""
    state.total += amount
    return state.total


@tally.tool
def show(state: Tally) -> int:
    """The total."""
    return state.total


@tally.resource("tally://total", title="The total")
def total(state: Tally) -> str:
    """The total, as text."""
    return str(state.total)


@tally.resource("tally://times/{factor}")
def times(state: Tally, factor: int) -> dict[str, int]:
    """The total times `factor`."""
    return {"factor": factor, "product": state.total * factor}


@tally.prompt
def report(state: Tally, tone: str = "plain") -> str:
    """Ask for a report on the total, in a `tone`."""
    return f"In a {tone} tone: the total is {state.total}."


@tally.completion("report", "tone")
def tones(state: Tally, typed: str) -> list[str]:
    """The tones that begin with what is typed (the total's own first)."""
    return [t for t in (f"tone{state.total}", "plain", "playful", "grave") if t.startswith(typed)]


@tally.tool
async def hold(state: Tally, path: str) -> str:
    """Answer once a file exists at `path` (the test makes it, or never does)."""
    while not await trio.Path(path).exists():  # noqa: ASYNC110 -- a file the test makes
        await trio.sleep(0.01)
    return "released"


def _counting() -> list[int]:
    """Count the requests the lean path takes, in the list's one item."""
    taken = [0]
    start = LeanStdio._start

    def counted(self: LeanStdio, request: Any) -> None:
        taken[0] += 1
        start(self, request)

    LeanStdio._start = counted  # type: ignore[method-assign]
    return taken


SECRET: Final = "postgresql://admin:hunter2@db/actors"
"""What ``--break-total`` puts in the failure it raises: the client must never see it."""


def _break_total(runtime: Runtime) -> None:
    """Make `runtime` fail every read of ``tally://total`` as a bug or a lost store would:
    with an exception that is no `CallError`, naming what only the log may show."""
    run = runtime.run

    async def failing(prepared: Any, *args: Any, **kwargs: Any) -> Any:
        if prepared.tool.full_name == "tally__total":
            raise RuntimeError(f"the store at {SECRET} is unreachable")
        return await run(prepared, *args, **kwargs)

    runtime.run = failing  # type: ignore[method-assign]


async def main(sdk_only: bool, max_in_flight: int, eof_grace: float, break_total: bool) -> None:
    """Serve `tally` until EOF; then say how many requests the lean path took."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    taken = _counting()
    caller = stdio_caller(connection_session())
    async with open_runtime([tally], RuntimeConfig(shutdown_grace=0.5)) as runtime:
        if break_total:
            _break_total(runtime)
        adapter = (
            McpAdapter(runtime, identify=lambda _ctx: caller)
            if sdk_only
            else McpAdapter(runtime, caller=caller)
        )
        stop = trio.Event()
        await serve_stdio(adapter, 1 << 20, stop, eof_grace=eof_grace, max_in_flight=max_in_flight)
    print(f"lean requests: {taken[0]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sdk-only", action="store_true")
    parser.add_argument("--max-in-flight", type=int, default=32)
    parser.add_argument("--eof-grace", type=float, default=10.0)
    parser.add_argument("--break-total", action="store_true")
    arguments = parser.parse_args()
    trio.run(
        main,
        arguments.sdk_only,
        arguments.max_in_flight,
        arguments.eof_grace,
        arguments.break_total,
    )
