"""Input schemas and strict argument binding (actors._schema).

The module uses string annotations throughout, so every handler here also
proves that `signature_of` resolves them.
"""

from __future__ import annotations

import copy
import enum
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors._errors import ArgumentsError
from actors._schema import Signature, signature_of

# Needed at run time: signature_of resolves the string annotations in this module.
from protocol import ToolContext  # noqa: TC001

if TYPE_CHECKING:
    from collections.abc import Callable


def schema_of(handler: Any) -> dict[str, Any]:
    return dict(signature_of(handler).input_schema)


def property_of(handler: Any, name: str) -> Any:
    return signature_of(handler).input_schema["properties"][name]


def handler_taking(annotation: object) -> Callable[..., None]:
    """A handler whose one argument, ``value``, is annotated `annotation`."""

    def handler(state: object, value: Any) -> None: ...

    handler.__annotations__ = {"state": object, "value": annotation, "return": None}
    return handler


def raises_exactly(message: str) -> pytest.RaisesExc[ArgumentsError]:
    """Expect an ArgumentsError whose message is exactly `message`."""
    return pytest.raises(ArgumentsError, match=f"^{re.escape(message)}$")


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2


class Mixed(enum.Enum):
    NAME = "name"
    NUMBER = 3


@attrs.frozen
class Point:
    x: int
    y: Annotated[float, "metres north"] = 0.0


@attrs.frozen
class Place:
    name: str
    at: Point
    aliases: list[str] = attrs.Factory(list)


@attrs.frozen
class AddArgs:
    a: int
    b: int = 0


@attrs.frozen
class Positive:
    count: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.frozen
class Event:
    when: complex


@attrs.frozen
class Node:
    children: list[Node]


def create_goal(
    state: object,
    goal: str,
    priority: int = 1,
    tags: list[str] | None = None,
    *,
    ctx: ToolContext,
) -> None:
    """The issue's example handler: context last and keyword-only."""


# Module level, since a class body would mangle the double underscore.
def takes_a_context_field(state: object, __sessionId: str) -> None: ...


def takes_variadic_positional(state: object, *values: int) -> None: ...


def takes_variadic_keywords(state: object, **values: int) -> None: ...


def takes_positional_only(state: object, value: int, /) -> None: ...


def takes_state_by_keyword(*, state: object) -> None: ...


def takes_nothing() -> None: ...


class TestScalarSchemas:
    @pytest.mark.parametrize(
        ("annotation", "json_type"),
        [(str, "string"), (int, "integer"), (float, "number"), (bool, "boolean")],
    )
    def test_scalars_map_to_their_json_type(self, annotation: type, json_type: str) -> None:
        """Each scalar annotation becomes the matching JSON type."""
        assert property_of(handler_taking(annotation), "value") == {"type": json_type}

    def test_any_allows_anything(self) -> None:
        """Any becomes the empty schema."""

        def handler(state: object, value: Any) -> None: ...

        assert property_of(handler, "value") == {}

    def test_annotated_text_becomes_the_description(self) -> None:
        """A string in Annotated metadata describes the property."""

        def handler(state: object, goal: Annotated[str, "what to achieve"]) -> None: ...

        assert property_of(handler, "goal") == {"type": "string", "description": "what to achieve"}


