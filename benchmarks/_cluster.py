"""Scenario ``cluster``: what shards on Ray buy on this machine, and what the Ray hop costs.

A local Ray (``num_cpus=2``) runs `actors.cluster` shards over the ``memory``
store (each session lives on one shard, so nothing needs sharing here).
Callers in this process, one thread each, call through `Cluster.call`:

* **heavy** — ``content_store__search_content`` over a session holding a few
  hundred KB of documents: CPU-bound in the shard, the case more shards are
  for. Reported: aggregate calls/s with 1 shard and with 2, and their ratio
  (target at least 1.6x on 2 cores);
* **light** — ``planning__list_goals`` from trio tasks in this process, one
  caller and many (a session each), through `Cluster.run` (the MCP front's
  way in) with 1 shard and with 2, and through `Runtime.call` in this
  process: calls/s, and the CPU time per call of every process involved —
  for the cluster this process (the front), the shards' worker processes and
  Ray's own (GCS, raylet, agents), read from ``/proc`` over this process's
  tree; in process, this process alone;
* **served** — the same light call over Streamable HTTP, as a 2026-era
  request (no MCP session) that both servers answer on their fast path, from
  an HTTP client in this process, one caller and many, to ``python -m actors
  cluster --shards 2`` (which starts its own local Ray) and to ``python -m
  actors serve``, side by side: calls/s, and the CPU time per call of each
  server's process tree (the cluster's front, shards and Ray; serve's one
  process). Their ratio is the issue's target: a light call through the
  cluster at most 1.5x the CPU of a lean call served locally;
* **handover** — with live sessions on 2 shards over one SQLite file, a shard
  added then removed: how long each change of membership takes, how many
  sessions it moves, and the first call of a moved session (which loads its
  state on its new owner) against a call to a live one.

Skipped, with a note, without Ray (the ``cluster`` extra).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import trio

from actors import open_runtime
from actors.modules import planning
from protocol import shard_for

from ._measure import Stats
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    import httpx2

    from actors import Runtime
    from actors.cluster import Cluster

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_cluster"]

NAME: Final = "cluster"
MODULES: Final = ("actors.modules:planning", "actors.modules:content_store")
SCALE_TARGET: Final = Target(">=", 1.6)
POSTGRES: Final = "PostgreSQL"
POSTGRES_VARIABLE: Final = "MCP_ACTORS_BENCH_POSTGRES"
"""A libpq URL of a database the benchmark may write to (its ``actor_state`` table)."""
T = TypeVar("T")
_WORDS: Final = [
    "actor",
    "shard",
    "session",
    "state",
    "trio",
    "ray",
    "store",
    "write",
    "read",
    "owner",
    "key",
    "call",
]


def _document(number: int, size: int) -> str:
    words = [_WORDS[(number * 7 + n * 3) % len(_WORDS)] for n in range(size // 6)]
    return " ".join(words)


def _call(tool: str, session: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments, "_meta": {"sessionId": session}}


def _search(session: str) -> dict[str, Any]:
    return _call("content_store__search_content", session, query="shard owner write")


def _listing(session: str) -> dict[str, Any]:
    return _call("planning__list_goals", session)


def _fill(cluster: Cluster, sessions: list[str], sizes: Sizes) -> None:
    """Each session's store: `cluster_documents` documents of 32 KB."""
    for session in sessions:
        for number in range(sizes.cluster_documents):
            add = _call(
                "content_store__add_content",
                session,
                filename=f"doc-{number}.txt",
                content=_document(number, 32 * 1024),
            )
            result = cluster.call_blocking(add)
            assert not result.is_error, result.first_text


def _rate(
    call: Callable[[dict[str, Any]], object], calls: list[dict[str, Any]], callers: int
) -> float:
    """Calls per second of `calls` spread over `callers` threads."""
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(callers) as pool:
        for _ in pool.map(call, calls):
            pass
    return len(calls) / (time.perf_counter() - began)


def _sessions(count: int) -> list[str]:
    return [f"bench-{n}" for n in range(count)]


