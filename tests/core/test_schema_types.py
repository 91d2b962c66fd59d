"""The types JSON lacks, in schemas and strict binding (actors._schema).

Each of datetime, date, UUID, Decimal, bytes and Path travels as a string of
one syntax, described by its schema; a pydantic model by pydantic's schema.
What a client that checks formats accepts is exactly what the handler
accepts, and what a handler returns is data its output schema describes.

The module uses string annotations, so every handler here also proves that
`signature_of` resolves them.
"""

from __future__ import annotations

import base64
import calendar
import datetime as dt
import decimal
import enum
import json
import re
import subprocess
import sys
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path, PurePath, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any

import attrs
import jsonschema
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import ToolModule, open_runtime
from actors._errors import ArgumentsError
from actors._schema import output_schema_of, signature_of, structured_data
from protocol import CallResult

from .test_tool_metadata import listed_client

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def handler_taking(annotation: object) -> Callable[..., None]:
    """A handler whose one argument, ``value``, is annotated `annotation`."""

    def handler(state: object, value: Any) -> None: ...

    handler.__annotations__ = {"state": object, "value": annotation, "return": None}
    return handler


def schema_for(annotation: object) -> dict[str, Any]:
    return dict(signature_of(handler_taking(annotation)).input_schema)


def bound(annotation: object, value: object) -> Any:
    return signature_of(handler_taking(annotation)).bind({"value": value})["value"]


def raises_exactly(message: str) -> pytest.RaisesExc[ArgumentsError]:
    """Expect an ArgumentsError whose message is exactly `message`."""
    return pytest.raises(ArgumentsError, match=f"^{re.escape(message)}$")


# ---- an independent reading of RFC 3339 ----------------------------------------------
# jsonschema checks "date-time" only with a package this project does not need; this
# checker reads the RFC's grammar (section 5.6) and ranges, apart from the code under
# test. It refuses leap seconds (:60), which RFC 3339 allows and Python cannot hold:
# the one place where the handler is stricter than the RFC, as the guide says.

_RFC3339 = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[Tt]"
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})(?:\.\d+)?"
    r"(?:[Zz]|[+-](?P<offset_hour>\d{2}):(?P<offset_minute>\d{2}))",
    re.ASCII,
)


def is_rfc3339_date_time(text: object) -> bool:
    if not isinstance(text, str) or not (found := _RFC3339.fullmatch(text)):
        return False
    part = {name: int(value) for name, value in found.groupdict(default="0").items()}
    return (
        part["year"] >= 1
        and 1 <= part["month"] <= 12
        and 1 <= part["day"] <= calendar.monthrange(part["year"], part["month"])[1]
        and part["hour"] <= 23
        and part["minute"] <= 59
        and part["second"] <= 59
        and part["offset_hour"] <= 23
        and part["offset_minute"] <= 59
    )


FORMATS = jsonschema.FormatChecker()  # every format jsonschema knows: date and uuid here
FORMATS.checks("date-time")(is_rfc3339_date_time)


def accepts(schema: Mapping[str, Any], instance: object) -> bool:
    """Whether a client checking formats would accept `instance`."""
    return jsonschema.Draft202012Validator(schema, format_checker=FORMATS).is_valid(instance)


# ---- the types -----------------------------------------------------------------------


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2


@attrs.frozen
class Booking:
    when: datetime
    day: date
    id: uuid.UUID
    price: Decimal
    ticket: bytes
    folder: Path
    priority: Priority
    dates: list[date]
    ids: dict[str, uuid.UUID]
    note: Decimal | None = None


EXAMPLE = Booking(
    when=datetime(2026, 5, 9, 14, 30, tzinfo=timezone(timedelta(hours=2))),
    day=date(2026, 5, 9),
    id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    price=Decimal("12.50"),
    ticket=b"\x00\xffhi",
    folder=Path("trips/2026"),
    priority=Priority.HIGH,
    dates=[date(2026, 1, 1)],
    ids={"a": uuid.UUID(int=1)},
)
EXAMPLE_DATA = {
    "when": "2026-05-09T14:30:00+02:00",
    "day": "2026-05-09",
    "id": "12345678-1234-5678-1234-567812345678",
    "price": "12.50",
    "ticket": "AP9oaQ==",
    "folder": "trips/2026",
    "priority": "high",
    "dates": ["2026-01-01"],
    "ids": {"a": "00000000-0000-0000-0000-000000000001"},
    "note": None,
}

