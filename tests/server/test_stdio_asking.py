"""A tool that asks the client something, over stdio, at the in-flight bound.

The stdio transport stops reading requests once ``--max-in-flight`` of them
are in flight (backpressure). A tool that asks the user (`actors.Ask`) waits
for an answer the client writes on the same pipe: the server must read it
even at the bound, or the call waits until its deadline while holding its
key. These tests run the real server with a bound of one, so the asking call
alone fills it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters, types
from mcp.shared.exceptions import MCPError

from actors.server._stdio import SERVER_BUSY

ROOT = Path(__file__).resolve().parents[2]
SERVE = ["-m", "actors", "serve", "--module", "examples.notes:notes", "--state", "memory"]
# Bounds a broken transport's wait (it would hold until the 60 s call deadline), not a wait for
# something to happen: a working one answers in well under a second.
DEADLOCK = 30


def server(*arguments: str) -> StdioServerParameters:
    """The example notes module on stdio, one request in flight at most."""
    return StdioServerParameters(
        command=sys.executable,
        args=[*SERVE, "--max-in-flight", "1", *arguments],
        cwd=ROOT,
        env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]},
    )


async def test_the_answer_to_a_tools_question_is_read_at_the_in_flight_bound() -> None:
    """clear_notes asks the user while it is the one request in flight: its answer gets through."""
    asked: list[str] = []

    async def confirm(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with trio.fail_after(DEADLOCK):
        async with Client(server(), mode="legacy", elicitation_callback=confirm) as client:
            await client.call_tool("notes__add_note", {"text": "milk"})
            result = await client.call_tool("notes__clear_notes", {})
            counted = await client.call_tool("notes__count_notes", {})
    assert asked == ["Delete all 1 notes?"]
    assert not result.is_error, result.content
    assert counted.structured_content == {"count": 0}


async def test_a_request_sent_while_the_server_waits_for_an_answer_is_refused_as_busy() -> None:
    """A request beyond the bound, read only to find the answer behind it, is refused at once."""
    refused: list[MCPError] = []
    client: Client | None = None

    async def confirm_after_a_request(
        _context: Any, _params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert client is not None
        try:
            await client.list_tools()
        except MCPError as error:
            refused.append(error)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with trio.fail_after(DEADLOCK):
        async with Client(
            server(), mode="legacy", elicitation_callback=confirm_after_a_request
        ) as client:
            await client.call_tool("notes__add_note", {"text": "milk"})
            result = await client.call_tool("notes__clear_notes", {})
            listed = await client.list_tools()  # once the call is over, the bound has room
    assert [error.error.code for error in refused] == [SERVER_BUSY]
    assert "retry this request" in refused[0].error.message
    assert not result.is_error, result.content
    assert "notes__clear_notes" in {tool.name for tool in listed.tools}
