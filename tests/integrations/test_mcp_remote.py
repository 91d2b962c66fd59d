"""mcp-remote, the stdio bridge desktop hosts put in front of ``serve --http``, in both eras.

A desktop host that speaks only stdio runs ``npx -y mcp-remote URL`` (the configuration
docs/integrations/mcp-remote.md shows, ``tests/npm_bridges/claude_desktop_config.json``)
and talks MCP to it over the pipe; mcp-remote speaks Streamable HTTP to the server. Here
the host is the official SDK's ``Client`` over stdio, in the two eras a host can open
with: ``mode="legacy"`` (the 2025 initialize handshake; the bridge passes it through, so
the server's Mcp-Session-Id session is the host's) and ``mode="auto"`` (the SDK's
default: it probes ``server/discover`` first, which mcp-remote also passes through, and
our server answers it: the 2026-07-28 era, no session). A third host is a 2025 one behind
``mcp-remote --protocol auto``, which answers the handshake itself and speaks 2026-07-28
upstream: no session either. The server is the page's ``mcp-actors serve --http … --modules
planning`` (handles are on by default over HTTP); mcp-remote comes from
``tests/npm_bridges/package-lock.json`` (`tests.npm_bridges.installed`).

The scripted model (`tests.npm_bridges.model`) opens conversations and passes their
handles; each bridge process is a new upstream HTTP session, so a handle that outlives
one proves the state is the conversation's, not the connection's. mcp-remote forwards a
request's ``_meta`` untouched (in the modern rewrite too), so a host that names its
session keeps it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .._mcp_helpers import http_server
from .._npm import INSTALL_TIMEOUT
from ..npm_bridges import (
    SOURCE,
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
from ..npm_bridges.model import Answer, ask, goals

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from .._mcp_helpers import HttpServer

NEEDED_BY = "the mcp-remote tests"
MCP_ACTORS = Path(sys.executable).with_name("mcp-actors")
MODERN, LEGACY = "2026-07-28", "2025-11-25"

# npm ci of the bridges happens in the module's first test.
pytestmark = pytest.mark.timeout(INSTALL_TIMEOUT + 600)


@attrs.frozen
class Host:
    """A desktop host: the era its SDK client opens with, and what it adds to the bridge."""

    mode: Literal["legacy", "auto"]
    """The SDK ``Client``'s ``mode``: the initialize handshake, or the discover probe."""
    bridge: tuple[str, ...]
    """Arguments the configuration adds to mcp-remote's."""
    era: str
    """The protocol version the host ends up speaking to the bridge."""
    upstream_session: bool
    """Whether the server sees an Mcp-Session-Id: a 2025-era session between bridge and
    server, which calls that name nothing land in."""


HOSTS = {
    "2025-host": Host("legacy", (), LEGACY, upstream_session=True),
    "2026-host": Host("auto", (), MODERN, upstream_session=False),
    "2025-host-protocol-auto": Host("legacy", ("--protocol", "auto"), LEGACY, False),
}
EVERY_HOST = pytest.mark.parametrize("host", HOSTS.values(), ids=HOSTS.keys())


@pytest.fixture(scope="module")
def bridges() -> Bridges:
    """mcp-remote (and supergateway) installed: a skip, or a failure under CI, at setup."""
    return installed(NEEDED_BY)


def configured_entry() -> dict[str, Any]:
    """The one server of the page's ``claude_desktop_config.json``."""
    config = json.loads((SOURCE / "claude_desktop_config.json").read_text(encoding="utf-8"))
    (entry,) = config["mcpServers"].values()
    return dict(entry)


@asynccontextmanager
async def served(*extra: str) -> AsyncIterator[HttpServer]:
    """The page's ``mcp-actors serve --http 127.0.0.1:8000 …``, on a free port instead."""
    line = command_of("serve-http")
    at = line.index("--http")
    assert line[:2] == ["mcp-actors", "serve"], line
    arguments = [*line[2:at], *line[at + 2 :], *extra]
    async with http_server(*arguments, command=(str(MCP_ACTORS), "serve")) as server:
        yield server


@attrs.frozen
class Desktop:
    """How the test starts desktop hosts: one bridge process each, as a host does."""

    bridges: Bridges
    url: str
    host: Host
    environment: Mapping[str, str]
    """Added to each bridge's environment: the test's process marker, its config dir."""

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[Client]:
        """Start mcp-remote as configured (pointed at `url`) and connect the host to it."""
        entry = configured_entry()
        assert entry["command"] == "npx", entry
        arguments = [str(argument) for argument in entry["args"]]
        assert arguments[-1] == "http://127.0.0.1:8000/mcp", arguments
        command = as_npx_runs(self.bridges, ["npx", *arguments[:-1], self.url, *self.host.bridge])
        server = StdioServerParameters(
            command=command[0], args=command[1:], env=dict(self.environment)
        )
        with tempfile.TemporaryFile("w+") as errlog:  # the bridge's log, as a host keeps it
            async with Client(stdio_client(server, errlog=errlog), mode=self.host.mode) as client:
                assert client.protocol_version == self.host.era
                yield client


@asynccontextmanager
async def desktop(
    bridges: Bridges, host: Host, tmp_path: Path, *serve: str
) -> AsyncIterator[Desktop]:
    """The server (``serve`` options added) and a way to start hosts in front of it; no
    process either starts outlives the block."""
    async with owned() as marker, served(*serve) as server:
        # mcp-remote keeps its OAuth files and locks in MCP_REMOTE_CONFIG_DIR (~/.mcp-auth).
        environment = {**marker, "MCP_REMOTE_CONFIG_DIR": str(tmp_path / "mcp-auth")}
        yield Desktop(bridges, server.url, host, environment)


@EVERY_HOST
async def test_a_model_keeps_each_conversation_through_mcp_remote(
    bridges: Bridges, host: Host, tmp_path: Path
) -> None:
    """Two conversations in one host, their calls interleaved, stay apart; a new bridge
    process (a new upstream session) carries on a conversation from its handle alone."""
    async with desktop(bridges, host, tmp_path) as start:
        async with start.opened() as client:
            first, second = await two_conversations(client)
            await each_sees_its_own(client, first, second)
        async with start.opened() as client:  # the host restarted: a new bridge, new session
            await carried_on(client, first, second)


@EVERY_HOST
async def test_the_host_named_session_reaches_through_mcp_remote(
    bridges: Bridges, host: Host, tmp_path: Path
) -> None:
    """mcp-remote forwards ``_meta``: a session the host names is kept across bridge
    processes, and it wins over a handle passed beside it."""
    async with desktop(bridges, host, tmp_path) as start:
        await named_session_kept(start.opened, {"sessionId": "desktop-1"})


@EVERY_HOST
async def test_without_handles_mcp_remote_keeps_only_what_its_upstream_session_does(
    bridges: Bridges, host: Host, tmp_path: Path
) -> None:
    """``--no-handles``: no ``conversation__start``; a 2025 host's calls share its one
    upstream session (two conversations see each other; a host restart loses them all),
    and with no upstream session every call that names none is refused."""
    async with desktop(bridges, host, tmp_path, "--no-handles") as start:
        async with start.opened() as client:
            created, listed = await two_goals_without_handles(client)
            refused = [answer.refused for answer in created]
            assert refused == [not host.upstream_session] * 2, created
            if host.upstream_session:
                assert listed == Answer(goals("ship A", "ship B"), False)
            else:
                assert listed.refused, listed
                assert "names no session" in listed.text, listed
        if host.upstream_session:
            async with start.opened() as client:
                assert await ask(client, "planning__list_goals", {}) == Answer(goals(), False)
