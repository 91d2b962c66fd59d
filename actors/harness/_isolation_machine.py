"""The isolation check's Hypothesis state machine, and the trio side that holds the sessions.

Rules of a `RuleBasedStateMachine` are synchronous, and the sessions belong to the
caller's trio run (a factory may be bound to it: a server in its nursery). So `run`
runs Hypothesis in a worker thread, and each rule hands its calls back to the trio run
with `trio.from_thread.run`, where each session is held open by a task of its own (an
SDK session is entered and left in one task) until the machine closes it.

Only watermarks of the running sequence are judged: a leaky server keeps earlier
sequences' watermarks, and counting those would shrink every leak to "open a session,
read" on a server that already holds them; a sequence must show its leak on its own.

Shrinking is for leaks and lost writes only. A call that fails stops the search at once
(`_Stop`, no `Exception`, which Hypothesis re-raises without replaying anything): each
replay of a server that does not answer would wait out its timeout again, and an error
shrunk to a shorter sequence says nothing more about isolation. Every wait on the server
is bounded by its timeout and by what is left of the check's total time.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio
import trio.lowlevel
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import (
    RuleBasedStateMachine,
    rule,
    run_state_machine_as_test,
)

from ._handles import HandleError, Handles
from ._isolation import (
    MARK,
    SESSION,
    SETUP,
    Budget,
    IsolationCheckError,
    IsolationReport,
    Leak,
    LostWrite,
    NoVerdict,
    Timeouts,
    ToolCall,
)
from ._targets import NoAnswer, counted

if TYPE_CHECKING:
    from mcp import ClientSession

    from ._isolation import SessionFactory

__all__ = ["Plan", "run"]

WRITE: Final = "write"
READ: Final = "read"
UNANSWERED: Final = "unanswered"
"""A call or an opening without an answer in time: no verdict."""
BROKEN: Final = "broken"
"""A call whose connection closed, or whose answer was not MCP: no verdict."""
REFUSED: Final = "refused"
"""A call answered with an error (a result or JSON-RPC): the check was described wrongly."""
OUT_OF_TIME: Final = "out of time"
"""A call or an opening cut short by the check's total time: the search ends there."""
_SHOWN: Final = 300  # characters of an error quoted on a call's line
_HINT: Final = (
    "check that the server is running and answers MCP on its transport (over stdio, "
    "nothing but JSON-RPC messages on its stdout), or give a slow one longer"
)


@final
@attrs.frozen
class Plan:
    """What the user described: the calls, the budget, and whether reads show all writes."""

    write: ToolCall
    read: ToolCall
    setup: ToolCall | None
    budget: Budget
    all_writes_visible: bool
    timeouts: Timeouts
    handles: Handles | None = None


class _Failure(AssertionError):
    """A read showed a leak or lacked a write: what Hypothesis shrinks."""

    def __init__(self, leaks: list[Leak], lost: list[LostWrite], sequence: list[str]) -> None:
        super().__init__(f"{len(leaks)} leaks, {len(lost)} lost writes")
        self.leaks = tuple(leaks)
        self.lost = tuple(lost)
        self.sequence = tuple(sequence)

    def rank(self) -> tuple[bool, int]:
        """Smaller is better to report: a leak before a lost write, then a shorter sequence."""
        return (not self.leaks, len(self.sequence))


class _Enough(BaseException):
    """The shrinking budget or the total time is spent: stops Hypothesis, which re-raises
    what is no Exception."""


class _Stop(BaseException):
    """A call failed: stops Hypothesis at once, unshrunk, with the error to raise."""

    def __init__(self, error: IsolationCheckError) -> None:
        super().__init__(str(error))
        self.error = error


class _CallFailed(Exception):
    """A call or an opening failed, on the trio side: how (`UNANSWERED`, …) and why."""

    def __init__(self, kind: str, why: str) -> None:
        super().__init__(why)
        self.kind = kind
        self.why = why


