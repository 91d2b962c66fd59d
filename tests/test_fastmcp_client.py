"""FastMCP's client (``fastmcp.Client``, ``StreamableHttpTransport``) against ``serve --http``.

Each test starts a real ``python -m actors serve --http 127.0.0.1:0`` process (the default
modules and ``examples/notes.py``, for a prompt) and runs ``tests/fastmcp_client/drive.py``
with the Python of FastMCP's own virtual environment, the one the benchmarks use
(`benchmarks._fastmcp_peer.find_fastmcp`; ``.ci/run`` installs it). The script runs a plan
of steps and prints what each gave; the tests check the texts the tools, resources and
prompts return.

Both protocol eras FastMCP speaks are driven: ``mode="legacy"`` (the 2025-11-25 initialize
handshake, an ``Mcp-Session-Id`` whose session is the default of calls that name none, a
DELETE when the client closes) and ``mode="auto"`` (``server/discover``, 2026-07-28: no
HTTP session, so a call must name its session in ``_meta``, and ``ping`` is no longer a
method). Without FastMCP's environment the tests are skipped, as the benchmarks' FastMCP
tests are.
"""

from __future__ import annotations

import json
import os
import secrets
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from benchmarks._fastmcp_peer import FASTMCP_VERSION, fastmcp_venv, find_fastmcp

from ._mcp_helpers import http_server, status_in_session

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().with_name("fastmcp_client") / "drive.py"
SERVED = (
    "--state",
    "memory",
    "--modules",
    "planning,playbook_store,content_store",
    "--module",
    "examples.notes:notes",
)
TIMEOUT = 120.0  # seconds for one run of the script: FastMCP imports slowly on a busy machine
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
NO_SESSION = (
    "this call names no session, and without an Mcp-Session-Id every client of this server "
    "would share one; name it in _meta.sessionId (or the __sessionId argument)"
)

Step = dict[str, Any]
Outcome = dict[str, Any]


@pytest.fixture(scope="module")
def fastmcp() -> str:
    """The Python of FastMCP's environment; the test is skipped when there is none."""
    python = find_fastmcp()
    if python is None:
        pytest.skip(
            f"FastMCP {FASTMCP_VERSION} is not installed in {fastmcp_venv()}: "
            "`python -c 'from benchmarks._fastmcp_peer import install_fastmcp; "
            "install_fastmcp(print)'` makes it (.ci/run does)"
        )
    return python


@asynccontextmanager
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """``serve --http 127.0.0.1:0`` of the default modules and the notes: its URL."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) if path is None else f"{ROOT}{os.pathsep}{path}")
    async with http_server(*SERVED) as server:
        yield server.url


async def drive(python: str, url: str, steps: Sequence[Step]) -> list[Outcome]:
    """Run `steps` with FastMCP's client against `url`: what each gave, in order.

    The script is killed if it is still running after `TIMEOUT` (trio's run_process kills
    it when cancelled).
    """
    plan = json.dumps({"url": url, "steps": list(steps)}).encode()
    with trio.fail_after(TIMEOUT):
        # -I: the script's folder and this project stay off FastMCP's path.
        done = await trio.run_process(
            [python, "-I", str(SCRIPT)],
            stdin=plan,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    log = done.stderr.decode(errors="replace")[-4000:]
    assert done.returncode == 0, f"drive.py exited with {done.returncode}:\n{log}"
    outcomes = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [outcome["op"] for outcome in outcomes] == [step["op"] for step in steps], log
    return outcomes


def step(op: str, **arguments: Any) -> Step:
    """A plan's step: ``step("callTool", name=…, arguments=…, meta=…, client=…)``."""
    return {"op": op, **arguments}


def result_of(outcome: Outcome) -> Any:
    """The result of a step that succeeded; an AssertionError naming the error otherwise."""
    assert "result" in outcome, f"step {outcome['op']} failed: {outcome.get('error')}"
    return outcome["result"]


def error_of(outcome: Outcome) -> dict[str, Any]:
    """The error of a step that failed; an AssertionError showing the result otherwise."""
    assert "error" in outcome, f"step {outcome['op']} succeeded: {outcome.get('result')}"
    error: dict[str, Any] = outcome["error"]
    return error


def text_of(outcome: Outcome) -> str:
    """The text items of a ``callTool`` step's result, joined by newlines."""
    return "\n".join(item["text"] for item in result_of(outcome)["content"])


