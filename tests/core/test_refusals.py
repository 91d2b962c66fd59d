"""One root for every call that gets no result: `protocol.CallError`.

Real bad calls through a real `Runtime`: each refusal is a `CallError` (whether the
protocol layer or the runtime refused it), and the runtime reports it as refused
before an actor; each failure after an actor took the call is a `CallError` too, but
is reported as a call the actor had, never as a refusal. (A refusal is what the
runtime's observer hears of as ``call_refused``: no actor took the call.)
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing

from actors import (
    ActorCrashedError,
    ArgumentsError,
    CallTimeoutError,
    CapacityError,
    HandlerError,
    Runtime,
    RuntimeCallError,
    RuntimeClosedError,
    RuntimeConfig,
    SessionEndingError,
    ToolModule,
    UnknownPromptError,
    UnknownResourceError,
    UnknownToolError,
    open_runtime,
)
from actors.lowlevel import CallRecord, Observer
from protocol import (
    Caller,
    CallError,
    CallFormatError,
    ContextError,
    ProtocolError,
    TenantError,
    ToolContext,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable


@attrs.define
class Held:
    """A state whose `hold` tool waits until the test lets it go."""

    entered: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)


def _state(context: ToolContext) -> Held:
    if context.session_id == "crash":
        msg = "no state for this session"
        raise OSError(msg)
    return Held()


gate = ToolModule("gate", _state)
HELD: list[Held] = []  # the states whose hold is running, for the test to release


@gate.tool
async def hold(state: Held) -> str:
    """Wait until released."""
    HELD.append(state)
    state.entered.set()
    await state.release.wait()
    return "released"


@gate.tool
async def forever(state: Held) -> str:
    """Never return: the per-call deadline ends it."""
    await trio.sleep_forever()
    return "never"


@gate.tool
def echo(state: Held, text: str) -> str:
    """Say `text` back."""
    return text


@gate.resource("gate://broken")
def broken(state: Held) -> str:
    """A resource whose handler fails."""
    msg = "the resource cannot be read"
    raise RuntimeError(msg)


@gate.prompt
def greet(state: Held) -> str:
    """A prompt, so that prompts are served."""
    return "hello"


@attrs.define
class Told(Observer):
    """What the runtime reported: refusals (by outcome) and calls its actors had."""

    refused: list[str] = attrs.field(factory=list)
    finished: list[CallRecord] = attrs.field(factory=list)

    def call_refused(self, tool: str | None, outcome: str) -> None:
        self.refused.append(outcome)

    def call_finished(self, record: CallRecord) -> None:
        self.finished.append(record)


@asynccontextmanager
async def runtime_told(**config: Any) -> AsyncIterator[tuple[Runtime, Told]]:
    told = Told()
    HELD.clear()
    async with open_runtime([gate], RuntimeConfig(**config), observer=told) as runtime:
        yield runtime, told


def call(tool: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"name": f"gate__{tool}", "arguments": arguments or {}, "_meta": meta}


ALPHA = Caller("token-1", tenant="alpha")
BAD_CALLS: list[Any] = [
    pytest.param(lambda r: r.call(call("nope", sessionId="s")), UnknownToolError, id="unknown"),
    pytest.param(lambda r: r.call({"arguments": {}}), CallFormatError, id="no-name"),
    pytest.param(
        lambda r: r.call(call("echo", {"text": 5}, sessionId="s")), ArgumentsError, id="arguments"
    ),
    pytest.param(
        lambda r: r.call(call("echo", {"text": "x"}, sessionId=12)), ContextError, id="context"
    ),
    pytest.param(
        lambda r: r.call(call("echo", {"text": "x"}, sessionId="beta/s"), caller=ALPHA),
        TenantError,
        id="outside-tenant",
    ),
    pytest.param(
        lambda r: r.read_resource("gate://nope", meta={"sessionId": "s"}),
        UnknownResourceError,
        id="unknown-resource",
    ),
    pytest.param(
        lambda r: r.get_prompt("gate__nope", meta={"sessionId": "s"}),
        UnknownPromptError,
        id="unknown-prompt",
    ),
]


@pytest.mark.parametrize(("bad", "kind"), BAD_CALLS)
async def test_every_bad_call_is_refused_with_a_call_error(
    bad: Callable[[Runtime], Awaitable[object]], kind: type
) -> None:
    """Protocol layer or runtime, the refusal is one `CallError`, told as refused."""
    async with runtime_told() as (runtime, told):
        with pytest.raises(CallError) as raised:
            await bad(runtime)
    assert isinstance(raised.value, kind)
    assert isinstance(raised.value, ProtocolError | RuntimeCallError)
    assert (len(told.refused), told.finished) == (1, [])


async def test_no_room_is_a_call_error_for_a_call_that_never_ran() -> None:
    """The new key's actor was made but found no seat: taken, never run, not a refusal."""
    async with runtime_told(max_actors=1) as (runtime, told), trio.open_nursery() as nursery:
        nursery.start_soon(runtime.call, call("hold", sessionId="busy"))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(CallError) as raised:
            await runtime.call(call("echo", {"text": "x"}, sessionId="other"))
        HELD[0].release.set()
    assert isinstance(raised.value, CapacityError)
    assert told.refused == []
    (record,) = [record for record in told.finished if record.outcome != "ok"]
    assert (record.outcome, record.started) == ("capacity", None)


