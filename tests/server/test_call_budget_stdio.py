"""The budget of a ``tools/call`` served over stdio, held without a clock.

How and why calls are counted: `tests.runtime.test_call_budget`.

The stdio transport (`actors.server._stdio.serve_stdio`) reads and writes the
process's own fds 0 and 1, so the count is taken in a child process: it points
fds 0 and 1 at pipes of its own, serves them as ``actors serve`` does (the
adapter ``serve`` builds for stdio, the SDK's ``stdio_server`` framing, this
project's line reader and guards), plays the MCP client on the other ends of
the pipes on the same trio loop, and reports what cProfile counted on a copy of
the stdout it was started with. The client's code lives here, not in
``actors`` or ``protocol``: only the server's share of each round trip counts.

The figures are `tests.runtime.test_call_budget`'s: the same filter, the same tool, the
same number of calls, and a budget beyond the runtime's own warm call.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio

from actors import open_runtime
from actors.server import ServeOptions
from actors.server._serve import _adapter, _stdio_session
from actors.server._stdio import serve_stdio

from .._mcp_helpers import initialize_request
from ..runtime.test_call_budget import CALLS, WARM_CALL, Counted, _noop_module, _session, counted

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actors import Runtime

STDIO_CALL: Final = 70
"""A ``tools/call`` line written to a stdio server's stdin, to its reply read from stdout,
beyond the runtime's: the lean stdio path (`actors.server._stdio_lean`), which leaves the
SDK's transport, dispatcher and kernel out (their functions were never counted here, so
the figure moved by one while the call's CPU halved; ``docs/performance.md``). (60, not 51:
the pydantic-free checks of `actors.server.mcp._plain` are this project's functions, where
the SDK's validators they replace were not counted. 64, not 60: what the warm call saved
that this path still runs, as `MCP_CALL`'s, and the lean path's one step to the wire. 66,
not 64: requests start one at a time, so that one key's calls keep the order they were
read in, `LeanStdio._launch`. 70, not 66: a request is carried as one `_Request` and its
result made in `LeanStdio._result`, so that the catalog's requests take the same path,
`LeanStdio._taken` telling them apart.)"""

_ROOT: Final = Path(__file__).resolve().parents[2]
_WARM_UPS: Final = 10
"""Round trips before counting: the connection's session gets its actor, the paths their caches."""
_CHILD_DEADLINE: Final = 60.0
"""The child's own hang guard, so that a stuck exchange reports where it stuck."""
_HANG_GUARD: Final = 180.0
"""The test's: the child is killed past it (a hang guard, not a measure of speed)."""
_ONE_MORE: Final = "--one-more-function"
"""The child's flag for `_one_more_function`."""


class _Reported(Counted):
    """A `Counted` the child measured and reported: its figures, with `check` and `report`."""

    def __init__(self, reported: dict[str, Any]) -> None:
        self.functions = {str(name): float(count) for name, count in reported["functions"].items()}
        self.per_call = float(reported["per_call"])


class _Measured:
    """What the child reported: the stdio round trip, the runtime's warm call, its log."""

    def __init__(self, reported: dict[str, Any], log: str) -> None:
        self.stdio: Final = _Reported(reported["stdio"])
        self.warm: Final = _Reported(reported["warm"])
        self.log: Final = log

    def what(self) -> str:
        """The path, named for `Counted.check`, with the runtime's share as counted beside it."""
        return (
            f"a tools/call over stdio (in the same process, the runtime's own warm call ran "
            f"{self.warm.per_call:g}; WARM_CALL is {WARM_CALL})"
        )


async def _measure(*flags: str) -> _Measured:
    """Run the child (`_child`) with `flags`; what it counted."""
    command = [
        sys.executable,
        "-c",
        f"import sys; from {__name__} import _child; _child(sys.argv[1:])",
        *flags,
    ]
    with trio.fail_after(_HANG_GUARD):
        # Cancelled, run_process kills the child and waits for it.
        done = await trio.run_process(
            command, cwd=_ROOT, capture_stdout=True, capture_stderr=True, check=False
        )
    log = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"the child failed ({done.returncode}):\n{log}"
    reported = json.loads(done.stdout)
    assert isinstance(reported, dict), reported
    return _Measured(reported, log)


class TestOverStdio:
    async def test_a_tools_call_over_stdio(self) -> None:
        """A ``tools/call`` on stdio pipes, as under an MCP client: ``serve``'s adapter, the
        SDK's ``stdio_server`` framing, this project's line reader (`_StdinLines`), guards
        (`_GuardedReadStream`, `_Exchange`) and pipe writer, and the runtime's warm call.

        The client runs in the server's process, on its trio loop, so cProfile sees both
        sides of each round trip; only the server's side is this project's code.
        """
        measured = await _measure()
        assert "serving MCP on stdio (pipes)" in measured.log, measured.log
        measured.stdio.check(STDIO_CALL + WARM_CALL, measured.what())

    async def test_one_more_function_on_the_stdio_path_is_over_budget(self) -> None:
        """The count sees a change of one function call there: a wrapper around
        `_Exchange.hold`, which every request the lean path takes passes through once."""
        measured = await _measure(_ONE_MORE)
        found = measured.stdio
        assert found.per_call == STDIO_CALL + WARM_CALL + 1, found.report()
        assert any("(wrapped)" in name for name in found.functions), found.report()
        with pytest.raises(AssertionError, match=r"over its budget of \d+"):
            found.check(STDIO_CALL + WARM_CALL, measured.what())
        with pytest.raises(AssertionError, match=r"under its budget of \d+"):
            found.check(STDIO_CALL + WARM_CALL + 2, measured.what())