DECIMAL_PATTERN = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$"
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
SCHEMAS: dict[object, dict[str, Any]] = {
    datetime: {"type": "string", "format": "date-time"},
    date: {"type": "string", "format": "date"},
    uuid.UUID: {"type": "string", "format": "uuid"},
    Decimal: {"type": "string", "pattern": DECIMAL_PATTERN},
    bytes: {"type": "string", "contentEncoding": "base64", "pattern": BASE64_PATTERN},
    Path: {"type": "string", "minLength": 1},
    PurePosixPath: {"type": "string", "minLength": 1},
}


class TestSchemas:
    @pytest.mark.parametrize("annotation", list(SCHEMAS), ids=str)
    def test_each_type_is_a_string_of_its_form(self, annotation: object) -> None:
        """The same schema for arguments and for returned data; valid JSON Schema 2020-12."""
        schema = schema_for(annotation)
        assert schema["properties"]["value"] == SCHEMAS[annotation]
        jsonschema.Draft202012Validator.check_schema(schema)

        def give(state: object) -> None: ...

        give.__annotations__ = {"state": object, "return": dict[str, annotation]}  # type: ignore[valid-type]
        output = output_schema_of(give)
        assert output is not None
        assert output["additionalProperties"] == SCHEMAS[annotation]

    def test_containers_optionals_and_nested_classes_of_them(self) -> None:
        """Lists, dicts, optionals, descriptions and attrs classes compose with them."""
        assert schema_for(list[date])["properties"]["value"] == {
            "type": "array",
            "items": SCHEMAS[date],
        }
        assert schema_for(dict[str, uuid.UUID])["properties"]["value"] == {
            "type": "object",
            "additionalProperties": SCHEMAS[uuid.UUID],
        }
        assert schema_for(Decimal | None)["properties"]["value"] == {
            "anyOf": [SCHEMAS[Decimal], {"type": "null"}]
        }
        assert schema_for(Annotated[datetime, "When it starts."])["properties"]["value"] == {
            **SCHEMAS[datetime],
            "description": "When it starts.",
        }
        nested = schema_for(list[Booking])["properties"]["value"]["items"]
        assert nested["properties"]["ticket"] == SCHEMAS[bytes]
        assert nested["properties"]["priority"] == {"enum": ["low", "high"], "type": "string"}

    def test_defaults_are_shown_in_their_json_form(self) -> None:
        def plan(
            state: object,
            day: date = date(2026, 1, 1),
            price: Decimal = Decimal("0.10"),
            folder: Path = Path("."),
        ) -> None: ...

        properties = signature_of(plan).input_schema["properties"]
        assert [properties[name]["default"] for name in ("day", "price", "folder")] == [
            "2026-01-01",
            "0.10",
            ".",
        ]

    def test_time_is_still_refused(self) -> None:
        """A time of day has no RFC 3339 form without an offset: use a datetime or a str."""
        with pytest.raises(TypeError, match=r"parameter 'value': unsupported annotation time"):
            signature_of(handler_taking(dt.time))


class TestBinding:
    def test_a_whole_booking_binds_and_returns_as_the_same_data(self) -> None:
        """Arguments bind into the types; the same value returned is the same JSON."""
        signature = signature_of(handler_taking(Booking))  # its fields are the arguments
        assert signature.bind(EXAMPLE_DATA) == {"value": EXAMPLE}
        assert structured_data(EXAMPLE) == EXAMPLE_DATA
        assert accepts(signature.input_schema, EXAMPLE_DATA)

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2026-05-09T14:30:00Z", datetime(2026, 5, 9, 14, 30, tzinfo=dt.UTC)),
            ("2026-05-09t14:30:00z", datetime(2026, 5, 9, 14, 30, tzinfo=dt.UTC)),
            (
                "2026-05-09T14:30:00.25-05:30",
                datetime(2026, 5, 9, 14, 30, 0, 250000, timezone(-timedelta(hours=5.5))),
            ),
        ],
    )
    def test_datetimes_in_rfc3339_forms(self, text: str, expected: datetime) -> None:
        value = bound(datetime, text)
        assert (value, value.utcoffset()) == (expected, expected.utcoffset())

    def test_the_other_types(self) -> None:
        assert bound(date, "2024-02-29") == date(2024, 2, 29)
        upper = "ABCDEF00-1234-5678-9ABC-DEF012345678"
        assert bound(uuid.UUID, upper) == uuid.UUID(upper)
        price = bound(Decimal, "12.50")
        assert (price, str(price)) == (Decimal("12.50"), "12.50")  # its digits kept
        assert bound(Decimal, "-1.5E-7") == Decimal("-1.5E-7")
        assert bound(bytes, "") == b""
        assert bound(bytes, "aGk=") == b"hi"
        assert type(bound(Path, "a/b")) is type(Path("a/b"))
        assert bound(PurePosixPath, "../etc/passwd") == PurePosixPath("../etc/passwd")
        assert bound(Priority, "low") is Priority.LOW
        assert bound(Level, 2) is Level.TWO

    def test_a_path_is_only_text(self, tmp_path: Path) -> None:
        """No file system access: nothing is resolved, checked or created."""
        value = bound(Path, str(tmp_path / "missing" / ".." / "x"))
        assert value == tmp_path / "missing" / ".." / "x"
        assert list(tmp_path.iterdir()) == []


