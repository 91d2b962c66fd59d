"""The two ends of the stdio transport: pipes read and written by trio, the threaded fallback.

Under an MCP client, stdin and stdout are pipes of the server's own, and trio
reads and writes them directly; for a terminal, a file, or stderr sharing a
pipe with them, the server falls back to worker threads. Either way stray
output of a handler never reaches the wire.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests._mcp_helpers import SERVE, LogFile, initialize_request, raw_server, tools_call

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

INITIALIZE = initialize_request("ends-test")
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def wire(*messages: dict[str, Any]) -> bytes:
    """Messages as the newline-delimited JSON the stdio transport reads."""
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def threads_of(pid: int) -> int:
    """How many threads process `pid` has."""
    return len(os.listdir(f"/proc/{pid}/task"))


async def test_pipes_are_served_without_worker_threads() -> None:
    # A memory store: the SQLite store commits from a worker thread by design.
    async with raw_server("--state", "memory") as server:
        await server.initialize()
        for number in range(20):
            response = await server.call("planning__create_goal", {"goal": f"g{number}"})
            assert not response["result"]["isError"], response
        # Written within the log's delay, which twenty calls may take less than.
        await server.log.wait_for(re.compile(r"serving MCP on stdio \(pipes\)"), server.process)
        # The threaded transport keeps a worker per read and write in trio's
        # thread cache; on pipes the server runs on its main thread alone.
        assert threads_of(server.process.pid) == 1


@asynccontextmanager
async def spawned(
    argv: Sequence[str], stderr: Any, env: dict[str, str] | None = None
) -> AsyncIterator[trio.Process]:
    """A server process with pipes for stdin and stdout; stopped and reaped on the way out."""
    process = await trio.lowlevel.open_process(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
    )
    try:
        yield process
    finally:
        with trio.CancelScope(shield=True):
            process.kill()
            await process.wait()


async def exchange(process: trio.Process, messages: bytes, reply_id: int) -> list[bytes]:
    """Send `messages`, read stdout until the reply to `reply_id`, close stdin; every line
    the server wrote to stdout until it exited (with ``2>&1``, its log lines too: those
    waiting to be written go out as it stops)."""
    assert process.stdin is not None
    assert process.stdout is not None
    await process.stdin.send_all(messages)
    received = b""
    with trio.fail_after(60):
        while f'"id":{reply_id},'.encode() not in received:
            chunk = await process.stdout.receive_some()
            assert chunk, f"stdout closed early: {received!r}"
            received += chunk
        await process.stdin.aclose()
        while chunk := await process.stdout.receive_some():
            received += chunk
        assert await process.wait() == 0
    return received.splitlines()


def replies(lines: list[bytes]) -> dict[int, dict[str, Any]]:
    """The JSON-RPC replies among `lines`, by id (log lines may be mixed in)."""
    messages = [json.loads(line) for line in lines if line.startswith(b"{")]
    return {message["id"]: message for message in messages if "id" in message}


async def test_stderr_sharing_the_stdout_pipe_keeps_the_threaded_transport() -> None:
    # `2>&1`: non-blocking mode on the shared pipe would reach the log's writes.
    call = tools_call("planning__create_goal", {"goal": "Bake"}, request_id=2)
    async with spawned(SERVE, subprocess.STDOUT) as process:
        lines = await exchange(process, wire(INITIALIZE, INITIALIZED, call), reply_id=2)
    assert b"serving MCP on stdio (worker threads)" in b"\n".join(lines)
    result = replies(lines)[2]["result"]
    assert not result["isError"], result
    assert "Bake" in result["content"][0]["text"]


OWNS_PIPES = "from actors.server._stdio import owns_pipes; print(owns_pipes(), file=sys.stderr)"


def owns_pipes_with(stdin: Any, stdout: Any, stderr: Any) -> str:
    """What `owns_pipes` says in a process with these three standard streams."""
    with tempfile.TemporaryFile() as report:
        if stderr is None:
            stderr = report
        subprocess.run(
            [sys.executable, "-c", f"import sys; {OWNS_PIPES}"],
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            check=True,
            timeout=30,
        )
        report.seek(0)
        return report.read().decode().strip()


def test_owns_pipes_for_pipes_of_its_own() -> None:
    assert owns_pipes_with(subprocess.PIPE, subprocess.PIPE, None) == "True"


def test_owns_sockets_of_its_own() -> None:
    server_end, client_end = socket.socketpair()
    with server_end, client_end:
        assert owns_pipes_with(server_end, server_end, None) == "True"


def test_does_not_own_a_file_on_stdin(tmp_path: Path) -> None:
    path = tmp_path / "stdin"
    path.write_bytes(b"")
    with path.open("rb") as stdin:
        assert owns_pipes_with(stdin, subprocess.PIPE, None) == "False"


def test_does_not_own_a_stdout_pipe_shared_with_stderr() -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; {OWNS_PIPES}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=True,
        timeout=30,
    )
    assert result.stdout.decode().strip() == "False"


SCRIPTED_SERVER = Path(__file__).parents[1] / "_scripted_server.py"


def scripted_server(eof_grace: float = 10.0) -> tuple[str, ...]:
    """The command line of the server in `tests/_scripted_server.py`."""
    return (sys.executable, str(SCRIPTED_SERVER), str(eof_grace))


async def test_stray_output_of_a_handler_misses_the_wire() -> None:
    """Printed (and left in sys.stdout's buffer) or written to fd 1: it all lands on stderr."""
    call = tools_call("scripted__shout", {}, request_id=2)
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with tempfile.TemporaryFile() as log:
        async with spawned(scripted_server(), log, env=buffered) as process:
            lines = await exchange(process, wire(INITIALIZE, INITIALIZED, call), reply_id=2)
            assert process.stdout is not None
            lines += (await process.stdout.receive_some()).splitlines()  # until EOF
        text = LogFile(log).text()
    assert all(line.startswith(b"{") for line in lines), lines
    assert replies(lines)[2]["result"]["content"][0]["text"] == "answered"
    assert "stray print" in text
    assert "stray write" in text
    assert "fds restored: True" in text


async def test_a_handlers_child_reads_eof_not_the_wire() -> None:
    """fd 0 points at /dev/null while serving: no request bytes, no non-blocking pipe."""
    call = tools_call("scripted__child_stdin", {}, request_id=2)
    with tempfile.TemporaryFile() as log:
        async with spawned(scripted_server(), log) as process:
            lines = await exchange(process, wire(INITIALIZE, INITIALIZED, call), reply_id=2)
        text = LogFile(log).text()
    assert replies(lines)[2]["result"]["content"][0]["text"] == "b''", text
    assert "fds restored: True" in text


async def test_a_client_closing_stdout_stops_the_server() -> None:
    """Nobody reads the replies: the server stops taking calls, says why, and exits 0."""
    call = tools_call("scripted__shout", {}, request_id=2)
    with tempfile.TemporaryFile() as log:
        async with spawned(scripted_server(), log) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.send_all(wire(INITIALIZE))
            await process.stdout.receive_some()  # the initialize reply
            await process.stdout.aclose()
            await process.stdin.send_all(wire(INITIALIZED, call))
            with trio.fail_after(60):
                assert await process.wait() == 0  # stdin is still open
        text = LogFile(log).text()
    assert "the client closed stdout; stopped serving" in text
    assert "fds restored: True" in text


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
async def test_calls_in_flight_at_eof_still_get_their_replies(
    stdin_kind: str, tmp_path: Path
) -> None:
    """A client that closes stdin right after its last request reads every reply."""
    goals = [
        tools_call("planning__create_goal", {"goal": f"g{n}"}, request_id=10 + n) for n in range(5)
    ]
    listing = tools_call("planning__list_goals", {}, request_id=20)
    messages = wire(INITIALIZE, INITIALIZED, *goals, listing)
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(messages)
    with requests.open("rb") as file, tempfile.TemporaryFile() as log:
        with trio.fail_after(60):
            result = await trio.run_process(
                list(SERVE),
                stdin=messages if stdin_kind == "pipe" else file,
                stderr=log,
                capture_stdout=True,
            )
        text = LogFile(log).text()
    answered = replies(result.stdout.splitlines())
    assert sorted(answered) == [1, 10, 11, 12, 13, 14, 20], text
    assert all(not answered[n]["result"]["isError"] for n in (10, 11, 12, 13, 14, 20))
    assert "Goals (5)" in answered[20]["result"]["content"][0]["text"]


async def test_the_wait_for_replies_at_eof_is_bounded() -> None:
    """A call still running when the grace is over is answered "Connection closed"."""
    nap = tools_call("scripted__nap", {"seconds": 60}, request_id=2)
    with tempfile.TemporaryFile() as log:
        with trio.fail_after(60):
            result = await trio.run_process(
                list(scripted_server(eof_grace=0.3)),
                stdin=wire(INITIALIZE, INITIALIZED, nap),
                stderr=log,
                capture_stdout=True,
            )
        text = LogFile(log).text()
    assert replies(result.stdout.splitlines())[2]["error"]["message"] == "Connection closed"
    assert "stdin closed; 1 call(s) got no reply in time" in text


async def test_a_client_that_stops_reading_cannot_hold_off_sigterm() -> None:
    """Replies pile up in a full pipe; SIGTERM still stops the server (the write is cancellable)."""
    listing = [
        {"jsonrpc": "2.0", "id": 100 + n, "method": "tools/list", "params": {}} for n in range(300)
    ]
    async with raw_server("--shutdown-grace", "1") as server:
        await server.initialize()
        await server.send(wire(*listing).rstrip(b"\n"))  # never read: the stdout pipe fills
        # Idle with replies still to write (they are far more than a pipe holds): stuck.
        await until_idle(server.process.pid)
        assert unread_bytes(server.process.stdout) > 0, "the server wrote no reply"
        assert server.process.returncode is None, "the server should be stuck writing"
        server.process.send_signal(signal.SIGTERM)
        with trio.fail_after(60):
            assert await server.process.wait() == 0


def rss_bytes(pid: int) -> int:
    """The resident set size of process `pid`."""
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(kib) * 1024


def cpu_ticks(pid: int) -> int:
    """The CPU time process `pid` has used so far, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime and stime


async def until_idle(pid: int) -> None:
    """Return once process `pid` has used no CPU for a few polls in a row."""
    with trio.fail_after(120):
        last, still = cpu_ticks(pid), 0
        while still < 4:
            await trio.sleep(0.25)
            now = cpu_ticks(pid)
            still = still + 1 if now == last else 0
            last = now


def unread_bytes(stream: Any) -> int:
    """How many bytes written to a pipe have not been read from it yet."""
    raw = fcntl.ioctl(stream.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", raw)[0])


async def test_a_client_that_never_reads_cannot_grow_the_server() -> None:
    """Large replies nobody reads: the server stops reading requests instead of holding them all.

    250 requests for a 900 kB document would hold about 225 MB of replies; the
    server reads only as many as it may have in flight and leaves the rest in
    the pipe (the pings behind them make sure there is more than one read's
    worth), so the client's writes block instead.
    """
    document = ("x" * 99 + "\n") * 9000
    async with raw_server() as server, trio.open_nursery() as nursery:
        await server.initialize()
        added = await server.call(
            "content_store__add_content", {"filename": "big", "content": document}
        )
        read = {"id": added["result"]["structuredContent"]["id"]}
        warm = await server.call("content_store__read_content", read)
        assert len(warm["result"]["structuredContent"]["content"]) == len(document) - 1
        pid = server.process.pid
        baseline = rss_bytes(pid)
        reads = [
            tools_call("content_store__read_content", read, request_id=1000 + n) for n in range(250)
        ]
        pings = [{"jsonrpc": "2.0", "id": 2000 + n, "method": "ping"} for n in range(2000)]
        nursery.start_soon(server.send, wire(*reads, *pings).rstrip(b"\n"))
        await until_idle(pid)
        grown = rss_bytes(pid) - baseline
        unread = unread_bytes(server.process.stdin)
        nursery.cancel_scope.cancel()  # the write that cannot finish
    assert unread > 0, "the server read every request although nobody reads its replies"
    assert grown < 120 * 1024 * 1024, f"the server grew by {grown / 2**20:.0f} MiB"
