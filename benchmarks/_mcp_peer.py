"""The ``mcp`` scenario's peer: ``actors serve`` against FastMCP, over stdio and HTTP.

The server a user would pick instead: FastMCP 4 with its session state in
memory (`benchmarks._fastmcp_server`), against ``python -m actors serve
--state memory``, both doing the same planning-style work — create_goal and
list_goals, alternately, spread over many sessions — driven by the official
SDK client from this process. Each transport runs both servers as
subprocesses: over stdio, and over Streamable HTTP on 127.0.0.1 (ours on its
own HTTP server, FastMCP with uvicorn, each with its default logging). Rounds
interleave the servers, with one caller and with many; each ratio pairs the
two servers' batches of the same round.

FastMCP comes from the ``durable`` scenario's virtual environment
(`benchmarks._fastmcp_peer`): installed by the quick and full runs when
missing, skipped with a note otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from ._fastmcp_peer import (
    FASTMCP_MEMORY,
    FASTMCP_VERSION,
    OURS_MEMORY,
    InstallError,
    Peer,
    cpu_ratios,
    find_fastmcp,
    install_fastmcp,
    per_call,
    serve_stdio,
    warmed,
)
from ._measure import Results, ratios, throughputs
from ._report import Figure, Target, figure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from contextlib import AbstractAsyncContextManager

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_mcp_peer", "serve_http_command", "served"]

NAME: Final = "mcp"
FASTMCP: Final = FASTMCP_MEMORY
OURS: Final = OURS_MEMORY
TRANSPORTS: Final = ("stdio", "HTTP")
RATIO_TARGET: Final = Target(">=", 3)
_STARTUP: Final = 30.0  # seconds a server may take to listen
_OUR_URL: Final = re.compile(r"listening on (http://\S+)")
_THEIR_URL: Final = re.compile(r"Uvicorn running on (http://\S+)")
_SERVER_SCRIPT: Final = Path(__file__).with_name("_fastmcp_server.py")


async def _url_from(log: Path, pattern: re.Pattern[str], process: trio.Process) -> str:
    """The URL the server prints once it listens (waiting for it, and for nothing dead)."""
    with trio.fail_after(_STARTUP):
        while True:
            text = await trio.Path(log).read_text(errors="replace")
            found = pattern.search(text)
            if found is not None:
                return found.group(1).rstrip("/")
            if process.returncode is not None:
                msg = f"the server exited with {process.returncode}: {text[-2000:]}"
                raise RuntimeError(msg)
            await trio.sleep(0.05)


@asynccontextmanager
async def _serve_http(name: str, fastmcp: str, directory: Path) -> AsyncIterator[Peer]:
    """Server `name` on Streamable HTTP in a subprocess, and an SDK client session to it."""
    # Port 0 for both: each binds a free port itself and logs it, so no other process can
    # take the port between choosing it and listening on it.
    if name == OURS:
        command = [sys.executable, "-m", "actors", "serve", "--state", "memory"]
        command += ["--http", "127.0.0.1:0"]
        pattern = _OUR_URL
    else:
        command = [fastmcp, "-I", str(_SERVER_SCRIPT), "memory", "--http", "0"]
        pattern = _THEIR_URL
    async with serve_http_command(name, command, pattern, directory) as peer:
        yield peer


@asynccontextmanager
async def serve_http_command(
    name: str, command: Sequence[str], pattern: re.Pattern[str], directory: Path
) -> AsyncIterator[Peer]:
    """`command` serving Streamable HTTP as server `name`, and an SDK client session to it.

    The server logs its URL (`pattern`'s first group) to stderr or stdout, both kept in a
    file under `directory`.
    """
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    log = directory / f"{name.split(',')[0].replace(' ', '-')}-http.log"
    with log.open("wb") as errors:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=errors, stderr=errors
        )
        try:
            url = await _url_from(log, pattern, process)
            if not url.endswith("/mcp"):
                url += "/mcp"
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield Peer(name, session, process.pid)
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()


def served(
    transport: str, name: str, fastmcp: str, directory: Path
) -> AbstractAsyncContextManager[Peer]:
    """Server `name` (ours or FastMCP's) over `transport`, and an SDK client session to it."""
    if transport == "stdio":
        return serve_stdio(name, fastmcp, directory)
    return _serve_http(name, fastmcp, directory)


ClientCpu = dict[tuple[str, str, str], list[float]]
"""(transport, server, phase) -> CPU seconds this process spent driving each batch."""


async def _measure(
    sizes: Sizes, fastmcp: str, directory: Path, progress: Progress
) -> tuple[dict[str, Results], ClientCpu]:
    """Per transport: server -> phase -> one batch per round; and the client's CPU per batch."""
    callers = (1, sizes.fastmcp_callers)
    results: dict[str, Results] = {}
    client: ClientCpu = {}
    for transport in TRANSPORTS:
        async with AsyncExitStack() as stack:
            progress(f"{NAME}: FastMCP peer over {transport}: starting both servers")
            driven = {}
            for name in (OURS, FASTMCP):
                context = served(transport, name, fastmcp, directory)
                driven[name] = await warmed(await stack.enter_async_context(context), sizes)
            results[transport] = {name: {} for name in driven}
            for number in range(sizes.fastmcp_rounds):
                progress(f"{NAME}: FastMCP peer over {transport}: round {number + 1}")
                for count in callers:
                    phase = f"callers={count}"
                    for name, server in driven.items():
                        batch = await server.mixed(sizes.fastmcp_calls, count)
                        results[transport][name].setdefault(phase, []).append(batch)
                        spent = server.client_cpu[-1]  # what `mixed` just measured
                        client.setdefault((transport, name, phase), []).append(spent)
    return results, client


def _figures(results: dict[str, Results], client: ClientCpu, sizes: Sizes) -> list[Figure]:
    figures = []
    for transport, per_server in results.items():
        for phase in per_server[OURS]:
            where = f"{transport}, {phase}, {sizes.fastmcp_sessions} sessions, create/list"
            for name in (OURS, FASTMCP):
                stats = throughputs(per_server[name][phase])
                figures.append(figure(NAME, f"peer: {name} calls/s, {where}", stats, "/s"))
            ours, theirs = per_server[OURS][phase], per_server[FASTMCP][phase]
            label = f"peer: {OURS} / {FASTMCP}, {where}"
            figures.append(figure(NAME, label, ratios(ours, theirs), "x", RATIO_TARGET))
            figures += _cpu_figures(per_server, client, (transport, phase), where)
    return figures


def _cpu_figures(
    per_server: Results, client: ClientCpu, at: tuple[str, str], where: str
) -> list[Figure]:
    """Each server's and its client's CPU per call, and the servers' ratio.

    Server CPU is what serving costs, the client aside; the client's tells whether
    this one process, rather than the server, sets the pace.
    """
    transport, phase = at
    figures = []
    for name in (OURS, FASTMCP):
        batches, spent = per_server[name][phase], client[transport, name, phase]
        for process, seconds in (("server", [b.cpu for b in batches]), ("client", spent)):
            cpu = per_call(seconds, batches)
            if cpu is not None:  # a server's is unknown without /proc
                label = f"peer: {name} {process} CPU per call, {where}"
                figures.append(figure(NAME, label, cpu, "µs"))
    ours, theirs = per_server[OURS][phase], per_server[FASTMCP][phase]
    paired = cpu_ratios(theirs, ours)
    if paired is not None:
        label = f"peer: server CPU per call, {FASTMCP} / {OURS}, {where}"
        figures.append(figure(NAME, label, paired, "x"))
    return figures


def run_mcp_peer(sizes: Sizes, progress: Progress) -> tuple[list[Figure], list[str]]:
    """The peer's figures and notes; no figures, and a note saying why, when it cannot run."""
    fastmcp = find_fastmcp()
    if fastmcp is None and sizes.fastmcp_install:
        try:
            fastmcp = install_fastmcp(progress)
        except InstallError as exc:
            return [], [f"FastMCP peer skipped: installing FastMCP failed ({exc})"]
    if fastmcp is None:
        hint = "python -m benchmarks --only mcp (quick or --full) installs it"
        return [], [f"FastMCP peer skipped: FastMCP {FASTMCP_VERSION} is not installed; {hint}"]
    with tempfile.TemporaryDirectory(prefix="mcp-actors-mcp-peer-") as directory:
        results, client = trio.run(_measure, sizes, fastmcp, Path(directory), progress)
    notes = [
        f"FastMCP peer: FastMCP {FASTMCP_VERSION} with its memory session store against actors "
        "serve --state memory, each a subprocess driven by the SDK client, over stdio and "
        f"Streamable HTTP; {sizes.fastmcp_rounds} interleaved rounds, create_goal and "
        "list_goals alternately",
        "FastMCP peer: one SDK client session in this process drives each server; server CPU "
        "per call is the server process's, read from /proc in clock ticks, client CPU per call "
        "this process's. Where the client's nears 1 / calls/s, the client sets the pace and "
        "the ratio understates the servers' difference (the server CPU ratio shows it)",
    ]
    return _figures(results, client, sizes), notes
