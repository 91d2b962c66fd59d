"""The ``workspace`` module: run programs in a per-session working directory.

Enabling it is the host's decision
----------------------------------
This module runs real programs on the host, so no host gets it by accident:
``workspace(...)`` only builds the module, and a host must pass it to
``open_runtime`` itself (the CLI does so only with ``--allow-exec``). It is
not a sandbox. Commands are split with `shlex.split` and run without a shell,
and ``allow`` limits which program *names* may run (the basename of
``argv[0]``), but an allowed interpreter runs whatever code it is given, and
a command may read and write anything the host user can.

The session's directory
-----------------------
Each session works in ``<root>/<readable>-<digest>``: ``digest`` is a prefix
of the SHA-256 of the session id and ``readable`` keeps only ASCII letters,
digits, ``_`` and ``-`` of it, so an id like ``../../etc`` can name neither a
parent nor a sibling's directory. ``on_start`` creates it; ``heal()``, run
before every call, recreates it when something removed it behind the
session's back (seed 004's healing manager); ``on_stop`` deletes it, because
stopping (TTL expiry, eviction, shutdown) releases the session's state and
the directory is part of that state. A ``cwd`` argument is resolved inside it
(symlinks included) and refused if it lands outside.

Who owns a running process
--------------------------
A process outlives the call that started it, so the session's state owns it
and a task of the state watches it:

* `trio.lowlevel.open_process` starts the program and returns at once. The
  runtime hands the state a nursery its actor owns (``start_background``),
  and each process gets a *watcher* task there: it waits for the process to
  exit, kills its group when its ``timeout`` passes (status ``timed_out``),
  and reaps it at once, whether or not the session is ever called again.
  ``poll_process`` only reads what the watcher recorded.
* stdout and stderr go to anonymous temporary files (`tempfile.TemporaryFile`),
  not pipes: nobody has to drain them, so a chatty program never blocks on a
  full pipe, and the files are invisible to the commands. ``poll_process``
  reads the first ``output_cap`` bytes of each and reports ``truncated`` when
  there was more. On reaping, the output is read one last time and the files
  are closed, so only running processes hold descriptors.
* Exactly one party reaps a process: its watcher while the watcher runs, then
  ``on_stop``. `trio.Process.wait` reaps with no checkpoint before it returns,
  and the exit code is recorded with none after, so a watcher that is
  cancelled (by ``on_stop``, or by the runtime: a crash, a shutdown past its
  grace) has either reaped and recorded its process or left it unreaped.
  ``on_stop`` reaps a process itself only once its watcher has exited.
* ``on_stop`` sends SIGTERM, waits up to two seconds for the processes to be
  reaped, sends SIGKILL to what is left and waits again, then stops the
  watchers and closes the files. The kill and the reap after it run shielded,
  so they happen even when the runtime's ``stop_timeout`` cuts the grace
  short, and whether the watchers are still alive or were cancelled before.

Each program starts in a new session (``start_new_session``), so it is the
leader of its own process group and signals go to the whole group: the
children of an allowed program are stopped with it. The group is signalled
only while its leader is unreaped, because until then its id cannot be
reused by an unrelated process. POSIX only.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Final, Literal

import attrs
import trio

from protocol import CallResult, Scope, ToolContext

from .._errors import ToolError
from .._module import ToolModule

if TYPE_CHECKING:
    from collections.abc import Collection

__all__ = ["WorkspaceState", "workspace"]

logger = logging.getLogger("actors.workspace")

_Status = Literal["running", "exited", "killed", "timed_out"]

_MAX_RUNNING: Final = 16  # per session: each running process holds two open files
_TERM_GRACE: Final = 2.0  # seconds between SIGTERM and SIGKILL on stop
_REAP_TIMEOUT: Final = 1.0  # seconds to reap SIGKILLed processes, which die at once
_READABLE: Final = re.compile(r"[^A-Za-z0-9_-]+")


def _directory_name(session_id: str) -> str:
    """A directory name for `session_id` that cannot escape the root or collide."""
    readable = _READABLE.sub("_", session_id)[:32].strip("_") or "session"
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]
    return f"{readable}-{digest}"


def _capture(file: IO[bytes], cap: int) -> tuple[str, bool]:
    """The first `cap` bytes written to `file`, decoded, and whether there were more."""
    # pread leaves the child's write offset alone; at most cap + 1 bytes of
    # recently written data, so the read is short and served from the page cache.
    data = os.pread(file.fileno(), cap + 1, 0)
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap


@attrs.frozen
class _Output:
    stdout: str
    stderr: str
    truncated: bool


@attrs.define(eq=False)
class _Process:
    """One started program: its captured output, its deadline and its watcher."""

    process: trio.Process
    stdout: IO[bytes]
    stderr: IO[bytes]
    deadline: float
    """trio.current_time() after which the process is killed; inf for none."""
    code: int | None = None
    """The exit code, recorded by whoever reaped the process; None until then."""
    timed_out: bool = False
    final: _Output | None = None
    """The output once the process has been reaped and its files are closed."""
    watcher: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """The watcher task's scope: `stop_watching` cancels it to take the process over."""
    unwatched: trio.Event = attrs.field(factory=trio.Event)
    """Set when the watcher has exited; from then on only on_stop may reap the process."""

    @property
    def status(self) -> _Status:
        """What poll_process reports, from the recorded exit code."""
        if self.code is None:
            return "running"
        if self.timed_out:
            return "timed_out"
        return "killed" if self.code < 0 else "exited"

    def signal(self, sig: signal.Signals) -> None:
        """Signal the process's group, unless the process has been reaped."""
        # Only this record's owners reap, and they record the code as they do,
        # so `code is None` means the leader is unreaped: its pid, and so the
        # group id, cannot have been reused by an unrelated process.
        if self.code is None:
            # The unreaped leader is in the group, so this should not fail; if it
            # ever does, the group is gone, which is what the signal was for.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def output(self, cap: int) -> _Output:
        """The first `cap` bytes of each stream so far, or the final output once reaped."""
        if self.final is not None:
            return self.final
        stdout, out_cut = _capture(self.stdout, cap)
        stderr, err_cut = _capture(self.stderr, cap)
        return _Output(stdout, stderr, out_cut or err_cut)

    async def reap(self, cap: int) -> None:
        """Wait for the process to exit, reap it, record its code and keep its output.

        Atomic with respect to cancellation: `trio.Process.wait` reaps with no
        checkpoint before it returns and nothing here checkpoints after, so a
        cancelled call leaves the process unreaped and the record unchanged.
        """
        self.code = await self.process.wait()
        self.final = self.output(cap)
        self.close()

    async def watch(self, cap: int) -> None:
        """Reap the process as soon as it exits, killing it at its deadline.

        Runs as a background task of the state, the process's only reaper while
        it runs; it never raises for anything the process does.
        """
        try:
            with self.watcher:  # cancelled by stop_watching, or by the runtime with its nursery
                with trio.move_on_at(self.deadline):
                    await self.reap(cap)
                if self.code is None:  # the deadline passed first
                    self.timed_out = True
                    self.signal(signal.SIGKILL)
                    await self.reap(cap)
        finally:
            self.unwatched.set()

    async def settle(self, cap: int) -> None:
        """Return once the process is reaped: by its watcher while that runs, else here."""
        await self.unwatched.wait()
        if self.code is None:  # the watcher was cancelled before the process exited
            await self.reap(cap)

    async def stop_watching(self) -> None:
        """Cancel the watcher, wait until it has exited, and close the files."""
        # Waiting matters: a watcher already woken by the exit would otherwise
        # read the files after they were closed. It exits at once, since its
        # only checkpoints are cancellable waits for the process.
        self.watcher.cancel()
        await self.unwatched.wait()
        self.close()

    def close(self) -> None:
        """Close the output files (again is harmless)."""
        self.stdout.close()
        self.stderr.close()


