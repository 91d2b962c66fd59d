"""What a load run calls: any MCP server, as opened official-SDK client sessions.

A `Target` hands out `mcp.ClientSession` objects, each one client of the server,
opened in the target's protocol era (`actors.harness._eras`: 2026-07-28's
``server/discover`` by default, or the ``initialize`` handshake) and closed with
its block:

* `StdioTarget` starts a command (``python server.py``) per session and
  speaks to it over stdin and stdout, as a desktop host does;
* `HttpTarget` opens a Streamable HTTP client per session on a URL, with a
  bearer token if given;
* `serve_module_http` runs ``python -m actors serve --http`` on a free port of
  127.0.0.1 meanwhile and is then an `HttpTarget` on the URL it printed;
  `serve_command` is the command line that serves modules over stdio;
* `serve_module_in_process` opens a runtime of the modules in this process
  meanwhile, as ``serve`` would, and is then an `InProcessTarget`: each
  session the SDK's client connected to it in memory (`actors.testing.connect`),
  no transport between them.

Every process started here is stopped when its block ends, also on an error or
a cancellation: the SDK's stdio client closes stdin and then kills the process
group; `serve_module_http` terminates its server, then kills it. No wait on a
server is unbounded: a session's opening (``server/discover`` or ``initialize``)
takes at most the target's `open_timeout` (`NoAnswer` after it), and an HTTP
session's closing (its DELETE) a few seconds.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final, Protocol, final, runtime_checkable

import attrs
import trio

from ._eras import DEFAULT_ERA, OPENING, check_era, version_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from contextlib import AbstractAsyncContextManager

    from mcp import ClientSession

    from protocol import HandleKeys

    from .._target import CallTarget
    from ._eras import Era

__all__ = [
    "HttpTarget",
    "InProcessTarget",
    "NoAnswer",
    "ReadsGarbage",
    "StdioTarget",
    "Target",
    "TargetError",
    "counted",
    "garbage_note",
    "serve_command",
    "serve_module_http",
    "serve_module_in_process",
]

_MARKER: Final = "MCP_ACTORS_BENCH_PROCESS"
"""An environment variable each stdio server gets, unique to it: how its pid is found."""
OPEN_TIMEOUT: Final = 60.0
"""Seconds a session may take to open by default: a busy machine takes seconds to import
a server over stdio, and its answer to the session's opening comes after that."""
_STARTUP_SECONDS: Final = 60.0  # for serve_module_http's server to listen
_STOP_SECONDS: Final = 5.0
_CLOSE_SECONDS: Final = 5.0  # an HTTP session's DELETE a server never answers
_LOG_TAIL: Final = 2000  # characters of a server's output quoted in an error
_GARBAGE_SHOWN: Final = 200  # characters of the first message that is not JSON-RPC


class Target(Protocol):
    """An MCP server to call: opened client sessions, and its process if local."""

    def session(self) -> AbstractAsyncContextManager[ClientSession]:
        """A new client session, opened; closed (and its process stopped) with the block."""
        ...

    @property
    def server_pid(self) -> int | None:
        """A local server process whose CPU time can be read, else None."""
        ...


class TargetError(Exception):
    """A server could not be started or reached; the message says which and why."""


class NoAnswer(TargetError):
    """A server did not answer in time: a session's opening, or (``bench``) its calls."""

    def noting_garbage(self, target: object) -> NoAnswer:
        """The same error, with what `target` received that is not JSON-RPC, if anything."""
        return NoAnswer(f"{self}{garbage_note(target)}")


@runtime_checkable
class ReadsGarbage(Protocol):
    """A target that notes what its servers sent that is not a JSON-RPC message."""

    @property
    def garbage(self) -> str | None:
        """What was received that is not JSON-RPC, described (how much, the first); or None."""
        ...


_SDK_GARBAGE_LOGS: Final = {
    ("mcp.client.stdio", "Failed to parse JSONRPC message from server"),
    ("mcp.client.streamable_http", "Error parsing SSE message"),
    ("mcp.client.streamable_http", "Error parsing JSON response"),
}
"""The SDK's loggers and the records each logs, a traceback, for what is not JSON-RPC."""


