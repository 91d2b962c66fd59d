"""The MCP Inspector's CLI mode against ``serve --http``, in both protocol eras.

``tests/server/test_inspect.py`` runs the Inspector on stdio (``mcp-actors inspect``); here its
command-line client reaches a real ``python -m actors serve --http 127.0.0.1:0`` process
(the default modules and ``examples/notes.py``, for a prompt) the way a user points it at a
server: ``inspector --cli URL --transport http --method …``. The Inspector (pinned in
``tests/inspector/package-lock.json``, with the Node.js 22 it needs: the ``node`` package)
is installed with ``npm ci`` outside the source tree by `tests._npm.npm_installed`; without
Node.js and npm the tests are skipped, or fail when ``CI`` is set.

Every invocation is a client of its own: it connects, sends one request and exits, without
ending its HTTP session (the Inspector sends no DELETE; the server's idle timeout reclaims
it). So two invocations that name no session never share state, and a session named with
``--metadata sessionId=…`` is shared on purpose. ``--protocol-era modern`` speaks
2026-07-28 (``server/discover``, no ``Mcp-Session-Id``): there a call must name its session.
The Inspector looks a tool up in ``tools/list`` before calling it, so an unknown tool is its
own ``tool_not_found``, never sent; it has no ``ping`` method.
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import pytest
import trio

from protocol import HANDLE_ARGUMENT, HANDLE_REQUIRED, HANDLE_TOOL

from .._mcp_helpers import http_server, json_texts
from .._npm import INSTALL_TIMEOUT, npm_installed, pinned_node

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parents[1] / "inspector"
NEEDED_BY = "the MCP Inspector's HTTP tests"
SERVED = (
    "--state",
    "memory",
    "--modules",
    "planning,playbook_store,content_store",
    "--module",
    "examples.notes:notes",
)
TIMEOUT = 120.0  # seconds for one invocation: Node.js starts slowly on a busy machine
TOOL_IS_ERROR = 5  # the Inspector's exit code for a result with isError, or no such tool
NO_SESSION = (
    "this call names no session, and without an Mcp-Session-Id every client of this server "
    "would share one; name it in _meta.sessionId (or the __sessionId argument)"
)
ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
Era = Literal["legacy", "modern"]

# npm ci of the Inspector (and of Node.js 22) happens in the module's first test.
pytestmark = pytest.mark.timeout(2 * INSTALL_TIMEOUT + 300)


class Inspector(NamedTuple):
    """The installed Inspector, as run by the Node.js 22 installed beside it."""

    command: tuple[str, ...]
    """Node.js 22, the Inspector's launcher, and ``--cli``."""


class Answer(NamedTuple):
    """One invocation: its exit code, and the JSON it printed on stdout and on stderr."""

    code: int
    out: Any
    err: Any

    @property
    def result(self) -> Any:
        """The result on stdout; an AssertionError with the whole answer if there is none."""
        assert isinstance(self.out, dict), self
        assert "result" in self.out, self
        return self.out["result"]


@pytest.fixture(scope="module")
def inspector() -> Inspector:
    """The Inspector and its Node.js 22, installed (npm ci): a skip or failure at setup."""
    folder = npm_installed(SOURCE, "inspector", needed_by=NEEDED_BY, rebuild=["node"])
    modules = folder / "node_modules"
    node = pinned_node(modules, NEEDED_BY)  # the Inspector needs Node 22.19 or later
    launcher = modules / "@modelcontextprotocol" / "inspector" / "clients" / "launcher"
    return Inspector((str(node), str(launcher / "build" / "index.js"), "--cli"))


def _json(text: str) -> Any:
    """What the Inspector printed (one JSON value with ``--format json``), or the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


async def ask(
    inspector: Inspector, url: str, home: Path, era: Era, method: str, *arguments: str
) -> Answer:
    """Run ``inspector --cli URL --transport http --method METHOD ARGUMENTS`` in `era`.

    Killed after `TIMEOUT` if still running; its settings land in `home`, not the user's.
    """
    command = [
        *inspector.command,
        url,
        *("--transport", "http", "--format", "json", "--protocol-era", era),
        *("--method", method, *arguments),
    ]
    node_bin = str(Path(inspector.command[0]).parent)
    env = {**os.environ, "HOME": str(home), "PATH": f"{node_bin}{os.pathsep}{os.environ['PATH']}"}
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            command,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    return Answer(done.returncode, _json(out), _json(err) if err.strip() else None)


@asynccontextmanager
async def served(monkeypatch: pytest.MonkeyPatch, *, handles: bool = False) -> AsyncIterator[str]:
    """``serve --http 127.0.0.1:0`` of the default modules and the notes: its URL. Without
    conversation handles unless `handles` (the tests of host-named sessions)."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) if path is None else f"{ROOT}{os.pathsep}{path}")
    async with http_server(*SERVED, "--handles" if handles else "--no-handles") as server:
        yield server.url