@attrs.frozen
class _Config:
    root: Path
    allow: frozenset[str] | None
    output_cap: int


@attrs.define(eq=False)
class WorkspaceState:
    """One session's working directory and the processes started in it."""

    config: _Config
    directory: Path
    """The session's working directory; commands run in it or below it."""
    processes: dict[str, _Process] = attrs.field(factory=dict)
    """Process id → process, for every process started in this session."""
    nursery: trio.Nursery | None = None
    """Where the watchers run: the nursery the actor passed to `start_background`."""

    def on_start(self) -> None:
        """Create the working directory (or reuse one left by a host that crashed)."""
        self.directory.mkdir(parents=True, exist_ok=True)

    def start_background(self, nursery: trio.Nursery) -> None:
        """Keep the actor's nursery: every process started later gets its watcher there."""
        self.nursery = nursery

    def heal(self) -> None:
        """Recreate the working directory if something removed it."""
        if not self.directory.is_dir():
            logger.warning("working directory %s was removed; recreating it", self.directory)
            self.directory.mkdir(parents=True, exist_ok=True)

    async def on_stop(self) -> None:
        """Terminate and reap every running process, close the files, delete the directory."""
        running = [entry for entry in self.processes.values() if entry.code is None]
        try:
            for entry in running:
                entry.signal(signal.SIGTERM)
            with trio.move_on_after(_TERM_GRACE):
                for entry in running:
                    await entry.settle(self.config.output_cap)
        finally:
            # Shielded, so that also when the runtime's stop_timeout cancels us
            # mid-grace the survivors are killed and reaped: no process, zombie
            # or open file outlives the state.
            with trio.CancelScope(shield=True):
                await self._kill(running)
                remove = functools.partial(shutil.rmtree, self.directory, ignore_errors=True)
                await trio.to_thread.run_sync(remove)  # a big tree must not stall other actors

    async def _kill(self, running: list[_Process]) -> None:
        """SIGKILL what is left of `running`, reap it, then stop the watchers."""
        for entry in running:
            entry.signal(signal.SIGKILL)
        with trio.move_on_after(_REAP_TIMEOUT):
            for entry in running:
                await entry.settle(self.config.output_cap)
        for entry in running:
            if entry.code is None:  # in uninterruptible sleep, say; nothing more we can do
                logger.error("process %d survived SIGKILL; leaving it unreaped", entry.process.pid)
            await entry.stop_watching()

    def background(self) -> trio.Nursery:
        """The nursery for watchers; RuntimeError if the runtime never provided one."""
        if self.nursery is None:
            msg = (
                "WorkspaceState has no nursery for its process watchers: run it in an "
                "actors runtime, which calls start_background after on_start"
            )
            raise RuntimeError(msg)
        return self.nursery

    def get(self, process_id: str) -> _Process:
        """The process `process_id` of this session; ToolError if it has none by that id."""
        entry = self.processes.get(process_id)
        if entry is None:
            msg = f"Error: process {process_id!r} not found"
            raise ToolError(msg)
        return entry

    def working_directory(self, cwd: str | None) -> Path:
        """`cwd` resolved inside the session's directory; ToolError if it escapes or is missing."""
        base = self.directory.resolve()
        if cwd is None:
            return base
        if "\0" in cwd:
            msg = "Error: cwd must not contain NUL characters"
            raise ToolError(msg)
        target = (base / cwd).resolve()
        if not target.is_relative_to(base):
            msg = (
                f"Error: cwd {cwd!r} is outside the session's working directory; "
                "give a path relative to it"
            )
            raise ToolError(msg)
        if not target.is_dir():
            msg = f"Error: cwd {cwd!r} is not a directory in the session's working directory"
            raise ToolError(msg)
        return target

    def check_program(self, argv: list[str]) -> None:
        """Refuse `argv` unless its program's basename is allowed."""
        allow = self.config.allow
        program = os.path.basename(argv[0])
        if allow is not None and program not in allow:
            allowed = ", ".join(sorted(allow)) or "(none)"
            msg = f"Error: program {program!r} is not allowed; allowed programs: {allowed}"
            raise ToolError(msg)

    def check_capacity(self) -> None:
        """Refuse a new process while the session already runs the maximum."""
        running = sum(1 for entry in self.processes.values() if entry.code is None)
        if running >= _MAX_RUNNING:
            msg = (
                f"Error: this session already runs {running} processes (the limit); "
                "wait for one to finish (poll_process) before starting another"
            )
            raise ToolError(msg)

    def new_id(self) -> str:
        """A fresh process id, unique in this session and hard to guess."""
        while True:
            process_id = f"proc_{secrets.token_hex(4)}"
            if process_id not in self.processes:
                return process_id


