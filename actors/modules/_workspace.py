"""The ``workspace`` module: run programs in a per-session working directory.

Enabling it is the host's decision
----------------------------------
This module runs real programs on the host, so no host gets it by accident:
``workspace(...)`` only builds the module, and a host must pass it to
``open_runtime`` itself (the CLI does so only with ``--allow-exec``). It is
not a sandbox. Every command runs as the server's own user: an allowed
interpreter runs whatever code it is given, and any command may read and
write whatever that user can — other sessions' files included, if it finds
them, and ``/proc/PID/cwd`` of another session's running process shows where
they are; it can signal or trace the server's other processes, the
supervisors below included. What follows raises the bar for a tenant who
runs only the allowed programs, and bounds what one command can cost; a real
boundary between tenants is a separate user, a container or a seccomp/namespace
sandbox around the server, not something this module can draw.

Which program runs
------------------
A command is split like a POSIX shell would (`shlex`) and run without one.
Its ``argv[0]`` is a program *name*, never a path: a ``/`` in it is refused,
and the name is looked up on the server's search path (its ``PATH`` at build
time without relative entries, or the ``path`` given) — never in the
session's directory, so a file a session writes (``cp /bin/sh ./ls``) can
never run as a program.

With an allowlist, each allowed name is looked up once, when the module is
built (a name that is not found is a build error), and the module keeps the
file it found and that file's identity (device, inode, size, modification
and change times). A command's ``argv[0]`` must be one of the allowed names,
exactly; the module executes the file found at build time, after checking
that it is still that file, unchanged: a symlink repointed, a file replaced,
rewritten in place, its mode changed or removed since startup is refused.
The check and the start are two steps, so a session that can write the file
(every file, on a server running as root; a ``PATH`` directory the server's
user owns, like a virtual environment's ``bin``) can still swap it in
between: allow only programs the server's user cannot write. Comparing names
as well as files matters: on a multi-call binary (busybox) ``ls`` and ``sh``
are one file, and only the name tells them apart. Without an allowlist the
name is looked up on the search path at every call.

Work a caller can ask for is bounded before it is done: a command longer
than ``command_cap`` characters is refused before it is parsed (``shlex`` is
slow on long input), and the program is checked on the first token alone,
before the rest is split.

The environment is not the server's, which may hold secrets and tokens: a
command gets ``PATH`` (the search path), ``HOME`` and ``TMPDIR`` (the
session's directory) and ``LANG=C.UTF-8``, nothing else.

The session's directory
-----------------------
The module makes a private root directory when its first session starts
(``mkdtemp`` under ``root``, or under the system's temporary directory) and
removes it when its last session stops — so a clean exit leaves nothing
behind, and a root that no session uses does not exist. The root has mode
0o300: its owner may create and enter directories in it, nobody may list it
(root, and any process of the server's user that first runs ``chmod``,
still can). Each session works in ``<root>/<name>`` (mode 0o700), where
``name`` is an HMAC-SHA-256 of the session id under a random key made with
the module: a session that knows another's id still cannot compute its
directory, and no id can name a parent or a sibling. ``heal()``, run before
every call, recreates the directory (and the root) when something removed
them behind the session's back; ``on_stop`` deletes it, because stopping (TTL
expiry, eviction, shutdown) releases the session's state and the directory is
part of that state. A ``cwd`` argument is resolved inside it (symlinks
included) and refused if it lands outside.

Who owns a running command
--------------------------
Each command runs below a *supervisor* (`actors.modules._supervisor`): a
small standard-library Python program, one per command, that the server
starts in a session of its own and talks to over a socket pair. The
supervisor is a child subreaper, so every process the command starts stays
below it — the children of a leader that already exited and grandchildren
that called ``setsid`` included — and it reaps them as they exit. It caps the
size of every file the command writes (``RLIMIT_FSIZE``, ``file_cap``: past
it a write gets SIGXFSZ or EFBIG, so a command writing 1 GiB is stopped at the
cap instead of filling the disk), starts the command, and reports
``started``, then the command's own ``exit`` code; it exits when nothing is
left below it. Told to, it sends SIGTERM to the command's tree; when the
server shuts down its end of the socket (or dies), it SIGKILLs the tree until
nothing is left. ``execute_command`` waits for the ``started`` report, so
that a program that cannot be executed is an error of the call; that costs
the supervisor's start-up (a Python interpreter without site: tens of
milliseconds, ``docs/performance.md``). A server that dies, even by SIGKILL, closes its ends of the
sockets, and every supervisor then kills its tree: no command outlives it.

A command's record belongs to the session's state, and a task of the state
follows it:

* The runtime hands the state a nursery its actor owns (``start_background``)
  and each command gets a *watcher* task there: it reads the supervisor's
  reports, asks for the tree to be killed when the command's ``timeout``
  passes (status ``timed_out`` if the command itself was still running), and
  reaps the supervisor once it exits, whether or not the session is ever
  called again. ``poll_process`` only reads what the watcher recorded.
* A command's status and exit code are the command's, not its children's: it
  is ``exited`` as soon as the command exits, even while processes it left
  in the background still run. Those stay below the supervisor until they
  exit, until the command's timeout, or until the session's actor stops.
* stdout and stderr go to anonymous temporary files, not pipes: nobody has
  to drain them, so a chatty program never blocks on a full pipe, and the
  files are invisible to the commands. ``poll_process`` reads the first
  ``output_cap`` bytes of each and reports ``truncated`` when there was more
  (or the file reached ``file_cap``). When the command exits, its output is
  read one last time and the server closes its copies of the files.
* Exactly one party reaps a supervisor: its watcher while the watcher runs,
  then ``on_stop``. Each step of the watcher is atomic with respect to
  cancellation: a report is received and recorded with no checkpoint in
  between, and `trio.Process.wait` reaps with no checkpoint before it
  returns (and nothing checkpoints after it), so a cancelled watcher has
  either recorded something or left it for the next reader.
* ``on_stop`` asks every live supervisor to terminate its tree, waits up to
  two seconds for them to exit, then shuts down their sockets (SIGKILL to
  every tree; SIGCONT to each supervisor, which its command may have
  stopped) and reaps them. A supervisor still there a second later (its
  command keeps stopping it) is killed itself and reaped, so that it holds
  no place in the process count for good. The kill and the reap run
  shielded, so they happen even when the runtime's ``stop_timeout`` cuts the
  grace short.

Processes are bounded per session (``max_processes`` live supervised
commands), per tenant (``max_processes_per_tenant``: the sessions ``T`` and
``T/…``, so that one tenant's sessions cannot take every place) and across
all sessions of the module (``max_processes_total``): each holds a few file
descriptors in the server. A command counts until it and everything it
started have exited.

Known limits
------------
* Same user: see the first section. A command can kill its own supervisor,
  or keep stopping it until it is killed; what is below it then escapes to
  init.
* A fork bomb inside one command is bounded by the host's limits only, until
  the command's timeout or the actor's stop kills the tree. ``RLIMIT_NPROC``
  does not help: it counts every process and thread of the server's user
  (the server's own threads and every session's processes), so a cap low
  enough to matter would let one session's processes make another's forks
  fail, and it does not apply to root. A per-command pids cgroup is the real
  bound.
* ``RLIMIT_FSIZE`` caps each file, not a session's total disk use; a root
  server may raise its hard limit again.
* Linux only (``prctl``, ``/proc``).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import hmac
import logging
import math
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Final, Literal, TypedDict

import attrs
import trio

from protocol import CallResult, Scope, ToolContext, tenant_of

from .._errors import ToolError
from .._module import ToolModule

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Mapping

__all__ = ["WorkspaceState", "workspace"]

logger = logging.getLogger("actors.workspace")

_Status = Literal["running", "exited", "killed", "timed_out"]


class _StartedData(TypedDict):
    """The structured data of execute_command."""

    processId: str
    status: Literal["running"]


class _PolledData(TypedDict):
    """The structured data of poll_process."""

    processId: str
    status: _Status
    exitCode: int | None
    """None while the process runs."""
    stdout: str
    stderr: str
    truncated: bool


_SUPERVISOR: Final = Path(__file__).with_name("_supervisor.py")
_TERM_GRACE: Final = 2.0  # seconds between SIGTERM and SIGKILL on stop
_REAP_TIMEOUT: Final = 1.0  # seconds for supervisors to clear SIGKILLed trees, which die at once
_ROOT_MODE: Final = 0o300  # the owner may create and enter directories; nobody may list them
_SESSION_MODE: Final = 0o700
KEPT_RECORDS = 256
"""Commands a session remembers for poll_process; the oldest finished ones are forgotten."""
_CWD_CAP: Final = 4096  # characters; longer paths do not resolve anyway (PATH_MAX)
_REPORT_CAP: Final = 256  # bytes of an unfinished report line before a supervisor is not believed
_LOGGED_STDERR: Final = 1000  # characters of a failed supervisor's stderr in the log


def _capture(file: IO[bytes], cap: int, file_cap: int) -> tuple[str, bool]:
    """The first `cap` bytes written to `file`, decoded, and whether it was cut."""
    # pread leaves the child's write offset alone; at most `cap` bytes of
    # recently written data, so the read is short and served from the page cache.
    data = os.pread(file.fileno(), cap, 0)
    size = os.fstat(file.fileno()).st_size
    return data.decode("utf-8", errors="replace"), size > cap or size >= file_cap


@attrs.frozen
class _Output:
    stdout: str
    stderr: str
    truncated: bool


_Identity = tuple[int, int, int, int, int]
"""A file's device, inode, size, modification and change times: which file, which version.