class TestContainerSchemas:
    def test_list_and_tuple_are_arrays(self) -> None:
        """list[T] and tuple[T, ...] are arrays of T."""

        def handler(state: object, names: list[str], sizes: tuple[int, ...]) -> None: ...

        assert property_of(handler, "names") == {"type": "array", "items": {"type": "string"}}
        assert property_of(handler, "sizes") == {"type": "array", "items": {"type": "integer"}}

    def test_dict_is_an_object_of_values(self) -> None:
        """dict[str, T] is an object whose every value is a T."""

        def handler(state: object, scores: dict[str, float]) -> None: ...

        assert property_of(handler, "scores") == {
            "type": "object",
            "additionalProperties": {"type": "number"},
        }

    @pytest.mark.parametrize("annotation", [int | None, Optional[int]])  # noqa: UP045
    def test_optional_allows_null(self, annotation: object) -> None:
        """T | None and Optional[T] are T or null."""
        assert property_of(handler_taking(annotation), "value") == {
            "anyOf": [{"type": "integer"}, {"type": "null"}]
        }

    def test_literal_is_an_enum(self) -> None:
        """A Literal lists its values, typed when they share a JSON type."""

        def handler(state: object, mode: Literal["fast", "slow"], n: Literal[1, "one"]) -> None: ...

        assert property_of(handler, "mode") == {"enum": ["fast", "slow"], "type": "string"}
        assert property_of(handler, "n") == {"enum": [1, "one"]}

    def test_enum_lists_its_values(self) -> None:
        """An Enum lists its members' values, typed when they share a JSON type."""

        def handler(state: object, priority: Priority, level: Level, mixed: Mixed) -> None: ...

        assert property_of(handler, "priority") == {"enum": ["low", "high"], "type": "string"}
        assert property_of(handler, "level") == {"enum": [1, 2], "type": "integer"}
        assert property_of(handler, "mixed") == {"enum": ["name", 3]}

    def test_nested_attrs_class_is_a_closed_object(self) -> None:
        """A nested attrs class is an object with its own required list and no extra keys."""

        def handler(state: object, place: Place, note: str) -> None: ...

        point = {
            "type": "object",
            "properties": {
                "x": {"type": "integer"},
                "y": {"type": "number", "description": "metres north", "default": 0.0},
            },
            "required": ["x"],
            "additionalProperties": False,
        }
        assert property_of(handler, "place") == {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "at": point,
                "aliases": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["name", "at"],
            "additionalProperties": False,
        }


class TestRequiredAndDefaults:
    def test_the_issue_example(self) -> None:
        """Parameters without a default are required; JSON defaults are shown."""
        assert schema_of(create_goal) == {
            "type": "object",
            "properties": {
                "goal": {"type": "string"},
                "priority": {"type": "integer", "default": 1},
                "tags": {
                    "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                    "default": None,
                },
            },
            "required": ["goal"],
            "additionalProperties": False,
        }

    def test_defaults_are_shown_as_json(self) -> None:
        """Enum, tuple and attrs defaults are shown as the JSON a caller would send."""

        def handler(
            state: object,
            priority: Priority = Priority.LOW,
            sizes: tuple[int, ...] = (1, 2),
            at: Point = Point(1),
        ) -> None: ...

        properties = signature_of(handler).input_schema["properties"]
        assert properties["priority"]["default"] == "low"
        assert properties["sizes"]["default"] == [1, 2]
        assert properties["at"]["default"] == {"x": 1, "y": 0.0}

    def test_a_default_without_json_form_is_not_shown(self) -> None:
        """A default JSON cannot carry leaves the property optional, without "default"."""
        marker = object()

        def handler(state: object, value: Any = marker) -> None: ...

        schema = signature_of(handler).input_schema
        assert schema["properties"]["value"] == {}
        assert schema["required"] == []

    def test_a_factory_default_is_optional_but_not_shown(self) -> None:
        """An attrs Factory makes its value per instance, so the schema shows none."""

        def handler(state: object, place: Place, note: str) -> None: ...

        place = property_of(handler, "place")
        assert "aliases" not in place["required"]
        assert "default" not in place["properties"]["aliases"]


class TestContextParameter:
    def test_it_is_reported_and_not_in_the_schema(self) -> None:
        """The ToolContext parameter is named in context_parameter and absent from the schema."""
        signature = signature_of(create_goal)
        assert signature.context_parameter == "ctx"
        assert "ctx" not in signature.input_schema["properties"]
        assert "ctx" not in signature.bind({"goal": "g"})

    def test_it_may_come_first(self) -> None:
        """The context parameter may sit anywhere after the state."""

        def handler(state: object, context: ToolContext, goal: str) -> None: ...

        signature = signature_of(handler)
        assert signature.context_parameter == "context"
        assert list(signature.input_schema["properties"]) == ["goal"]

    def test_it_is_optional(self) -> None:
        """A handler without a ToolContext parameter reports none."""

        def handler(state: object, goal: str) -> None: ...

        assert signature_of(handler).context_parameter is None

    def test_a_handler_may_take_only_the_context(self) -> None:
        """With only state and context, the tool takes an empty object."""

        def handler(state: object, ctx: ToolContext) -> None: ...

        signature = signature_of(handler)
        assert signature.input_schema["properties"] == {}
        assert signature.bind({}) == {}


