"""Scenario ``mcp``: tools/call round trips over stdio, and what the actor hop costs them.

Two servers run side by side in subprocesses, each driven by the official SDK
client over stdio (see `benchmarks._mcp_server`): one serves calls through
the runtime, one runs the same handler directly in the request's task. Each
call names its own session among many, so the runtime server keeps one actor
per session. Rounds interleave the two servers, short batches with one
caller, then longer ones with many.

The hop's cost is the server CPU time per call of the runtime server minus
that of the direct one, paired round by round. Each server reports its own
CPU time through a probe tool called before and after each batch (not
timed), so other processes on the machine do not blur it the way they blur
wall-clock time. Its share of a round trip divides it by the runtime
server's time per call: the mean round trip with one caller, the inverse of
the throughput with many. Two more contenders run in this process, without
a transport — `Runtime.call` and the direct stand-in's — for the hop's cost
where nothing else runs.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final, cast, final

import attrs
import trio

from actors import RuntimeConfig, open_runtime

from ._baselines import HandlersDirect, bench_module
from ._handle_cost import run_handle_cost
from ._mcp_peer import run_mcp_peer
from ._mcp_server import CPU_PROBE, DESIGNS, DIRECT, RUNTIME
from ._measure import (
    Batch,
    CallContender,
    Phase,
    Results,
    Stats,
    drive,
    interleave,
    latencies,
    ratios,
    throughputs,
)
from ._over_http import run_over_http
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from mcp import ClientSession
    from mcp.types import RequestParamsMeta

    from actors import Runtime

    from ._measure import Contender, KeyedCall, Progress
    from ._sizes import Sizes

__all__ = ["run_over_mcp"]

NAME: Final = "mcp"
TOOL: Final = "bench__noop"
# % of a stdio round trip (the per-call overhead budget the replaced design set itself;
# docs/design.md)
HOP_TARGET: Final = Target("<=", 5)
SERVER_HINT: Final = "pip install -e '.[server]'"


def _server(design: str) -> str:
    return f"{design} server"


def _in_process(design: str) -> str:
    return f"{design}, in process"


@final
@attrs.frozen
class _ServerContender:
    """A server over stdio: each batch is timed here and its CPU time read from the server."""

    name: str
    session: ClientSession = attrs.field(repr=False)
    names: Sequence[str] = attrs.field(repr=False)

    async def _call(self, name: str, session_id: str) -> str:
        # An open TypedDict (one with extra items), which mypy does not know yet.
        meta = cast("RequestParamsMeta", {"sessionId": session_id})
        result = await self.session.call_tool(name, meta=meta)
        text = "".join(getattr(item, "text", "") for item in result.content)
        if result.is_error:  # a benchmark of failures would measure nothing
            msg = f"{name} failed over MCP: {text}"
            raise RuntimeError(msg)
        return text

    async def _cpu_seconds(self) -> float:
        return float(await self._call(CPU_PROBE, "probe"))

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`; the batch also carries the server's CPU time."""

        async def call(index: int) -> object:
            return await self._call(TOOL, self.names[index])

        before = await self._cpu_seconds()
        batch = await drive(call, keys, callers)
        return attrs.evolve(batch, cpu=await self._cpu_seconds() - before)


@asynccontextmanager
async def _served(design: str, names: Sequence[str]) -> AsyncIterator[_ServerContender]:
    """A server process for `design` and the SDK client calling it."""
    from mcp import ClientSession, StdioServerParameters, stdio_client  # the server extra

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "benchmarks._mcp_server", design]
    )
    # The server's log (a line per call) goes to a file, never to a pipe that could fill.
    with tempfile.TemporaryFile("w+") as errlog:
        # The SDK client closes stdin, then terminates the process, when the block ends.
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield _ServerContender(_server(design), session, names)


@asynccontextmanager
async def _in_process_designs(names: Sequence[str]) -> AsyncIterator[list[CallContender]]:
    """`Runtime.call` and `HandlersDirect.call` here, with the calls the adapter would make."""
    calls = [{"name": TOOL, "arguments": None, "_meta": {"sessionId": name}} for name in names]
    async with open_runtime([bench_module()], RuntimeConfig()) as runtime:

        def keyed(target: Runtime | HandlersDirect) -> KeyedCall:
            async def call(index: int) -> object:
                return await target.call(calls[index])

            return call

        yield [
            CallContender(_in_process(RUNTIME), keyed(runtime)),
            CallContender(_in_process(DIRECT), keyed(HandlersDirect(runtime))),
        ]


def _phases(sizes: Sizes) -> list[Phase]:
    """Short batches with one caller (drift between paired batches stays small), then many."""

    def keys(calls: int) -> tuple[int, ...]:
        return tuple(index % sizes.mcp_sessions for index in range(calls))

    light = Phase("callers=1", keys(sizes.mcp_light_calls), 1)
    return [light, Phase(f"callers={sizes.mcp_callers}", keys(sizes.mcp_calls), sizes.mcp_callers)]


