"""Tests of notes.py: in process, through the MCP SDK's client, and over real stdio."""

# --8<-- [start:imports]
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from notes import notes

from actors import open_runtime
from actors.store import open_store
from actors.testing import connect

# --8<-- [end:imports]


# --8<-- [start:in_process]
BUY_MILK = {"text": "buy milk", "__sessionId": "s1"}  # the arguments, and the session


@pytest.mark.trio
async def test_each_session_sees_only_its_own_notes() -> None:
    async with open_runtime([notes]) as runtime:
        await runtime.call_tool("notes__add_note", BUY_MILK)
        mine = await runtime.call_tool("notes__list_notes", {"__sessionId": "s1"})
        theirs = await runtime.call_tool("notes__list_notes", {"__sessionId": "s2"})
    assert mine.first_text == "- buy milk"
    assert theirs.first_text == "No notes yet."


@pytest.mark.trio
async def test_notes_survive_a_restart(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path}/state.db") as store:
        async with open_runtime([notes], store=store) as runtime:
            await runtime.call_tool("notes__add_note", BUY_MILK)
        async with open_runtime([notes], store=store) as runtime:
            result = await runtime.call_tool("notes__list_notes", {"__sessionId": "s1"})
    assert result.first_text == "- buy milk"


# --8<-- [end:in_process]


# --8<-- [start:sdk]
@pytest.mark.trio
async def test_a_blank_note_is_an_error_the_model_can_read() -> None:
    async with connect([notes]) as client:
        result = await client.call_tool("notes__add_note", {"text": "  "})
    assert result.is_error
    assert result.content[0].text == "text must not be empty"


@pytest.mark.trio
async def test_two_hosts_do_not_see_each_others_notes() -> None:
    async with (
        open_runtime([notes]) as runtime,  # one runtime, two clients of it
        connect(runtime) as first,
        connect(runtime) as second,
    ):
        await first.call_tool("notes__add_note", {"text": "buy milk"})
        theirs = await second.call_tool("notes__list_notes", {})
    assert theirs.content[0].text == "No notes yet."


# --8<-- [end:sdk]


# --8<-- [start:stdio]
@pytest.mark.trio
async def test_the_server_serves_notes_over_stdio() -> None:
    server = StdioServerParameters(
        command=sys.executable,  # the interpreter running the tests, and its packages
        args=["-m", "actors", "serve", "--module", "notes:notes", "--state", "memory"],
        cwd=Path(__file__).parent,  # where notes.py is
    )
    async with Client(server) as client:
        listed = await client.list_tools()
        added = await client.call_tool("notes__add_note", {"text": "buy milk"})
    names = {tool.name for tool in listed.tools}
    assert names == {"notes__add_note", "notes__list_notes"}
    assert added.structured_content == {"count": 1}


# --8<-- [end:stdio]


# --8<-- [start:hypothesis]
@given(texts=st.lists(st.text(max_size=5), max_size=8))
@settings(max_examples=25, deadline=None)
@pytest.mark.trio
async def test_blank_notes_are_refused_and_the_others_counted(texts: list[str]) -> None:
    counts = []
    async with open_runtime([notes]) as runtime:  # a fresh runtime for every example
        for text in texts:
            arguments = {"text": text, "__sessionId": "s"}
            result = await runtime.call_tool("notes__add_note", arguments)
            assert result.is_error == (not text.strip())
            if not result.is_error:
                counts.append(result.structured_content["count"])
    assert counts == list(range(1, len(counts) + 1))


# --8<-- [end:hypothesis]
