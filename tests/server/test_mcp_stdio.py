"""``python -m actors serve`` on stdio, with the official MCP SDK client as the peer."""

from __future__ import annotations

import signal

import attrs
import pytest
import trio
import trio.testing
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from actors import RuntimeConfig, ToolModule, open_runtime
from actors.server import McpAdapter

from .._mcp_helpers import (
    SERVE,
    Era,
    RawServer,
    pid_alive,
    raw_server,
    service_of,
    stdio_session,
    texts,
    wait_gone,
)
from .._schemas import schema_property_names

ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
SLEEPER = "python3 -c 'import os, time; print(os.getpid(), flush=True); time.sleep(60)'"


class TestTools:
    @ERAS
    async def test_every_tool_is_listed_as_module__tool_without_context_fields(
        self, era: Era
    ) -> None:
        """tools/list names module__tool, describes each tool, and no schema has a __ field."""
        async with stdio_session(era=era) as session:
            listed = (await session.list_tools()).tools
        names = {tool.name for tool in listed}
        assert {"planning__create_goal", "playbook_store__select_playbook"} <= names
        assert {"content_store__search_content"} <= names
        assert not any(name.startswith("workspace__") for name in names)  # off by default
        for tool in listed:
            module, _, base = tool.name.partition("__")
            assert module
            assert base
            assert tool.description
            assert tool.input_schema["type"] == "object"
            names = schema_property_names(tool.input_schema)
            assert not any(name.startswith("__") for name in names)

    async def test_the_workspace_is_listed_only_with_allow_exec(self) -> None:
        """--allow-exec adds the workspace's tools."""
        async with stdio_session("--allow-exec", "--modules", "planning") as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
        assert names == {
            "planning__create_goal",
            "planning__list_goals",
            "planning__add_todo",
            "planning__mark_todo",
            "planning__get_planning_state",
            "workspace__execute_command",
            "workspace__poll_process",
        }


