"""The ``planning`` module: goals and todos, one plan per (session, assistant, thread).

Results are text only, written for the model that reads them (no structured
data: see "Results: the dual contract" in ``docs/design.md``), and carry the
ids a model needs for follow-up calls.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from protocol import Scope, ToolContext

from .._durable import Durable
from .._errors import ToolError
from .._module import ToolModule

__all__ = ["PlanningState", "planning"]


@attrs.frozen
class _Todo:
    id: str
    name: str
    goal_id: str | None
    done: bool = False

    def line(self) -> str:
        mark = "x" if self.done else " "
        return f"[{mark}] {self.id}: {self.name}"


@attrs.define
class PlanningState:
    """One plan: goals in creation order and todos, optionally under a goal."""

    goals: dict[str, str] = attrs.field(factory=dict)
    """Goal id → goal text."""
    todos: dict[str, _Todo] = attrs.field(factory=dict)
    """Todo id → todo."""

    def require_goal(self, goal_id: str) -> None:
        """Raise a ToolError naming `goal_id` if this plan has no such goal."""
        if goal_id not in self.goals:
            msg = f"Error: goal {goal_id!r} not found; list_goals shows the ids"
            raise ToolError(msg)

    def render(self) -> str:
        """The whole plan as text: each goal with its todos, then the loose todos."""
        if not self.goals and not self.todos:
            return "The plan is empty: no goals and no todos."
        lines: list[str] = []
        for goal_id, text in self.goals.items():
            lines.append(f"Goal {goal_id}: {text}")
            lines.extend(f"  {t.line()}" for t in self.todos.values() if t.goal_id == goal_id)
        loose = [t.line() for t in self.todos.values() if t.goal_id is None]
        if loose:
            lines.append("Todos without a goal:")
            lines.extend(f"  {line}" for line in loose)
        return "\n".join(lines)


def _new_plan(_context: ToolContext) -> PlanningState:
    return PlanningState()


planning: ToolModule[PlanningState] = ToolModule(
    "planning",
    _new_plan,
    scope=Scope.SESSION_ASSISTANT_THREAD,
    description="Goals and todos, kept per session, assistant and thread.",
    # Goals and todos are parts: a call stores the goal or todo it made or changed.
    durable=Durable(PlanningState, parts=("goals", "todos")),
)


def _non_empty(field: str, value: str) -> str:
    if not value.strip():
        msg = f"Error: {field} must not be empty"
        raise ToolError(msg)
    return value


@planning.tool(title="Create a goal", destructive=False, idempotent=False, open_world=False)
def create_goal(
    state: PlanningState, goal: Annotated[str, "What the goal is, in a sentence."]
) -> str:
    """Create a goal in the current plan and return its id."""
    goal_id = f"g{len(state.goals) + 1}"
    state.goals[goal_id] = _non_empty("goal", goal)
    return f"Created goal {goal_id}: {goal}"


@planning.tool(read_only=True, title="List goals", open_world=False)
def list_goals(state: PlanningState) -> str:
    """List the goals of the current plan with their ids."""
    if not state.goals:
        return "No goals yet."
    lines = [f"- {goal_id}: {text}" for goal_id, text in state.goals.items()]
    return f"Goals ({len(lines)}):\n" + "\n".join(lines)


@planning.tool(title="Add a todo", destructive=False, idempotent=False, open_world=False)
def add_todo(
    state: PlanningState,
    name: Annotated[str, "What to do."],
    goal_id: Annotated[str | None, "The goal it serves (from create_goal), if any."] = None,
) -> str:
    """Add a todo, optionally under a goal, and return its id."""
    _non_empty("name", name)
    if goal_id is not None:
        state.require_goal(goal_id)
    todo_id = f"t{len(state.todos) + 1}"
    state.todos[todo_id] = _Todo(todo_id, name, goal_id)
    under = f" under goal {goal_id}" if goal_id is not None else ""
    return f"Added todo {todo_id}: {name}{under}"


# Sets a flag that only ever goes from not done to done: nothing is lost, and again is no change.
@planning.tool(title="Mark a todo done", destructive=False, idempotent=True, open_world=False)
def mark_todo(state: PlanningState, todo_id: Annotated[str, "The todo's id."]) -> str:
    """Mark a todo as done."""
    todo = state.todos.get(todo_id)
    if todo is None:
        msg = f"Error: todo {todo_id!r} not found; get_planning_state shows the ids"
        raise ToolError(msg)
    state.todos[todo_id] = attrs.evolve(todo, done=True)  # a part is replaced, never changed
    return f"Marked todo {todo_id} done: {todo.name}"


@planning.tool(read_only=True, title="Show the plan", open_world=False)
def get_planning_state(state: PlanningState) -> str:
    """Show the whole plan: goals, their todos and whether each is done."""
    return state.render()


@planning.resource("planning://plan", title="The plan", mime_type="text/plain")
def plan(state: PlanningState) -> str:
    """This conversation's plan: its goals with their todos, done or not, as get_planning_state
    shows it."""
    return state.render()
