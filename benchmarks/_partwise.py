"""The ``durable`` scenario's part-wise writes: a 1 KiB add to an empty, a 1 MiB and an 8 MiB store.

Six servers, each ``python -m actors serve --state sqlite:///…`` as a real
subprocess on stdio with a database of its own, driven by the official SDK
client from this process: for each store size, one serving the content
store written whole and one serving it part-wise (the two variants of
`benchmarks._stores`). Each server's session is filled first with items of
varied text (not measured); then, round by round, every server in turn takes
a batch of 1 KiB ``add_content`` calls to that session, a new item each, one
caller. The two variants of a size run next to each other, so that drift of
the machine touches both alike.

Per add, for each size and variant:

* **bytes written** — how much ``write_bytes`` in the server's
  ``/proc/<pid>/io`` grew over a batch, divided by its adds, and averaged
  over the rounds: the WAL's frames and the checkpoints that copy them into
  the database file (every so many adds), all of the process's threads.
  Linux counts a write when it dirties a page of the page cache (in whole
  pages or larger folios, so a small write counts at least a page), and
  nothing on a tmpfs, which has no disk under it: the folder the databases
  go to (the scenario's temporary directory) must be on a disk;
* **time** — each add's round trip, client side: p50 and p90 of each round.

Each is also given as a ratio to the same add into the empty store of the
same variant (the times paired round by round). The issue's target (at most
2x at 1 MiB and at 8 MiB) is judged for the part-wise variant only; the
whole-state variant is the "before" column, which grows with the store.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
import tempfile
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast, final

import attrs

from ._measure import Batch, Phase, Results, Stats, drive, interleave
from ._report import Figure, Target, figure
from ._texts import prose

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from mcp import ClientSession
    from mcp.types import CallToolResult, RequestParamsMeta

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = [
    "PART",
    "PARTWISE",
    "STORE_BYTES",
    "VARIANTS",
    "WHOLE_STATE",
    "PartwiseWrites",
    "partwise_figures",
    "partwise_notes",
    "partwise_writes",
    "run_partwise",
    "store_label",
    "write_bytes",
]

NAME: Final = "durable"
PART: Final = "served adds"
WHOLE_STATE: Final = "whole-state"
PARTWISE: Final = "part-wise"
VARIANTS: Final = {
    WHOLE_STATE: "benchmarks._stores:whole_state_content_store",
    PARTWISE: "benchmarks._stores:partwise_content_store",
}
"""Variant → the ``--module`` its servers serve."""
STORE_BYTES: Final = (0, 2**20, 8 * 2**20)
"""The filled stores' sizes: empty, 1 MiB and 8 MiB of content."""
ITEM_BYTES: Final = 256 * 1024  # several items per store, each well inside a request's limit
NOTE_BYTES: Final = 1024
RATIO_TARGET: Final = Target("<=", 2)  # x the same add into the empty store, part-wise only
NONE_TARGET: Final = Target("==", 0, any_size=True)
ADD_CONTENT: Final = "content_store__add_content"
SERVER_HINT: Final = "pip install -e '.[server]'"
SESSION: Final = "partwise"
ADDS: Final = "adds"
_PROJECT: Final = Path(__file__).resolve().parent.parent
"""Where ``benchmarks._stores`` is found: the servers run from here."""


def store_label(size: int) -> str:
    """``empty``, ``1 MiB``, ``8 MiB``: how a store size is named in figures."""
    return "empty" if size == 0 else f"{size / 2**20:g} MiB"


def _server_name(variant: str, size: int) -> str:
    return f"{variant}, {store_label(size)}"


def write_bytes(pid: int) -> int | None:
    """The bytes process `pid` has caused to be written to storage so far; None if unknown."""
    try:
        lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    except OSError:  # no /proc (not Linux), or the process is gone
        return None
    for line in lines:
        key, _, value = line.partition(":")
        if key == "write_bytes":
            return int(value)
    return None


def _child_serving(database: Path) -> int | None:
    """The pid of this process's child whose command line names `database`, if any."""
    needle = str(database).encode()
    for children in Path("/proc/self/task").glob("*/children"):
        try:
            pids = children.read_text().split()
        except OSError:
            continue  # the thread ended meanwhile
        for pid in pids:
            try:
                if needle in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return int(pid)
            except OSError:
                continue  # the child ended meanwhile
    return None


