"""``serve``'s log lines are written together (`LineBuffer`), yet promptly and none lost.

A line waits at most `WRITE_DELAY` before it is written, a warning is written at
once (with the lines before it), and stopping (SIGTERM, EOF on stdin) writes
every line kept. Lines from several threads are kept and written whole. The
subprocess tests run the real ``serve`` and read its stderr; the tests of the
handler itself run `write_log_lines` under trio with a delay that never ends,
so that what they see written was written for the reason they test, not
because time passed.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import re
import signal
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from actors.server._logs import (
    TEXT_FORMAT,
    WRITE_SIZE,
    JsonFormatter,
    LineBuffer,
    TextFormatter,
    write_log_lines,
)

from .._mcp_helpers import LogFile, importable_module, raw_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from .._mcp_helpers import RawServer

MEMORY = ("--state", "memory")
STOPPED = 60.0  # seconds a server may take to stop on a loaded machine
CALL_LINE = re.compile(r"tools/call planning__list_goals \S+ \S+ \S+ caller=\S+ outcome=ok ")


async def list_goals(server: RawServer, calls: int) -> None:
    """`calls` calls sent at once, then every reply read: the lines are logged together."""
    for _ in range(calls):
        await server.send(
            {
                "jsonrpc": "2.0",
                "id": 1000 + _,
                "method": "tools/call",
                "params": {"name": "planning__list_goals", "arguments": {}},
            }
        )
    for _ in range(calls):
        reply = await server.receive()
        assert "result" in reply, reply


def ordered(log: str, *expected: str) -> None:
    """Each of `expected` is in `log`, in this order (each after the one before)."""
    at = 0
    for text in expected:
        found = log.find(text, at)
        assert found >= 0, f"{text!r} is not in the log after {log[:at]!r}:\n{log}"
        at = found + len(text)


# ---- a real serve ---------------------------------------------------------------------------


async def test_a_call_line_is_written_without_further_traffic() -> None:
    """No other request, no stop: the line of the last call still comes (after the delay)."""
    async with raw_server(*MEMORY) as server:
        await server.initialize()
        response = await server.call("planning__list_goals", {})
        assert "result" in response, response
        await server.log.wait_for(CALL_LINE, server.process)
        assert server.process.returncode is None  # written while serving, not at the exit


async def test_sigterm_leaves_every_line_written_in_order() -> None:
    calls = 30
    async with raw_server(*MEMORY) as server:
        await server.initialize()
        await list_goals(server, calls)
        server.process.send_signal(signal.SIGTERM)
        with trio.fail_after(STOPPED):
            assert await server.process.wait() == 0
        log = server.log.text()
    assert len(CALL_LINE.findall(log)) == calls, log
    # "stopped" is logged once the buffering has ended: it comes after every line kept.
    ordered(log, "tools/call planning__list_goals", "SIGTERM received", "transport stopped")
    assert log.endswith(": stopped\n"), log


async def test_eof_leaves_every_json_line_written_whole() -> None:
    """Many lines logged in a burst (past `WRITE_SIZE` together): each one JSON object."""
    calls = 300
    async with raw_server(*MEMORY, "--log-format", "json") as server:
        await server.initialize()
        await list_goals(server, calls)
        await server.close_stdin()
        assert await server.wait() == 0
        log = server.log.text()
    documents = [json.loads(line) for line in log.splitlines()]  # a broken line fails here
    assert log.endswith("\n")
    events = [d["event"] for d in documents if "event" in d]
    assert [e["tool"] for e in events] == ["planning__list_goals"] * calls
    assert len(log) > WRITE_SIZE  # more than one buffer holds: written in several goes
    assert documents[-1]["message"] == "stopped"


CHATTY = '''
    import logging
    import threading

    from actors import ToolModule

    chatty = ToolModule("chatty")
    _log = logging.getLogger("chatty")


    def _chatter(name: str, lines: int) -> None:
        for number in range(lines):
            _log.info("thread %s line %06d %s", name, number, name * 300)


    @chatty.tool
    def chatter(lines: int) -> str:
        """Two threads log `lines` lines each, on after this call has returned."""
        for name in "AB":
            threading.Thread(target=_chatter, args=(name, lines), daemon=True).start()
        return "started"
'''
CHATTY_LINE = re.compile(r"\S+ \S+ INFO chatty: thread ([AB]) line (\d{6}) (A{300}|B{300})")


async def test_lines_from_two_threads_are_written_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads log while the server writes what they kept: every line whole, none lost."""
    lines = 3000
    importable_module(tmp_path, monkeypatch, "chatty", CHATTY)
    async with raw_server(*MEMORY, "--module", "chatty:chatty") as server:
        await server.initialize()
        response = await server.call("chatty__chatter", {"lines": lines})
        assert "result" in response, response
        for name in "AB":  # each thread's last line, in whichever order they come
            done = re.compile(rf"thread {name} line {lines - 1:06d} {name}+\n")
            await server.log.wait_for(done, server.process)
        await server.close_stdin()
        assert await server.wait() == 0
        log = server.log.text()
    seen = set()
    for line in log.splitlines():
        if " chatty: " not in line:
            continue
        match = CHATTY_LINE.fullmatch(line)
        assert match is not None, f"a line broken or mixed with another: {line[:200]!r}"
        name, number, filler = match.groups()
        assert filler == name * 300, line[:200]
        seen.add((name, int(number)))
    assert seen == {(name, number) for name in "AB" for number in range(lines)}


