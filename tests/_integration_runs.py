"""Running an integration's script (``tests/integrations/*.py``) in its framework's venv.

Each ``*_example.py`` drives a framework the way its docs show, with a scripted model
holding two conversations at once, Alice's and Bob's, and prints what each finally sees:
``Alice: <the goals listed>`` then ``Bob: …``. `run_script` runs one in the framework's
virtual environment (`tests._venvs.framework_python`) and gives back what it printed; the
checks below say what that shows.

The script runs with a home folder of the test's own: a framework that starts the server
over stdio passes it only a few variables (``HOME``, ``PATH``…), so the server's default
state file (and the handle key beside it) lands there, private to the test, and is shared by
every server process the script starts. ``PATH`` starts with the framework's folder of
commands, then this Python's, where the project's ``mcp-actors`` command is.
`run_over_http` runs one against a ``serve --http`` of its own, its URL the last argument.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ._mcp_helpers import http_server
from ._npm import tail
from ._processes import command_line_of, running_with
from .integrations import CONVERSATIONS, RESOURCES

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

__all__ = [
    "STDIO_WITHOUT_HANDLES",
    "apart",
    "forgotten",
    "marked_environment",
    "mixed",
    "notes_read",
    "output_of",
    "refused",
    "run_over_http",
    "run_script",
    "seen_by",
]

RUN_TIMEOUT = 240.0  # seconds for one run: a server start per call over stdio, on a busy machine
PEOPLE = ("Alice", "Bob")
GOALS = {"Alice": "learn Rust", "Bob": "water the plants"}  # what each conversation remembers
NO_SESSION = "this call names no session"  # the 2026-era refusal without handles
STDIO_WITHOUT_HANDLES = ("mcp-actors", "serve", "--no-handles")
"""The stdio server a script starts when given it, instead of ``serve --handles``."""


@contextmanager
def marked_environment(home: Path) -> Iterator[dict[str, str]]:
    """This process's environment, for what a test starts: `home` as its home, ``mcp-actors``
    first on ``PATH``, no state folder or Python path of the tests'.

    It carries a marker, so that whatever was started with it and is still running when the
    block ends (a server its client did not stop), wherever it was reparented, is found:
    it is killed, and fails the test.
    """
    marker = f"MCP_ACTORS_INTEGRATION_{uuid.uuid4().hex}"
    kept = {
        name: value
        for name, value in os.environ.items()
        if name not in {"PYTHONPATH", "VIRTUAL_ENV", "XDG_STATE_HOME"}
    }
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    try:
        yield {**kept, "HOME": str(home), "PATH": path, marker: "1"}
    finally:
        left = {pid: command_line_of(pid) for pid in running_with(marker)}
        for pid in left:
            with suppress(ProcessLookupError):  # it may have ended meanwhile
                os.kill(pid, signal.SIGKILL)
    assert left == {}, f"processes left running: {left}"


async def output_of(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, stdin: bytes = b""
) -> str:
    """What `command` printed; it must exit with 0. Run it under a deadline of the caller's
    (``trio.fail_after``): trio's run_process kills it when that runs out."""
    done = await trio.run_process(
        list(command),
        env=env,
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    log = tail(done.stderr.decode(errors="replace"))
    assert done.returncode == 0, f"`{shlex.join(command)}` exited with {done.returncode}:\n{log}"
    return done.stdout.decode()


async def run_script(python: Path, script: Path, *arguments: str, home: Path) -> str:
    """What ``python SCRIPT ARGUMENTS`` printed; it must exit with 0 within `RUN_TIMEOUT`,
    and leave nothing running (see `marked_environment`)."""
    with marked_environment(home) as env:
        # The framework's own commands (mcp-proxy) beside its Python come first.
        env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
        with trio.fail_after(RUN_TIMEOUT):
            return await output_of([str(python), str(script), *arguments], env=env)


async def run_over_http(
    python: Path, script: Path, *arguments: str, home: Path, serve: Sequence[str] = ()
) -> str:
    """What `run_script` printed, given `arguments` then the URL of an ``mcp-actors serve
    --http`` (with `serve` options) started for it and stopped after."""
    async with http_server(*serve) as server:
        return await run_script(python, script, *arguments, server.url, home=home)


def seen_by(output: str) -> dict[str, str]:
    """What each person's conversation finally listed, from a script's output."""
    seen: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in output.splitlines():
        person, _, rest = line.partition(": ")
        if person in PEOPLE:
            lines = seen.setdefault(person, [rest])
        else:
            lines.append(line)
    assert sorted(seen) == sorted(PEOPLE), output
    return {person: "\n".join(lines) for person, lines in seen.items()}


def apart(output: str) -> None:
    """Each conversation kept its goal and saw only its own: the output is `CONVERSATIONS`
    (which the docs pages show)."""
    assert output == CONVERSATIONS.read_text(), output


def forgotten(output: str) -> None:
    """Every call landed in a session of its own: neither conversation kept its goal."""
    assert seen_by(output) == dict.fromkeys(PEOPLE, "No goals yet."), output


def mixed(output: str) -> None:
    """Both conversations landed in one session: one saw the other's goal too.

    Only the conversation that listed last must see both goals (each creates its goal
    before listing, so the later list follows both creates); the earlier one may list
    before the other's create, however the threads happen to run on a busy machine.
    """
    seen = seen_by(output).values()
    assert any(all(goal in listed for goal in GOALS.values()) for listed in seen), output


def refused(output: str) -> None:
    """Every call was refused: a 2026-era connection has no session, and they named none."""
    assert all(seen.startswith(NO_SESSION) for seen in seen_by(output).values()), output


def notes_read(output: str) -> None:
    """A ``*_resources.py`` script read its conversation's notes through the handle: it
    printed `RESOURCES` (which the docs pages show)."""
    assert output == RESOURCES.read_text(), output
