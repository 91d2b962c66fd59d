"""The load: callers calling a `Target`'s sessions with a `Mix`, measured.

`run_load` opens the sessions, lists their tools (a mix naming a tool the
server does not list is refused before any call), runs a warm-up whose calls
are not counted, then the measured phase:

* **closed loop** (no rate): each caller calls again as soon as its answer
  comes; latency is from the call's start to its answer;
* **open loop** (``rate`` calls/s for all callers together): calls are due on
  a fixed schedule whatever the answers do, and a free caller takes the next
  due call. Latency is measured from the time the call was *due*, so a server
  that falls behind shows it in the latency rather than slowing the schedule
  down (coordinated omission). Calls that started more than `LATE_AFTER`
  after they were due count as late; with a duration, calls due before its
  end that no caller could start by then count as dropped.

The phase ends after a number of calls (each counted exactly once) or a
duration (calls started before its end are answered and counted). Latencies
go into an HDR histogram (`hdrhistogram`, microseconds, 3 significant
digits); errors are counted by kind (`error_kind`). CPU time is read around
the measured phase: the server's (`tree_cpu_seconds` of each local server
process) and this process's own (`client_cpu_seconds`).

Against a server of the handle pattern (`LoadPlan.handles`), each session first calls
the tool that mints its handle, and every later call of the session (setup calls
included) carries it.

A server that stops answering ends the run with `NoAnswer` rather than holding it:
listing the tools and each setup call wait at most the plan's timeout, and a phase in
which no call is answered (a result, or an error the server sent) for `SILENCE_TIMEOUTS`
times the timeout stops, every caller having waited out whole timeouts by then.
"""

from __future__ import annotations

import math
import random
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, final, runtime_checkable

import attrs
import trio

from ._cpu import MachineLoad, client_cpu_seconds, trees_cpu_seconds
from ._targets import NoAnswer, Target, TargetError, counted

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence

    from mcp import ClientSession

    from ._handles import Handles
    from ._mix import Mix, MixCall

ResultT = TypeVar("ResultT")

__all__ = [
    "LATE_AFTER",
    "Latency",
    "LoadPlan",
    "LoadResult",
    "error_kind",
    "run_load",
]

LATE_AFTER: Final = 0.010
"""Seconds after its due time past which an open-loop call counts as started late."""
TOOL_ERROR: Final = "tool error (isError)"
"""The error kind of a tool result with ``isError`` set."""
TIMEOUT: Final = "timeout"
"""The error kind of a call not answered within the plan's timeout."""
CLOSED: Final = "connection closed"
"""The error kind of a call whose session's connection closed: it stops the run."""
_LOWEST_US: Final = 1
_HIGHEST_US: Final = 3_600_000_000  # an hour: any answer slower is recorded as this
_DIGITS: Final = 3
_OPENING_AT_ONCE: Final = 8  # sessions being opened at a time (a stdio server each: a process)
SILENCE_TIMEOUTS: Final = 3
"""Timeouts without any answer after which a phase stops: the server stopped answering."""
_HINT: Final = (
    "check that the server is running and answers MCP on its transport (over stdio, "
    "nothing but JSON-RPC messages on its stdout)"
)


@runtime_checkable
class ServerProcesses(Protocol):
    """A target that knows all its local server processes (one per session over stdio)."""

    @property
    def server_pids(self) -> tuple[int, ...]:
        """The processes of the sessions open now."""
        ...


