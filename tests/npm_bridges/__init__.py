"""mcp-remote and supergateway, the npm bridges put in front of a server, installed and owned.

This folder's ``package.json`` and ``package-lock.json`` pin both bridges (regenerate the
lock with ``npm install --package-lock-only`` here). `installed` puts them in the tests'
cache with ``npm ci`` (`tests._npm.npm_installed`) and finds each one's command (its
``bin``), run by the system's Node.js: a desktop host runs ``npx -y mcp-remote …`` the
same way. `owned` marks the environment of what a test starts (the bridges and, through
them, the servers they spawn) and, when the test ends, fails if any of it still runs.

The rest is what both bridges' tests ask of a client connected through one, with the
scripted model (`tests.npm_bridges.model`): two conversations kept apart and carried on by
a new client (`two_conversations`, `each_sees_its_own`, `carried_on`), a session the host
names (`named_session_kept`), and a server without handles
(`two_goals_without_handles`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import uuid
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from .._npm import npm_installed, unavailable
from .._processes import running_with
from .model import Answer, ask, at_once, create_goal, goals, list_goals, start_conversation

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping
    from contextlib import AbstractAsyncContextManager

    from mcp import Client
    from mcp.types import Tool

SOURCE = Path(__file__).resolve().parent
NODE_FLOOR = (20, 18, 1)  # undici 7, mcp-remote's HTTP client, needs Node.js 20.18.1
GONE_TIMEOUT = 60.0  # seconds for what a test started to exit once stopped: a busy machine


@attrs.frozen
class Bridges:
    """The installed bridges: each one's command, as Node.js runs it."""

    mcp_remote: tuple[str, ...]
    """``node …/mcp-remote/dist/proxy.js``: what ``npx -y mcp-remote`` runs."""
    supergateway: tuple[str, ...]
    """``node …/supergateway/dist/index.js``: what ``npx -y supergateway`` runs."""
    versions: Mapping[str, str]
    """The installed version of each package, by name."""


def installed(needed_by: str) -> Bridges:
    """The bridges, installed from the lock (blocks: ``npm ci``); a skip (a failure under
    CI) when Node.js is missing or too old or the install fails."""
    folder = npm_installed(SOURCE, "npm-bridges", needed_by=needed_by)
    _check_node(needed_by)
    modules = folder / "node_modules"
    commands, versions = {}, {}
    for name in ("mcp-remote", "supergateway"):
        manifest = json.loads((modules / name / "package.json").read_text(encoding="utf-8"))
        commands[name] = ("node", str(modules / name / manifest["bin"][name]))
        versions[name] = manifest["version"]
    return Bridges(commands["mcp-remote"], commands["supergateway"], versions)


def command_of(section: str) -> list[str]:
    """The command line of `section` in ``commands.sh`` (what a page shows), split as a
    shell splits it."""
    text = (SOURCE / "commands.sh").read_text(encoding="utf-8")
    body = text.split(f"# --8<-- [start:{section}]\n")[1].split(f"# --8<-- [end:{section}]")[0]
    return shlex.split(body.replace("\\\n", " "))


def as_npx_runs(bridges: Bridges, argv: list[str]) -> list[str]:
    """`argv`, an ``npx -y PACKAGE@VERSION ARGS`` line, as the installed package runs it:
    the version must be the one the lock installs."""
    npx, yes, package = argv[:3]
    name, _, version = package.partition("@")
    assert (npx, yes) == ("npx", "-y"), argv
    assert version == bridges.versions[name], f"{package}: the lock installs {bridges.versions}"
    command = bridges.mcp_remote if name == "mcp-remote" else bridges.supergateway
    return [*command, *argv[3:]]


def _check_node(needed_by: str) -> None:
    """Skip (fail under CI) unless the system's ``node`` is at least `NODE_FLOOR`."""
    shown = subprocess.run(
        ["node", "--version"], capture_output=True, text=True, timeout=60, check=False
    ).stdout.strip()
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", shown)
    if match is None or tuple(map(int, match.groups())) < NODE_FLOOR:
        floor = ".".join(map(str, NODE_FLOOR))
        unavailable(
            f"the bridges need Node.js {floor} or later; `node --version`: {shown!r}", needed_by
        )