def _balanced_sessions(count: int) -> list[str]:
    """`count` sessions, half of them on each of two shards.

    A few sessions hashed onto two shards split unevenly (8 split 5 and 3 with the
    plain names), and the busier shard would cap the 2-shard run at 8/5 of the
    1-shard one whatever the shards can do: the scaling figure is about compute.
    """
    shards = ("shard-0", "shard-1")
    chosen: dict[str, list[str]] = {shard: [] for shard in shards}
    names = (f"bench-{n}" for n in itertools.count())
    while sum(map(len, chosen.values())) < count:
        session = next(names)
        placed = chosen[shard_for(session, shards)]
        if len(placed) < (count + 1) // 2:
            placed.append(session)
    return [s for pair in itertools.zip_longest(*chosen.values()) for s in pair if s]


def _measure_shards(
    sizes: Sizes, progress: Progress
) -> tuple[dict[int, list[float]], dict[tuple[str, int], list[Light]]]:
    """Heavy calls/s per round by shard count (1 and 2), and the light batches; interleaved.

    Both clusters are up at once (an idle shard costs no CPU), and each round
    runs one then the other, so a noisy moment on this shared machine falls on
    both alike and the ratio pairs like with like. The light batches run in
    the same rounds, in process and through each cluster.
    """
    from actors.cluster import open_cluster

    sessions = _balanced_sessions(sizes.cluster_sessions)
    searches = [_search(sessions[n % len(sessions)]) for n in range(sizes.cluster_calls)]
    heavy: dict[int, list[float]] = {1: [], 2: []}
    light: dict[tuple[str, int], list[Light]] = {}
    with contextlib.ExitStack() as stack:
        clusters = {
            shards: stack.enter_context(open_cluster(MODULES, shards=shards, state="memory"))
            for shards in heavy
        }
        for shards, cluster in clusters.items():
            progress(f"{NAME}: {shards} shard(s): filling {len(sessions)} sessions")
            _fill(cluster, sessions, sizes)
            _rate(cluster.call_blocking, searches[: len(sessions)], sizes.cluster_callers)  # warm

        def heavy_round() -> None:
            for shards, cluster in clusters.items():
                heavy[shards].append(_rate(cluster.call_blocking, searches, sizes.cluster_callers))

        trio.run(_light_rounds, clusters, heavy_round, light, sizes, progress)
    return heavy, light


@attrs.frozen
class Light:
    """One batch of light calls: how long it took and the CPU it cost."""

    calls: int
    elapsed: float
    """Wall-clock seconds."""
    cpu: float
    """CPU seconds of every process involved (see `_cpu_of`)."""

    @property
    def rate(self) -> float:
        return self.calls / self.elapsed

    @property
    def cpu_per_call(self) -> float:
        return self.cpu / self.calls


IN_PROCESS: Final = "in process"


def _through(shards: int) -> str:
    return f"{shards} shard{'s' if shards > 1 else ''}"


async def _light_rounds(
    clusters: dict[int, Cluster],
    heavy_round: Callable[[], None],
    light: dict[tuple[str, int], list[Light]],
    sizes: Sizes,
    progress: Progress,
) -> None:
    """Each round: the heavy batches, then light ones — in process, 1 shard, 2 shards — with
    one caller and with many, each batch's CPU time read around it."""
    from actors.lowlevel import prepare_call

    callers = (1, sizes.cluster_light_callers)
    sessions = _sessions(max(callers))
    async with open_runtime([planning]) as runtime:
        contenders: dict[str, Callable[[dict[str, Any]], Awaitable[object]]] = {
            IN_PROCESS: runtime.call
        }
        for shards, cluster in clusters.items():

            async def through(params: dict[str, Any], cluster: Cluster = cluster) -> object:
                prepared = prepare_call(cluster.registry, params, cluster.config.policy)
                return await cluster.run(prepared)

            contenders[_through(shards)] = through
        for call in contenders.values():  # every session's actor started
            for session in sessions:
                await call(_listing(session))
        for number in range(sizes.rounds):
            progress(f"{NAME}: round {number + 1}: heavy, then light")
            heavy_round()
            for count in callers:
                for where, call in contenders.items():
                    batch = await _light_batch(
                        call, sessions[:count], sizes.cluster_light_calls, tree=where != IN_PROCESS
                    )
                    light.setdefault((where, count), []).append(batch)