class TestScenarios:
    @ERAS
    async def test_two_sessions_are_isolated(self, era: Era) -> None:
        """Goals created in one session are not seen in another."""
        async with stdio_session(era=era) as session:
            s1, s2 = {"sessionId": "s1"}, {"sessionId": "s2"}  # the host names them in _meta
            await session.call_tool("planning__create_goal", {"goal": "Learn Rust"}, meta=s1)
            await session.call_tool("planning__create_goal", {"goal": "Bake"}, meta=s2)
            one = await session.call_tool("planning__list_goals", {}, meta=s1)
            two = await session.call_tool("planning__list_goals", {}, meta=s2)
        assert "Learn Rust" in texts(one)
        assert "Bake" not in texts(one)
        assert "Bake" in texts(two)
        assert "Learn Rust" not in texts(two)
        assert dict(service_of(one)) == {
            "serverName": "planning",
            "toolName": "list_goals",
            "backendType": "builtin",
        }

    async def test_assistants_of_a_session_keep_separate_plans(self) -> None:
        """Planning is keyed by assistant too; the context here travels in _meta."""
        async with stdio_session() as session:
            for assistant in ("a1", "a2"):
                await session.call_tool(
                    "planning__create_goal",
                    {"goal": f"goal of {assistant}"},
                    meta={"sessionId": "s", "assistantId": assistant},
                )
            a1 = await session.call_tool(
                "planning__list_goals", {}, meta={"sessionId": "s", "assistantId": "a1"}
            )
        assert "goal of a1" in texts(a1)
        assert "goal of a2" not in texts(a1)

    async def test_a_playbook_of_another_assistant_is_permission_denied(self) -> None:
        """The playbook store checks ownership and says so in an error result."""
        async with stdio_session() as session:
            a1 = {"sessionId": "s", "assistantId": "a1"}
            created = await session.call_tool(
                "playbook_store__create_playbook", {"name": "deploy"}, meta=a1
            )
            playbook = created.structured_content["id"]  # type: ignore[index]
            mine = await session.call_tool("select_playbook", {"id": playbook}, meta=a1)
            theirs = await session.call_tool(
                "builtin.playbook_store__select_playbook",
                {"id": playbook},
                meta={"sessionId": "s", "assistantId": "a2"},
            )
        assert not mine.is_error
        assert theirs.is_error
        assert "Permission denied" in texts(theirs)

    async def test_content_is_searchable_and_results_carry_data_and_text(self) -> None:
        """add_content then search_content: text for the model, structuredContent for programs."""
        async with stdio_session() as session:
            docs = {"sessionId": "docs"}
            await session.call_tool(
                "content_store__add_content",
                {"filename": "rust.md", "content": "Ownership and borrowing in Rust"},
                meta=docs,
            )
            await session.call_tool(
                "content_store__add_content",
                {"filename": "bread.md", "content": "Flour, water, salt, yeast"},
                meta=docs,
            )
            found = await session.call_tool(
                "content_store__search_content", {"query": "borrowing"}, meta=docs
            )
            elsewhere = await session.call_tool(
                "content_store__search_content", {"query": "borrowing"}, meta={"sessionId": "other"}
            )
        assert found.structured_content is not None
        assert [hit["filename"] for hit in found.structured_content["results"]] == ["rust.md"]
        assert "rust.md" in texts(found)
        assert service_of(found)["toolName"] == "search_content"
        assert elsewhere.structured_content == {"results": [], "count": 0}

    async def test_a_process_is_polled_from_its_session_only(self) -> None:
        """The workspace starts a program; its session polls it, another session cannot."""
        command = "python3 -c 'print(6 * 7)'"
        async with stdio_session("--allow-exec") as session:
            w1 = {"sessionId": "w1"}
            started = await session.call_tool(
                "workspace__execute_command", {"command": command}, meta=w1
            )
            process_id = started.structured_content["processId"]  # type: ignore[index]
            with trio.fail_after(60):
                while True:
                    polled = await session.call_tool(
                        "workspace__poll_process", {"processId": process_id}, meta=w1
                    )
                    assert polled.structured_content is not None
                    if polled.structured_content["status"] != "running":
                        break
                    await trio.sleep(0.05)
            stranger = await session.call_tool(
                "workspace__poll_process", {"processId": process_id}, meta={"sessionId": "w2"}
            )
        assert polled.structured_content["status"] == "exited"
        assert polled.structured_content["stdout"] == "42\n"
        assert stranger.is_error
        assert "not found" in texts(stranger)


class TestContext:
    async def test_arguments_and_meta_that_agree_are_one_context(self) -> None:
        """The same session named in both places is accepted."""
        async with stdio_session() as session:
            await session.call_tool(
                "planning__create_goal", {"goal": "g", "__sessionId": "s"}, meta={"sessionId": "s"}
            )
            listed = await session.call_tool("planning__list_goals", {}, meta={"sessionId": "s"})
        assert "g1: g" in texts(listed)

    async def test_arguments_and_meta_that_disagree_are_an_error_result(self) -> None:
        """Conflicting claims are refused, naming both sources."""
        async with stdio_session() as session:
            result = await session.call_tool(
                "planning__list_goals", {"__sessionId": "a"}, meta={"sessionId": "b"}
            )
        assert result.is_error
        assert "'__sessionId' is 'a'" in texts(result)
        assert "'_meta.sessionId' is 'b'" in texts(result)

    async def test_a_misspelled_context_field_is_an_error_result(self) -> None:
        """__sessionid never falls into the default session."""
        async with stdio_session() as session:
            result = await session.call_tool("planning__list_goals", {"__sessionid": "s"})
        assert result.is_error
        assert "'__sessionid'" in texts(result)

    async def test_the_strict_policy_refuses_a_call_without_a_session(self) -> None:
        """--require-session makes a missing session an error result."""
        async with stdio_session("--require-session") as session:
            result = await session.call_tool("planning__list_goals", {})
        assert result.is_error
        assert "session id is required" in texts(result)


