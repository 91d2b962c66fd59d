"""Processes pinned to cores, every thread of them: the servers on one, the load on another.

A process's threads each have their own affinity (``sched_setaffinity`` of the process
sets its main thread's only), so pinning a process means pinning each of its threads; the
threads they start later inherit it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["pin", "pinned"]


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of process `pid` onto `cores`."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # the thread ended meanwhile
            os.sched_setaffinity(int(task.name), cores)


@contextlib.contextmanager
def pinned(cores: set[int]) -> Iterator[None]:
    """This process on `cores` for the block, then back where it was allowed to run."""
    before = os.sched_getaffinity(0)
    pin(os.getpid(), cores)
    try:
        yield
    finally:
        pin(os.getpid(), before)