@final
@attrs.frozen(kw_only=True)
class LoadPlan:
    """What load to put on a server: the mix, callers, sessions, for how long, how fast."""

    mix: Mix
    """The calls to make, by weight."""
    sessions: int = 1
    """MCP sessions opened; caller *i* uses session *i* mod `sessions`."""
    callers: int = 1
    """Callers calling at once (at most this many calls in flight)."""
    duration: float | None = None
    """Seconds to measure for; or give `calls`."""
    calls: int | None = None
    """Calls to measure, each counted once; or give `duration`."""
    warmup: float = 0.0
    """Seconds of the same load before measuring, not counted."""
    rate: float | None = None
    """Calls per second on a fixed schedule (open loop); None: closed loop."""
    timeout: float = 30.0
    """Seconds a call may take before it counts as a `TIMEOUT` error."""
    seed: int | None = None
    """Seeds the mix's draws and ``{random}``; None: different every run."""
    check_tools: bool = True
    """Refuse a mix naming a tool the server's tools/list does not have."""
    handles: Handles | None = None
    """The handle pattern: each session mints a handle that all its calls carry; None: none."""

    def __attrs_post_init__(self) -> None:
        """Raise ValueError, naming the option, for a plan that cannot run."""
        if self.handles is not None:
            entries = [("setup", self.mix.setup), ("call", self.mix.calls)]
            self.handles.check_unset(
                (f"{self.mix.source}: {kind} {number} ({call.tool})", call.arguments)
                for kind, calls in entries
                for number, call in enumerate(calls, 1)
            )
        if (self.duration is None) == (self.calls is None):
            msg = "give either a duration or a number of calls"
            raise ValueError(msg)
        for name, count in (("sessions", self.sessions), ("callers", self.callers)):
            if count < 1:
                msg = f"{name} must be at least 1, got {count}"
                raise ValueError(msg)
        if self.sessions > self.callers:
            msg = (
                f"{self.sessions} sessions for {self.callers} callers: "
                f"{self.sessions - self.callers} sessions would make no call; "
                "give at least as many callers as sessions"
            )
            raise ValueError(msg)
        positive = {"duration": self.duration, "rate": self.rate, "timeout": self.timeout}
        for name, value in positive.items():
            if value is not None and not 0 < value < math.inf:
                msg = f"{name} must be a positive number, got {value}"
                raise ValueError(msg)
        if self.calls is not None and self.calls < 1:
            msg = f"calls must be at least 1, got {self.calls}"
            raise ValueError(msg)
        if not 0 <= self.warmup < math.inf:
            msg = f"warmup must be zero or a positive number of seconds, got {self.warmup}"
            raise ValueError(msg)

    @property
    def open_loop(self) -> bool:
        """Whether calls come on a schedule (`rate`) rather than as answers come."""
        return self.rate is not None


@final
@attrs.frozen
class Latency:
    """Latency percentiles of the answered calls, microseconds."""

    p50: int
    """The median."""
    p90: int
    """The 90th percentile."""
    p99: int
    """The 99th percentile."""
    p999: int
    """The 99.9th percentile."""
    max: int
    """The slowest answer."""
    mean: float
    """The mean."""
    histogram: str
    """The whole HDR histogram, in HdrHistogram's compressed base64 form (readable by
    every HdrHistogram library, e.g. ``HdrHistogram.decode``)."""


@final
@attrs.frozen(kw_only=True)
class LoadResult:
    """What a load run measured (`actors.harness.write_json` writes it as JSON)."""

    target: str
    """What was loaded: a command, a URL, modules."""
    plan: LoadPlan
    """The load that was put on the target."""
    calls: int
    """Calls made and answered (or timed out) in the measured phase, errors included."""
    errors: dict[str, int]
    """Failed calls by kind (`error_kind`), most frequent first."""
    seconds: float
    """The measured phase's wall time, its first call's start to its last answer."""
    latency: Latency
    """The answered calls' latency (an open loop's from their due times)."""
    late: int
    """Open loop: calls started more than `LATE_AFTER` after they were due."""
    dropped: int
    """Open loop with a duration: calls due before its end that no caller started."""
    max_start_lag_us: int
    """Open loop: the longest wait between a call's due time and its start."""
    server_cpu_seconds: float | None
    """CPU time of the local server processes over the phase; None when not local/known."""
    client_cpu_seconds: float
    """CPU time of this process (the load generator and the SDK client) over the phase."""
    load_before: MachineLoad
    """The machine's load as the measured phase began."""
    load_after: MachineLoad
    """The machine's load as it ended."""

    @property
    def calls_per_second(self) -> float:
        """Calls answered per second of the measured phase."""
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    @property
    def failed(self) -> int:
        """Calls that failed, of every kind."""
        return sum(self.errors.values())

    @property
    def server_us_per_call(self) -> float | None:
        """Server CPU microseconds per call; None when unknown."""
        if self.server_cpu_seconds is None or not self.calls:
            return None
        return self.server_cpu_seconds * 1e6 / self.calls

    @property
    def client_us_per_call(self) -> float | None:
        """This process's CPU microseconds per call: near a core's worth, the client is the
        bottleneck and the figures understate the server."""
        return self.client_cpu_seconds * 1e6 / self.calls if self.calls else None