async def _measure(sizes: Sizes, progress: Progress) -> Results:
    names = [f"session-{index}" for index in range(sizes.mcp_sessions)]
    warm = tuple(range(len(names)))
    async with AsyncExitStack() as stack:
        progress(f"{NAME}: starting {len(DESIGNS)} servers")
        contenders: list[Contender] = [
            await stack.enter_async_context(_served(design, names)) for design in DESIGNS
        ]
        contenders += await stack.enter_async_context(_in_process_designs(names))
        for contender in contenders:  # every session's actor started, every import done
            await contender.batch(warm, min(len(warm), sizes.mcp_callers))
        phases = _phases(sizes)
        return await interleave(contenders, lambda _round: phases, sizes.mcp_rounds, progress, NAME)


def _per_call(batch: Batch) -> float:
    """Seconds per call: the mean round trip with one caller, 1 / throughput with many."""
    return batch.elapsed / batch.calls


def _cpu_per_call(batch: Batch) -> float:
    assert batch.cpu is not None, "server batches carry their CPU time"
    return batch.cpu / batch.calls


def _server_figures(results: Results, phase: str) -> list[Figure]:
    figures: list[Figure] = []
    for design in DESIGNS:
        server, batches = _server(design), results[_server(design)][phase]
        figures.append(figure(NAME, f"{server} calls/s, {phase}", throughputs(batches), "/s"))
        for q in (0.5, 0.99):
            figures.append(
                figure(NAME, f"{server} p{q * 100:g}, {phase}", latencies(batches, q), "µs")
            )
        cpu = Stats.of([_cpu_per_call(b) * 1e6 for b in batches])
        figures.append(figure(NAME, f"{server} CPU per call, {phase}", cpu, "µs"))
    return figures


def _hop_figures(results: Results, phase: str) -> list[Figure]:
    runtime, direct = results[_server(RUNTIME)][phase], results[_server(DIRECT)][phase]
    hops = [_cpu_per_call(r) - _cpu_per_call(d) for r, d in zip(runtime, direct, strict=True)]
    shares = [100 * hop / _per_call(r) for hop, r in zip(hops, runtime, strict=True)]
    in_process = [
        _per_call(r) - _per_call(d)
        for r, d in zip(
            results[_in_process(RUNTIME)][phase], results[_in_process(DIRECT)][phase], strict=True
        )
    ]
    return [
        figure(
            NAME,
            f"actor hop, server CPU per call, {phase}",
            Stats.of([h * 1e6 for h in hops]),
            "µs",
        ),
        figure(
            NAME, f"actor hop, share of a round trip, {phase}", Stats.of(shares), "%", HOP_TARGET
        ),
        figure(
            NAME, f"runtime server / direct server calls/s, {phase}", ratios(runtime, direct), "x"
        ),
        figure(
            NAME, f"actor hop in process, {phase}", Stats.of([h * 1e6 for h in in_process]), "µs"
        ),
    ]


def _figures(results: Results) -> list[Figure]:
    figures: list[Figure] = []
    for phase in results[_server(RUNTIME)]:
        figures += _server_figures(results, phase)
        figures += _hop_figures(results, phase)
    return figures


def run_over_mcp(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure both servers over stdio and the hop in process, interleaved."""
    missing = [name for name in ("mcp", "httptools") if importlib.util.find_spec(name) is None]
    if missing:
        note = f"skipped: the MCP server needs {', '.join(missing)} ({SERVER_HINT})"
        return ScenarioResult(NAME, notes=(note,))
    results = trio.run(_measure, sizes, progress)
    peer_figures, peer_notes = run_mcp_peer(sizes, progress)
    # After the peer, which installs FastMCP in the quick and full runs when it is missing.
    http_figures, http_notes = run_over_http(sizes, progress)
    handle_figures, handle_notes = run_handle_cost(sizes, progress)
    notes = (
        f"{sizes.mcp_sessions} sessions, each call naming one; one stdio connection per server; "
        "the SDK client and each server in their own process",
        "hop = runtime server CPU per call - direct server CPU per call (each server reads its "
        "own CPU time), paired by round; its share divides it by the runtime server's time per "
        "call (mean round trip with one caller, 1 / throughput with many: there the server is "
        "the bottleneck, so the share is the throughput the hop costs)",
        "a server's CPU per call includes about one probe call per batch (about 1 % with one "
        "caller); it cancels out of the hop. Single rounds scatter widely (spread); only the "
        "median is steady, and a share within a point of the target is within run-to-run noise",
        *peer_notes,
        *http_notes,
        *handle_notes,
    )
    figures = (*_figures(results), *peer_figures, *http_figures, *handle_figures)
    return ScenarioResult(NAME, figures, notes)