@attrs.define(eq=False)
class _Server:
    """One server under test: its client session, its process, and what its adds wrote."""

    name: str
    session: ClientSession = attrs.field(repr=False)
    pid: int | None
    written: list[float] = attrs.field(factory=list)
    """Per batch: bytes the process wrote per add (empty when they cannot be read)."""
    added: int = 0
    failures: int = 0

    async def add(self, filename: str, content: str) -> CallToolResult:
        """One ``add_content`` to the server's session."""
        # An open TypedDict (one with extra items), which mypy does not know yet.
        meta = cast("RequestParamsMeta", {"sessionId": SESSION})
        arguments = {"filename": filename, "content": content}
        return await self.session.call_tool(ADD_CONTENT, arguments, meta=meta)

    def write_bytes(self) -> int | None:
        """The server's `write_bytes` so far; None when unknown."""
        return None if self.pid is None else write_bytes(self.pid)

    async def batch(self, keys: Sequence[int], callers: int) -> Batch:
        """See `Contender.batch`: one 1 KiB add per key, the bytes written read around them."""
        before = self.write_bytes()
        batch = await drive(self._add_note, keys, callers)
        after = self.write_bytes()
        if before is not None and after is not None:
            self.written.append((after - before) / len(keys))
        return batch

    async def _add_note(self, _index: int) -> object:
        self.added += 1
        result = await self.add(f"note-{self.added}.md", _NOTE)
        self.failures += bool(result.is_error)
        return result


_NOTE: Final = prose("note", NOTE_BYTES)


@asynccontextmanager
async def _served(variant: str, size: int, directory: Path) -> AsyncIterator[_Server]:
    """A server for `variant` with its own database in `directory`, and the SDK client."""
    from mcp import ClientSession, StdioServerParameters, stdio_client  # the server extra

    database = directory / f"partwise-{variant}-{size}.db"
    command = ["-m", "actors", "serve", "--state", f"sqlite:///{database}"]
    # Warnings only: a log line per call to a file on the disk would count as written.
    command += ["--module", VARIANTS[variant], "--log-level", "warning"]
    params = StdioServerParameters(command=sys.executable, args=command, cwd=_PROJECT)
    with (directory / f"partwise-{variant}-{size}.log").open("w+") as errlog:
        # The SDK client closes stdin, then terminates the process, when the block ends.
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield _Server(_server_name(variant, size), session, _child_serving(database))


async def _fill(server: _Server, items: Sequence[str]) -> int | None:
    """Add `items` to the server's session; the bytes the server wrote doing it, if known."""
    before = server.write_bytes()
    for number, content in enumerate(items):
        result = await server.add(f"item-{number}.md", content)
        if result.is_error:
            text = "".join(getattr(item, "text", "") for item in result.content)
            msg = f"{server.name}: filling the store failed: {text}"
            raise RuntimeError(msg)
    after = server.write_bytes()
    return None if before is None or after is None else after - before


@final
@attrs.frozen
class PartwiseWrites:
    """What the part measured: each server's batches and what their adds wrote."""

    results: Results
    servers: tuple[_Server, ...]
    bytes_counted: bool
    """Whether the kernel counted the servers' writes: filling every store wrote some
    bytes (not on a tmpfs, which has no disk under it, and where /proc tells)."""