def error_kind(exc: BaseException) -> str:
    """How a failed call is counted: ``JSON-RPC <code>`` for an error answer, `CLOSED` when
    the session's connection closed, else the exception's class (the first one inside a
    group)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return CLOSED if exc.code == CONNECTION_CLOSED else f"JSON-RPC {exc.code}"
    return type(exc).__name__


def _histogram() -> Any:  # hdrhistogram has no type hints
    from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

    return HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)


@attrs.define(eq=False)
class _Recorder:
    """What one phase records as it goes (one trio run: no locks)."""

    histogram: Any = attrs.field(factory=_histogram)
    errors: dict[str, int] = attrs.field(factory=dict)
    calls: int = 0
    late: int = 0
    dropped: int = 0
    max_start_lag: float = 0.0
    first_start: float | None = None
    last_answer: float = 0.0
    unheard: dict[str, int] = attrs.field(factory=dict)
    """Calls that failed without an answer since the server's last one, by kind (a
    timeout, a closed connection)."""

    def started(self, at: float) -> None:
        if self.first_start is None or at < self.first_start:
            self.first_start = at

    def answered(self, latency: float, kind: str | None, now: float) -> None:
        self.calls += 1
        microseconds = min(max(round(latency * 1e6), _LOWEST_US), _HIGHEST_US)
        self.histogram.record_value(microseconds)
        if kind is not None:
            self.errors[kind] = self.errors.get(kind, 0) + 1
        self.last_answer = max(self.last_answer, now)

    def lagged(self, lag: float) -> None:
        self.max_start_lag = max(self.max_start_lag, lag)
        self.late += lag > LATE_AFTER

    def latency(self) -> Latency:
        h = self.histogram

        def at(percentile: float) -> int:
            return int(h.get_value_at_percentile(percentile))

        return Latency(
            p50=at(50),
            p90=at(90),
            p99=at(99),
            p999=at(99.9),
            max=int(h.get_max_value()) if self.calls else 0,
            mean=float(h.get_mean_value()),
            histogram=h.encode().decode("ascii"),
        )


@attrs.define(eq=False)
class _Phase:
    """The callers of one phase and what they share."""

    sessions: Sequence[ClientSession]
    opened: Sequence[_Opened]
    """What each session's setup left for its calls."""
    plan: LoadPlan
    quota: int | None
    """Calls to make; None: as many as fit in the phase's time."""
    recorder: _Recorder = attrs.field(factory=_Recorder)
    next_call: int = 0
    silence: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """Ends `_watch`'s wait: its deadline moves on with every answer of the server."""

    def heard(self, kind: str | None, answered: bool, now: float) -> None:
        """Note whether the server answered a call that ended `now` (or failed as `kind`)."""
        if answered:
            self.silence.deadline = now + SILENCE_TIMEOUTS * self.plan.timeout
            self.recorder.unheard.clear()
        else:
            unheard = self.recorder.unheard
            unheard[str(kind)] = unheard.get(str(kind), 0) + 1

    def take(self) -> int | None:
        """The next call's number, or None once the quota is all taken."""
        if self.quota is not None and self.next_call >= self.quota:
            return None
        self.next_call += 1
        return self.next_call - 1

    async def call(self, caller: int, n: int, rng: random.Random, due: float) -> None:
        """Make call `n` for `caller` and record it, its latency from `due`."""
        session_number = caller % len(self.sessions)
        entry = self.plan.mix.pick(rng)
        values: dict[str, object] = {"session": session_number, "caller": caller, "n": n}
        values["random"] = rng.getrandbits(32)
        opened = self.opened[session_number]
        values.update(opened.named)
        self.recorder.started(due)
        session = self.sessions[session_number]
        kind, answered = await _call(session, entry, values, opened.carried, self.plan.timeout)
        now = trio.current_time()
        self.recorder.answered(now - due, kind, now)
        self.heard(kind, answered, now)
        if kind == CLOSED:  # every later call of the session would fail the same at once
            msg = (
                f"session {session_number}'s connection closed under call {n} (the server "
                f"exited or hung up), {counted(self.next_call, 'call')} started in the phase; "
                f"stopped; {_HINT}"
            )
            raise NoAnswer(msg)


