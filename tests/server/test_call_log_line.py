"""The per-call log line costs what it must: no walk up the stack, no process lookups.

One line is logged per request, so what making it costs is paid by every call. It is
made as `logging.Logger.log` makes a record, without ``findCaller`` (its place in the code
is always the same), and ``serve``'s logging asks for no thread or process, which neither
of its formats names. What the line says is unchanged (the tests of each transport read
it).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from actors.modules import planning
from actors.testing import connect

if TYPE_CHECKING:
    import pytest

ADAPTER_LOGGER = "actors.mcp"  # the adapter's, which logs each call


async def test_a_call_line_is_made_without_walking_the_stack(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    walked: list[str] = []
    find_caller = logging.Logger.findCaller

    def counting(self: logging.Logger, *args: Any, **kwargs: Any) -> Any:
        walked.append(self.name)
        return find_caller(self, *args, **kwargs)

    monkeypatch.setattr(logging.Logger, "findCaller", counting)
    caplog.set_level(logging.INFO, logger=ADAPTER_LOGGER)
    async with connect(planning) as client:
        await client.call_tool("planning__list_goals", {}, meta={"sessionId": "s1"})
    lines = [r.getMessage() for r in caplog.records if r.name == ADAPTER_LOGGER]
    assert any(line.startswith("tools/call planning__list_goals ") for line in lines), lines
    assert ADAPTER_LOGGER not in walked


def test_serves_logging_asks_for_no_thread_or_process() -> None:
    probe = (
        "import logging\n"
        "from actors.server._cli import configure_logging\n"
        "configure_logging('info')\n"
        "print(logging.logThreads, logging.logProcesses, logging.logMultiprocessing)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "False", "False"]
