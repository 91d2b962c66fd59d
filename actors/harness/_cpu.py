"""CPU time of server processes and of this one, and the machine's load, as a load run reads them.

On a shared machine wall time lies, so a load run prices each call in CPU
time: the server's, read from ``/proc/<pid>/stat`` (Linux) for the process
tree a target started, and this process's own (the load generator) from
`resource.getrusage`. Where ``/proc`` is missing or a process is gone, the
figure is unknown (None), never a guess.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import TYPE_CHECKING, final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "MachineLoad",
    "client_cpu_seconds",
    "process_cpu_seconds",
    "tree_cpu_seconds",
    "trees_cpu_seconds",
]


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` from field 3 (the state) on."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat[stat.rindex(")") + 2 :].split()


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds process *pid* has used so far, all its threads."""
    fields = _stat_fields(pid)
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """The live children of *pid*, every thread's (``/proc/<pid>/task/*/children``)."""
    found = []
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in path.read_text().split()]
        except OSError:
            continue  # the thread ended meanwhile
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of *pid* and every live descendant, plus what reaped children had used.

    A server that runs work in child processes (a worker pool, a shell wrapping
    the real server) is priced whole: live descendants are read one by one, and
    the children each process already reaped are in its cutime and cstime.
    """
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = _stat_fields(current)
        except (OSError, ValueError):
            if current == pid:
                raise
            continue  # a descendant that ended meanwhile: its parent's cutime has it
        ticks = sum(int(fields[index]) for index in (11, 12, 13, 14))  # utime stime cutime cstime
        total += ticks / os.sysconf("SC_CLK_TCK")
        todo += _children(current)
    return total


def trees_cpu_seconds(pids: Iterable[int]) -> float | None:
    """The summed `tree_cpu_seconds` of *pids*; None if any cannot be read (no /proc, gone)."""
    try:
        return sum(tree_cpu_seconds(pid) for pid in pids)
    except (OSError, ValueError):
        return None


def client_cpu_seconds() -> float:
    """User plus system CPU seconds this process (the load generator) has used, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@final
@attrs.frozen
class MachineLoad:
    """The machine's load average over the last minute, and its cores, at one moment."""

    load_1m: float
    """`os.getloadavg`'s first figure: runnable processes, averaged over a minute."""
    cores: int
    """Cores this process may run on (its CPU affinity), else the machine's count."""

    @classmethod
    def now(cls) -> MachineLoad:
        """The load and cores right now."""
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
        return cls(os.getloadavg()[0], cores)
