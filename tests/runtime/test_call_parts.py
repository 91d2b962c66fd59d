"""`Runtime.call` and `Runtime.call_tool` send a call's parts, no `PreparedCall` (actors._runtime).

The record costs every in-process call an object; these calls have no use for it. What
they do must stay what `prepare` and `run` do: the same checks, the same refusals told to
the observer, the same results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest

from actors import ArgumentsError, ToolContext, ToolModule, UnknownToolError, _prepare, open_runtime
from actors.lowlevel import Observer
from protocol import CallResult, Scope, TextContent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actors import Runtime


@attrs.define
class _Refusals(Observer):
    refused: list[tuple[str | None, str]] = attrs.field(factory=list)

    def call_refused(self, tool: str | None, outcome: str) -> None:
        self.refused.append((tool, outcome))


def _module() -> ToolModule[list[str]]:
    module: ToolModule[list[str]] = ToolModule("notes", lambda _context: [], Scope.SESSION)

    @module.tool
    def add(state: list[str], text: str) -> str:
        """Add a note; say how many there are."""
        state.append(text)
        return f"{len(state)} notes"

    @module.tool
    def whoami(state: list[str], context: ToolContext) -> str:
        """Say who the call is for."""
        return f"{context.session_id}/{context.assistant_id}"

    return module


@pytest.fixture
async def observed() -> AsyncIterator[tuple[Runtime, _Refusals]]:
    observer = _Refusals()
    async with open_runtime([_module()], observer=observer) as runtime:
        yield runtime, observer


@pytest.fixture
def no_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Making a PreparedCall fails from here on."""

    def refused(*_args: Any, **_kwargs: Any) -> None:
        msg = "a PreparedCall was made"
        raise AssertionError(msg)

    monkeypatch.setattr(_prepare, "PreparedCall", refused)


class TestNoRecord:
    @pytest.mark.usefixtures("no_records")
    async def test_call_and_call_tool_make_no_prepared_call(
        self, observed: tuple[Runtime, _Refusals]
    ) -> None:
        runtime, _ = observed
        first = await runtime.call_tool("notes__add", {"text": "a", "__sessionId": "s"})
        second = await runtime.call(
            {"name": "notes__add", "arguments": {"text": "b"}, "_meta": {"sessionId": "s"}}
        )
        assert (first.first_text, second.first_text) == ("1 notes", "2 notes")
        who = await runtime.call_tool("notes__whoami", meta={"sessionId": "s", "assistantId": "x"})
        assert who.first_text == "s/x"
        with pytest.raises(AssertionError, match="a PreparedCall was made"):
            runtime.prepare({"name": "notes__add", "arguments": {"text": "c"}})

    async def test_a_result_is_what_the_constructors_make(
        self, observed: tuple[Runtime, _Refusals]
    ) -> None:
        runtime, _ = observed
        result = await runtime.call_tool("notes__add", {"text": "a"}, meta={"sessionId": "s"})
        service = runtime.registry.resolve("notes__add").service
        assert result == CallResult((TextContent("1 notes", service),))
        assert result.to_wire() == CallResult((TextContent("1 notes", service),)).to_wire()


class TestRefusals:
    async def test_an_unknown_tool_is_refused_and_told(
        self, observed: tuple[Runtime, _Refusals]
    ) -> None:
        runtime, observer = observed
        with pytest.raises(UnknownToolError, match="notes__ad"):
            await runtime.call_tool("notes__ad", {"text": "a"})
        with pytest.raises(UnknownToolError):
            await runtime.call({"name": "nope", "arguments": {}})
        assert [tool for tool, _ in observer.refused] == [None, None]
        assert runtime.statistics().started == 0

    async def test_bad_arguments_are_refused_and_told_with_the_tool(
        self, observed: tuple[Runtime, _Refusals]
    ) -> None:
        runtime, observer = observed
        with pytest.raises(ArgumentsError):
            await runtime.call_tool("notes__add", {"text": 3, "__sessionId": "s"})
        assert [tool for tool, _ in observer.refused] == ["notes__add"]
        assert runtime.statistics().started == 0