async def partwise_writes(sizes: Sizes, directory: Path, progress: Progress) -> PartwiseWrites:
    """Start the servers in `directory`, fill their stores, and run the interleaved adds."""
    items = [prose(f"item-{n}", ITEM_BYTES) for n in range(max(STORE_BYTES) // ITEM_BYTES)]
    adds = Phase(ADDS, (0,) * sizes.durable_partwise_adds, 1)
    async with AsyncExitStack() as stack:
        servers, filled = [], []
        for size in STORE_BYTES:
            for variant in VARIANTS:
                server = await stack.enter_async_context(_served(variant, size, directory))
                progress(f"{NAME}: {PART}: filling {server.name}")
                written = await _fill(server, items[: size // ITEM_BYTES])
                if size:
                    filled.append(written)
                servers.append(server)
        results = await interleave(
            servers, lambda _round: [adds], sizes.rounds, progress, f"{NAME}: {PART}"
        )
    return PartwiseWrites(results, tuple(servers), all(filled))


def partwise_notes(part: PartwiseWrites, sizes: Sizes) -> list[str]:
    """What the figures are, and what they are not."""
    notes = [
        f"{PART}: a {NOTE_BYTES // 1024} KiB add_content (a new item each) to a store empty, "
        f"of 1 MiB and of 8 MiB ({ITEM_BYTES // 1024} KiB items, filled beforehand), written "
        f"{' and '.join(VARIANTS)}: each an actors serve --state sqlite:///... process over "
        f"stdio driven by the SDK client; {sizes.rounds} interleaved rounds of "
        f"{sizes.durable_partwise_adds} adds each, one caller",
        f"{PART}: KiB written per add = the growth of the server's write_bytes (/proc/<pid>/io: "
        "WAL frames and checkpoints, counted per page dirtied) over all rounds' adds, the mean "
        "(SQLite checkpoints every so many adds); the ratios to the empty store are judged for "
        f"{PARTWISE} only ({WHOLE_STATE} is the before)",
    ]
    if not part.bytes_counted:
        notes.append(
            f"{PART}: no bytes-written figures: the kernel counted no write while the stores "
            f"were filled in {tempfile.gettempdir()} (a tmpfs, or no /proc/<pid>/io); "
            "set TMPDIR to a folder on a disk"
        )
    return notes


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def _written_figures(
    server: _Server, empty: _Server, where: str, judged: Target | None
) -> list[Figure]:
    """KiB written per add, and that over the empty store's.

    The mean of all rounds, not their median: SQLite checkpoints every so many
    adds, not once a round, and each add owes its share (the spread shows it).
    """
    per_add = [written / 1024 for written in server.written]
    kib = Stats(
        _mean(per_add), min(per_add, default=math.nan), max(per_add, default=math.nan), len(per_add)
    )
    figures = [figure(NAME, f"{PART}: KiB written per add, {where}", kib, "KiB")]
    if server is not empty:
        baseline = _mean(empty.written)
        ratio = _mean(server.written) / baseline if baseline > 0 else math.nan
        name = f"{PART}: bytes written / empty store's, {where}"
        figures.append(figure(NAME, name, ratio, "x", judged))
    return figures


def _milliseconds(batches: Sequence[Batch], q: float) -> list[float]:
    """The `q`-quantile of each round's adds, in milliseconds."""
    return [batch.latency(q) * 1000 for batch in batches]


def _time_figures(
    batches: Sequence[Batch], empty: Sequence[Batch], where: str, judged: Target | None
) -> list[Figure]:
    """p50 and p90 per add, and the p50 over the empty store's, paired round by round."""
    p50, p90 = _milliseconds(batches, 0.5), _milliseconds(batches, 0.9)
    figures = [
        figure(NAME, f"{PART}: p50 per add, {where}", Stats.of(p50), "ms"),
        figure(NAME, f"{PART}: p90 per add, {where}", Stats.of(p90), "ms"),
    ]
    if batches is not empty:
        paired = [v / e for v, e in zip(p50, _milliseconds(empty, 0.5), strict=True)]
        name = f"{PART}: p50 / empty store's, {where}"
        figures.append(figure(NAME, name, Stats.of(paired), "x", judged))
    return figures


def partwise_figures(part: PartwiseWrites) -> list[Figure]:
    """KiB written and ms per add for each size and variant, and their ratios to the empty store."""
    servers = {server.name: server for server in part.servers}
    figures = []
    for variant in VARIANTS:
        # The target is for part-wise writes; whole-state is the "before" column.
        judged = RATIO_TARGET if variant == PARTWISE else None
        empty = servers[_server_name(variant, 0)]
        for size in STORE_BYTES:
            server = servers[_server_name(variant, size)]
            where = f"{variant}, {store_label(size)} store"
            if part.bytes_counted:
                figures += _written_figures(server, empty, where, judged)
            batches = part.results[server.name][ADDS]
            figures += _time_figures(batches, part.results[empty.name][ADDS], where, judged)
    failed = sum(server.failures for server in part.servers)
    figures.append(figure(NAME, f"{PART}: failed adds", failed, "", NONE_TARGET))
    return figures


async def run_partwise(
    sizes: Sizes, directory: Path, progress: Progress
) -> tuple[list[Figure], list[str]]:
    """The part's figures and notes; none, and a note saying why, when it cannot run."""
    missing = [name for name in ("mcp", "httptools") if importlib.util.find_spec(name) is None]
    if missing:
        return [], [f"{PART} skipped: actors serve needs {', '.join(missing)} ({SERVER_HINT})"]
    part = await partwise_writes(sizes, directory, progress)
    return partwise_figures(part), partwise_notes(part, sizes)