The change time is set by the kernel on any change (contents, mode, owner,
links) and no user can set it back, unlike the modification time."""


def _identity(path: str) -> _Identity | None:
    """The identity of the file `path` leads to (symlinks followed); None if there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


@attrs.frozen
class _Allowed:
    path: str
    """Where the program was found on the search path when the module was built: what runs."""
    identity: _Identity
    """The file it led to then: a command is refused if that changed."""


@attrs.frozen
class _Programs:
    """Where programs are looked up, and which may run."""

    search_path: str
    """Absolute directories, ``os.pathsep``-separated; also the commands' PATH."""
    allowed: Mapping[str, _Allowed] | None
    """Allowed program name → its file; None allows any program on the search path."""

    def resolve(self, name: str) -> str:
        """The file to execute for program `name`; ToolError if it may not run."""
        if "/" in name:
            msg = (
                f"Error: program {name!r} is a path; give a program name, which is looked "
                "up on the server's PATH (never in the session's directory)"
            )
            raise ToolError(msg)
        if self.allowed is None:
            found = shutil.which(name, path=self.search_path)
            if found is None:
                msg = f"Error: program {name!r} not found on the server's PATH"
                raise ToolError(msg)
            return found
        entry = self.allowed.get(name)
        if entry is None:
            allowed = ", ".join(sorted(self.allowed)) or "(none)"
            msg = f"Error: program {name!r} is not allowed; allowed programs: {allowed}"
            raise ToolError(msg)
        if _identity(entry.path) != entry.identity:
            msg = (
                f"Error: program {name!r} is no longer the file allowed when the server "
                "started; an operator must restart the server to allow it again"
            )
            raise ToolError(msg)
        return entry.path


