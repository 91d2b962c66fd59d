"""The per-command supervisor of the ``workspace`` module (Linux only).

The server starts one supervisor for every command, as::

    python -I -S _supervisor.py CONTROL_FD FILE_CAP EXECUTABLE ARG0 [ARG ...]

in a session of its own, in the command's working directory, with the
command's (already scrubbed) environment, ``/dev/null`` as stdin and the
command's two output files as stdout and stderr. ``-I -S`` keep it to the
standard library: no site-packages, no ``PYTHON*`` variables, nothing from
the working directory on ``sys.path``. It never imports the rest of the
package, and the package never imports it.

It is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): when a process
below it exits, that process's children are re-parented to the supervisor
instead of to init. So whatever the command starts stays below the
supervisor — the child of a leader that already exited, a grandchild that
called ``setsid`` to leave the process group — and it can reap and kill all
of it. In order, it:

1. caps the size of every file the command writes (``RLIMIT_FSIZE``, which
   its descendants inherit; a write past it gets SIGXFSZ or EFBIG) and turns
   core dumps off (``RLIMIT_CORE`` 0), so a cap hit leaves no core file;
2. starts the command with ``posix_spawn`` in a new session, every signal's
   default disposition and an empty signal mask (Python ignores SIGPIPE and
   SIGXFSZ, which a child would otherwise inherit), and reports
   ``started PID`` — or ``failed ERRNO`` and exits;
3. reaps every child as it exits, and reports ``exit CODE`` when the command
   itself does (negative for a signal, like `subprocess`);
4. exits once it has no child left: with nothing below it, it has nothing to do.

The control socket (CONTROL_FD) carries those reports to the server and two
orders from it:

* a ``t`` byte: SIGTERM to the command's process group and to every process
  the supervisor adopted (again to each process adopted later);
* end of file — the server shut down its sending side, or died: SIGKILL to
  all of it, in rounds, until no child is left. SIGTERM, SIGINT or SIGHUP
  sent to the supervisor itself mean the same.

A SIGKILL round kills the supervisor's own children: the command's group
while the command is unreaped, and every child found in ``/proc`` (whose
``/proc/PID/task/*/children`` lists are not on every kernel). Only this
process reaps its children, so none of those ids can have been reused by an
unrelated process when the signal is sent. Grandchildren are not signalled
by id (their parents could reap them, freeing the id); they are re-parented
here as soon as their parent dies and the next round kills them. A killed
process runs no more code, so it forks no more: the rounds end after about
as many rounds as the tree is deep.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import sys
from typing import Final

__all__ = ["main", "run"]

_PR_SET_CHILD_SUBREAPER: Final = 36  # from <linux/prctl.h>
_ROUND: Final = 0.25
"""Seconds between rounds while terminating or killing, unless a child's exit comes first.

A child's exit wakes the supervisor (SIGCHLD), and that is when its children
are adopted; a process deeper down that exits has its children adopted with
no signal, which this period catches. Each round reads all of /proc, so not
more often."""
_STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_DEFAULT_SIGNALS: Final = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(error)}")


def _children() -> list[int]:
    """The pids whose parent is this process, read from /proc."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:  # gone since the listing
            continue
        # The command name (in parentheses) may hold spaces and ')'; the
        # fields after the last ')' are: state, ppid, ...
        if int(stat.rsplit(b")", 1)[1].split()[1]) == me:
            found.append(int(name))
    return found


def _signal(pid: int, sig: signal.Signals) -> None:
    # ProcessLookupError: exited meanwhile (still unreaped, so still ours).
    # PermissionError: it runs as another user now (sudo, a setuid program);
    # that one cannot be signalled, but the others must still be.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


class _Supervisor:
    """The state of one supervision: what was ordered, what was reported."""

    def __init__(self, control: int) -> None:
        self.control = control
        self.command = 0
        """The command's pid while it is unreaped; 0 before it starts and once reaped."""
        self.listening = True
        """Whether the server may still send orders (no end of file yet)."""
        self.terminating = False
        self.killing = False
        self.terminated: set[int] = set()
        """Pids already sent SIGTERM, so each gets it once."""

    def report(self, line: str) -> None:
        """Send one report; a server that is gone reads nothing, and its end of file follows."""
        with contextlib.suppress(OSError):
            os.write(self.control, line.encode("ascii") + b"\n")

    def start(self, executable: str, argv: list[str]) -> bool:
        """Start the command; report it either way."""
        try:
            self.command = os.posix_spawn(
                executable,
                argv,
                os.environ,
                setsid=True,
                setsigdef=_DEFAULT_SIGNALS,
                setsigmask=(),
            )
        except OSError as exc:
            self.report(f"failed {exc.errno}")
            return False
        self.report(f"started {self.command}")
        return True

    def reap(self) -> bool:
        """Reap every child that has exited; False once there is no child at all."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.command:
                self.command = 0
                self.report(f"exit {os.waitstatus_to_exitcode(status)}")

    def order(self, data: bytes) -> None:
        """Act on what the server sent: end of file kills, ``t`` terminates."""
        if not data:
            self.listening = False
            self.killing = True
        elif b"t" in data:
            self.terminating = True

    def signal_round(self) -> None:
        """SIGKILL every child when killing; SIGTERM the ones not told yet when terminating."""
        if self.killing:
            self._signal_group(signal.SIGKILL)
            for pid in _children():
                _signal(pid, signal.SIGKILL)
        elif self.terminating:
            if self.command and self.command not in self.terminated:
                self.terminated.add(self.command)
                self._signal_group(signal.SIGTERM)
            fresh = [pid for pid in _children() if pid not in self.terminated]
            self.terminated.update(fresh)
            for pid in fresh:
                _signal(pid, signal.SIGTERM)

    def _signal_group(self, sig: signal.Signals) -> None:
        """Signal the command's process group, while the command is unreaped."""
        # The unreaped command pins its pid, so no other group can have that id.
        if self.command:
            # ProcessLookupError: the group is empty (its members left it);
            # PermissionError: what is left of it runs as another user.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.command, sig)


def run(control: int, file_cap: int, executable: str, argv: list[str]) -> int:
    """Supervise one command to the end; the exit code is 0 unless it could not start."""
    os.set_inheritable(control, False)  # the command must not hold the server's line
    _become_subreaper()
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_cap, file_cap))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    supervisor = _Supervisor(control)

    # Signals wake the select below through this pipe (a child's exit, a stop
    # request); their Python handlers only record what they mean.
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda _number, _frame: None)
    for stop in _STOP_SIGNALS:
        signal.signal(stop, lambda _number, _frame: supervisor.order(b""))

    if not supervisor.start(executable, argv):
        return 1
    while supervisor.reap():
        supervisor.signal_round()
        _wait(supervisor, wake_read)
    return 0


def _wait(supervisor: _Supervisor, wake_read: int) -> None:
    """Wait for a signal or an order (or the next round), and take the order."""
    watched = [wake_read, supervisor.control] if supervisor.listening else [wake_read]
    busy = supervisor.killing or supervisor.terminating
    readable, _, _ = select.select(watched, [], [], _ROUND if busy else None)
    if supervisor.control in readable:
        try:
            data = os.read(supervisor.control, 64)
        except OSError:  # reset by a server that died
            data = b""
        supervisor.order(data)
    if wake_read in readable:
        with contextlib.suppress(BlockingIOError):  # drained
            while os.read(wake_read, 512):
                pass


def main(arguments: list[str]) -> int:
    """Parse the command line the server built and supervise the command."""
    control, file_cap, executable, *argv = arguments[1:]
    return run(int(control), int(file_cap), executable, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