async def _light_batch(
    call: Callable[[dict[str, Any]], Awaitable[object]],
    sessions: list[str],
    calls: int,
    *,
    tree: bool,
) -> Light:
    """`calls` light calls from one trio task per session, each calling its own in turn."""
    each = max(calls // len(sessions), 1)

    async def caller(session: str) -> None:
        listing = _listing(session)
        for _ in range(each):
            await call(listing)

    cpu = _cpu_of(tree=tree)
    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for session in sessions:
            nursery.start_soon(caller, session)
    elapsed = time.perf_counter() - began
    return Light(each * len(sessions), elapsed, _cpu_of(tree=tree) - cpu)


def _cpu_of(*, tree: bool) -> float:
    """CPU seconds of this process, and with `tree` of every process below it too.

    A local Ray's processes (GCS, raylet, its agents, the workers the shards
    run in) are all started below the process that called ``ray.init``. Each
    is read from ``/proc``: the sum of its threads' time on a CPU
    (``schedstat``, in nanoseconds), else its ``stat`` (in clock ticks).
    """
    total = time.process_time()
    if tree:
        total += sum(map(_process_cpu, _descendants(os.getpid())))
    return total


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, waiting = [], [root]
    while waiting:
        below = children.get(waiting.pop(), [])
        found.extend(below)
        waiting.extend(below)
    return found


def _process_cpu(pid: int) -> float:
    """CPU seconds of process `pid` so far (0 once it is gone)."""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
        return sum(int((t / "schedstat").read_text().split()[0]) for t in threads) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _goal(session: str) -> dict[str, Any]:
    return _call("planning__create_goal", session, goal="handed over")


def _timed(call: Callable[[], T]) -> tuple[T, float]:
    """What `call` returns, and the seconds it took."""
    began = time.perf_counter()
    value = call()
    return value, time.perf_counter() - began


def _first_calls(cluster: Cluster, sessions: list[str]) -> float:
    """Mean seconds of one call to each of `sessions`, one after the other."""
    _, seconds = _timed(lambda: [cluster.call_blocking(_listing(s)) for s in sessions])
    return seconds / max(len(sessions), 1)


def _measure_handover(sizes: Sizes, progress: Progress) -> dict[str, list[float]]:
    """Per round: seconds to add and to remove a shard, sessions moved, calls after."""
    from actors.cluster import open_cluster

    sessions = _sessions(sizes.cluster_handover_sessions)
    measured: dict[str, list[float]] = {}

    def keep(name: str, value: float) -> None:
        measured.setdefault(name, []).append(value)

    with tempfile.TemporaryDirectory(prefix="mcp-actors-handover-") as directory:
        state = f"sqlite:///{Path(directory) / 'state.db'}"
        with open_cluster(MODULES, shards=2, state=state) as cluster:
            progress(f"{NAME}: handover: {len(sessions)} live sessions")
            _rate(cluster.call_blocking, [_goal(s) for s in sessions], sizes.cluster_callers)
            for number in range(sizes.rounds):
                progress(f"{NAME}: handover: round {number + 1}")
                before = {s: cluster.shard_of(s) for s in sessions}
                added, seconds = _timed(cluster.add_shard)
                keep("add", seconds)
                moved = [s for s in sessions if cluster.shard_of(s) != before[s]]
                stayed = [s for s in sessions if cluster.shard_of(s) == before[s]]
                keep("moved", len(moved))
                keep("first call, moved", _first_calls(cluster, moved))
                keep("call, stayed", _first_calls(cluster, stayed[: len(moved)]))
                keep("remove", _timed(functools.partial(cluster.remove_shard, added))[1])
                # Every session live again, for the next round to hand over as many.
                _rate(cluster.call_blocking, [_listing(s) for s in sessions], sizes.cluster_callers)
    return measured


async def _writes_per_second(url: str, sizes: Sizes) -> list[float]:
    """Acknowledged durable writes/s on the store `url`, in process, one round each.

    ``durable_callers`` callers append goals to ``durable_keys`` sessions: every
    call is one versioned write. What one store takes from every shard together
    bounds a cluster (the model in docs/performance.md).
    """
    from actors.store import open_store

    sessions = _sessions(sizes.durable_keys)
    calls = [_goal(sessions[n % len(sessions)]) for n in range(sizes.durable_light_calls)]
    rates = []
    async with open_store(url) as store, open_runtime([planning], store=store) as runtime:
        for _ in range(sizes.rounds):
            began = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for lane in range(sizes.durable_callers):
                    nursery.start_soon(_call_all, runtime, calls[lane :: sizes.durable_callers])
            rates.append(len(calls) / (time.perf_counter() - began))
    return rates


async def _call_all(runtime: Runtime, calls: list[dict[str, Any]]) -> None:
    for call in calls:
        result = await runtime.call(call)
        assert not result.is_error, result.first_text


CPU_TARGET: Final = Target("<=", 1.5)
"""Server CPU per light call served by a 2-shard cluster over a lean call served locally."""
SERVE: Final = "serve"
CLUSTER: Final = "cluster, 2 shards"
_LISTENING: Final = re.compile(r"listening on (http://\S+)")
_STARTUP: Final = 240.0  # seconds a server may take to listen (a cluster starts Ray first)
_STOP: Final = 60.0  # seconds a cluster may take to stop its shards and its Ray


async def _served_rounds(sizes: Sizes, progress: Progress) -> dict[tuple[str, int], list[Light]]:
    """Light calls over Streamable HTTP to ``serve`` and to ``cluster``, rounds interleaved."""
    callers = (1, sizes.cluster_light_callers)
    sessions = _sessions(max(callers))
    measured: dict[tuple[str, int], list[Light]] = {}
    with tempfile.TemporaryDirectory(prefix="mcp-actors-served-") as directory:
        # Both over SQLite: a cluster needs a store its shards share (a list reads, never writes).
        serve = ["serve", "--state", f"sqlite:///{directory}/serve.db"]
        cluster = ["cluster", "--shards", "2", "--num-cpus", "2", "--name", f"bench-{os.getpid()}"]
        cluster += ["--state", f"sqlite:///{directory}/cluster.db"]
        async with contextlib.AsyncExitStack() as stack:
            servers = {}
            for name, arguments in ((SERVE, serve), (CLUSTER, cluster)):
                progress(f"{NAME}: served: starting {name}")
                log = Path(directory) / f"{name.split(',')[0]}.log"
                servers[name] = await stack.enter_async_context(_http_server(arguments, log))
            for server in servers.values():
                for session in sessions:
                    await server.call(session)
            for number in range(sizes.rounds):
                progress(f"{NAME}: served: round {number + 1}")
                for count in callers:
                    for name, server in servers.items():
                        batch = await server.batch(sessions[:count], sizes.cluster_light_calls)
                        measured.setdefault((name, count), []).append(batch)
    return measured


FAST_PATH_VERSION: Final = "2026-07-28"
"""A protocol version of the 2026 era: its plain tools/call is served on the fast path."""
_LEAN_HEADERS: Final = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Mcp-Protocol-Version": FAST_PATH_VERSION,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "planning__list_goals",
}


