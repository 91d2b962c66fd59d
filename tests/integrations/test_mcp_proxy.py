"""mcp-proxy (the Python package) bridging stdio and HTTP to ``mcp-actors serve``, both ways.

mcp-proxy runs in a virtual environment of its own, and ``tests/integrations/mcp_proxy_example.py``
(with the MCP SDK mcp-proxy brings) is the client at the far end; a scripted model holds two
conversations at once, each opening with conversation__start and passing the handle to
create_goal and then list_goals.

* **Server mode**, ``mcp-proxy --port 0 -- mcp-actors serve --handles``: one stdio server,
  one connection to it, for every client of the proxy (Alice over its Streamable HTTP
  endpoint, Bob over its SSE one). With handles, stateful or ``--stateless``, each sees
  only its own goal; without them every client of the proxy shares one session.
* **Client mode**, a stdio host starting ``mcp-proxy --transport streamablehttp URL`` for
  ``serve --http``: one HTTP session for all that host's conversations. Handles keep them
  apart; without them they share it.
* **Client mode over SSE**, mcp-proxy's default transport, cannot work: the server serves
  Streamable HTTP only, so mcp-proxy's first request is refused and it exits.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio

from .._integration_runs import (
    STDIO_WITHOUT_HANDLES,
    apart,
    marked_environment,
    mixed,
    run_over_http,
    run_script,
)
from .._mcp_helpers import STARTUP_TIMEOUT, LogFile, http_server
from .._venvs import framework_python
from ..integrations import FOLDER

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

REQUIREMENTS = ("mcp-proxy==0.13.0",)
SCRIPT = FOLDER / "mcp_proxy_example.py"
SERVED = ("--state", "memory")  # one HTTP server process: its state need not outlive it
NO_HANDLES = (*SERVED, "--no-handles")
LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")
STOP_GRACE = 30.0  # seconds for the proxy to stop its stdio server after SIGTERM


@pytest.fixture(scope="module")
def mcp_proxy() -> Path:
    """The Python of mcp-proxy's environment (installed on first use)."""
    return framework_python("mcp-proxy", REQUIREMENTS, needed_by="the mcp-proxy integration tests")


@asynccontextmanager
async def proxy_for_stdio(python: Path, *options: str, home: Path) -> AsyncIterator[str]:
    """``mcp-proxy --port 0 OPTIONS``, serving a stdio server over HTTP: the address it
    listens on. Stopped with SIGTERM (it stops the stdio server), killed if it lingers."""
    command = [str(python.with_name("mcp-proxy")), "--port", "0", *options]
    with marked_environment(home) as env, tempfile.TemporaryFile() as file:
        process = await trio.lowlevel.open_process(
            command, env=env, stdin=subprocess.DEVNULL, stdout=file, stderr=file
        )
        try:
            log = LogFile(file)
            yield (await log.wait_for(LISTENING, process, STARTUP_TIMEOUT)).group(1)
        finally:
            with trio.CancelScope(shield=True):
                process.terminate()
                with trio.move_on_after(STOP_GRACE):
                    await process.wait()
                process.kill()
                await process.wait()


class TestServerMode:
    """HTTP clients to mcp-proxy, mcp-proxy to one stdio ``mcp-actors serve``."""

    @pytest.mark.parametrize("stateless", [(), ("--stateless",)], ids=["stateful", "stateless"])
    async def test_handles_keep_the_proxy_clients_apart(
        self, mcp_proxy: Path, tmp_path: Path, stateless: tuple[str]
    ) -> None:
        """Alice (Streamable HTTP) and Bob (SSE) each see only their own goal."""
        served = (*stateless, "--", "mcp-actors", "serve", "--handles")
        async with proxy_for_stdio(mcp_proxy, *served, home=tmp_path) as proxy:
            apart(await run_script(mcp_proxy, SCRIPT, proxy, home=tmp_path))

    async def test_without_handles_every_client_shares_one_session(
        self, mcp_proxy: Path, tmp_path: Path
    ) -> None:
        """The proxy's one stdio connection is one session: each client sees the other's."""
        served = ("--", *STDIO_WITHOUT_HANDLES)
        async with proxy_for_stdio(mcp_proxy, *served, home=tmp_path) as proxy:
            mixed(await run_script(mcp_proxy, SCRIPT, proxy, home=tmp_path))


class TestClientMode:
    """A stdio host to mcp-proxy, mcp-proxy to ``mcp-actors serve --http``."""

    async def test_handles_keep_a_hosts_conversations_apart(
        self, mcp_proxy: Path, tmp_path: Path
    ) -> None:
        """Handles are on by default over HTTP: two conversations on one host, apart."""
        apart(await run_over_http(mcp_proxy, SCRIPT, "--stdio", home=tmp_path, serve=SERVED))

    async def test_without_handles_a_hosts_conversations_share_one_session(
        self, mcp_proxy: Path, tmp_path: Path
    ) -> None:
        """mcp-proxy holds one Mcp-Session-Id for the host's connection: one session."""
        mixed(await run_over_http(mcp_proxy, SCRIPT, "--stdio", home=tmp_path, serve=NO_HANDLES))

    async def test_the_sse_transport_cannot_work(self, mcp_proxy: Path, tmp_path: Path) -> None:
        """``mcp-proxy URL`` speaks the old HTTP+SSE transport (a GET for an event stream
        first): the server refuses it (400, no session), and mcp-proxy exits."""
        async with http_server(*SERVED) as server:
            with marked_environment(tmp_path) as env, trio.fail_after(STARTUP_TIMEOUT):
                done = await trio.run_process(
                    [str(mcp_proxy.with_name("mcp-proxy")), server.url],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
        log = done.stderr.decode(errors="replace")
        assert done.returncode == 1, log[-4000:]
        assert f"Client error '400 ' for url '{server.url}'" in log, log[-4000:]
