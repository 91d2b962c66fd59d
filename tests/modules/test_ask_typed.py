"""``ask.user(message, T)``: a form derived from a type, its answer structured into T.

Issue #37. A tool asks for an attrs class, a dataclass, a pydantic model or a TypedDict of
flat fields, or for one flat value (``int``, a Literal, an Enum) sent as the one field
``value``; the official SDK client, in memory, fills in the form it receives. Everything
here failed before: ``ask.user`` took a JSON Schema only, and an answer had no ``data``.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, TypedDict

import attrs
import pydantic
import pytest
from mcp import types
from pydantic import Field

from actors import Answer, Ask, CannotAskError, ToolModule
from actors._client import check_form
from actors.testing import connect

from .._mcp_helpers import text_of

if TYPE_CHECKING:
    from collections.abc import Mapping


class Room(enum.Enum):
    """A choice of the form, by value."""

    SINGLE = "single"
    DOUBLE = "double"


Nights = Annotated[int, Field(description="How many nights", ge=1, le=30)]
Extra = Literal["breakfast", "parking"]


@attrs.frozen
class AttrsBooking:
    guest: str
    nights: Nights
    room: Room = Room.SINGLE
    extras: list[Extra] = attrs.Factory(list)
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class DataclassBooking:
    guest: str
    nights: Nights
    room: Room = Room.SINGLE
    extras: list[Extra] = dataclasses.field(default_factory=list)
    note: str | None = None


class PydanticBooking(pydantic.BaseModel):
    guest: str
    nights: Nights
    room: Room = Room.SINGLE
    extras: list[Extra] = Field(default_factory=list)
    note: str | None = None


class TypedDictBooking(TypedDict):
    guest: str
    nights: Nights
    room: NotRequired[Room]
    extras: NotRequired[list[Extra]]
    note: NotRequired[str]


BOOKINGS = [AttrsBooking, DataclassBooking, PydanticBooking, TypedDictBooking]

# What the client is sent for each booking class: TypedDict keys have no default to show.
BOOKING_FORM: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "guest": {"type": "string"},
        "nights": {
            "type": "integer",
            "description": "How many nights",
            "minimum": 1,
            "maximum": 30,
        },
        "room": {"enum": ["single", "double"], "type": "string", "default": "single"},
        "extras": {"type": "array", "items": {"enum": ["breakfast", "parking"], "type": "string"}},
        "note": {"type": "string"},
    },
    "required": ["guest", "nights"],
}


def without_default(form: Mapping[str, Any], field: str) -> dict[str, Any]:
    properties = dict(form["properties"])
    properties[field] = {k: v for k, v in properties[field].items() if k != "default"}
    return {**form, "properties": properties}


def form_of(asked: object) -> Mapping[str, Any]:
    return without_default(BOOKING_FORM, "room") if asked is TypedDictBooking else BOOKING_FORM


def field(data: object, name: str) -> object:
    """A field of an instance, or a key of a TypedDict's dict."""
    return data[name] if isinstance(data, dict) else getattr(data, name)


