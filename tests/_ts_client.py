"""The official TypeScript MCP SDK client as a test's peer: ``tests/ts_client/drive.mjs``.

``drive(plan, stdio=…)`` or ``drive(plan, http=…)`` starts ``node drive.mjs``, connects its
SDK ``Client`` to a server (one it spawns on stdio, or one at a Streamable HTTP URL), runs
the plan's steps in order and returns one result per step: ``{"result": …}``, or
``{"error": {"code", "message", "data"?, "name"}}`` for a step the server (or the client)
refused, the plan going on. The steps (``listTools``, ``callTool``, ``readResource``,
``subscribe``, ``waitFor``, ``notifications``, ``getPrompt``, ``setLoggingLevel``,
``elicitations``, …) and the client options (capabilities, answers to elicitation and
sampling) are described at the top of ``drive.mjs``. `open_ts_client` keeps the client
connected while the test sends steps a few at a time, to interleave it with other
clients.

The SDK is pinned in ``tests/ts_client/package-lock.json`` and installed (by
`tests._npm.npm_installed`) with ``npm ci`` once per lock file, outside the source tree, under
``$XDG_CACHE_HOME/mcp-actors-tests/ts_client/<hash>`` (``~/.cache`` by default), a file
lock keeping parallel test processes from installing it twice. Without Node.js and npm
(or when the install fails) the tests that use it are skipped, or fail when ``CI`` is
set: call `installed` from a synchronous fixture, so that this happens at setup, before
the test's trio run (where the reason would come wrapped in an exception group).

Node runs in a process group of its own, which is killed on the way out with everything
in it (the stdio server it spawned too), whatever happened in the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

import trio

from . import _npm
from ._npm import INSTALL_TIMEOUT as INSTALL_TIMEOUT  # the names this module always had
from ._npm import MANIFESTS as MANIFESTS
from ._npm import digest, npm_installed, tail

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

SOURCE = Path(__file__).resolve().with_name("ts_client")
CACHE_NAME = "ts_client"
SCRIPTS = ("drive.mjs", "peer.mjs")
TIMEOUT = 120.0  # seconds for a whole `drive`, or for one `TsClient.run`
CLOSE_TIMEOUT = 30.0  # seconds for the client to close (the SDK gives a stdio server ~4 s)

Step = dict[str, Any]
"""One step of a plan: ``{"op": NAME, …arguments}`` (see ``drive.mjs``)."""
Outcome = dict[str, Any]
"""What a step gave: ``{"step", "op", "result"}`` or ``{"step", "op", "error"}``."""


class Stdio(NamedTuple):
    """A server for the client to spawn and talk to on stdio."""

    command: str
    args: Sequence[str] = ()
    cwd: str | Path | None = None
    env: Mapping[str, str] | None = None
    """Added to the few variables the SDK passes on (HOME, PATH, …), as in the SDK."""


class Http(NamedTuple):
    """A Streamable HTTP server for the client to reach."""

    url: str
    headers: Mapping[str, str] | None = None


class ConnectFailed(Exception):
    """The client could not connect (or the server refused it); `error` says why."""

    def __init__(self, error: Mapping[str, Any], log: str) -> None:
        super().__init__(f"the TypeScript client could not connect: {error}\n{tail(log)}")
        self.error = dict(error)
        self.log = log


class HarnessError(AssertionError):
    """drive.mjs broke, or a plan asked for a step it does not know."""


def step(op: str, **arguments: Any) -> Step:
    """A plan's step: ``step("callTool", name="notes__add_note", arguments={…})``."""
    return {"op": op, **arguments}


def result_of(outcome: Outcome) -> Any:
    """The result of a step that succeeded; an AssertionError naming the error otherwise."""
    assert "result" in outcome, f"step {outcome.get('op')} failed: {outcome.get('error')}"
    return outcome["result"]


def error_of(outcome: Outcome) -> dict[str, Any]:
    """The error of a step that failed; an AssertionError showing the result otherwise."""
    assert "error" in outcome, f"step {outcome.get('op')} succeeded: {outcome.get('result')}"
    error: dict[str, Any] = outcome["error"]
    return error


def cache_root() -> Path:
    """Where installs of the client live: one folder per lock file."""
    return _npm.cache_root(CACHE_NAME)


def _place(folder: Path, name: str) -> Path:
    """Copy script `name` beside the installed modules, named by its content.

    Node resolves the SDK from the script's folder up; a new name for new content
    means a running test never sees a script change under it.
    """
    content = (SOURCE / name).read_bytes()
    stem, _, suffix = name.rpartition(".")
    placed = folder / f"{stem}-{digest(content)}.{suffix}"
    if not placed.exists():
        with tempfile.NamedTemporaryFile(dir=folder, delete=False) as file:
            file.write(content)
        os.chmod(file.name, 0o644)
        os.replace(file.name, placed)
    return placed


def installed() -> dict[str, Path]:
    """The client's scripts, by source name, installed with their modules (blocks: npm ci).

    Skips the test (fails it under ``CI``) when Node.js or npm is missing or the install
    fails.
    """
    folder = npm_installed(SOURCE, CACHE_NAME, needed_by="the TypeScript client's tests")
    return {name: _place(folder, name) for name in SCRIPTS}


async def scripts() -> dict[str, Path]:
    """`installed`, off the event loop."""
    return await trio.to_thread.run_sync(installed)


