"""`actors.error_result`: an embedding host answers its model exactly as the MCP server does.

Each bad call is made twice: in process, where the runtime raises and
`error_result` turns the error into a result, and over MCP through the
official SDK's in-memory client, where the adapter answers with an ``isError``
result. Both wire shapes must be the same.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from actors import ArgumentsError, ToolError, open_runtime
from actors.lowlevel import error_result
from actors.modules import planning
from actors.server import McpAdapter
from protocol import Caller, CallError, CallResult, TenantError, service_info_of

ALPHA = Caller("token-1", tenant="alpha")

BAD_CALLS = [
    pytest.param(
        {
            "name": "planning__create_goal",
            "arguments": {"goal": 7},
            "_meta": {"sessionId": "alpha/s"},
        },
        id="bad-arguments",
    ),
    pytest.param(
        {
            "name": "planning__list_goals",
            "arguments": {"extra": 1},
            "_meta": {"sessionId": "alpha/s"},
        },
        id="unknown-argument",
    ),
    pytest.param(
        {"name": "planning__list_goals", "arguments": {}, "_meta": {"sessionId": 12}},
        id="bad-context",
    ),
    pytest.param(
        {"name": "planning__list_goals", "arguments": {}, "_meta": {"sessionId": "beta/s"}},
        id="outside-tenant",
    ),
]


async def _in_process(call: dict[str, Any]) -> dict[str, Any]:
    async with open_runtime([planning]) as runtime:
        with pytest.raises(CallError) as raised:
            await runtime.call(call, caller=ALPHA)
        service = runtime.registry.resolve(call["name"]).service
        return error_result(raised.value, service).to_wire()


async def _over_mcp(call: dict[str, Any]) -> dict[str, Any]:
    async with open_runtime([planning]) as runtime:
        adapter = McpAdapter(runtime, identify=lambda _ctx: ALPHA)
        async with Client(adapter.server) as client:
            result = await client.call_tool(call["name"], call["arguments"], meta=call["_meta"])
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


@pytest.mark.parametrize("call", BAD_CALLS)
async def test_the_same_result_in_process_and_over_mcp(call: dict[str, Any]) -> None:
    """The model reads the same words, with the same provenance, wherever it runs."""
    local = await _in_process(call)
    remote = await _over_mcp(call)
    assert local["isError"] is remote["isError"] is True
    assert local["content"] == remote["content"]
    assert service_info_of(local["content"][0]) == service_info_of(remote["content"][0])


async def test_the_message_names_the_problem() -> None:
    """The text is the error's own message: which argument, and what was wrong with it."""
    call = {
        "name": "planning__create_goal",
        "arguments": {"goal": 7},
        "_meta": {"sessionId": "alpha/s"},
    }
    wire = await _in_process(call)
    assert "goal" in wire["content"][0]["text"]


def test_without_a_service_the_result_is_unstamped() -> None:
    """An unknown tool has no ServiceInfo to stamp; the message still reaches the model."""
    result = error_result(TenantError("session 'beta/s' is outside tenant 'alpha'"))
    assert result == CallResult.error("session 'beta/s' is outside tenant 'alpha'")
    assert service_info_of(result.to_wire()["content"][0]) is None


@pytest.mark.parametrize(
    "error", [ValueError("dsn=postgres://admin:secret@db"), ToolError("x"), KeyError("k")]
)
def test_other_exceptions_are_refused(error: Exception) -> None:
    """A bug or a store failure may carry what the model must not read: it is not turned."""
    refused = r"takes a CallError \(a RuntimeCallError or a ProtocolError\)"
    with pytest.raises(TypeError, match=refused):
        error_result(error)  # type: ignore[arg-type]


def test_arguments_error_text_is_its_message() -> None:
    """No wrapping, no prefix: the result's text is exactly the message."""
    error = ArgumentsError("argument 'goal': expected a string, got 7")
    service = planning.tools["create_goal"].service
    result = error_result(error, service)
    assert result.is_error
    assert [item.text for item in result.content] == [str(error)]
    assert [item.service for item in result.content] == [service]
