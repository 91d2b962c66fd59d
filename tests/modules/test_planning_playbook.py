"""Isolation and permission scenarios for the planning and playbook_store modules, through the real
runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from actors import RuntimeConfig, open_runtime
from actors.modules import planning, playbook_store
from protocol import ToolContext, inject_context

from .._calls import call_as

if TYPE_CHECKING:
    from protocol import CallResult


S1 = ToolContext("sess_1")
S2 = ToolContext("sess_2")
A1 = ToolContext("sess_1", "asst_1")
A2 = ToolContext("sess_1", "asst_2")


class TestPlanning:
    async def test_state_is_isolated_by_session(self) -> None:
        """Session 1's goals never show in session 2."""
        async with open_runtime([planning]) as runtime:
            created = await call_as(runtime, "planning__create_goal", S1, goal="Session 1 Goal")
            assert not created.is_error
            await call_as(runtime, "planning__create_goal", S2, goal="Session 2 Goal")
            listed = (await call_as(runtime, "planning__list_goals", S1)).first_text
        assert "Session 1 Goal" in listed
        assert "Session 2 Goal" not in listed

    async def test_state_is_isolated_by_assistant_within_a_session(self) -> None:
        """Two assistants of one session keep separate plans."""
        async with open_runtime([planning]) as runtime:
            await call_as(runtime, "planning__create_goal", A1, goal="Assistant 1 Goal")
            await call_as(runtime, "planning__create_goal", A2, goal="Assistant 2 Goal")
            listed = (await call_as(runtime, "planning__list_goals", A1)).first_text
        assert "Assistant 1 Goal" in listed
        assert "Assistant 2 Goal" not in listed

    async def test_state_is_isolated_by_thread(self) -> None:
        """Planning is keyed by thread too; no thread is distinct from a thread named "default"."""
        no_thread = ToolContext("s", "a")
        literal = ToolContext("s", "a", "default")
        async with open_runtime([planning]) as runtime:
            await call_as(runtime, "planning__create_goal", no_thread, goal="no thread")
            listed = (await call_as(runtime, "planning__list_goals", literal)).first_text
        assert listed == "No goals yet."

    async def test_three_concurrent_creates_in_three_sessions(self) -> None:
        """Concurrent creates all succeed and each session has only its own."""
        sessions = [ToolContext(f"sess_{i}") for i in (1, 2, 3)]
        async with open_runtime([planning]) as runtime:
            results: list[CallResult] = []

            async def create(context: ToolContext, goal: str) -> None:
                results.append(await call_as(runtime, "planning__create_goal", context, goal=goal))

            async with trio.open_nursery() as nursery:
                for i, context in enumerate(sessions, start=1):
                    nursery.start_soon(create, context, f"Concurrent {i}")
            listings = [
                (await call_as(runtime, "planning__list_goals", context)).first_text
                for context in sessions
            ]
        assert not any(result.is_error for result in results)
        for i, listing in enumerate(listings, start=1):
            assert f"Concurrent {i}" in listing
            assert all(f"Concurrent {j}" not in listing for j in (1, 2, 3) if j != i)

    async def test_goals_todos_and_the_plan(self) -> None:
        """Ids in the text let a model follow up: todos under goals, marked done."""
        async with open_runtime([planning]) as runtime:
            goal = await call_as(runtime, "planning__create_goal", S1, goal="Learn Rust")
            assert goal.first_text == "Created goal g1: Learn Rust"
            todo = await call_as(
                runtime, "planning__add_todo", S1, name="Read the book", goal_id="g1"
            )
            assert todo.first_text == "Added todo t1: Read the book under goal g1"
            await call_as(runtime, "planning__add_todo", S1, name="Loose end")
            await call_as(runtime, "planning__mark_todo", S1, todo_id="t1")
            plan = (await call_as(runtime, "planning__get_planning_state", S1)).first_text
        assert plan == (
            "Goal g1: Learn Rust\n"
            "  [x] t1: Read the book\n"
            "Todos without a goal:\n"
            "  [ ] t2: Loose end"
        )

    async def test_bad_requests_are_error_results_that_change_nothing(self) -> None:
        """Unknown ids and empty text are errors naming the problem; the plan is unchanged."""
        async with open_runtime([planning]) as runtime:
            empty = await call_as(runtime, "planning__create_goal", S1, goal="  ")
            orphan = await call_as(runtime, "planning__add_todo", S1, name="x", goal_id="g9")
            unknown = await call_as(runtime, "planning__mark_todo", S1, todo_id="t7")
            plan = (await call_as(runtime, "planning__get_planning_state", S1)).first_text
        assert empty.is_error
        assert empty.first_text == "Error: goal must not be empty"
        assert orphan.is_error
        assert "goal 'g9' not found" in orphan.first_text
        assert unknown.is_error
        assert "todo 't7' not found" in unknown.first_text
        assert plan == "The plan is empty: no goals and no todos."