@attrs.define
class _Served:
    """A server in a subprocess, and an HTTP client sending it fast-path calls."""

    http: httpx2.AsyncClient
    url: str
    pid: int

    async def call(self, session: str) -> None:
        """One 2026-era ``tools/call`` (stateless: no MCP session), answered in one body."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": FAST_PATH_VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "benchmark", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
            "sessionId": session,
        }
        params = {"name": "planning__list_goals", "arguments": {}, "_meta": meta}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        response = await self.http.post(self.url, json=body, headers=_LEAN_HEADERS)
        assert response.status_code == 200, response.text
        assert not response.json()["result"].get("isError"), response.text

    async def batch(self, sessions: list[str], calls: int) -> Light:
        """`calls` light calls, one caller per session; the CPU is the server's process tree."""
        each = max(calls // len(sessions), 1)

        async def caller(session: str) -> None:
            for _ in range(each):
                await self.call(session)

        cpu = _tree_cpu(self.pid)
        began = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(caller, session)
        elapsed = time.perf_counter() - began
        return Light(each * len(sessions), elapsed, _tree_cpu(self.pid) - cpu)


@contextlib.asynccontextmanager
async def _http_server(arguments: list[str], log: Path) -> AsyncIterator[_Served]:
    """``python -m actors ARGUMENTS --http 127.0.0.1:0``, its log in `log`, and a client."""
    import httpx2

    command = [sys.executable, "-m", "actors", *arguments, "--http", "127.0.0.1:0"]
    with log.open("wb") as errors:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=errors, stderr=errors
        )
        try:
            url = await _listening(log, process)
            async with httpx2.AsyncClient(timeout=_STARTUP) as http:
                yield _Served(http, url, process.pid)
        finally:
            with trio.CancelScope(shield=True):
                # SIGTERM: a cluster stops its shards and its local Ray, a kill would orphan them.
                process.terminate()
                with trio.move_on_after(_STOP):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()


