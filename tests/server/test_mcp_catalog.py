"""Resources, prompts, completions, subscriptions, logging, elicitation and sampling over MCP.

The official Python SDK client (``mcp.Client``) as the peer of a real server: ``python -m
actors serve`` spawned on stdio, or a ``serve --http
127.0.0.1:0`` process reached over Streamable HTTP (the `served` fixture gives both). The
server serves ``examples/notes.py`` — resources ``notes://all`` and ``notes://note/{number}``
(with a completion), the prompt ``notes__review``, and ``clear_notes``, which asks the user
before it deletes and logs what it did — beside `PROBE_SOURCE`, a module of these tests: a
counter to change, whose resource marks a point on a client's stream of updates, and tools
that log and ask the client's model.

A client speaks the handshake era (``mode="legacy"``, 2025-11-25: ``logging/setLevel``,
``resources/subscribe``, requests from the server during a call) or, by default, the
2026-07-28 era (log level per request, ``subscriptions/listen``, questions as
``InputRequiredResult``). A 2026-era client over HTTP has no session of its own, so
`Peer.own` names one for it.

That a notification did *not* arrive is proven without sleeping: the server sends one
client's updates in order, so once a later marker (an update of another key, a later log
message) has arrived, anything sent before it has too. The attacker cases are at the end:
too many subscriptions, a client that does not read, a log flood, a huge log message, and
hostile answers to a form.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import sys
import tempfile
import warnings
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import attrs
import pytest
import trio
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from actors._client import MAX_LOG_TEXT
from actors.server.mcp._client_channels import LOG_QUEUE
from actors.server.mcp._subscriptions import MAX_SUBSCRIPTIONS

from .._mcp_helpers import (
    SERVE,
    RawServer,
    bearer,
    http_server,
    importable_module,
    raw_server,
    resource_text,
    texts,
    tools_call,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from mcp.client.session import ClientRequestContext

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

Transport = Literal["stdio", "http"]
Era = Literal["legacy", "modern"]
ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
ROOT = Path(__file__).resolve().parents[2]
PROBE = "catalog_probe"
SERVED = ("--module", "examples.notes:notes", "--module", f"{PROBE}:probe", "--state", "memory")
LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
INVALID_PARAMS = -32602
WAIT = 30.0  # seconds for a notification that must come
TOKEN = "Vb7#kQ2mLw9Xn4Rt3sYpT0uZ"
TENANT = "acme"
ALL, TICKS = "notes://all", "probe://ticks"
CONFIRM = {"confirm": True}

PROBE_SOURCE = '''
"""A module of tests/server/test_mcp_catalog.py: a counter to change, tools that log and ask."""

import attrs

from actors import Ask, Log, ToolModule
from protocol import Scope


@attrs.define
class Ticks:
    count: int = 0


probe = ToolModule("probe", lambda context: Ticks(), scope=Scope.SESSION)


@probe.tool
def tick(state: Ticks) -> dict:
    """One more tick: a change of this session's counter."""
    state.count += 1
    return {"ticks": state.count}


@probe.resource("probe://ticks")
def ticks(state: Ticks) -> str:
    """How many ticks this session has."""
    return str(state.count)


@probe.tool(read_only=True)
def chatter(state: Ticks, log: Log) -> str:
    """One message at debug, at info and at warning, in that order."""
    log.debug("a debug line")
    log.info("an info line")
    log.warning("a warning line")
    return "chattered"


@probe.tool(read_only=True)
def flood(state: Ticks, log: Log, count: int) -> str:
    """Log `count` messages in a tight loop."""
    for number in range(count):
        log.info(f"message {number}")
    return f"logged {count}"


@probe.tool(read_only=True)
def shout(state: Ticks, log: Log, size: int) -> str:
    """Log one message of `size` characters."""
    log.warning("x" * size)
    return "shouted"


@probe.tool(read_only=True)
async def consult(state: Ticks, ask: Ask, question: str) -> str:
    """Ask the client's model `question`; its answer."""
    return await ask.model(question, max_tokens=64, system_prompt="Answer briefly.")