def _parse(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        msg = f"Error: cannot parse command {command!r}: {exc}"
        raise ToolError(msg) from None
    if not argv:
        msg = "Error: command must not be empty"
        raise ToolError(msg)
    return argv


def _deadline(timeout: float | None) -> float:
    if timeout is None:
        return math.inf
    if not (timeout > 0 and math.isfinite(timeout)):
        msg = f"Error: timeout must be a positive number of seconds, got {timeout}"
        raise ToolError(msg)
    return trio.current_time() + timeout


async def _spawn(argv: list[str], cwd: Path) -> tuple[trio.Process, IO[bytes], IO[bytes]]:
    """Start `argv` in `cwd` with its output going to two anonymous files."""
    stdout = tempfile.TemporaryFile()  # noqa: SIM115 -- owned by the _Process record, closed once reaped or on stop
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- as above
    try:
        process = await trio.lowlevel.open_process(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    except BaseException:
        stdout.close()
        stderr.close()
        raise
    return process, stdout, stderr


def _spawn_error(program: str, exc: OSError) -> ToolError:
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"Error: program {program!r} not found")
    if isinstance(exc, PermissionError):
        return ToolError(f"Error: program {program!r} is not executable")
    return ToolError(f"Error: cannot start {program!r}: {exc}")


def _poll_text(process_id: str, status: _Status, code: int | None, output: _Output) -> str:
    head = f"{process_id}: {status}" + ("" if code is None else f" (exit code {code})")
    parts = [head]
    if output.stdout:
        parts.append(f"--- stdout ---\n{output.stdout}")
    if output.stderr:
        parts.append(f"--- stderr ---\n{output.stderr}")
    if output.truncated:
        parts.append("(output truncated)")
    return "\n".join(parts)


def workspace(
    root: Path | None = None,
    allow: Collection[str] | None = None,
    output_cap: int = 64 * 1024,
) -> ToolModule[WorkspaceState]:
    """Build the ``workspace`` module: run programs in a per-session directory under `root`.

    `root` defaults to a fresh temporary directory made now. `allow` lists the
    program names (basenames, e.g. ``"python3"``) a command may start; ``None``
    allows any program. `output_cap` is how many bytes of each of stdout and
    stderr a poll returns. Hosts must add the module explicitly; see the module
    docstring for what it does and does not protect.
    """
    allowed, cap = _allowlist(allow), _cap(output_cap)  # checked before a temp root is made
    config = _Config(_root(root), allowed, cap)

    def new_state(context: ToolContext) -> WorkspaceState:
        return WorkspaceState(config, config.root / _directory_name(context.session_id))

    module = ToolModule(
        "workspace",
        new_state,
        scope=Scope.SESSION,
        description="Run programs in a per-session working directory and poll their output.",
    )
    module.tool(execute_command)
    module.tool(poll_process)
    return module


def _root(root: Path | None) -> Path:
    if root is None:
        return Path(tempfile.mkdtemp(prefix="mcp-actors-workspace-"))
    return root.resolve()  # so cwd checks do not depend on the host's cwd later


def _allowlist(allow: Collection[str] | None) -> frozenset[str] | None:
    if allow is None:
        return None
    if isinstance(allow, str):
        msg = f"allow must be a collection of program names, not the string {allow!r}"
        raise TypeError(msg)
    for name in allow:
        if not name or "/" in name:
            msg = f"allow lists program names compared by basename, like 'python3'; got {name!r}"
            raise ValueError(msg)
    return frozenset(allow)


def _cap(output_cap: int) -> int:
    if output_cap < 1:
        msg = f"output_cap must be a positive number of bytes, got {output_cap}"
        raise ValueError(msg)
    return output_cap


async def execute_command(
    state: WorkspaceState,
    command: Annotated[str, "The command line; split like a POSIX shell would, run without one."],
    cwd: Annotated[str | None, "Directory to run in, relative to the session's directory."] = None,
    # The process's time limit, a tool argument: this call itself returns at once.
    timeout: Annotated[float | None, "Seconds after which the process is killed."] = None,  # noqa: ASYNC109
) -> CallResult:
    """Start a program in the background; poll_process reads its status and output."""
    nursery = state.background()  # before spawning: a process must never lack its watcher
    argv = _parse(command)
    state.check_program(argv)
    directory = state.working_directory(cwd)
    deadline = _deadline(timeout)
    state.check_capacity()
    try:
        process, stdout, stderr = await _spawn(argv, directory)
    except OSError as exc:
        raise _spawn_error(argv[0], exc) from None
    process_id = state.new_id()
    entry = _Process(process, stdout, stderr, deadline)
    state.processes[process_id] = entry
    # No checkpoint since the spawn, so the process cannot be left without its reaper.
    nursery.start_soon(entry.watch, state.config.output_cap, name=f"watch {process_id}")
    data: dict[str, Any] = {"processId": process_id, "status": "running"}
    return CallResult.both(f"Started {process_id}: {shlex.join(argv)}", data)


def poll_process(
    state: WorkspaceState,
    processId: Annotated[str, "The id execute_command returned."],  # the seeds' wire name
) -> CallResult:
    """Report a process's status, exit code and captured output (first output_cap bytes)."""
    entry = state.get(processId)
    # Synchronous, so the watcher cannot record the exit between these reads:
    # an "exited" status always comes with the final, complete output.
    code, status = entry.code, entry.status
    output = entry.output(state.config.output_cap)
    data: dict[str, Any] = {
        "processId": processId,
        "status": status,
        "exitCode": code,
        "stdout": output.stdout,
        "stderr": output.stderr,
        "truncated": output.truncated,
    }
    return CallResult.both(_poll_text(processId, status, code, output), data)
