"""A tool that asks a 2026-era client something: the call is parked across requests.

From 2026-07-28 a server cannot send its client a request during a call: the
call's request is answered with an ``InputRequiredResult`` (the question and a
``requestState``) and the client calls again with the answer. The runtime
keeps the handler waiting where it asked, in its key's turn
(`actors.server.mcp._parked_calls`). These tests drive it with the official SDK
client in memory (its default mode speaks 2026-07-28), through its automatic
retries and, where a test needs to play the client's part wrongly, round by
round through its session.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from mcp import types
from mcp.shared.exceptions import MCPError

from actors import Ask, Log, RuntimeConfig, ToolModule, open_runtime
from actors.server.mcp import _parked_calls as _parking
from actors.testing import connect
from protocol import Caller, Scope

from .._mcp_helpers import text_of

FORM = {"type": "object", "properties": {"name": {"type": "string"}}}


@attrs.define
class Guests:
    names: list[str] = attrs.field(factory=list)


guests: ToolModule[Guests] = ToolModule("guests", lambda _context: Guests(), scope=Scope.SESSION)


@guests.tool
async def invite(state: Guests, ask: Ask) -> str:
    """Ask for a guest's name, then for a second one; keep both."""
    for _ in range(2):
        answer = await ask.user("Who comes?", FORM)
        if not answer.accepted or answer.content is None:
            return f"stopped after {state.names}"
        state.names.append(str(answer.content["name"]))
    return f"invited {state.names}"


@guests.tool(read_only=True)
def listing(state: Guests) -> str:
    """Who is invited."""
    return ", ".join(state.names) or "nobody"


async def never_called(_context: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
    """Declares the elicitation capability for a test that plays the rounds itself."""
    raise AssertionError("the test answers the questions itself")


def answering(*names: str | None) -> Any:
    """An elicitation callback giving `names` in turn (None: declines), recording each question."""
    given = iter(names)
    asked: list[str] = []

    async def answer(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        name = next(given)
        if name is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"name": name})

    answer.asked = asked  # type: ignore[attr-defined]
    return answer


async def test_a_tool_asks_twice_and_gets_both_answers_across_requests() -> None:
    """Two questions, two round trips: the handler resumes where it waited each time."""
    callback = answering("Ann", "Bo")
    async with connect([guests], elicitation_callback=callback) as client:
        result = await client.call_tool("guests__invite", {})
        seen = await client.call_tool("guests__listing", {})
    assert text_of(result) == "invited ['Ann', 'Bo']"
    assert text_of(seen) == "Ann, Bo"
    assert callback.asked == ["Who comes?", "Who comes?"]


async def test_a_declined_question_is_the_handlers_to_handle() -> None:
    """The user says no: the handler gets the answer and decides."""
    async with connect([guests], elicitation_callback=answering("Ann", None)) as client:
        result = await client.call_tool("guests__invite", {})
    assert text_of(result) == "stopped after ['Ann']"