class _GarbageLogged(logging.Filter):
    """Drops the SDK's traceback for a message that is not JSON-RPC: a target counts it, and
    the error that ends the run quotes the first (`garbage_note`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return (record.name, record.msg) not in _SDK_GARBAGE_LOGS


def quiet_sdk_garbage_logs() -> None:
    """Keep the SDK from printing a traceback per message that is not JSON-RPC (the
    commands say it once, in their error); once per process is enough."""
    for name in {logger for logger, _ in _SDK_GARBAGE_LOGS}:
        logger = logging.getLogger(name)
        if not any(isinstance(each, _GarbageLogged) for each in logger.filters):
            logger.addFilter(_GarbageLogged())


def counted(number: int, thing: str) -> str:
    """``1 call``, ``2 calls``: `number` of `thing`, for a message."""
    return f"{number} {thing}{'' if number == 1 else 's'}"


def _shown(fault: Exception) -> str:
    """A transport fault as one short line: what was received and what is wrong with it."""
    errors = getattr(fault, "errors", None)  # pydantic's: the line received, and why not
    if callable(errors):
        first = errors()[0]
        return f"{first.get('input')!r}"[:_GARBAGE_SHOWN] + f" ({first.get('msg')})"
    return f"{type(fault).__name__}: {' '.join(str(fault).split())}"[:_GARBAGE_SHOWN]


def garbage_note(target: object) -> str:
    """A line for an error about `target`: what it sent that is not JSON-RPC, if anything."""
    garbage = target.garbage if isinstance(target, ReadsGarbage) else None
    return "" if garbage is None else f"\nthe server also sent {garbage}"


@attrs.define(eq=False)
class _Garbage:
    """What a target's sessions received that is not a JSON-RPC message: a count, the first."""

    count: int = 0
    first: str | None = None

    async def note(self, message: object) -> None:
        """The sessions' message handler: transport faults are counted, the rest ignored."""
        if isinstance(message, Exception):
            self.count += 1
            if self.first is None:
                self.first = _shown(message)

    def describe(self) -> str | None:
        """How much, and the first; None when all was JSON-RPC."""
        if not self.count:
            return None
        what = "message that is not" if self.count == 1 else "messages that are not"
        return f"{self.count} {what} JSON-RPC, the first: {self.first}"


def _tail(log: IO[str]) -> str:
    """The end of a server's output so far, for an error message."""
    log.flush()
    log.seek(0)
    text = log.read()[-_LOG_TAIL:].strip()
    return f"; its output ends with:\n{text}" if text else "; it printed nothing"


def _children() -> list[int]:
    """This process's live child processes (none where there is no /proc)."""
    found = []
    for path in Path("/proc/self/task").glob("*/children"):
        try:
            found += [int(pid) for pid in path.read_text().split()]
        except OSError:
            continue  # the thread ended meanwhile
    return found


def _child_marked(marker: str) -> int | None:
    """The child process whose environment holds `marker`, or None."""
    wanted = f"{_MARKER}={marker}".encode()
    for pid in _children():
        try:
            if wanted in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                return pid
        except OSError:
            continue  # gone, or not ours to read
    return None


@asynccontextmanager
async def _opened(
    read: object, write: object, era: Era, seconds: float, garbage: _Garbage
) -> AsyncIterator[ClientSession]:
    """An SDK ClientSession on a transport's streams, opened in `era` within `seconds` (or
    `NoAnswer`), what is not JSON-RPC noted in `garbage`."""
    from mcp import ClientSession

    async with ClientSession(read, write, message_handler=garbage.note) as session:  # type: ignore[arg-type]  # the SDK's streams
        await open_in_era(session, era, seconds)
        yield session


async def open_in_era(session: ClientSession, era: Era, seconds: float) -> None:
    """Open `session` in `era` (`actors.harness._eras`) within `seconds`: `NoAnswer` after
    them, `TargetError` when the server does not speak `era`."""
    with trio.move_on_after(seconds):
        if era == "2025":
            await session.initialize()
        else:
            await _discover(session)
        return
    msg = (
        f"no answer to {OPENING[era]} within {seconds:g} s: check that it serves MCP "
        "on this transport, or give a slow start longer"
    )
    raise NoAnswer(msg)