async def _call(
    session: ClientSession,
    entry: MixCall,
    values: Mapping[str, object],
    carried: Mapping[str, str],
    seconds: float,
) -> tuple[str | None, bool]:
    """One tool call, `carried` added to its arguments: None if it succeeded, else its error
    kind (`TIMEOUT` after `seconds`); and whether the server answered it (an error it sent
    counts, a closed connection not)."""
    from mcp import MCPError

    arguments, meta = entry.render(values)
    with trio.move_on_after(seconds):
        try:
            result = await session.call_tool(entry.tool, {**arguments, **carried}, meta=meta)  # type: ignore[arg-type]
        except Exception as exc:  # a failure is a figure of the run (`CLOSED` ends it)
            kind = error_kind(exc)
            return kind, isinstance(exc, MCPError) and kind != CLOSED
        return (TOOL_ERROR if result.is_error else None), True
    return TIMEOUT, False


def _rng(plan: LoadPlan, caller: int) -> random.Random:
    return random.Random(None if plan.seed is None else plan.seed * 1_000_003 + caller)


async def _closed_caller(phase: _Phase, caller: int, until: float) -> None:
    rng = _rng(phase.plan, caller)
    while trio.current_time() < until:
        n = phase.take()
        if n is None:
            return
        await phase.call(caller, n, rng, trio.current_time())


async def _open_caller(
    phase: _Phase, caller: int, due: trio.MemoryReceiveChannel[tuple[int, float]], until: float
) -> None:
    rng = _rng(phase.plan, caller)
    async with due:
        async for n, due_at in due:
            now = trio.current_time()
            if now >= until:
                phase.recorder.dropped += 1
                continue
            phase.recorder.lagged(now - due_at)
            await phase.call(caller, n, rng, due_at)


async def _schedule(
    phase: _Phase, send: trio.MemorySendChannel[tuple[int, float]], start: float, until: float
) -> None:
    """Hand out the due calls at the plan's rate, never waiting for a caller to be free."""
    assert phase.plan.rate is not None, "an open loop has a rate"
    async with send:
        while True:
            due = start + phase.next_call / phase.plan.rate
            if due >= until:
                return
            n = phase.take()
            if n is None:
                return
            await trio.sleep_until(due)
            send.send_nowait((n, due))  # an unbounded channel: a backlog, not a slower schedule


async def _run_phase(
    sessions: Sequence[ClientSession],
    opened: Sequence[_Opened],
    plan: LoadPlan,
    seconds: float | None,
) -> _Recorder:
    """One phase: `seconds` long, or the plan's calls when None."""
    phase = _Phase(sessions, opened, plan, plan.calls if seconds is None else None)
    start = trio.current_time()
    phase.silence.deadline = start + SILENCE_TIMEOUTS * plan.timeout
    until = math.inf if seconds is None else start + seconds
    async with trio.open_nursery() as watched:
        watched.start_soon(_watch, phase)
        async with trio.open_nursery() as nursery:
            if plan.open_loop:
                send, receive = trio.open_memory_channel[tuple[int, float]](math.inf)
                async with receive:
                    for caller in range(plan.callers):
                        nursery.start_soon(_open_caller, phase, caller, receive.clone(), until)
                nursery.start_soon(_schedule, phase, send, start, until)
            else:
                for caller in range(plan.callers):
                    nursery.start_soon(_closed_caller, phase, caller, until)
        watched.cancel_scope.cancel()
    return phase.recorder


async def _watch(phase: _Phase) -> None:
    """Raise `NoAnswer` once no call has been answered for `SILENCE_TIMEOUTS` timeouts."""
    with phase.silence:
        await trio.sleep_forever()
    silence = SILENCE_TIMEOUTS * phase.plan.timeout
    recorder = phase.recorder
    unheard = ", ".join(f"{kind} x{count}" for kind, count in recorder.unheard.items())
    failed = counted(sum(recorder.unheard.values()), "call")
    msg = (
        f"the server answered no call for {silence:g} s ({SILENCE_TIMEOUTS} times the call "
        f"timeout): {failed} failed unanswered since its last answer ({unheard or 'none'}), "
        f"{counted(phase.next_call, 'call')} started in the phase; stopped; {_HINT}"
    )
    raise NoAnswer(msg)


async def _hold_session(
    target: Target,
    limiter: trio.CapacityLimiter,
    opened: list[ClientSession],
    all_open: trio.Event,
    done: trio.Event,
    count: int,
) -> None:
    async with AsyncExitStack() as stack:
        async with limiter:  # opening only: a stdio server's start is CPU-heavy
            opened.append(await stack.enter_async_context(target.session()))
        if len(opened) == count:
            all_open.set()
        await done.wait()