def session(name: str) -> tuple[str, ...]:
    """The options that name session `name` in every request's ``_meta``."""
    return ("--metadata", f"sessionId={name}")


@ERAS
async def test_initialize_list_and_call_tools(
    inspector: Inspector, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, era: Era
) -> None:
    """initialize gives the era's version; tools/list the tools; tools/call with arguments the
    tool's text, a tool's refusal its isError result; an unknown tool is never called."""
    named = session(f"calls-{era}")
    async with served(monkeypatch) as url:

        async def run(method: str, *arguments: str) -> Answer:
            return await ask(inspector, url, tmp_path, era, method, *arguments)

        initialized = await run("initialize")
        listed = await run("tools/list")
        created = await run(
            "tools/call", "--tool-name", "planning__create_goal", "--tool-arg", "goal=Learn Rust",
            *named,
        )  # fmt: skip
        goals = await run("tools/call", "--tool-name", "planning__list_goals", *named)
        refused = await run(
            "tools/call", "--tool-name", "planning__create_goal",
            "--tool-args-json", '{"goal": " "}', *named,
        )  # fmt: skip
        unknown = await run("tools/call", "--tool-name", "planning__nope", *named)
    version = "2025-11-25" if era == "legacy" else "2026-07-28"
    assert initialized.result["protocolVersion"] == version
    assert initialized.result["serverInfo"]["name"] == "mcp-actors"
    tools = {tool["name"]: tool for tool in listed.result["tools"]}
    assert {"planning__create_goal", "notes__add_note", "content_store__add_content"} <= set(tools)
    assert tools["planning__create_goal"]["inputSchema"]["required"] == ["goal"]
    assert json_texts(created.result) == "Created goal g1: Learn Rust"
    assert json_texts(goals.result) == "Goals (1):\n- g1: Learn Rust"
    assert refused.code == TOOL_IS_ERROR
    assert refused.result["isError"] is True
    assert json_texts(refused.result) == "Error: goal must not be empty"
    assert unknown.code == TOOL_IS_ERROR
    assert unknown.err["error"]["code"] == "tool_not_found"


