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
HTTP session, and ``ping`` is no longer a method). The server runs as recommended, with
conversation handles on (the default over HTTP): in either era a call that carries the
handle ``conversation__start`` returned runs in that conversation, whichever client sends
it; a 2026-era call that carries none (and names no session in ``_meta``) gets a tool error
telling the model to start one. Without FastMCP's environment the tests are skipped, as
the benchmarks' FastMCP tests are.
"""

from __future__ import annotations

import json
import re
import secrets
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from benchmarks._fastmcp_peer import FASTMCP_VERSION, fastmcp_venv, find_fastmcp
from protocol import HANDLE_REQUIRED

from .._integration_runs import apart, output_of, run_script
from .._mcp_helpers import http_server, json_texts, status_in_session

# drive.py's steps and answers have the shape of drive.mjs's: one set of helpers reads both.
from .._ts_client import Outcome, Step, error_of, result_of, step
from ..integrations import FOLDER, examples_importable

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

SCRIPT = (Path(__file__).resolve().parents[1] / "fastmcp_client") / "drive.py"
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
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")
ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"])


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
    examples_importable(monkeypatch)
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
        printed = await output_of([python, "-I", str(SCRIPT)], stdin=plan)
    outcomes = [json.loads(line) for line in printed.splitlines()]
    assert [outcome["op"] for outcome in outcomes] == [step["op"] for step in steps], outcomes
    return outcomes


def call(
    name: str, meta: dict[str, Any] | None = None, client: str = "a", **arguments: Any
) -> Step:
    """``tools/call`` of `name` with `arguments`, naming the session in `meta` if given."""
    return step("callTool", client=client, name=name, arguments=arguments, meta=meta)


def start(keep: str, client: str = "a") -> Step:
    """``conversation__start``, its handle kept as `keep` (``kept(keep)`` in later steps)."""
    return step("callTool", client=client, name="conversation__start", arguments={}, keep=keep)


def kept(name: str) -> str:
    """The handle kept as `name`, in a later step of the same plan."""
    return f"<kept:{name}>"


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
        assert json_texts(result_of(created)) == "Created goal g1: Learn Rust"
        assert result_of(created)["isError"] is False
        assert json_texts(result_of(goals)) == "Goals (1):\n- g1: Learn Rust"
        assert result_of(refused)["isError"] is True
        assert json_texts(result_of(refused)) == "Error: goal must not be empty"
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
        assert json_texts(result_of(bobs_empty)) == "No goals yet."
        assert json_texts(result_of(bobs_shared)) == "Goals (1):\n- g1: ours"
        assert json_texts(result_of(alices)) == "Goals (1):\n- g1: alice's own"
        assert json_texts(result_of(bobs)) == "Goals (1):\n- g1: bob's own"


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
        assert json_texts(result_of(nameless)) == HANDLE_REQUIRED
        assert json_texts(result_of(created)) == "Created goal g1: Learn Rust"
        assert json_texts(result_of(goals)) == "Goals (1):\n- g1: Learn Rust"
        assert result_of(refused)["isError"] is True
        assert json_texts(result_of(refused)) == "Error: goal must not be empty"
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
        assert json_texts(result_of(bobs_empty)) == "No goals yet."
        assert json_texts(result_of(alices_goals)) == "Goals (1):\n- g1: alice's"
        assert json_texts(result_of(old_own)) == "No goals yet."
        assert json_texts(result_of(old_named)) == "Goals (1):\n- g1: bob's"


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
    # With handles on, each resource and template is listed in its URI?conversation=… form.
    assert {template["uriTemplate"] for template in result_of(templates)} == {
        f"{uri}{{?conversation}}"
        for uri in (
            "planning://plan",
            "playbooks://mine",
            "content://documents",
            "notes://all",
            "notes://note/{number}",
            "content://documents/{document_id}",
        )
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


class TestConversationHandles:
    @ERAS
    async def test_a_handle_keeps_state_across_calls_and_clients(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch, mode: str
    ) -> None:
        """conversation__start (listed, no arguments) returns a handle in its text and its
        structuredContent; every stateful tool requires ``conversation``. A new Client per
        call, passing the handle, finds what the earlier ones wrote. A call without it gets
        the client's own session in the handshake era, the handle-required error in 2026;
        a session named in ``_meta`` wins over a handle the call also carries."""
        async with served(monkeypatch) as url:
            outcomes = await drive(
                fastmcp,
                url,
                [
                    step("open", mode=mode),
                    step("listTools"),
                    start("alice"),
                    step("close"),
                    step("open", mode=mode),
                    call("planning__create_goal", goal="Learn Rust", conversation=kept("alice")),
                    step("close"),
                    step("open", mode=mode),
                    call("planning__create_goal", goal="Ship it", conversation=kept("alice")),
                    call("planning__list_goals", conversation=kept("alice")),
                    call("planning__list_goals"),
                    call("planning__list_goals", named("host"), conversation=kept("alice")),
                ],
            )
        _, listed, started, _, _, first, _, _, second, goals, nameless, hosts = outcomes
        tools = {tool["name"]: tool for tool in result_of(listed)}
        assert tools["conversation__start"]["inputSchema"]["properties"] == {}
        schema = tools["planning__create_goal"]["inputSchema"]
        assert set(schema["required"]) == {"goal", "conversation"}
        assert "conversation__start" in schema["properties"]["conversation"]["description"]
        handle = result_of(started)["structuredContent"]["conversation"]
        assert HANDLE.fullmatch(handle)
        assert handle in json_texts(result_of(started))
        assert json_texts(result_of(first)) == "Created goal g1: Learn Rust"
        assert json_texts(result_of(second)) == "Created goal g2: Ship it"
        assert json_texts(result_of(goals)) == "Goals (2):\n- g1: Learn Rust\n- g2: Ship it"
        # A session named in _meta wins over the handle.
        assert json_texts(result_of(hosts)) == "No goals yet."
        if mode == "legacy":
            # Its Mcp-Session-Id's own session.
            assert json_texts(result_of(nameless)) == "No goals yet."
        else:
            assert result_of(nameless)["isError"] is True
            assert json_texts(result_of(nameless)) == HANDLE_REQUIRED

    @ERAS
    async def test_two_conversations_at_once_stay_apart(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch, mode: str
    ) -> None:
        """Two clients, each in a conversation of its own, interleaved: neither sees the
        other's goals. A second conversation on one client starts empty too: the handle,
        not the connection, picks the state."""
        async with served(monkeypatch) as url:
            outcomes = await drive(
                fastmcp,
                url,
                [
                    step("open", mode=mode),
                    step("open", client="b", mode=mode),
                    start("alice"),
                    start("bob", client="b"),
                    call("planning__create_goal", goal="alice's", conversation=kept("alice")),
                    call("planning__list_goals", client="b", conversation=kept("bob")),
                    call(
                        "planning__create_goal", client="b", goal="bob's", conversation=kept("bob")
                    ),
                    call("planning__list_goals", conversation=kept("alice")),
                    call("planning__list_goals", client="b", conversation=kept("bob")),
                    start("carol"),
                    call("planning__list_goals", conversation=kept("carol")),
                ],
            )
        _, _, alice, bob, _, bobs_empty, _, alices, bobs, carol, carols = outcomes
        handles = [result_of(o)["structuredContent"]["conversation"] for o in (alice, bob, carol)]
        assert len(set(handles)) == 3
        assert json_texts(result_of(bobs_empty)) == "No goals yet."
        assert json_texts(result_of(alices)) == "Goals (1):\n- g1: alice's"
        assert json_texts(result_of(bobs)) == "Goals (1):\n- g1: bob's"
        assert json_texts(result_of(carols)) == "No goals yet."

    async def test_resources_and_prompts_through_a_handle(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A 2026-era client that names no session in ``_meta`` reads its conversation's
        resources with ``?conversation=`` and gets its prompt with a ``conversation``
        argument: what clients that cannot pass ``_meta`` do."""
        conversation = kept("reader")
        async with served(monkeypatch) as url:
            outcomes = await drive(
                fastmcp,
                url,
                [
                    step("open", mode="auto"),
                    start("reader"),
                    call("planning__create_goal", goal="Learn Rust", conversation=conversation),
                    call("notes__add_note", text="buy milk", conversation=conversation),
                    call("notes__add_note", text="call Ada", conversation=conversation),
                    step("readResource", uri=f"planning://plan?conversation={conversation}"),
                    step("readResource", uri=f"notes://note/2?conversation={conversation}"),
                    step(
                        "getPrompt",
                        name="notes__review",
                        arguments={"focus": "typos", "conversation": conversation},
                    ),
                ],
            )
        *_, plan, second, review = outcomes
        assert result_of(plan)[0]["text"] == "Goal g1: Learn Rust"
        assert result_of(second)[0]["text"] == "call Ada"
        assert result_of(review)["messages"][0]["content"]["text"] == (
            "Review these notes, looking for typos:\n- buy milk\n- call Ada"
        )

    async def test_a_malformed_or_forged_handle_is_told_to_start_anew(
        self, fastmcp: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A handle that is not one, and one whose signature is wrong, get a tool error
        saying to call conversation__start; neither is a conversation afterwards."""
        async with served(monkeypatch) as url:
            outcomes = await drive(
                fastmcp,
                url,
                [
                    step("open", mode="auto"),
                    call("planning__create_goal", goal="lost", conversation="conv_nope"),
                    call("planning__create_goal", goal="lost", conversation=FORGED),
                    call("planning__list_goals", conversation=FORGED),
                ],
            )
        _, malformed, forged, listed = outcomes
        for refused in (malformed, forged, listed):
            assert result_of(refused)["isError"] is True
            told = json_texts(result_of(refused))
            assert "call conversation__start to start a new conversation" in told
        assert FORGED not in json_texts(result_of(forged))  # an error shows only the handle's start

    @pytest.mark.parametrize("transport", ["stdio", "http"])
    async def test_the_docs_example(self, fastmcp: str, tmp_path: Path, transport: str) -> None:
        """``tests/integrations/fastmcp_example.py``, as the FastMCP page shows it: over
        stdio (FastMCP starts ``serve --handles``) and over HTTP (handles on by default),
        two conversations on one client, then a new client lists each one's own goal."""
        script = FOLDER / "fastmcp_example.py"
        if transport == "stdio":
            printed = await run_script(Path(fastmcp), script, home=tmp_path)
        else:
            async with http_server() as server:
                printed = await run_script(Path(fastmcp), script, server.url, home=tmp_path)
        apart(printed)


FORGED = "conv_" + "A" * 56  # a handle's form, signed by no key