def _connection(stdio: Stdio | None, http: Http | None) -> dict[str, Any]:
    """The configuration's ``stdio`` or ``http`` entry."""
    if (stdio is None) == (http is None):
        raise TypeError("give exactly one of stdio= and http=")
    if stdio is not None:
        command, args, cwd, env = Stdio(*stdio)
        entry: dict[str, Any] = {"command": command, "args": list(args)}
        if cwd is not None:
            entry["cwd"] = str(cwd)
        if env is not None:
            entry["env"] = dict(env)
        return {"stdio": entry}
    assert http is not None
    url, headers = Http(*http)
    return {"http": {"url": url, "headers": dict(headers or {})}}


class TsClient:
    """A connected ``drive.mjs``: send it steps, read what they gave."""

    def __init__(self, process: trio.Process, log: IO[bytes]) -> None:
        self.process = process
        self._log = log
        self._buffer = b""
        self._next = 0
        self.connected: dict[str, Any] = {}
        """The connection: serverInfo, capabilities, protocolVersion, sessionId, pid."""
        self.closed: Outcome | None = None
        """The close line, once the client has closed."""

    def log(self) -> str:
        """drive.mjs's stderr so far, with that of a stdio server it spawned."""
        return os.pread(self._log.fileno(), 1 << 24, 0).decode("utf-8", errors="replace")

    async def _send(self, value: Any) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(json.dumps(value).encode() + b"\n")

    async def _line(self) -> Outcome:
        """The next line drive.mjs prints, parsed."""
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some()
            if not chunk:
                await self.process.wait()
                code = self.process.returncode
                msg = f"drive.mjs ended its output (exit code {code}):\n{tail(self.log())}"
                raise HarnessError(msg)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        outcome: Outcome = json.loads(line)
        return outcome

    async def _open(self, config: Mapping[str, Any]) -> None:
        await self._send(config)
        opened = await self._line()
        if "error" in opened:
            raise ConnectFailed(opened["error"], self.log())
        self.connected = opened["result"]

    async def run(self, steps: Sequence[Step], seconds: float = TIMEOUT) -> list[Outcome]:
        """Run `steps` in order; what each gave, within `seconds` for them all."""
        with trio.fail_after(seconds):
            await self._send(list(steps))
            outcomes = [await self._line() for _ in steps]
        for outcome in outcomes:
            assert outcome.get("step") == self._next, outcome
            self._next += 1
            if outcome.get("error", {}).get("name") == "PlanError":
                raise HarnessError(f"drive.mjs does not understand a step: {outcome}")
        return outcomes

    async def step(self, op: str, **arguments: Any) -> Outcome:
        """Run one step; what it gave."""
        (outcome,) = await self.run([step(op, **arguments)])
        return outcome

    async def aclose(self) -> None:
        """End the input: the client closes (over HTTP, DELETEs its session) and exits.

        Once: the block of `open_ts_client` calls it again, to no effect.
        """
        if self.closed is not None:
            return
        assert self.process.stdin is not None
        with trio.fail_after(CLOSE_TIMEOUT):
            await self.process.stdin.aclose()
            self.closed = await self._line()
            code = await self.process.wait()
        if code != 0:
            raise HarnessError(f"drive.mjs exited with {code}:\n{tail(self.log())}")


def _kill_group(process: trio.Process) -> None:
    """SIGKILL node's process group: node, and a stdio server it spawned."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


@asynccontextmanager
async def open_ts_client(
    *,
    stdio: Stdio | tuple[Any, ...] | None = None,
    http: Http | tuple[Any, ...] | None = None,
    options: Mapping[str, Any] | None = None,
    connect_seconds: float = TIMEOUT,
) -> AsyncIterator[TsClient]:
    """A connected TypeScript SDK client; closed cleanly when the block ends, else killed.

    `options` is the rest of drive.mjs's configuration: ``capabilities``, ``onElicit``,
    ``onSample``, ``roots``, ``clientInfo``, ``requestTimeoutMs``, ``terminateSession``.
    Connecting takes at most `connect_seconds`; a refusal raises `ConnectFailed`.
    """
    config = {**(options or {}), **_connection(stdio, http)}  # type: ignore[arg-type]
    script = (await scripts())["drive.mjs"]
    with tempfile.TemporaryFile() as log:
        process = await trio.lowlevel.open_process(
            ["node", str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=script.parent,
            start_new_session=True,
        )
        client = TsClient(process, log)
        try:
            with trio.fail_after(connect_seconds):
                await client._open(config)
            yield client
            await client.aclose()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    _kill_group(process)
                    await process.wait()
                # A stdio server that outlived node's close (it gives one ~4 s) goes too.
                _kill_group(process)


async def drive(
    plan: Sequence[Step],
    *,
    stdio: Stdio | tuple[Any, ...] | None = None,
    http: Http | tuple[Any, ...] | None = None,
    options: Mapping[str, Any] | None = None,
    seconds: float = TIMEOUT,
) -> list[Outcome]:
    """Connect, run `plan`, close: what each step gave, all within `seconds`.

    ``stdio=(command, args, cwd, env)`` spawns the server; ``http=(url, headers)``
    reaches one. A refused connection raises `ConnectFailed`; a broken harness (or a
    step it does not know) `HarnessError`.
    """
    with trio.fail_after(seconds):
        async with open_ts_client(stdio=stdio, http=http, options=options) as client:
            return await client.run(plan)
