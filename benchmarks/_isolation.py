"""Scenario ``isolation``: interleaved contexts through ``planning``, each must see only its own.

M sessions x A assistants x T threads run at once. Each context creates
goals with texts no other context uses and, after each, lists the goals: a
goal of another context in the list is a *leaked observation*, one of its
own goals missing is a *lost write*. The runtime must show neither. The
replaced ``switch_context`` design (docs/design.md; `SwitchContext`) runs in
the same harness, interleaved round by round, and must leak — otherwise the
harness would not be able to see a leak at all.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from actors import open_runtime
from actors.modules import planning
from protocol import ToolContext, inject_context

from ._baselines import SwitchContext
from ._measure import Stats
from ._report import Figure, ScenarioResult, Target, figure

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actors import Runtime

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_isolation"]

NAME: Final = "isolation"
RUNTIME: Final = "runtime"
SWITCH: Final = "switch_context (replaced design)"
ZERO: Final = Target("==", 0, any_size=True)
SOME: Final = Target(">", 0, any_size=True)

ToolCall = Callable[[ToolContext, str, Mapping[str, Any]], Awaitable[str]]
"""Run a planning tool (base name) with arguments for a context; return the result's text."""


@attrs.define
class _Tally:
    """What the contexts of one design observed, over all rounds."""

    leaked: int = 0
    """Goals of another context seen in a list, during the run or in the audit after it."""
    wrong_reads: int = 0
    """Lists during the run that were not exactly the context's own goals so far."""
    lost: int = 0
    """Own goals missing from the context's list in the audit."""
    calls: int = 0
    rates: list[float] = attrs.field(factory=list)


def _contexts(sizes: Sizes, number: int) -> list[ToolContext]:
    sessions, assistants, threads = sizes.isolation_contexts
    return [
        ToolContext(f"round{number}-session{s}", f"assistant{a}", f"thread{t}")
        for s, a, t in itertools.product(range(sessions), range(assistants), range(threads))
    ]


def _goal(context: ToolContext, number: int) -> str:
    return f"goal {number} of {context.session_id}/{context.assistant_id}/{context.thread_id}"


def listed_goals(text: str) -> list[str]:
    """The goal texts in a ``list_goals`` reply (``- g1: text`` lines)."""
    return [
        line.split(": ", 1)[1]
        for line in text.splitlines()
        if line.startswith("- ") and ": " in line
    ]


async def _one_context(call: ToolCall, context: ToolContext, goals: int, tally: _Tally) -> None:
    own: set[str] = set()
    for number in range(goals):
        text = _goal(context, number)
        await call(context, "create_goal", {"goal": text})
        own.add(text)
        seen = set(listed_goals(await call(context, "list_goals", {})))
        tally.leaked += len(seen - own)
        tally.wrong_reads += seen != own
        tally.calls += 2


async def _audit(call: ToolCall, context: ToolContext, goals: int, tally: _Tally) -> None:
    """List `context`'s goals once nothing else runs: where did its writes really land?"""
    own = {_goal(context, number) for number in range(goals)}
    seen = set(listed_goals(await call(context, "list_goals", {})))
    tally.leaked += len(seen - own)
    tally.lost += len(own - seen)


async def _round(
    call: ToolCall, contexts: Sequence[ToolContext], goals: int, tally: _Tally
) -> None:
    calls_before, began = tally.calls, time.perf_counter()
    async with trio.open_nursery() as nursery:
        for context in contexts:
            nursery.start_soon(_one_context, call, context, goals, tally)
    tally.rates.append((tally.calls - calls_before) / (time.perf_counter() - began))
    for context in contexts:
        await _audit(call, context, goals, tally)


def _runtime_call(runtime: Runtime) -> ToolCall:
    async def call(context: ToolContext, tool: str, arguments: Mapping[str, Any]) -> str:
        result = await runtime.call_tool(f"planning__{tool}", inject_context(arguments, context))
        return result.first_text

    return call


async def _measure(sizes: Sizes, tallies: Mapping[str, _Tally], progress: Progress) -> None:
    switch = SwitchContext(planning)
    async with open_runtime([planning]) as runtime:
        calls = {RUNTIME: _runtime_call(runtime), SWITCH: switch.call_tool}
        for number in range(sizes.rounds):
            progress(f"{NAME}: round {number + 1}/{sizes.rounds}")
            contexts = _contexts(sizes, number)
            for design, call in calls.items():
                await _round(call, contexts, sizes.isolation_goals, tallies[design])


def _figures(design: str, tally: _Tally) -> list[Figure]:
    runtime = design == RUNTIME
    return [
        figure(NAME, f"{design}: leaked observations", tally.leaked, "", ZERO if runtime else SOME),
        figure(NAME, f"{design}: wrong reads", tally.wrong_reads, "", ZERO if runtime else None),
        figure(NAME, f"{design}: lost writes", tally.lost, "", ZERO if runtime else None),
        figure(NAME, f"{design}: calls checked", tally.calls, ""),
        figure(NAME, f"{design}: calls/s", Stats.of(tally.rates), "/s"),
    ]


def run_isolation(sizes: Sizes, progress: Progress) -> ScenarioResult:
    """Count what interleaved contexts see of each other, runtime and switch_context design."""
    tallies = {RUNTIME: _Tally(), SWITCH: _Tally()}
    trio.run(_measure, sizes, tallies, progress)
    figures = [f for design, tally in tallies.items() for f in _figures(design, tally)]
    sessions, assistants, threads = sizes.isolation_contexts
    notes = (
        f"{sessions} sessions x {assistants} assistants x {threads} threads, "
        f"{sizes.isolation_goals} goals each, create_goal then list_goals, all contexts at once; "
        "then each context's goals are listed alone (the audit)",
    )
    return ScenarioResult(NAME, tuple(figures), notes)