@attrs.define
class _Tally:
    """Counts over every sequence of one check, and the best failure seen."""

    shrinks: int
    deadline: float
    """When the check's total time runs out, `time.monotonic()`'s."""
    started: int = 0
    """Sequences begun, the empty ones Hypothesis also tries included: what `shrinks` counts."""
    examples: int = 0
    """Sequences that made a call (opened a session): what the report counts."""
    sessions: int = 0
    calls: int = 0
    best: _Failure | None = None
    first_failure: int | None = None
    """The number of the sequence that failed first."""
    out_of_time: bool = False

    def found(self, failure: _Failure) -> None:
        """Keep `failure` if it is the best so far."""
        if self.first_failure is None:
            self.first_failure = self.started
        if self.best is None or failure.rank() < self.best.rank():
            self.best = failure

    def start(self) -> None:
        """Count a new sequence; `_Enough` once `shrinks` have run since the first failure,
        or the total time has run out."""
        if self.first_failure is not None and self.started - self.first_failure >= self.shrinks:
            raise _Enough
        if time.monotonic() >= self.deadline:
            self.out_of_time = True
            raise _Enough
        self.started += 1


@attrs.define(eq=False)
class _Session:
    """One open (or closed) session of a sequence, and the watermarks it had acknowledged."""

    index: int
    values: dict[str, str]
    client: ClientSession
    leave: trio.Event
    left: trio.Event
    acknowledged: list[tuple[str, int, str]] = attrs.field(factory=list)
    """(watermark, the tick of its acknowledgement, the write's line)."""
    open: bool = True
    handle: str | None = None
    """The handle its opening minted (`Plan.handles`), which every later call carries."""
    carried: dict[str, str] = attrs.field(factory=dict)
    """Arguments every call after the opening adds to its own: the handle's."""

    def shown_carried(self) -> dict[str, str]:
        """`carried` as a report shows it: the handle's start alone (`Handles.shown`)."""
        return {name: Handles.shown(value) for name, value in self.carried.items()}


@attrs.define(eq=False)
class _Done:
    """A call made: its line, what it answered, and the tick it was sent at."""

    session: _Session
    kind: str
    line: str
    sent: int
    text: str = ""
    failure: _CallFailed | None = None


