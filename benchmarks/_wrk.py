"""A load driver around ``wrk``: POST one JSON body over and over, priced in CPU time.

`run_wrk` runs Debian's ``wrk`` against a URL with a generated Lua script that
sets the method, the headers and the body, and checks every response: a status
other than 200, or a body without the expected text (by default ``"result"``,
a JSON-RPC result), counts as a *mismatch*. A server that answers errors fast
must not look fast, so callers treat any mismatch as a failed measurement.
With ``request_ids``, each request carries a JSON-RPC id of its own, as a
client's requests must where they share an MCP session (a server routes each
answer by its id, so concurrent requests with one id would collide).

On a shared machine wall time lies, so the figures that matter are CPU times:
the server's, read from ``/proc/<pid>/stat`` (utime + stime, all its threads)
just before and just after the run, and wrk's own, from the rusage the kernel
returns when the child is reaped (`os.wait4`). Both divided by the requests
answered give CPU µs per request on each side of the socket.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, final

import attrs

from actors.harness._cpu import process_cpu_seconds

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["WrkMissingError", "WrkResult", "process_cpu_seconds", "run_wrk"]

_MARKER = "wrk-floors-result "
"""The prefix of the one line the script's ``done`` prints: the figures as JSON."""

_LUA_TEMPLATE = """\
wrk.method = "POST"
wrk.body = {body}
{headers}
local expected = {expected}
local threads = {{}}
{request}
function setup(thread)
  table.insert(threads, thread)
  -- Each thread is a Lua state of its own: its ids start a billion apart.
  thread:set("next_id", #threads * 1000000000)
end

function init(args)
  responses = 0
  mismatches = 0
  first_mismatch = ""
end

-- Every response is checked: wrk counts statuses above 399 itself, but a JSON-RPC error
-- comes with 200, and a fast error must count against the run, not for it.
function response(status, headers, body)
  responses = responses + 1
  if status ~= 200 or not string.find(body, expected, 1, true) then
    mismatches = mismatches + 1
    if first_mismatch == "" then
      first_mismatch = status .. " " .. string.sub(body, 1, 300)
    end
  end
end

local function hex(text)
  return (string.gsub(text, ".", function(c) return string.format("%02x", string.byte(c)) end))
end

function done(summary, latency, requests)
  local responses, mismatches, sample = 0, 0, ""
  for _, thread in ipairs(threads) do
    responses = responses + thread:get("responses")
    mismatches = mismatches + thread:get("mismatches")
    if sample == "" then sample = thread:get("first_mismatch") end
  end
  local e = summary.errors
  io.write(string.format(
    '{marker}{{"requests":%d,"duration_us":%d,"responses":%d,"mismatches":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"status_errors":%d,"socket_errors":%d,' ..
    '"first_mismatch_hex":"%s"}}\\n',
    summary.requests, summary.duration, responses, mismatches,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    e.status, e.connect + e.read + e.write + e.timeout, hex(sample)))
end
"""


class WrkMissingError(RuntimeError):
    """``wrk`` is not on the PATH."""


@final
@attrs.frozen
class WrkResult:
    """What one wrk run measured."""

    requests: int
    """Requests wrk completed (responses read)."""
    seconds: float
    """The run's wall duration as wrk measured it."""
    p50_us: int
    """Median latency, µs."""
    p90_us: int
    """90th percentile latency, µs."""
    p99_us: int
    """99th percentile latency, µs."""
    non_2xx: int
    """Responses with a status above 399 (wrk's own count)."""
    socket_errors: int
    """Connect, read, write and timeout errors together."""
    mismatches: int
    """Responses whose status was not 200 or whose body lacked the expected text."""
    first_mismatch: str
    """The first mismatching response's status and body start; empty when none."""
    wrk_cpu_seconds: float
    """User plus system CPU time of the wrk process."""
    server_cpu_seconds: float | None
    """User plus system CPU time the server used over the run; None without a server pid."""

    @property
    def requests_per_second(self) -> float:
        """Throughput over wrk's measured duration."""
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def server_us_per_request(self) -> float | None:
        """The server's CPU µs per completed request."""
        if self.server_cpu_seconds is None or not self.requests:
            return None
        return self.server_cpu_seconds * 1e6 / self.requests

    @property
    def wrk_us_per_request(self) -> float | None:
        """wrk's own CPU µs per completed request: the client's share of the machine."""
        return self.wrk_cpu_seconds * 1e6 / self.requests if self.requests else None

    @property
    def clean(self) -> bool:
        """Whether every response was the expected one and no socket failed."""
        return not (self.mismatches or self.non_2xx or self.socket_errors)


def _lua_string(text: str) -> str:
    """A Lua string literal for *text*, every byte outside a safe set as a decimal escape.

    Three digits always: Lua reads up to three, so a shorter escape would swallow a digit
    that follows it.
    """
    safe = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:/")
    return '"' + "".join(chr(b) if b in safe else f"\\{b:03d}" for b in text.encode()) + '"'


