"""A drain that clients see: SIGTERM during a call, and the SDK client still gets its result.

The official SDK client, used as the README shows it, lists the tools right
after a result whose tool declares an output schema (to check the result
against it). A server that stopped as soon as its last call was answered left
that request unanswered, and the client failed (``ConnectError`` over HTTP,
"Connection closed" over stdio). The server now goes on answering until its
clients fall quiet, and refuses only new calls, with a text that says to retry.

The slow tool waits for a file the test makes once the server has logged the
signal: no clock decides anything.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx2
import pytest
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from .._mcp_helpers import LISTENING, SERVE, LogFile, importable_module, texts
from .._processes import descendants

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

DRAIN_MODULE = """
from pathlib import Path

import trio
from actors import ToolModule

drain = ToolModule("drain", lambda context: None)

@drain.tool
async def hold(state: None, started: str, release: str) -> dict[str, str]:
    '''Say it started (a file), then answer once the file `release` exists.'''
    Path(started).touch()
    while not Path(release).exists():
        await trio.sleep(0.01)
    return {"outcome": "held and released"}
"""
GUARD = 60.0  # seconds: only a broken drain would take this long


@pytest.fixture
def drain_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The spec of the slow module, importable by the servers the test starts."""
    importable_module(tmp_path, monkeypatch, "drainmod", DRAIN_MODULE)
    return "drainmod:drain"


async def _appears(path: Path) -> None:
    with trio.fail_after(GUARD):
        while not await trio.Path(path).exists():  # noqa: ASYNC110 -- the tool leaves a file
            await trio.sleep(0.01)


def errlog_text(folder: Path) -> str:
    """What the stdio server wrote to its log so far."""
    with open(folder / "server.log", encoding="utf-8") as log:
        return log.read()


class TestHttp:
    async def test_the_sdk_client_gets_its_result_and_leaves_cleanly(
        self, tmp_path: Path, drain_module: str
    ) -> None:
        """A call in flight at SIGTERM is answered, so is the client's tools/list; new calls
        are refused with a text that says to retry; the client's blocks exit without error."""
        started, release = tmp_path / "started", tmp_path / "release"
        arguments = {"started": str(started), "release": str(release)}
        with (tmp_path / "server.log").open("w+b") as file:
            process = await trio.lowlevel.open_process(
                [*SERVE, "--state", "memory", "--module", drain_module, "--http", "127.0.0.1:0"],
                stdin=subprocess.DEVNULL,
                stderr=file,
            )
            try:
                log = LogFile(file)
                url = (await log.wait_for(LISTENING, process)).group(1)
                results = []
                async with httpx2.AsyncClient(timeout=30) as http:
                    async with streamable_http_client(url, http_client=http) as (read, write):
                        async with ClientSession(read, write) as session:
                            await session.initialize()
                            async with (
                                streamable_http_client(url, http_client=http) as (other_r, other_w),
                                ClientSession(other_r, other_w) as other,
                            ):
                                await other.initialize()
                                async with trio.open_nursery() as nursery:

                                    async def hold() -> None:
                                        results.append(
                                            await session.call_tool("drain__hold", arguments)
                                        )

                                    nursery.start_soon(hold)
                                    await _appears(started)
                                    process.send_signal(signal.SIGTERM)
                                    await log.wait_for(re.compile("SIGTERM received"), process)
                                    refused = await other.call_tool("drain__hold", arguments)
                                    release.touch()
                with trio.fail_after(GUARD):
                    code = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        (result,) = results
        assert not result.is_error, texts(result)
        assert result.structured_content == {"outcome": "held and released"}
        assert refused.is_error
        assert texts(refused) == (
            "the server is stopping and takes no new calls; retry once it is back"
        )
        assert code == 0


class TestStdio:
    async def test_the_sdk_client_gets_its_result_and_leaves_cleanly(
        self, tmp_path: Path, drain_module: str
    ) -> None:
        """The same over stdio: SIGTERM to the server the SDK client started."""
        started, release = tmp_path / "started", tmp_path / "release"
        arguments = {"started": str(started), "release": str(release)}
        env = {
            "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
            "PYTHONPATH": os.environ["PYTHONPATH"],
        }
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "actors", "serve", "--module", drain_module],
            env=env,
        )
        before = {pid for pid, _ in descendants(os.getpid())}
        with (tmp_path / "server.log").open("w+") as errlog:
            async with (
                stdio_client(server, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                async with trio.open_nursery() as nursery:
                    results = []

                    async def hold() -> None:
                        results.append(await session.call_tool("drain__hold", arguments))

                    nursery.start_soon(hold)
                    await _appears(started)
                    (pid,) = {pid for pid, _ in descendants(os.getpid())} - before
                    os.kill(pid, signal.SIGTERM)
                    with trio.fail_after(GUARD):
                        while "SIGTERM received" not in errlog_text(tmp_path):  # noqa: ASYNC110
                            await trio.sleep(0.01)
                    release.touch()
        (result,) = results
        assert not result.is_error, texts(result)
        assert result.structured_content == {"outcome": "held and released"}