# ---- the handler, under trio, with a delay that never ends -------------------------------------


class Kept:
    """A `LineBuffer` on the root logger, writing to a file this test reads."""

    def __init__(self, handler: LineBuffer, file: Any) -> None:
        self.handler = handler
        self._log = LogFile(file)
        self.logger = logging.getLogger("tests.log_buffer")

    def written(self) -> str:
        return self._log.text()


@pytest.fixture
def kept() -> Iterator[Kept]:
    with tempfile.TemporaryFile() as file, open(file.fileno(), "w", closefd=False) as stream:
        handler = LineBuffer(stream)
        handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        root = logging.getLogger()
        level = root.level
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            yield Kept(handler, file)
        finally:
            root.removeHandler(handler)
            root.setLevel(level)


@pytest.fixture
async def buffering(kept: Kept) -> AsyncIterator[Kept]:
    """`kept`, with `write_log_lines` running (and never writing for the delay's sake)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_log_lines, math.inf)
        await trio.testing.wait_all_tasks_blocked()  # it has taken the handler
        yield kept
        nursery.cancel_scope.cancel()


async def test_a_line_is_kept_until_a_warning_writes_it_and_the_warning_at_once(
    buffering: Kept,
) -> None:
    buffering.logger.info("first")
    assert buffering.written() == ""
    buffering.logger.warning("second")
    assert buffering.written() == "INFO first\nWARNING second\n"


async def test_the_lines_kept_are_written_once_they_pass_the_size(buffering: Kept) -> None:
    line = "x" * 1000
    logged = 0
    while logged + len(line) + len("INFO \n") < WRITE_SIZE:
        buffering.logger.info(line)
        logged += len(line) + len("INFO \n")
        assert buffering.written() == ""
    buffering.logger.info(line)
    assert buffering.written() == f"INFO {line}\n" * (WRITE_SIZE // len(f"INFO {line}\n") + 1)


async def test_a_line_from_another_thread_is_written_after_the_delay(kept: Kept) -> None:
    """With a delay that ends: the worker thread's line wakes the writer, which writes it."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_log_lines, 0.0)
        await trio.testing.wait_all_tasks_blocked()
        await trio.to_thread.run_sync(kept.logger.info, "from a thread")
        with trio.fail_after(STOPPED):  # a file's content: no event to wait on, so look again
            while True:
                if kept.written() == "INFO from a thread\n":
                    break
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()