class TestRefusals:
    @pytest.mark.parametrize(
        ("annotation", "value", "message"),
        [
            (
                date,
                "2026-13-01",
                "expected a date string (YYYY-MM-DD), got '2026-13-01' (month must be in 1..12)",
            ),
            (date, "20260501", "expected a date string (YYYY-MM-DD), got '20260501'"),
            (date, 20260501, "expected a date string (YYYY-MM-DD), got int"),
            (
                datetime,
                "2026-05-09T14:30:00",
                "expected an RFC 3339 date-time string with a UTC offset, such as "
                "'2026-05-09T14:30:00Z', got '2026-05-09T14:30:00' (no UTC offset: end it "
                "with Z or +HH:MM)",
            ),
            (
                datetime,
                "2026-05-09T24:00:00Z",
                "expected an RFC 3339 date-time string with a UTC offset, such as "
                "'2026-05-09T14:30:00Z', got '2026-05-09T24:00:00Z' (hour must be in 0..23)",
            ),
            (
                datetime,
                "2026-05-09",
                "expected an RFC 3339 date-time string with a UTC offset, such as "
                "'2026-05-09T14:30:00Z', got '2026-05-09'",
            ),
            (
                datetime,
                1778336400,
                "expected an RFC 3339 date-time string with a UTC offset, such as "
                "'2026-05-09T14:30:00Z', got int",
            ),
            (
                uuid.UUID,
                "not-a-uuid",
                "expected a UUID string (8-4-4-4-12 hex digits), got 'not-a-uuid'",
            ),
            (
                uuid.UUID,
                "{12345678-1234-5678-1234-567812345678}",
                "expected a UUID string (8-4-4-4-12 hex digits), got "
                "'{12345678-1234-5678-1234-567812345678}'",
            ),
            (Decimal, 1.5, "expected a decimal string, such as '12.50', got float"),
            (Decimal, 12, "expected a decimal string, such as '12.50', got int"),
            (Decimal, "NaN", "expected a decimal string, such as '12.50', got 'NaN'"),
            (Decimal, "1,5", "expected a decimal string, such as '12.50', got '1,5'"),
            (Decimal, " 1", "expected a decimal string, such as '12.50', got ' 1'"),
            (bytes, "aGk", "expected a base64 string, got 'aGk'"),
            (bytes, "aGk=\n", "expected a base64 string, got 'aGk=\\n'"),
            (bytes, "a-_=", "expected a base64 string, got 'a-_='"),  # URL-safe alphabet
            (bytes, "==", "expected a base64 string, got '=='"),
            (bytes, ["aGk="], "expected a base64 string, got list"),
            (Path, "", "expected a path string, got '' (empty; '.' names the current folder)"),
            (Path, None, "expected a path string, got null"),
            (Priority, "medium", "expected one of 'low', 'high', got 'medium'"),
            (Priority, "LOW", "expected one of 'low', 'high', got 'LOW'"),
            (
                date | None,
                "tomorrow",
                "expected a date string (YYYY-MM-DD) or null, got 'tomorrow'",
            ),
        ],
    )
    def test_a_bad_value_is_named_with_what_was_expected(
        self, annotation: object, value: object, message: str
    ) -> None:
        with raises_exactly(f"invalid arguments: $.value: {message}"):
            bound(annotation, value)

    def test_nested_values_are_named_by_their_path(self) -> None:
        data = {**EXAMPLE_DATA, "dates": ["2026-01-01", "2026-02-30"], "id": "x"}
        with raises_exactly(
            "invalid arguments: "
            "$.value[0].id: expected a UUID string (8-4-4-4-12 hex digits), got 'x'; "
            "$.value[0].dates[1]: expected a date string (YYYY-MM-DD), got '2026-02-30' "
            "(day is out of range for month)"
        ):
            bound(list[Booking], [data])


