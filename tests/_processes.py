"""Processes a test started, read from /proc: to check that none outlives its test."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "Process",
    "command_line_of",
    "descendants",
    "left_after",
    "listening_addresses",
    "listening_ports",
    "name_of",
    "run_leaving_nothing",
    "running_with",
    "still_running",
]

# A process by pid and start time (field 22 of /proc/PID/stat), so a reused pid is not it.
Process = tuple[int, str]


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def descendants(root: int) -> set[Process]:
    """Every process below `root` now: the local Ray's daemons and workers, the shards."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[Process] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            fields = _stat(child)
            if fields is not None:
                found.add((child, fields[19]))
                todo.append(child)
    return found


def name_of(pid: int) -> str:
    """A process's command name (its first 15 characters), or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def still_running(processes: set[Process]) -> set[Process]:
    """Those of `processes` still running (a zombie has exited: it is only unreaped)."""
    running = set()
    for pid, start in processes:
        fields = _stat(pid)
        if fields is not None and fields[19] == start and fields[0] != "Z":
            running.add((pid, start))
    return running


def left_after(processes: set[Process], seconds: float) -> list[int]:
    """The pids of `processes` still running after up to `seconds` (they may take a moment)."""
    deadline = time.monotonic() + seconds
    while still_running(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    return sorted(pid for pid, _ in still_running(processes))


def command_line_of(pid: int) -> str:
    """A process's command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def listening_addresses(pids: set[int]) -> set[str]:
    """The addresses the TCP sockets of `pids` listen on (``127.0.0.1``, ``0.0.0.0``, ``::``…)."""
    return {address for address, _ in _listening(pids)}


def listening_ports(pids: set[int]) -> set[int]:
    """The TCP ports `pids` listen on: where a server told ``--port 0`` went."""
    return {port for _, port in _listening(pids)}


def _listening(pids: set[int]) -> set[tuple[str, int]]:
    """The (address, port) of every TCP socket of `pids` that listens."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue  # gone, or not ours to read
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.add((_address(address), int(port, 16)))
    return found


def _address(hexadecimal: str) -> str:
    """/proc/net/tcp's address (little-endian words of hex) as an IP address."""
    raw = bytes.fromhex(hexadecimal)
    words = b"".join(raw[index : index + 4][::-1] for index in range(0, len(raw), 4))
    address = ipaddress.ip_address(words)
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    return str(mapped or address)


def running_with(marker: str) -> list[int]:
    """Processes whose environment holds `marker`: what a command given it started, and what
    those started in turn, wherever they were reparented."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours
    return found


def run_leaving_nothing(
    command: Sequence[str], *, cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `command` to its end, its output captured; fail if a process it started (given a
    marker in its environment) is still running afterwards, wherever it was reparented."""
    marker = f"RUN_LEAVING_NOTHING_{uuid.uuid4().hex}"
    done = subprocess.run(
        list(command),
        cwd=cwd,
        env={**os.environ, marker: "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert running_with(marker) == [], f"{command[:4]} left processes behind: {done.stderr}"
    return done