@attrs.frozen
class _Config:
    programs: _Programs
    output_cap: int
    file_cap: int
    command_cap: int
    max_processes: int
    max_processes_per_tenant: int
    max_processes_total: int


@attrs.define(eq=False)
class _Host:
    """What every session of one module shares: the root directory and the process count.

    Only the runtime's trio thread touches it, and never across a checkpoint.
    """

    parent: Path
    """Where the root directory is made."""
    key: bytes = attrs.field(factory=lambda: secrets.token_bytes(32), repr=False)
    """The HMAC key that turns session ids into directory names."""
    root: Path | None = None
    """The root directory while some session holds it."""
    holders: int = 0
    """Sessions holding the root: made by the first, removed after the last."""
    running: int = 0
    """Supervisors not yet reaped, across all sessions."""
    by_tenant: collections.Counter[str] = attrs.field(factory=collections.Counter)
    """Supervisors not yet reaped, per tenant (absent once none)."""

    def take(self, tenant: str) -> None:
        """Count one more supervisor of `tenant`."""
        self.running += 1
        self.by_tenant[tenant] += 1

    def give_back(self, tenant: str) -> None:
        """Count one supervisor of `tenant` less."""
        self.running -= 1
        self.by_tenant[tenant] -= 1
        if not self.by_tenant[tenant]:
            del self.by_tenant[tenant]  # tenants come and go: keep the table small

    def acquire(self, session_id: str) -> Path:
        """The directory of `session_id` (not made yet), making the root if no session holds it."""
        if self.root is None:
            self.parent.mkdir(parents=True, exist_ok=True)
            root = Path(tempfile.mkdtemp(prefix="mcp-actors-workspace-", dir=self.parent))
            root.chmod(_ROOT_MODE)
            self.root = root
        self.holders += 1
        digest = hmac.new(self.key, session_id.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return self.root / digest.hexdigest()[:32]

    def release(self) -> Path | None:
        """Let go of the root; returns it for removal when this was its last holder."""
        self.holders -= 1
        if self.holders:
            return None
        root, self.root = self.root, None
        return root


def _make_directory(directory: Path) -> None:
    """Make `directory` and its root, with their modes, if they are missing."""
    root = directory.parent
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.chmod(_ROOT_MODE)
    directory.mkdir(mode=_SESSION_MODE, exist_ok=True)
    directory.chmod(_SESSION_MODE)


def _remove(path: Path) -> None:
    """Delete a directory tree (the root must be made listable first)."""
    with contextlib.suppress(OSError):
        path.chmod(0o700)
    shutil.rmtree(path, ignore_errors=True)


def _environment(programs: _Programs, directory: Path) -> dict[str, str]:
    """The whole environment of a command: nothing of the server's."""
    home = str(directory)
    return {"PATH": programs.search_path, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


@attrs.define(eq=False)
class _Command:
    """One started command: its supervisor, its captured output, its deadline and its watcher."""

    supervisor: trio.Process
    control: socket.socket
    """The server's end of the supervisor's socket pair (non-blocking)."""
    stdout: IO[bytes]
    stderr: IO[bytes]
    deadline: float
    """trio.current_time() after which the command's tree is killed; inf for none."""
    on_reaped: Callable[[_Command], None]
    """Called once the supervisor is reaped: the session and the module count it no more."""
    pid: int | None = None
    """The command's pid, once its supervisor reported it started."""
    failure: int | None = None
    """The errno the supervisor reported when it could not start the command."""
    code: int | None = None
    """The command's exit code once it exited; None while it runs."""
    timed_out: bool = False
    final: _Output | None = None
    """The output once the command has exited and the files are closed."""
    ended: bool = False
    """The supervisor's socket reached end of file: it has exited, or is exiting."""
    reaped: bool = False
    pending: bytes = b""
    """The start of a report whose end has not arrived yet."""
    ready: trio.Event = attrs.field(factory=trio.Event)
    """Set when the supervisor reported the command started, or could not start it."""
    watcher: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """The watcher task's scope: `stop_watching` cancels it to take the supervisor over."""
    unwatched: trio.Event = attrs.field(factory=trio.Event)
    """Set when the watcher has exited; from then on only on_stop may reap the supervisor."""

    @property
    def status(self) -> _Status:
        """What poll_process reports, from the recorded exit code."""
        if self.code is None:
            return "running"
        if self.timed_out:
            return "timed_out"
        return "killed" if self.code < 0 else "exited"

    def terminate(self) -> None:
        """Ask the supervisor to send SIGTERM to the command's tree."""
        with contextlib.suppress(OSError):  # full or closed: the kill that follows still works
            self.control.send(b"t")

    def kill(self) -> None:
        """Ask the supervisor to SIGKILL the command's tree and exit (end of file on its socket)."""
        with contextlib.suppress(OSError):  # already shut down, or the supervisor is gone
            self.control.shutdown(socket.SHUT_WR)
        # The command may have stopped its supervisor (SIGSTOP; same user): a
        # stopped supervisor would never read the end of file.
        self.signal_supervisor(signal.SIGCONT)

    def signal_supervisor(self, number: signal.Signals) -> None:
        """Send `number` to the supervisor itself, while it is unreaped (its pid is its own)."""
        # Not trio.Process.send_signal: its poll() would reap the supervisor,
        # and only `reap` may.
        if not self.reaped:
            os.kill(self.supervisor.pid, number)  # unreaped, even a zombie: the pid exists

    def output(self, cap: int, file_cap: int) -> _Output:
        """The first `cap` bytes of each stream so far, or the final output once exited."""
        if self.final is not None:
            return self.final
        stdout, out_cut = _capture(self.stdout, cap, file_cap)
        stderr, err_cut = _capture(self.stderr, cap, file_cap)
        return _Output(stdout, stderr, out_cut or err_cut)

    async def follow(self, config: _Config) -> None:
        """Record the supervisor's reports until its socket ends.

        Atomic with respect to cancellation: waiting is the only checkpoint, and
        what is received is recorded before the next one.
        """
        while not self.ended:
            await trio.lowlevel.wait_readable(self.control)
            try:
                data = self.control.recv(4096)
            except BlockingIOError:
                continue
            except OSError:  # reset: the supervisor is gone
                data = b""
            self._take(data, config)

    def _take(self, data: bytes, config: _Config) -> None:
        if not data:
            self.ended = True
            self.ready.set()
            return
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            self._report(line, config)
        if len(self.pending) > _REPORT_CAP:
            logger.error("supervisor %d sent garbage; killing it", self.supervisor.pid)
            self.pending = b""
            self.kill()

    def _report(self, line: bytes, config: _Config) -> None:
        kind, _, value = line.partition(b" ")
        try:
            number = int(value)
        except ValueError:
            number = None
        if kind == b"started" and number is not None:
            self.pid = number
            self.ready.set()
        elif kind == b"failed" and number is not None:
            self.failure = number
            self.ready.set()
        elif kind == b"exit" and number is not None and self.code is None:
            self.finish(number, config)
        else:
            logger.warning("supervisor %d sent %r; ignored", self.supervisor.pid, line)

    def finish(self, code: int, config: _Config) -> None:
        """Record the command's exit code, keep its output and close the server's copies."""
        self.code = code
        self.final = self.output(config.output_cap, config.file_cap)
        self.close_files()

    async def reap(self, config: _Config) -> None:
        """Wait for the supervisor to exit and reap it; it then counts no more.

        Atomic with respect to cancellation: `trio.Process.wait` reaps with no
        checkpoint before it returns and nothing here checkpoints after, so a
        cancelled call leaves the supervisor unreaped and the record unchanged.
        """
        code = await self.supervisor.wait()
        self.reaped = True
        self.control.close()  # its end of file was read: nothing more will come
        if self.code is None:  # no exit report: the command never started, or the supervisor died
            self.finish(code, config)
            if self.failure is None:
                self._log_early_end(code)
        self.on_reaped(self)

    def _log_early_end(self, code: int) -> None:
        assert self.final is not None
        if self.pid is None:  # its own error, if it had one, is in stderr
            # The command's stderr too, should it have started and killed its
            # supervisor before the report: escaped (one line) and cut to its
            # end, where a traceback says what went wrong.
            logger.error(
                "supervisor %d ended (%d) before it reported a start: %r",
                *(self.supervisor.pid, code, self.final.stderr[-_LOGGED_STDERR:]),
            )
        else:  # something killed it; what was below it is no longer watched
            logger.warning("supervisor %d ended (%d) before its command", self.supervisor.pid, code)

    async def watch(self, config: _Config) -> None:
        """Follow the command to its end, killing its tree at the deadline, and reap.

        Runs as a background task of the state, the supervisor's only reaper
        while it runs; it never raises for anything the command does.
        """
        try:
            with self.watcher:  # cancelled by stop_watching, or by the runtime with its nursery
                with trio.move_on_at(self.deadline):
                    await self.follow(config)
                if not self.ended:  # the deadline passed first
                    self.timed_out = self.code is None
                    self.kill()
                    await self.follow(config)
                await self.reap(config)
        finally:
            self.unwatched.set()

    async def settle(self, config: _Config) -> None:
        """Return once the supervisor is reaped: by its watcher while that runs, else here."""
        await self.unwatched.wait()
        if not self.reaped:  # the watcher was cancelled before the supervisor exited
            await self.follow(config)
            await self.reap(config)

    async def stop_watching(self) -> None:
        """Cancel the watcher, wait until it has exited, and close the files and the socket."""
        # Waiting matters: a watcher already woken by a report would otherwise
        # read a closed socket. It exits at once, since its only checkpoints are
        # cancellable waits.
        self.watcher.cancel()
        await self.unwatched.wait()
        self.close_files()
        self.control.close()

    def close_files(self) -> None:
        """Close the server's copies of the output files (again is harmless)."""
        self.stdout.close()
        self.stderr.close()


@attrs.define(eq=False)
class WorkspaceState:
    """One session's working directory and the commands started in it."""

    config: _Config
    host: _Host
    directory: Path
    """The session's working directory; commands run in it or below it."""
    tenant: str
    """The session's tenant (`protocol.tenant_of`), whose share its commands count against."""
    processes: dict[str, _Command] = attrs.field(factory=dict)
    """Process id → command, for every command started in this session."""
    live: set[_Command] = attrs.field(factory=set)
    """Commands whose supervisor is not reaped yet (including any whose start failed)."""
    nursery: trio.Nursery | None = None
    """Where the watchers run: the nursery the actor passed to `start_background`."""

    def on_start(self) -> None:
        """Create the working directory."""
        _make_directory(self.directory)

    def start_background(self, nursery: trio.Nursery) -> None:
        """Keep the actor's nursery: every command started later gets its watcher there."""
        self.nursery = nursery

    def heal(self) -> None:
        """Recreate the working directory if something removed it."""
        if not self.directory.is_dir():
            logger.warning("working directory %s was removed; recreating it", self.directory)
            _make_directory(self.directory)

    async def on_stop(self) -> None:
        """Stop every command's tree, reap the supervisors, delete the directory."""
        running = list(self.live)
        try:
            for entry in running:
                entry.terminate()
            await self._settle(running, _TERM_GRACE)
        finally:
            # Shielded, so that also when the runtime's stop_timeout cancels us
            # mid-grace the trees are killed and the supervisors reaped: no
            # process, zombie or open file outlives the state.
            with trio.CancelScope(shield=True):
                await self._kill(running)
                await self._remove_directory()

    async def _kill(self, running: list[_Command]) -> None:
        """Kill what is left of the trees of `running`, reap the supervisors, stop the watchers."""
        for entry in running:
            entry.kill()
        await self._settle(running, _REAP_TIMEOUT)
        # A supervisor its command keeps stopping never exits on its own, and
        # would hold its place in the module's count for good: it is killed,
        # and what still runs below it escapes (a known limit).
        stuck = [entry for entry in running if not entry.reaped]
        for entry in stuck:
            logger.error(
                "supervisor %d did not exit after killing its command's processes; killing it",
                entry.supervisor.pid,
            )
            entry.signal_supervisor(signal.SIGKILL)
        await self._settle(stuck, _REAP_TIMEOUT)
        for entry in running:
            if not entry.reaped:  # a process in uninterruptible sleep, say; nothing more we can do
                logger.error("supervisor %d is left unreaped", entry.supervisor.pid)
            await entry.stop_watching()

    async def _settle(self, entries: list[_Command], seconds: float) -> None:
        """Wait up to `seconds` for the supervisors of `entries` to be reaped."""
        with trio.move_on_after(seconds):
            for entry in entries:
                await entry.settle(self.config)

    async def _remove_directory(self) -> None:
        # In a thread: a big tree must not stall other actors.
        await trio.to_thread.run_sync(_remove, self.directory)
        root = self.host.release()
        if root is not None:  # the last session of the module: the root goes too
            await trio.to_thread.run_sync(_remove, root)

    def background(self) -> trio.Nursery:
        """The nursery for watchers; RuntimeError if the runtime never provided one."""
        if self.nursery is None:
            msg = (
                "WorkspaceState has no nursery for its process watchers: run it in an "
                "actors runtime, which calls start_background after on_start"
            )
            raise RuntimeError(msg)
        return self.nursery

    def get(self, process_id: str) -> _Command:
        """The command `process_id` of this session; ToolError if it has none by that id."""
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
        if len(cwd) > _CWD_CAP:
            msg = f"Error: cwd is {len(cwd)} characters long; the limit is {_CWD_CAP}"
            raise ToolError(msg)
        try:
            target = (base / cwd).resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
            msg = f"Error: cwd {cwd!r} cannot be resolved: {exc}"
            raise ToolError(msg) from None
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

    def check_capacity(self) -> None:
        """Refuse a new command while the session, or the module, runs the maximum."""
        limit = self.config.max_processes
        if len(self.live) >= limit:
            msg = (
                f"Error: this session already runs {len(self.live)} processes (the limit); "
                "a process counts until it and every process it started have exited: wait "
                "for one to finish (poll_process) before starting another"
            )
            raise ToolError(msg)
        tenant_limit = self.config.max_processes_per_tenant
        if self.host.by_tenant[self.tenant] >= tenant_limit:
            msg = (
                f"Error: tenant {self.tenant!r} already runs {self.host.by_tenant[self.tenant]} "
                f"processes across its sessions (the limit is {tenant_limit}); try again when "
                "some have finished"
            )
            raise ToolError(msg)
        total = self.config.max_processes_total
        if self.host.running >= total:
            msg = (
                f"Error: the workspace already runs {self.host.running} processes across "
                f"all sessions (the limit is {total}); try again when some have finished"
            )
            raise ToolError(msg)

    async def start(self, executable: str, argv: list[str], cwd: Path, deadline: float) -> str:
        """Start `argv` under a supervisor; its id once the supervisor reports it started."""
        nursery = self.background()  # before spawning: a supervisor must never lack its watcher
        self.check_capacity()
        # Counted before the first checkpoint, so that sessions starting commands
        # at the same time cannot all pass the check.
        self.host.take(self.tenant)
        try:
            entry = await _spawn(self, executable, argv, cwd, deadline)
        except BaseException:
            self.host.give_back(self.tenant)
            raise
        self.live.add(entry)
        # No checkpoint since the spawn, so the supervisor cannot be left without its reaper.
        nursery.start_soon(entry.watch, self.config, name=f"watch {argv[0]}")
        await entry.ready.wait()
        if entry.pid is None:
            raise _start_error(argv[0], entry.failure)
        process_id = self.new_id()
        self._forget_oldest_finished()
        self.processes[process_id] = entry
        return process_id

    def _forget_oldest_finished(self) -> None:
        """Make room for one more record: a session's finished commands must not pile up."""
        excess = len(self.processes) + 1 - KEPT_RECORDS
        if excess > 0:
            finished = [key for key, entry in self.processes.items() if entry not in self.live]
            for key in finished[:excess]:  # oldest first: the dict keeps start order
                del self.processes[key]

    def forget(self, entry: _Command) -> None:
        """A supervisor was reaped: it no longer counts against the limits."""
        self.live.discard(entry)
        self.host.give_back(self.tenant)

    def new_id(self) -> str:
        """A fresh process id, unique in this session and hard to guess."""
        while True:
            process_id = f"proc_{secrets.token_hex(4)}"
            if process_id not in self.processes:
                return process_id


@contextlib.contextmanager
def _parse_errors(command: str) -> Iterator[None]:
    try:
        yield
    except ValueError as exc:
        msg = f"Error: cannot parse command {command!r}: {exc}"
        raise ToolError(msg) from None


def _parse(command: str, config: _Config) -> tuple[str, list[str]]:
    """The file to execute and the argv of `command`, checked before they cost much."""
    if len(command) > config.command_cap:
        msg = (
            f"Error: command is {len(command)} characters long; the limit is "
            f"{config.command_cap}: put long input in a file in the session's directory"
        )
        raise ToolError(msg)
    if "\0" in command:
        msg = "Error: command must not contain NUL characters"
        raise ToolError(msg)
    lexer = shlex.shlex(command, posix=True)  # what shlex.split does, one token first
    lexer.whitespace_split = True
    lexer.commenters = ""
    with _parse_errors(command):
        program = lexer.get_token()
    if program is None:
        msg = "Error: command must not be empty"
        raise ToolError(msg)
    executable = config.programs.resolve(program)  # before the rest is split
    with _parse_errors(command):
        return executable, [program, *lexer]


def _deadline(timeout: float | None) -> float:
    if timeout is None:
        return math.inf
    if not (timeout > 0 and math.isfinite(timeout)):
        msg = f"Error: timeout must be a positive number of seconds, got {timeout}"
        raise ToolError(msg)
    return trio.current_time() + timeout


async def _spawn(
    state: WorkspaceState, executable: str, argv: list[str], cwd: Path, deadline: float
) -> _Command:
    """Start the supervisor of `argv` in `cwd`, its output going to two anonymous files."""
    config = state.config
    with contextlib.ExitStack() as cleanup:  # until the record below owns what is opened
        stdout = cleanup.enter_context(tempfile.TemporaryFile())
        stderr = cleanup.enter_context(tempfile.TemporaryFile())
        ours, theirs = socket.socketpair()
        cleanup.enter_context(ours)
        with theirs:  # the supervisor has its copy; ours would hide its end of file
            ours.setblocking(False)
            supervisor = await trio.lowlevel.open_process(
                [
                    *(sys.executable, "-I", "-S", str(_SUPERVISOR)),
                    *(str(theirs.fileno()), str(config.file_cap), executable),
                    *argv,
                ],
                cwd=cwd,
                env=_environment(config.programs, state.directory),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # no terminal signal meant for the server reaches it
            )
        cleanup.pop_all()
    return _Command(supervisor, ours, stdout, stderr, deadline, state.forget)


def _start_error(program: str, number: int | None) -> ToolError:
    if number is None:
        return ToolError(f"Error: cannot start {program!r}: its supervisor exited first")
    if number == errno.ENOENT:
        return ToolError(f"Error: program {program!r} not found")
    if number in (errno.EACCES, errno.EPERM):
        return ToolError(f"Error: program {program!r} is not executable")
    return ToolError(f"Error: cannot start {program!r}: {os.strerror(number)}")


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
    *,
    file_cap: int = 8 * 1024 * 1024,
    command_cap: int = 16 * 1024,
    max_processes: int = 16,
    max_processes_per_tenant: int = 32,
    max_processes_total: int = 64,
    path: str | None = None,
) -> ToolModule[WorkspaceState]:
    """Build the ``workspace`` module: run programs in per-session directories under `root`.

    `root` is where the module makes its private root directory, made when
    its first session starts and removed after its last stops; by default the
    system's temporary directory. `allow` lists the program names (like
    ``"python3"``) a command may start, each looked up now on the search path;
    ``None`` allows any program found there. `output_cap` is how many bytes of
    each of stdout and stderr a poll returns; `file_cap` the largest file a
    command may write, its stdout and stderr included; `command_cap` the
    longest command line, in characters. `max_processes` bounds the commands
    one session runs at once, `max_processes_per_tenant` those of one tenant's
    sessions (``T`` and ``T/…``), `max_processes_total` those of all sessions.
    `path` is the search path for programs (default: the server's ``PATH``;
    relative entries are dropped). Hosts must add the module explicitly; see
    the module docstring for what it does and does not protect.
    """
    limits = {
        "output_cap": output_cap,
        "file_cap": file_cap,
        "command_cap": command_cap,
        "max_processes": max_processes,
        "max_processes_per_tenant": max_processes_per_tenant,
        "max_processes_total": max_processes_total,
    }
    for name, value in limits.items():
        if value < 1:
            msg = f"{name} must be a positive number, got {value}"
            raise ValueError(msg)
    config = _Config(_programs(allow, path), **limits)
    host = _Host(Path(tempfile.gettempdir() if root is None else root).resolve())

    def new_state(context: ToolContext) -> WorkspaceState:
        # The state holds the root from here: on_stop, which the runtime runs
        # for every state it made (even when on_start fails), lets go of it.
        session = context.session_id
        return WorkspaceState(config, host, host.acquire(session), tenant_of(session))

    module = ToolModule(
        "workspace",
        new_state,
        scope=Scope.SESSION,
        description="Run programs in a per-session working directory and poll their output.",
    )
    # Runs any program it is allowed to: it may delete files or reach the network.
    module.tool(
        execute_command,
        title="Run a command",
        destructive=True,
        idempotent=False,
        open_world=True,
        structured=_StartedData,
    )
    # Changes nothing; what it reads was written by programs, which reach anywhere.
    module.tool(
        poll_process,
        read_only=True,
        title="Poll a process",
        open_world=True,
        structured=_PolledData,
    )
    return module


def _programs(allow: Collection[str] | None, path: str | None) -> _Programs:
    """The search path and the allowlist, each allowed name found on it now."""
    entries = (os.environ.get("PATH", os.defpath) if path is None else path).split(os.pathsep)
    relative = [entry for entry in entries if not os.path.isabs(entry)]
    if relative:
        logger.warning("the workspace ignores relative PATH entries: %s", relative)
    search_path = os.pathsep.join(entry for entry in entries if os.path.isabs(entry))
    if allow is None:
        return _Programs(search_path, None)
    if isinstance(allow, str):
        msg = f"allow must be a collection of program names, not the string {allow!r}"
        raise TypeError(msg)
    allowed = {}
    for name in allow:
        if not name or "/" in name:
            msg = f"allow lists program names looked up on PATH, like 'python3'; got {name!r}"
            raise ValueError(msg)
        found = shutil.which(name, path=search_path)
        identity = None if found is None else _identity(found)
        if found is None or identity is None:
            msg = f"allow: program {name!r} not found on the search path {search_path!r}"
            raise ValueError(msg)
        allowed[name] = _Allowed(found, identity)
    return _Programs(search_path, allowed)


async def execute_command(
    state: WorkspaceState,
    command: Annotated[str, "The command line; split like a POSIX shell would, run without one."],
    cwd: Annotated[str | None, "Directory to run in, relative to the session's directory."] = None,
    # The process's time limit, a tool argument: this call itself returns at once.
    timeout: Annotated[float | None, "Seconds after which the process is killed."] = None,  # noqa: ASYNC109
) -> CallResult:
    """Start a program in the background; poll_process reads its status and output."""
    executable, argv = _parse(command, state.config)
    directory = state.working_directory(cwd)
    deadline = _deadline(timeout)
    try:
        process_id = await state.start(executable, argv, directory, deadline)
    except OSError as exc:  # the supervisor itself could not start: no descriptors, no memory
        msg = f"Error: cannot start {argv[0]!r}: {exc}"
        raise ToolError(msg) from None
    data: dict[str, Any] = {"processId": process_id, "status": "running"}
    return CallResult.both(f"Started {process_id}: {shlex.join(argv)}", data)


def poll_process(
    state: WorkspaceState,
    # camelCase, as clients already send it.
    processId: Annotated[str, "The id execute_command returned."],
) -> CallResult:
    """Report a process's status, exit code and captured output (first output_cap bytes)."""
    entry = state.get(processId)
    # Synchronous, so the watcher cannot record the exit between these reads:
    # an "exited" status always comes with the final, complete output.
    code, status = entry.code, entry.status
    output = entry.output(state.config.output_cap, state.config.file_cap)
    data: dict[str, Any] = {
        "processId": processId,
        "status": status,
        "exitCode": code,
        "stdout": output.stdout,
        "stderr": output.stderr,
        "truncated": output.truncated,
    }
    return CallResult.both(_poll_text(processId, status, code, output), data)
