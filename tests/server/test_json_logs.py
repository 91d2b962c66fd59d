"""``--log-format json``: every line a serve process writes on stderr is one JSON object.

A log shipper reading stderr parses each line; a single line of plain text (where the
server listens, why it cannot serve, a Python warning) is one it cannot. Each test runs
the real ``serve`` as a subprocess, from start to stop, and parses every line.
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
from typing import TYPE_CHECKING, Any

import pytest
import trio

from .._mcp_helpers import LISTENING, SERVE, LogFile, http_server, importable_module, raw_server

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

JSON = ("--log-format", "json")
STOPPED = 60.0  # seconds a server may take to stop on a loaded machine


def records(log: str) -> list[dict[str, Any]]:
    """Every line of `log` parsed: a line that is not one JSON object fails the test."""
    parsed = []
    for line in log.splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            msg = f"a line of stderr is not JSON: {line!r}\nthe whole log:\n{log}"
            raise AssertionError(msg) from None
        assert isinstance(document, dict), line
        assert {"time", "level", "logger", "message"} <= document.keys(), line
        parsed.append(document)
    return parsed


def messages(log: str) -> list[str]:
    return [document["message"] for document in records(log)]


async def test_an_http_server_writes_only_json_from_start_to_stop() -> None:
    """Where both listeners listen, the open-files and state lines, a call, the stop: each a
    record, and the URL read from the JSON record as from the text line."""
    async with http_server(*JSON, "--state", "memory", "--metrics", "127.0.0.1:0") as server:
        async with server.session() as session:
            result = await session.call_tool("planning__list_goals", {})
            assert not result.is_error
        server.process.terminate()
        with trio.fail_after(STOPPED):
            assert await server.process.wait() == 0
        log = server.log.text()
    said = messages(log)
    assert f"listening on {server.url}" in said
    assert server.url.startswith("http://127.0.0.1:")
    assert any(message.startswith("operator endpoints on http://127.0.0.1:") for message in said)
    assert "state: memory" in said
    assert said[-1] == "stopped"


async def test_a_stdio_server_writes_only_json_from_start_to_stop() -> None:
    async with raw_server(*JSON) as server:
        await server.initialize()
        response = await server.call("planning__list_goals", {})
        assert "result" in response, response
        await server.close_stdin()
        assert await server.wait() == 0
        log = server.log.text()
    said = messages(log)
    assert any(message.startswith("state: sqlite:///") for message in said)
    assert said[-1] == "stopped"


async def test_a_server_that_cannot_serve_says_why_in_json() -> None:
    """The address is taken: exit 1, and the reason is a record at level ERROR."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await trio.run_process(
            [*SERVE, "--http", f"127.0.0.1:{port}", "--state", "memory", *JSON],
            stdin=b"",
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 1
    [failure] = [d for d in records(done.stderr.decode()) if d["level"] == "ERROR"]
    assert failure["message"].startswith(f"error: cannot serve: 127.0.0.1:{port} is in use")


async def test_a_configuration_error_is_a_record() -> None:
    """A module that cannot be loaded: exit 2, the reason a record at level ERROR."""
    done = await trio.run_process(
        [*SERVE, "--module", "no_such_module_here:tools", *JSON],
        stdin=b"",
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 2
    [failure] = records(done.stderr.decode())
    assert failure["level"] == "ERROR"
    assert "no_such_module_here" in failure["message"]


async def test_a_python_warning_at_startup_is_a_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module's warning, which Python would print as two lines of text."""
    importable_module(
        tmp_path,
        monkeypatch,
        "warns",
        """
        import warnings

        from actors import ToolModule

        warnings.warn("this module is old", UserWarning, stacklevel=1)
        warns = ToolModule("warns", lambda context: None)
        """,
    )
    with tempfile.TemporaryFile() as file:
        process = await trio.lowlevel.open_process(
            [
                *SERVE,
                "--http",
                "127.0.0.1:0",
                "--state",
                "memory",
                "--module",
                "warns:warns",
                *JSON,
            ],
            stdin=subprocess.DEVNULL,
            stderr=file,
            env=None,
        )
        log = LogFile(file)
        try:
            await log.wait_for(LISTENING, process)
        finally:
            process.terminate()
            with trio.fail_after(STOPPED):
                await process.wait()
        text = log.text()
    [warning] = [d for d in records(text) if d["logger"] == "py.warnings"]
    assert "UserWarning: this module is old" in warning["message"]
    assert warning["level"] == "WARNING"


async def test_text_logs_keep_the_plain_line() -> None:
    """Without --log-format json the line stays as tests, docs and scripts read it."""
    async with http_server("--state", "memory") as server:
        text = server.log.text()
    assert f"mcp-actors: listening on {server.url}\n" in text
