"""Scenario ``ts_peer``: server CPU per call of ``actors serve`` beside the TypeScript SDK's.

Three servers, each a subprocess driven by the official Python SDK client from
this process, over stdio and then over Streamable HTTP on 127.0.0.1:

* ``python -m actors serve --state memory`` (``--http 127.0.0.1:0`` on HTTP),
  as the ``mcp`` scenario starts it, default logging (a line per call) included:
  ``planning__create_goal`` and ``planning__list_goals``, the session named in
  each call's ``_meta``;
* the TypeScript SDK's ``McpServer`` on Node (``benchmarks/ts_peer/server.mjs``;
  on HTTP, Express from the SDK's ``createMcpExpressApp`` and a
  ``StreamableHTTPServerTransport`` and server per MCP session, as the SDK's
  README shows, no event store, no log line): ``create_session``,
  ``create_goal`` and ``list_goals`` on a ``session_id``, its sessions kept per
  MCP session;
* FastMCP 4 with its memory session store (`benchmarks._fastmcp_server`), the
  same tools, when its virtual environment exists or can be made.

The same work on each: create_goal and list_goals, alternately, spread over
many sessions, one caller (sequential) and 16 requests in flight, rounds
interleaving the servers. Every answer is checked — a create's text, a list's
goals against those acknowledged and sent — and each session's goals once more
at the end: a single wrong answer fails the scenario instead of giving figures.

The servers run on one core, this process (the load generator) on another
(``sched_setaffinity``, every thread). What decides is server CPU per call,
read from ``/proc`` in clock ticks, paired by round: ours over the TypeScript
SDK's (the issue's targets: at most 1.5x over stdio, at most 0.5x — the TS SDK
costing 2x ours — over HTTP) and FastMCP's over ours.

The TypeScript SDK is pinned (1.32.2) in ``benchmarks/ts_peer/package-lock.json``,
so every server speaks the 2025 era here: the ``initialize`` handshake, and over
HTTP an ``Mcp-Session-Id``. The quick and full runs install it with ``npm ci
--ignore-scripts`` under ``$XDG_CACHE_HOME/mcp-actors-bench/ts_peer/<hash>``
(``~/.cache`` by default) when it is missing; the tiny run only uses one that
exists. Without Node.js, npm or an install the scenario is skipped with a note.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import attrs
import trio

from actors.harness._cpu import process_cpu_seconds

from ._fastmcp_peer import (
    FASTMCP_MEMORY,
    OURS_MEMORY,
    InstallError,
    Peer,
    cpu_ratios,
    find_fastmcp,
    install_fastmcp,
    per_call,
    run_checked,
    serve_command,
)
from ._mcp_peer import serve_http_command, served
from ._measure import Batch, Results, drive, throughputs
from ._pinning import pin, pinned
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = [
    "IN_FLIGHT",
    "OURS",
    "SOURCE",
    "TS",
    "TS_SDK_VERSION",
    "Checked",
    "WrongAnswer",
    "find_ts_peer",
    "install_ts_peer",
    "run_ts_peer",
    "script_beside",
    "ts_peer_modules",
    "ts_served",
]

NAME: Final = "ts_peer"
SOURCE: Final = Path(__file__).with_name("ts_peer")
"""The server's source: ``package.json``, ``package-lock.json`` and ``server.mjs``."""
MANIFESTS: Final = ("package.json", "package-lock.json")
TS_SDK_VERSION: Final[str] = json.loads((SOURCE / "package.json").read_text(encoding="utf-8"))[
    "dependencies"
]["@modelcontextprotocol/sdk"]
OURS: Final = OURS_MEMORY
TS: Final = f"TS SDK {TS_SDK_VERSION} McpServer"
FASTMCP: Final = FASTMCP_MEMORY
TRANSPORTS: Final = ("stdio", "HTTP")
IN_FLIGHT: Final = 16
"""Requests in flight in the concurrent phase (the issue's measurement)."""
OURS_OVER_TS: Final = {"stdio": Target("<=", 1.5), "HTTP": Target("<=", 0.5)}
"""Ours / TS server CPU per call: over HTTP the TS SDK should cost at least 2x ours."""
FASTMCP_OVER_OURS: Final = {"stdio": Target(">=", 4)}
_INSTALL_TIMEOUT: Final = 600.0  # seconds for npm ci from the registry on a slow network
_DONE: Final = ".installed"  # written last: a folder without it is an unfinished install
_TS_URL: Final = re.compile(r"listening on (http://\S+)")
_CREATED: Final = re.compile(r"Created goal g\d+: (.*)", re.DOTALL)
NPM_HINT: Final = (
    "python -m benchmarks --only ts_peer (quick or --full) installs it when Node.js, npm "
    "and the npm registry are at hand"
)