def call(
    name: str, meta: dict[str, Any] | None = None, client: str = "a", **arguments: Any
) -> Step:
    """``tools/call`` of `name` with `arguments`, naming the session in `meta` if given."""
    return step("callTool", client=client, name=name, arguments=arguments, meta=meta)


def named(prefix: str) -> dict[str, str]:
    """``_meta`` naming a session of this test's own."""
    return {"sessionId": f"{prefix}-{secrets.token_hex(4)}"}


class TestTheHandshakeEra:
    async def test_a_session_is_opened_used_and_deleted(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """initialize (an Mcp-Session-Id), ping, tools/list, a call's text, a tool's refusal
        (isError), an unknown tool (-32602); closing the client DELETEs the session."""
        async with served(monkeypatch) as url:
            opened, pinged, listed, created, goals, refused, unknown, closed = await drive(
                fastmcp,
                url,
                [
                    step("open", mode="legacy"),
                    step("ping"),
                    step("listTools"),
                    call("planning__create_goal", goal="Learn Rust"),
                    call("planning__list_goals"),
                    call("planning__create_goal", goal="  "),
                    call("planning__nope"),
                    step("close"),
                ],
            )
            session = result_of(opened)["sessionId"]
            after_close = await status_in_session(url, session)
        assert result_of(opened)["protocolVersion"] == "2025-11-25"
        assert result_of(opened)["serverInfo"]["name"] == "mcp-actors"
        assert session
        assert result_of(pinged) is True
        tools = {tool["name"]: tool for tool in result_of(listed)}
        assert {"planning__create_goal", "notes__add_note", "content_store__search_content"} <= (
            set(tools)
        )
        assert "__sessionId" not in json.dumps(tools["planning__create_goal"]["inputSchema"])
        assert text_of(created) == "Created goal g1: Learn Rust"
        assert result_of(created)["isError"] is False
        assert text_of(goals) == "Goals (1):\n- g1: Learn Rust"
        assert result_of(refused)["isError"] is True
        assert text_of(refused) == "Error: goal must not be empty"
        assert error_of(unknown)["code"] == INVALID_PARAMS
        assert error_of(unknown)["message"].startswith(
            "unknown tool 'planning__nope'; known tools:"
        )
        assert result_of(closed) == {}
        assert after_close == 404  # the client's DELETE ended the session

    async def test_each_session_keeps_its_own_state_and_a_named_one_is_shared(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two clients open at once, naming no session: each sees only its own goals. A
        session named in ``_meta`` is shared on purpose, by both, and apart from their own."""
        shared = named("shared")
        async with served(monkeypatch) as url:
            outcomes = await drive(
                fastmcp,
                url,
                [
                    step("open", mode="legacy"),
                    step("open", client="b", mode="legacy"),
                    call("planning__create_goal", goal="alice's own"),
                    call("planning__list_goals", client="b"),
                    call("planning__create_goal", shared, goal="ours"),
                    call("planning__list_goals", shared, client="b"),
                    call("planning__create_goal", client="b", goal="bob's own"),
                    call("planning__list_goals"),
                    call("planning__list_goals", client="b"),
                ],
            )
        first, second, _, bobs_empty, _, bobs_shared, _, alices, bobs = outcomes
        assert result_of(first)["sessionId"] != result_of(second)["sessionId"]
        assert text_of(bobs_empty) == "No goals yet."
        assert text_of(bobs_shared) == "Goals (1):\n- g1: ours"
        assert text_of(alices) == "Goals (1):\n- g1: alice's own"
        assert text_of(bobs) == "Goals (1):\n- g1: bob's own"


class TestThe2026Era:
    async def test_a_sessionless_client_names_its_session_in_meta(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """server/discover (2026-07-28, no Mcp-Session-Id); tools/list; a call naming no
        session is refused as an error result; calls naming one are served, their refusals
        and unknown tools reported as in the handshake era; ping is not a 2026 method."""
        mine = named("modern")
        async with served(monkeypatch) as url:
            opened, pinged, listed, nameless, created, goals, refused, unknown = await drive(
                fastmcp,
                url,
                [
                    step("open", mode="auto"),
                    step("ping"),
                    step("listTools"),
                    call("planning__create_goal", goal="Learn Rust"),
                    call("planning__create_goal", mine, goal="Learn Rust"),
                    call("planning__list_goals", mine),
                    call("planning__create_goal", mine, goal=""),
                    call("planning__nope", mine),
                ],
            )
        assert result_of(opened)["protocolVersion"] == "2026-07-28"
        assert result_of(opened)["serverInfo"]["name"] == "mcp-actors"
        assert result_of(opened)["sessionId"] is None
        assert error_of(pinged)["code"] == METHOD_NOT_FOUND
        assert "planning__list_goals" in {tool["name"] for tool in result_of(listed)}
        assert result_of(nameless)["isError"] is True
        assert text_of(nameless) == NO_SESSION
        assert text_of(created) == "Created goal g1: Learn Rust"
        assert text_of(goals) == "Goals (1):\n- g1: Learn Rust"
        assert result_of(refused)["isError"] is True
        assert text_of(refused) == "Error: goal must not be empty"
        assert error_of(unknown)["code"] == INVALID_PARAMS
        assert error_of(unknown)["message"].startswith("unknown tool 'planning__nope'")

    async def test_sessions_named_by_2026_clients_are_theirs_alone(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two 2026-era clients naming different sessions never see each other's goals; a
        handshake-era client sees one only by naming it, never in its own session."""
        alices, bobs = named("alice"), named("bob")
        async with served(monkeypatch) as url:
            outcomes = await drive(
                fastmcp,
                url,
                [
                    step("open", mode="auto"),
                    step("open", client="b", mode="auto"),
                    step("open", client="old", mode="legacy"),
                    call("planning__create_goal", alices, goal="alice's"),
                    call("planning__list_goals", bobs, client="b"),
                    call("planning__create_goal", bobs, client="b", goal="bob's"),
                    call("planning__list_goals", alices),
                    call("planning__list_goals", client="old"),
                    call("planning__list_goals", bobs, client="old"),
                ],
            )
        *_, bobs_empty, _, alices_goals, old_own, old_named = outcomes
        assert text_of(bobs_empty) == "No goals yet."
        assert text_of(alices_goals) == "Goals (1):\n- g1: alice's"
        assert text_of(old_own) == "No goals yet."
        assert text_of(old_named) == "Goals (1):\n- g1: bob's"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_resources_and_prompts_of_the_callers_session(
    fastmcp: str, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """resources/list, templates, prompts/list; then the reads and the prompt give the
    caller's own goals and notes (its HTTP session, or the one a 2026 client names)."""
    meta = None if mode == "legacy" else named("reader")
    async with served(monkeypatch) as url:
        outcomes = await drive(
            fastmcp,
            url,
            [
                step("open", mode=mode),
                step("listResources"),
                step("listResourceTemplates"),
                step("listPrompts"),
                call("planning__create_goal", meta, goal="Learn Rust"),
                call("notes__add_note", meta, text="buy milk"),
                call("notes__add_note", meta, text="call Ada"),
                step("readResource", uri="planning://plan", meta=meta),
                step("readResource", uri="notes://all", meta=meta),
                step("readResource", uri="notes://note/2", meta=meta),
                step("readResource", uri="notes://note/3", meta=meta),
                step("getPrompt", name="notes__review", arguments={"focus": "typos"}, meta=meta),
                step("getPrompt", name="notes__nope", meta=meta),
            ],
        )
    _, resources, templates, prompts, *_, plan, notes, second, third, review, unknown = outcomes
    assert {resource["uri"] for resource in result_of(resources)} == {
        "planning://plan",
        "playbooks://mine",
        "content://documents",
        "notes://all",
    }
    assert {template["uriTemplate"] for template in result_of(templates)} == {
        "notes://note/{number}",
        "content://documents/{document_id}",
    }
    assert [prompt["name"] for prompt in result_of(prompts)] == ["notes__review"]
    assert result_of(plan) == [
        {"uri": "planning://plan", "mimeType": "text/plain", "text": "Goal g1: Learn Rust"}
    ]
    assert result_of(notes)[0]["text"] == "1. buy milk\n2. call Ada"
    assert result_of(second)[0]["text"] == "call Ada"
    assert error_of(third) == {
        "code": INVALID_PARAMS,
        "message": "there is no note '3'; there are 2",
        "type": "MCPError",
    }
    assert result_of(review)["messages"] == [
        {
            "role": "user",
            "content": {
                "type": "text",
                "text": "Review these notes, looking for typos:\n- buy milk\n- call Ada",
            },
        }
    ]
    assert error_of(unknown)["code"] == INVALID_PARAMS
    assert error_of(unknown)["message"].startswith("unknown prompt 'notes__nope'")
