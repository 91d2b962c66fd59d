"""The CPU floors of HTTP servers for one ``tools/call``, against today's ``serve --http``.

``python -m benchmarks._http_floors [--seconds S] [--rounds R]`` starts, each as a
subprocess on an ephemeral port of 127.0.0.1:

(a) hypercorn on trio with a minimal ASGI app;
(b) raw trio: ``trio.serve_tcp`` and httptools;
(c) uvicorn with httptools on uvloop, the same ASGI app;
(d) an asyncio Protocol with httptools on uvloop;
(e) (c) plus a round trip per request into trio running in guest mode on the loop;
(f) ``python -m actors serve --http``, a 2026-era session-less call of
    ``planning__list_goals`` (read-only, in memory): the denominator.

(a)-(e) do the least an MCP server must (`json.loads` the request, `json.dumps` a
~320-byte result shaped like (f)'s), so each is the floor of its design. wrk
POSTs the same ~300-byte request to each at 1 and at 50 connections, rounds
interleaved (a, b, ... f, a, b, ...), every response checked. The figure that
decides is the server's CPU µs per request (from ``/proc``), not wall time: the
machine is shared, and a server's CPU per call is what a core buys. The table
shows the median of the rounds and their range.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import attrs

from benchmarks._wrk import WrkResult, run_wrk

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["BODY", "EXPECTED", "HEADERS", "Server", "main", "start_design"]

ROOT: Final = Path(__file__).resolve().parents[1]
TOOL: Final = "planning__list_goals"
BODY: Final = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": TOOL,
            "arguments": {},
            "_meta": {
                "sessionId": "bench",
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    },
    separators=(",", ":"),
)
"""A 2026-era ``tools/call`` without an HTTP session, its context in ``_meta``."""
HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": TOOL,
}
"""What a 2026-era client sends with it (the SDK checks the method and name headers)."""
EXPECTED: Final = '"isError":false'
"""Text every response body must contain: a tool result, not a JSON-RPC or tool error."""

DESIGNS: Final = (
    ("a", "hypercorn-trio"),
    ("b", "raw-trio"),
    ("c", "uvicorn-uvloop"),
    ("d", "asyncio-protocol"),
    ("e", "uvicorn-guest-trio"),
    ("f", "actors-serve"),
)
"""Each server's letter and name; (f) is `actors serve`, the others the floors."""
CONNECTIONS: Final = (1, 50)


@final
@attrs.define(eq=False)
class Server:
    """A server subprocess and where it listens."""

    name: str
    """The design's name."""
    process: subprocess.Popen[bytes]
    """The subprocess; its pid is the one whose CPU is measured."""
    url: str
    """The URL to POST to."""