'''

T = TypeVar("T")


class Inbox(Generic[T]):
    """What a client received, in order of arrival, and a bounded wait for more."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self._arrived = trio.Event()

    def put(self, item: T) -> None:
        """Keep `item`; wake whoever waits."""
        self.items.append(item)
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait(self, done: Callable[[list[T]], bool], seconds: float = WAIT) -> list[T]:
        """Return what arrived once `done` holds for it (TooSlowError after `seconds`)."""
        with trio.fail_after(seconds):
            while not done(self.items):
                await self._arrived.wait()
        return list(self.items)


Answer = types.ElicitResult | types.ErrorData
Sampled = types.CreateMessageResult | types.ErrorData


@attrs.define
class Peer:
    """One connected SDK client, with what the server sent it unasked."""

    client: Client
    own: dict[str, Any] | None
    """The ``_meta`` of a call in the client's own session: none, but for a 2026-era
    client over HTTP without a token, which has no session of its own and names one."""
    updates: Inbox[str]
    """The URIs of ``notifications/resources/updated``, in order."""
    logs: Inbox[types.LoggingMessageNotificationParams]
    """The log messages (``notifications/message``), in order."""
    questions: list[types.ElicitRequestParams]
    """The forms the server asked the user to fill in."""
    prompts: list[types.CreateMessageRequestParams]
    """What the server asked the client's model."""

    def meta(self, session: str | None = None) -> dict[str, Any] | None:
        """The ``_meta`` naming `session`, or the client's own session's."""
        return self.own if session is None else {"sessionId": session}

    async def call(
        self, name: str, arguments: dict[str, Any] | None = None, *, session: str | None = None
    ) -> types.CallToolResult:
        """Call `name` in `session` (the client's own by default)."""
        return await self.client.call_tool(name, arguments or {}, meta=self.meta(session))

    async def add(self, text: str, *, session: str | None = None) -> None:
        """Add a note in `session`."""
        result = await self.call("notes__add_note", {"text": text}, session=session)
        assert not result.is_error, result

    async def read(self, uri: str, *, session: str | None = None) -> str:
        """The text of resource `uri` in `session`."""
        return resource_text(await self.client.read_resource(uri, meta=self.meta(session)))

    async def count(self, *, session: str | None = None) -> int:
        """How many notes `session` has."""
        result = await self.call("notes__count_notes", session=session)
        assert result.structured_content is not None, result
        count: int = result.structured_content["count"]
        return count

    async def subscribe(self, uri: str, *, session: str | None = None) -> None:
        """``resources/subscribe`` to `uri` (in `session`, or the client's own)."""
        with warnings.catch_warnings():  # removed from 2026-07-28 on; this is 2025-11-25
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self.client.subscribe_resource(uri, meta=self.meta(session))

    async def unsubscribe(self, uri: str) -> None:
        """``resources/unsubscribe`` from `uri`."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self.client.unsubscribe_resource(uri)

    async def set_level(self, level: types.LoggingLevel) -> None:
        """``logging/setLevel``."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self.client.set_logging_level(level)

    async def tick(self, *, session: str | None = None) -> None:
        """Change the probe's counter in `session`: the marker on the stream of updates."""
        result = await self.call("probe__tick", session=session)
        assert not result.is_error, result

    async def request(self, method: str, params: dict[str, Any], result: type[T]) -> T:
        """A request as given, past the SDK's own checks of what a client sends."""
        raw = types.Request[dict[str, Any], str](method=method, params=params)
        return await self.client.session.send_request(raw, result)  # type: ignore[arg-type]

    async def complete_number(self, typed: str, *, session: str | None = None) -> list[str]:
        """What ``completion/complete`` suggests for the note number `typed` so far."""
        params: dict[str, Any] = {
            "ref": {"type": "ref/resource", "uri": "notes://note/{number}"},
            "argument": {"name": "number", "value": typed},
        }
        meta = self.meta(session)
        if meta is not None:
            params["_meta"] = meta
        result = await self.request("completion/complete", params, types.CompleteResult)
        return result.completion.values


@attrs.frozen
class Served:
    """The notes and the probe, served over one transport: connect clients to it."""

    transport: Transport
    url: str | None = None
    """Where an HTTP server listens; None on stdio (each client spawns its own server)."""
    tenant: str | None = None
    """The tenant of `TOKEN`, when the HTTP server was started with it."""

    @asynccontextmanager
    async def connect(
        self,
        era: Era = "legacy",
        *,
        answers: Sequence[Answer] | None = None,
        samples: Sequence[Sampled] | None = None,
        log_level: types.LoggingLevel | None = None,
    ) -> AsyncIterator[Peer]:
        """A connected client; it declares elicitation (sampling) when `answers` (`samples`)
        are given, which it answers in order, the last repeating."""
        own = None
        if era == "modern" and self.transport == "http" and self.tenant is None:
            own = {"sessionId": f"own-{secrets.token_hex(6)}"}
        updates: Inbox[str] = Inbox()
        logs: Inbox[types.LoggingMessageNotificationParams] = Inbox()
        questions: list[types.ElicitRequestParams] = []
        prompts: list[types.CreateMessageRequestParams] = []

        async def heard(message: object) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                updates.put(message.params.uri)

        async def logged(params: types.LoggingMessageNotificationParams) -> None:
            logs.put(params)

        options = {
            "mode": "legacy" if era == "legacy" else "auto",
            "read_timeout_seconds": 60.0,
            "message_handler": heard,
            "logging_callback": logged,
            "log_level": log_level,
            "elicitation_callback": None if answers is None else _answering(answers, questions),
            "sampling_callback": None if samples is None else _sampling(samples, prompts),
        }
        async with self._client(options) as client:
            version = LEGACY_VERSION if era == "legacy" else MODERN_VERSION
            assert client.protocol_version == version
            yield Peer(client, own, updates, logs, questions, prompts)

    @asynccontextmanager
    async def _client(self, options: dict[str, Any]) -> AsyncIterator[Client]:
        if self.url is None:
            env = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}  # see conftest
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
            command = StdioServerParameters(
                command=sys.executable, args=[*SERVE[1:], *SERVED], cwd=ROOT, env=env
            )
            with tempfile.TemporaryFile("w+") as errlog:
                async with Client(stdio_client(command, errlog=errlog), **options) as client:
                    yield client
            return
        token = None if self.tenant is None else TOKEN
        async with create_mcp_http_client(headers=bearer(token)) as http:
            transport = streamable_http_client(self.url, http_client=http)
            async with Client(transport, **options) as client:
                yield client


def _answering(answers: Sequence[Answer], asked: list[types.ElicitRequestParams]) -> Any:
    """An elicitation callback noting each form in `asked` and giving `answers` in order
    (the last repeating)."""
    queue = list(answers)

    async def answer(_context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        asked.append(params)
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return answer


def _sampling(samples: Sequence[Sampled], asked: list[types.CreateMessageRequestParams]) -> Any:
    """A sampling callback noting each request in `asked` and giving `samples` in order
    (the last repeating)."""
    queue = list(samples)

    async def sample(
        _context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> Sampled:
        asked.append(params)
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return sample


@pytest.fixture(autouse=True)
def _probe_importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe module, and the project root (for ``examples.notes``), importable by every
    server the test starts."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) if path is None else f"{ROOT}{os.pathsep}{path}")
    importable_module(tmp_path, monkeypatch, PROBE, PROBE_SOURCE)


@asynccontextmanager
async def serving(transport: Transport, *, tenant: str | None = None) -> AsyncIterator[Served]:
    """The notes and the probe served over `transport` while the block runs; over HTTP,
    with `TOKEN` bound to `tenant` when one is given."""
    if transport == "stdio":
        yield Served("stdio")
        return
    extra = () if tenant is None else ("--token", f"{TOKEN}={tenant}")
    # Sessions as hosts name them, in both eras (handles: tests/server/test_handles.py).
    async with http_server(*SERVED, "--no-handles", *extra) as server:
        yield Served("http", server.url, tenant)


@pytest.fixture(params=["stdio", "http"])
async def served(request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    """The notes and the probe, served on stdio (a server per client) or over HTTP (one
    server on 127.0.0.1 for all the test's clients)."""
    async with serving(request.param) as server:
        yield server


def error_of(raised: pytest.ExceptionInfo[MCPError]) -> types.ErrorData:
    """The JSON-RPC error a request was answered with."""
    return raised.value.error


# ---- resources ------------------------------------------------------------------------


class TestResources:
    async def test_resources_templates_and_prompts_are_listed(self, served: Served) -> None:
        """Each list names what the modules declare, with titles, descriptions and types."""
        async with served.connect() as peer:
            resources = (await peer.client.list_resources()).resources
            templates = (await peer.client.list_resource_templates()).resource_templates
            prompts = (await peer.client.list_prompts()).prompts
        by_uri = {str(resource.uri): resource for resource in resources}
        assert set(by_uri) == {ALL, TICKS}
        assert by_uri[ALL].name == "notes__all_notes"
        assert by_uri[ALL].title == "Notes"
        assert by_uri[ALL].mime_type == "text/markdown"
        assert by_uri[ALL].description == "Every note of this conversation, one per line."
        (template,) = templates
        assert template.uri_template == "notes://note/{number}"
        assert (template.name, template.mime_type) == ("notes__one_note", "text/plain")
        (prompt,) = prompts
        assert (prompt.name, prompt.title) == ("notes__review", "Review the notes")
        assert prompt.arguments is not None
        ((name, required),) = [(argument.name, argument.required) for argument in prompt.arguments]
        assert (name, required) == ("focus", False)

    @ERAS
    async def test_a_read_sees_only_its_own_sessions_notes(self, served: Served, era: Era) -> None:
        """``notes://all`` and ``notes://note/1`` read the notes of the session the read is
        for — the client's own, or one named in ``_meta`` — and nobody else's."""
        async with served.connect(era) as peer:
            await peer.add("mine, first")
            await peer.add("mine, second")
            await peer.add("theirs", session="s-other")
            mine = await peer.read(ALL)
            first = await peer.read("notes://note/1")
            second = await peer.read("notes://note/2")
            theirs = await peer.read(ALL, session="s-other")
            their_first = await peer.read("notes://note/1", session="s-other")
            nobodys = await peer.read(ALL, session="s-empty")
        assert mine == "1. mine, first\n2. mine, second"
        assert (first, second) == ("mine, first", "mine, second")
        assert (theirs, their_first) == ("1. theirs", "theirs")
        assert nobodys == ""

    async def test_two_clients_naming_no_session_read_their_own_notes(self, served: Served) -> None:
        """Two clients at once, neither naming a session: each reads its connection's own
        notes (over HTTP two sessions of one server; on stdio two servers)."""
        async with served.connect() as alice, served.connect() as bob:
            await alice.add("alice's")
            await bob.add("bob's")
            await bob.add("bob's again")
            alices, bobs = await alice.read(ALL), await bob.read(ALL)
        assert alices == "1. alice's"
        assert bobs == "1. bob's\n2. bob's again"

    async def test_an_unknown_uri_is_invalid_params_carrying_the_uri(self, served: Served) -> None:
        """A URI no resource or template matches: -32602, its ``data`` naming the URI."""
        async with served.connect() as peer:
            with pytest.raises(MCPError) as unknown:
                await peer.read("notes://nothing/here")
            with pytest.raises(MCPError) as other_scheme:
                await peer.read("file:///etc/passwd")
        assert error_of(unknown).code == INVALID_PARAMS
        assert error_of(unknown).data == {"uri": "notes://nothing/here"}
        assert "no resource has the URI 'notes://nothing/here'" in error_of(unknown).message
        assert error_of(other_scheme).data == {"uri": "file:///etc/passwd"}

    async def test_a_missing_note_is_an_error_naming_it(self, served: Served) -> None:
        """``notes://note/99`` of a session with one note: an error that says so."""
        async with served.connect() as peer:
            await peer.add("the only one")
            with pytest.raises(MCPError) as missing:
                await peer.read("notes://note/99")
            with pytest.raises(MCPError) as zero:
                await peer.read("notes://note/0")
        assert error_of(missing).code == INVALID_PARAMS
        assert error_of(missing).message == "there is no note '99'; there are 1"
        assert error_of(zero).message == "there is no note '0'; there are 1"

    async def test_hostile_template_values_get_clear_errors_and_the_server_keeps_serving(
        self, served: Served
    ) -> None:
        """A traversal (decoded, it is just a value the handler refuses), an encoded slash,
        5 KB of digits (longer than a variable may be) and a control character: each a
        clear -32602; the notes are still read afterwards."""
        long = "9" * 5000
        async with served.connect() as peer:
            await peer.add("still here")
            errors: dict[str, types.ErrorData] = {}
            for value in ("..%2F..", "..", "1%2F2", long, "1%0A2"):
                with pytest.raises(MCPError) as raised:
                    await peer.read(f"notes://note/{value}")
                errors[value] = error_of(raised)
            after = await peer.read("notes://note/1")
        assert {error.code for error in errors.values()} == {INVALID_PARAMS}
        assert errors["..%2F.."].message == "there is no note '../..'; there are 1"
        assert errors[".."].message == "there is no note '..'; there are 1"
        assert errors["1%2F2"].message == "there is no note '1/2'; there are 1"
        assert errors["1%0A2"].message == "there is no note '1\\n2'; there are 1"
        too_long = errors[long]
        assert too_long.message.startswith("no resource has the URI 'notes://note/999")
        assert len(too_long.message) < 500  # the URI is cut in the message
        assert too_long.data == {"uri": f"notes://note/{long}"}
        assert after == "still here"


# ---- prompts and completions ------------------------------------------------------------


class TestPrompts:
    @ERAS
    async def test_the_review_prompt_with_and_without_focus(self, served: Served, era: Era) -> None:
        """The prompt lists the caller's notes, looking for the default focus or the one
        given."""
        async with served.connect(era) as peer:
            await peer.add("ship it")
            await peer.add("ask Ada", session="s-other")
            default = await peer.client.get_prompt("notes__review", meta=peer.own)
            focused = await peer.client.get_prompt(
                "notes__review", {"focus": "typos"}, meta=peer.own
            )
            empty = await peer.client.get_prompt("notes__review", meta={"sessionId": "s-empty"})
        ((message,), (focused_message,)) = default.messages, focused.messages
        assert message.role == "user"
        assert isinstance(message.content, types.TextContent)
        assert message.content.text == "Review these notes, looking for open questions:\n- ship it"
        assert isinstance(focused_message.content, types.TextContent)
        assert focused_message.content.text == "Review these notes, looking for typos:\n- ship it"
        assert default.description == "Ask the model to review this conversation's notes."
        assert isinstance(empty.messages[0].content, types.TextContent)
        assert empty.messages[0].content.text.endswith("(no notes yet)")

    async def test_a_prompt_argument_of_the_wrong_type_is_invalid_params(
        self, served: Served
    ) -> None:
        """``focus`` as a number (the SDK client would not send it; sent raw here): -32602,
        and the server keeps serving."""
        async with served.connect() as peer:
            with pytest.raises(MCPError) as raised:
                await peer.request(
                    "prompts/get",
                    {"name": "notes__review", "arguments": {"focus": 3}},
                    types.GetPromptResult,
                )
            after = await peer.client.get_prompt("notes__review", {"focus": "3"})
        assert error_of(raised).code == INVALID_PARAMS
        assert after.messages

    async def test_a_prompt_argument_of_the_wrong_type_is_named_in_the_error(
        self, served: Served
    ) -> None:
        """The error of ``focus: 3`` names the argument and says it must be a string."""
        async with served.connect() as peer:
            with pytest.raises(MCPError) as raised:
                await peer.request(
                    "prompts/get",
                    {"name": "notes__review", "arguments": {"focus": 3}},
                    types.GetPromptResult,
                )
        assert error_of(raised).code == INVALID_PARAMS
        assert error_of(raised).message == (
            "Invalid params of prompts/get: params.arguments.focus: Input should be a valid string"
        )

    async def test_an_unknown_prompt_and_an_unknown_argument_are_named(
        self, served: Served
    ) -> None:
        """-32602 naming the prompt, and naming the argument the prompt does not take."""
        async with served.connect() as peer:
            with pytest.raises(MCPError) as unknown:
                await peer.client.get_prompt("notes__nope")
            with pytest.raises(MCPError) as extra:
                await peer.client.get_prompt("notes__review", {"focus": "x", "tone": "kind"})
        assert error_of(unknown).code == INVALID_PARAMS
        assert error_of(unknown).message.startswith("unknown prompt 'notes__nope'")
        assert error_of(extra).code == INVALID_PARAMS
        assert "unexpected argument 'tone'" in error_of(extra).message

    @ERAS
    async def test_a_note_number_is_completed_from_the_callers_notes_only(
        self, served: Served, era: Era
    ) -> None:
        """``completion/complete`` of ``number`` of ``notes://note/{number}``: the numbers of
        the notes of the caller's session that start with what was typed."""
        async with served.connect(era) as peer:
            for number in range(3):
                await peer.add(f"mine {number}")
            for number in range(12):
                await peer.add(f"theirs {number}", session="s-busy")
            mine = await peer.complete_number("")
            mine_1 = await peer.complete_number("1")
            theirs_1 = await peer.complete_number("1", session="s-busy")
            nobodys = await peer.complete_number("", session="s-empty")
        assert mine == ["1", "2", "3"]
        assert mine_1 == ["1"]
        assert theirs_1 == ["1", "10", "11", "12"]
        assert nobodys == []


# ---- subscriptions --------------------------------------------------------------------


class TestSubscriptions:
    async def test_an_update_reaches_only_the_client_whose_session_changed(
        self, served: Served
    ) -> None:
        """Two clients subscribed to ``notes://all``, each in its own session: a change by
        one notifies it alone. The other's own later marker (a tick of its counter) arrives
        with nothing before it; unsubscribing stops the updates."""
        async with served.connect() as alice, served.connect() as bob:
            await alice.subscribe(ALL)
            await bob.subscribe(ALL)
            await bob.subscribe(TICKS)
            await alice.subscribe(TICKS)

            await alice.add("alice's")
            await alice.updates.wait(lambda got: ALL in got)
            await bob.tick()  # bob's marker: anything sent to bob before it came first
            bob_heard = await bob.updates.wait(lambda got: TICKS in got)

            await bob.add("bob's")
            await bob.updates.wait(lambda got: got.count(ALL) == 1)
            await alice.tick()
            alice_heard = await alice.updates.wait(lambda got: TICKS in got)

            await alice.unsubscribe(ALL)
            await alice.add("alice's, unheard")
            await alice.tick()
            alice_after = await alice.updates.wait(lambda got: got.count(TICKS) == 2)
        assert bob_heard == [TICKS]
        assert alice_heard == [ALL, TICKS]
        assert alice_after == [ALL, TICKS, TICKS]

    async def test_a_subscription_follows_the_key_of_the_session_named_in_meta(
        self, served: Served
    ) -> None:
        """A subscription to ``notes://all`` of session ``elsewhere`` (in ``_meta``) hears
        changes of that session's notes — made by this client or (over HTTP) another — and
        none of the client's own session, nor of another assistant of ``elsewhere``."""
        async with served.connect() as peer, served.connect() as other:
            await peer.subscribe(ALL, session="elsewhere")
            await peer.subscribe(TICKS)
            await peer.add("in my own session")
            assistant = await peer.client.call_tool(
                "notes__add_note",
                {"text": "another assistant's"},
                meta={"sessionId": "elsewhere", "assistantId": "a2"},
            )
            await peer.tick()
            before = await peer.updates.wait(lambda got: TICKS in got)
            await peer.add("elsewhere, by me", session="elsewhere")
            mine = await peer.updates.wait(lambda got: ALL in got)
            if served.transport == "http":  # the same server: another client's change counts
                await other.add("elsewhere, by another client", session="elsewhere")
                await peer.updates.wait(lambda got: got.count(ALL) == 2)
            read = await peer.read(ALL, session="elsewhere")
        assert not assistant.is_error
        assert before == [TICKS]
        assert mine == [TICKS, ALL]
        assert read.startswith("1. elsewhere, by me")

    async def test_a_2026_era_listen_stream_hears_only_its_own_session(
        self, served: Served
    ) -> None:
        """``subscriptions/listen`` (``Client.listen``) for ``notes://all`` and the probe's
        counter: a change of another session's notes sends nothing on it (the counter's
        update, sent later, is the first event), a change of its own notes does."""
        async with serving(served.transport, tenant=TENANT) as server:
            # Client.listen takes no _meta: over HTTP, a 2026-era client with a tenant's
            # token has a session of its own, the tenant's bucket.
            other = "other" if server.transport == "stdio" else f"{TENANT}/other"
            async with server.connect("modern") as peer:
                async with peer.client.listen(resource_subscriptions=[ALL, TICKS]) as stream:
                    honored = stream.honored.resource_subscriptions
                    await peer.add("another session's", session=other)
                    await peer.tick()
                    with trio.fail_after(WAIT):
                        first = await anext(stream)
                    await peer.add("mine")
                    with trio.fail_after(WAIT):
                        second = await anext(stream)
                mine = await peer.read(ALL)
        assert honored == [ALL, TICKS]
        assert (first.uri, second.uri) == (TICKS, ALL)  # type: ignore[union-attr]
        assert mine == "1. mine"


# ---- logging ------------------------------------------------------------------------


def texts_of(logs: Sequence[types.LoggingMessageNotificationParams]) -> list[tuple[str, str]]:
    """Each message's level and text."""
    return [(message.level, str(message.data)) for message in logs]


class TestLogging:
    @pytest.mark.parametrize(
        ("level", "expected"),
        [
            ("debug", [("info", "the user kept the notes"), ("warning", "deleted 1 notes")]),
            ("warning", [("warning", "deleted 1 notes")]),
        ],
    )
    async def test_set_level_decides_which_messages_of_clear_notes_arrive(
        self, served: Served, level: types.LoggingLevel, expected: list[tuple[str, str]]
    ) -> None:
        """``clear_notes`` logs ``info`` when the user keeps the notes and ``warning`` when
        it deletes them; after ``logging/setLevel`` only those at or above the level come
        (the second call's warning is the marker that the first's info would have come)."""
        decline, accept = (
            types.ElicitResult(action="decline"),
            types.ElicitResult(action="accept", content=CONFIRM),
        )
        async with served.connect(answers=[decline, accept]) as peer:
            await peer.set_level(level)
            await peer.add("a note")
            kept = await peer.call("notes__clear_notes")
            deleted = await peer.call("notes__clear_notes")
            logs = await peer.logs.wait(lambda got: any(m.level == "warning" for m in got))
        assert texts(kept) == "Nothing was deleted."
        assert texts(deleted) == "Deleted 1 notes."
        assert texts_of(logs) == expected

    @pytest.mark.parametrize(
        ("level", "expected"),
        [
            (None, ["info", "warning"]),  # before a client sets one, info
            ("debug", ["debug", "info", "warning"]),
            ("warning", ["warning"]),
        ],
    )
    async def test_a_handshake_era_client_gets_messages_at_its_level(
        self, served: Served, level: types.LoggingLevel | None, expected: list[str]
    ) -> None:
        """A tool logging at debug, info and warning: what arrives depends on the level
        the connection set (info by default); everything arrives before the result."""
        async with served.connect() as peer:
            if level is not None:
                await peer.set_level(level)
            result = await peer.call("probe__chatter")
            logs = await peer.logs.wait(lambda got: any(m.level == "warning" for m in got))
        assert texts(result) == "chattered"
        assert [message.level for message in logs] == expected
        assert str(logs[-1].data) == "a warning line"

    @pytest.mark.parametrize(
        ("level", "expected"),
        [("debug", ["debug", "info", "warning"]), ("warning", ["warning"])],
    )
    async def test_a_2026_era_request_gets_the_messages_at_its_log_level(
        self, served: Served, level: types.LoggingLevel, expected: list[str]
    ) -> None:
        """``Client(log_level=…)`` names the level in every request: the messages at or
        above it come, on the request's own stream."""
        async with served.connect("modern", log_level=level) as peer:
            result = await peer.call("probe__chatter")
            logs = await peer.logs.wait(lambda got: any(m.level == "warning" for m in got))
        assert texts(result) == "chattered"
        assert [message.level for message in logs] == expected

    async def test_a_2026_era_request_without_a_log_level_gets_no_message(
        self, served: Served
    ) -> None:
        """No level in the request, no message; the next request names ``warning`` in its
        ``_meta`` and its warning is the first message to arrive."""
        async with served.connect("modern") as peer:
            quiet = await peer.call("probe__chatter")
            loud = await peer.client.call_tool(
                "probe__chatter",
                {},
                meta={**(peer.own or {}), "io.modelcontextprotocol/logLevel": "warning"},
            )
            logs = await peer.logs.wait(lambda got: bool(got))
        assert not quiet.is_error
        assert not loud.is_error
        assert texts_of(logs) == [("warning", "a warning line")]


# ---- elicitation and sampling ---------------------------------------------------------


def accept(content: dict[str, Any]) -> types.ElicitResult:
    """An answer accepting the form with `content`."""
    return types.ElicitResult(action="accept", content=content)


class TestElicitation:
    @ERAS
    async def test_a_confirmed_form_deletes_the_notes(self, served: Served, era: Era) -> None:
        """``clear_notes`` asks the user with a form; ``{"confirm": true}`` deletes every
        note. A 2026-era client answers an ``InputRequiredResult`` and sends the call again."""
        async with served.connect(era, answers=[accept(CONFIRM)]) as peer:
            await peer.add("one")
            await peer.add("two")
            result = await peer.call("notes__clear_notes")
            left = await peer.count()
            (question,) = peer.questions
        assert not result.is_error
        assert texts(result) == "Deleted 2 notes."
        assert left == 0
        assert isinstance(question, types.ElicitRequestFormParams)
        assert question.message == "Delete all 2 notes?"
        assert question.requested_schema == {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": "Delete?"}},
        }

    @ERAS
    @pytest.mark.parametrize(
        "answer",
        [
            types.ElicitResult(action="decline"),
            types.ElicitResult(action="cancel"),
            accept({"confirm": False}),
            accept({}),
        ],
        ids=["decline", "cancel", "confirm-false", "accept-empty"],
    )
    async def test_anything_but_a_confirmation_keeps_the_notes(
        self, served: Served, era: Era, answer: types.ElicitResult
    ) -> None:
        """Declined, dismissed, or accepted without ``confirm``: nothing is deleted."""
        async with served.connect(era, answers=[answer]) as peer:
            await peer.add("keep me")
            result = await peer.call("notes__clear_notes")
            left = await peer.count()
        assert texts(result) == "Nothing was deleted."
        assert left == 1

    @ERAS
    async def test_a_client_that_cannot_be_asked_gets_an_error_result(
        self, served: Served, era: Era
    ) -> None:
        """A client without the elicitation capability: the tool's result is an error that
        says the client cannot be asked; nothing is deleted."""
        async with served.connect(era) as peer:
            await peer.add("keep me")
            result = await peer.call("notes__clear_notes")
            left = await peer.count()
        assert result.is_error
        assert texts(result) == "cannot ask the user: the client did not declare elicitation"
        assert left == 1

    @ERAS
    @pytest.mark.parametrize(
        ("content", "problem"),
        [
            ({"confirm": "yes"}, "the client answered 'confirm' with str, not boolean"),
            ({"confirm": 1}, "the client answered 'confirm' with int, not boolean"),
            (
                {"confirm": True, "also": "drop the database"},
                "the client answered a field the form does not have: 'also'",
            ),
        ],
        ids=["string", "number", "extra-field"],
    )
    async def test_an_answer_that_does_not_fit_the_form_deletes_nothing(
        self, served: Served, era: Era, content: dict[str, Any], problem: str
    ) -> None:
        """An accepted answer the form did not ask for: an error result naming the field,
        and every note kept."""
        async with served.connect(era, answers=[accept(content)]) as peer:
            await peer.add("keep me")
            result = await peer.call("notes__clear_notes")
            left = await peer.count()
        assert result.is_error
        assert texts(result) == f"cannot ask the user: {problem}"
        assert left == 1

    async def test_an_error_answer_is_an_error_result(self, served: Served) -> None:
        """A client that answers the form with a JSON-RPC error: the result says so."""
        refusal = types.ErrorData(code=-32042, message="the user is away")
        async with served.connect(answers=[refusal]) as peer:
            await peer.add("keep me")
            result = await peer.call("notes__clear_notes")
            left = await peer.count()
        assert result.is_error
        assert texts(result).startswith("cannot ask the user: the client answered with an error")
        assert "the user is away" in texts(result)
        assert left == 1

    @ERAS
    async def test_the_clients_model_answers_through_sampling(
        self, served: Served, era: Era
    ) -> None:
        """``ask.model`` sends ``sampling/createMessage`` (legacy) or an
        ``InputRequiredResult`` (2026): the model's text is the tool's result."""
        answer = types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="42"), model="test"
        )
        async with served.connect(era, samples=[answer]) as peer:
            result = await peer.call("probe__consult", {"question": "The answer?"})
            (asked,) = peer.prompts
        assert not result.is_error
        assert texts(result) == "42"
        (message,) = asked.messages
        assert isinstance(message.content, types.TextContent)
        assert (message.role, message.content.text) == ("user", "The answer?")
        assert (asked.max_tokens, asked.system_prompt) == (64, "Answer briefly.")

    @ERAS
    async def test_a_client_without_sampling_gets_an_error_result(
        self, served: Served, era: Era
    ) -> None:
        """No sampling capability declared: an error result that says so."""
        async with served.connect(era) as peer:
            result = await peer.call("probe__consult", {"question": "The answer?"})
        assert result.is_error
        assert texts(result) == "cannot ask the client's model: the client did not declare sampling"

    async def test_a_refused_sampling_is_an_error_result(self, served: Served) -> None:
        """The client answers the sampling request with an error: the result says so."""
        refusal = types.ErrorData(code=-1, message="the user said no")
        async with served.connect(samples=[refusal]) as peer:
            result = await peer.call("probe__consult", {"question": "The answer?"})
        assert result.is_error
        assert "the user said no" in texts(result)


# ---- attackers ------------------------------------------------------------------------


class TestAttackers:
    async def test_the_101st_subscription_is_refused_and_the_first_100_still_work(
        self, served: Served
    ) -> None:
        """One connection follows at most 100 URIs: the 101st is a clear -32602; the 100
        still get their updates, and one unsubscribed makes room for another."""
        uris = [ALL, *(f"notes://note/{number}" for number in range(1, MAX_SUBSCRIPTIONS))]
        async with served.connect() as peer:
            for uri in uris:
                await peer.subscribe(uri)
            await peer.subscribe(ALL)  # again: still one of the 100
            with pytest.raises(MCPError) as refused:
                await peer.subscribe("notes://note/1000")
            await peer.add("changed")
            heard = await peer.updates.wait(lambda got: set(got) == set(uris))
            await peer.unsubscribe("notes://note/99")
            await peer.subscribe(TICKS)
            await peer.tick()
            await peer.updates.wait(lambda got: TICKS in got)
        assert len(uris) == MAX_SUBSCRIPTIONS
        assert error_of(refused).code == INVALID_PARAMS
        assert error_of(refused).message == (
            "this client follows 100 resources already; unsubscribe from one before "
            "subscribing to another"
        )
        assert sorted(heard) == sorted(uris)

    async def test_a_client_that_does_not_read_gets_a_bounded_number_of_updates(self) -> None:
        """1 000 changes of a subscribed key while the client reads nothing: its stdout pipe
        fills (shrunk to one page here), the server's sender waits, and the changes meanwhile
        fold into one pending update. Once it reads, at most a pipe's worth came, not 1 000."""
        changes = 1000
        setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
        if setpipe is None:
            pytest.skip("shrinking a pipe needs Linux's F_SETPIPE_SZ")
        # Enough requests read ahead for all the changes to be made while nothing is read.
        in_flight = str(changes + 10)
        async with raw_server(*SERVED, "--max-in-flight", in_flight) as server:
            stdout = server.process.stdout
            assert stdout is not None
            capacity = fcntl.fcntl(stdout.fileno(), setpipe, 4096)
            await server.initialize()
            subscribed = await server.request("resources/subscribe", {"uri": TICKS})
            assert subscribed["result"] == {}
            ticks = b"".join(
                json.dumps(tools_call("probe__tick", {}, request_id=1000 + number)).encode() + b"\n"
                for number in range(changes)
            )
            async with trio.open_nursery() as nursery:
                assert server.process.stdin is not None
                nursery.start_soon(server.process.stdin.send_all, ticks)
                await calls_logged(server, "tools/call probe__tick ", changes)
            replies, updates = await drain(server, changes)
        update = {"jsonrpc": "2.0", "method": "notifications/resources/updated"}
        smallest = len(json.dumps({**update, "params": {"uri": TICKS}}, separators=(",", ":")))
        # What fit in the pipe, plus one held by the writer, one by the sender, one pending.
        bound = capacity // (smallest + 1) + 3
        assert replies == changes
        assert 1 <= updates <= bound < changes // 10

    async def test_a_log_flood_reaches_the_client_as_100_messages_and_a_count(
        self, served: Served
    ) -> None:
        """A tool logging 100 000 messages in a tight loop: the client gets at most
        ``LOG_QUEUE`` of them, in order, then a warning saying how many were dropped."""
        count = 100_000
        async with served.connect() as peer:
            result = await peer.call("probe__flood", {"count": count})
            logs = await peer.logs.wait(
                lambda got: "dropped" in str(got[-1].data) if got else False
            )
        sent = [str(message.data) for message in logs[:-1]]
        assert texts(result) == f"logged {count}"
        assert len(sent) <= LOG_QUEUE
        assert sent == [f"message {number}" for number in range(len(sent))]
        assert (logs[-1].level, str(logs[-1].data)) == (
            "warning",
            f"{count - len(sent)} log message(s) dropped",
        )

    async def test_a_megabyte_log_message_is_cut_to_the_bound(self, served: Served) -> None:
        """A message of 1 000 000 characters arrives cut to ``MAX_LOG_TEXT``, saying so."""
        async with served.connect() as peer:
            result = await peer.call("probe__shout", {"size": 1_000_000})
            (message,) = await peer.logs.wait(bool)
        text = str(message.data)
        assert texts(result) == "shouted"
        assert message.level == "warning"
        assert len(text) <= MAX_LOG_TEXT
        assert text.startswith("xxxx")
        assert text.endswith("… (1000000 characters, cut)")

    async def test_hostile_answers_to_a_form_cannot_crash_the_server(self) -> None:
        """Answers to ``clear_notes``' form written by hand: nested or unknown values, a
        result that is no object, an error, a huge answer, an answer to a question never
        asked. Each call ends with an error result (nothing deleted); the server serves on
        and a fair answer still works."""
        hostile: list[dict[str, Any]] = [
            {"result": {"action": "accept", "content": {"confirm": {"nested": [1, {"x": 2}]}}}},
            {"result": {"action": "obliterate"}},
            {"result": "yes"},
            {"result": None},
            {"error": {"code": -32000, "message": "no " * 1000}},
            {
                "result": {
                    "action": "accept",
                    "content": {"confirm": True, "x" * 500: "y" * 200_000},
                }
            },
            {"result": {"action": "accept", "content": {"confirm": [True]}}},
        ]
        async with raw_server(*SERVED) as server:
            await initialize_with(server, {"elicitation": {}})
            for text in ("one", "two"):
                added = await server.call("notes__add_note", {"text": text})
                assert not added["result"]["isError"], added
            outcomes = []
            for answer in hostile:
                outcomes.append(await clear_answering(server, [answer]))
            stray = {"jsonrpc": "2.0", "id": 987654, "result": {"action": "accept"}}
            # An answer to a question never asked is dropped; the real question waits on.
            kept = await clear_answering(server, [stray, {"result": {"action": "decline"}}])
            counted = await server.call("notes__count_notes", {})
            deleted = await clear_answering(
                server, [{"result": {"action": "accept", "content": CONFIRM}}]
            )
            assert server.process.returncode is None
        for outcome in outcomes:
            assert outcome["isError"] is True, outcome
            assert outcome["content"][0]["text"].startswith("cannot ask the user"), outcome
        texts = [outcome["content"][0]["text"] for outcome in outcomes]
        assert "malformed: content.confirm: " in texts[0]
        assert "malformed: action: " in texts[1]
        assert "result must be an object, got a JSON string" in texts[2]
        assert "result must be an object, got a JSON null" in texts[3]
        assert "answered with an error: no no" in texts[4]
        assert "a field the form does not have" in texts[5]
        assert "malformed: content.confirm: " in texts[6]
        assert all(len(text) < 400 for text in texts), texts  # what the client wrote is cut
        assert kept["content"][0]["text"] == "Nothing was deleted."
        assert counted["result"]["structuredContent"] == {"count": 2}
        assert deleted["content"][0]["text"] == "Deleted 2 notes."


async def calls_logged(server: RawServer, prefix: str, count: int) -> None:
    """Wait until the server's log has a line for `count` calls starting with `prefix` (each
    call is logged once it completes, before its reply is written)."""
    with trio.fail_after(120):
        # Another process's log file: there is no event to wait on, so poll.
        while server.log.text().count(prefix) < count:
            if server.process.returncode is not None:
                raise AssertionError(f"the server exited:\n{server.log.text()}")
            await trio.sleep(0.05)


async def drain(server: RawServer, replies: int) -> tuple[int, int]:
    """Read until `replies` replies came: how many, and how many resource updates with them."""
    got = updates = 0
    while got < replies:
        message = await server.receive()
        if "id" in message:
            assert message["result"]["isError"] is False, message
            got += 1
        elif message.get("method") == "notifications/resources/updated":
            updates += 1
    return got, updates


async def initialize_with(server: RawServer, capabilities: dict[str, Any]) -> None:
    """The handshake by hand, declaring `capabilities`."""
    response = await server.request(
        "initialize",
        {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": capabilities,
            "clientInfo": {"name": "hostile", "version": "0"},
        },
    )
    assert response["result"]["protocolVersion"] == LEGACY_VERSION, response
    await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


async def clear_answering(server: RawServer, answers: list[dict[str, Any]]) -> dict[str, Any]:
    """Call ``clear_notes``, answer its question with `answers` (each a JSON-RPC response,
    its ``id`` the question's unless it has one), and return the call's result."""
    server._next_id += 1
    call_id = server._next_id
    await server.send(tools_call("notes__clear_notes", {}, request_id=call_id))
    question = await server.receive()
    assert question.get("method") == "elicitation/create", question
    for answer in answers:
        await server.send({"jsonrpc": "2.0", "id": question["id"], **answer})
    while True:
        message = await server.receive()
        if message.get("id") == call_id:
            result: dict[str, Any] = message["result"]
            return result
