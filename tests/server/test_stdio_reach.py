"""The model's reach over stdio: what a model writes cannot take its connection elsewhere.

Over stdio the host names a call's context in ``_meta``; the model writes the
arguments, and may write ``__sessionId`` among them. So a stdio connection's
arguments may name only its own session (invariant 11: one connection's state
never turns up in another's), unless the operator lets them
(``--allow-session-naming``); the host's ``_meta`` may name any, as before. And a
desktop stdio server never opens an HTTP server's default state file, where
tenants keep their sessions (invariant 2: a tenant's state is reached only with
its token). Real ``mcp-actors serve`` processes, driven by the official SDK
client, on one state directory (conftest gives each test its own), as one
user's desktop host and HTTP server would run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import trio

from protocol import Caller, ContextError, parse_call

from .._mcp_helpers import SERVE, http_server, raw_server, stdio_session, texts

SECRET = "the desktop session's private notes"
ACME_TOKEN = "acme-token-of-sixteen-chars"
ACME_PLAN = "acme's quarterly plan"
CONFINED = re.compile(
    r"this connection is confined to its own session 'connection-[\w-]+': the call's "
    r"arguments, which the model writes, may not name session 'desktop'"
)


def _state_folder() -> Path:
    return Path(os.environ["XDG_STATE_HOME"], "mcp-actors")


async def _desktop_with_a_secret() -> None:
    """A desktop host's server, ``--session desktop``, stores `SECRET` there and exits."""
    async with stdio_session("--session", "desktop") as desktop:
        created = await desktop.call_tool("planning__create_goal", {"goal": SECRET})
    assert not created.is_error, texts(created)


async def _desktop_goals() -> str:
    async with stdio_session("--session", "desktop") as desktop:
        return texts(await desktop.call_tool("planning__list_goals", {}))


class TestArgumentsStayInTheConnectionsSession:
    async def test_a_models_session_argument_is_refused_and_changes_nothing(self) -> None:
        """Invariant 11: another stdio connection's model writes ``__sessionId: "desktop"``
        (a read, a write, and the snake_case spelling): each is refused, saying the
        connection is confined and how the operator opts in, and the desktop's goals are
        as they were. Its host's ``_meta`` still names the session (as it always could)."""
        await _desktop_with_a_secret()
        async with stdio_session() as private:
            read = await private.call_tool("planning__list_goals", {"__sessionId": "desktop"})
            write = await private.call_tool(
                "planning__create_goal", {"goal": "planted", "__session_id": "desktop"}
            )
            own = await private.call_tool("planning__list_goals", {})
            hosts = await private.call_tool(
                "planning__list_goals", {}, meta={"sessionId": "desktop"}
            )
        for refused in (read, write):
            assert refused.is_error
            assert CONFINED.search(texts(refused)), texts(refused)
            assert "_meta.sessionId" in texts(refused)
            assert "--allow-session-naming" in texts(refused)
        assert SECRET not in texts(read)
        assert texts(own) == "No goals yet."
        assert SECRET in texts(hosts)
        goals = await _desktop_goals()
        assert SECRET in goals
        assert "planted" not in goals

    async def test_arguments_may_name_the_connections_own_session(self) -> None:
        """``--session work``: arguments naming ``work`` are the connection's own calls, and
        ``__assistantId`` still picks an assistant within it; ``other`` is refused."""
        async with stdio_session("--session", "work") as work:
            mine = {"__sessionId": "work", "__assistantId": "a1"}
            created = await work.call_tool("planning__create_goal", {"goal": "g", **mine})
            listed = await work.call_tool("planning__list_goals", mine)
            elsewhere = await work.call_tool("planning__list_goals", {"__sessionId": "other"})
            hosts = await work.call_tool(
                "planning__list_goals", {}, meta={"sessionId": "work", "assistantId": "a1"}
            )
        assert not created.is_error, texts(created)
        assert "g1: g" in texts(listed)
        assert "g1: g" in texts(hosts)
        assert elsewhere.is_error
        assert "confined to its own session 'work'" in texts(elsewhere)

    async def test_under_require_session_only_the_host_names_sessions(self) -> None:
        """``--require-session`` leaves the connection no session of its own: every session
        comes from the host's ``_meta``; arguments naming one are refused."""
        async with stdio_session("--require-session") as strict:
            refused = await strict.call_tool(
                "planning__create_goal", {"goal": "g", "__sessionId": "s"}
            )
            created = await strict.call_tool(
                "planning__create_goal", {"goal": "g"}, meta={"sessionId": "s"}
            )
            listed = await strict.call_tool("planning__list_goals", {}, meta={"sessionId": "s"})
        assert refused.is_error
        assert texts(refused).startswith(
            "this connection has no session of its own (--require-session): the call's "
            "arguments, which the model writes, may not name session 's'"
        )
        assert not created.is_error, texts(created)
        assert texts(listed) == "Goals (1):\n- g1: g"

    async def test_the_refusal_is_logged_as_a_warning_naming_the_session(self) -> None:
        """The operator sees which session the model reached for: ``outside_connection``."""
        async with raw_server() as server:
            await server.initialize()
            reply = await server.call("planning__list_goals", {"__sessionId": "desktop"})
            await server.close_stdin()
            assert await server.wait() == 0
            log = server.log.text()
        assert reply["result"]["isError"] is True
        (line,) = [line for line in log.splitlines() if "outcome=outside_connection" in line]
        assert "WARNING" in line
        assert "session='desktop'" in line


