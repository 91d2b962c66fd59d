"""A FastMCP user's habits: each is served as written, or refused when declared.

Every test here failed on the code before issue #37: a tool without a state parameter lost
its first argument to the state, pydantic's ``Field`` was ignored, ``-> int``, ``-> list[str]``
and ``-> None`` failed at every call, a class was no state factory, and the module's repr
ran to kilobytes.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import attrs
import pytest
from pydantic import Field

import actors
import protocol
from actors import ArgumentsError, Durable, ToolModule, open_runtime
from protocol import CallResult, TextContent


@attrs.define
class Notes:
    """A module state: the notes taken."""

    items: list[str] = attrs.Factory(list)


@dataclasses.dataclass
class Point:
    """Returned data that is a dataclass."""

    x: int
    y: int


async def call(module: ToolModule[Any], tool: str, **arguments: Any) -> CallResult:
    """`module`'s `tool` called once in session ``s``."""
    async with open_runtime([module]) as runtime:
        return await runtime.call_tool(f"{module.name}__{tool}", {**arguments, "__sessionId": "s"})


class TestToolsWithoutState:
    async def test_every_parameter_of_a_stateless_tool_is_an_argument(self) -> None:
        module = ToolModule("calc", Notes)

        @module.tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        tool = module.tools["add"]
        assert list(tool.input_schema["properties"]) == ["a", "b"]
        assert tool.stateless
        result = await call(module, "add", a=2, b=3)
        assert (result.first_text, result.structured_content) == ("5", {"result": 5})

    async def test_a_tool_with_no_parameters_needs_no_state(self) -> None:
        module = ToolModule("clock")

        @module.tool
        def ping() -> str:
            """Answer."""
            return "pong"

        assert (await call(module, "ping")).first_text == "pong"

    async def test_an_async_stateless_tool_is_awaited(self) -> None:
        module = ToolModule("calc")

        @module.tool
        async def double(value: float) -> float:
            """Double it."""
            return value * 2

        assert (await call(module, "double", value=1.5)).structured_content == {"result": 3.0}

    def test_a_module_without_state_refuses_a_tool_that_reads_as_taking_one(self) -> None:
        module = ToolModule("math")
        with pytest.raises(TypeError, match=r"module 'math' keeps no state.*'state'"):

            @module.tool
            def total(state: Notes) -> str:
                """Use a state the module does not have."""
                return ""

    async def test_a_first_parameter_named_state_is_the_state_whatever_its_type(self) -> None:
        module: ToolModule[list[str]] = ToolModule("box", lambda _context: [])

        @module.tool
        def put(state: list[str], value: str) -> str:
            """Put `value` in the box."""
            state.append(value)
            return ",".join(state)

        assert list(module.tools["put"].input_schema["properties"]) == ["value"]
        assert (await call(module, "put", value="a")).first_text == "a"


SESSION = {"sessionId": "s"}