class TestAttrsClassStyle:
    def test_the_class_fields_are_the_arguments(self) -> None:
        """A single attrs-class parameter makes the class's fields the arguments object."""

        def add(state: object, args: AddArgs, ctx: ToolContext) -> None: ...

        signature = signature_of(add)
        assert signature.input_schema == {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 0}},
            "required": ["a"],
            "additionalProperties": False,
        }
        assert signature.context_parameter == "ctx"

    def test_bind_passes_the_instance(self) -> None:
        """bind structures the arguments into the class, under the parameter's name."""

        def add(state: object, args: AddArgs) -> None: ...

        assert signature_of(add).bind({"a": 2}) == {"args": AddArgs(a=2, b=0)}

    def test_errors_name_the_class_fields(self) -> None:
        """Paths in errors start at the class's fields, not at the parameter."""

        def add(state: object, args: AddArgs) -> None: ...

        with raises_exactly("invalid arguments: $.b: expected an integer, got str"):
            signature_of(add).bind({"a": 1, "b": "2"})

    def test_class_validators_are_argument_errors(self) -> None:
        """A validator of the user's class rejects the call with an ArgumentsError."""

        def count(state: object, args: Positive) -> None: ...

        with pytest.raises(ArgumentsError, match=r"^invalid arguments: \$: 'count' must be > 0"):
            signature_of(count).bind({"count": 0})


class TestStrictScalars:
    @pytest.mark.parametrize(
        ("annotation", "value", "message"),
        [
            (str, 3, "expected a string, got int"),
            (str, None, "expected a string, got null"),
            (int, "3", "expected an integer, got str"),
            (int, True, "expected an integer, got bool"),
            (int, 1.5, "expected an integer, got float"),
            (float, "1.5", "expected a number, got str"),
            (float, False, "expected a number, got bool"),
            (bool, 1, "expected a boolean, got int"),
            (bool, "true", "expected a boolean, got str"),
            (int | None, "3", "expected an integer or null, got str"),
        ],
    )
    def test_no_coercion(self, annotation: object, value: object, message: str) -> None:
        """A value of another JSON type is an error, never converted."""
        with raises_exactly(f"invalid arguments: $.value: {message}"):
            signature_of(handler_taking(annotation)).bind({"value": value})

    def test_an_integer_is_a_number(self) -> None:
        """An int is accepted for a float and handed over as a float."""

        def handler(state: object, ratio: float) -> None: ...

        bound = signature_of(handler).bind({"ratio": 3})
        assert bound == {"ratio": 3.0}
        assert type(bound["ratio"]) is float

    def test_an_integer_too_large_for_a_float(self) -> None:
        """An int beyond float range is an error rather than an OverflowError."""

        def handler(state: object, ratio: float) -> None: ...

        with raises_exactly(
            "invalid arguments: $.ratio: expected a number, got an integer beyond its range"
        ):
            signature_of(handler).bind({"ratio": 10**400})


class TestStrictChoices:
    def test_literal_rejects_other_values(self) -> None:
        """A value outside a Literal is named with the allowed ones."""

        def handler(state: object, mode: Literal["fast", "slow"]) -> None: ...

        with raises_exactly(
            "invalid arguments: $.mode: expected one of 'fast', 'slow', got 'warp'"
        ):
            signature_of(handler).bind({"mode": "warp"})

    def test_true_is_not_one(self) -> None:
        """true does not pass for 1, although True == 1 in Python."""

        def handler(state: object, level: Level, n: Literal[1, 2]) -> None: ...

        with raises_exactly(
            "invalid arguments: $.level: expected one of 1, 2, got True; "
            "$.n: expected one of 1, 2, got True"
        ):
            signature_of(handler).bind({"level": True, "n": True})

    def test_enums_bind_to_members(self) -> None:
        """An Enum value binds to the member, IntEnum included."""

        def handler(state: object, priority: Priority, level: Level) -> None: ...

        bound = signature_of(handler).bind({"priority": "high", "level": 2})
        assert bound == {"priority": Priority.HIGH, "level": Level.TWO}
        assert type(bound["level"]) is Level