@asynccontextmanager
async def owned() -> AsyncIterator[dict[str, str]]:
    """Variables to add to the environment of what the block starts; afterwards, every
    process that inherited them (wherever it was reparented) must exit: one still running
    after `GONE_TIMEOUT` is killed, and the test fails."""
    marker = f"NPM_BRIDGE_TEST_{uuid.uuid4().hex}"
    try:
        yield {marker: "1"}
    finally:
        with trio.CancelScope(shield=True):
            left = await _still_running(marker)
            for pid in left:  # ours: each inherited the marker
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes left running after the test: {left}"


async def _still_running(marker: str) -> list[int]:
    """The processes with `marker` still running after up to `GONE_TIMEOUT`."""
    with trio.move_on_after(GONE_TIMEOUT):
        # Other processes' exits: there is no event to wait on, so poll.
        while running_with(marker):  # noqa: ASYNC110
            await trio.sleep(0.1)
    return running_with(marker)  # a zombie's environment reads empty: it is not listed


async def tools_of(client: Client) -> dict[str, Tool]:
    """The tools the server lists to `client`, by name."""
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def two_conversations(client: Client) -> tuple[str, str]:
    """Two conversations started on `client`, their first goals (``ship A``, ``ship B``)
    created at the same time: their handles. The tool must require the handle."""
    tools = await tools_of(client)
    assert "conversation" in tools["planning__create_goal"].input_schema["required"]
    first, second = await start_conversation(client), await start_conversation(client)
    assert first != second
    created = await at_once(
        partial(create_goal, client, first, "ship A"),
        partial(create_goal, client, second, "ship B"),
    )
    assert [answer.refused for answer in created] == [False, False], created
    return first, second


async def each_sees_its_own(client: Client, first: str, second: str) -> None:
    """The `two_conversations` listed at the same time: each sees its own goal alone."""
    listed = await at_once(partial(list_goals, client, first), partial(list_goals, client, second))
    assert listed == [Answer(goals("ship A"), False), Answer(goals("ship B"), False)]


async def carried_on(client: Client, first: str, second: str) -> None:
    """A new client carries on the `two_conversations` from their handles alone."""
    assert await list_goals(client, first) == Answer(goals("ship A"), False)
    assert not (await create_goal(client, second, "and then")).refused
    assert await list_goals(client, second) == Answer(goals("ship B", "and then"), False)


async def named_session_kept(
    connect: Callable[[], AbstractAsyncContextManager[Client]], named: dict[str, str]
) -> None:
    """A goal created in the session `named` (a request's ``_meta``) on one client from
    `connect` is what a call naming it lists, even beside a handle (whose own conversation
    has none), and what a later client naming it finds."""
    async with connect() as client:
        conversation = await start_conversation(client)
        created = await ask(client, "planning__create_goal", {"goal": "named"}, meta=named)
        assert not created.refused, created
        both = await ask(client, "planning__list_goals", {"conversation": conversation}, named)
        assert both == Answer(goals("named"), False)
        assert await list_goals(client, conversation) == Answer(goals(), False)
    async with connect() as client:
        listed = await ask(client, "planning__list_goals", {}, meta=named)
        assert listed == Answer(goals("named"), False)


async def two_goals_without_handles(client: Client) -> tuple[list[Answer], Answer]:
    """With ``--no-handles`` (no ``conversation__start``, no handle argument): the answers
    to creating ``ship A`` and ``ship B``, meant as two conversations, then to listing."""
    tools = await tools_of(client)
    assert "conversation__start" not in tools
    assert "conversation" not in tools["planning__create_goal"].input_schema["properties"]
    created = [
        await ask(client, "planning__create_goal", {"goal": goal}) for goal in ("ship A", "ship B")
    ]
    return created, await ask(client, "planning__list_goals", {})