@asynccontextmanager
async def open_sessions(target: Target, count: int) -> AsyncIterator[list[ClientSession]]:
    """`count` sessions of `target`, opened a few at a time, all closed with the block."""
    opened: list[ClientSession] = []
    all_open, done = trio.Event(), trio.Event()
    limiter = trio.CapacityLimiter(_OPENING_AT_ONCE)
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(_hold_session, target, limiter, opened, all_open, done, count)
        await all_open.wait()
        try:
            yield opened
        finally:
            done.set()


async def _listed_tools(session: ClientSession, seconds: float) -> set[str]:
    """Every tool the session lists, all pages (which also primes the SDK's schema cache),
    each page answered within `seconds` (else `NoAnswer`)."""
    from mcp import types

    names: set[str] = set()
    cursor: str | None = None
    while True:
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        with trio.move_on_after(seconds) as waiting:
            page = await session.list_tools(params=params)
        if waiting.cancelled_caught:
            msg = f"the server did not answer tools/list within {seconds:g} s; {_HINT}"
            raise NoAnswer(msg)
        names |= {tool.name for tool in page.tools}
        cursor = page.next_cursor
        if cursor is None:
            return names


@final
@attrs.frozen
class _Opened:
    """What a session's setup left for its calls: placeholders, and the handle's argument."""

    named: dict[str, str]
    """The placeholders its named setup calls fill."""
    carried: dict[str, str]
    """The arguments every later call adds to its own: the handle's, if any."""


async def _setup_call(
    session: ClientSession,
    where: str,
    tool: str,
    arguments: Mapping[str, object],
    meta: Mapping[str, object] | None,
    seconds: float,
) -> Any:
    """One call of a session's setup, its successful result; `TargetError` (`NoAnswer` if it
    went unanswered for `seconds`) naming it, `where`, otherwise."""
    try:
        with trio.move_on_after(seconds) as waiting:
            result = await session.call_tool(tool, dict(arguments), meta=meta)  # type: ignore[arg-type]
    except Exception as exc:  # any failure of a setup call stops the run
        msg = f"{where} failed: {error_kind(exc)}: {exc}"
        raise TargetError(msg) from exc
    if waiting.cancelled_caught:
        msg = f"{where}: no answer within {seconds:g} s; {_HINT}"
        raise NoAnswer(msg)
    if result.is_error:
        msg = f"{where} answered an error: {_text(result)[:300]}"
        raise TargetError(msg)
    return result


def _text(result: Any) -> str:
    return "".join(getattr(item, "text", "") for item in result.content).strip()


async def _set_up(session: ClientSession, number: int, plan: LoadPlan) -> _Opened:
    """Mint session `number`'s handle (`LoadPlan.handles`), then make the mix's setup calls
    on it; the placeholders they name, and the handle's argument."""
    from ._handles import HandleError

    carried: dict[str, str] = {}
    handles = plan.handles
    if handles is not None:
        where = f"session {number}: minting its handle ({handles.tool})"
        result = await _setup_call(session, where, handles.tool, {}, None, plan.timeout)
        try:
            carried = handles.carried(handles.handle_of(result))
        except HandleError as exc:
            msg = f"{where}: {exc}"
            raise TargetError(msg) from None
    rng = _rng(plan, -1 - number)
    named: dict[str, str] = {}
    for index, entry in enumerate(plan.mix.setup, 1):
        values = {"session": number, "caller": 0, "n": 0, "random": rng.getrandbits(32), **named}
        arguments, meta = entry.render(values)
        where = f"session {number}: setup {index} ({entry.tool})"
        result = await _setup_call(
            session, where, entry.tool, {**arguments, **carried}, meta, plan.timeout
        )
        if entry.name is not None:
            named[entry.name] = _text(result)
    return _Opened(named, carried)


def _check_handles_listed(handles: Handles | None, listed: set[str]) -> None:
    """`MixError` when the server does not list the tool that mints handles."""
    from ._mix import MixError

    if handles is not None and handles.tool not in listed:
        shown = ", ".join(sorted(listed)[:20]) or "none"
        msg = (
            f"the tool that mints handles, {handles.tool!r}, is not in the server's tools/list "
            f"(it lists {shown}): serve it with handles on (actors serve --handles), or name "
            "its tool (--handle-tool)"
        )
        raise MixError(msg)


