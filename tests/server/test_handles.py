"""Conversation handles: minted by the server, passed back by the model, bound to a tenant.

First the handle itself (`protocol.HandleKeys`: unguessable, tagged, tenant-bound, expiring,
rotatable) and the rules that apply it to a call (`protocol.split_call`); then real
``serve`` processes driven by the official SDK client over Streamable HTTP in both eras
and over stdio: state kept across calls and across clients, conversations apart, tenants
apart, bad handles refused with nothing created, resources and prompts reached through the
handle, keys shared by two servers and kept across a restart, and no handle in the logs.
Invariants 2 (no leakage), 11 (no shared fallback) and 12 (a handle names one conversation,
for its tenant alone) of docs/concepts/guarantees.md.
"""

from __future__ import annotations

import base64
import concurrent.futures
import re
import stat
import warnings
from typing import TYPE_CHECKING, Any

import pytest
import trio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from actors.server import ConfigurationError
from actors.server._handle_keys import _kept_key
from protocol import (
    HANDLE_ARGUMENT,
    HANDLE_REQUIRED,
    HANDLE_TOOL,
    Caller,
    ContextPolicy,
    HandleError,
    HandleKeys,
    HandleRequiredError,
    TenantError,
    handle_in_uri,
    redacted_uri,
    shown_handle,
    split_call,
)

from .._mcp_helpers import http_server, resource_text, stdio_session, texts

if TYPE_CHECKING:
    from pathlib import Path

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
NOTES = ("--module", "examples.notes:notes", "--state", "memory")
ALICE_TOKEN = "alice-token-0123456789"
BOB_TOKEN = "bob-token-0123456789ab"
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")