@final
class _Host:
    """The trio side: opens sessions in tasks of its nursery and makes calls on them."""

    def __init__(
        self, nursery: trio.Nursery, factory: SessionFactory, timeouts: Timeouts, deadline: float
    ) -> None:
        self.nursery = nursery
        self.factory = factory
        self.timeouts = timeouts
        self.deadline = deadline
        self.token = trio.lowlevel.current_trio_token()

    def waiting(self, seconds: float) -> tuple[trio.CancelScope, _CallFailed]:
        """A scope ending a wait after `seconds` or once the total time is out, and the
        failure its end is."""
        left = self.deadline - time.monotonic()
        if seconds < left:
            return trio.move_on_after(seconds), _CallFailed(
                UNANSWERED, f"no answer within {seconds:g} s"
            )
        return trio.move_on_after(max(left, 0.0)), _CallFailed(OUT_OF_TIME, "cut short")

    async def _hold(
        self, *, task_status: trio.TaskStatus[tuple[Any, trio.Event, trio.Event]]
    ) -> None:
        leave, left = trio.Event(), trio.Event()
        try:
            with trio.CancelScope() as closing:
                async with self.factory() as client:
                    task_status.started((client, leave, left))
                    await leave.wait()
                    # Closing may wait on the server too (an HTTP session's DELETE).
                    closing.deadline = trio.current_time() + self.timeouts.call
        finally:
            left.set()

    async def open(self) -> tuple[ClientSession, trio.Event, trio.Event]:
        """A new session from the factory, held open until its `leave` event is set."""
        scope, unanswered = self.waiting(self.timeouts.open)
        with scope:
            try:
                opened: tuple[ClientSession, trio.Event, trio.Event] = await self.nursery.start(
                    self._hold
                )
            except NoAnswer as exc:  # the target's own bound on its opening
                raise _CallFailed(UNANSWERED, str(exc)) from None
            return opened
        raise unanswered

    async def answer(
        self,
        client: ClientSession,
        call: ToolCall,
        values: dict[str, str],
        carried: dict[str, str] | None = None,
    ) -> Any:
        """The result of one call of `call` (`carried` added to its arguments); `_CallFailed`
        saying how it failed."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        scope, unanswered = self.waiting(self.timeouts.call)
        with scope:
            try:
                result = await client.call_tool(call.name, {**call.fill(values), **(carried or {})})
            except MCPError as exc:
                if exc.error.code == CONNECTION_CLOSED:
                    raise _CallFailed(BROKEN, "the connection closed") from None
                reason = f"a JSON-RPC error {exc.error.code}: {exc.error.message}"
                raise _CallFailed(REFUSED, reason) from None
            except Exception as exc:  # the SDK could not make the answer into a tool result
                shown = " ".join(str(exc).split())[:_SHOWN]
                reason = f"an answer that is not MCP ({type(exc).__name__}: {shown})"
                raise _CallFailed(BROKEN, reason) from None
            if getattr(result, "is_error", False):
                raise _CallFailed(REFUSED, f"an error result: {_text(result)}")
            return result
        raise unanswered

    @staticmethod
    async def close(sessions: list[_Session]) -> None:
        """Leave `sessions` and wait until each has closed."""
        for session in sessions:
            session.leave.set()
        for session in sessions:
            await session.left.wait()

    def run(self, afn: Any, *args: Any) -> Any:
        """Run `afn(*args)` in the trio run, from the worker thread."""
        return trio.from_thread.run(afn, *args, trio_token=self.token)


def _text(result: Any) -> str:
    return "\n".join(getattr(item, "text", "") for item in getattr(result, "content", ()))


class IsolationMachine(RuleBasedStateMachine):
    """Sessions writing watermarks and reading them back, alone or in concurrent batches."""

    # Set on the subclass each check makes (`_search`): Hypothesis makes machines from a class.
    host: _Host
    plan: Plan
    tally: _Tally

    def __init__(self) -> None:
        super().__init__()
        self.nonce = secrets.token_hex(4)
        self.sessions: list[_Session] = []  # every session opened, by index
        self.slots: list[_Session | None] = [None] * self.plan.budget.sessions
        self.marks: dict[str, tuple[int, str]] = {}  # watermark -> (writer, the write's line)
        self.lines: list[str] = []
        self.failure: _Failure | None = None  # the first read that failed
        self.ticks = 0
        self.tally.start()

    def teardown(self) -> None:
        self.host.run(_Host.close, [s for s in self.sessions if s.open])
        # Raised only now: a sequence that stopped at its failing read would draw less when
        # that read, racing, did not fail, and Hypothesis takes a test that draws differently
        # for the same choices as a broken one. Calls that fail stop at once (`_stop`).
        if self.failure is not None:
            self.tally.found(self.failure)
            raise self.failure

    # ---- the trio side of one call ----

    def _tick(self) -> int:
        self.ticks += 1
        return self.ticks

    def _call_of(self, kind: str) -> ToolCall:
        return self.plan.write if kind == WRITE else self.plan.read

    async def _call(self, session: _Session, kind: str, sent: int | None = None) -> _Done:
        """Make one call; a read is judged against the writes acknowledged before `sent`."""
        values = dict(session.values)
        if kind == WRITE:
            values[MARK] = mark = f"wm-s{session.index}-{secrets.token_hex(6)}"
        call = self._call_of(kind)
        line = f"session {session.index}: {call.show(values, session.shown_carried())}"
        done = _Done(session, kind, line, self._tick() if sent is None else sent)
        if kind == WRITE:  # known before it is sent, so that a concurrent read can name it
            self.marks[mark] = (session.index, done.line)
        self.tally.calls += 1
        try:
            result = await self.host.answer(session.client, call, values, session.carried)
        except _CallFailed as failed:  # any failure of the call stops the check, named
            done.failure = failed
            return done
        done.text = _text(result)
        if kind == WRITE:
            session.acknowledged.append((mark, self._tick(), done.line))
        return done

    async def _batch(self, calls: list[tuple[_Session, str]]) -> list[_Done]:
        done: list[_Done | None] = [None] * len(calls)
        start = self._tick()

        async def one(index: int) -> None:
            # A read in a batch needs to show only the writes acknowledged before the batch:
            # whether a concurrent write comes back before the read is sent is up to timing.
            done[index] = await self._call(*calls[index], sent=start)

        async with trio.open_nursery() as nursery:
            for index in range(len(calls)):
                nursery.start_soon(one, index)
                # Trio runs new tasks in any order; a checkpoint between them lets each send
                # its request before the next starts, so that a replay sends them in the same
                # order (all of them still in flight together).
                await trio.lowlevel.checkpoint()
        return [item for item in done if item is not None]

    # ---- judging, in the worker thread ----

    def _stop(self, failed: list[tuple[str, _CallFailed]]) -> _Stop | _Enough:
        """What stops the check at once: `failed` (each call's line and how it failed), the
        sequence so far, and `NoVerdict` when any went unanswered or broke; or `_Enough`
        when the total time cut one short."""
        if any(failure.kind == OUT_OF_TIME for _, failure in failed):
            self.tally.out_of_time = True
            return _Enough()
        lines = [f"{line} failed: {failure.why}" for line, failure in failed]
        if self.lines:
            lines += ["the sequence that led to it:", *(f"  {line}" for line in self.lines)]
        kinds = [failure.kind for _, failure in failed]
        if set(kinds) == {REFUSED}:
            return _Stop(IsolationCheckError("\n".join(lines)))
        return _Stop(self._no_verdict(kinds.count(UNANSWERED), kinds.count(BROKEN), lines))

    def _no_verdict(self, unanswered: int, broken: int, lines: list[str]) -> NoVerdict:
        """The no-verdict for `unanswered` and `broken` requests: the counts, `lines`, a hint."""
        parts = [f"did not answer {counted(unanswered, 'request')}"] if unanswered else []
        if broken:
            parts.append(f"broke off or answered what is not MCP on {counted(broken, 'call')}")
        tally = self.tally
        counts = ", ".join(
            (counted(tally.examples, "sequence"), f"{counted(tally.sessions, 'session')} opened",
             f"{counted(tally.calls, 'call')} made")
        )  # fmt: skip
        headline = f"the server {' and '.join(parts)} (after {counts}; nothing shrunk):"
        return NoVerdict(
            "\n".join([headline, *lines, _HINT]),
            unanswered=unanswered,
            broken=broken,
            examples=tally.examples,
            calls=tally.calls,
        )

    def _judge(self, done: _Done) -> tuple[list[Leak], list[LostWrite], str]:
        """A read's leaks and lost writes, and its line with what it showed."""
        reader = done.session
        leaks = [
            Leak(reader.index, writer, mark, done.line, line)
            for mark, (writer, line) in self.marks.items()
            if writer != reader.index and mark in done.text
        ]
        lost = []
        if self.plan.all_writes_visible:
            lost = [
                LostWrite(reader.index, mark, done.line, line)
                for mark, acknowledged, line in reader.acknowledged
                if acknowledged < done.sent and mark not in done.text
            ]
        shown = [f"session {leak.writer}'s {leak.mark}" for leak in leaks]
        shown += [f"lacks its own {lost_write.mark}" for lost_write in lost]
        if not shown:
            return leaks, lost, f"{done.line} -> ok"
        verdict = "LEAK: shows" if leaks else "LOST WRITE:"
        return leaks, lost, f"{done.line} -> {verdict} {'; '.join(shown)}"

    def _record(self, calls: list[tuple[_Session, str]]) -> None:
        """Make `calls` (concurrently if several), add their lines, and judge the reads."""
        if len(calls) == 1:
            done = [self.host.run(self._call, *calls[0])]
            indent = ""
        else:
            done = self.host.run(self._batch, calls)
            self.lines.append(f"batch of {len(calls)} concurrent calls:")
            indent = "  "
        leaks: list[Leak] = []
        lost: list[LostWrite] = []
        failed = [(item.line, item.failure) for item in done if item.failure is not None]
        for item in done:
            line = f"{item.line} -> ok"
            if item.failure is not None:
                line = f"{item.line} -> {item.failure.kind}"
            elif item.kind == READ:
                found, missing, line = self._judge(item)
                leaks += found
                lost += missing
            self.lines.append(indent + line)
        if failed:
            raise self._stop(failed)
        if (leaks or lost) and self.failure is None:
            self.failure = _Failure(leaks, lost, self.lines)

    async def _open(self, index: int) -> _Session:
        client, leave, left = await self.host.open()
        session = _Session(index, {SESSION: f"iso-{self.nonce}-s{index}"}, client, leave, left)
        try:
            await self._mint(session)
            await self._set_up(session)
        except BaseException:
            await _Host.close([session])  # never added to the sequence's sessions
            raise
        return session

    async def _mint(self, session: _Session) -> None:
        """Call the handles' tool, if any, keeping the handle for every later call."""
        handles = self.plan.handles
        if handles is None:
            return
        self.tally.calls += 1
        result = await self.host.answer(session.client, ToolCall(handles.tool), {})
        try:
            session.handle = handles.handle_of(result)
        except HandleError as exc:
            raise _CallFailed(REFUSED, str(exc)) from None
        session.carried = handles.carried(session.handle)

    async def _set_up(self, session: _Session) -> None:
        """Run the setup call, if any (with the handle), keeping its text for `SETUP`."""
        setup = self.plan.setup
        if setup is None:
            return
        self.tally.calls += 1
        result = await self.host.answer(session.client, setup, session.values, session.carried)
        session.values[SETUP] = _text(result).strip()

    def _opening(self, session: _Session) -> str:
        """The line of a session's opening: its handle and its setup call's answer, if any."""
        parts = []
        if self.plan.handles is not None and session.handle is not None:
            shared = [
                f"session {other.index}'s too"
                for other in self.sessions
                if other.handle == session.handle and other is not session
            ]
            also = f" ({', '.join(shared)})" if shared else ""
            parts.append(f"{self.plan.handles.tool} -> {Handles.shown(session.handle)}{also}")
        setup = self.plan.setup
        if setup is not None:
            shown = setup.show(session.values, session.shown_carried())
            parts.append(f"{shown} -> {session.values[SETUP]!r}")
        line = f"open session {session.index}"
        for number, part in enumerate(parts):
            line += f"{': ' if number == 0 else ', then '}{part}"
        return line

    # ---- the rules ----
    #
    # Sessions live in `budget.sessions` slots. A call names a slot, and a slot without an
    # open session gets a new one first: a sequence opens only the sessions it uses, so
    # that shrinking drops the others with the calls that used them. Hypothesis orders rules
    # by their number of arguments, then by name, and shrinks a step towards the first: the
    # names put a lone write or read before a batch.

    def _session_in(self, slot: int) -> _Session:
        """The open session in `slot`, opened now if there is none."""
        existing = self.slots[slot]
        if existing is not None:
            return existing
        index = len(self.sessions)
        if index == 0:  # the sequence's first call
            self.tally.examples += 1
        line = f"open session {index}"
        try:
            session: _Session = self.host.run(self._open, index)
        except _CallFailed as failed:  # unanswered, or its setup call failed
            raise self._stop([(line, failed)]) from None
        except Exception as exc:  # a session that will not open stops the check, named
            refused = _CallFailed(REFUSED, f"{type(exc).__name__}: {exc}")
            raise self._stop([(line, refused)]) from None
        self.tally.sessions += 1
        self.sessions.append(session)
        self.slots[slot] = session
        self.lines.append(self._opening(session))
        return session

    def _slot(self, data: st.DataObject) -> int:
        return data.draw(st.integers(0, self.plan.budget.sessions - 1), label="slot")

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        self._record([(self._session_in(self._slot(data)), WRITE)])

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        self._record([(self._session_in(self._slot(data)), READ)])

    @rule(data=st.data())
    def writes_and_reads_concurrently(self, data: st.DataObject) -> None:
        # One list of (slot, kind) pairs, which Hypothesis shrinks by dropping pairs.
        slots = st.integers(0, self.plan.budget.sessions - 1)
        pairs = st.lists(
            st.tuples(slots, st.sampled_from((WRITE, READ))),
            min_size=2,
            max_size=self.plan.budget.batch,
        )
        drawn = data.draw(pairs, label="calls")
        self._record([(self._session_in(slot), kind) for slot, kind in drawn])

    @rule(data=st.data())
    def close_session(self, data: st.DataObject) -> None:
        # No precondition (a rule Hypothesis must skip is hard for it to shrink away): an
        # empty slot has nothing to close.
        slot = self._slot(data)
        session = self.slots[slot]
        if session is None:
            return
        self.host.run(_Host.close, [session])
        session.open = False
        self.slots[slot] = None
        self.lines.append(f"close session {session.index}")


def _settings(budget: Budget) -> settings:
    """The budget; no deadline, no database, no health checks, no printing: a library's run."""
    return settings(
        max_examples=budget.examples,
        stateful_step_count=budget.steps,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )


def _search(host: _Host, plan: Plan, tally: _Tally) -> None:
    """Run the machine until it passes its budget, or a failure is shrunk (`tally.best`)."""
    bound = type(
        "IsolationMachine", (IsolationMachine,), {"host": host, "plan": plan, "tally": tally}
    )
    try:
        run_state_machine_as_test(bound, settings=_settings(plan.budget))
    except _Stop as stop:
        if tally.best is None:  # a failure found before the stop is a verdict all the same
            raise stop.error from None
    except (_Failure, _Enough, Flaky):
        # Flaky: a race that failed once and not on a replay (it failed all the same), or
        # the runs that _Enough cut short, which Hypothesis sees drawing less than before.
        if tally.best is None and not tally.out_of_time:
            raise
    if tally.best is None and tally.out_of_time:
        ran = f"{counted(tally.examples, 'sequence')} of {plan.budget.examples}"
        msg = (
            f"the check's {plan.timeouts.total:g} s ran out after {ran}, "
            f"{counted(tally.calls, 'call')}, none failing: give it longer, or a smaller budget"
        )
        raise NoVerdict(msg, unanswered=0, broken=0, examples=tally.examples, calls=tally.calls)


async def run(factory: SessionFactory, plan: Plan) -> IsolationReport:
    """Run the check in a worker thread, its sessions held by tasks of this trio run."""
    deadline = time.monotonic() + plan.timeouts.total
    tally = _Tally(plan.budget.shrinks, deadline)
    stopped: Exception | None = None
    async with trio.open_nursery() as nursery:
        host = _Host(nursery, factory, plan.timeouts, deadline)
        try:
            await trio.to_thread.run_sync(_search, host, plan, tally)
        except Exception as exc:  # raised as it is, not in the nursery's exception group
            stopped = exc
    if stopped is not None:
        raise stopped
    best = tally.best
    return IsolationReport(
        passed=best is None,
        leaks=() if best is None else best.leaks,
        lost_writes=() if best is None else best.lost,
        sequence=() if best is None else best.sequence,
        examples=tally.examples,
        sessions=tally.sessions,
        calls=tally.calls,
    )