async def test_each_invocation_naming_no_session_has_a_session_of_its_own(
    inspector: Inspector, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Handshake era: each run of the Inspector is a client with its own HTTP session, so
    its notes are its own; runs naming a session with --metadata or --tool-metadata share
    it, apart from the runs' own sessions."""
    async with served(monkeypatch) as url:

        async def add(text: str, *more: str) -> Answer:
            arguments = ("--tool-name", "notes__add_note", "--tool-arg", f"text={text}", *more)
            return await ask(inspector, url, tmp_path, "legacy", "tools/call", *arguments)

        first, second = await add("one"), await add("two")
        shared = await add("three", "--tool-metadata", "sessionId=inspected")
        again = await add("four", *session("inspected"))
        own = await add("five")
        read = await ask(
            inspector, url, tmp_path, "legacy", "resources/read", "--uri", "notes://all",
            *session("inspected"),
        )  # fmt: skip
    counts = [answer.result["structuredContent"]["count"] for answer in (first, second)]
    assert counts == [1, 1]
    assert shared.result["structuredContent"] == {"count": 1}
    assert again.result["structuredContent"] == {"count": 2}
    assert own.result["structuredContent"] == {"count": 1}
    assert read.result["contents"][0]["text"] == "1. three\n2. four"


@pytest.mark.parametrize(("handles", "told"), [(True, HANDLE_REQUIRED), (False, NO_SESSION)])
async def test_a_2026_era_call_must_name_its_session(
    inspector: Inspector, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, handles: bool, told: str
) -> None:
    """--protocol-era modern without --metadata: no Mcp-Session-Id to fall back on, so the
    call is an error result saying how to name one (with handles: how to start a
    conversation), and a read is refused the same way."""
    async with served(monkeypatch, handles=handles) as url:
        called = await ask(
            inspector, url, tmp_path, "modern", "tools/call",
            "--tool-name", "notes__add_note", "--tool-arg", "text=lost",
        )  # fmt: skip
        read = await ask(
            inspector, url, tmp_path, "modern", "resources/read", "--uri", "notes://all"
        )
    assert called.code == TOOL_IS_ERROR
    assert called.result["isError"] is True
    assert json_texts(called.result) == told
    assert read.code != 0
    assert read.err["error"]["message"] == told


@ERAS
async def test_invocations_passing_one_handle_keep_one_conversation(
    inspector: Inspector, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, era: Era
) -> None:
    """Every run of the Inspector is a client of its own (a connection per call): with the
    handle of one conversation__start in its arguments and its URI, each sees the runs
    before it, and a run with another handle sees none of it."""
    async with served(monkeypatch, handles=True) as url:

        async def run(method: str, *arguments: str) -> Answer:
            return await ask(inspector, url, tmp_path, era, method, *arguments)

        async def start() -> str:
            started = await run("tools/call", "--tool-name", HANDLE_TOOL)
            handle: str = started.result["structuredContent"][HANDLE_ARGUMENT]
            return handle

        mine, theirs = await start(), await start()
        for text in ("buy milk", "call Ada"):
            await run(
                "tools/call", "--tool-name", "notes__add_note", "--tool-arg", f"text={text}",
                "--tool-arg", f"{HANDLE_ARGUMENT}={mine}",
            )  # fmt: skip
        read = await run("resources/read", "--uri", f"notes://all?{HANDLE_ARGUMENT}={mine}")
        other = await run("resources/read", "--uri", f"notes://all?{HANDLE_ARGUMENT}={theirs}")
    assert read.result["contents"][0]["text"] == "1. buy milk\n2. call Ada"
    assert other.result["contents"][0]["text"] == ""


@ERAS
async def test_resources_and_prompts(
    inspector: Inspector, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, era: Era
) -> None:
    """resources/list, resources/templates/list, resources/read of a resource and of a
    template, prompts/list and prompts/get with arguments: the named session's notes."""
    named = session(f"reader-{era}")
    async with served(monkeypatch) as url:

        async def run(method: str, *arguments: str) -> Answer:
            return await ask(inspector, url, tmp_path, era, method, *arguments)

        for text in ("buy milk", "call Ada"):
            added = await run(
                "tools/call", "--tool-name", "notes__add_note", "--tool-arg", f"text={text}",
                *named,
            )  # fmt: skip
            assert added.result["isError"] is False, added
        resources = await run("resources/list")
        templates = await run("resources/templates/list")
        every = await run("resources/read", "--uri", "notes://all", *named)
        second = await run("resources/read", "--uri", "notes://note/2", *named)
        missing = await run("resources/read", "--uri", "notes://note/3", *named)
        prompts = await run("prompts/list")
        prompt = await run(
            "prompts/get", "--prompt-name", "notes__review", "--prompt-args", "focus=typos", *named
        )
    assert {resource["uri"] for resource in resources.result["resources"]} == {
        "planning://plan",
        "playbooks://mine",
        "content://documents",
        "notes://all",
    }
    assert {template["uriTemplate"] for template in templates.result["resourceTemplates"]} == {
        "notes://note/{number}",
        "content://documents/{document_id}",
    }
    assert every.result["contents"] == [
        {"uri": "notes://all", "mimeType": "text/markdown", "text": "1. buy milk\n2. call Ada"}
    ]
    assert second.result["contents"][0]["text"] == "call Ada"
    assert missing.code != 0
    assert missing.err["error"]["message"] == "there is no note '3'; there are 2"
    assert [listed["name"] for listed in prompts.result["prompts"]] == ["notes__review"]
    assert prompt.result["messages"] == [
        {
            "role": "user",
            "content": {
                "type": "text",
                "text": "Review these notes, looking for typos:\n- buy milk\n- call Ada",
            },
        }
    ]