async def _listening(log: Path, process: trio.Process) -> str:
    with trio.fail_after(_STARTUP):
        while True:
            text = await trio.Path(log).read_text(errors="replace")
            found = _LISTENING.search(text)
            if found is not None:
                return found.group(1)
            if process.returncode is not None:
                msg = f"the server exited with {process.returncode}: {text[-2000:]}"
                raise RuntimeError(msg)
            await trio.sleep(0.1)


def _tree_cpu(root: int) -> float:
    """CPU seconds of process `root` and every process below it (see `_cpu_of`)."""
    return sum(map(_process_cpu, [root, *_descendants(root)]))


def _figures(
    heavy: dict[int, list[float]],
    light: dict[tuple[str, int], list[Light]],
    served: dict[tuple[str, int], list[Light]],
    sizes: Sizes,
) -> list[Figure]:
    where = f"{sizes.cluster_sessions} sessions, {sizes.cluster_callers} callers"
    figures = [
        figure(NAME, f"heavy search calls/s, {shards} shard(s), {where}", Stats.of(rates), "/s")
        for shards, rates in heavy.items()
    ]
    scaled = Stats.of([b / a for a, b in zip(heavy[1], heavy[2], strict=True)])
    figures.append(
        figure(NAME, f"heavy search, 2 shards / 1 shard, {where}", scaled, "x", SCALE_TARGET)
    )
    labelled = [(place, key, batches) for (place, key), batches in light.items()]
    labelled += [(f"served over HTTP, {place}", key, b) for (place, key), b in served.items()]
    for place, callers, batches in labelled:
        figures.append(
            figure(
                NAME,
                f"light calls/s, {place}, {_callers(callers)}",
                Stats.of([b.rate for b in batches]),
                "/s",
            )
        )
        figures.append(
            figure(
                NAME,
                f"light call, total CPU per call, {place}, {_callers(callers)}",
                Stats.of([b.cpu_per_call * 1e6 for b in batches]),
                "µs",
            )
        )
    for callers in sorted({callers for _, callers in light}):
        near = light[IN_PROCESS, callers]
        for shards in (1, 2):
            far = light[_through(shards), callers]
            cpu = Stats.of(
                [f.cpu_per_call / n.cpu_per_call for f, n in zip(far, near, strict=True)]
            )
            figures.append(
                figure(
                    NAME,
                    f"light call, CPU per call, {_through(shards)} / in process, "
                    f"{_callers(callers)}",
                    cpu,
                    "x",
                )
            )
    for callers in sorted({callers for _, callers in served}):
        near, far = served[SERVE, callers], served[CLUSTER, callers]
        cpu = Stats.of([f.cpu_per_call / n.cpu_per_call for f, n in zip(far, near, strict=True)])
        figures.append(
            figure(
                NAME,
                f"served over HTTP: server CPU per call, {CLUSTER} / {SERVE}, {_callers(callers)}",
                cpu,
                "x",
                CPU_TARGET,
            )
        )
    hop = Stats.of(
        [
            1e6 / far.rate - 1e6 / near.rate
            for far, near in zip(light[_through(1), 1], light[IN_PROCESS, 1], strict=True)
        ]
    )
    figures.append(
        figure(NAME, "the Ray hop per call (through a shard - in process), 1 caller", hop, "µs")
    )
    return figures