class TestPlaybookStore:
    async def test_the_owner_may_select_its_playbook(self) -> None:
        """The creating assistant selects its playbook."""
        async with open_runtime([playbook_store]) as runtime:
            created = await call_as(runtime, "playbook_store__create_playbook", A1, name="Test")
            assert created.structured_content is not None
            playbook_id = created.structured_content["id"]
            selected = await call_as(runtime, "playbook_store__select_playbook", A1, id=playbook_id)
        assert not selected.is_error
        assert selected.structured_content == {"selected": playbook_id}

    async def test_another_assistant_is_denied(self) -> None:
        """A different assistant of the same session gets Permission denied."""
        async with open_runtime([playbook_store]) as runtime:
            created = await call_as(runtime, "playbook_store__create_playbook", A1, name="Test")
            assert created.structured_content is not None
            playbook_id = created.structured_content["id"]
            denied = await call_as(runtime, "playbook_store__select_playbook", A2, id=playbook_id)
        assert denied.is_error
        assert "Permission denied" in denied.first_text
        assert "does not belong to assistant 'asst_2'" in denied.first_text

    async def test_an_unknown_id_says_so(self) -> None:
        """Selecting a playbook that does not exist is an error naming the id."""
        async with open_runtime([playbook_store]) as runtime:
            missing = await call_as(runtime, "playbook_store__select_playbook", A1, id="pb_404")
        assert missing.is_error
        assert missing.first_text == "Error: playbook 'pb_404' not found"

    async def test_list_shows_only_the_callers_playbooks(self) -> None:
        """Each assistant lists its own; a call without an assistant lists all of the session's."""
        async with open_runtime([playbook_store]) as runtime:
            await call_as(runtime, "playbook_store__create_playbook", A1, name="one")
            await call_as(runtime, "playbook_store__create_playbook", A2, name="two")
            await call_as(runtime, "playbook_store__create_playbook", S2, name="elsewhere")
            mine = await call_as(runtime, "playbook_store__list_playbooks", A1)
            everyone = await call_as(runtime, "playbook_store__list_playbooks", S1)
        assert mine.structured_content is not None
        assert everyone.structured_content is not None
        assert [p["name"] for p in mine.structured_content["playbooks"]] == ["one"]
        assert [p["name"] for p in everyone.structured_content["playbooks"]] == ["one", "two"]

    async def test_sessions_do_not_share_playbooks(self) -> None:
        """The store is per session: another session cannot see or select the playbook."""
        async with open_runtime([playbook_store]) as runtime:
            created = await call_as(runtime, "playbook_store__create_playbook", A1, name="mine")
            assert created.structured_content is not None
            other = ToolContext("sess_2", "asst_1")
            attempt = await call_as(
                runtime,
                "playbook_store__select_playbook",
                other,
                id=created.structured_content["id"],
            )
        assert attempt.is_error
        assert "not found" in attempt.first_text


class TestIntegrationFlow:
    async def test_middleware_injects_context_and_the_handler_never_sees_it(self) -> None:
        """Model arguments + injected context → isolated state, clean handler."""
        model_arguments = {"goal": "Test E2E"}
        context = ToolContext("integration_test_session", "integration_test_assistant")
        sent = inject_context(model_arguments, context)
        assert sent == {
            "goal": "Test E2E",
            "__sessionId": "integration_test_session",
            "__assistantId": "integration_test_assistant",
        }
        async with open_runtime([planning], RuntimeConfig()) as runtime:
            await runtime.call_tool("planning__create_goal", sent)
            another = ToolContext("another_session")
            listed = await call_as(runtime, "planning__list_goals", another)
        assert model_arguments == {"goal": "Test E2E"}
        assert "Test E2E" not in listed.first_text