class TestStrictContainers:
    def test_a_string_is_not_an_array(self) -> None:
        """A string for a list is an error, not a list of characters."""

        def handler(state: object, tags: list[str]) -> None: ...

        with raises_exactly("invalid arguments: $.tags: expected an array, got str"):
            signature_of(handler).bind({"tags": "abc"})

    def test_item_errors_name_the_index(self) -> None:
        """A bad item is named by its index."""

        with raises_exactly("invalid arguments: $.tags[1]: expected a string, got null"):
            signature_of(create_goal).bind({"goal": "g", "tags": ["a", None]})

    def test_value_errors_name_the_key(self) -> None:
        """A bad dict value is named by its key."""

        def handler(state: object, scores: dict[str, float]) -> None: ...

        with raises_exactly("invalid arguments: $.scores['b']: expected a number, got str"):
            signature_of(handler).bind({"scores": {"a": 1, "b": "2"}})

    def test_an_array_is_not_an_object(self) -> None:
        """A list for a dict or an attrs class is an error."""

        def handler(state: object, scores: dict[str, float], at: Point) -> None: ...

        with raises_exactly(
            "invalid arguments: $.scores: expected an object, got list; "
            "$.at: expected an object, got list"
        ):
            signature_of(handler).bind({"scores": [], "at": [1, 2]})

    def test_nested_errors_carry_the_full_path(self) -> None:
        """Errors inside nested attrs classes and lists name the whole path."""

        def handler(state: object, places: list[Place]) -> None: ...

        places = [
            {"name": "home", "at": {"x": 1}},
            {"name": "work", "at": {"x": "2", "z": 0}, "aliases": [3]},
        ]
        with raises_exactly(
            "invalid arguments: $.places[1].at.x: expected an integer, got str; "
            "$.places[1].at: unexpected key 'z'; the object takes x, y; "
            "$.places[1].aliases[0]: expected a string, got int"
        ):
            signature_of(handler).bind({"places": places})

    def test_a_non_object_is_rejected(self) -> None:
        """Arguments that are no object at all are an error at the root."""
        with raises_exactly("invalid arguments: $: expected an object, got list"):
            signature_of(create_goal).bind([])  # type: ignore[arg-type]


class TestArgumentNames:
    def test_unknown_arguments_are_named(self) -> None:
        """An unknown argument is named, with the arguments the tool takes."""
        with raises_exactly(
            "invalid arguments: unexpected argument 'colour'; the tool takes goal, priority, tags"
        ):
            signature_of(create_goal).bind({"goal": "g", "colour": "red"})

    def test_several_unknown_arguments(self) -> None:
        """Several unknown arguments are all named, sorted."""
        with raises_exactly(
            "invalid arguments: unexpected arguments 'a', 'b'; the tool takes goal, priority, tags"
        ):
            signature_of(create_goal).bind({"goal": "g", "b": 1, "a": 2})

    def test_a_tool_without_arguments(self) -> None:
        """A tool that takes nothing says so."""

        def handler(state: object) -> None: ...

        with raises_exactly(
            "invalid arguments: unexpected argument 'x'; the tool takes no arguments"
        ):
            signature_of(handler).bind({"x": 1})

    def test_missing_required_arguments_are_named(self) -> None:
        """A missing required argument is named."""
        with raises_exactly("invalid arguments: $.goal is required"):
            signature_of(create_goal).bind({"priority": 2})

    def test_every_problem_is_reported(self) -> None:
        """Several problems are reported together, separated by semicolons."""
        with raises_exactly(
            "invalid arguments: $.goal is required; $.priority: expected an integer, got str; "
            "unexpected argument 'colour'; the tool takes goal, priority, tags"
        ):
            signature_of(create_goal).bind({"priority": "2", "colour": "red"})