def _callers(count: int) -> str:
    return f"{count} caller{'s' if count > 1 else ''}"


def run_cluster(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure 1 and 2 shards on a local Ray, and the hop, when Ray is installed."""
    if importlib.util.find_spec("ray") is None:
        return ScenarioResult(NAME, notes=("skipped: needs Ray (pip install -e '.[cluster]')",))
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        heavy, light = _measure_shards(sizes, progress)
        handover = _measure_handover(sizes, progress)
    finally:
        ray.shutdown()
    served = trio.run(_served_rounds, sizes, progress) if _can_serve() else {}
    writes = _store_rates(sizes, progress)
    notes = (
        f"local Ray, num_cpus=2; shards over the memory store; {sizes.cluster_documents} "
        "documents of 32 KB per session; callers are threads of this process calling "
        "Cluster.call (ray.get) for the heavy calls",
        f"light: planning__list_goals, {sizes.cluster_light_calls} calls a batch from trio tasks "
        "(one, and one per session with many) through Cluster.run, or Runtime.call in process; "
        "CPU: the cluster's is this process's and every process below it (the local Ray's "
        "daemons and workers, from /proc); in process, this process's",
        f"handover: {sizes.cluster_handover_sessions} live planning sessions on 2 shards over "
        "one SQLite file; per round a third shard is added, then removed; calls one at a time",
        f"store writes: in process, {sizes.durable_callers} callers on {sizes.durable_keys} "
        f"sessions; PostgreSQL when {POSTGRES_VARIABLE} names a database to use "
        f"({'measured' if POSTGRES in writes else 'not set: skipped'})",
    )
    where = f"{sizes.durable_callers} callers, in process"
    figures = [
        *_figures(heavy, light, served, sizes),
        *_handover_figures(handover, sizes),
        *(
            figure(NAME, f"store: acknowledged writes/s, {store}, {where}", Stats.of(rates), "/s")
            for store, rates in writes.items()
        ),
    ]
    return ScenarioResult(NAME, tuple(figures), notes)


def _can_serve() -> bool:
    """Whether the served part can run: the server extra (and its httpx2) and Linux's /proc."""
    found = all(importlib.util.find_spec(name) is not None for name in ("mcp", "httpx2"))
    return found and Path("/proc/self/stat").exists()


def _store_rates(sizes: Sizes, progress: Progress) -> dict[str, list[float]]:
    """Writes/s on SQLite, and on PostgreSQL when the environment names a database."""
    rates = {}
    with tempfile.TemporaryDirectory(prefix="mcp-actors-store-") as directory:
        progress(f"{NAME}: store writes: SQLite")
        url = f"sqlite:///{Path(directory) / 'state.db'}"
        rates["SQLite"] = trio.run(_writes_per_second, url, sizes)
    postgres = os.environ.get(POSTGRES_VARIABLE)
    if postgres:
        progress(f"{NAME}: store writes: PostgreSQL")
        rates[POSTGRES] = trio.run(_writes_per_second, postgres, sizes)
    return rates


def _handover_figures(measured: dict[str, list[float]], sizes: Sizes) -> list[Figure]:
    live = f"{sizes.cluster_handover_sessions} live sessions"
    ms = {name: Stats.of([v * 1e3 for v in measured[name]]) for name in measured}
    return [
        figure(NAME, f"handover: add a 3rd shard (starts its process), {live}", ms["add"], "ms"),
        figure(NAME, f"handover: remove it again, {live}", ms["remove"], "ms"),
        figure(
            NAME, f"handover: sessions moved by one change, {live}", Stats.of(measured["moved"]), ""
        ),
        figure(
            NAME,
            "handover: first call of a moved session (loads its state)",
            ms["first call, moved"],
            "ms",
        ),
        figure(NAME, "handover: call of a session that stayed", ms["call, stayed"], "ms"),
    ]