# ---- the TypeScript SDK's install ---------------------------------------------------------


def ts_peer_modules() -> Path:
    """The folder the scenario installs the locked packages into: one per lock file."""
    hasher = hashlib.sha256()
    for manifest in MANIFESTS:
        data = (SOURCE / manifest).read_bytes()
        hasher.update(len(data).to_bytes(8, "big") + data)
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache, "mcp-actors-bench", "ts_peer", hasher.hexdigest()[:16])


def find_ts_peer() -> Path | None:
    """The finished install of `ts_peer_modules`, or None."""
    folder = ts_peer_modules()
    return folder if (folder / _DONE).exists() else None


def install_ts_peer(progress: Progress) -> Path:
    """``npm ci`` the lock into `ts_peer_modules`; the folder, or InstallError.

    Built beside its final place and renamed into it, so that an interrupted
    install never looks finished to the next run; no package's scripts run.
    """
    npm = shutil.which("npm")
    if npm is None:
        msg = "npm is not on PATH"
        raise InstallError(msg)
    folder = ts_peer_modules()
    partial = folder.with_name(f"{folder.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    progress(f"{NAME}: installing @modelcontextprotocol/sdk {TS_SDK_VERSION} into {folder}")
    try:
        partial.mkdir(parents=True)
        for manifest in MANIFESTS:
            shutil.copyfile(SOURCE / manifest, partial / manifest)
        quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
        run_checked([npm, "ci", "--prefix", partial, "--ignore-scripts", *quiet], _INSTALL_TIMEOUT)
        (partial / _DONE).touch()
        try:
            partial.rename(folder)
        except OSError:
            if not (folder / _DONE).exists():  # not another run's finished install
                msg = f"{folder} exists without a finished install in it; remove it"
                raise InstallError(msg) from None
    except OSError as exc:
        msg = f"cannot make {folder}: {exc}"
        raise InstallError(msg) from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def script_beside(modules: Path, directory: Path) -> Path:
    """``server.mjs`` copied into `directory`, beside a link to `modules`' node_modules.

    Node resolves a module's imports from the module's own folder up, so the
    script must sit beside the packages; the install stays as ``npm ci`` left it.
    """
    script = directory / "server.mjs"
    shutil.copyfile(SOURCE / "server.mjs", script)
    (directory / "node_modules").symlink_to(modules / "node_modules", target_is_directory=True)
    return script


def ts_served(
    transport: str, node: str, script: Path, directory: Path
) -> AbstractAsyncContextManager[Peer]:
    """The TypeScript SDK's server over `transport` (``stdio`` or ``HTTP``), and a client to it."""
    if transport == "stdio":
        return serve_command(TS, [node, str(script), "stdio"])
    return serve_http_command(TS, [node, str(script), "http", "0"], _TS_URL, directory)


# ---- one core for the servers, another for the load generator -----------------------------


def _cores() -> tuple[set[int], set[int]] | None:
    """A core for the servers and another for this process; None with fewer than two."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    return ({allowed[0]}, {allowed[1]}) if len(allowed) >= 2 else None


# ---- the load, every answer checked --------------------------------------------------------


class WrongAnswer(Exception):
    """A server answered a call with something other than the tool's answer."""


def _listed(text: str) -> list[str] | None:
    """The goals a list_goals answer lists, in order; None unless it is one (g1, g2, ...)."""
    if text == "No goals yet.":
        return []
    head, _, body = text.partition("\n")
    lines = body.split("\n")
    if head != f"Goals ({len(lines)}):":
        return None
    goals = []
    for number, line in enumerate(lines, 1):
        prefix = f"- g{number}: "
        if not line.startswith(prefix):
            return None
        goals.append(line.removeprefix(prefix))
    return goals


@attrs.define(eq=False)
class Checked:
    """A server under load whose every answer is checked against what it acknowledged."""

    peer: Peer
    acknowledged: dict[str, list[str]]
    """Per session: the goals whose create_goal succeeded, in the order the answers came."""
    sent: dict[str, set[str]] = attrs.field(init=False)
    """Per session: every goal a create_goal was sent for, answered or not yet."""
    made: int = 0
    """Goals made so far, which numbers them: each goal's text is unique."""

    def __attrs_post_init__(self) -> None:
        self.sent = {session: set(goals) for session, goals in self.acknowledged.items()}

    @classmethod
    async def of(cls, peer: Peer, sessions: int) -> Checked:
        """`peer` with `sessions` new sessions (minted by its create_session, or named)."""
        return cls(peer, {await peer.new_session(f"s-{n}"): [] for n in range(sessions)})

    def _check(self, right: bool, call: str, text: str) -> None:
        """WrongAnswer naming the server, the call and the answer, unless `right`."""
        if not right:
            msg = f"{self.peer.name} answered {call} with {text[:500]!r}"
            raise WrongAnswer(msg)

    async def create_goal(self, session: str) -> None:
        """Create a new goal in `session`; WrongAnswer unless the answer names it."""
        self.made += 1
        goal = f"goal {self.made}"
        self.sent[session].add(goal)
        failed, text = await self.peer.call("create_goal", session, goal=goal)
        found = _CREATED.fullmatch(text)
        right = not failed and found is not None and found.group(1) == goal
        self._check(right, f"create_goal {goal!r} in session {session!r}", text)
        self.acknowledged[session].append(goal)

    async def list_goals(self, session: str) -> None:
        """List `session`'s goals; WrongAnswer unless the list holds every goal acknowledged
        before it was asked for and only goals that were sent."""
        known = len(self.acknowledged[session])
        failed, text = await self.peer.call("list_goals", session)
        listed = _listed(text)
        right = (
            not failed
            and listed is not None
            and set(self.acknowledged[session][:known]) <= set(listed) <= self.sent[session]
        )
        self._check(right, f"list_goals in session {session!r}", text)

    async def batch(self, calls: int, callers: int) -> tuple[Batch, float]:
        """`calls` calls over the sessions, alternately create and list, with `callers`.

        The batch carries the server's CPU seconds; beside it, this process's (the client's).
        """
        sessions = list(self.acknowledged)

        async def call(index: int) -> None:
            session = sessions[(index // 2) % len(sessions)]
            await (self.list_goals(session) if index % 2 else self.create_goal(session))

        gc.collect(1)  # this process's garbage, collected before the batch, not in it
        server, client = self._server_cpu(), time.process_time()
        batch = await drive(call, range(calls), callers)
        client = time.process_time() - client
        after = self._server_cpu()
        cpu = None if server is None or after is None else after - server
        return attrs.evolve(batch, cpu=cpu), client

    def _server_cpu(self) -> float | None:
        if self.peer.pid is None:
            return None
        try:
            return process_cpu_seconds(self.peer.pid)
        except (OSError, ValueError):  # no /proc here
            return None

    async def verify(self) -> None:
        """WrongAnswer unless each session lists exactly the goals acknowledged in it."""
        for session, goals in self.acknowledged.items():
            failed, text = await self.peer.call("list_goals", session)
            listed = _listed(text)
            right = not failed and listed is not None and sorted(listed) == sorted(goals)
            self._check(right, f"list_goals in session {session!r} at the end", text)


# ---- the measurement -----------------------------------------------------------------------


@final
@attrs.frozen
class _Plan:
    """What runs: Node and the TS script, FastMCP's Python (None: left out), the cores."""

    node: str
    script: Path
    fastmcp: str | None
    cores: tuple[set[int], set[int]] | None
    """The servers' core and this process's, or None: not pinned."""
    directory: Path
    """Where the HTTP servers' logs go."""

    @property
    def servers(self) -> tuple[str, ...]:
        return (OURS, TS) if self.fastmcp is None else (OURS, TS, FASTMCP)

    def served(self, transport: str, name: str) -> AbstractAsyncContextManager[Peer]:
        if name == TS:
            return ts_served(transport, self.node, self.script, self.directory)
        return served(transport, name, self.fastmcp or "", self.directory)


ClientCpu = dict[tuple[str, str, str], list[float]]
"""(transport, server, phase) -> CPU seconds this process spent driving each batch."""


def _phase(callers: int) -> str:
    return f"callers={callers}"


def _calls(sizes: Sizes, transport: str) -> int:
    """Calls per batch: fewer over HTTP, where each call costs a connection too."""
    return sizes.ts_stdio_calls if transport == "stdio" else sizes.ts_http_calls


async def _started(
    plan: _Plan, transport: str, stack: AsyncExitStack, sizes: Sizes
) -> dict[str, Checked]:
    """Every server of `plan` over `transport`, pinned, its sessions made and warmed."""
    servers = {}
    for name in plan.servers:
        peer = await stack.enter_async_context(plan.served(transport, name))
        if plan.cores is not None and peer.pid is not None:
            pin(peer.pid, plan.cores[0])
        servers[name] = await Checked.of(peer, sizes.ts_sessions)
        await servers[name].batch(_calls(sizes, transport), IN_FLIGHT)  # warm: JIT, actors
    return servers


async def _measure(
    plan: _Plan, sizes: Sizes, progress: Progress
) -> tuple[dict[str, Results], ClientCpu]:
    """Per transport: server -> phase -> one batch per round; and the client's CPU per batch."""
    results: dict[str, Results] = {}
    client: ClientCpu = {}
    for transport in TRANSPORTS:
        async with AsyncExitStack() as stack:
            progress(f"{NAME}: {transport}: starting {', '.join(plan.servers)}")
            servers = await _started(plan, transport, stack, sizes)
            results[transport] = {name: {} for name in servers}
            for number in range(sizes.ts_rounds):
                progress(f"{NAME}: {transport}: round {number + 1}/{sizes.ts_rounds}")
                for callers in (1, IN_FLIGHT):
                    phase = _phase(callers)
                    for name, server in servers.items():
                        batch, spent = await server.batch(_calls(sizes, transport), callers)
                        results[transport][name].setdefault(phase, []).append(batch)
                        client.setdefault((transport, name, phase), []).append(spent)
            for server in servers.values():
                await server.verify()
    return results, client


def _figures(
    results: dict[str, Results], client: ClientCpu, servers: Sequence[str], sizes: Sizes
) -> list[Figure]:
    figures = []
    for transport, per_server in results.items():
        for phase in map(_phase, (1, IN_FLIGHT)):
            where = f"{transport}, {phase}, {sizes.ts_sessions} sessions, create/list"
            for name in servers:
                batches = per_server[name][phase]
                figures.append(figure(NAME, f"{name} calls/s, {where}", throughputs(batches), "/s"))
                spent = client[transport, name, phase]
                for process, seconds in (("server", [b.cpu for b in batches]), ("client", spent)):
                    cost = per_call(seconds, batches)
                    if cost is not None:  # a server's is unknown without /proc
                        label = f"{name} {process} CPU per call, {where}"
                        figures.append(figure(NAME, label, cost, "µs"))
            figures += _ratios(per_server, servers, transport, phase, where)
    return figures


def _ratios(
    per_server: Results, servers: Sequence[str], transport: str, phase: str, where: str
) -> list[Figure]:
    """Server CPU per call, paired by round: ours over TS's, FastMCP's over ours."""
    pairs: list[tuple[str, str, Target | None]] = [(OURS, TS, OURS_OVER_TS[transport])]
    if FASTMCP in servers:
        pairs.append((FASTMCP, OURS, FASTMCP_OVER_OURS.get(transport)))
    figures = []
    for numerator, denominator, target in pairs:
        paired = cpu_ratios(per_server[numerator][phase], per_server[denominator][phase])
        if paired is not None:  # unknown without /proc, or below a clock tick
            label = f"server CPU per call, {numerator} / {denominator}, {where}"
            figures.append(figure(NAME, label, paired, "x", target))
    return figures


def _ts_modules(sizes: Sizes, progress: Progress) -> tuple[Path | None, str]:
    """The TS SDK's install (made when the sizes allow it), or None and why not."""
    modules = find_ts_peer()
    if modules is not None:
        return modules, ""
    if not sizes.ts_install:
        why = f"@modelcontextprotocol/sdk {TS_SDK_VERSION} is not installed; {NPM_HINT}"
        return None, why
    try:
        return install_ts_peer(progress), ""
    except InstallError as exc:
        return None, f"installing the TypeScript SDK failed ({exc}); {NPM_HINT}"


def _fastmcp(sizes: Sizes, progress: Progress) -> tuple[str | None, list[str]]:
    """FastMCP's Python (installed when the sizes allow it), or None and a note why not."""
    fastmcp = find_fastmcp()
    if fastmcp is None and sizes.ts_install:
        try:
            fastmcp = install_fastmcp(progress)
        except InstallError as exc:
            return None, [f"FastMCP left out: installing it failed ({exc})"]
    if fastmcp is None:
        return None, ["FastMCP left out: not installed (the quick and full runs install it)"]
    return fastmcp, []


def run_ts_peer(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Measure the servers over both transports; skipped, with a note, when one cannot run."""
    missing = [name for name in ("mcp", "httptools") if importlib.util.find_spec(name) is None]
    if missing:
        note = f"skipped: actors serve needs {', '.join(missing)} (pip install -e '.[server]')"
        return ScenarioResult(NAME, notes=(note,))
    node = shutil.which("node")
    if node is None:
        return ScenarioResult(NAME, notes=("skipped: Node.js (node) is not on PATH",))
    modules, why = _ts_modules(sizes, progress)
    if modules is None:
        return ScenarioResult(NAME, notes=(f"skipped: {why}",))
    fastmcp, notes = _fastmcp(sizes, progress)
    cores = _cores()
    with (
        tempfile.TemporaryDirectory(prefix="mcp-actors-ts-peer-") as directory,
        pinned(cores[1]) if cores is not None else contextlib.nullcontext(),
    ):
        plan = _Plan(node, script_beside(modules, Path(directory)), fastmcp, cores, Path(directory))
        results, client = trio.run(_measure, plan, sizes, progress)
    where = (
        f"servers on core {min(cores[0])}, this process (the SDK client) on core {min(cores[1])}"
        if cores is not None
        else "not pinned (fewer than two cores allowed)"
    )
    notes += [
        f"{', '.join(plan.servers)}: each a subprocess driven by one Python SDK client session "
        f"(mcp {importlib.metadata.version('mcp')}), 2025 era (initialize; over HTTP an "
        f"Mcp-Session-Id); {sizes.ts_rounds} interleaved rounds of {sizes.ts_stdio_calls} "
        f"(stdio) or {sizes.ts_http_calls} (HTTP) calls per server and phase, create_goal and "
        f"list_goals alternately; every answer checked; {where}",
        "server CPU per call: the server process's, read from /proc in clock ticks; client CPU "
        "per call: this process's, which sets the pace where it exceeds the server's. actors "
        "serve logs a line per call (its default), the TS SDK none, FastMCP's uvicorn its "
        "access log over HTTP",
        "HTTP: the SDK client closes each SSE answer once its result is in, so every call "
        "opens a TCP connection, on every server; the mcp scenario's wrk runs keep theirs",
    ]
    return ScenarioResult(NAME, tuple(_figures(results, client, plan.servers, sizes)), tuple(notes))