class Clock:
    """A clock a test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def keys(*secrets: bytes, clock: Clock | None = None, lifetime: float = 3600.0) -> HandleKeys:
    return HandleKeys(secrets or (KEY,), clock or Clock(), lifetime)


# ---- the handle ------------------------------------------------------------------------


class TestTheHandle:
    def test_a_handle_names_one_session_every_time_it_is_read(self) -> None:
        minted = keys()
        handle = minted.mint(None)
        assert HANDLE.fullmatch(handle)
        assert minted.session_for(handle, None) == minted.session_for(handle, None)
        assert minted.session_for(handle, None).startswith("c-")

    def test_handles_are_unguessable_and_never_collide(self) -> None:
        """128 random bits each: 2 000 mints, 2 000 handles and 2 000 sessions."""
        minted = keys()
        handles = [minted.mint(None) for _ in range(2000)]
        sessions = {minted.session_for(handle, None) for handle in handles}
        assert len(set(handles)) == len(sessions) == 2000

    def test_the_session_does_not_give_the_handle_away(self) -> None:
        """The session shows in logs and stores: the nonce it is made from is not in it."""
        minted = keys()
        handle = minted.mint(None, nonce=lambda size: b"\x07" * size)
        nonce = base64.urlsafe_b64encode(b"\x07" * 16).rstrip(b"=").decode()
        assert nonce[:12] not in minted.session_for(handle, None)

    def test_a_tenants_handle_is_another_tenants_unknown_handle(self) -> None:
        """Bound to the tenant that minted it; for another, or for a caller bound to none,
        the same answer as a forged handle: nothing tells that it exists."""
        minted = keys()
        alices = minted.mint("alice")
        assert minted.session_for(alices, "alice").startswith("alice/c-")
        forged = alices[:-4] + ("AAAA" if not alices.endswith("AAAA") else "BBBB")
        answers = set()
        for handle, tenant in ((alices, "bob"), (alices, None), (forged, "alice")):
            with pytest.raises(HandleError) as refused:
                minted.session_for(handle, tenant)
            answers.add(str(refused.value))
        assert len(answers) == 1
        assert HANDLE_TOOL in answers.pop()

    def test_a_handle_of_no_key_of_this_server_is_unknown(self) -> None:
        theirs = keys(OTHER_KEY).mint(None)
        with pytest.raises(HandleError, match="knows no conversation"):
            keys().session_for(theirs, None)

    def test_a_handle_expires_after_its_lifetime_and_may_not_come_from_the_future(self) -> None:
        clock = Clock()
        minted = keys(clock=clock, lifetime=3600.0)
        handle = minted.mint(None)
        clock.now += 3600.0
        assert minted.session_for(handle, None)
        clock.now += 1.0
        with pytest.raises(HandleError, match="expired"):
            minted.session_for(handle, None)
        clock.now -= 3601.0 + 301.0  # minted more than the allowed skew ahead of this clock
        with pytest.raises(HandleError, match="clocks disagree"):
            minted.session_for(handle, None)
        clock.now += 2.0  # within the skew
        assert minted.session_for(handle, None)

    @pytest.mark.parametrize(
        "bad",
        [
            "",
            "conv_",
            "nope",
            "conv_" + "A" * 55,
            "conv_" + "A" * 57,
            "conv_" + "+" * 56,  # the other base64 alphabet: one spelling only
            "conv_" + "A" * 55 + "=",
            "CONV_" + "A" * 56,
            " conv_" + "A" * 55,
            "conv_" + "A" * 56,  # well formed, version 0
        ],
    )
    def test_what_is_not_a_handle_is_refused_saying_so(self, bad: str) -> None:
        with pytest.raises(HandleError, match=HANDLE_TOOL):
            keys().session_for(bad, None)

    @pytest.mark.parametrize("bad", [None, 7, ["conv_"], {"handle": 1}])
    def test_a_handle_that_is_not_a_string_is_refused(self, bad: object) -> None:
        with pytest.raises(HandleError, match="must be a string"):
            keys().session_for(bad, None)

    def test_rotation_keeps_live_conversations_until_the_old_key_is_dropped(self) -> None:
        """The first key mints; every key verifies: put a new key first, drop the old one
        a handle lifetime later."""
        clock = Clock()
        before = keys(KEY, clock=clock).mint(None)
        rotated = keys(OTHER_KEY, KEY, clock=clock)
        after = rotated.mint(None)
        assert rotated.session_for(before, None) == keys(KEY, clock=clock).session_for(before, None)
        assert rotated.session_for(after, None)
        with pytest.raises(HandleError):
            keys(OTHER_KEY, clock=clock).session_for(before, None)
        with pytest.raises(HandleError):
            keys(KEY, clock=clock).session_for(after, None)  # minted with the new key

    def test_what_is_kept_of_checked_handles_is_bounded_and_holds_no_refusal(self) -> None:
        """Each handle's tag is checked once and kept, 4 096 at most: a client minting
        handles without end costs bounded memory; a forged handle is checked every time."""
        minted = keys()
        for _ in range(5000):
            minted.session_for(minted.mint(None), None)
        forged = minted.mint(None)[:-4] + "AAAA"
        for _ in range(2):
            with pytest.raises(HandleError):
                minted.session_for(forged, None)
        cache = minted._verified.cache_info()  # type: ignore[attr-defined]
        assert cache.currsize == cache.maxsize == 4096

    def test_a_short_key_is_refused(self) -> None:
        with pytest.raises(ValueError, match="at least 32"):
            keys(b"short")
        with pytest.raises(ValueError, match="at least one key"):
            HandleKeys((), Clock())

    def test_messages_show_a_prefix_of_a_handle_never_enough_to_use_it(self) -> None:
        handle = keys().mint(None)
        assert shown_handle(handle) == repr(handle[:9] + "…")
        with pytest.raises(HandleError) as refused:
            keys(OTHER_KEY).session_for(handle, None)
        assert handle[9:] not in str(refused.value)


# ---- a call's context, with handles --------------------------------------------------------


def split(
    arguments: dict[str, Any],
    caller: Caller,
    meta: dict[str, Any] | None = None,
    *,
    stateless: bool = False,
) -> tuple[str, dict[str, Any], str]:
    """(session, handler's arguments, session source) of a call with `arguments`."""
    params = {"name": "planning__list_goals", "arguments": arguments, "_meta": meta}
    context, clean, _, _, source = split_call(params, ContextPolicy(), caller, stateless=stateless)
    return context.session_id, clean, source


MINTED = keys()
ANONYMOUS = Caller("anonymous", handles=MINTED)
ALICE = Caller("alice-token", "alice", handles=MINTED)


class TestACallsConversation:
    def test_the_handle_names_the_session_and_is_never_the_handlers(self) -> None:
        handle = MINTED.mint(None)
        session, clean, source = split({HANDLE_ARGUMENT: handle, "goal": "x"}, ANONYMOUS)
        assert (session, clean, source) == (
            MINTED.session_for(handle, None),
            {"goal": "x"},
            "handle",
        )

    def test_a_session_the_host_names_wins_and_the_handle_is_dropped(self) -> None:
        """The host's _meta (and __sessionId) keep working exactly as without handles."""
        handle = MINTED.mint(None)
        named = split({HANDLE_ARGUMENT: handle}, ANONYMOUS, {"sessionId": "host-1"})
        assert named == ("host-1", {}, "meta")
        assert split({"__sessionId": "s", HANDLE_ARGUMENT: "junk"}, ANONYMOUS)[0] == "s"

    def test_the_handle_wins_over_the_transport_session(self) -> None:
        """A client opening a connection per call gets a new Mcp-Session-Id each time: the
        handle keeps the conversation."""
        handle = MINTED.mint(None)
        caller = Caller("anonymous", transport_session="http-7", handles=MINTED)
        assert split({HANDLE_ARGUMENT: handle}, caller)[2] == "handle"
        assert split({}, caller)[:1] == ("http-7",)  # the 2025 era, as today

    def test_a_stateful_call_without_either_is_told_to_start_a_conversation(self) -> None:
        """No handle, no session: refused, for a tenant too (no TENANT/default bucket)."""
        for caller in (ANONYMOUS, ALICE):
            with pytest.raises(HandleRequiredError) as refused:
                split({}, caller)
            assert str(refused.value) == HANDLE_REQUIRED
        assert split({HANDLE_ARGUMENT: None}, ALICE, stateless=True)[0] == "alice/default"

    def test_a_stateless_tool_needs_no_conversation(self) -> None:
        assert split({}, ANONYMOUS, stateless=True) == ("default", {}, "policy")

    def test_a_tenants_handle_stays_in_the_tenant(self) -> None:
        handle = MINTED.mint("alice")
        assert split({HANDLE_ARGUMENT: handle}, ALICE)[0].startswith("alice/c-")
        with pytest.raises(HandleError):
            split({HANDLE_ARGUMENT: handle}, Caller("bob-token", "bob", handles=MINTED))
        with pytest.raises(TenantError):  # a tenant still names only its own sessions
            split({HANDLE_ARGUMENT: handle}, ALICE, {"sessionId": "bob/1"})

    def test_a_confined_stdio_caller_may_pass_a_handle(self) -> None:
        """Over stdio the model's arguments may not name sessions; a handle is not a name
        it can make up (unguessable), so it may pass one."""
        stdio = Caller(
            "stdio",
            transport_session="own",
            sole_client=True,
            arguments_may_name_sessions=False,
            handles=MINTED,
        )
        assert split({HANDLE_ARGUMENT: MINTED.mint(None)}, stdio)[2] == "handle"

    def test_without_handles_the_argument_is_the_handlers(self) -> None:
        """Off, `conversation` is an ordinary argument (the tool's schema judges it)."""
        caller = Caller("anonymous", transport_session="t")
        assert split({HANDLE_ARGUMENT: "x"}, caller)[1] == {HANDLE_ARGUMENT: "x"}

    def test_a_uri_as_logged_carries_no_whole_handle(self) -> None:
        handle = MINTED.mint(None)
        shown = redacted_uri(f"notes://all?a=1&{HANDLE_ARGUMENT}={handle}")
        assert shown == f"notes://all?a=1&{HANDLE_ARGUMENT}={handle[:9]}…"
        assert redacted_uri("notes://all?a=1") == "notes://all?a=1"

    def test_a_uri_carries_its_handle_in_the_query(self) -> None:
        assert handle_in_uri("notes://all") == ("notes://all", None)
        assert handle_in_uri("notes://all?conversation=conv_x") == ("notes://all", "conv_x")
        assert handle_in_uri("x://a?b=1&conversation=h&c=2") == ("x://a?b=1&c=2", "h")
        with pytest.raises(HandleError, match="2 conversations"):
            handle_in_uri("x://a?conversation=h&conversation=i")


# ---- served ----------------------------------------------------------------------------


async def start(client: ClientSession) -> str:
    """Start a conversation; its handle."""
    result = await client.call_tool(HANDLE_TOOL, {})
    assert not result.is_error, texts(result)
    assert result.structured_content is not None
    handle = result.structured_content[HANDLE_ARGUMENT]
    assert isinstance(handle, str)
    assert handle in texts(result)
    return handle


async def goals(client: ClientSession, handle: str) -> str:
    return texts(await client.call_tool("planning__list_goals", {HANDLE_ARGUMENT: handle}))


async def create(client: ClientSession, handle: str, goal: str) -> types.CallToolResult:
    return await client.call_tool("planning__create_goal", {"goal": goal, HANDLE_ARGUMENT: handle})


ERAS = pytest.mark.parametrize("era", ["modern", "legacy"])


class TestOverHttp:
    @ERAS
    async def test_a_conversation_keeps_its_state_across_clients_and_stays_apart(
        self, era: Any
    ) -> None:
        """A new client per call (LangChain's default, a 2026-era client has no session at
        all): each call of one conversation sees the ones before; another sees none."""
        async with http_server("--state", "memory") as server:
            async with server.session(era=era) as client:
                first, second = await start(client), await start(client)
            async with server.session(era=era) as client:
                created = await create(client, first, "Learn Rust")
            async with server.session(era=era) as client:
                in_first, in_second = await goals(client, first), await goals(client, second)
        assert texts(created) == "Created goal g1: Learn Rust"
        assert in_first == "Goals (1):\n- g1: Learn Rust"
        assert in_second == "No goals yet."

    async def test_the_tools_take_the_handle_and_start_is_listed_first(self) -> None:
        async with http_server("--state", "memory") as server, server.session(era="modern") as c:
            tools = (await c.list_tools()).tools
        assert tools[0].name == HANDLE_TOOL
        listed = {tool.name: tool.input_schema for tool in tools[1:]}
        assert all(HANDLE_ARGUMENT in schema["required"] for schema in listed.values())
        assert listed["planning__create_goal"]["required"] == ["goal", HANDLE_ARGUMENT]

    async def test_a_bad_handle_is_a_tool_error_and_creates_nothing(self) -> None:
        """Forged, malformed or another tenant's: an isError result telling the model to
        start a conversation; nothing lands anywhere."""
        tokens = ("--token", f"{ALICE_TOKEN}=alice", "--token", f"{BOB_TOKEN}=bob")
        async with http_server("--state", "memory", *tokens) as server:
            async with server.session(ALICE_TOKEN, era="modern") as alice:
                alices = await start(alice)
            async with server.session(BOB_TOKEN, era="modern") as bob:
                forged = alices[:-4] + ("AAAA" if not alices.endswith("AAAA") else "BBBB")
                refusals = [await create(bob, handle, "stolen") for handle in (alices, forged)]
                malformed = await create(bob, "conv_nope", "stolen")
                bobs = await start(bob)
                nothing = await goals(bob, bobs)
            async with server.session(ALICE_TOKEN, era="modern") as alice:
                untouched = await goals(alice, alices)
            log = await server.final_log()
        assert all(result.is_error for result in (*refusals, malformed))
        assert texts(refusals[0]) == texts(refusals[1])  # another tenant's = forged
        assert HANDLE_TOOL in texts(refusals[0])
        assert HANDLE_TOOL in texts(malformed)
        assert (nothing, untouched) == ("No goals yet.", "No goals yet.")
        assert "outcome=bad_handle" in log
        for handle in (alices, bobs):
            assert handle not in log
            assert handle[9:30] not in log

    async def test_a_session_named_by_the_host_works_beside_handles(self) -> None:
        async with http_server("--state", "memory") as server:
            async with server.session(era="modern") as client:
                handle = await start(client)
                meta = {"sessionId": "host-named"}
                await client.call_tool("planning__create_goal", {"goal": "hosted"}, meta=meta)
                hosted = texts(await client.call_tool("planning__list_goals", {}, meta=meta))
                in_handle = await goals(client, handle)
        assert hosted == "Goals (1):\n- g1: hosted"
        assert in_handle == "No goals yet."

    async def test_resources_and_prompts_reach_the_conversation_through_the_handle(self) -> None:
        """For clients that cannot pass _meta (pydantic-ai's, openai-agents' read_resource
        and get_prompt): the handle rides in the URI's query and in the prompt's arguments."""
        async with http_server(*NOTES) as server:
            async with server.session(era="modern") as client:
                mine, theirs = await start(client), await start(client)
                added = {"text": "my note", HANDLE_ARGUMENT: mine}
                await client.call_tool("notes__add_note", added)
                templates = (await client.list_resource_templates()).resource_templates
                read = await client.read_resource(f"notes://all?{HANDLE_ARGUMENT}={mine}")
                other = await client.read_resource(f"notes://all?{HANDLE_ARGUMENT}={theirs}")
                one = await client.read_resource(f"notes://note/1?{HANDLE_ARGUMENT}={mine}")
                prompts = (await client.list_prompts()).prompts
                prompt = await client.get_prompt("notes__review", {HANDLE_ARGUMENT: mine})
            log = await server.final_log()
        assert "resources/read notes://all" in log
        for handle in (mine, theirs):
            assert handle[9:] not in log
        uris = {template.uri_template for template in templates}
        assert {"notes://all{?conversation}", "notes://note/{number}{?conversation}"} <= uris
        assert resource_text(read) == "1. my note"
        assert resource_text(other) == ""
        assert resource_text(one) == "my note"
        (review,) = prompts
        assert review.arguments is not None
        assert (HANDLE_ARGUMENT, True) in {(a.name, a.required) for a in review.arguments}
        assert "my note" in str(prompt.messages[0].content)

    async def test_a_subscription_follows_the_handles_conversation(self) -> None:
        """Subscribed to one resource for two conversations: a change in each is told with
        that conversation's URI, and only then."""
        updates_in, updates = trio.open_memory_channel[str](16)

        async def heard(message: object) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                updates_in.send_nowait(str(message.params.uri))

        async with http_server(*NOTES) as server:
            async with (
                create_mcp_http_client() as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                ClientSession(read, write, message_handler=heard) as client,
            ):
                await client.initialize()
                mine, theirs = await start(client), await start(client)
                uris = [f"notes://all?{HANDLE_ARGUMENT}={handle}" for handle in (mine, theirs)]
                for uri in uris:
                    with warnings.catch_warnings():  # a 2025-era method, removed in 2026
                        warnings.simplefilter("ignore", MCPDeprecationWarning)
                        await client.subscribe_resource(uri)
                heard_uris = []
                for handle in (mine, theirs):
                    await client.call_tool(
                        "notes__add_note", {"text": "x", HANDLE_ARGUMENT: handle}
                    )
                    with trio.fail_after(30):
                        heard_uris.append(await updates.receive())
        assert heard_uris == uris

    async def test_a_completion_reads_the_handle_among_the_filled_arguments(self) -> None:
        async with http_server(*NOTES) as server, server.session(era="modern") as client:
            mine = await start(client)
            await client.call_tool("notes__add_note", {"text": "x", HANDLE_ARGUMENT: mine})
            template = types.ResourceTemplateReference(uri="notes://note/{number}{?conversation}")
            completed = await client.complete(
                template, {"name": "number", "value": ""}, {HANDLE_ARGUMENT: mine}
            )
        assert completed.completion.values == ["1"]

    async def test_two_servers_with_one_key_file_read_each_others_handles(
        self, tmp_path: Path
    ) -> None:
        """Any front or worker given the keys verifies a handle: no shared table."""
        key_file = tmp_path / "keys"
        key_file.write_text("# the first signs\n" + "s" * 40 + "\n")
        state = f"sqlite:///{tmp_path / 'shared.db'}"
        served = ("--state", state, "--handle-key-file", str(key_file))
        async with http_server(*served) as one, http_server(*served) as two:
            async with one.session(era="modern") as client:
                handle = await start(client)
                await create(client, handle, "on one")
            async with two.session(era="modern") as client:
                on_two = await goals(client, handle)
        assert on_two == "Goals (1):\n- g1: on one"

    async def test_the_default_key_is_kept_beside_the_state_and_outlives_a_restart(
        self, tmp_path: Path
    ) -> None:
        state = tmp_path / "state.db"
        async with http_server("--state", f"sqlite:///{state}") as server:
            async with server.session(era="modern") as client:
                handle = await start(client)
                await create(client, handle, "kept")
        key_file = tmp_path / "state.db.handle-key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        async with http_server("--state", f"sqlite:///{state}") as server:
            async with server.session(era="modern") as client:
                after = await goals(client, handle)
        assert after == "Goals (1):\n- g1: kept"

    async def test_without_handles_nothing_is_listed_and_a_handle_is_an_argument(self) -> None:
        async with http_server("--state", "memory", "--no-handles") as server:
            async with server.session(era="modern") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                with pytest.raises(MCPError, match="unknown tool 'conversation__start'"):
                    await client.call_tool(HANDLE_TOOL, {})
        assert HANDLE_TOOL not in names


class TestTheKeptKey:
    def test_processes_starting_at_once_keep_one_key(self, tmp_path: Path) -> None:
        """A stateless gateway starts a server per request: on a fresh state folder they
        all make the key file at once, and all must end with the one key it holds."""
        path = tmp_path / "state.db.handle-key"
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            made = set(pool.map(lambda _: _kept_key(path), range(64)))
        assert made == {path.read_bytes().strip()}
        assert [child.name for child in tmp_path.iterdir()] == [path.name]

    def test_a_link_in_the_keys_place_is_refused(self, tmp_path: Path) -> None:
        """Whoever may write the state's folder must not point the key at another secret."""
        secret = tmp_path / "id_ed25519"
        secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- not a handle key\n")
        secret.chmod(0o600)
        path = tmp_path / "state.db.handle-key"
        path.symlink_to(secret)
        with pytest.raises(ConfigurationError, match="cannot read the handle key file"):
            _kept_key(path)
        path.unlink()
        path.symlink_to(tmp_path / "nowhere")
        with pytest.raises(ConfigurationError, match="cannot read the handle key file"):
            _kept_key(path)

    def test_a_key_file_others_may_read_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "state.db.handle-key"
        _kept_key(path)
        path.chmod(0o644)
        with pytest.raises(ConfigurationError, match="may be read by others"):
            _kept_key(path)


class TestInMemory:
    async def test_a_module_author_tests_handles_with_the_testing_client(self) -> None:
        """`actors.testing.connect(..., handles=...)`: the SDK's client in memory, served
        with handles, as `serve` serves them; also with a caller of the test's own."""
        from actors.modules import planning
        from actors.testing import connect

        async with connect(planning, handles=keys()) as client:
            handle = await start(client.session)
            await create(client.session, handle, "in memory")
            listed = await goals(client.session, handle)
        tenant = Caller("t", "acme", "own")
        async with connect(planning, handles=keys(), caller=tenant) as client:
            theirs = await start(client.session)
            created = await create(client.session, theirs, "acme's")
        assert listed == "Goals (1):\n- g1: in memory"
        assert texts(created) == "Created goal g1: acme's"

    async def test_a_template_variable_named_like_the_handle_is_refused(self) -> None:
        from actors import ToolModule

        pages = ToolModule("pages", state=lambda _context: {})

        @pages.resource("pages://{conversation}/x")
        def page(state: dict[str, str], conversation: str) -> str:
            """A page."""
            return conversation

        with pytest.raises(ConfigurationError, match="variable of a resource template"):
            async with connect_with(pages, Caller("anonymous")):
                pass

    async def test_a_stateless_tool_takes_no_handle_and_needs_no_session(self) -> None:
        """`@module.tool(stateless=True)`: listed without the handle, and called without
        one by a client that has no session of its own (a 2026-era HTTP client)."""
        from actors import ToolModule

        clock = ToolModule("clock", state=lambda _context: {})

        @clock.tool(stateless=True)
        def now(state: dict[str, str]) -> str:
            """The time."""
            return "noon"

        @clock.tool
        def remember(state: dict[str, str], text: str) -> str:
            """Keep a text."""
            state["text"] = text
            return text

        sessionless = Caller("anonymous")
        async with connect_with(clock, sessionless) as client:
            schemas = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
            told = await client.call_tool("clock__now", {})
            refused = await client.call_tool("clock__remember", {"text": "x"})
        assert HANDLE_ARGUMENT not in schemas["clock__now"].get("properties", {})
        assert HANDLE_ARGUMENT in schemas["clock__remember"]["required"]
        assert texts(told) == "noon"
        assert texts(refused) == HANDLE_REQUIRED


def connect_with(module: Any, caller: Caller) -> Any:
    """The in-memory SDK client of `module`, as `caller`, with handles."""
    from actors.testing import connect

    return connect(module, handles=keys(), caller=caller)


class TestOverStdio:
    async def test_handles_keep_a_conversation_across_connections(self) -> None:
        """A host that starts a server per agent run (pydantic-ai's MCPServerStdio without
        ``async with agent``): the handle outlives the connection, the state is the store's."""
        with_handles = ("--handles",)
        async with stdio_session(*with_handles) as client:
            handle = await start(client)
            await create(client, handle, "Learn Rust")
            own = texts(await client.call_tool("planning__list_goals", {}))
        async with stdio_session(*with_handles) as client:
            later = await goals(client, handle)
        assert own == "No goals yet."  # the connection's own session is another one
        assert later == "Goals (1):\n- g1: Learn Rust"

    async def test_stdio_serves_no_handles_unless_asked(self) -> None:
        async with stdio_session("--state", "memory") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
        assert HANDLE_TOOL not in names
