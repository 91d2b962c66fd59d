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
A handler must return quickly, yet a process outlives the call that started
it, and trio's rule is that nothing outlives its nursery. The natural design,
a nursery per state entered in ``on_start`` through an `AsyncExitStack` and
exited in ``on_stop``, does not work with this runtime: ``on_start`` runs
inside the actor's cancel scope and ``on_stop`` after it has closed, so the
exit stack would close the nursery out of order and trio aborts with "cancel
scope stack corrupted". So this module runs no task of its own:

* `trio.lowlevel.open_process` starts the program and returns at once; the
  state holds the `trio.Process`, so the process is owned by the state and
  through it by the session's actor.
* stdout and stderr go to anonymous temporary files (`tempfile.TemporaryFile`),
  not pipes: nobody has to drain them, so a chatty program never blocks on a
  full pipe, and the files are invisible to the commands. ``poll_process``
  reads the first ``output_cap`` bytes of each and reports ``truncated`` when
  there was more. Once a process has finished its output is read one last
  time and the files are closed, so only running processes hold descriptors.
* Every call to the session first reaps processes that have finished (no
  zombies linger past the session's next call) and kills overdue ones: a
  ``timeout`` is enforced when the session is next called or stopped. A
  session left idle lets an overdue process run until then, at the latest
  until its actor's TTL expires and ``on_stop`` runs.
* ``on_stop`` sends SIGTERM, waits up to two seconds, sends SIGKILL to what
  is left and reaps everything, so a stopped state leaves no process behind.

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


def _signal_group(process: trio.Process, sig: signal.Signals) -> None:
    """Signal `process`'s group, unless the process has already been reaped."""
    # Reading returncode reaps a finished process; an unreaped leader keeps
    # its pid (and so the group id) from being reused.
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):  # the group exited meanwhile
            os.killpg(process.pid, sig)


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
    """One started program, its captured output and its deadline."""

    process: trio.Process
    stdout: IO[bytes]
    stderr: IO[bytes]
    deadline: float
    """trio.current_time() after which the process is killed; inf for none."""
    timed_out: bool = False
    final: _Output | None = None
    """The output once the process has finished and its files are closed."""

    def status(self, code: int | None) -> _Status:
        """The status for exit code `code` (None while running), read once by the caller."""
        if code is None:
            return "running"
        if self.timed_out:
            return "timed_out"
        return "killed" if code < 0 else "exited"

    def output(self, cap: int) -> _Output:
        if self.final is not None:
            return self.final
        stdout, out_cut = _capture(self.stdout, cap)
        stderr, err_cut = _capture(self.stderr, cap)
        return _Output(stdout, stderr, out_cut or err_cut)

    def finish(self, cap: int) -> None:
        """Keep the final output and close the files; call once, after the process exited."""
        self.final = self.output(cap)
        self.close()

    def close(self) -> None:
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

    def on_start(self) -> None:
        """Create the working directory (or reuse one left by a host that crashed)."""
        self.directory.mkdir(parents=True, exist_ok=True)

    def heal(self) -> None:
        """Recreate the working directory if something removed it."""
        if not self.directory.is_dir():
            logger.warning("working directory %s was removed; recreating it", self.directory)
            self.directory.mkdir(parents=True, exist_ok=True)

    async def on_stop(self) -> None:
        """Terminate and reap every running process, close the files, delete the directory."""
        running = [p for p in self.processes.values() if p.process.returncode is None]
        try:
            for entry in running:
                _signal_group(entry.process, signal.SIGTERM)
            with trio.move_on_after(_TERM_GRACE):
                for entry in running:
                    await entry.process.wait()
        finally:
            # Also when the runtime's stop_timeout cancels us mid-grace: the
            # survivors are killed and reaped under a short shield, so no
            # process and no zombie outlives the state.
            for entry in running:
                _signal_group(entry.process, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                with trio.move_on_after(_REAP_TIMEOUT):
                    for entry in running:
                        await entry.process.wait()
                for entry in self.processes.values():
                    if entry.final is None:
                        entry.close()
                remove = functools.partial(shutil.rmtree, self.directory, ignore_errors=True)
                await trio.to_thread.run_sync(remove)  # a big tree must not stall other actors

    async def sweep(self) -> None:
        """Kill processes past their deadline and keep the output of finished ones."""
        now = trio.current_time()
        for entry in self.processes.values():
            if entry.final is not None:
                continue
            if now >= entry.deadline and entry.process.returncode is None:
                entry.timed_out = True
                _signal_group(entry.process, signal.SIGKILL)
                await entry.process.wait()
            if entry.process.returncode is not None:
                entry.finish(self.config.output_cap)

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
        running = sum(1 for entry in self.processes.values() if entry.final is None)
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
    stdout = tempfile.TemporaryFile()  # noqa: SIM115 -- owned by the _Process record, closed in finish/on_stop
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
    await state.sweep()
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
    state.processes[process_id] = _Process(process, stdout, stderr, deadline)
    data: dict[str, Any] = {"processId": process_id, "status": "running"}
    return CallResult.both(f"Started {process_id}: {shlex.join(argv)}", data)


async def poll_process(
    state: WorkspaceState,
    processId: Annotated[str, "The id execute_command returned."],  # the seeds' wire name
) -> CallResult:
    """Report a process's status, exit code and captured output (first output_cap bytes)."""
    await state.sweep()
    entry = state.get(processId)
    # The process may exit at any moment: read its code once, and the output
    # after it, so an "exited" status always comes with the complete output.
    code = entry.process.returncode
    status = entry.status(code)
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