class TestBindResult:
    def test_defaults_fill_omitted_arguments(self) -> None:
        """Omitted arguments get the handler's defaults."""
        assert signature_of(create_goal).bind({"goal": "g"}) == {
            "goal": "g",
            "priority": 1,
            "tags": None,
        }

    def test_values_are_structured(self) -> None:
        """Nested objects become attrs instances and tuples become tuples."""

        def handler(state: object, at: Point, sizes: tuple[int, ...]) -> None: ...

        bound = signature_of(handler).bind({"at": {"x": 1, "y": 2}, "sizes": [1, 2]})
        assert bound == {"at": Point(1, 2.0), "sizes": (1, 2)}

    def test_arguments_are_not_mutated(self) -> None:
        """bind leaves the caller's mapping and everything in it as it was."""

        def handler(state: object, places: list[Place], extra: dict[str, Any]) -> None: ...

        arguments = {
            "places": [{"name": "home", "at": {"x": 1}}],
            "extra": {"nested": {"list": [1, 2]}},
        }
        before = copy.deepcopy(arguments)
        signature_of(handler).bind(arguments)
        assert arguments == before

    def test_values_typed_any_are_copied(self) -> None:
        """A handler never receives the caller's own objects, even for values typed Any."""

        def handler(state: object, extra: dict[str, Any], blob: Any, items: list[Any]) -> None: ...

        arguments = {"extra": {"k": [1]}, "blob": {"k": [2]}, "items": [[3]]}
        bound = signature_of(handler).bind(arguments)
        bound["extra"]["k"].append(0)
        bound["blob"]["k"].append(0)
        bound["items"][0].append(0)
        assert arguments == {"extra": {"k": [1]}, "blob": {"k": [2]}, "items": [[3]]}

    def test_signature_is_reusable(self) -> None:
        """One Signature binds many calls independently."""
        signature: Signature = signature_of(create_goal)
        assert signature.bind({"goal": "a"})["goal"] == "a"
        assert signature.bind({"goal": "b", "priority": 3})["priority"] == 3


class TestUnsupportedSignatures:
    def test_unsupported_annotation(self) -> None:
        """An annotation no schema describes is a TypeError naming handler and parameter."""

        def make(state: object, when: complex) -> None: ...

        with pytest.raises(
            TypeError,
            match=(
                r"^cannot serve .*\.make as a tool: "
                r"parameter 'when': unsupported annotation complex; use str, "
            ),
        ):
            signature_of(make)

    @pytest.mark.parametrize(
        "annotation", [int | str, tuple[int, str], dict[int, str], list, set[int], bytearray]
    )
    def test_unsupported_generic_annotations(self, annotation: object) -> None:
        """Other unions, fixed tuples, non-string keys, bare or other collections are refused."""
        with pytest.raises(TypeError, match=r"parameter 'value': unsupported annotation"):
            signature_of(handler_taking(annotation))

    def test_unsupported_field_of_a_nested_class(self) -> None:
        """An unsupported field inside an attrs class is named by class and field."""

        def schedule(state: object, event: Event) -> None: ...

        with pytest.raises(
            TypeError,
            match=r"parameter 'event': field .*Event\.when: unsupported annotation complex",
        ):
            signature_of(schedule)

    def test_missing_annotation(self) -> None:
        """A parameter without an annotation is a TypeError naming it."""

        def handler(state, goal) -> None:  # type: ignore[no-untyped-def]
            ...

        with pytest.raises(TypeError, match=r"parameter 'goal': it has no annotation"):
            signature_of(handler)

    def test_reserved_names(self) -> None:
        """A property named like a context field is refused (invariant 6)."""
        with pytest.raises(TypeError, match=r"parameter '__sessionId': names starting with '__'"):
            signature_of(takes_a_context_field)

    def test_recursive_classes(self) -> None:
        """A class that contains itself is refused rather than recursing forever."""

        def handler(state: object, tree: Node) -> None: ...

        with pytest.raises(TypeError, match=r"field Node\.children: Node contains itself"):
            signature_of(handler)

    @pytest.mark.parametrize(
        ("handler", "message"),
        [
            (takes_variadic_positional, "parameter 'values' is variadic positional"),
            (takes_variadic_keywords, "parameter 'values' is variadic keyword"),
            (takes_positional_only, "parameter 'value' is positional-only"),
            (takes_state_by_keyword, "its first parameter must be positional"),
            (takes_nothing, "its first parameter must be positional"),
        ],
    )
    def test_parameters_must_be_keywords(self, handler: Callable[..., None], message: str) -> None:
        """Arguments arrive by keyword, after a positional state parameter."""
        with pytest.raises(TypeError, match=re.escape(message)):
            signature_of(handler)

    def test_one_context_parameter(self) -> None:
        """Two ToolContext parameters are refused."""

        def handler(state: object, a: ToolContext, b: ToolContext) -> None: ...

        with pytest.raises(TypeError, match=r"parameters 'a', 'b' all take the ToolContext"):
            signature_of(handler)

    def test_unresolvable_annotation(self) -> None:
        """A string annotation naming nothing is a TypeError, not a NameError."""

        def handler(state: object, value: Undefined) -> None: ...  # type: ignore[name-defined]  # noqa: F821

        with pytest.raises(TypeError, match=r"cannot resolve the annotations of .*handler"):
            signature_of(handler)