class TestReturnedData:
    def test_a_naive_datetime_has_no_json_form(self) -> None:
        """Returned data follows the argument rule: a time without an offset is no instant."""
        naive = attrs.evolve(EXAMPLE, when=datetime(2026, 5, 9, 14, 30))
        with pytest.raises(
            ValueError,
            match=r"^the datetime 2026-05-09T14:30:00 has no UTC offset, so it names no "
            r"instant; make it aware, e.g. datetime.now\(timezone.utc\)$",
        ):
            structured_data(naive)

    @pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "sNaN"])
    def test_a_decimal_that_is_not_finite_has_no_json_form(self, value: str) -> None:
        with pytest.raises(ValueError, match=rf"^Decimal\('{value}'\) has no JSON form"):
            structured_data(attrs.evolve(EXAMPLE, price=Decimal(value)))

    def test_an_offset_with_seconds_is_written_in_utc(self) -> None:
        """RFC 3339 offsets are whole minutes; the instant is kept, in UTC."""
        odd = timezone(timedelta(minutes=19, seconds=32))  # Amsterdam's, before 1937
        data = structured_data({"when": datetime(1930, 1, 1, 12, 0, tzinfo=odd)})
        assert data == {"when": "1930-01-01T11:40:28+00:00"}

    def test_mappings_are_written_by_their_values_types(self) -> None:
        data = structured_data({"day": date(2026, 1, 2), "tags": [b"x"], "n": 1, "s": "s"})
        assert data == {"day": "2026-01-02", "tags": ["eA=="], "n": 1, "s": "s"}

    def test_text_and_call_results_are_no_data(self) -> None:
        assert structured_data("text") is None
        assert structured_data(CallResult.text("text")) is None
        assert structured_data(42) is None


# ---- pydantic ------------------------------------------------------------------------


class Item(pydantic.BaseModel):
    name: str
    quantity: int = 1


class Order(pydantic.BaseModel):
    items: list[Item]
    when: datetime