class TestTheOperatorOptsIn:
    async def test_with_allow_session_naming_arguments_name_any_session(self) -> None:
        """A host that injects the context into the arguments itself: the operator says so."""
        await _desktop_with_a_secret()
        async with stdio_session("--allow-session-naming") as named:
            read = await named.call_tool("planning__list_goals", {"__sessionId": "desktop"})
            write = await named.call_tool(
                "planning__create_goal", {"goal": "added", "__sessionId": "desktop"}
            )
        assert not read.is_error, texts(read)
        assert SECRET in texts(read)
        assert not write.is_error, texts(write)
        assert "added" in await _desktop_goals()

    async def test_the_option_is_refused_over_http(self) -> None:
        """Over HTTP the token bounds what arguments reach; the stdio option means nothing."""
        result = await trio.run_process(
            [*SERVE, "--http", "127.0.0.1:0", "--allow-session-naming"],
            capture_stderr=True,
            check=False,
            stdin=b"",
        )
        assert result.returncode == 2
        assert b"--allow-session-naming applies to stdio only" in result.stderr


class TestTheDesktopNeverOpensTenantsState:
    async def test_a_stdio_server_cannot_reach_an_http_tenants_default_state(self) -> None:
        """Invariant 2: one user's HTTP server (tenant acme) and desktop stdio server, both on
        the default state, at once. The stdio side names ``acme/default`` in its host's
        ``_meta`` and, with ``--allow-session-naming``, in its arguments: it sees none of
        acme's goals, and what it writes there never shows up for acme's token."""
        # Without handles, so that acme's 2026-era calls land in its bucket, acme/default.
        async with http_server("--token", f"{ACME_TOKEN}=acme", "--no-handles") as server:
            async with server.session(ACME_TOKEN, era="modern") as acme:
                created = await acme.call_tool("planning__create_goal", {"goal": ACME_PLAN})
                assert not created.is_error, texts(created)
                for flags in ((), ("--allow-session-naming",)):
                    async with stdio_session(*flags) as desktop:
                        hosts = await desktop.call_tool(
                            "planning__list_goals", {}, meta={"sessionId": "acme/default"}
                        )
                        models = await desktop.call_tool(
                            "planning__create_goal",
                            {"goal": "planted", "__sessionId": "acme/default"},
                        )
                        assert texts(hosts) == "No goals yet."
                        assert models.is_error == (not flags), texts(models)
                seen = texts(await acme.call_tool("planning__list_goals", {}))
            log = server.log.text()
        assert ACME_PLAN in seen
        assert "planted" not in seen
        assert f"state: sqlite:///{_state_folder() / 'http-state.db'}" in log
        assert sorted(path.name for path in _state_folder().glob("*.db")) == [
            "http-state.db",
            "state.db",
        ]


class TestTheChannelIsReported:
    """The parse says where a session came from, on every transport (and in process)."""

    @pytest.mark.parametrize(
        ("params", "source"),
        [
            ({"name": "t", "_meta": {"sessionId": "s"}}, "meta"),
            ({"name": "t", "arguments": {"__sessionId": "s"}}, "arguments"),
            # Both, alike: the host vouched for it.
            ({"name": "t", "arguments": {"__sessionId": "s"}, "_meta": {"sessionId": "s"}}, "meta"),
            ({"name": "t"}, "policy"),
        ],
        ids=["meta", "arguments", "both", "none"],
    )
    def test_parse_call_reports_the_sessions_source(
        self, params: dict[str, object], source: str
    ) -> None:
        """Without a caller (the embedding program, trusted): every source is taken."""
        parsed = parse_call(params)
        assert (parsed.context.session_id, parsed.session_source) == (
            "default" if source == "policy" else "s",
            source,
        )

    def test_a_confined_caller_refuses_arguments_but_not_meta(self) -> None:
        """The rule is the caller's: the host's _meta may name another session, the
        arguments only the caller's own; a trusting caller (HTTP) takes both."""
        confined = Caller("stdio", transport_session="own", arguments_may_name_sessions=False)
        own = parse_call({"name": "t", "arguments": {"__sessionId": "own"}}, caller=confined)
        hosts = parse_call({"name": "t", "_meta": {"sessionId": "other"}}, caller=confined)
        default = parse_call({"name": "t"}, caller=confined)
        with pytest.raises(ContextError, match="confined to its own session 'own'"):
            parse_call({"name": "t", "arguments": {"__sessionId": "other"}}, caller=confined)
        trusting = parse_call(
            {"name": "t", "arguments": {"__sessionId": "other"}}, caller=Caller("anonymous")
        )
        assert (own.context.session_id, own.session_source) == ("own", "arguments")
        assert (hosts.context.session_id, hosts.session_source) == ("other", "meta")
        assert (default.context.session_id, default.session_source) == ("own", "caller")
        assert (trusting.context.session_id, trusting.session_source) == ("other", "arguments")

    def test_a_tenant_callers_arguments_stay_in_its_tenant(self) -> None:
        """Over HTTP the arguments may name sessions, within the token's tenant only."""
        alpha = Caller("token-1", tenant="alpha")
        inside = parse_call({"name": "t", "arguments": {"__sessionId": "alpha/s"}}, caller=alpha)
        with pytest.raises(ContextError, match="outside tenant 'alpha'"):
            parse_call({"name": "t", "arguments": {"__sessionId": "beta/s"}}, caller=alpha)
        assert inside.context.session_id == "alpha/s"