_REQUEST_TEMPLATE = """
local id_prefix, id_suffix = {prefix}, {suffix}

function request()
  next_id = next_id + 1
  return wrk.format(nil, nil, nil, id_prefix .. next_id .. id_suffix)
end
"""
_ID_SLOT = "\x00id"
"""A JSON-RPC id no request has, to find where the id goes in the compact body."""


def _id_halves(body: str) -> tuple[str, str]:
    """JSON-RPC request *body*, compact, cut where its id goes: an id joins the halves."""
    message = json.loads(body)
    if not isinstance(message, dict) or "id" not in message:
        msg = f"request_ids needs a JSON-RPC request with an id, not {body[:100]!r}"
        raise ValueError(msg)
    slot = json.dumps(_ID_SLOT)
    prefix, suffix = json.dumps({**message, "id": _ID_SLOT}, separators=(",", ":")).split(slot)
    return prefix, suffix


def _request(body: str) -> str:
    """A Lua ``request`` that sends *body* with a JSON-RPC id of its own each time."""
    prefix, suffix = _id_halves(body)
    return _REQUEST_TEMPLATE.format(prefix=_lua_string(prefix), suffix=_lua_string(suffix))


def _script(body: str, headers: Mapping[str, str], expected: str, *, request_ids: bool) -> str:
    """The Lua script for one run."""
    lines = "\n".join(
        f"wrk.headers[{_lua_string(name)}] = {_lua_string(value)}"
        for name, value in headers.items()
    )
    return _LUA_TEMPLATE.format(
        body=_lua_string(body),
        headers=lines,
        expected=_lua_string(expected),
        marker=_MARKER,
        request=_request(body) if request_ids else "",
    )


def _wrk_path() -> str:
    """The wrk executable, or an error that says how to install it."""
    found = shutil.which("wrk")
    if found is None:
        msg = "wrk is not installed: install it with 'apt-get install wrk' (Debian, Ubuntu)"
        raise WrkMissingError(msg)
    return found


def _parse(output: str) -> dict[str, int | str]:
    """The figures of the script's ``done`` line in wrk's standard output."""
    for line in output.splitlines():
        if line.startswith(_MARKER):
            figures: dict[str, int | str] = json.loads(line[len(_MARKER) :])
            return figures
    msg = f"wrk printed no result line; its output was:\n{output}"
    raise RuntimeError(msg)


def _run_reaped(command: list[str], output: Path) -> tuple[int, float]:
    """Run *command*, its stdout to *output*; return its exit code and CPU seconds."""
    with output.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        # wait4, not wait: the rusage of this one child, not of every child reaped so far.
        _pid, status, usage = os.wait4(process.pid, 0)
    except BaseException:
        process.kill()
        process.wait()
        raise
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_utime + usage.ru_stime


def run_wrk(
    url: str,
    *,
    body: str,
    headers: Mapping[str, str],
    connections: int,
    seconds: int,
    threads: int = 1,
    server_pid: int | None = None,
    expected: str = '"result"',
    timeout_seconds: int = 10,
    request_ids: bool = False,
) -> WrkResult:
    """POST *body* to *url* for *seconds* over *connections* keep-alive connections.

    Every response must have status 200 and contain *expected*, or it counts as a
    mismatch. With *server_pid*, the server's CPU time over the run is measured too.
    With *request_ids*, each request gets a JSON-RPC id of its own (*body* must be a
    JSON-RPC request; its other members are sent as they are). Raises
    `WrkMissingError` when wrk is not installed.
    """
    wrk = _wrk_path()
    with tempfile.TemporaryDirectory(prefix="wrk-") as scratch:
        script = Path(scratch) / "post.lua"
        script.write_text(_script(body, headers, expected, request_ids=request_ids))
        command = [
            wrk,
            f"--connections={connections}",
            f"--threads={threads}",
            f"--duration={seconds}s",
            f"--timeout={timeout_seconds}s",
            f"--script={script}",
            "--latency",
            url,
        ]
        before = process_cpu_seconds(server_pid) if server_pid is not None else None
        code, wrk_cpu = _run_reaped(command, Path(scratch) / "out.txt")
        after = process_cpu_seconds(server_pid) if server_pid is not None else None
        output = (Path(scratch) / "out.txt").read_text(errors="replace")
    if code != 0:
        msg = f"wrk exited with {code}:\n{output}"
        raise RuntimeError(msg)
    figures = _parse(output)
    return WrkResult(
        requests=int(figures["requests"]),
        seconds=int(figures["duration_us"]) / 1e6,
        p50_us=int(figures["p50_us"]),
        p90_us=int(figures["p90_us"]),
        p99_us=int(figures["p99_us"]),
        non_2xx=int(figures["status_errors"]),
        socket_errors=int(figures["socket_errors"]),
        mismatches=int(figures["mismatches"]),
        first_mismatch=bytes.fromhex(str(figures["first_mismatch_hex"])).decode(errors="replace"),
        wrk_cpu_seconds=wrk_cpu,
        server_cpu_seconds=None if before is None or after is None else after - before,
    )
