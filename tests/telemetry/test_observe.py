"""The observer seam: what the runtime reports about actors, calls and stored state.

A recording observer is given to real runtimes; each test makes a known
sequence of calls and checks the exact events, in order.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from actors import (
    ArgumentsError,
    Durable,
    RuntimeClosedError,
    RuntimeConfig,
    ToolError,
    ToolModule,
    UnknownToolError,
    open_runtime,
)
from actors.lowlevel import CallRecord, Observer, StopReason
from actors.store import MemoryStore

from .._calls import call_params

if TYPE_CHECKING:
    from protocol import ActorKey


@attrs.define
class Recorder(Observer):
    """Every event, as a tuple, in the order it came."""

    events: list[tuple[Any, ...]] = attrs.field(factory=list)
    records: list[CallRecord] = attrs.field(factory=list)

    def actor_started(self, key: ActorKey) -> None:
        self.events.append(("started", key.module, key.context.session_id))

    def actor_stopped(self, key: ActorKey, reason: StopReason) -> None:
        self.events.append(("stopped", key.context.session_id, reason))

    def call_finished(self, record: CallRecord) -> None:
        self.records.append(record)
        self.events.append(("call", record.tool, record.context.session_id, record.outcome))

    def call_refused(self, tool: str | None, outcome: str) -> None:
        self.events.append(("refused", tool, outcome))

    def state_loaded(self, key: ActorKey, seconds: float, *, found: bool) -> None:
        assert seconds >= 0
        self.events.append(("loaded", key.context.session_id, found))

    def state_saved(self, key: ActorKey, seconds: float, outcome: str) -> None:
        assert seconds >= 0
        self.events.append(("saved", key.context.session_id, outcome))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [event for event in self.events if event[0] == kind]


@attrs.define
class Notes:
    items: list[str] = attrs.field(factory=list)


def notes_module(*, durable: bool = False) -> ToolModule[Notes]:
    module: ToolModule[Notes] = ToolModule(
        "notes", lambda _context: Notes(), durable=Durable(Notes) if durable else None
    )

    @module.tool
    def add(state: Notes, text: str) -> str:
        """Add a note."""
        state.items.append(text)
        return f"{len(state.items)} notes"

    @module.tool
    def same(state: Notes) -> str:
        """Change nothing."""
        return f"{len(state.items)} notes"

    @module.tool
    def refuse(state: Notes) -> str:
        """Always a tool error."""
        raise ToolError("no")

    @module.tool
    async def slow(state: Notes) -> str:
        """Take a second."""
        await trio.sleep(1)
        return "done"

    return module


async def test_calls_are_reported_with_their_outcome_times_and_meta() -> None:
    recorder = Recorder()
    async with open_runtime([notes_module()], observer=recorder) as runtime:
        await runtime.call(call_params("notes__add", "s1", text="a"))
        await runtime.call(call_params("notes__refuse", "s1"))
        traced = call_params("notes__same", "s2")
        traced["_meta"]["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        await runtime.call(traced)
    assert recorder.of("call") == [
        ("call", "notes__add", "s1", "ok"),
        ("call", "notes__refuse", "s1", "tool_error"),
        ("call", "notes__same", "s2", "ok"),
    ]
    for record in recorder.records:
        assert record.module == "notes"
        assert record.started is not None
        assert record.accepted <= record.started <= record.finished
        assert record.queued >= 0
        assert record.ran is not None
        assert record.ran >= 0
    assert recorder.records[2].meta == traced["_meta"]


async def test_refusals_name_the_tool_only_when_it_resolved() -> None:
    """A client chooses unknown names, so they are never reported; known ones are."""
    recorder = Recorder()
    async with open_runtime([notes_module()], observer=recorder) as runtime:
        with pytest.raises(UnknownToolError):
            await runtime.call(call_params("notes__nope\n", "s1"))
        with pytest.raises(ArgumentsError):
            await runtime.call(call_params("notes__add", "s1", text=7))
        with pytest.raises(Exception, match="must be a string"):
            await runtime.call({"name": "notes__add", "arguments": {}, "_meta": {"sessionId": 1}})
        closing = runtime
    with pytest.raises(RuntimeClosedError):
        await closing.call(call_params("notes__same", "s1"))
    assert recorder.of("refused") == [
        ("refused", None, "unknown_tool"),
        ("refused", "notes__add", "bad_arguments"),
        ("refused", "notes__add", "bad_context"),
        ("refused", "notes__same", "shutting_down"),
    ]
    assert recorder.of("call") == []


async def test_actor_lifecycle_with_every_stop_reason(autojump_clock: trio.abc.Clock) -> None:
    recorder = Recorder()
    config = RuntimeConfig(ttl=10, max_actors=2)
    async with open_runtime([notes_module()], config, observer=recorder) as runtime:
        await runtime.call(call_params("notes__same", "expiring"))
        await trio.sleep(11)  # its TTL passes
        await runtime.call(call_params("notes__same", "a"))
        await runtime.call(call_params("notes__same", "b"))
        await runtime.call(call_params("notes__same", "c"))  # at max_actors=2: "a" is evicted
        await runtime.end_session("b")
    # "c" is left for shutdown.
    assert recorder.of("started") == [
        ("started", "notes", session) for session in ("expiring", "a", "b", "c")
    ]
    assert recorder.of("stopped") == [
        ("stopped", "expiring", StopReason.EXPIRED),
        ("stopped", "a", StopReason.EVICTED),
        ("stopped", "b", StopReason.SESSION_ENDED),
        ("stopped", "c", StopReason.SHUTDOWN),
    ]


@attrs.define
class Fragile:
    """A state whose resource is always gone."""

    def heal(self) -> None:
        raise RuntimeError("the resource is gone")


async def test_a_crash_is_a_stop_reason() -> None:
    recorder = Recorder()
    module: ToolModule[Fragile] = ToolModule(
        "fragile", lambda _context: Fragile(), heal_before_call=True
    )

    @module.tool
    def poke(state: Fragile) -> str:
        """Poke it."""
        return "ok"

    async with open_runtime([module], observer=recorder) as runtime:
        with pytest.raises(Exception, match="the resource is gone"):
            await runtime.call({"name": "fragile__poke", "_meta": {"sessionId": "s"}})
    assert recorder.of("stopped") == [("stopped", "s", StopReason.CRASHED)]
    assert recorder.of("call") == [("call", "fragile__poke", "s", "crashed")]


async def test_store_loads_and_saves_are_reported() -> None:
    recorder = Recorder()
    store = MemoryStore()
    async with open_runtime([notes_module(durable=True)], store=store, observer=recorder) as rt:
        await rt.call(call_params("notes__add", "s1", text="a"))
        await rt.call(call_params("notes__same", "s1"))
    async with open_runtime([notes_module(durable=True)], store=store, observer=recorder) as rt:
        await rt.call(call_params("notes__same", "s1"))
    stored = [event for event in recorder.events if event[0] in ("loaded", "saved")]
    assert stored == [
        ("loaded", "s1", False),
        ("saved", "s1", "written"),
        ("saved", "s1", "unchanged"),
        ("loaded", "s1", True),
        ("saved", "s1", "unchanged"),
    ]


async def test_a_failing_observer_never_reaches_a_call(caplog: pytest.LogCaptureFixture) -> None:
    """An observer's bug is logged; every call is still answered."""
    caplog.set_level(logging.DEBUG, "actors.observe")

    class Broken(Observer):
        def call_finished(self, record: CallRecord) -> None:
            raise ZeroDivisionError

    async with open_runtime([notes_module()], observer=Broken()) as runtime:
        for number in range(3):
            result = await runtime.call(call_params("notes__add", "s", text=str(number)))
            assert result.first_text == f"{number + 1} notes"
    failures = [r for r in caplog.records if "failed in call_finished" in r.getMessage()]
    assert len(failures) == 3
    assert [r.levelname for r in failures] == ["ERROR", "DEBUG", "DEBUG"]


async def test_a_call_replied_before_it_ran_has_no_run_time(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Shutdown cuts a queued call off: reported with its wait, and no run time."""
    recorder = Recorder()
    config = RuntimeConfig(shutdown_grace=0.5)
    async with trio.open_nursery() as nursery:
        async with open_runtime([notes_module()], config, observer=recorder) as runtime:

            async def caller(tool: str) -> None:
                with pytest.raises(RuntimeClosedError):
                    await runtime.call(call_params(f"notes__{tool}", "s"))

            nursery.start_soon(caller, "slow")
            await trio.sleep(0.1)
            nursery.start_soon(caller, "same")  # queued behind the slow call
            await trio.sleep(0.1)
    records = {record.tool: record for record in recorder.records}
    assert records["notes__same"].outcome == "shutting_down"
    assert records["notes__same"].started is None
    assert records["notes__same"].ran is None
    assert records["notes__slow"].started is not None