class TestResourcesPromptsAndCompletionsWithoutState:
    """As a tool: a handler with no state parameter reads no state, every parameter its own.

    Before, a prompt's first argument silently received the state (and was not listed), and
    a resource template's variable was refused as "no arguments"."""

    async def test_a_prompt_without_state_lists_and_receives_its_argument(self) -> None:
        module = ToolModule("greeter", Notes)

        @module.prompt
        def greet(name: str) -> str:
            """Greet someone."""
            return f"Say hello to {name}."

        (prompt,) = module.prompts.values()
        assert [argument.name for argument in prompt.arguments] == ["name"]
        async with open_runtime([module]) as runtime:
            said = await runtime.get_prompt("greeter__greet", {"name": "Ada"}, meta=SESSION)
        (message,) = said.messages
        assert isinstance(message.content, TextContent)
        assert message.content.text == "Say hello to Ada."

    async def test_a_resource_template_without_state_receives_its_variable(self) -> None:
        module = ToolModule("users")

        @module.resource("users://{user_id}/profile")
        def profile(user_id: int) -> str:
            """A user's profile."""
            return f"user {user_id + 1}"

        async with open_runtime([module]) as runtime:
            read = await runtime.read_resource("users://41/profile", meta=SESSION)
        assert read.contents[0].text == "user 42"

    async def test_a_completion_without_state_receives_the_text_typed(self) -> None:
        module = ToolModule("greeter")

        @module.prompt
        def greet(name: str) -> str:
            """Greet someone."""
            return f"Say hello to {name}."

        @module.completion("greet", "name")
        def names(typed: str) -> list[str]:
            return [name for name in ("Ada", "Alan", "Grace") if name.startswith(typed)]

        async with open_runtime([module]) as runtime:
            found = await runtime.complete("greeter__greet", "name", "A", meta=SESSION)
        assert list(found.values) == ["Ada", "Alan"]

    def test_a_module_without_state_refuses_a_prompt_that_reads_as_taking_one(self) -> None:
        module = ToolModule("greeter")
        with pytest.raises(TypeError, match=r"module 'greeter' keeps no state.*'state'"):

            @module.prompt
            def greet(state: Notes) -> str:
                """Use a state the module does not have."""
                return ""


class TestPydanticField:
    def test_an_annotated_field_becomes_schema(self) -> None:
        module = ToolModule("shop")

        @module.tool
        def order(
            count: Annotated[int, Field(ge=1, le=9, description="How many")],
            name: Annotated[str, Field(max_length=5, pattern="^[a-z]+$")] = "tea",
        ) -> str:
            """Order something."""
            return f"{count} {name}"

        properties = module.tools["order"].input_schema["properties"]
        assert properties["count"] == {
            "type": "integer",
            "description": "How many",
            "minimum": 1,
            "maximum": 9,
        }
        assert properties["name"] == {
            "type": "string",
            "maxLength": 5,
            "pattern": "^[a-z]+$",
            "default": "tea",
        }

    @pytest.mark.parametrize(
        ("arguments", "problem"),
        [
            ({"count": 0}, r"\$\.count: must be at least 1, got 0"),
            ({"count": 10}, r"\$\.count: must be at most 9, got 10"),
            ({"count": 1, "name": "coffee"}, r"\$\.name: must be at most 5 long"),
            ({"count": 1, "name": "Tea"}, r"\$\.name: must match '\^\[a-z\]\+\$'"),
        ],
    )
    async def test_a_value_outside_the_field_is_refused(
        self, arguments: dict[str, Any], problem: str
    ) -> None:
        module = ToolModule("shop")

        @module.tool
        def order(
            count: Annotated[int, Field(ge=1, le=9)],
            name: Annotated[str, Field(max_length=5, pattern="^[a-z]+$")] = "tea",
        ) -> str:
            """Order something."""
            return f"{count} {name}"

        with pytest.raises(ArgumentsError, match=problem):
            await call(module, "order", **arguments)

    async def test_a_field_as_the_default_is_a_default_and_a_bound(self) -> None:
        module = ToolModule("shop")

        @module.tool
        def order(count: int = Field(default=2, ge=1, description="How many")) -> int:
            """Order something."""
            return count

        schema = module.tools["order"].input_schema
        assert schema["properties"]["count"]["default"] == 2
        assert schema["required"] == []
        assert (await call(module, "order")).structured_content == {"result": 2}
        with pytest.raises(ArgumentsError, match=r"must be at least 1"):
            await call(module, "order", count=0)

    def test_a_field_option_that_is_not_honoured_is_refused(self) -> None:
        module = ToolModule("shop")
        with pytest.raises(TypeError, match=r"Field\(alias=.*is not supported"):

            @module.tool
            def order(count: Annotated[int, Field(alias="n")]) -> str:
                """Order something."""
                return ""

    def test_a_bound_that_does_not_fit_the_type_is_refused(self) -> None:
        module = ToolModule("shop")
        with pytest.raises(TypeError, match=r"Ge bounds a number"):

            @module.tool
            def order(name: Annotated[str, Field(ge=1)]) -> str:
                """Order something."""
                return name


