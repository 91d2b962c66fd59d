"""`prepare_call`: one place that resolves, parses, judges by the caller, binds and routes.

The MCP adapter, `Runtime.call`, the hosts and the benchmarks' stand-ins all
prepare calls here, so these rules hold for every way in.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio
import trio.testing

from actors import (
    ArgumentsError,
    RuntimeConfig,
    ToolModule,
    UnknownToolError,
    open_asyncio_runtime,
    open_blocking_runtime,
    open_runtime,
)
from actors.lowlevel import Registry, prepare_call
from actors.modules import planning
from protocol import (
    Caller,
    ContextError,
    ContextPolicy,
    NoSessionError,
    Scope,
    TenantError,
    ToolContext,
    actor_key,
)

STRICT = ContextPolicy(require_session=True)
ALPHA = Caller("token-1", tenant="alpha")
ANONYMOUS = Caller("anonymous")  # a shared HTTP transport: no Mcp-Session-Id, no tenant
REGISTRY = Registry([planning])


def create(goal: Any = "g", **context: Any) -> dict[str, Any]:
    return {"name": "planning__create_goal", "arguments": {"goal": goal}, "_meta": context}


class TestOrder:
    @pytest.mark.parametrize(
        "params",
        [
            {"name": "nope", "arguments": {"__sessionId": 7}},  # bad context too
            {"name": "nope", "arguments": {"goal": 1}, "_meta": {"sessionId": "beta/s"}},
        ],
    )
    def test_an_unknown_tool_is_refused_first(self, params: dict[str, Any]) -> None:
        """Whatever else is wrong with the call, an unknown name is the error."""
        with pytest.raises(UnknownToolError, match="unknown tool 'nope'"):
            prepare_call(REGISTRY, params, caller=ALPHA)

    def test_the_context_is_judged_before_the_arguments(self) -> None:
        with pytest.raises(TenantError):
            prepare_call(REGISTRY, create(goal=123, sessionId="beta/s"), caller=ALPHA)
        with pytest.raises(ArgumentsError):
            prepare_call(REGISTRY, create(goal=123, sessionId="alpha/s"), caller=ALPHA)

    def test_the_callers_mapping_is_left_alone(self) -> None:
        params = {"name": "create_goal", "arguments": {"goal": "g", "__sessionId": "s"}}
        snapshot = {**params, "arguments": dict(params["arguments"])}
        prepare_call(REGISTRY, params)
        assert params == snapshot


class TestCallerRules:
    def test_a_tenant_may_name_its_own_sessions_only(self) -> None:
        assert prepare_call(REGISTRY, create(sessionId="alpha"), caller=ALPHA)
        assert prepare_call(REGISTRY, create(sessionId="alpha/x"), caller=ALPHA)
        for outside in ("beta", "alphabet/x", "alpha\u200b/x", "/alpha"):
            with pytest.raises(TenantError, match="outside tenant 'alpha'"):
                prepare_call(REGISTRY, create(sessionId=outside), caller=ALPHA)

    def test_default_sessions(self) -> None:
        """Transport session, then the tenant's bucket, then the policy for a sole client."""
        with_transport = Caller("anonymous", transport_session="abc")
        tenant_transport = Caller("t", tenant="alpha", transport_session="abc")
        sole = Caller("stdio", sole_client=True)
        cases = [(with_transport, "abc"), (tenant_transport, "alpha/abc"), (ALPHA, "alpha/default")]
        for caller, expected in cases:
            call = prepare_call(REGISTRY, create(), caller=caller)
            assert (call.context.session_id, call.session_defaulted) == (expected, False)
        call = prepare_call(REGISTRY, create(), caller=sole)
        assert (call.context.session_id, call.session_defaulted) == ("default", True)

    def test_a_shared_transport_must_name_a_session(self) -> None:
        with pytest.raises(NoSessionError, match="names no session"):
            prepare_call(REGISTRY, create(), caller=ANONYMOUS)

    def test_the_strict_policy_applies_after_the_callers_default(self) -> None:
        sole = Caller("stdio", sole_client=True)
        with pytest.raises(ContextError, match="a session id is required"):
            prepare_call(REGISTRY, create(), STRICT, caller=sole)
        with pytest.raises(ContextError, match="a session id is required"):
            prepare_call(REGISTRY, create(), STRICT, caller=ALPHA)
        transport = Caller("anonymous", transport_session="abc")
        assert prepare_call(REGISTRY, create(), STRICT, caller=transport).context.session_id == (
            "abc"
        )


class TestRoute:
    @pytest.mark.parametrize("scope", list(Scope))
    def test_the_route_is_the_actor_key(self, scope: Scope) -> None:
        """Equal routes exactly when the actor keys are equal, for every scope."""
        module: ToolModule[list[str]] = ToolModule("box", scope=scope, state=lambda _key: [])

        @module.tool()
        def put(state: list[str], value: str) -> str:
            """Put a value."""
            state.append(value)
            return value

        registry = Registry([module])
        contexts = [
            ToolContext("s"),
            ToolContext("s", "a"),
            ToolContext("s", "a", "t"),
            ToolContext("s", "b", "t"),
            ToolContext("s2", "a", "t"),
        ]
        routes = {}
        for context in contexts:
            meta = {
                "sessionId": context.session_id,
                **({"assistantId": context.assistant_id} if context.assistant_id else {}),
                **({"threadId": context.thread_id} if context.thread_id else {}),
            }
            params = {"name": "box__put", "arguments": {"value": "v"}, "_meta": meta}
            routes[context] = prepare_call(registry, params).route
        for first in contexts:
            for second in contexts:
                same_key = actor_key("box", scope, first) == actor_key("box", scope, second)
                assert (routes[first] == routes[second]) == same_key


