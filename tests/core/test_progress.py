"""Progress: what a tool reports reaches whoever listens, in order, and only them.

In process, a listener given to `Runtime.run` hears the reports. Over stdio,
a real server sends ``notifications/progress`` for a request that carried a
``progressToken`` (before the result, the newest report at a time) and
nothing for one that did not.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
import trio
import trio.testing

from actors import (
    CallTimeoutError,
    Progress,
    ProgressReport,
    RuntimeConfig,
    ToolModule,
    open_runtime,
)
from actors.server.mcp._client_channels import PROGRESS_INTERVAL, ProgressRelay

from .._calls import call_params
from .._mcp_helpers import raw_server, tools_call

SLOW_MODULE = ("--state", "memory", "--module", "tests._slow_module:slow")
finished_late = threading.Event()


def reporting_module() -> ToolModule[None]:
    module: ToolModule[None] = ToolModule("steps", lambda _context: None)

    @module.tool
    async def walk(state: None, progress: Progress, steps: int) -> str:
        """Report each step, yielding between them."""
        for step in range(1, steps + 1):
            progress.report(step, total=steps, message=f"step {step}")
            await trio.lowlevel.checkpoint()
        return "walked"

    @module.tool
    def count(state: None, progress: Progress, steps: int) -> str:
        """Report each step inline."""
        for step in range(1, steps + 1):
            progress.report(step)
        return "counted"

    @module.tool(heavy=True)
    def crunch(state: None, progress: Progress, steps: int) -> str:
        """Report each step from a worker thread."""
        for step in range(1, steps + 1):
            progress.report(step, total=steps)
        return "crunched"

    @module.tool(heavy=True)
    def overrun(state: None, progress: Progress) -> str:
        """Overrun the deadline, then report."""
        time.sleep(0.5)
        progress.report(1)
        finished_late.set()
        return "too late"

    @module.tool
    def bad(state: None, progress: Progress, progress_value: float, total: float) -> str:
        """Report what it is told to."""
        progress.report(progress_value, total=total)
        return "reported"

    @module.tool
    def repeat(state: None, progress: Progress) -> str:
        """Report the same progress twice."""
        progress.report(1)
        progress.report(1)
        return "reported"

    return module


@pytest.mark.parametrize("tool", ["walk", "count", "crunch"])
async def test_a_listener_hears_every_report_in_order(tool: str) -> None:
    heard: list[ProgressReport] = []
    async with open_runtime([reporting_module()]) as runtime:
        prepared = runtime.prepare(call_params(f"steps__{tool}", "s", steps=5))
        result = await runtime.run(prepared, progress=heard.append)
    assert not result.is_error
    assert [report.progress for report in heard] == [1, 2, 3, 4, 5]


async def test_progress_is_not_an_argument_and_needs_no_listener() -> None:
    async with open_runtime([reporting_module()]) as runtime:
        schema = runtime.registry.resolve("steps__walk").signature.input_schema
        assert set(schema["properties"]) == {"steps"}
        result = await runtime.call(call_params("steps__walk", "s", steps=3))
    assert result.first_text == "walked"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"progress_value": float("nan"), "total": 1}, "progress must be a finite number"),
        ({"progress_value": 1, "total": 0}, "total must be a finite number above 0"),
        ({"progress_value": 1, "total": float("inf")}, "total must be a finite number above 0"),
    ],
)
async def test_a_bad_report_is_the_tools_error_naming_the_problem(
    arguments: dict[str, Any], problem: str
) -> None:
    async with open_runtime([reporting_module()]) as runtime:
        result = await runtime.call(call_params("steps__bad", "s", **arguments))
    assert result.is_error
    assert problem in result.first_text


async def test_progress_must_increase() -> None:
    async with open_runtime([reporting_module()]) as runtime:
        result = await runtime.call(call_params("steps__repeat", "s"))
    assert result.is_error
    assert "progress must increase with every report" in result.first_text


async def test_a_report_after_the_reply_is_dropped() -> None:
    """A heavy thread that overran its deadline reports later: nobody hears it, nothing breaks."""
    heard: list[ProgressReport] = []
    finished_late.clear()
    config = RuntimeConfig(call_timeout=0.1)
    async with open_runtime([reporting_module()], config) as runtime:
        with pytest.raises(CallTimeoutError):
            await runtime.run(
                runtime.prepare(call_params("steps__overrun", "s")), progress=heard.append
            )
        # The thread reports, then sets the event. Its report crosses to trio with
        # run_sync_soon, and so does the end of this wait, after it: trio runs them in
        # order, so once the wait is over the report has reached the listener or been dropped.
        assert await trio.to_thread.run_sync(finished_late.wait, 60), "the thread never reported"
    assert heard == []


# ---- over stdio --------------------------------------------------------------------------------


async def _tools_call(
    server: Any, name: str, arguments: dict[str, Any], token: str | None
) -> list[dict[str, Any]]:
    """Send one tools/call; every message up to and including its response."""
    meta = None if token is None else {"progressToken": token}
    await server.send(tools_call(name, arguments, request_id=7, meta=meta))
    messages = []
    while True:
        message = await server.receive()
        messages.append(message)
        if message.get("id") == 7:
            return messages


async def test_notifications_only_for_a_request_with_a_token() -> None:
    async with raw_server(*SLOW_MODULE) as server:
        await server.initialize()
        with_token = await _tools_call(server, "slow__pace", {"steps": 50}, "tok-1")
        without = await _tools_call(server, "slow__pace", {"steps": 50}, None)
    notes = [m for m in with_token if m.get("method") == "notifications/progress"]
    assert notes, "a request with a progressToken hears progress"
    assert {note["params"]["progressToken"] for note in notes} == {"tok-1"}
    values = [note["params"]["progress"] for note in notes]
    assert values == sorted(set(values))  # increasing, as MCP requires
    assert values[-1] == 50  # the newest report is sent before the result
    assert with_token[-1]["result"]["content"][0]["text"] == "paced 50 steps"
    assert [m.get("id") for m in without] == [7]  # no token: the result alone


async def test_a_tool_flooding_reports_costs_the_client_little() -> None:
    """100 000 reports in a tight loop: a handful of notifications, the call completes."""
    async with raw_server(*SLOW_MODULE) as server:
        await server.initialize()
        messages = await _tools_call(server, "slow__report", {"times": 100_000}, "flood")
    notes = [m for m in messages if m.get("method") == "notifications/progress"]
    assert 1 <= len(notes) <= 2
    assert notes[-1]["params"] == {"progressToken": "flood", "progress": 100_000, "total": 100_000}
    assert messages[-1]["result"]["content"][0]["text"] == "reported 100000 times"


class _CountingSession:
    """Stands in for the SDK's session: records each progress notification the relay sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, float]] = []  # (when, progress)

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        await trio.lowlevel.checkpoint()
        self.sent.append((trio.current_time(), progress))


async def test_reports_that_yield_between_them_are_sent_at_most_ten_a_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A tool reporting every millisecond for 20 s: about 200 notifications, never two within
    the interval, and the last report sent as soon as the call ends."""
    session = _CountingSession()
    relay = ProgressRelay(session)  # type: ignore[arg-type]  # what the relay calls of it
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.send_until_finished)
        for step in range(1, 20_001):
            relay.hear(ProgressReport(float(step), 20_000.0, None))
            await trio.sleep(0.001)
        ended = trio.current_time()
        relay.finish()
    times = [when for when, _ in session.sent]
    assert 150 <= len(session.sent) <= 202
    # Every gap is an interval at least, but the last: the call's end is not held back.
    gaps = [later - earlier for earlier, later in itertools.pairwise(times[:-1])]
    assert min(gaps) >= PROGRESS_INTERVAL - 1e-9
    assert session.sent[-1][1] == 20_000.0  # the newest report, sent by the time it ended
    assert session.sent[-1][0] <= ended
