"""supergateway, which serves a stdio server over Streamable HTTP, in its two modes and both eras.

``npx -y supergateway --stdio "mcp-actors serve --handles …" --outputTransport
streamableHttp`` (the command lines docs/integrations/supergateway.md shows,
``tests/npm_bridges/commands.sh``) spawns our stdio server as its child and relays HTTP to
it; the official SDK's ``Client(url)`` talks to it in the 2025 era (``mode="legacy"``: the
initialize handshake) and the 2026-07-28 era (``mode="auto"``, the SDK's default: the
``server/discover`` probe, which supergateway's modern path answers by relaying it).

What reaches the server, read from supergateway 4.0.0's source and seen here:

* **stateless** (the default): a new child, so a new stdio connection and its own private
  session, for every POST, in both eras (a 2025 request is preceded by an initialize the
  gateway makes up). Only a handle, verified by the key kept beside the SQLite state file
  every child shares, carries a conversation from one call to the next.
* **stateful** (``--stateful``): one child per 2025 session (its Mcp-Session-Id), so the
  child's connection keeps state without handles, but every conversation of that session
  shares it; a 2026-era request has no session, so it gets a child of its own as in
  stateless mode.

supergateway passes a request's ``_meta`` through, so a host-named session works in every
mode. It is installed from ``tests/npm_bridges/package-lock.json``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs
import pytest
import trio
from mcp import Client

from .._mcp_helpers import STARTUP_TIMEOUT, LogFile
from .._npm import INSTALL_TIMEOUT
from .._processes import listening_ports
from ..npm_bridges import (
    GONE_TIMEOUT,
    Bridges,
    as_npx_runs,
    carried_on,
    command_of,
    each_sees_its_own,
    installed,
    named_session_kept,
    owned,
    two_conversations,
    two_goals_without_handles,
)
from ..npm_bridges.model import Answer, ask, create_goal, goals, start_conversation

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence


NEEDED_BY = "the supergateway tests"
MCP_ACTORS = Path(sys.executable).with_name("mcp-actors")
# The line each stdio server logs once at startup; supergateway logs its children's stderr.
SERVER_STARTED = re.compile(r"actors\.serve: modules: ")
Mode = Literal["stateless", "stateful"]
Era = Literal["legacy", "auto"]

pytestmark = [
    pytest.mark.timeout(INSTALL_TIMEOUT + 900),  # npm ci happens in the module's first test
    # The SDK client's SSE reader leaves httpx2's response generators unexhausted.
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

EVERY_MODE_AND_ERA = pytest.mark.parametrize(
    ("mode", "era"),
    [("stateless", "legacy"), ("stateless", "auto"), ("stateful", "legacy"), ("stateful", "auto")],
)
# The distinct ways a request goes through: a 2026-era one takes the same in both modes.
EVERY_PATH = pytest.mark.parametrize(
    ("mode", "era"), [("stateless", "legacy"), ("stateless", "auto"), ("stateful", "legacy")]
)


@pytest.fixture(scope="module")
def bridges() -> Bridges:
    """supergateway (and mcp-remote) installed: a skip, or a failure under CI, at setup."""
    return installed(NEEDED_BY)


def child_per_call(mode: Mode, era: Era) -> bool:
    """Whether supergateway spawns a server for every request (else one per 2025 session)."""
    return mode == "stateless" or era == "auto"


@attrs.frozen
class Gateway:
    """A running supergateway: where it listens, and its log (its children's stderr too)."""

    url: str
    log: LogFile

    def servers_started(self) -> int:
        """How many stdio servers supergateway has started so far."""
        return len(SERVER_STARTED.findall(self.log.text()))

    async def wait_for_servers(self, least: int) -> int:
        """How many servers it started, once that is at least `least`."""
        with trio.fail_after(STARTUP_TIMEOUT):
            # A child's stderr reaches the log after its answer may have: wait for it.
            while self.servers_started() < least:  # noqa: ASYNC110
                await trio.sleep(0.05)
        return self.servers_started()


def page_command(bridges: Bridges, mode: Mode, serve: Sequence[str] | None) -> list[str]:
    """The page's supergateway line for `mode`, as the installed package runs it, on a free
    port; its stdio server the venv's ``mcp-actors``, with ``serve`` options if given."""
    command = as_npx_runs(bridges, command_of(mode))
    stdio = command.index("--stdio") + 1
    page_serve = shlex.split(command[stdio])
    assert page_serve[:2] == ["mcp-actors", "serve"], page_serve
    options = page_serve[2:] if serve is None else list(serve)
    command[stdio] = shlex.join([str(MCP_ACTORS), "serve", *options])
    command[command.index("--port") + 1] = "0"
    return command


@asynccontextmanager
async def gateway(
    bridges: Bridges, mode: Mode, serve: Sequence[str] | None = None
) -> AsyncIterator[Gateway]:
    """supergateway as the page runs it (``serve`` replacing its server's options); it and
    every server it spawned are stopped when the block ends, or the test fails."""
    async with owned() as marker:
        with tempfile.TemporaryFile() as file:
            process = await trio.lowlevel.open_process(
                page_command(bridges, mode, serve),
                stdin=subprocess.DEVNULL,  # its README: keeps a network gateway running
                stdout=file,
                stderr=file,
                env={**os.environ, **marker},
                start_new_session=True,
            )
            try:
                log = LogFile(file)
                yield Gateway(f"http://127.0.0.1:{await _port(process, log)}/mcp", log)
            finally:
                await _stop(process)


async def _port(process: trio.Process, log: LogFile) -> int:
    """The port supergateway listens on (told ``--port 0``, it logs 0: read /proc)."""
    with trio.fail_after(STARTUP_TIMEOUT):
        # Nothing announces the port: poll the process's sockets.
        while not (ports := listening_ports({process.pid})):
            assert process.returncode is None, f"supergateway exited:\n{log.text()}"
            await trio.sleep(0.05)
    (port,) = ports
    return port


async def _stop(process: trio.Process) -> None:
    """SIGTERM (supergateway then stops each server's process group); its group SIGKILLed
    if it has not exited within `GONE_TIMEOUT`."""
    with trio.CancelScope(shield=True):
        process.terminate()
        with trio.move_on_after(GONE_TIMEOUT):
            await process.wait()
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


@EVERY_MODE_AND_ERA
async def test_a_model_keeps_each_conversation_through_supergateway(
    bridges: Bridges, mode: Mode, era: Era
) -> None:
    """Two conversations, their calls at the same time, stay apart; each is carried on by
    a new client from its handle alone; stateless mode starts a server for every call."""
    async with gateway(bridges, mode) as served:
        async with Client(served.url, mode=era) as client:
            first, second = await two_conversations(client)
            started = await served.wait_for_servers(1)
            await each_sees_its_own(client, first, second)
            if child_per_call(mode, era):  # the two lists: two more servers
                assert await served.wait_for_servers(started + 2) >= started + 2
            else:
                assert served.servers_started() == 1
        async with Client(served.url, mode=era) as client:
            await carried_on(client, first, second)


@EVERY_PATH
async def test_the_host_named_session_reaches_through_supergateway(
    bridges: Bridges, mode: Mode, era: Era
) -> None:
    """supergateway forwards ``_meta``: a session the client names is kept across calls and
    clients, and it wins over a handle passed beside it."""
    async with gateway(bridges, mode) as served:
        await named_session_kept(partial(Client, served.url, mode=era), {"sessionId": "named-1"})


@EVERY_PATH
async def test_without_handles_supergateway_keeps_only_what_one_child_does(
    bridges: Bridges, mode: Mode, era: Era
) -> None:
    """``--no-handles``: no ``conversation__start``; where a server serves one call, what
    the call stored is gone with it; where one serves a 2025 session, every conversation
    of that session shares it, and a new session starts empty."""
    async with gateway(bridges, mode, ["--no-handles", "--modules", "planning"]) as served:
        async with Client(served.url, mode=era) as client:
            created, listed = await two_goals_without_handles(client)
            assert not any(answer.refused for answer in created), created
            kept = () if child_per_call(mode, era) else ("ship A", "ship B")
            assert listed == Answer(goals(*kept), False)
        async with Client(served.url, mode=era) as client:
            assert await ask(client, "planning__list_goals", {}) == Answer(goals(), False)


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_stateless_handles_need_the_key_beside_durable_state(
    bridges: Bridges, era: Era
) -> None:
    """With ``--state memory`` each stdio server has a key of its own: the next call's
    server refuses the handle the last one minted, and creates nothing for it."""
    serve = ["--handles", "--state", "memory", "--modules", "planning"]
    async with gateway(bridges, "stateless", serve) as served:
        async with Client(served.url, mode=era) as client:
            conversation = await start_conversation(client)
            refused = await create_goal(client, conversation, "ship A")
            assert refused.refused, refused
            assert "conversation__start" in refused.text, refused
