"""The FastMCP port (``examples/fastmcp_port/``): the server before and after, driven alike.

``fastmcp_notes.py`` is a FastMCP 4 server as FastMCP's docs teach one, its notes in a dict
keyed by ``ctx.session_id``; it runs with the Python of FastMCP's own virtual environment,
the benchmarks' (`benchmarks._fastmcp_peer.find_fastmcp`), and its tests are skipped
without one. ``notes.py`` is the same server ported to mcp-actors and runs under
``mcp-actors serve --module``. Each test starts a server over stdio and drives it with the
official SDK client: the port lists the same names and answers a script of calls, the
user's answers and the logs included, with the same texts. Where the two keep state
differently (sessions a host names in ``_meta``, a 2026-era client, a restart), each
server's own behaviour is asserted, whichever it is: docs/getting-started/
coming-from-fastmcp.md says the same.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import attrs
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.shared.exceptions import MCPError

from benchmarks._fastmcp_peer import FASTMCP_VERSION, fastmcp_venv, find_fastmcp

from .._mcp_helpers import SERVE, Era, open_session, texts

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from mcp.client.context import ClientRequestContext
    from mcp.types import RequestParamsMeta

FOLDER: Final = Path(__file__).resolve().parents[2] / "examples" / "fastmcp_port"
SERVERS: Final = ("fastmcp", "ours")
REFUSED: Final = "(refused)"
"""What `answer` makes of an error result, whose wording is each framework's own."""
NOTE_SCHEMA: Final = {
    "text": {"type": "string", "description": "The note.", "minLength": 1, "maxLength": 200}
}
SCRIPT_ANSWERS: Final = [
    1,
    REFUSED,
    2,
    ["buy milk", "call Ada"],
    4,
    "call Ada",
    "error: there is no note '9'; there are 2",
    "Review these notes, looking for typos:\n- buy milk\n- call Ada",
    "Nothing was deleted.",
    "Deleted 2 notes.",
    [],
    "There are no notes to delete.",
]
CONFIRMED: Final = types.ElicitResult(action="accept", content={"confirm": True})
DECLINED: Final = types.ElicitResult(action="decline")


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> str:
    """Which server a test starts; FastMCP's is skipped when its environment is missing."""
    name: str = request.param
    if name == "fastmcp" and find_fastmcp() is None:
        pytest.skip(
            f"FastMCP {FASTMCP_VERSION} is not installed in {fastmcp_venv()}: "
            "`python -c 'from benchmarks._fastmcp_peer import install_fastmcp; "
            "install_fastmcp(print)'` makes it (.ci/run does)"
        )
    return name


def command(server: str, *served: str) -> list[str]:
    """The command line of `server`; `served` are extra ``serve`` options, for ours."""
    if server == "fastmcp":
        python = find_fastmcp()
        assert python is not None  # the fixture skipped otherwise
        # -I: FastMCP's Python sees neither this project's path nor its environment.
        return [python, "-I", str(FOLDER / "fastmcp_notes.py")]
    return [*SERVE, "--module", str(FOLDER / "notes.py"), *served]


@attrs.frozen
class Client:
    """A connection to a server, with what the server sent back besides its replies."""

    session: ClientSession
    logs: list[str]
    """The text of each log message, in order."""
    asked: list[str]
    """The message of each question the user was asked, in order."""

    async def call(self, tool: str, session: str | None = None, **arguments: Any) -> Any:
        """Call `tool`, in the session named `session` in ``_meta`` if given: `answer`."""
        meta = None if session is None else cast("RequestParamsMeta", {"sessionId": session})
        return answer(await self.session.call_tool(tool, arguments, meta=meta))

    async def read(self, uri: str) -> str:
        """The text of resource `uri`, or ``error: <message>``."""
        try:
            read = await self.session.read_resource(uri)
        except MCPError as exc:
            return f"error: {exc.error.message}"
        (contents,) = read.contents
        assert isinstance(contents, types.TextResourceContents), contents
        return contents.text


def answer(result: types.CallToolResult) -> Any:
    """What a client reads from a result: a value a tool returned wrapped as
    ``{"result": value}`` in its structured content, else its text; `REFUSED` for an error.

    Both frameworks wrap a tool's ``int`` and ``list``, but FastMCP also wraps a ``str``
    and writes the value's text differently (compact JSON; no item at all for an empty
    list), so the structured value is what compares.
    """
    if result.is_error:
        return REFUSED
    data = result.structured_content
    if data is not None and set(data) == {"result"}:
        return data["result"]
    return texts(result)


def log_text(data: Any) -> str:
    """A log message's text: ours sends it as is, FastMCP as ``{"msg": text, ...}``."""
    return str(data["msg"] if isinstance(data, dict) else data)