class TestRuntimeCaller:
    async def test_runtime_call_applies_the_callers_rules(self) -> None:
        """An embedder passing a tenant's Caller gets the same refusals as the MCP server."""
        async with open_runtime([planning]) as runtime:
            with pytest.raises(TenantError):
                await runtime.call(create(sessionId="beta/s"), caller=ALPHA)
            await runtime.call(create(goal="mine"), caller=ALPHA)
            listed = await runtime.call_tool(
                "planning__list_goals", meta={"sessionId": "alpha/default"}
            )
            assert runtime.statistics().calls == 2  # the refused call never reached an actor
        assert "mine" in listed.first_text

    async def test_prepare_then_run_is_call(self) -> None:
        async with open_runtime([planning]) as runtime:
            prepared = runtime.prepare(create(goal="two-step", sessionId="s"))
            assert prepared.route == ("planning", "s", None, None)
            result = await runtime.run(prepared)
        assert not result.is_error
        assert "two-step" in result.first_text


class TestHostsTakeACaller:
    def test_the_asyncio_handle(self) -> None:
        async def scenario() -> str:
            async with open_asyncio_runtime([planning]) as runtime:
                with pytest.raises(TenantError):
                    await runtime.call(create(sessionId="beta/s"), caller=ALPHA)
                await runtime.call_tool("planning__create_goal", {"goal": "mine"}, caller=ALPHA)
                listed = await runtime.call_tool("list_goals", meta={"sessionId": "alpha/default"})
            return listed.first_text

        assert "mine" in asyncio.run(scenario())

    def test_the_blocking_handle(self) -> None:
        with open_blocking_runtime([planning]) as runtime:
            with pytest.raises(TenantError):
                runtime.call(create(sessionId="beta/s"), caller=ALPHA)
            runtime.call_tool("planning__create_goal", {"goal": "mine"}, caller=ALPHA)
            listed = runtime.call_tool("list_goals", meta={"sessionId": "alpha/default"})
        assert "mine" in listed.first_text


class TestSubmitNowait:
    """`Runtime.submit_nowait`: a call accepted without a waiting task (the asyncio host's path)."""

    @staticmethod
    def held_module(release: trio.Event, log: list[str]) -> ToolModule[list[str]]:
        module: ToolModule[list[str]] = ToolModule("held", lambda _key: log)

        @module.tool()
        async def put(state: list[str], value: str) -> str:
            """Wait for the release, then record `value`."""
            await release.wait()
            state.append(value)
            return value

        return module

    async def test_replies_arrive_through_the_callback_in_order(self) -> None:
        release, log = trio.Event(), []
        replies: list[object] = []
        async with open_runtime([self.held_module(release, log)]) as runtime:
            for value in "abc":
                call = runtime.prepare({"name": "put", "arguments": {"value": value}})
                assert runtime.submit_nowait(call, replies.append) is not None
            release.set()
            await trio.testing.wait_all_tasks_blocked()
        assert log == ["a", "b", "c"]
        assert [reply.first_text for reply in replies] == ["a", "b", "c"]  # type: ignore[attr-defined]

    async def test_a_full_mailbox_accepts_nothing(self) -> None:
        release, log = trio.Event(), []
        config = RuntimeConfig(mailbox_size=1)
        async with open_runtime([self.held_module(release, log)], config) as runtime:
            calls = [runtime.prepare({"name": "put", "arguments": {"value": v}}) for v in "abc"]
            assert runtime.submit_nowait(calls[0], lambda _reply: None) is not None
            await trio.testing.wait_all_tasks_blocked()  # "a" runs, holding the key
            assert runtime.submit_nowait(calls[1], lambda _reply: None) is not None
            assert runtime.submit_nowait(calls[2], lambda _reply: None) is None
            assert runtime.actors()[0].pending == 2
            release.set()
        assert log == ["a", "b"]

    async def test_a_withdrawn_call_never_runs(self) -> None:
        release, log = trio.Event(), []
        replies: list[object] = []
        async with open_runtime([self.held_module(release, log)]) as runtime:
            first = runtime.prepare({"name": "put", "arguments": {"value": "kept"}})
            second = runtime.prepare({"name": "put", "arguments": {"value": "withdrawn"}})
            assert runtime.submit_nowait(first, replies.append) is not None
            withdraw = runtime.submit_nowait(second, replies.append)
            assert withdraw is not None
            await trio.testing.wait_all_tasks_blocked()
            withdraw()
            release.set()
            await trio.testing.wait_all_tasks_blocked()
            assert runtime.actors()[0].pending == 0
        assert log == ["kept"]
        assert len(replies) == 1