# A fixed signature for the properties below, and which JSON types each
# parameter accepts.


def roundtrip(
    state: object,
    name: str,
    count: int,
    ratio: float,
    flag: bool,
    tags: list[str],
    scores: dict[str, int],
    note: str | None = None,
) -> None:
    """A handler with one parameter of each kind."""


_JSON_KINDS: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "integer": st.integers(min_value=-(2**53), max_value=2**53),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "string": st.text(max_size=10),
    "array": st.lists(st.text(max_size=5), max_size=3),
    "object": st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
}

_ACCEPTED_KINDS = {
    "name": {"string"},
    "count": {"integer"},
    "ratio": {"integer", "number"},
    "flag": {"boolean"},
    "tags": {"array"},
    "scores": {"object"},
    "note": {"string", "null"},
}

valid_arguments = st.fixed_dictionaries(
    {
        "name": _JSON_KINDS["string"],
        "count": _JSON_KINDS["integer"],
        "ratio": _JSON_KINDS["integer"] | _JSON_KINDS["number"],
        "flag": _JSON_KINDS["boolean"],
        "tags": _JSON_KINDS["array"],
        "scores": _JSON_KINDS["object"],
    },
    optional={"note": _JSON_KINDS["null"] | _JSON_KINDS["string"]},
)


@st.composite
def one_wrong_field(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """Valid arguments but for one field, which holds a value of a JSON type it refuses."""
    arguments = draw(valid_arguments)
    field = draw(st.sampled_from(sorted(_ACCEPTED_KINDS)))
    wrong = sorted(set(_JSON_KINDS) - _ACCEPTED_KINDS[field])
    arguments[field] = draw(st.one_of([_JSON_KINDS[kind] for kind in wrong]))
    return arguments, field


class TestProperties:
    @given(valid_arguments)
    def test_valid_arguments_round_trip(self, arguments: dict[str, Any]) -> None:
        """Every valid arguments object binds to the same values, defaults filled in."""
        bound = signature_of(roundtrip).bind(arguments)
        assert bound == {"note": None, **arguments}
        assert type(bound["ratio"]) is float

    @given(one_wrong_field())
    def test_one_wrong_type_names_that_field(self, case: tuple[dict[str, Any], str]) -> None:
        """A value of the wrong JSON type in any one field is an error naming only that field."""
        arguments, field = case
        with pytest.raises(ArgumentsError) as caught:
            signature_of(roundtrip).bind(arguments)
        assert re.fullmatch(
            rf"invalid arguments: \$\.{field}: expected [a-z ]+, got [a-z]+", str(caught.value)
        )