async def test_stopping_writes_what_is_kept_and_then_each_line_as_it_comes(kept: Kept) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_log_lines, math.inf)
        await trio.testing.wait_all_tasks_blocked()
        kept.logger.info("kept")
        assert kept.written() == ""
        nursery.cancel_scope.cancel()
    assert kept.written() == "INFO kept\n"
    kept.logger.info("after")
    assert kept.written() == "INFO kept\nINFO after\n"


async def test_flush_writes_what_is_kept(buffering: Kept) -> None:
    """What `logging.shutdown` does at exit (an exception that ends the process)."""
    buffering.logger.info("kept")
    assert buffering.written() == ""
    buffering.handler.flush()
    assert buffering.written() == "INFO kept\n"


async def test_a_second_writer_leaves_a_taken_handler_alone(buffering: Kept) -> None:
    """Two serves in one process: the handler stays the first's (which writes it once)."""
    with trio.move_on_after(STOPPED) as waited:
        await write_log_lines(0.0)  # returns at once: no handler left to take
    assert not waited.cancelled_caught
    buffering.logger.info("kept")
    assert buffering.written() == ""


# ---- the formatters ------------------------------------------------------------------------


def _records() -> Iterator[logging.LogRecord]:
    """Records a few milliseconds apart, across seconds, minutes and a day."""
    start = datetime.datetime(2025, 12, 31, 23, 59, 58, tzinfo=datetime.UTC).timestamp()
    for step in range(0, 5000, 7):
        record = logging.LogRecord("actors.mcp", logging.INFO, __file__, 0, "m %d", (step,), None)
        record.created = start + step / 1000 + 0.0004  # away from a millisecond's edge
        record.msecs = int((record.created - int(record.created)) * 1000) + 0.0
        yield record


def test_the_text_line_is_as_logging_formats_it() -> None:
    """Across seconds (the time made once a second), and with a traceback or a stack."""
    ours, theirs = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    for record in _records():
        assert ours.format(record) == theirs.format(record)
    try:
        raise ValueError("boom")  # a real traceback to format
    except ValueError:
        failed = sys.exc_info()
    stack = "Stack (most recent call last):\n  here"
    for exc_info, sinfo in ((failed, None), (None, stack)):

        def made(exc_info: Any = exc_info, sinfo: str | None = sinfo) -> logging.LogRecord:
            # A record each: the base keeps the traceback's text on the record it formats.
            record = logging.LogRecord("actors", logging.ERROR, __file__, 0, "x", None, exc_info)
            record.stack_info = sinfo
            record.created, record.msecs = 1767225600.1234, 123.0
            return record

        record = made()
        assert ours.format(record) == theirs.format(made())
        assert "\n" in ours.format(record)


def test_the_json_time_is_utc_iso_to_the_millisecond() -> None:
    formatter = JsonFormatter()
    for record in _records():
        moment = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        expected = moment.isoformat(timespec="milliseconds")
        assert json.loads(formatter.format(record))["time"] == expected


def test_serve_configures_a_line_buffer_and_no_asyncio_task_lookup() -> None:
    """The root handler is one `write_log_lines` in serve finds; and from Python 3.12,
    where a record asks asyncio for its task (under trio: an exception caught per record),
    it asks no more. In a fresh process, where `logging.basicConfig` takes the handler."""
    probe = (
        "import logging\n"
        "from actors.server._cli import configure_logging\n"
        "configure_logging('info', 'json')\n"
        "print(*[type(h).__name__ for h in logging.getLogger().handlers])\n"
        "print(getattr(logging, 'logAsyncioTasks', 'absent'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    asks = "absent" if sys.version_info < (3, 12) else "False"
    assert done.stdout.splitlines() == [LineBuffer.__name__, asks]
