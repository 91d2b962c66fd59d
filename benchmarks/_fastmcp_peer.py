"""The ``durable`` scenario's peer: FastMCP 4 session state against ``actors serve --state``.

Four servers, each a real subprocess on stdio driven by the official SDK
client from this process:

* ``python -m actors serve --state sqlite:///…`` (and ``--state memory``), as
  it is, default logging included: ``planning__create_goal`` and
  ``planning__list_goals``, the session named in each call's ``_meta``;
* the FastMCP server of `benchmarks._fastmcp_server` with its memory store and
  with its file store: ``create_goal`` and ``list_goals`` on a ``session_id``
  that ``create_session`` minted, resolved with ``get_session``.

Each round runs two phases, the servers interleaved in each:

* **mixed** — many callers, calls spread over many sessions, alternately a
  create and a list: calls per second;
* **shared** — many callers each appending goals to one session (a new one
  per round), then one list: appends acknowledged minus goals listed is the
  number of lost updates. FastMCP's ``Session.set`` is a read-modify-write of
  the whole session dict, and its docs accept that concurrent writes to one
  session race; in this runtime the session's actor takes one call at a
  time, so nothing can be lost.

FastMCP runs in a virtual environment of its own under the user's cache
directory, since its dependencies are not this project's. The quick and full
runs create it when it is missing (``pip`` needs the package index); the tiny
run only uses one that exists. Without one the peer is skipped, with a note
saying how to install it; the benchmark never fails on it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast, final

import attrs
import trio

from ._measure import Batch, Results, Stats, drive, latencies, ratios, throughputs
from ._report import Figure, Target, figure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from mcp import ClientSession
    from mcp.types import RequestParamsMeta

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = [
    "FASTMCP_MEMORY",
    "FASTMCP_VERSION",
    "OURS_MEMORY",
    "Driven",
    "InstallError",
    "Peer",
    "cpu_ratios",
    "fastmcp_venv",
    "find_fastmcp",
    "install_fastmcp",
    "per_call",
    "run_checked",
    "run_fastmcp_peer",
    "serve_command",
    "serve_stdio",
    "warmed",
]

NAME: Final = "durable"
FASTMCP_VERSION: Final = "4.1.6"
OURS_SQLITE: Final = "actors serve, SQLite"
OURS_MEMORY: Final = "actors serve, memory"
FASTMCP_FILE: Final = "FastMCP, file store"
FASTMCP_MEMORY: Final = "FastMCP, memory store"
SERVERS: Final = (OURS_SQLITE, OURS_MEMORY, FASTMCP_FILE, FASTMCP_MEMORY)
OURS: Final = (OURS_SQLITE, OURS_MEMORY)
RATIO_TARGET: Final = Target(">=", 3)  # calls/s, ours over FastMCP keeping state alike
PAIRS: Final = (
    (OURS_SQLITE, FASTMCP_FILE, RATIO_TARGET),  # both durable
    (OURS_MEMORY, FASTMCP_MEMORY, RATIO_TARGET),  # both in memory
    (OURS_SQLITE, FASTMCP_MEMORY, None),  # ours durable, theirs not
)
NONE_TARGET: Final = Target("==", 0, any_size=True)
MIXED: Final = "mixed"
SHARED: Final = "shared"
SERVER_HINT: Final = "pip install -e '.[server]'"
_INSTALL_TIMEOUT: Final = 600  # seconds per command; pip's own timeouts are set short below
_SERVER_SCRIPT: Final = Path(__file__).with_name("_fastmcp_server.py")
_COUNT: Final = re.compile(r"^Goals \((\d+)\):")


def fastmcp_venv() -> Path:
    """Where the scenario keeps FastMCP's virtual environment."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache, "mcp-actors-bench", "fastmcp-venv")


def _installed_in(venv: Path) -> bool:
    return any(venv.glob(f"lib/python*/site-packages/fastmcp-{FASTMCP_VERSION}.dist-info"))


