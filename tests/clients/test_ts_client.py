"""The official TypeScript MCP SDK client (``tests/ts_client``) against this project's server.

Each test runs ``node drive.mjs`` (see `tests._ts_client`): the SDK's ``Client``, over
stdio (it spawns ``python -m actors serve``) or Streamable HTTP (a ``serve --http
127.0.0.1:0`` process), runs a plan of steps and reports what each gave. What the server
serves today (tools) is checked here, and what it refuses. The steps it does not serve yet
(resources, prompts, logging, elicitation, sampling) are checked against ``peer.mjs``, a
server made with the same SDK, so that the harness is known to work before they land.

The SDK (1.x, the newest release) speaks the 2025 handshake era only: it has no
2026-07-28 ``server/discover``. The 2026 era of the TypeScript SDK's 2.x client is driven
through the MCP Inspector, which is built on it (``tests/clients/test_inspector_http.py``).
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx2
import pytest
import trio

from .._mcp_helpers import SERVE, http_server, json_texts
from .._ts_client import (
    ConnectFailed,
    HarnessError,
    Http,
    Stdio,
    TsClient,
    drive,
    error_of,
    installed,
    open_ts_client,
    result_of,
    scripts,
    step,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

Transport = Literal["stdio", "http"]
TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])
ROOT = Path(__file__).resolve().parents[2]
NOTES = ("--module", "examples.notes:notes", "--state", "memory")
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
TOKEN = "Kx7#pQ2mLw9Vn4Rt3sYbT0uZ"


@pytest.fixture(autouse=True, scope="module")
def _client_installed() -> None:
    """Install the client once, before any server starts: a skip (or, on CI, a failure)
    is reported at setup, with its reason."""
    installed()


def notes_stdio() -> Stdio:
    """``serve`` of the notes example, for the client to spawn; state in the test's folder."""
    env = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}  # see conftest
    return Stdio(sys.executable, [*SERVE[1:], *NOTES], ROOT, env)


