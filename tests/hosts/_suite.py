"""The behaviour every host offers (`actors.CallTarget`), as seen by a client of it.

Each behaviour is an async function of a `Driver` (`_hosts`): it opens
sessions and uses them as a client would, through the host's own API or over
MCP, and never looks inside the host. `BEHAVIOURS` is the suite;
test_behaviour.py runs each one against every host, each way it can be met.
The modules are `_modules`'s: notes (tools with state, a resource, a
template, a prompt, a completion), tools that ask and log, and tools that
report progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

from ._hosts import FORM_ANSWER, Refused

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._hosts import Driver, Session

ALL: Final = "notes://all"
TEMPLATE: Final = "notes://note/{number}"


async def _add(session: Session, *texts: str) -> None:
    for text in texts:
        added = await session.call("notes__add_note", {"text": text})
        assert not added.is_error, added


async def _count(session: Session) -> object:
    counted = await session.call("notes__count_notes", {})
    assert not counted.is_error, counted
    return counted.data


async def tools_keep_a_state_per_session(driver: Driver) -> None:
    """A key's calls see each other's writes; another session's calls see none of them."""
    async with driver.session() as one, driver.session() as other:
        first = await one.call("notes__add_note", {"text": "one's"})
        second = await one.call("notes__add_note", {"text": "again"})
        before = await _count(other)
        await _add(other, "other's")
        assert (first.data, second.data) == ({"count": 1}, {"count": 2})
        assert before == {"count": 0}
        assert await _count(one) == {"count": 2}
        assert await _count(other) == {"count": 1}


async def resources_prompts_and_completions_read_the_sessions_state(driver: Driver) -> None:
    """A resource, a template's instance, a prompt and a completion, each of its session."""
    async with driver.session() as one, driver.session() as other:
        await _add(one, "alpha", "beta")
        assert await one.read(ALL) == "- alpha\n- beta"
        assert await other.read(ALL) == ""
        assert await one.read("notes://note/2") == "beta"
        review = await one.prompt("notes__review", {"focus": "typos"})
        assert review == "Review, looking for typos: alpha, beta"
        assert await one.complete(TEMPLATE, "number", "") == ["1", "2"]
        assert await other.complete(TEMPLATE, "number", "") == []


async def a_tool_asks_logs_and_reports_progress_to_its_client(driver: Driver) -> None:
    """`Ask` answered by the client, `Log` and `Progress` heard by it, in order."""
    async with driver.session() as session:
        confirmed = await session.call_listening("asking__confirm", {})
        chatty = await session.call_listening("asking__chatty", {"words": ["a", "b", "c", "d"]})
        walked = await session.call_listening("steps__walk", {"steps": 3})
        heard = session.heard
    assert confirmed.data == {"action": "accept", "content": FORM_ANSWER}
    assert heard.asked == ["Go ahead?"]
    assert chatty.text == "done"
    assert heard.logs == [("debug", "a"), ("info", "b"), ("warning", "c"), ("error", "d")]
    assert walked.text == "walked"
    # Over MCP only the newest report of each tenth of a second is sent, the last always.
    assert heard.progress[-1] == (3, 3, "step 3")
    every = [(step, 3, f"step {step}") for step in (1, 2, 3)]
    assert heard.progress == [report for report in every if report in heard.progress]


async def a_watcher_is_told_of_a_change_and_of_the_sessions_end(driver: Driver) -> None:
    """`watch` (a subscription, over MCP): a write to the key, then the end of its session."""
    async with driver.session() as session:
        async with session.watching(ALL) as notices:
            await _add(session, "watched")
            await notices.next()
            await session.end()
            await notices.next()
        assert await session.read(ALL) == ""


async def ending_a_session_forgets_its_state_and_no_other(driver: Driver) -> None:
    """`end_session` (``session__end`` over MCP): fresh state there, the other kept."""
    async with driver.session() as one, driver.session() as other:
        await _add(one, "gone")
        await _add(other, "kept")
        await one.end()
        assert await _count(one) == {"count": 0}
        assert await _count(other) == {"count": 1}


async def a_refused_request_says_what_was_wrong(driver: Driver) -> None:
    """An unknown tool or resource, bad arguments, a failing read: each error names it."""
    async with driver.session() as session:
        with pytest.raises(Refused, match="notes__nope"):
            await session.call("notes__nope", {})
        bad = await session.call("notes__add_note", {"text": 3})
        with pytest.raises(Refused, match="notes://nothing"):
            await session.read("notes://nothing")
        with pytest.raises(Refused, match="there is no note '3'"):
            await session.read("notes://note/3")
    assert bad.is_error
    assert "$.text: expected a string" in bad.text


BEHAVIOURS: Final[tuple[Callable[[Driver], Awaitable[None]], ...]] = (
    tools_keep_a_state_per_session,
    resources_prompts_and_completions_read_the_sessions_state,
    a_tool_asks_logs_and_reports_progress_to_its_client,
    a_watcher_is_told_of_a_change_and_of_the_sessions_end,
    ending_a_session_forgets_its_state_and_no_other,
    a_refused_request_says_what_was_wrong,
)
"""The suite: every host must pass every one."""
