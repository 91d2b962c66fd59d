"""Scenario ``embedding``: the runtime hosted in asyncio and in threads, against trio itself.

The parts:

* **handles** — a warm no-op call (`bench_module`'s ``noop``) on a fixed set
  of keys through `Runtime.call` under ``trio.run`` (native), through
  `AsyncioRuntime.call` under ``asyncio.run`` (trio in guest mode on the
  asyncio loop) and through `BlockingRuntime.call` from one thread and from
  several (trio in a thread of its own). Each round runs native, then the
  asyncio handle, then the blocking one, each opened afresh and warmed (one
  call per key, not timed) inside its own event loop, so the handle/native
  ratio pairs the two runs of the same round.
* **FastAPI** — ``examples/fastapi_service.py`` (a FastAPI app whose lifespan
  opens the asyncio handle) under uvicorn in a subprocess on 127.0.0.1,
  driven by ``httpx2.AsyncClient`` with one client and with many, each
  request a ``GET /sessions/{id}/goals`` on one of many sessions holding one
  goal each. No runtime-less twin of the app exists, so the runtime's share
  of a request is measured in process: the asyncio handle's
  ``planning__list_goals`` beside the requests, interleaved with them.
  Skipped, with the install command, without FastAPI or uvicorn.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, final

import attrs
import trio

from actors import open_asyncio_runtime, open_blocking_runtime, open_runtime
from actors.modules import planning

from ._baselines import bench_module
from ._designs import key_names
from ._measure import (
    Batch,
    CallContender,
    Phase,
    Results,
    Stats,
    ThreadContender,
    interleave,
    latencies,
    merge,
    ratios,
    throughputs,
)
from ._report import Figure, ScenarioResult, Series, Target, figure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

    import httpx2

    from ._measure import Contender, KeyedCall, Progress
    from ._sizes import Sizes

__all__ = ["CLIENT_KEEP_ALIVE", "SERVER_KEEP_ALIVE", "run_embedding"]

NAME: Final = "embedding"
TOOL: Final = "bench__noop"
NATIVE: Final = "trio Runtime.call"
HANDLE: Final = "asyncio handle"
BLOCKING: Final = "blocking handle"
HANDLE_TARGET: Final = Target(">=", 0.5)  # asyncio handle / native trio, many callers
NONE_TARGET: Final = Target("==", 0, any_size=True)
ROOT: Final = Path(__file__).resolve().parent.parent
EXAMPLE: Final = ROOT / "examples" / "fastapi_service.py"
EXAMPLE_APP: Final = "examples.fastapi_service:app"
EXAMPLES_HINT: Final = "pip install -e '.[examples]'"
REQUESTS: Final = "FastAPI example"
IN_PROCESS: Final = f"{HANDLE}, in process"
GOAL: Final = "Learn Rust"
_LISTENING: Final = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")
_START_TIMEOUT: Final = 30.0  # seconds for the server to say it listens
_STOP_TIMEOUT: Final = 10.0  # seconds for a graceful stop before it is killed
CLIENT_KEEP_ALIVE: Final = 5.0
"""Seconds a client reuses an idle connection (httpx's default, made explicit)."""
SERVER_KEEP_ALIVE: Final = 30
"""Seconds uvicorn keeps an idle connection (``--timeout-keep-alive``; its default is 5).

Longer than `CLIENT_KEEP_ALIVE`, so that the client always gives up an idle
connection first. With both at 5 s, the server's countdown starts before the
client's (when it sends the response, not when the client has read it): a
connection idle for just under the client's 5 s can be closed by the server
while the client writes its next request on it, and the client reads a reset
(``ReadError``). Between two phases of the benchmark, a hundred connections sit
idle for a few seconds, and on a busy machine one of them landed in that gap.
"""


# ---- drivers: `_measure.drive` for asyncio tasks and for threads ------------------------


async def _drive_asyncio(call: KeyedCall, keys: Sequence[int], callers: int) -> Batch:
    """`drive` with asyncio tasks: caller ``c`` makes calls ``c, c + callers, ...``, each timed."""
    timings = [0.0] * len(keys)
    clock = time.perf_counter

    async def caller(first: int) -> None:
        for index in range(first, len(keys), callers):
            began = clock()
            await call(keys[index])
            timings[index] = clock() - began

    began = clock()
    async with asyncio.TaskGroup() as group:
        for first in range(min(callers, len(keys))):
            group.create_task(caller(first))
    return Batch(len(keys), clock() - began, tuple(timings))


def _drive_threads(call: Callable[[int], object], keys: Sequence[int], threads: int) -> Batch:
    """`drive` with threads, each blocked in its call; timed from when all threads are ready."""
    count = min(threads, len(keys))
    timings = [0.0] * len(keys)
    clock = time.perf_counter
    ready = threading.Barrier(count + 1, timeout=_START_TIMEOUT)

    def caller(first: int) -> None:
        ready.wait()
        for index in range(first, len(keys), threads):
            began = clock()
            call(keys[index])
            timings[index] = clock() - began

    with ThreadPoolExecutor(count, thread_name_prefix="bench caller") as pool:
        done = [pool.submit(caller, first) for first in range(count)]
        ready.wait()
        began = clock()
        for future in done:
            future.result()  # a failed call fails the batch, as it would under `drive`
        elapsed = clock() - began
    return Batch(len(keys), elapsed, tuple(timings))


@final
@attrs.frozen
class _AsyncioContender:
    """An asyncio contender: an async keyed call driven by `_drive_asyncio`."""

    name: str
    call: KeyedCall = attrs.field(repr=False)

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`."""
        return await _drive_asyncio(self.call, keys, callers)


def _keyed(
    call: Callable[[Mapping[str, Any]], Awaitable[object]], params: Sequence[Any]
) -> KeyedCall:
    async def keyed(index: int) -> object:
        return await call(params[index])

    return keyed


async def _one_round(contender: Contender, warm: Phase, phases: Sequence[Phase]) -> Results:
    """Warm `contender` (not timed), then run one round of `phases`; under trio or asyncio."""
    await contender.batch(warm.keys, warm.callers)
    return await interleave([contender], lambda _round: phases, 1, lambda _line: None, NAME)


# ---- handles ------------------------------------------------------------------------------


def _params(names: Sequence[str]) -> list[dict[str, Any]]:
    """One tools/call per key, built once (the runtime never changes a caller's mapping)."""
    return [{"name": TOOL, "arguments": {"__sessionId": name}} for name in names]


async def _native_round(params: Sequence[Any], warm: Phase, phases: Sequence[Phase]) -> Results:
    async with open_runtime([bench_module()]) as runtime:
        contender = CallContender(NATIVE, _keyed(runtime.call, params))
        return await _one_round(contender, warm, phases)


async def _handle_round(params: Sequence[Any], warm: Phase, phases: Sequence[Phase]) -> Results:
    async with open_asyncio_runtime([bench_module()]) as runtime:
        contender = _AsyncioContender(HANDLE, _keyed(runtime.call, params))
        return await _one_round(contender, warm, phases)


def _blocking_round(params: Sequence[Any], warm: Phase, phases: Sequence[Phase]) -> Results:
    with open_blocking_runtime([bench_module()]) as runtime:

        def call(index: int) -> object:
            return runtime.call(params[index])

        # The trio run here only paces the round: the batches run in its worker threads.
        contender = ThreadContender(BLOCKING, functools.partial(_drive_threads, call))
        return trio.run(_one_round, contender, warm, phases)


def _draw(sizes: Sizes, label: str, count: int) -> Phase:
    """`embedding_calls` calls on keys drawn at random (the same draw for every host)."""
    draw = random.Random(f"{NAME}/{label}")
    keys = tuple(draw.randrange(sizes.embedding_keys) for _ in range(sizes.embedding_calls))
    return Phase(f"{label}={count}", keys, count)


def _handles(sizes: Sizes, progress: Progress) -> Results:
    params = _params(key_names(sizes.embedding_keys))
    warm = Phase("warm", tuple(range(sizes.embedding_keys)), min(sizes.embedding_keys, 100))
    caller_phases = [_draw(sizes, "callers", n) for n in (1, sizes.embedding_callers)]
    thread_phases = [_draw(sizes, "threads", n) for n in (1, sizes.embedding_threads)]
    parts = []
    for number in range(sizes.rounds):
        progress(f"{NAME}: handles: round {number + 1}/{sizes.rounds}")
        parts.append(trio.run(_native_round, params, warm, caller_phases))
        parts.append(asyncio.run(_handle_round(params, warm, caller_phases)))
        parts.append(_blocking_round(params, warm, thread_phases))
    return merge(parts)


def _handle_figures(results: Results, sizes: Sizes) -> list[Figure]:
    figures: list[Figure] = []
    keys = sizes.embedding_keys
    for callers in (1, sizes.embedding_callers):
        phase = f"callers={callers}"
        where = f"keys={keys}, {phase}"
        for design in (NATIVE, HANDLE):
            rate = throughputs(results[design][phase])
            figures.append(figure(NAME, f"{design} calls/s, {where}", rate, "/s"))
        target = HANDLE_TARGET if callers > 1 else None  # one caller: reported, not judged
        paired = ratios(results[HANDLE][phase], results[NATIVE][phase])
        figures.append(figure(NAME, f"{HANDLE} / {NATIVE}, {where}", paired, "x", target))
        figures += _latency_figures(results, (NATIVE, HANDLE), phase, where)
    for threads in (1, sizes.embedding_threads):
        phase = f"threads={threads}"
        where = f"keys={keys}, {phase}"
        rate = throughputs(results[BLOCKING][phase])
        figures.append(figure(NAME, f"{BLOCKING} calls/s, {where}", rate, "/s"))
        figures += _latency_figures(results, (BLOCKING,), phase, where)
    paired = ratios(results[BLOCKING]["threads=1"], results[NATIVE]["callers=1"])
    name = f"{BLOCKING}, 1 thread / {NATIVE}, 1 caller, keys={keys}"
    figures.append(figure(NAME, name, paired, "x"))
    return figures


def _latency_figures(
    results: Results, designs: Sequence[str], phase: str, where: str
) -> list[Figure]:
    return [
        figure(NAME, f"{design} p{q * 100:g}, {where}", latencies(results[design][phase], q), "µs")
        for design in designs
        for q in (0.5, 0.99)
    ]


# ---- the FastAPI example --------------------------------------------------------------------


def _missing_example() -> str | None:
    """Why the FastAPI part cannot run here, or None when it can."""
    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        return f"{' and '.join(missing)} {verb} not installed ({EXAMPLES_HINT})"
    if not EXAMPLE.is_file():
        return f"{EXAMPLE} is not there"
    return None


def _listening(process: subprocess.Popen[bytes], log: BinaryIO) -> str:
    """The server's base URL once its log says it listens; raises if it exits or stalls."""
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        log.seek(0)
        text = log.read()
        match = _LISTENING.search(text)
        if match:
            return f"http://127.0.0.1:{int(match.group(1))}"
        code = process.poll()
        if code is not None or time.monotonic() > deadline:
            why = (
                f"exited (exit code {code}) before listening"
                if code is not None
                else f"did not listen within {_START_TIMEOUT:g} s"
            )
            tail = text[-2000:].decode(errors="replace")
            msg = f"the FastAPI example {why}; its output:\n{tail}"
            raise RuntimeError(msg)
        time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server as Ctrl-C would (its lifespan closes the runtime), killing it if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()  # reaped, whichever way it ended


@final
@attrs.frozen
class _Server:
    url: str
    """Its base URL."""
    pid: int
    """Its process id."""


@contextmanager
def _serve_example() -> Iterator[_Server]:
    """The example under uvicorn on an ephemeral 127.0.0.1 port, stopped and reaped at the end."""
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        EXAMPLE_APP,
        "--app-dir",
        str(ROOT),
        "--host",
        "127.0.0.1",
        "--port",
        "0",  # the kernel picks a free port; uvicorn logs which
        "--log-level",
        "info",  # the line that names the port is at INFO
        "--no-access-log",
        "--timeout-keep-alive",
        str(SERVER_KEEP_ALIVE),
    ]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=ROOT
        )
        try:
            yield _Server(_listening(process, log), process.pid)
        finally:
            _stop(process)


def _cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user and system, every thread) process `pid` has used; None without /proc.

    Counted in clock ticks (10 ms on most systems): a batch of a second or more
    reads to within a few percent.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


@attrs.define(eq=False)
class _Requests:
    """Clients GETting one session's goals per key index; counts answers that are not 200.

    Each caller takes an idle client, an `httpx2.AsyncClient` with one
    connection, for each request: N callers are N clients, each on a
    connection of its own (one client with N connections would look through
    its pool for every request, a cost of the driver, not of the server). The
    server's CPU time is read around each batch.
    """

    name: str
    clients: Sequence[httpx2.AsyncClient]
    paths: Sequence[str]
    server: int
    """The server's process id."""
    failures: int = 0

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`."""
        assert callers <= len(self.clients), "one client per concurrent caller"
        idle = list(self.clients[:callers])

        async def get(index: int) -> object:
            client = idle.pop()  # never empty: at most `callers` requests are in flight
            try:
                response = await client.get(self.paths[index])
            finally:
                idle.append(client)
            if response.status_code != 200:
                self.failures += 1
            return response

        before = _cpu_seconds(self.server)
        batch = await _drive_asyncio(get, keys, callers)
        after = _cpu_seconds(self.server)
        return batch if before is None or after is None else attrs.evolve(batch, cpu=after - before)


def _goals_path(session: str) -> str:
    return f"/sessions/{session}/goals"


async def _create_goals(http: httpx2.AsyncClient, sessions: Sequence[str]) -> None:
    """One goal in each session, created through the example and checked by reading it back."""
    for session in sessions:
        created = await http.post(_goals_path(session), json={"goal": GOAL})
        listed = await http.get(_goals_path(session))
        if created.status_code >= 300 or listed.status_code != 200 or GOAL not in listed.text:
            msg = (
                f"the FastAPI example did not keep a goal of session {session!r}: "
                f"POST {created.status_code} {created.text[:200]!r}, "
                f"GET {listed.status_code} {listed.text[:200]!r}"
            )
            raise RuntimeError(msg)


@final
@attrs.frozen
class _Http:
    results: Results
    failures: int


async def _http(server: _Server, sizes: Sizes, progress: Progress) -> _Http:
    import httpx2  # only with the example: the core scenario needs no HTTP client

    sessions = [f"session-{n}" for n in range(sizes.embedding_http_sessions)]
    counts = (1, sizes.embedding_http_clients)
    one = httpx2.Limits(
        max_connections=1, max_keepalive_connections=1, keepalive_expiry=CLIENT_KEEP_ALIVE
    )
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx2.AsyncClient(base_url=server.url, limits=one, timeout=_START_TIMEOUT)
            )
            for _ in range(max(counts))
        ]
        runtime = await stack.enter_async_context(open_asyncio_runtime([planning]))
        await _create_goals(clients[0], sessions)
        for session in sessions:  # the same state in process
            await runtime.call_tool("planning__create_goal", {"goal": GOAL, "__sessionId": session})
        lists = [
            {"name": "planning__list_goals", "arguments": {"__sessionId": s}} for s in sessions
        ]
        paths = [_goals_path(s) for s in sessions]
        requests = _Requests(REQUESTS, clients, paths, server.pid)
        contenders: list[Contender] = [
            requests,
            _AsyncioContender(IN_PROCESS, _keyed(runtime.call, lists)),
        ]
        every_session = tuple(range(len(sessions)))
        for contender in contenders:  # connections opened, actors started (not timed)
            await contender.batch(every_session, max(counts))
        phases = [
            Phase(f"callers={count}", _cycle(calls, sessions), count)
            for count, calls in zip(
                counts,
                (sizes.embedding_http_light_requests, sizes.embedding_http_requests),
                strict=True,
            )
        ]
        label = f"{NAME}: FastAPI example"
        results = await interleave(contenders, lambda _round: phases, sizes.rounds, progress, label)
    return _Http(results, requests.failures)


def _cycle(count: int, sessions: Sequence[str]) -> tuple[int, ...]:
    """`count` requests, the sessions in turn: each is a distinct session's list."""
    return tuple(n % len(sessions) for n in range(count))


def _cpu_per_request(batch: Batch) -> float:
    assert batch.cpu is not None, "checked by the caller"
    return batch.cpu / batch.calls


def _http_figures(part: _Http, sizes: Sizes) -> list[Figure]:
    results = part.results
    requests, handle = results[REQUESTS], results[IN_PROCESS]
    with_cpu = all(b.cpu is not None for phase in requests.values() for b in phase)
    figures: list[Figure] = []
    for clients in (1, sizes.embedding_http_clients):
        phase = f"callers={clients}"
        where = f"GET goals, sessions={sizes.embedding_http_sessions}, clients={clients}"
        rate = throughputs(requests[phase])
        figures.append(figure(NAME, f"{REQUESTS} requests/s, {where}", rate, "/s"))
        figures += [
            figure(NAME, f"{REQUESTS} p{q * 100:g}, {where}", latencies(requests[phase], q), "µs")
            for q in (0.5, 0.99)
        ]
        if with_cpu:
            cpu = Stats.of([_cpu_per_request(b) * 1e6 for b in requests[phase]])
            figures.append(figure(NAME, f"{REQUESTS} server CPU per request, {where}", cpu, "µs"))
        name = f"{IN_PROCESS} planning__list_goals calls/s, callers={clients}"
        figures.append(figure(NAME, name, throughputs(handle[phase]), "/s"))
    name = f"{IN_PROCESS} planning__list_goals p50, callers=1"
    figures.append(figure(NAME, name, latencies(handle["callers=1"], 0.5), "µs"))
    shares = [
        100 * call.latency(0.5) / request.latency(0.5)
        for call, request in zip(handle["callers=1"], requests["callers=1"], strict=True)
    ]
    name = f"the runtime's share of a request, 1 client ({IN_PROCESS} p50 / request p50)"
    figures.append(figure(NAME, name, Stats.of(shares), "%"))
    if with_cpu:
        many = sizes.embedding_http_clients
        loaded = [
            100 / call.throughput / _cpu_per_request(request)
            for call, request in zip(
                handle[f"callers={many}"], requests[f"callers={many}"], strict=True
            )
        ]
        name = (
            f"the runtime's share of a request, {many} clients "
            f"({IN_PROCESS} time per call at full load / server CPU per request)"
        )
        figures.append(figure(NAME, name, Stats.of(loaded), "%"))
    figures.append(figure(NAME, f"{REQUESTS} failed requests", part.failures, "", NONE_TARGET))
    return figures


def _http_series(results: Results, sizes: Sizes) -> list[Series]:
    """Requests/s against clients, and one client's latency distribution, for the charts."""
    requests = results[REQUESTS]
    clients = (1, sizes.embedding_http_clients)
    rates = tuple(throughputs(requests[f"callers={n}"]).median for n in clients)
    one = tuple(t * 1e6 for batch in requests["callers=1"] for t in batch.latencies)
    return [
        Series("callers", f"{REQUESTS} (requests)", tuple(map(float, clients)), rates),
        Series("latency", f"{REQUESTS}, GET goals", (), one),
    ]


def _example(sizes: Sizes, progress: Progress) -> tuple[list[Figure], list[str], list[Series]]:
    """The FastAPI part's figures, notes and chart data, or a note saying why it was skipped."""
    missing = _missing_example()
    if missing is not None:
        return [], [f"FastAPI example skipped: {missing}"], []
    progress(f"{NAME}: starting the FastAPI example under uvicorn")
    with _serve_example() as server:
        part = asyncio.run(_http(server, sizes, progress))
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
    notes = [
        f"FastAPI example: {EXAMPLE_APP} under uvicorn ({loop} loop, {parser}) in a "
        "subprocess on 127.0.0.1, driven by httpx2.AsyncClient in this process (the client "
        "and the server share the machine's CPUs); every request lists one session's goals",
        "the runtime's share of a request: the asyncio handle's planning__list_goals in this "
        "process (the call the example makes), paired round by round with the requests; "
        "with many clients, its time per call at full load over the server's time per request",
    ]
    return _http_figures(part, sizes), notes, _http_series(part.results, sizes)


# ---- the scenario ---------------------------------------------------------------------------


def run_embedding(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the asyncio and blocking handles against native trio, and the FastAPI example."""
    figures = _handle_figures(_handles(sizes, progress), sizes)
    example_figures, example_notes, series = _example(sizes, progress)
    notes = (
        f"each round runs {NATIVE} under trio.run, then {HANDLE} (AsyncioRuntime.call, trio "
        f"in guest mode) under asyncio.run, then {BLOCKING} (BlockingRuntime.call, trio in a "
        "thread of its own), each opened and warmed afresh; ratios pair the runs of a round",
        f"{BLOCKING}: each calling thread blocks until its reply, so threads=N is N calls in "
        "flight at most",
        *example_notes,
    )
    return ScenarioResult(NAME, tuple(figures + example_figures), notes, tuple(series))