def _server_pids(target: Target) -> tuple[int, ...]:
    if isinstance(target, ServerProcesses):
        return target.server_pids
    return () if target.server_pid is None else (target.server_pid,)


async def run_load(
    target: Target,
    plan: LoadPlan,
    *,
    describe: str,
    progress: Callable[[str], None] = lambda _line: None,
) -> LoadResult:
    """Put `plan`'s load on `target` and measure it; `describe` names the target in the result.

    Raises `actors.harness.MixError` when the mix names a tool the server does not list
    (unless the plan says not to check), `actors.harness.TargetError` when the server
    cannot be started or reached, and `actors.harness.NoAnswer` (one) when it stops
    answering: a session not opened in time, tools/list or a setup call unanswered
    within the plan's timeout, or no call of a phase answered for `SILENCE_TIMEOUTS`
    timeouts.
    """
    try:
        return await unwrapped(_run_load(target, plan, describe, progress))
    except NoAnswer as exc:
        raise exc.noting_garbage(target) from None


async def unwrapped(work: Awaitable[ResultT], also: tuple[type[Exception], ...] = ()) -> ResultT:
    """What `work` returns; a problem of ours (`first_of_ours`) raised as itself, not in the
    group a nursery wraps it in."""
    try:
        return await work
    except BaseExceptionGroup as group:
        ours = first_of_ours(group, also)
        if ours is None:
            raise
        raise ours from None


def first_of_ours(
    group: BaseExceptionGroup[BaseException], also: tuple[type[Exception], ...] = ()
) -> Exception | None:
    """The first `MixError`, `TargetError` or one of `also` in `group` if it holds nothing
    else, else None.

    Nurseries wrap what they raise in groups: a problem of ours (a bad mix, a server that
    did not start) is raised as itself, the first of its kind.
    """
    from ._mix import MixError
    from ._targets import TargetError

    ours: tuple[type[Exception], ...] = (MixError, TargetError, *also)
    leaves = list(_leaves(group))
    if leaves and all(isinstance(leaf, ours) for leaf in leaves):
        return leaves[0]  # type: ignore[return-value]  # one of ours
    return None


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


async def _run_load(
    target: Target, plan: LoadPlan, describe: str, progress: Callable[[str], None]
) -> LoadResult:
    progress(f"opening {plan.sessions} session(s) on {describe}")
    async with open_sessions(target, plan.sessions) as sessions:
        for session in sessions:
            listed = await _listed_tools(session, plan.timeout)
        if plan.check_tools:
            plan.mix.check_tools(listed)
            _check_handles_listed(plan.handles, listed)
        if plan.mix.setup or plan.handles is not None:
            progress(f"setting up {plan.sessions} session(s)")
        opened = [await _set_up(session, number, plan) for number, session in enumerate(sessions)]
        if plan.warmup:
            progress(f"warming up for {plan.warmup:g} s (not counted)")
            await _run_phase(sessions, opened, plan, plan.warmup)
        progress(
            f"measuring for {plan.duration:g} s" if plan.duration else f"making {plan.calls} calls"
        )
        pids = _server_pids(target)
        load_before = MachineLoad.now()
        server_before, client_before = trees_cpu_seconds(pids), client_cpu_seconds()
        recorder = await _run_phase(sessions, opened, plan, plan.duration)  # or its calls
        server_after, client_after = trees_cpu_seconds(pids), client_cpu_seconds()
        load_after = MachineLoad.now()
    server_cpu = None
    if pids and server_before is not None and server_after is not None:
        server_cpu = server_after - server_before
    first = recorder.first_start if recorder.first_start is not None else recorder.last_answer
    return LoadResult(
        target=describe,
        plan=plan,
        calls=recorder.calls,
        errors=dict(sorted(recorder.errors.items(), key=lambda item: (-item[1], item[0]))),
        seconds=max(recorder.last_answer - first, 0.0),
        latency=recorder.latency(),
        late=recorder.late,
        dropped=recorder.dropped,
        max_start_lag_us=round(recorder.max_start_lag * 1e6),
        server_cpu_seconds=server_cpu,
        client_cpu_seconds=client_after - client_before,
        load_before=load_before,
        load_after=load_after,
    )
