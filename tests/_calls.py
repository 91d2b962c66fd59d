"""Calling a runtime's tools as a session: the params `runtime.call` takes, `call_tool` in a
session or a whole context, and `ModuleCalls` for one module's tools."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

import attrs

from protocol import ToolContext, inject_context

if TYPE_CHECKING:
    from collections.abc import Mapping

    from actors import Runtime
    from protocol import CallResult


def call_params(name: str, session: str, /, **arguments: Any) -> dict[str, Any]:
    """The params of a ``tools/call`` of `name` in `session`, as `runtime.call` takes them.

    The session is named as a host names it: in ``_meta``. A fresh dict each
    time, so a test may add to its ``_meta``.
    """
    return {"name": name, "arguments": arguments, "_meta": {"sessionId": session}}


async def call_as(
    runtime: Runtime, name: str, context: str | ToolContext, /, **arguments: Any
) -> CallResult:
    """`runtime.call_tool` of `name` in `context` (a session id, or a whole context).

    The context travels in the arguments (``__sessionId`` and the rest). A
    whole context is injected as a trusted middleware does; a bare session id is
    added as it is, so that a test may send other context fields (or a session
    the runtime must refuse) among `arguments`.
    """
    if isinstance(context, ToolContext):
        return await runtime.call_tool(name, inject_context(arguments, context))
    return await runtime.call_tool(name, {**arguments, "__sessionId": context})


@attrs.frozen
class ModuleCalls:
    """`call`, `data`, `text` and `error` for the tools of module `module`."""

    module: str

    async def call(
        self, runtime: Runtime, tool: str, session: str, /, **arguments: Any
    ) -> CallResult:
        """Call `module__tool` as session `session`."""
        return await call_as(runtime, f"{self.module}__{tool}", session, **arguments)

    async def data(
        self, runtime: Runtime, tool: str, session: str, /, **arguments: Any
    ) -> dict[str, Any]:
        """The structured data of a call that must succeed."""
        result = await self.call(runtime, tool, session, **arguments)
        assert not result.is_error, result.first_text
        assert result.structured_content is not None
        return dict(result.structured_content)

    async def text(self, runtime: Runtime, tool: str, session: str, /, **arguments: Any) -> str:
        """The text of a call that must succeed."""
        result = await self.call(runtime, tool, session, **arguments)
        assert not result.is_error, result.first_text
        return result.first_text

    async def error(self, runtime: Runtime, tool: str, session: str, /, **arguments: Any) -> str:
        """The message of a call that must fail with a tool error."""
        result = await self.call(runtime, tool, session, **arguments)
        assert result.is_error
        return result.first_text


_GOAL_LINE = re.compile(r"- (g\d+): (.+)")


def listed_goals(text: str) -> list[tuple[str, str]]:
    """(id, goal) for each line of a ``planning__list_goals`` answer, in order."""
    if text == "No goals yet.":
        return []
    goals = []
    for line in text.splitlines()[1:]:
        found = _GOAL_LINE.fullmatch(line)
        assert found is not None, f"unreadable goal line {line!r}"
        goals.append((found[1], found[2]))
    return goals


def check_goal_lists(stored: Mapping[str, list[tuple[str, str]]], sent: Mapping[str, str]) -> None:
    """Each session lists goals g1, g2, … with no gap, each sent to it, none stored twice.

    `stored` maps session → its (id, goal) pairs; `sent` maps goal → the session it went to.
    """
    everywhere = Counter(text for goals in stored.values() for _, text in goals)
    assert not [text for text, count in everywhere.items() if count > 1], "a goal stored twice"
    for session, goals in stored.items():
        ids = [goal_id for goal_id, _ in goals]
        assert ids == [f"g{number}" for number in range(1, len(goals) + 1)], (session, ids)
        strays = [text for _, text in goals if sent.get(text) != session]
        assert not strays, f"{session} holds goals sent elsewhere: {strays}"
