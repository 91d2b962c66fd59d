"""``python -m actors demo``: interleaved calls from several sessions, each seeing only its own."""

from __future__ import annotations

import random

import trio

from protocol import ToolContext, inject_context

from ._config import RuntimeConfig
from ._runtime import Runtime, open_runtime
from .modules import planning

__all__ = ["run_demo"]


def _contexts(sessions: int, assistants: int) -> list[ToolContext]:
    return [
        ToolContext(f"session-{s}", f"assistant-{a}")
        for s in range(1, sessions + 1)
        for a in range(1, assistants + 1)
    ]


def _goal_text(context: ToolContext, number: int) -> str:
    return f"goal {number} of {context.session_id}/{context.assistant_id}"


async def _create_goals(runtime: Runtime, context: ToolContext, goals: int) -> None:
    for number in range(1, goals + 1):
        # A middleware adds the context to what the model generated.
        arguments = inject_context({"goal": _goal_text(context, number)}, context)
        await runtime.call_tool("planning__create_goal", arguments)
        await trio.sleep(random.random() / 1000)  # let the sessions interleave


async def _check(runtime: Runtime, context: ToolContext, goals: int) -> bool:
    result = await runtime.call_tool("planning__list_goals", inject_context({}, context))
    seen = [line.split(": ", 1)[1] for line in result.first_text.splitlines() if ": " in line]
    expected = [_goal_text(context, number) for number in range(1, goals + 1)]
    verdict = "only its own" if seen == expected else f"WRONG: {seen}"
    print(f"{context.session_id}/{context.assistant_id}: {len(seen)} goals, {verdict}")
    return seen == expected


async def run_demo(sessions: int = 3, assistants: int = 2, goals: int = 4) -> bool:
    """Run the demo; print what each context saw; True when none saw another's goals."""
    contexts = _contexts(sessions, assistants)
    print(f"{len(contexts) * goals} create_goal calls from {len(contexts)} contexts, interleaved")
    async with open_runtime([planning], RuntimeConfig()) as runtime:
        async with trio.open_nursery() as nursery:
            for context in contexts:
                nursery.start_soon(_create_goals, runtime, context, goals)
        verdicts = [await _check(runtime, context, goals) for context in contexts]
        stats = runtime.statistics()
    print(
        f"runtime: {stats.started} actors, {stats.calls} calls, {stats.errors} errors, "
        f"{stats.duplicate_actors} duplicate actors"
    )
    return all(verdicts)