def find_fastmcp() -> str | None:
    """A Python that has FastMCP `FASTMCP_VERSION`: this one, or the scenario's venv's."""
    try:
        if importlib.metadata.version("fastmcp") == FASTMCP_VERSION:
            return sys.executable
    except importlib.metadata.PackageNotFoundError:
        pass
    venv = fastmcp_venv()
    return str(venv / "bin" / "python") if _installed_in(venv) else None


class InstallError(Exception):
    """A peer (FastMCP, the TypeScript SDK) could not be installed; the message says what failed."""


def _run(command: Sequence[str | Path], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [str(part) for part in command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        msg = f"{' '.join(map(str, command[:4]))} … took over {timeout:.0f} s"
        raise InstallError(msg) from None


def run_checked(command: Sequence[str | Path], timeout: float) -> None:
    """Run `command`; InstallError with the last line of its stderr unless it succeeds."""
    done = _run(command, timeout)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        msg = f"{' '.join(map(str, command[:4]))} … failed: {last}"
        raise InstallError(msg)


def _slim_requirements(venv: Path) -> list[str]:
    """fastmcp-slim's requirements for its client and server, certifi at any version.

    fastmcp-slim 4.1.6 asks for ``certifi>=2026.10.19``, a release the package
    index may not have yet (it did not when this was written); certifi only
    supplies CA certificates, which the peer, serving stdio, never uses.
    """
    (dist,) = venv.glob(f"lib/python*/site-packages/fastmcp_slim-{FASTMCP_VERSION}.dist-info")
    wanted = set()
    for line in importlib.metadata.PathDistribution(dist).requires or []:
        requirement, _, marker = (part.strip() for part in line.partition(";"))
        if marker not in ("", "extra == 'client'", "extra == 'server'"):
            continue  # other extras, and what only Python 3.15 needs
        wanted.add("certifi" if requirement.startswith("certifi") else requirement)
    return sorted(wanted)


def install_fastmcp(progress: Progress) -> str:
    """Make the scenario's venv with FastMCP; the Python to run it with, or InstallError.

    Built beside its final place and renamed into it, so that an interrupted
    install never looks finished to the next run.
    """
    venv = fastmcp_venv()
    partial = venv.with_name(f"{venv.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    progress(f"{NAME}: installing FastMCP {FASTMCP_VERSION} into {venv}")
    try:
        run_checked([sys.executable, "-m", "venv", partial], _INSTALL_TIMEOUT)
        # Without a package index pip gives up within minutes, not after five long retries.
        python = partial / "bin" / "python"
        pip: list[str | Path] = [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--retries=1",
            "--timeout=30",
        ]
        pinned = [f"fastmcp=={FASTMCP_VERSION}", f"fastmcp-slim=={FASTMCP_VERSION}"]
        if _run([*pip, pinned[0]], _INSTALL_TIMEOUT).returncode != 0:
            run_checked([*pip, "--no-deps", *pinned], _INSTALL_TIMEOUT)
            run_checked([*pip, *_slim_requirements(partial)], _INSTALL_TIMEOUT)
        try:
            partial.rename(venv)
        except OSError:
            if not _installed_in(venv):  # not another run's finished install
                msg = f"{venv} exists without FastMCP {FASTMCP_VERSION} in it; remove it"
                raise InstallError(msg) from None
    except OSError as exc:
        msg = f"cannot make {venv}: {exc}"
        raise InstallError(msg) from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return str(venv / "bin" / "python")


def _install_hint() -> str:
    return (
        f"python -m benchmarks --only durable (quick or --full) installs it into {fastmcp_venv()} "
        "when the package index is reachable"
    )


# ---- the servers -------------------------------------------------------------------------


def _children() -> set[int]:
    """This process's child processes, from /proc (none where there is no /proc)."""
    found: set[int] = set()
    for path in Path("/proc/self/task").glob("*/children"):
        try:
            found.update(int(pid) for pid in path.read_text().split())
        except OSError:
            continue  # the thread ended meanwhile
    return found


def _cpu_seconds(pid: int | None) -> float | None:
    """User and system CPU time of process `pid`, all its threads; None if unknown."""
    if pid is None:
        return None
    try:
        # After the command name, which may hold spaces: utime and stime are fields 14 and 15.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _text(result: object) -> str:
    return "".join(getattr(item, "text", "") for item in getattr(result, "content", ()))


@final
@attrs.frozen
class Peer:
    """One server over stdio, its process, and how its tools are spelled."""

    name: str
    session: ClientSession = attrs.field(repr=False)
    pid: int | None
    """The server's process, to read its CPU time; None where it cannot be found."""

    @property
    def fastmcp(self) -> bool:
        """FastMCP's tools (a session_id argument minted by create_session) or ours (_meta)."""
        return self.name not in OURS

    async def call(self, tool: str, session_id: str, **arguments: str) -> tuple[bool, str]:
        """Call `tool` for `session_id`: (is_error, text)."""
        if self.fastmcp:
            result = await self.session.call_tool(tool, {"session_id": session_id, **arguments})
        else:
            # An open TypedDict (one with extra items), which mypy does not know yet.
            meta = cast("RequestParamsMeta", {"sessionId": session_id})
            result = await self.session.call_tool(f"planning__{tool}", arguments, meta=meta)
        return bool(getattr(result, "is_error", True)), _text(result)

    async def new_session(self, label: str) -> str:
        """A session id: minted by FastMCP's create_session, or just named for ours."""
        if not self.fastmcp:
            return label
        result = await self.session.call_tool("create_session", {})
        if getattr(result, "is_error", True):
            msg = f"{self.name}: create_session failed: {_text(result)}"
            raise RuntimeError(msg)
        return _text(result)


def _command(name: str, fastmcp: str, directory: Path) -> list[str]:
    if name in OURS:
        state = f"sqlite:///{directory}/actors.db" if name == OURS_SQLITE else "memory"
        return [sys.executable, "-m", "actors", "serve", "--state", state]
    store = ["file", str(directory / "fastmcp")] if name == FASTMCP_FILE else ["memory"]
    # -I: the script's folder (this package) is not put on FastMCP's path.
    return [fastmcp, "-I", str(_SERVER_SCRIPT), *store]


@asynccontextmanager
async def serve_stdio(
    name: str, fastmcp: str, directory: Path, extra: Sequence[str] = ()
) -> AsyncIterator[Peer]:
    """Server `name` (`extra` added to its command line) and the SDK client calling it."""
    async with serve_command(name, [*_command(name, fastmcp, directory), *extra]) as peer:
        yield peer


@asynccontextmanager
async def serve_command(name: str, command: Sequence[str]) -> AsyncIterator[Peer]:
    """`command` serving MCP on stdio as server `name`, and the SDK client calling it."""
    from mcp import ClientSession, StdioServerParameters, stdio_client  # the server extra

    params = StdioServerParameters(command=command[0], args=list(command[1:]))
    before = _children()
    # Each server's log goes to a file, never to a pipe that could fill.
    with tempfile.TemporaryFile("w+") as errlog:
        # The SDK client closes stdin, then terminates the process, when the block ends.
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            started = _children() - before
            yield Peer(name, session, started.pop() if len(started) == 1 else None)


# ---- the phases ----------------------------------------------------------------------------


@attrs.define(eq=False)
class Driven:
    """A server under load: its sessions, failures, lost updates and the client's CPU."""

    peer: Peer
    sessions: list[str]
    failures: int = 0
    lost: list[int] = attrs.field(factory=list)
    """Per round: appends acknowledged minus goals listed."""
    client_cpu: list[float] = attrs.field(factory=list)
    """Per mixed batch: CPU seconds this process (the SDK client) spent on it."""

    async def mixed(self, calls: int, callers: int) -> Batch:
        """`calls` calls over the sessions, alternately create_goal and list_goals."""

        async def call(index: int) -> object:
            session = self.sessions[(index // 2) % len(self.sessions)]
            if index % 2:
                failed, _ = await self.peer.call("list_goals", session)
            else:
                failed, _ = await self.peer.call("create_goal", session, goal=f"goal {index}")
            self.failures += failed
            return None

        server, client = _cpu_seconds(self.peer.pid), time.process_time()
        batch = await drive(call, range(calls), callers)
        self.client_cpu.append(time.process_time() - client)
        after = _cpu_seconds(self.peer.pid)
        cpu = None if server is None or after is None else after - server
        return attrs.evolve(batch, cpu=cpu)

    async def shared(self, label: str, appends: int, callers: int) -> Batch:
        """`callers` callers each appending `appends` goals to one new session."""
        session = await self.peer.new_session(label)
        acknowledged = 0

        async def call(index: int) -> object:
            nonlocal acknowledged
            failed, _ = await self.peer.call("create_goal", session, goal=f"append {index}")
            self.failures += failed
            acknowledged += not failed
            return None

        batch = await drive(call, range(appends * callers), callers)
        failed, text = await self.peer.call("list_goals", session)
        found = _COUNT.match(text)
        self.lost.append(acknowledged - (int(found.group(1)) if found else 0))
        self.failures += failed
        return batch


async def warmed(peer: Peer, sizes: Sizes) -> Driven:
    """`peer` with its ``fastmcp_sessions`` sessions, each written once."""
    sessions = [await peer.new_session(f"s-{n}") for n in range(sizes.fastmcp_sessions)]
    driven = Driven(peer, sessions)
    await driven.mixed(2 * len(sessions), sizes.fastmcp_callers)
    driven.client_cpu.clear()
    return driven


async def _measure(
    sizes: Sizes, fastmcp: str, directory: Path, progress: Progress
) -> tuple[Results, dict[str, Driven]]:
    callers = sizes.fastmcp_callers
    async with AsyncExitStack() as stack:
        progress(f"{NAME}: peer: starting {len(SERVERS)} servers")
        driven = {}
        for name in SERVERS:
            peer = await stack.enter_async_context(serve_stdio(name, fastmcp, directory))
            driven[name] = await warmed(peer, sizes)
        results: Results = {name: {MIXED: [], SHARED: []} for name in SERVERS}
        for number in range(sizes.fastmcp_rounds):
            progress(f"{NAME}: peer: round {number + 1}/{sizes.fastmcp_rounds}")
            for name, server in driven.items():
                results[name][MIXED].append(await server.mixed(sizes.fastmcp_calls, callers))
            for name, server in driven.items():
                batch = await server.shared(f"shared-{number}", sizes.fastmcp_appends, callers)
                results[name][SHARED].append(batch)
    return results, driven


def per_call(seconds: Sequence[float | None], batches: Sequence[Batch]) -> Stats | None:
    """Microseconds per call of each batch's `seconds`; None when any is unknown."""
    known = [s for s in seconds if s is not None]
    if len(known) < len(batches):
        return None
    return Stats.of([s / b.calls * 1e6 for s, b in zip(known, batches, strict=True)])


def cpu_ratios(numerators: Sequence[Batch], denominators: Sequence[Batch]) -> Stats | None:
    """Server CPU per call of one server over another's, round by round; None if unknown."""
    per_round = []
    for a, b in zip(numerators, denominators, strict=True):
        if a.cpu is None or not b.cpu:  # not read (no /proc), or below one clock tick
            return None
        per_round.append((a.cpu / a.calls) / (b.cpu / b.calls))
    return Stats.of(per_round)


def _mixed_figures(
    name: str, batches: Sequence[Batch], client: Sequence[float], where: str
) -> list[Figure]:
    figures = [
        figure(NAME, f"peer: {name} calls/s, {where}", throughputs(batches), "/s"),
        figure(NAME, f"peer: {name} p50, {where}", latencies(batches, 0.5), "µs"),
    ]
    for process, seconds in (("server", [b.cpu for b in batches]), ("client", client)):
        cost = per_call(seconds, batches)
        if cost is not None:  # a server's CPU time is unknown without /proc
            label = f"peer: {name} {process} CPU per call, {where}"
            figures.append(figure(NAME, label, cost, "µs"))
    return figures


def _shared_figures(
    name: str, batches: Sequence[Batch], server: Driven, where: str
) -> list[Figure]:
    judged = NONE_TARGET if name in OURS else None
    return [
        figure(NAME, f"peer: {name} lost updates, {where}", sum(server.lost), "", judged),
        figure(NAME, f"peer: {name} appends/s, {where}", throughputs(batches), "/s"),
        figure(NAME, f"peer: {name} failed calls", server.failures, "", judged),
    ]


def _figures(results: Results, driven: dict[str, Driven], sizes: Sizes) -> list[Figure]:
    callers = sizes.fastmcp_callers
    mixed = f"{callers} callers over {sizes.fastmcp_sessions} sessions, create/list"
    shared = f"{callers} callers x {sizes.fastmcp_appends} appends to one session"
    figures = []
    for name in SERVERS:
        figures += _mixed_figures(name, results[name][MIXED], driven[name].client_cpu, mixed)
    for ours, theirs, target in PAIRS:
        paired = ratios(results[ours][MIXED], results[theirs][MIXED])
        figures.append(figure(NAME, f"peer: {ours} / {theirs}, {mixed}", paired, "x", target))
        cpu = cpu_ratios(results[theirs][MIXED], results[ours][MIXED])
        if cpu is not None:
            name = f"peer: server CPU per call, {theirs} / {ours}, {mixed}"
            figures.append(figure(NAME, name, cpu, "x"))
    for name in SERVERS:
        figures += _shared_figures(name, results[name][SHARED], driven[name], shared)
    return figures


def run_fastmcp_peer(sizes: Sizes, progress: Progress) -> tuple[list[Figure], list[str]]:
    """The peer's figures and notes; no figures, and a note saying why, when it cannot run."""
    missing = [name for name in ("mcp", "httptools") if importlib.util.find_spec(name) is None]
    if missing:
        needs = ", ".join(missing)
        return [], [f"peer skipped: actors serve needs {needs} ({SERVER_HINT})"]
    fastmcp = find_fastmcp()
    if fastmcp is None and not sizes.fastmcp_install:
        return [], [f"peer skipped: FastMCP {FASTMCP_VERSION} is not installed; {_install_hint()}"]
    if fastmcp is None:
        try:
            fastmcp = install_fastmcp(progress)
        except InstallError as exc:
            return [], [f"peer skipped: installing FastMCP failed ({exc}); {_install_hint()}"]
    with tempfile.TemporaryDirectory(prefix="mcp-actors-peer-") as directory:
        results, driven = trio.run(_measure, sizes, fastmcp, Path(directory), progress)
    notes = [
        f"peer: FastMCP {FASTMCP_VERSION} (its SessionProvider and get_session; file store: "
        "FileTreeStore, one fsync per set) and actors serve (planning), each a stdio "
        f"subprocess driven by the SDK client; {sizes.fastmcp_rounds} interleaved rounds",
        "peer: lost updates = appends acknowledged - goals listed afterwards, summed over rounds "
        "(a new shared session per round)",
        "peer: CPU per call = the process's CPU time over a batch / its calls (server: read "
        "from /proc, in clock ticks; client: this process, the SDK client alone)",
    ]
    return _figures(results, driven, sizes), notes