@asynccontextmanager
async def notes_http(monkeypatch: pytest.MonkeyPatch, *args: str) -> AsyncIterator[Http]:
    """``serve --http 127.0.0.1:0`` of the notes example (with `args`) while the block runs:
    without conversation handles, so that both transports list the same (the TypeScript
    client names its sessions; handles are tests/server/test_handles.py's)."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) if path is None else f"{ROOT}{os.pathsep}{path}")
    async with http_server(*NOTES, "--no-handles", *args) as server:
        yield Http(server.url)


@asynccontextmanager
async def notes_server(
    transport: Transport, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[dict[str, Any]]:
    """The notes example served over `transport`: the keyword argument `drive` takes."""
    if transport == "stdio":
        yield {"stdio": notes_stdio()}
    else:
        async with notes_http(monkeypatch) as http:
            yield {"http": http}


async def peer() -> Stdio:
    """``peer.mjs`` on stdio: a server of the TypeScript SDK that serves every feature."""
    script = (await scripts())["peer.mjs"]
    return Stdio("node", [str(script)], script.parent)


class TestTheProjectsServer:
    @TRANSPORTS
    async def test_lists_and_calls_tools(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The tools are listed; calls land in the connection's own session and count up."""
        async with notes_server(transport, monkeypatch) as server:
            info, listed, one, two, counted = await drive(
                [
                    step("serverInfo"),
                    step("listTools"),
                    step("callTool", name="notes__add_note", arguments={"text": "one"}),
                    step("callTool", name="notes__add_note", arguments={"text": "two"}),
                    step("callTool", name="notes__count_notes"),
                ],
                **server,
            )
        assert result_of(info)["serverInfo"]["name"] == "mcp-actors"
        assert result_of(info)["protocolVersion"] == "2025-11-25"
        assert (result_of(info)["sessionId"] is None) == (transport == "stdio")
        tools = {tool["name"]: tool for tool in result_of(listed)["tools"]}
        assert set(tools) == {"notes__add_note", "notes__count_notes", "notes__clear_notes"}
        assert tools["notes__count_notes"]["annotations"]["readOnlyHint"] is True
        assert result_of(one)["structuredContent"] == {"count": 1}
        assert result_of(two)["structuredContent"] == {"count": 2}
        assert result_of(counted)["structuredContent"] == {"count": 2}
        assert result_of(counted)["isError"] is False

    @TRANSPORTS
    async def test_refusals_are_reported_and_the_plan_goes_on(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An unknown tool is a JSON-RPC error, a tool's own refusal an error result, an
        unserved method "Method not found"; each step after them still runs."""
        async with notes_server(transport, monkeypatch) as server:
            unknown, empty, resources, templates, prompts, counted = await drive(
                [
                    step("callTool", name="notes__nope", arguments={}),
                    step("callTool", name="notes__add_note", arguments={"text": " "}),
                    step("listResources"),
                    step("listResourceTemplates"),
                    step("listPrompts"),
                    step("callTool", name="notes__count_notes"),
                ],
                **server,
            )
        assert error_of(unknown)["code"] == INVALID_PARAMS
        assert error_of(unknown)["message"].startswith("unknown tool 'notes__nope'")
        assert result_of(empty)["isError"] is True
        assert "text must not be empty" in json_texts(result_of(empty))
        # The lists of what the module declares besides tools.
        assert [r["uri"] for r in result_of(resources)["resources"]] == ["notes://all"]
        listed_templates = result_of(templates)["resourceTemplates"]
        assert [r["uriTemplate"] for r in listed_templates] == ["notes://note/{number}"]
        assert [p["name"] for p in result_of(prompts)["prompts"]] == ["notes__review"]
        assert result_of(counted)["structuredContent"] == {"count": 0}

    async def test_two_http_clients_see_only_their_own_notes(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two clients connected at once, neither naming a session: each HTTP session is
        its own, and one ending (DELETE) leaves the other's notes alone."""
        async with notes_http(monkeypatch) as http:
            async with open_ts_client(http=http) as alice, open_ts_client(http=http) as bob:
                add = step("callTool", name="notes__add_note", arguments={"text": "mine"})
                count = step("callTool", name="notes__count_notes")
                await alice.run([add, add])
                (bobs,) = await bob.run([add])
                (alices,) = await alice.run([count])
                await alice.aclose()
                (still,) = await bob.run([count])
        assert alice.connected["sessionId"] != bob.connected["sessionId"]
        assert result_of(bobs)["structuredContent"] == {"count": 1}
        assert result_of(alices)["structuredContent"] == {"count": 2}
        assert alice.closed == {"op": "close", "result": {}}
        assert result_of(still)["structuredContent"] == {"count": 1}

    async def test_over_http_ping_and_sessions_named_in_meta(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ping; a session named in a call's ``_meta`` is shared by the clients that name it
        and apart from each one's own; once a client has closed (DELETE), a request in its
        HTTP session gets 404."""
        shared = {"sessionId": "team/notes"}
        add = step("callTool", name="notes__add_note", arguments={"text": "ours"}, meta=shared)
        count = step("callTool", name="notes__count_notes")
        async with notes_http(monkeypatch) as http:
            async with open_ts_client(http=http) as alice, open_ts_client(http=http) as bob:
                pinged, _, alices_shared = await alice.run([step("ping"), add, add])
                bobs_shared, bobs_own = await bob.run(
                    [step("callTool", name="notes__count_notes", meta=shared), count]
                )
                (alices_own,) = await alice.run([count])
                await alice.aclose()
            async with httpx2.AsyncClient() as client:
                gone = await client.post(
                    http.url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={
                        "Accept": "application/json, text/event-stream",
                        "Mcp-Session-Id": alice.connected["sessionId"],
                        "MCP-Protocol-Version": "2025-11-25",
                    },
                )
        assert result_of(pinged) == {}
        assert result_of(alices_shared)["structuredContent"] == {"count": 2}
        assert result_of(bobs_shared)["structuredContent"] == {"count": 2}
        assert result_of(bobs_own)["structuredContent"] == {"count": 0}
        assert result_of(alices_own)["structuredContent"] == {"count": 0}
        assert alice.closed == {"op": "close", "result": {}}
        assert gone.status_code == 404

    async def test_a_token_travels_in_the_headers(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the bearer token the connection is refused; with it, calls are served."""
        async with notes_http(monkeypatch, "--token", TOKEN) as http:
            with pytest.raises(ConnectFailed) as refused:
                await drive([step("listTools")], http=http)
            authorized = Http(http.url, {"Authorization": f"Bearer {TOKEN}"})
            (listed,) = await drive([step("listTools")], http=authorized)
        assert refused.value.error["code"] == 401
        assert len(result_of(listed)["tools"]) == 3


class TestTheHarness:
    """Every step, against ``peer.mjs``: the harness works before the server needs it."""

    async def test_resources_subscriptions_and_updates(self) -> None:
        """Read, subscribe, wait for the update; after unsubscribing no update comes (a log
        message sent after the write arrives, and nothing before it)."""
        pad = "memo://pad"
        write = step("callTool", name="write", arguments={"text": "hello"})
        marker = step("callTool", name="log", arguments={"level": "error", "text": "marker"})
        outcomes = await drive(
            [
                step("listResources"),
                step("listResourceTemplates"),
                step("subscribe", uri=pad),
                write,
                step("waitFor", method="notifications/resources/updated", where={"uri": pad}),
                step("readResource", uri=pad),
                step("notifications", method="notifications/resources/updated"),
                step("unsubscribe", uri=pad),
                write,
                marker,
                step("waitFor", method="notifications/message", timeoutMs=30000),
                step("notifications"),
            ],
            stdio=await peer(),
        )
        listed, templates, _, _, updated, read, taken, _, _, _, _, after = outcomes
        assert [resource["uri"] for resource in result_of(listed)["resources"]] == [pad]
        assert result_of(templates)["resourceTemplates"][0]["uriTemplate"] == "memo://{name}"
        assert result_of(updated)["received"] == [
            {"method": "notifications/resources/updated", "params": {"uri": pad}}
        ]
        assert result_of(read)["contents"][0]["text"] == "hello"
        assert len(result_of(taken)) == 1
        assert [message["method"] for message in result_of(after)] == ["notifications/message"]

    async def test_prompts_completion_and_logging_levels(self) -> None:
        """A prompt got, a completion, and only the log messages at the level set."""
        log = "notifications/message"
        outcomes = await drive(
            [
                step("listPrompts"),
                step("getPrompt", name="greet", arguments={"name": "Ada"}),
                step(
                    "complete",
                    ref={"type": "ref/resource", "uri": "memo://{name}"},
                    argument={"name": "name", "value": "pa"},
                ),
                step("setLoggingLevel", level="warning"),
                step("callTool", name="log", arguments={"level": "info", "text": "quiet"}),
                step("callTool", name="log", arguments={"level": "error", "text": "loud"}),
                step("waitFor", method=log, timeoutMs=30000),
                step("notifications", method=log),
                step("waitFor", method=log, timeoutMs=1),
            ],
            stdio=await peer(),
        )
        prompts, prompt, completed, *_, taken, none_left = outcomes
        assert [prompt["name"] for prompt in result_of(prompts)["prompts"]] == ["greet"]
        assert result_of(prompt)["messages"][0]["content"]["text"] == "Say hello to Ada."
        assert result_of(completed)["completion"]["values"] == ["pad", "pages"]
        assert [message["params"]["data"] for message in result_of(taken)] == ["loud"]
        assert error_of(none_left)["name"] == "Timeout"
        assert error_of(none_left)["code"] is None

    async def test_elicitation_and_sampling_answers(self) -> None:
        """The answers given up front, in order, the last repeating, then a new policy; the
        requests the server sent are returned."""
        ask = step("callTool", name="ask", arguments={"question": "Colour?"})
        sampled = {"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "m"}
        options = {
            "onElicit": [
                {"action": "accept", "content": {"answer": "blue"}},
                {"action": "decline"},
            ],
            "onSample": sampled,
        }
        outcomes = await drive(
            [
                ask,
                ask,
                ask,
                step("setPolicy", onElicit={"action": "cancel"}),
                ask,
                step("elicitations"),
                step("callTool", name="sample", arguments={"prompt": "Answer?"}),
                step("samplings"),
                step("serverInfo"),
            ],
            stdio=await peer(),
            options=options,
        )
        accepted, declined, again, _, cancelled, asked, sample, samplings, _ = outcomes
        assert json_texts(result_of(accepted)) == '{"action":"accept","content":{"answer":"blue"}}'
        assert json_texts(result_of(declined)) == '{"action":"decline"}'
        assert json_texts(result_of(again)) == '{"action":"decline"}'
        assert json_texts(result_of(cancelled)) == '{"action":"cancel"}'
        assert [request["params"]["message"] for request in result_of(asked)] == ["Colour?"] * 4
        assert '"text":"42"' in json_texts(result_of(sample))
        assert result_of(samplings)[0]["params"]["messages"][0]["content"]["text"] == "Answer?"

    async def test_progress_background_steps_and_cancellation(self) -> None:
        """Progress as it came off the wire; a call in the background, cancelled, fails."""
        outcomes = await drive(
            [
                step("callTool", name="count", arguments={"n": 3}, progress=True),
                step("notifications", method="notifications/progress"),
                step("callTool", name="hold", background="held"),
                step("ping"),
                step("cancel", label="held", reason="enough"),
                step("await", label="held"),
            ],
            stdio=await peer(),
        )
        counted, progress, started, pinged, _, held = outcomes
        assert json_texts(result_of(counted)) == "counted to 3"
        assert [item["params"]["progress"] for item in result_of(progress)] == [1, 2, 3]
        assert started == {"step": 2, "op": "callTool", "started": "held"}
        assert result_of(pinged) == {}
        assert error_of(held)["message"] == "enough"

    async def test_a_server_that_never_starts_is_a_failed_connection(self) -> None:
        """A stdio command that exits at once: ConnectFailed, with the SDK's reason."""
        with pytest.raises(ConnectFailed) as failed:
            await drive([step("ping")], stdio=Stdio(sys.executable, ["-c", "pass"]))
        assert failed.value.error["message"]

    async def test_a_step_the_harness_does_not_know_is_a_harness_error(self) -> None:
        """A misspelt step never passes unnoticed."""
        with pytest.raises(HarnessError, match="unknown step"):
            await drive([step("listTool")], stdio=await peer())

    async def test_the_node_process_and_its_server_are_gone_after_a_timeout(self) -> None:
        """A plan that outlives its timeout: the client and the server it spawned are killed."""
        started: list[TsClient] = []

        async def hold() -> None:
            async with open_ts_client(stdio=await peer()) as client:
                started.append(client)
                await client.run([step("callTool", name="hold")], seconds=0.5)

        with pytest.raises(trio.TooSlowError):
            await hold()
        (client,) = started
        assert client.process.returncode is not None
        assert await gone(client.connected["pid"])


async def gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether process `pid` has ended (a zombie nobody reaped yet counts) within `seconds`."""
    stat = trio.Path(f"/proc/{pid}/stat")
    with trio.move_on_after(seconds):
        # Another process's exit: there is no event to wait on, so poll.
        while True:
            try:
                state = (await stat.read_text()).rpartition(")")[2].split()[0]
            except (FileNotFoundError, ProcessLookupError):
                return True
            if state == "Z":
                return True
            await trio.sleep(0.05)
    return False