class Client:
    """The user at the SDK client: answers each form with `action` and `content`."""

    def __init__(self, action: str = "accept", content: Mapping[str, Any] | None = None) -> None:
        self.action = action
        self.content = content
        self.forms: list[Mapping[str, Any]] = []

    async def __call__(
        self, _context: object, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.forms.append(params.requested_schema)
        return types.ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


async def asked(
    form: object, user: Client, mode: str = "auto"
) -> tuple[list[Answer[Any]], types.CallToolResult]:
    """A tool asking for `form`, called once through the SDK client; its answers and result."""
    answers: list[Answer[Any]] = []
    module: ToolModule[Any] = ToolModule("desk")

    @module.tool
    async def book(ask: Ask) -> str:
        """Ask the user for the booking."""
        answers.append(await ask.user("Book a room?", form))
        return "asked"

    async with connect([module], elicitation_callback=user, mode=mode) as client:
        result = await client.call_tool("desk__book", {})
    return answers, result


class TestAFormAskedAsAClass:
    @pytest.mark.parametrize("kind", BOOKINGS, ids=lambda kind: kind.__name__)
    @pytest.mark.parametrize("mode", ["legacy", "auto"])
    async def test_the_client_gets_the_flat_form_and_the_tool_an_instance(
        self, kind: type[Any], mode: str
    ) -> None:
        """In both eras, each kind of class becomes the same form, its answer an instance."""
        user = Client(content={"guest": "Ann", "nights": 2, "extras": ["parking"]})
        answers, result = await asked(kind, user, mode)
        assert text_of(result) == "asked", result.content
        assert user.forms == [form_of(kind)]
        check_form(user.forms[0])
        (answer,) = answers
        assert answer.accepted
        assert answer.content == {"guest": "Ann", "nights": 2, "extras": ["parking"]}
        assert isinstance(answer.data, dict if kind is TypedDictBooking else kind)
        assert field(answer.data, "guest") == "Ann"
        assert field(answer.data, "nights") == 2
        assert field(answer.data, "extras") == ["parking"]
        if kind is not TypedDictBooking:  # a TypedDict has no defaults: absent keys stay so
            assert (field(answer.data, "room"), field(answer.data, "note")) == (Room.SINGLE, None)

    async def test_choices_arrive_as_the_types_values(self) -> None:
        """An Enum field's answer is the member, a date field's a date."""

        @attrs.frozen
        class Stay:
            room: Room
            arrival: datetime.date

        user = Client(content={"room": "double", "arrival": "2026-05-09"})
        answers, _ = await asked(Stay, user)
        assert user.forms[0]["properties"]["arrival"] == {"type": "string", "format": "date"}
        assert answers[0].data == Stay(Room.DOUBLE, datetime.date(2026, 5, 9))

    async def test_a_pydantic_fields_words_and_default_are_the_forms(self) -> None:
        class Feedback(pydantic.BaseModel):
            score: int = Field(3, title="Score", description="From 1 to 5", ge=1, le=5)

        user = Client(content={})
        answers, _ = await asked(Feedback, user)
        score: dict[str, Any] = {"type": "integer", "title": "Score", "description": "From 1 to 5"}
        score |= {"minimum": 1, "maximum": 5, "default": 3}
        assert user.forms == [{"type": "object", "properties": {"score": score}, "required": []}]
        assert answers[0].data == Feedback(score=3)

    @pytest.mark.parametrize("action", ["decline", "cancel"])
    async def test_a_declined_or_cancelled_form_has_no_data(self, action: str) -> None:
        answers, result = await asked(AttrsBooking, Client(action))
        assert text_of(result) == "asked"
        assert (answers[0].action, answers[0].content, answers[0].data) == (action, None, None)


class TestOneFlatValue:
    @pytest.mark.parametrize(
        ("asked_for", "schema", "sent", "data"),
        [
            (int, {"type": "integer"}, 3, 3),
            (str, {"type": "string"}, "tea", "tea"),
            (bool, {"type": "boolean"}, True, True),
            (float, {"type": "number"}, 2, 2.0),
            (Room, {"enum": ["single", "double"], "type": "string"}, "double", Room.DOUBLE),
            (Extra, {"enum": ["breakfast", "parking"], "type": "string"}, "parking", "parking"),
            (Nights, BOOKING_FORM["properties"]["nights"], 5, 5),
        ],
        ids=["int", "str", "bool", "float", "enum", "literal", "annotated"],
    )
    async def test_it_is_asked_as_the_field_value_and_returned_unwrapped(
        self, asked_for: object, schema: Mapping[str, Any], sent: object, data: object
    ) -> None:
        user = Client(content={"value": sent})
        answers, _ = await asked(asked_for, user)
        form = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
        assert user.forms == [form]
        assert answers[0].data == data
        assert type(answers[0].data) is type(data)


class TestAnAnswerThatDoesNotFit:
    @pytest.mark.parametrize(
        ("content", "says"),
        [
            ({"guest": "Ann", "nights": 0}, "$.nights: must be at least 1, got 0"),
            ({"guest": "Ann"}, "$.nights is required"),
            ({"guest": "Ann", "nights": 2, "room": "suite"}, "$.room: expected one of"),
            ({"guest": "Ann", "nights": 2, "extras": ["spa"]}, "$.extras[0]: expected one of"),
            ({"guest": "Ann", "nights": 2.5}, "'nights' with float, not integer"),
        ],
        ids=["bound", "missing", "choice", "choices", "type"],
    )
    @pytest.mark.parametrize("kind", BOOKINGS, ids=lambda kind: kind.__name__)
    async def test_it_is_an_error_naming_the_field(
        self, kind: type[Any], content: Mapping[str, Any], says: str
    ) -> None:
        """The client is not trusted: the call's result says what was wrong; no data."""
        answers, result = await asked(kind, Client(content=content))
        assert answers == []
        assert result.is_error
        assert "cannot ask the user" in text_of(result)
        assert says in text_of(result)

    async def test_the_classs_own_validator_is_an_error_too(self) -> None:
        @attrs.frozen
        class Party:
            size: int = attrs.field(validator=attrs.validators.lt(10))

        _, result = await asked(Party, Client(content={"size": 12}))
        assert result.is_error
        assert "the client's answer makes no" in text_of(result)
        assert "'size' must be < 10: 12" in text_of(result)


class TestAJsonSchemaForm:
    async def test_it_is_answered_as_before_without_data(self) -> None:
        """A dict schema still works: the same `Answer`, its content as sent, no data."""
        form = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        user = Client(content={"ok": True})
        answers, _ = await asked(form, user)
        assert user.forms == [form]
        assert answers == [Answer("accept", {"ok": True})]
        assert answers[0].data is None


@attrs.frozen
class Address:
    street: str


@attrs.frozen
class Nested:
    name: str
    address: Address


@dataclasses.dataclass
class Settings:
    limits: dict[str, int]


class Tagged(pydantic.BaseModel):
    tags: list[str]


@dataclasses.dataclass
class Numbered:
    level: Literal[1, 2, 3]


class TestAFormThatCannotBeFlat:
    @pytest.mark.parametrize(
        ("asked_for", "names"),
        [
            (Nested, "Nested.address (Address)"),
            (Settings, "Settings.limits (dict[str, int])"),
            (Tagged, "Tagged.tags (list[str])"),
            (Numbered, "Numbered.level (typing.Literal[1, 2, 3])"),
            (dict[str, int], "dict[str, int]"),
            (list[int], "list[int]"),
            (Address | None, "Address | None"),
        ],
        ids=["nested", "dict", "list", "number-choices", "dict-value", "list-value", "optional"],
    )
    async def test_it_is_refused_at_the_call_of_ask_user(
        self, asked_for: object, names: str
    ) -> None:
        """ValueError naming the field and what to write, before any client is asked.

        The `Ask` has no client: being refused with ValueError, not CannotAskError, shows
        the form is checked before anything is sent.
        """
        with pytest.raises(ValueError, match="cannot ask the user for") as refused:
            await Ask().user("Fill this in", asked_for)
        assert not isinstance(refused.value, CannotAskError)
        assert names in str(refused.value)
        assert "a form field is a str, int, float, bool" in str(refused.value)
        assert "a nested class's fields in a form of their own" in str(refused.value)

    async def test_through_the_server_the_tools_result_says_so_and_nobody_is_asked(
        self,
    ) -> None:
        user = Client(content={})
        answers, result = await asked(Nested, user)
        assert (answers, user.forms) == ([], [])
        assert result.is_error
        assert "Nested.address (Address)" in text_of(result)