class TestBadInput:
    async def test_a_wrong_argument_type_is_an_error_result_naming_the_field(self) -> None:
        """The runtime's validation reports the field by path."""
        async with stdio_session() as session:
            result = await session.call_tool("planning__create_goal", {"goal": 3})
        assert result.is_error
        assert "$.goal" in texts(result)
        assert "expected a string" in texts(result)

    async def test_oversized_arguments_are_refused_and_other_sessions_go_on(self) -> None:
        """A message over --max-request-bytes gets an error with its own id; state survives."""
        async with stdio_session("--max-request-bytes", "4096") as session:
            await session.call_tool(
                "planning__create_goal", {"goal": "kept"}, meta={"sessionId": "s"}
            )
            with pytest.raises(MCPError) as raised:
                await session.call_tool(
                    "planning__create_goal", {"goal": "x" * 10_000}, meta={"sessionId": "big"}
                )
            after = await session.call_tool("planning__list_goals", {}, meta={"sessionId": "s"})
        assert raised.value.code == types.INVALID_REQUEST
        assert "at most 4096 bytes" in raised.value.message
        assert "kept" in texts(after)

    async def test_a_malformed_line_gets_a_parse_error_and_serving_goes_on(self) -> None:
        """Invalid JSON gets -32700 with a null id; JSON that is not JSON-RPC gets -32600."""
        async with raw_server() as server:
            await server.initialize()
            await server.send(b'{"jsonrpc": "2.0", "id": 1, "method"')
            parse_error = await server.receive()
            await server.send(b"[1, 2, 3]")
            invalid = await server.receive_json()  # a batch of three non-messages: three errors
            await server.send(b"   ")  # a blank line is skipped, not answered
            served = await server.call("planning__create_goal", {"goal": "g"}, {"sessionId": "s"})
        assert parse_error["id"] is None
        assert parse_error["error"]["code"] == types.PARSE_ERROR
        assert parse_error["error"]["message"].startswith("Parse error: Invalid JSON")
        assert [error["id"] for error in invalid] == [None, None, None]
        assert {error["error"]["code"] for error in invalid} == {types.INVALID_REQUEST}
        assert served["result"]["isError"] is False

    async def test_an_oversized_line_is_dropped_without_being_parsed(self) -> None:
        """A line that is not even JSON, over the limit, is refused; its id is unknown."""
        async with raw_server("--max-request-bytes", "1000") as server:
            await server.initialize()
            await server.send(b"z" * 50_000)
            refused = await server.receive()
            served = await server.call("planning__list_goals", {}, {"sessionId": "s"})
        assert refused["id"] is None
        assert refused["error"]["message"].startswith("Invalid Request: the message is 50000 bytes")
        assert "result" in served

    async def test_an_oversized_line_nested_too_deep_to_scan_is_refused(self) -> None:
        """The scan for its id meets arrays nested thousands deep: refused, and serving goes on."""
        async with raw_server("--max-request-bytes", "1000") as server:
            await server.initialize()
            await server.send(b'{"params": ' + b"[" * 5000 + b'], "id": 3}')
            refused = await server.receive()
            served = await server.call("planning__list_goals", {}, {"sessionId": "s"})
        assert refused["id"] is None
        assert refused["error"]["message"].startswith("Invalid Request: the message is 5022 bytes")
        assert "result" in served


class TestShutdown:
    async def test_eof_on_stdin_exits_0_and_stops_the_processes(self) -> None:
        """Closing stdin ends the server cleanly; workspace processes are terminated."""
        async with raw_server("--allow-exec") as server:
            await server.initialize()
            child = await _start_sleeper(server)
            await server.close_stdin()
            code = await server.wait()
            log = server.log.text()
        assert code == 0, log
        assert await wait_gone(child), "the workspace process outlived the server"
        assert "tools/call workspace__execute_command session='w'" in log

    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
    async def test_a_signal_exits_0_and_stops_the_processes(self, signum: signal.Signals) -> None:
        """SIGTERM or SIGINT with a process running: exit code 0, no process left behind."""
        async with raw_server("--allow-exec") as server:
            await server.initialize()
            child = await _start_sleeper(server)
            server.process.send_signal(signum)
            code = await server.wait()
            log = server.log.text()
        assert code == 0, log
        assert await wait_gone(child), "the workspace process outlived the server"
        assert f"{signum.name} received: shutting down" in log