async def test_the_keys_turn_is_held_while_the_question_waits_and_no_other_key_waits() -> None:
    """While a call waits for its answer, its key's next call waits; another key's does not."""
    async with open_runtime([guests]) as runtime:
        async with connect(runtime, elicitation_callback=never_called) as client:
            session = client.session
            first = await session.call_tool("guests__invite", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            # Another key answers at once, while the question is pending.
            other = await session.call_tool(
                "guests__listing", {}, meta={"sessionId": "elsewhere"}, allow_input_required=True
            )
            assert text_of(other) == "nobody"
            # The same key's next call queues behind the waiting handler, in order.
            done: list[str] = []

            async def list_mine() -> None:
                done.append(text_of(await session.call_tool("guests__listing", {})))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(list_mine)
                await trio.testing.wait_all_tasks_blocked()
                assert done == []  # still behind the parked call
                (key,) = first.input_requests or {}
                answer = types.ElicitResult(action="decline")
                last = await session.call_tool(
                    "guests__invite",
                    {},
                    input_responses={key: answer},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            assert text_of(last) == "stopped after []"
            assert done == ["nobody"]


async def test_a_request_state_is_good_only_for_the_caller_that_started_the_call() -> None:
    """Another caller, another tool, or a made-up state: refused, and the call goes on."""
    async with open_runtime([guests]) as runtime:
        alice = Caller("alice", transport_session="alice")
        mallory = Caller("mallory", transport_session="mallory")
        async with (
            connect(runtime, caller=alice, elicitation_callback=never_called) as mine,
            connect(runtime, caller=mallory, elicitation_callback=never_called) as theirs,
        ):
            first = await mine.session.call_tool("guests__invite", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            (key,) = first.input_requests or {}
            stolen = {key: types.ElicitResult(action="accept", content={"name": "Mallory"})}
            attempts = [
                (theirs, "guests__invite", first.request_state),
                (mine, "guests__listing", first.request_state),
                (mine, "guests__invite", "made-up"),
            ]
            for client, tool, state in attempts:
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool(
                        tool, {}, input_responses=stolen, request_state=state
                    )
                assert "requestState names no call of this client" in refused.value.error.message
            # The rightful client still answers its own question.
            own = {key: types.ElicitResult(action="decline")}
            last = await mine.session.call_tool(
                "guests__invite", {}, input_responses=own, request_state=first.request_state
            )
        assert text_of(last) == "stopped after []"


@pytest.mark.parametrize(("call_timeout", "waited"), [(None, _parking.ASK_TIMEOUT), (60.0, 60.0)])
async def test_a_client_that_never_answers_lets_the_key_go(
    autojump_clock: trio.testing.MockClock, call_timeout: float | None, waited: float
) -> None:
    """An unanswered question ends at ASK_TIMEOUT, or sooner at the call's deadline."""
    config = RuntimeConfig(call_timeout=call_timeout)
    async with (
        open_runtime([guests], config) as runtime,
        connect(runtime, elicitation_callback=never_called) as client,
    ):
        first = await client.session.call_tool("guests__invite", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        started = trio.current_time()
        # The same key's next call waits behind the unanswered question, then runs.
        seen = await client.session.call_tool("guests__listing", {})
        assert text_of(seen) == "nobody"
        assert trio.current_time() - started == pytest.approx(waited)


async def test_beyond_the_parked_calls_of_a_caller_a_question_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the caller's parked calls at the bound, the next call's question is CannotAskError."""
    monkeypatch.setattr(_parking, "MAX_PARKED_PER_CALLER", 1)
    async with (
        open_runtime([guests]) as runtime,
        connect(runtime, elicitation_callback=never_called) as client,
    ):
        first = await client.session.call_tool("guests__invite", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        second = await client.session.call_tool(
            "guests__invite", {}, meta={"sessionId": "another"}, allow_input_required=True
        )
    assert isinstance(second, types.CallToolResult)
    assert second.is_error
    assert "calls of this client" in text_of(second)
    assert "already wait for answers" in text_of(second)


async def test_when_the_server_stops_a_waiting_question_fails_and_the_key_is_free() -> None:
    """A parked call whose client can no longer come back does not hold its key."""
    async with open_runtime([guests]) as runtime:
        async with connect(runtime, elicitation_callback=never_called) as client:
            party: dict[str, Any] = {"sessionId": "party"}  # the host names it, in _meta
            first = await client.session.call_tool(
                "guests__invite", {}, meta=party, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
        # The server stopped serving; its questions failed: the key answers at once.
        with trio.fail_after(5):  # far less than the 60 s deadline a held key would take
            async with connect(runtime) as client:
                seen = await client.call_tool("guests__listing", {}, meta=party)
    assert text_of(seen) == "nobody"


@guests.tool
async def greet(state: Guests, ask: Ask, log: Log) -> str:
    """Log, ask a name, log again."""
    log.info("before the question")
    answer = await ask.user("Who comes?", FORM)
    log.info(f"after the answer: {answer.action}")
    return "greeted"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_what_a_tool_logs_reaches_the_client_in_order_with_its_question(mode: str) -> None:
    """In both eras, a message logged before the question comes before it, the rest after."""
    heard: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(str(params.data))

    async def on_question(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        heard.append(f"asked: {params.message}")
        return types.ElicitResult(action="decline")

    async with connect(
        [guests],
        mode=mode,
        log_level="info",
        logging_callback=on_log,
        elicitation_callback=on_question,
    ) as client:
        result = await client.call_tool("guests__greet", {})
    assert text_of(result) == "greeted"
    assert heard == ["before the question", "asked: Who comes?", "after the answer: decline"]