class Closed(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    code: str


class Tree(pydantic.BaseModel):
    name: str
    children: list[Tree] = []


def two_items() -> tuple[type[pydantic.BaseModel], type[pydantic.BaseModel]]:
    """Two different models both named Item."""

    def first() -> type[pydantic.BaseModel]:
        class Item(pydantic.BaseModel):
            a: int

        return Item

    def second() -> type[pydantic.BaseModel]:
        class Item(pydantic.BaseModel):
            b: str

        return Item

    return first(), second()


def take_order(state: object, order: Order, code: Closed | None = None) -> Order:
    """Take an order."""
    return order


class TestPydanticModels:
    def test_the_schema_is_pydantics_with_its_definitions_at_the_root(self) -> None:
        schema = dict(signature_of(take_order).input_schema)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["order"] == {"$ref": "#/$defs/Order"}
        assert schema["properties"]["code"] == {
            "anyOf": [{"$ref": "#/$defs/Closed"}, {"type": "null"}],
            "default": None,
        }
        assert set(schema["$defs"]) == {"Order", "Item", "Closed"}
        assert schema["$defs"]["Closed"]["additionalProperties"] is False
        assert schema["$defs"]["Order"]["properties"]["when"]["format"] == "date-time"
        good = {"order": {"items": [{"name": "tea"}], "when": "2026-05-09T14:30:00Z"}}
        assert accepts(schema, good)
        assert not accepts(schema, {"order": {"items": [{"name": 3}], "when": "x"}})

    def test_models_of_one_name_keep_their_own_definitions(self) -> None:
        first, second = two_items()

        def both(state: object, x: Any, y: Any) -> None: ...

        both.__annotations__ = {"state": object, "x": first, "y": second, "return": None}
        schema = signature_of(both).input_schema
        x, y = (schema["properties"][name]["$ref"] for name in ("x", "y"))
        assert x != y
        assert accepts(schema, {"x": {"a": 1}, "y": {"b": "s"}})
        assert not accepts(schema, {"x": {"b": "s"}, "y": {"a": 1}})

    def test_arguments_bind_into_the_model(self) -> None:
        arguments = {"order": {"items": [{"name": "tea"}], "when": "2026-05-09T14:30:00Z"}}
        order = signature_of(take_order).bind(arguments)["order"]
        assert order == Order(
            items=[Item(name="tea")], when=datetime(2026, 5, 9, 14, 30, tzinfo=dt.UTC)
        )

    def test_validation_is_strict_and_errors_carry_paths(self) -> None:
        """No coercion: "2" is no integer there either; each problem is named by its path."""
        arguments = {
            "order": {"items": [{"name": "tea"}, {"quantity": "2"}], "when": "2026-05-09"},
            "code": {"code": "x", "extra": 1},
        }
        with raises_exactly(
            "invalid arguments: $.order.items[1].name is required; "
            "$.order.items[1].quantity: Input should be a valid integer; "
            "$.order.when: Input should be a valid datetime, invalid datetime separator, "
            "expected `T`, `t`, `_` or space; "
            "$.code: unexpected key 'extra'"
        ):
            signature_of(take_order).bind(arguments)

    def test_a_model_refuses_what_is_no_object(self) -> None:
        with raises_exactly(
            "invalid arguments: $.order: Input should be an object; $.code: Input should be "
            "an object"
        ):
            signature_of(take_order).bind({"order": [], "code": "x"})

    def test_a_returned_model_is_the_output_schema(self) -> None:
        """Its own object schema at the root, as MCP requires; definitions of parts beside."""
        schema = output_schema_of(take_order)
        assert schema is not None
        jsonschema.Draft202012Validator.check_schema(schema)
        assert (schema["type"], schema["title"], set(schema["$defs"])) == (
            "object",
            "Order",
            {"Item"},
        )
        order = Order(items=[Item(name="tea")], when=datetime(2026, 5, 9, tzinfo=dt.UTC))
        data = structured_data(order)
        assert data == {
            "items": [{"name": "tea", "quantity": 1}],
            "when": "2026-05-09T00:00:00Z",
        }
        assert accepts(schema, data)

    def test_a_recursive_model_keeps_its_definition(self) -> None:
        def grow(state: object) -> Tree: ...

        schema = output_schema_of(grow)
        assert schema is not None
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
        tree = Tree(name="a", children=[Tree(name="b")])
        assert accepts(schema, structured_data(tree))
        assert not accepts(schema, {"name": "a", "children": [{"name": 1}]})

    def test_the_core_never_imports_pydantic(self) -> None:
        """Only an annotation that is a model, which needs pydantic imported, uses it."""
        program = (
            "import datetime, decimal, sys\n"
            "from actors import ToolModule\n"
            "module = ToolModule('m', lambda context: None)\n"
            "@module.tool\n"
            "def f(state: None, when: datetime.datetime, price: decimal.Decimal) -> dict:\n"
            "    'F.'\n"
            "    return {}\n"
            "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
        )
        subprocess.run([sys.executable, "-c", program], check=True)


# ---- over MCP ------------------------------------------------------------------------


def bookings() -> ToolModule[None]:
    module: ToolModule[None] = ToolModule("bookings", lambda _context: None)

    @module.tool
    def book(state: None, booking: Booking) -> Booking:
        """Book, and return the booking (its fields are the arguments)."""
        return booking

    @module.tool
    def order(state: None, order: Order) -> Order:
        """Order, and return the order."""
        return order

    return module


class TestOverMcp:
    async def test_listed_schemas_and_returned_data_agree(self) -> None:
        """The SDK client validates each result against the listed output schema."""
        async with listed_client(bookings()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            for tool in tools.values():
                jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            booked = await client.call_tool("bookings__book", {**EXAMPLE_DATA, "__sessionId": "s"})
            ordered = await client.call_tool(
                "bookings__order",
                {
                    "order": {"items": [{"name": "tea"}], "when": "2026-05-09T14:30:00+02:00"},
                    "__sessionId": "s",
                },
            )
            refused = await client.call_tool(
                "bookings__book", {**EXAMPLE_DATA, "day": "x", "__sessionId": "s"}
            )
        assert booked.structured_content == EXAMPLE_DATA
        assert json.loads(booked.content[-1].text) == EXAMPLE_DATA
        assert ordered.structured_content == {
            "items": [{"name": "tea", "quantity": 1}],
            "when": "2026-05-09T14:30:00+02:00",
        }
        assert refused.is_error
        assert refused.content[0].text == (
            "invalid arguments: $.day: expected a date string (YYYY-MM-DD), got 'x'"
        )

    async def test_a_naive_datetime_returned_is_a_tool_error(self) -> None:
        module: ToolModule[None] = ToolModule("clock", lambda _context: None)

        @module.tool
        def now(state: None) -> dict[str, datetime]:
            """The time, but naive."""
            return {"now": datetime(2026, 5, 9, 14, 30)}

        async with open_runtime([module]) as runtime:
            result = await runtime.call_tool("clock__now", {"__sessionId": "s"})
        assert result.is_error
        assert "has no UTC offset" in result.first_text


# ---- properties ----------------------------------------------------------------------

_offsets = st.integers(-(24 * 3600 - 1), 24 * 3600 - 1).map(
    lambda seconds: timezone(timedelta(seconds=seconds))
)
VALUES: dict[object, st.SearchStrategy[Any]] = {
    # From year 2 to 9998: an offset in seconds is written in UTC, which must exist too.
    datetime: st.datetimes(datetime(2, 1, 1), datetime(9998, 12, 31), timezones=_offsets),
    date: st.dates(),
    uuid.UUID: st.uuids(),
    Decimal: st.decimals(allow_nan=False, allow_infinity=False),
    bytes: st.binary(max_size=64),
    PurePosixPath: st.text(min_size=1, max_size=20).map(PurePosixPath),
}

# Strings near each syntax: valid ones and small slips of them.
NEAR: dict[object, st.SearchStrategy[str]] = {
    datetime: st.from_regex(
        r"[0-9]{3,5}-[0-9]{1,2}-[0-9]{1,2}[Tt _][0-9]{1,2}:[0-9]{2}(:[0-9]{2})?(\.[0-9]{0,9})?"
        r"([Zz]|[+-][0-9]{1,2}:?[0-9]{2})?",
        fullmatch=True,
    ),
    date: st.from_regex(
        r"[0-9]{3,5}-?[0-9]{1,2}-?[0-9]{1,3}|[0-9]{4}-W[0-9]{2}-[0-9]", fullmatch=True
    ),
    uuid.UUID: st.from_regex(
        r"[{]?[0-9a-fA-Fg-]{30,38}[}]?|urn:uuid:[0-9a-f-]{36}", fullmatch=True
    ),
    Decimal: st.from_regex(
        r"[-+]?[0-9_]{0,4}(\.[0-9]{0,3})?([eE][-+]?[0-9]{0,3})?|[-+]?(NaN|Infinity|inf)",
        fullmatch=True,
    ),
    bytes: st.from_regex(r"[A-Za-z0-9+/=_ -]{0,10}", fullmatch=True),
    PurePosixPath: st.text(max_size=3),
}


def binds(annotation: object, value: object) -> bool:
    try:
        bound(annotation, value)
    except ArgumentsError:
        return False
    return True


class TestProperties:
    @pytest.mark.parametrize("annotation", list(VALUES), ids=str)
    @given(data=st.data())
    def test_values_go_out_and_come_back_equal(
        self, annotation: object, data: st.DataObject
    ) -> None:
        """Written as JSON, a value fits both schemas, and binds to an equal value."""
        value = data.draw(VALUES[annotation])
        written = json.loads(json.dumps(structured_data({"value": value})))
        schema = schema_for(annotation)
        assert accepts(schema, written)
        assert accepts(schema["properties"]["value"], written["value"])
        back = bound(annotation, written["value"])
        assert back == value
        if isinstance(value, Decimal):
            assert str(back) == str(value)  # every digit, the exponent too

    @pytest.mark.parametrize("annotation", list(NEAR), ids=str)
    @given(data=st.data())
    def test_the_handler_accepts_exactly_what_the_schema_accepts(
        self, annotation: object, data: st.DataObject
    ) -> None:
        text = data.draw(NEAR[annotation] | VALUES[annotation].map(str))
        assert accepts(schema_for(annotation), {"value": text}) == binds(annotation, text), text

    @given(st.text(alphabet="0123456789-:TZz+. ", max_size=30))
    def test_any_text_a_datetime_accepts_is_aware(self, text: str) -> None:
        if binds(datetime, text):
            assert bound(datetime, text).utcoffset() is not None


def test_bytes_written_as_standard_base64() -> None:
    data = structured_data({"value": b"\xfb\xff"})
    assert data == {"value": base64.b64encode(b"\xfb\xff").decode()} == {"value": "+/8="}


def test_decimal_context_is_untouched() -> None:
    """Parsing uses no context of its own: a caller's precision is not rounded."""
    digits = "1." + "3" * 60
    assert str(bound(Decimal, digits)) == digits
    assert decimal.getcontext().prec == 28


def test_purepath_annotations_keep_their_flavour() -> None:
    assert type(bound(PurePath, "a")) is type(PurePath("a"))