class TestCommandLine:
    @pytest.mark.parametrize(
        ("options", "message"),
        [
            (["--exec-allow", "ls"], b"--exec-allow needs --allow-exec"),
            (["--token", "a-secret-of-16-chars"], b"apply to --http only"),
            (["--modules", "planning,nope"], b"unknown module 'nope'"),
        ],
        ids=["exec-allow", "token", "module"],
    )
    async def test_contradictory_options_exit_2_with_a_message(
        self, options: list[str], message: bytes
    ) -> None:
        """Nothing is served when the options contradict each other."""
        result = await trio.run_process(
            [*SERVE, *options], capture_stderr=True, check=False, stdin=b""
        )
        assert result.returncode == 2
        assert message in result.stderr

    async def test_the_demo_still_runs_without_serving(self) -> None:
        """`demo` is untouched by the serve command."""
        result = await trio.run_process(
            [*SERVE[:3], "demo", "--sessions", "2"], capture_stdout=True
        )
        assert b"only its own" in result.stdout


@attrs.define
class _Gate:
    """State of the `gated` test module: calls wait until the test opens the gate."""

    opened: trio.Event = attrs.field(factory=trio.Event)


GATE = _Gate()
gated: ToolModule[_Gate] = ToolModule("gated", lambda _context: GATE)


@gated.tool
async def wait_for_gate(state: _Gate) -> str:
    """Return once the test opens the gate."""
    await state.opened.wait()
    return "through"


class TestAdapterInProcess:
    """The adapter the stdio transport uses, connected to the SDK client in-process."""

    async def test_closing_refuses_new_calls_and_lets_calls_in_flight_finish(self) -> None:
        """What a signal does before the transport stops: drain, with an error for newcomers."""
        GATE.opened = trio.Event()
        finished: list[types.CallToolResult] = []
        drained = trio.Event()
        async with open_runtime([gated]) as runtime:
            adapter = McpAdapter(runtime)

            async def drain() -> None:
                await adapter.wait_idle()
                drained.set()

            async with Client(adapter.server) as client, trio.open_nursery() as nursery:

                async def in_flight() -> None:
                    finished.append(await client.call_tool("gated__wait_for_gate", {}))

                nursery.start_soon(in_flight)
                with trio.fail_after(5):
                    while not adapter.in_flight:  # noqa: ASYNC110 -- no event for "the SDK began"
                        await trio.sleep(0.01)
                adapter.close()
                nursery.start_soon(drain)
                await trio.testing.wait_all_tasks_blocked()
                refused = await client.call_tool("gated__wait_for_gate", {})
                assert not drained.is_set()
                GATE.opened.set()
                with trio.fail_after(5):
                    await drained.wait()
        assert refused.is_error
        assert "server is stopping" in texts(refused)
        assert texts(finished[0]) == "through"

    async def test_a_call_that_overruns_its_deadline_is_an_error_result(self) -> None:
        """CallTimeoutError reaches the model as isError text, stamped with the tool."""
        GATE.opened = trio.Event()
        async with open_runtime([gated], RuntimeConfig(call_timeout=0.05)) as runtime:
            async with Client(McpAdapter(runtime).server) as client:
                result = await client.call_tool("wait_for_gate", {}, meta={"sessionId": "s"})
        assert result.is_error
        assert "overran its 0.05 s deadline" in texts(result)
        assert service_of(result)["toolName"] == "wait_for_gate"


async def _start_sleeper(server: RawServer) -> int:
    """Start a 60-second sleeper in session 'w'; return its pid (which it prints)."""
    started = await server.call(
        "workspace__execute_command", {"command": SLEEPER}, {"sessionId": "w"}
    )
    process_id = started["result"]["structuredContent"]["processId"]
    with trio.fail_after(60):
        while True:
            polled = await server.call(
                "workspace__poll_process", {"processId": process_id}, {"sessionId": "w"}
            )
            stdout = polled["result"]["structuredContent"]["stdout"]
            if stdout:
                pid = int(stdout.split()[0])
                assert pid_alive(pid)
                return pid
            await trio.sleep(0.05)
