"""Calling one module's tools as a session, for the module test files."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from actors import Runtime
    from protocol import CallResult


@attrs.frozen
class ModuleCalls:
    """`call`, `data` and `error` for the tools of module `module`."""

    module: str

    async def call(self, runtime: Runtime, tool: str, session: str, **arguments: Any) -> CallResult:
        """Call `module__tool` as session `session`."""
        return await runtime.call_tool(
            f"{self.module}__{tool}", {**arguments, "__sessionId": session}
        )

    async def data(
        self, runtime: Runtime, tool: str, session: str, **arguments: Any
    ) -> dict[str, Any]:
        """The structured data of a call that must succeed."""
        result = await self.call(runtime, tool, session, **arguments)
        assert not result.is_error, result.first_text
        assert result.structured_content is not None
        return dict(result.structured_content)

    async def error(self, runtime: Runtime, tool: str, session: str, **arguments: Any) -> str:
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