@asynccontextmanager
async def connected(
    line: Sequence[str], era: Era = "legacy", replies: Sequence[types.ElicitResult] = ()
) -> AsyncIterator[Client]:
    """A connection over stdio to the server `line` starts, in `era`.

    Each question the server asks is answered with the next of `replies`.
    """
    logs: list[str] = []
    asked: list[str] = []
    left = list(replies)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(log_text(params.data))

    async def on_question(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        del context  # the SDK's signature; the question is all that matters here
        asked.append(params.message)
        return left.pop(0)

    # The SDK passes a server only a few variables: ours keeps its state in the test's.
    env = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}
    params = StdioServerParameters(command=line[0], args=list(line[1:]), env=env)
    with tempfile.TemporaryFile("w+") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read, write, logging_callback=on_log, elicitation_callback=on_question
            ) as session,
        ):
            yield Client(await open_session(session, era), logs, asked)


async def test_the_port_lists_the_same_names_and_schema(server: str) -> None:
    """Tools, the prompt and the resource template keep their FastMCP names
    (``namespaced=False``), and ``add_note``'s Field bounds are the same schema."""
    async with connected(command(server)) as client:
        tools = (await client.session.list_tools()).tools
        prompts = (await client.session.list_prompts()).prompts
        templates = (await client.session.list_resource_templates()).resource_templates
    assert [tool.name for tool in tools] == ["add_note", "list_notes", "word_count", "clear_notes"]
    assert [prompt.name for prompt in prompts] == ["review"]
    assert [template.uri_template for template in templates] == ["notes://note/{number}"]
    (add_note,) = (tool for tool in tools if tool.name == "add_note")
    assert add_note.input_schema["properties"] == NOTE_SCHEMA
    assert add_note.input_schema["required"] == ["text"]


async def test_the_port_answers_the_script_alike(server: str) -> None:
    """The same calls get the same answers from both: tools, a refused argument (naming
    it), the resource template and its error's message, the prompt, and a tool that asks
    the user (declined, then accepted) and logs what it did."""
    async with connected(command(server), replies=[DECLINED, CONFIRMED]) as client:
        answers = [
            await client.call("add_note", text="buy milk"),
            await client.call("add_note", text=""),
            await client.call("add_note", text="call Ada"),
            await client.call("list_notes"),
            await client.call("word_count", text="to be or not"),
            await client.read("notes://note/2"),
            await client.read("notes://note/9"),
        ]
        prompt = await client.session.get_prompt("review", {"focus": "typos"})
        (message,) = prompt.messages
        assert isinstance(message.content, types.TextContent)
        answers.append(message.content.text)
        for tool in ("clear_notes", "clear_notes", "list_notes", "clear_notes"):
            answers.append(await client.call(tool))
        refusal = await client.session.call_tool("add_note", {"text": "x" * 201})
    assert answers == SCRIPT_ANSWERS
    assert client.asked == ["Delete all 2 notes?", "Delete all 2 notes?"]
    assert client.logs == ["the user kept the notes", "deleted 2 notes"]
    assert refusal.is_error
    assert "text" in texts(refusal)


async def test_an_answer_that_leaves_out_confirm_changes_nothing(server: str) -> None:
    """A client that accepts the form but leaves out its one required field is refused
    by both, the message naming ``confirm``: each structures the answer into the
    ``Confirm`` dataclass it asked with. The notes are kept."""
    left_out = types.ElicitResult(action="accept", content={})
    async with connected(command(server), replies=[left_out]) as client:
        await client.call("add_note", text="buy milk")
        refused = await client.session.call_tool("clear_notes", {})
        listed = await client.call("list_notes")
    assert refused.is_error
    assert "confirm" in texts(refused)
    assert listed == ["buy milk"]


async def test_sessions_a_host_names_in_meta(server: str) -> None:
    """A host that names each call's session in ``_meta`` gets them apart from the port;
    FastMCP's ``ctx.session_id`` is the connection's, so there one connection's sessions
    share their notes."""
    async with connected(command(server)) as client:
        await client.call("add_note", "alice", text="Alice's note")
        bobs = await client.call("list_notes", "bob")
        alices = await client.call("list_notes", "alice")
    assert alices == ["Alice's note"]
    assert bobs == (["Alice's note"] if server == "fastmcp" else [])


async def test_a_2026_era_client_keeps_its_notes(server: str) -> None:
    """A client of the 2026-07-28 protocol (``server/discover``, no protocol session)
    keeps its connection's notes on the port; FastMCP gives each of its requests a new
    ``ctx.session_id``, so the note is lost before the next call."""
    async with connected(command(server), era="modern") as client:
        added = await client.call("add_note", text="buy milk")
        listed = await client.call("list_notes")
    assert added == 1
    assert listed == ([] if server == "fastmcp" else ["buy milk"])


async def test_notes_outlive_a_restart(server: str) -> None:
    """The port's state is durable: a server started again with the same ``--session``
    finds the notes in its SQLite file. FastMCP's dict is gone with its process."""
    async with connected(command(server, "--session", "alice")) as client:
        await client.call("add_note", text="buy milk")
    async with connected(command(server, "--session", "alice")) as client:
        listed = await client.call("list_notes")
    assert listed == ([] if server == "fastmcp" else ["buy milk"])