async def _discover(session: ClientSession) -> None:
    """``server/discover``, asked again while the SDK's own probe timeout cuts it short."""
    import pydantic
    from mcp import MCPError
    from mcp.types import REQUEST_TIMEOUT

    while True:
        try:
            await session.discover()
        except MCPError as exc:
            # The SDK waits 10 s for a probe, less than a stdio server may take to start;
            # the caller's deadline bounds the probes.
            if exc.code == REQUEST_TIMEOUT:
                continue
            why = f"server/discover answered the error {exc.code}: {exc}"
            raise _not_2026(why) from None
        except (pydantic.ValidationError, RuntimeError) as exc:
            shown = " ".join(str(exc).split())[:_GARBAGE_SHOWN]
            why = f"its answer to server/discover is not 2026-07-28's ({shown})"
            raise _not_2026(why) from None
        return


def _not_2026(why: str) -> TargetError:
    msg = (
        f"the server does not speak the 2026-07-28 era: {why}; a server of the initialize "
        "handshake alone is checked in the 2025 era (--era 2025)"
    )
    return TargetError(msg)


def _innermost(exc: BaseException) -> BaseException:
    """The first exception in `exc` (the SDK's task groups wrap them in groups)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _not_opened(exc: BaseException, message: str) -> TargetError:
    """The error for a session that did not open: `NoAnswer` if that is what stopped it."""
    cls = NoAnswer if isinstance(_innermost(exc), NoAnswer) else TargetError
    return cls(message)


def _check_open_timeout(_instance: object, _attribute: object, value: float) -> None:
    if not 0 < value < math.inf:
        msg = f"open_timeout must be a positive number of seconds, not {value!r}"
        raise ValueError(msg)


@final
@attrs.frozen
class StdioTarget:
    """A command started once per session, spoken to over its stdin and stdout."""

    command: tuple[str, ...]
    """The program and its arguments."""
    open_timeout: float = attrs.field(default=OPEN_TIMEOUT, validator=_check_open_timeout)
    """Seconds a session may take to open: the process's start and its answer to
    ``server/discover`` (or ``initialize``); `NoAnswer` after that."""
    era: Era = attrs.field(default=DEFAULT_ERA, converter=check_era)
    """The protocol era each session opens in (`actors.harness._eras`)."""
    _live: dict[str, int | None] = attrs.field(factory=dict, init=False, repr=False)
    """Each open session's marker -> its process id (None where it could not be found)."""
    _garbage: _Garbage = attrs.field(factory=_Garbage, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not self.command:
            msg = "the command is empty: name the program that serves MCP on stdio"
            raise ValueError(msg)

    def session(self) -> AbstractAsyncContextManager[ClientSession]:
        """A new server process and an opened session on it; stopped with the block."""
        return self._session()

    @property
    def server_pid(self) -> int | None:
        """The one server process while exactly one session is open, else None."""
        pids = self.server_pids
        return pids[0] if len(pids) == 1 and len(self._live) == 1 else None

    @property
    def server_pids(self) -> tuple[int, ...]:
        """The processes of the sessions open now that could be found (Linux /proc)."""
        return tuple(pid for pid in self._live.values() if pid is not None)

    @property
    def garbage(self) -> str | None:
        """What the servers wrote on stdout that is not JSON-RPC, described; or None."""
        return self._garbage.describe()

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[ClientSession]:
        from mcp import StdioServerParameters, stdio_client  # the server extra

        marker = uuid.uuid4().hex
        # The whole environment, as a shell would pass it (the SDK passes a few variables
        # only), and the marker that finds this session's process among our children.
        env = {**os.environ, _MARKER: marker}
        params = StdioServerParameters(command=self.command[0], args=[*self.command[1:]], env=env)
        where = " ".join(self.command)
        opened = False
        # The server's output goes to a file, never to a pipe that could fill and stall it.
        with tempfile.TemporaryFile("w+") as log:
            try:
                async with (
                    stdio_client(params, errlog=log) as (read, write),
                    _opened(read, write, self.era, self.open_timeout, self._garbage) as session,
                ):
                    self._live[marker] = _child_marked(marker)
                    opened = True
                    try:
                        yield session
                    finally:
                        del self._live[marker]
            except Exception as exc:
                if opened:
                    raise
                msg = f"{where!r} did not open an MCP session ({_first(exc)}){_tail(log)}"
                raise _not_opened(exc, msg) from exc


def _first(exc: BaseException) -> str:
    """The first exception in `exc` (the SDK's task groups wrap them in groups), as text."""
    first = _innermost(exc)
    return f"{type(first).__name__}: {first}"


@final
@attrs.frozen
class HttpTarget:
    """A Streamable HTTP endpoint; each session its own SDK client and connection pool."""

    url: str
    """The MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    token: str | None = attrs.field(default=None, repr=False)
    """Sent as ``Authorization: Bearer TOKEN`` when given."""
    server_pid: int | None = None
    """The server's process when it is local and known (`serve_module_http`, ``--server-pid``)."""
    open_timeout: float = attrs.field(default=OPEN_TIMEOUT, validator=_check_open_timeout)
    """Seconds a session may take to open (its answer to ``server/discover`` or
    ``initialize``); `NoAnswer` after."""
    era: Era = attrs.field(default=DEFAULT_ERA, converter=check_era)
    """The protocol era each session opens in (`actors.harness._eras`): in 2026-07-28's
    there is no ``Mcp-Session-Id``, in the handshake's the server names one."""
    _garbage: _Garbage = attrs.field(factory=_Garbage, init=False, repr=False)

    def session(self) -> AbstractAsyncContextManager[ClientSession]:
        """A new HTTP client and an opened session (a handshake's HTTP session ended with the
        block)."""
        return self._session()

    @property
    def garbage(self) -> str | None:
        """What the server sent that is not JSON-RPC, described; or None."""
        return self._garbage.describe()

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[ClientSession]:
        import httpx2  # the SDK's HTTP client
        from mcp.client.streamable_http import streamable_http_client

        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        # The SDK's own timeouts: 30 s to connect or write, 5 minutes for a read (an SSE stream).
        timeout = httpx2.Timeout(30.0, read=300.0)
        opened = False
        left_with: BaseException | None = None
        # Closing sends a DELETE, which a server that stopped answering leaves unanswered.
        with trio.CancelScope() as closing:
            try:
                async with (
                    httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
                    streamable_http_client(self.url, http_client=http) as (read, write),
                    _opened(read, write, self.era, self.open_timeout, self._garbage) as session,
                ):
                    opened = True
                    try:
                        yield session
                    except BaseException as exc:
                        left_with = exc
                        raise
                    finally:
                        closing.deadline = trio.current_time() + _CLOSE_SECONDS
            except Exception as exc:
                if opened:
                    raise
                msg = f"{self.url} did not open an MCP session ({_first(exc)})"
                raise _not_opened(exc, msg) from exc
        if closing.cancelled_caught and left_with is not None:
            raise left_with  # the cut-short closing must not swallow what ended the block


def serve_command(modules: Sequence[str], state: str, *extra: str) -> list[str]:
    """``python -m actors serve`` for `modules` (built-in names or ``package.module:attr``)."""
    command = [sys.executable, "-m", "actors", "serve", "--state", state]
    builtins = [name for name in modules if ":" not in name]
    if builtins:
        command += ["--modules", ",".join(builtins)]
    for spec in modules:
        if ":" in spec:
            command += ["--module", spec]
    # Warnings only: a log line per call would be a cost of the logging, not of the server.
    return [*command, "--log-level", "warning", *extra]


@asynccontextmanager
async def serve_module_http(
    modules: Sequence[str],
    state: str,
    token: str | None = None,
    open_timeout: float = OPEN_TIMEOUT,
    *,
    era: Era = DEFAULT_ERA,
    serve_options: Sequence[str] = (),
) -> AsyncIterator[HttpTarget]:
    """``actors serve --http 127.0.0.1:0`` for `modules` meanwhile, as an `HttpTarget`
    (sessions opening in `era` within `open_timeout`); `serve_options` are more of
    ``serve``'s options (``--handles``…)."""
    extra = ["--http", "127.0.0.1:0"] + ([] if token is None else ["--token", token])
    command = serve_command(modules, state, *extra, *serve_options)
    with tempfile.TemporaryFile("w+") as log:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        try:
            url = await _listening(process, log)
            yield HttpTarget(url, token, process.pid, open_timeout, era)
        finally:
            with trio.CancelScope(shield=True):
                await _stop(process)


async def _listening(process: trio.Process, log: IO[str]) -> str:
    """The URL the server prints once it listens; TargetError if it exits or takes too long."""
    from ..server._logs import LISTENING  # as text or as JSON (--log-format json)

    with trio.move_on_after(_STARTUP_SECONDS):
        while process.poll() is None:
            log.flush()
            log.seek(0)
            found = LISTENING.search(log.read())
            if found is not None:
                return found.group(1)
            await trio.sleep(0.05)  # polls the log: the server writes it, no event to wait on
        msg = f"the server exited with {process.returncode} before it listened{_tail(log)}"
        raise TargetError(msg)
    msg = f"the server did not listen within {_STARTUP_SECONDS:g} s{_tail(log)}"
    raise TargetError(msg)


async def _stop(process: trio.Process) -> None:
    """SIGTERM (the server drains), then SIGKILL if it is still there after a while."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(_STOP_SECONDS):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


@final
@attrs.frozen
class InProcessTarget:
    """A runtime in this process; each session the SDK's client connected to it in memory."""

    runtime: CallTarget
    """What serves the calls: `serve_module_in_process`'s runtime, or one of your own."""
    era: Era = attrs.field(default=DEFAULT_ERA, converter=check_era)
    """The protocol era each client speaks (`actors.harness._eras`)."""
    handles: HandleKeys | None = attrs.field(default=None, repr=False)
    """The keys conversation handles are minted with (``serve --handles``); None: off."""

    def session(self) -> AbstractAsyncContextManager[ClientSession]:
        """A new client in memory, opened in the era, in a session of its own; closed with
        the block."""
        return self._session()

    @property
    def server_pid(self) -> int | None:
        """None: the server is this process, whose CPU time is the client's."""
        return None

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[ClientSession]:
        from mcp import Client  # the server extra

        from ..server import McpAdapter, connection_session, stdio_caller

        # As `serve` on stdio: a connection of its own session, reading the handles it mints;
        # the SDK's in-memory client speaks the handshake ("legacy"), or 2026-07-28's requests
        # each dispatched alone, that version adopted without a probe (no fallback).
        sole = stdio_caller(connection_session(), handles=self.handles)
        adapter = McpAdapter(self.runtime, caller=sole, handles=self.handles)
        mode = "legacy" if self.era == "2025" else version_of(self.era)
        async with Client(adapter.server, mode=mode) as client:
            yield client.session


@asynccontextmanager
async def serve_module_in_process(
    modules: Sequence[str], state: str, *, era: Era = DEFAULT_ERA, handles: bool = False
) -> AsyncIterator[InProcessTarget]:
    """A runtime of `modules` (built-in names or ``package.module:attr``) on the store at
    `state`, in this process meanwhile, as an `InProcessTarget` whose clients speak `era`,
    minting conversation handles with `handles` (as ``serve --handles``)."""
    from .._runtime import open_runtime
    from ..server import ConfigurationError, ServeOptions
    from ..server._handle_keys import serving_keys
    from ..server._options import build_modules
    from ..store import open_store

    options = ServeOptions(modules=tuple(modules), state=state, handles=handles)
    try:
        served = build_modules(options)
    except (ConfigurationError, ValueError, ImportError) as exc:
        msg = f"the modules {', '.join(modules)} could not be served: {exc}"
        raise TargetError(msg) from exc
    async with open_store(options.state_url, create=options.state_creation) as store:
        try:
            keys, _ = serving_keys(options, store.url)  # beside a SQLite file, as serve's
        except ConfigurationError as exc:
            msg = f"the handle keys for {store.url} could not be made: {exc}"
            raise TargetError(msg) from exc
        async with open_runtime(served, options.runtime, store=store) as runtime:
            yield InProcessTarget(runtime, era, keys)