class TestReturns:
    async def test_a_list_is_data(self) -> None:
        module = ToolModule("words")

        @module.tool
        def split(text: str) -> list[str]:
            """Split `text`."""
            return text.split()

        assert module.tools["split"].output_schema == {
            "type": "object",
            "properties": {"result": {"type": "array", "items": {"type": "string"}}},
            "required": ["result"],
        }
        result = await call(module, "split", text="a b")
        assert (result.first_text, result.structured_content) == (
            '["a", "b"]',
            {"result": ["a", "b"]},
        )

    async def test_none_is_an_empty_result(self) -> None:
        module = ToolModule("quiet")

        @module.tool
        def nothing() -> None:
            """Do nothing."""

        result = await call(module, "nothing")
        assert (result.content, result.structured_content, result.is_error) == ((), None, False)

    async def test_a_dataclass_is_data(self) -> None:
        module = ToolModule("geo")

        @module.tool
        def origin() -> Point:
            """The origin."""
            return Point(0, 0)

        assert module.tools["origin"].output_schema is not None
        assert (await call(module, "origin")).structured_content == {"x": 0, "y": 0}

    def test_a_return_type_no_result_can_carry_is_refused_when_declared(self) -> None:
        module = ToolModule("odd")
        with pytest.raises(TypeError, match=r"a tool cannot return set\[int\]"):

            @module.tool
            def numbers() -> set[int]:
                """A set, which JSON has not."""
                return set()


class TestLessCeremony:
    async def test_a_class_is_the_state(self) -> None:
        module = ToolModule("notes", Notes, durable=True)

        @module.tool
        def take(state: Notes, text: str) -> int:
            """Take a note."""
            state.items.append(text)
            return len(state.items)

        assert module.state_class is Notes
        assert module.durable is not None
        assert module.durable.state_type is Notes
        assert (await call(module, "take", text="x")).structured_content == {"result": 1}

    def test_a_factory_of_no_arguments_is_the_state(self) -> None:
        def new_notes() -> Notes:
            return Notes(["first"])

        module = ToolModule("notes", new_notes)
        assert module.state_class is Notes
        assert module.state(protocol.ToolContext("s")) == Notes(["first"])

    def test_a_factory_of_two_arguments_is_refused(self) -> None:
        with pytest.raises(TypeError, match=r"needs 2 arguments"):
            ToolModule("notes", lambda a, b: Notes())

    def test_durable_true_needs_the_class(self) -> None:
        with pytest.raises(TypeError, match=r"durable=True stores the state's class"):
            ToolModule("notes", lambda _context: Notes(), durable=True)

    def test_a_durable_of_another_class_is_refused(self) -> None:
        @attrs.define
        class Other:
            """Not the module's state."""

        with pytest.raises(TypeError, match=r"its state is Notes, but durable= stores"):
            ToolModule("notes", Notes, durable=Durable(Other))

    def test_the_repr_is_short(self) -> None:
        module = ToolModule("notes", Notes, durable=True)
        for index in range(20):
            module.tool(name=f"tool_{index}", description="A tool.")(lambda state: "")
        assert repr(module) == (
            "ToolModule('notes', scope=SESSION, tools=20, resources=0, prompts=0, "
            "durable=Notes schema 1)"
        )

    def test_an_author_needs_only_actors(self) -> None:
        assert (actors.Scope, actors.ToolContext, actors.CallResult) == (
            protocol.Scope,
            protocol.ToolContext,
            protocol.CallResult,
        )


def test_a_module_renamed_later_is_still_named_right() -> None:
    """The name's rule holds when it is set after the module is made, as when it is made."""
    module = ToolModule("notes")
    with pytest.raises(ValueError, match=r"^module name 'Bad Name' must be lowercase"):
        module.name = "Bad Name"
    assert module.name == "notes"