async def test_a_session_being_ended_is_refused_with_a_call_error() -> None:
    """Its calls are refused at the door until the session is gone."""
    async with runtime_told() as (runtime, told), trio.open_nursery() as nursery:
        nursery.start_soon(runtime.call, call("hold", sessionId="s1"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(runtime.end_session, "s1")
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(CallError) as raised:
            await runtime.call(call("echo", {"text": "x"}, sessionId="s1"))
        HELD[0].release.set()
    assert isinstance(raised.value, SessionEndingError)
    assert len(told.refused) == 1


async def test_a_closed_runtime_refuses_with_a_call_error() -> None:
    """A call after the block: refused at the door."""
    async with runtime_told() as (runtime, told):
        pass
    with pytest.raises(CallError) as raised:
        await runtime.call(call("echo", {"text": "x"}, sessionId="s"))
    assert isinstance(raised.value, RuntimeClosedError)
    assert len(told.refused) == 1


FAILED_AT_THE_ACTOR: list[Any] = [
    pytest.param(
        lambda r: r.call(call("echo", {"text": "x"}, sessionId="crash")),
        ActorCrashedError,
        {},
        id="crash",
    ),
    pytest.param(
        lambda r: r.call(call("forever", sessionId="s")),
        CallTimeoutError,
        {"call_timeout": 0.05},  # the deadline is what is tested: the call never ends
        id="timeout",
    ),
    pytest.param(
        lambda r: r.read_resource("gate://broken", meta={"sessionId": "s"}),
        HandlerError,
        {},
        id="handler",
    ),
]


@pytest.mark.parametrize(("bad", "kind", "config"), FAILED_AT_THE_ACTOR)
async def test_a_failure_at_the_actor_is_a_call_error_never_a_refusal(
    bad: Callable[[Runtime], Awaitable[object]], kind: type, config: dict[str, float]
) -> None:
    """An actor had the call: a `CallError` still, but reported as the actor's call, and
    not as anything the protocol layer refused."""
    async with runtime_told(**config) as (runtime, told):
        with pytest.raises(CallError) as raised:
            await bad(runtime)
    assert isinstance(raised.value, kind)
    assert not isinstance(raised.value, ProtocolError)
    assert told.refused == []
    assert len(told.finished) == 1


async def test_a_tools_own_error_is_a_result_not_a_call_error() -> None:
    """The seam the root draws: an error result is a result."""
    async with runtime_told() as (runtime, told):
        result = await runtime.call(call("echo", {"text": "x"}, sessionId="s"))
    assert not result.is_error
    assert (told.refused, len(told.finished)) == ([], 1)