def _wait_for(pattern: str, log: Path, process: subprocess.Popen[bytes], timeout: float) -> str:
    """The first group of *pattern* once it appears in *log*, or an error with the log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    msg = f"server did not start (exit code {process.poll()}); its output:\n{log.read_text()}"
    raise RuntimeError(msg)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop *process*: SIGTERM, then SIGKILL if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def start_design(name: str, *extra: str) -> Iterator[Server]:
    """Run design *name* (a name of `_http_floors_servers`, or ``actors-serve``) meanwhile."""
    with tempfile.TemporaryDirectory(prefix="floors-") as scratch:
        log = Path(scratch) / "output.txt"
        if name == "actors-serve":
            command = [
                *("-m", "actors", "serve", "--http", "127.0.0.1:0", "--state", "memory"),
                # Warnings only: one log line per call is a cost of its own, not of HTTP.
                *("--log-level", "warning"),
            ]
            pattern = r"listening on (http://\S+)"
        else:
            command = ["-m", "benchmarks._http_floors_servers", name]
            pattern = r"^port (\d+)$"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, *command, *extra], cwd=ROOT, stdout=sink, stderr=sink
            )
        try:
            found = _wait_for(pattern, log, process, timeout=60)
            url = found if found.startswith("http") else f"http://127.0.0.1:{found}/mcp"
            yield Server(name, process, url)
        finally:
            _stop(process)


def probe(server: Server) -> str:
    """One request by hand; raises unless it is answered with a tool result."""
    request = urllib.request.Request(server.url, data=BODY.encode(), headers=HEADERS)
    with urllib.request.urlopen(request, timeout=10) as response:
        text: str = response.read().decode()
    if EXPECTED not in text:
        msg = f"{server.name} answered {text!r}, not a tool result"
        raise RuntimeError(msg)
    return text


def measure(server: Server, connections: int, seconds: int) -> WrkResult:
    """One wrk run against *server*; raises if any response was not the expected one."""
    result = run_wrk(
        server.url,
        body=BODY,
        headers=HEADERS,
        connections=connections,
        seconds=seconds,
        server_pid=server.process.pid,
        expected=EXPECTED,
    )
    if not result.clean:
        msg = f"{server.name} at {connections} connections: not a clean run: {result}"
        raise RuntimeError(msg)
    return result


def _median(values: Sequence[float | None]) -> float:
    """The median of the figures that exist."""
    return statistics.median(value for value in values if value is not None)


def table(results: dict[tuple[str, int], list[WrkResult]]) -> str:
    """The plain-text table: medians of the rounds, server CPU with its range."""
    head = (
        f"{'design':<24}{'conns':>6}{'server µs/req':>15}{'(min-max)':>15}{'/ (f)':>8}"
        f"{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'wrk µs/req':>12}"
    )
    lines = [head, "-" * len(head)]
    for connections in CONNECTIONS:
        denominator = _median([r.server_us_per_request for r in results["f", connections]])
        for letter, name in DESIGNS:
            runs = results[letter, connections]
            cpu = [r.server_us_per_request or 0.0 for r in runs]
            spread = f"{min(cpu):.0f}-{max(cpu):.0f}"
            lines.append(
                f"{f'({letter}) {name}':<24}{connections:>6}{_median(cpu):>15.1f}{spread:>15}"
                f"{_median(cpu) / denominator:>8.3f}"
                f"{_median([r.requests_per_second for r in runs]):>9.0f}"
                f"{_median([r.p50_us for r in runs]) / 1e3:>9.2f}"
                f"{_median([r.p99_us for r in runs]) / 1e3:>9.2f}"
                f"{_median([r.wrk_us_per_request for r in runs]):>12.1f}"
            )
        lines.append("")
    return "\n".join(lines)


def _hop(results: dict[tuple[str, int], list[WrkResult]], connections: int) -> float:
    """(e) minus (c): the guest-mode round trip's server CPU per request."""

    def cpu(letter: str) -> float:
        return _median([r.server_us_per_request for r in results[letter, connections]])

    return cpu("e") - cpu("c")


def _check_dependencies() -> None:
    """Fail at once, with the fix, when a design's packages are missing."""
    missing = [name for name in ("httptools", "uvloop", "uvicorn") if not find_spec(name)]
    if missing:
        msg = f"the floors need {', '.join(missing)}: pip install httptools uvloop uvicorn"
        raise SystemExit(msg)


def run(seconds: int, rounds: int) -> dict[tuple[str, int], list[WrkResult]]:
    """Start every server, warm each up, and measure them round by round."""
    _check_dependencies()
    results: dict[tuple[str, int], list[WrkResult]] = {
        (letter, connections): [] for letter, _ in DESIGNS for connections in CONNECTIONS
    }
    with contextlib.ExitStack() as stack:
        servers = {letter: stack.enter_context(start_design(name)) for letter, name in DESIGNS}
        for server in servers.values():
            probe(server)
            measure(server, max(CONNECTIONS), 1)  # warm-up: imports, caches, the allocator
        for round_number in range(rounds):
            for connections in CONNECTIONS:
                for letter, server in servers.items():
                    result = measure(server, connections, seconds)
                    results[letter, connections].append(result)
                    print(
                        f"round {round_number + 1}/{rounds} ({letter}) {server.name} "
                        f"c={connections}: {result.server_us_per_request:.1f} µs/req, "
                        f"{result.requests_per_second:.0f} req/s",
                        file=sys.stderr,
                        flush=True,
                    )
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks._http_floors")
    parser.add_argument("--seconds", type=int, default=5, help="length of one wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    options = parser.parse_args(argv)
    results = run(options.seconds, options.rounds)
    print(f"{options.rounds} rounds of {options.seconds} s, wrk 1 thread; medians of the rounds")
    print(table(results))
    for connections in CONNECTIONS:
        hop = _hop(results, connections)
        print(f"guest-mode hop, (e) - (c) at {connections} conns: {hop:.1f} µs/req")


if __name__ == "__main__":
    main()