# ---- the child ---------------------------------------------------------------------


def _child(flags: Sequence[str]) -> None:
    """Serve stdio on pipes of this process's own, count, and report on the stdout it had.

    Run as ``python -c``, from `_measure`: fds 0 and 1 are taken over here.
    """
    logger = logging.getLogger("actors.serve")  # the transport's lines; not one per call
    logger.setLevel(logging.INFO)
    logger.addHandler(logging.StreamHandler(sys.stderr))
    report = os.dup(1)
    stdin_read, client_requests = os.pipe()
    client_replies, stdout_write = os.pipe()
    os.dup2(stdin_read, 0)
    os.dup2(stdout_write, 1)
    os.close(stdin_read)
    os.close(stdout_write)
    reported = trio.run(_serve_and_count, client_requests, client_replies, _ONE_MORE in flags)
    with os.fdopen(report, "w") as out:
        json.dump(reported, out)


def _figures(found: Counted) -> dict[str, Any]:
    return {"per_call": found.per_call, "functions": found.functions}


async def _serve_and_count(requests_fd: int, replies_fd: int, one_more: bool) -> dict[str, Any]:
    with trio.fail_after(_CHILD_DEADLINE):
        async with open_runtime([_noop_module()]) as runtime:
            warm = await _warm_call(runtime)
            if one_more:
                _one_more_function()
            # As `serve` builds and runs the stdio transport.
            options = ServeOptions()
            adapter = _adapter(runtime, options, None, _stdio_session(options), None)
            serve = functools.partial(
                serve_stdio,
                adapter,
                options.max_request_bytes,
                trio.Event(),
                eof_grace=options.runtime.shutdown_grace,
                max_in_flight=options.max_in_flight,
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve)
                client = _Client(
                    trio.lowlevel.FdStream(requests_fd), trio.lowlevel.FdStream(replies_fd)
                )
                try:
                    stdio = await client.count()
                finally:
                    await client.close_stdin()  # EOF: the server stops serving
            await client.aclose()
    return {"stdio": _figures(stdio), "warm": _figures(warm)}


async def _warm_call(runtime: Runtime) -> Counted:
    """`TestInProcess.test_a_warm_call`'s count, in this process."""
    for index in range(CALLS):
        await runtime.call_tool("budget__noop", meta=_session(index))

    async def call(index: int) -> object:
        return await runtime.call_tool("budget__noop", meta=_session(index))

    return await counted(call)


def _one_more_function() -> None:
    """Put one more of this project's functions on the path of every request read."""
    from actors.server import _stdio

    hold = _stdio._Exchange.hold

    def wrapped(*args: Any) -> Any:
        return hold(*args)

    wrapped.__code__ = wrapped.__code__.replace(co_filename=_stdio.__file__)
    _stdio._Exchange.hold = wrapped  # type: ignore[method-assign,assignment]


class _Client:
    """The MCP client on the other ends of the server's pipes: JSON-RPC lines, in and out."""

    def __init__(self, requests: trio.lowlevel.FdStream, replies: trio.lowlevel.FdStream) -> None:
        self._requests = requests
        self._replies = replies
        self._buffer = bytearray()
        self._next_id = 1

    async def count(self) -> Counted:
        """The handshake, `_WARM_UPS` calls, then `CALLS` counted round trips."""
        request = initialize_request("budget")
        self._next_id = request["id"] + 1
        await self._send(request)
        initialized = await self._receive()
        assert initialized.get("id") == request["id"], initialized
        assert "result" in initialized, initialized
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for index in range(_WARM_UPS):
            await self.call(index)
        return await counted(self.call)

    async def call(self, _index: int) -> object:
        """One ``tools/call`` of the noop tool: the request written, its reply read."""
        request_id = self._next_id
        self._next_id += 1
        params = {"name": "budget__noop", "arguments": {}}
        await self._send(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        )
        reply = await self._receive()
        assert reply.get("id") == request_id, reply
        assert reply["result"]["isError"] is False, reply
        assert [part["text"] for part in reply["result"]["content"]] == ["ok"], reply
        return reply

    async def close_stdin(self) -> None:
        """Close the server's stdin (its EOF)."""
        await self._requests.aclose()

    async def aclose(self) -> None:
        """Close both ends."""
        await self._requests.aclose()
        await self._replies.aclose()

    async def _send(self, message: dict[str, Any]) -> None:
        await self._requests.send_all(json.dumps(message).encode() + b"\n")

    async def _receive(self) -> dict[str, Any]:
        while (end := self._buffer.find(b"\n")) < 0:
            chunk = await self._replies.receive_some()
            assert chunk, f"the server closed stdout; unread: {bytes(self._buffer)!r}"
            self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        message = json.loads(line)
        assert isinstance(message, dict), line
        return message
