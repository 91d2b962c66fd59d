"""Tool schemas derived from handler annotations, and strict argument binding.

A handler declares its arguments in one of two ways, after the state parameter:

* as annotated parameters, each one a property of the arguments object
  (``goal: str, priority: int = 1``);
* as a single parameter annotated with an attrs class, whose fields are the
  properties (``args: AddArgs``).

A parameter annotated `ToolContext` receives the call's context instead, and
is no property. `signature_of` derives the JSON Schema once, when a module is
defined, together with an attrs class describing the arguments object (the
user's own class in the second style). `Signature.bind` structures each call's
arguments into that class with a private cattrs converter.

`output_schema_of` describes, with the same type-to-schema rules, the
structured data a tool returns (``outputSchema``): an attrs class, a
TypedDict or a ``dict[str, T]`` it is annotated to return, or the type
declared for the data of the `CallResult` it returns. An output schema
describes the data as the runtime unstructures it, so every field an attrs
``__init__`` sets is required there and no default is shown.

The converter is strict where cattrs is lenient by default: JSON already has
types, so a caller who sends ``"3"`` for an integer has a bug worth reporting,
and coercing it would hide that bug. Every failure of a call becomes one
`ArgumentsError` naming each bad value by its path (``$.tags[1]``).

Types JSON lacks travel as strings of one fixed syntax each (`_TEXT_FORMS`),
the same in arguments and in returned data:

* ``datetime`` -- an RFC 3339 date-time (``format: date-time``), which always
  has a UTC offset (``Z`` or ``+HH:MM``). A naive datetime is refused both
  ways: a time without an offset means a different instant on the caller's
  machine and on the server's, and the schema's format has no naive form.
* ``date`` -- ``YYYY-MM-DD`` (``format: date``).
* ``UUID`` -- the hyphenated 8-4-4-4-12 hex form (``format: uuid``).
* ``Decimal`` -- a string in JSON number syntax (``"12.50"``), never a JSON
  number: most clients parse a number into a binary float, which has already
  lost the digits a Decimal exists to keep.
* ``bytes`` -- standard, padded base64 (``contentEncoding: base64``).
* ``Path`` (any `PurePath`) -- a non-empty string; nothing touches the file
  system, so a path is only text, to check like any other text.

Each is parsed only in the syntax its schema states (a ``pattern``, or the
format's RFC): whatever a client that checks formats accepts, the handler
accepts, and nothing else.

A pydantic model (where pydantic is installed; this module never imports it
unless an annotation is a model, which needs pydantic already imported) is
described by pydantic's own schema, its definitions moved to the root of the
tool's schema, and validated by pydantic in strict JSON mode: the same "no
coercion" rule, with pydantic's own types and messages inside the model, and
its ``extra`` setting deciding unknown keys (the schema then says so too).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import datetime
import decimal
import enum
import inspect
import json
import pathlib
import re
import reprlib
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    TypeGuard,
    Union,
    final,
    get_args,
    get_origin,
)

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_mapping_structure_fn

from protocol import (
    AudioContent,
    CallResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolContext,
)

from ._channel import Channel, ChannelKind
from ._errors import ArgumentsError
from ._progress import Progress

if typing.TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "Signature",
    "output_schema_of",
    "signature_of",
    "structured_data",
    "takes_state",
    "wrapped_result",
    "wraps_result",
]

_Hook = Callable[[Any, Any], Any]

_CONTENT_ITEMS: Final = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)

_SUPPORTED = (
    "str, int, float, bool, datetime, date, UUID, Decimal, bytes, Path, a Literal, an Enum, "
    "list[T], tuple[T, ...], dict[str, T], T | None, an attrs class, a pydantic model or Any"
)
_SUPPORTED_OUTPUT = _SUPPORTED.replace(" or Any", ", a TypedDict or Any")


@final
@attrs.frozen
class Signature:
    """What a handler takes: its input schema and how to bind a call's arguments."""

    input_schema: Mapping[str, Any]
    """The JSON Schema of the tool's arguments object."""
    context_parameter: str | None
    """The handler parameter annotated `ToolContext`, which receives the call's context."""
    progress_parameter: str | None
    """The handler parameter annotated `Progress`, which receives the call's reporter."""
    log_parameter: str | None = attrs.field(kw_only=True, default=None)
    """The handler parameter annotated `Log`, which receives the call's log to its client."""
    ask_parameter: str | None = attrs.field(kw_only=True, default=None)
    """The handler parameter annotated `Ask`, which receives the call's requests to its client."""
    injects: bool = attrs.field(kw_only=True, default=False)
    """Whether the runtime fills in any parameter (context, progress, log, ask): when not,
    the handler is called with the bound arguments alone."""
    _arguments_class: type[Any] = attrs.field(repr=False)
    """The attrs class the arguments object structures into."""
    _structure: _Hook = attrs.field(repr=False)
    """The converter's hook for `_arguments_class`."""
    _single_parameter: str | None = attrs.field(repr=False)
    """The parameter that takes the whole structured object, in the attrs-class style."""
    _copy_arguments: bool = attrs.field(repr=False)
    """Whether some value is typed Any, which cattrs passes through uncopied."""
    _parameter_names: tuple[str, ...] = attrs.field(repr=False)
    """The fields of `_arguments_class`, in order."""

    def bind(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and structure `arguments` into keyword arguments for the handler.

        The result holds neither the state nor the context parameter. `arguments`
        is never mutated.

        Raises:
            ArgumentsError: naming every value that does not fit the schema.
        """
        if not arguments and not self._parameter_names and self._single_parameter is None:
            return {}  # a tool that takes nothing, called with nothing: nothing to check
        # A handler could keep a value typed Any in its state; a private copy
        # keeps the caller's objects out of it (invariants 2 and 6).
        source = copy.deepcopy(arguments) if self._copy_arguments else arguments
        try:
            structured = self._structure(source, self._arguments_class)
        # ValueError and TypeError also cover validators of the user's attrs classes.
        except (BaseValidationError, ValueError, TypeError) as exc:
            msg = "invalid arguments: " + "; ".join(_explain(exc, "$"))
            raise ArgumentsError(msg) from exc
        if self._single_parameter is not None:
            return {self._single_parameter: structured}
        # Not attrs.asdict: this runs on every call, and the names are known.
        return {name: getattr(structured, name) for name in self._parameter_names}


def signature_of(handler: Callable[..., Any], *, takes_state: bool = True) -> Signature:
    """Derive the input schema and argument binding of `handler`.

    When `takes_state` (see `takes_state`), the first positional parameter
    receives the module state and is skipped.

    Raises:
        TypeError: if a parameter has no annotation, or one no JSON Schema
            describes, naming the handler and the parameter.
    """
    try:
        return _derive(handler, takes_state)
    except _UnsupportedError as exc:
        name = getattr(handler, "__qualname__", repr(handler))
        msg = f"cannot serve {name} as a tool: {exc}"
        raise TypeError(msg) from None


def output_schema_of(
    handler: Callable[..., Any], structured: type[Any] | None = None
) -> Mapping[str, Any] | None:
    """The JSON Schema of the structured data `handler` returns; None when it returns none.

    `structured` declares the data's type for a handler annotated to return a
    `CallResult`, whose data no annotation describes. Otherwise the return
    annotation decides: an attrs class, a TypedDict or a ``dict[str, T]``
    (or ``Mapping[str, T]``) has a schema; ``str``, ``CallResult``, no
    annotation, or anything else has none.

    Raises:
        TypeError: if `structured` is given for a handler that does not return
            a CallResult, or if the data's type has no JSON Schema of type
            ``object`` (which MCP requires of an output schema).
    """
    name = getattr(handler, "__qualname__", repr(handler))
    try:
        returned = _hints(handler, name).get("return", inspect.Parameter.empty)
        if structured is not None:
            return _declared_output(returned, structured)
        if _is_structured(returned):
            with _within("its return annotation"):
                return _object_output(returned)
        if not _wraps(returned):
            return None
        with _within("its return annotation"):
            return _wrapped_output(returned)
    except _UnsupportedError as exc:
        msg = f"cannot serve {name} as a tool: {exc}"
        raise TypeError(msg) from None


def wraps_result(handler: Callable[..., Any]) -> bool:
    """Whether what `handler` returns is data of no object type (an int, a list...), which
    its result carries as ``{"result": value}`` (as FastMCP does), MCP's structured content
    being an object."""
    returned = _hints(handler, getattr(handler, "__qualname__", "the handler")).get("return")
    return returned is not None and _wraps(returned)


def wrapped_result(value: object) -> CallResult:
    """The result of data of no object type: its JSON text, and ``{"result": value}``."""
    data = _converter.unstructure(value)
    return CallResult((TextContent(json.dumps(data, ensure_ascii=False)),), {"result": data})


# What a return annotation may name besides data: text, content, a result, nothing, or
# anything (each value decided when returned).
_NOT_DATA: Final = (str, CallResult, types.NoneType, Any, object, *_CONTENT_ITEMS)


def _wraps(returned: Any) -> bool:
    """Whether a return annotation names data the result wraps; refused if it names nothing
    a result can carry."""
    if get_origin(returned) is Annotated:
        returned = get_args(returned)[0]
    if returned is inspect.Parameter.empty or returned in _NOT_DATA or returned is None:
        return False
    if _is_structured(returned) or returned in (dict, Mapping):
        return False  # an object already: its own schema, or each value's own data
    if returned in (list, tuple):
        return True  # items of any type: `_wrapped_output` says only "an array"
    if _is_optional(returned) and _not_none(returned) in _NOT_DATA:
        return False  # `str | None`: text, or nothing
    if _is_optional(returned) and _is_structured(_not_none(returned)):
        return False  # data when there is some: no one schema describes both
    with _within("its return annotation"):
        try:
            _SchemaBuilder(for_output=True).type_schema(returned)
        except _UnsupportedError as exc:
            msg = (
                f"a tool cannot return {_type_name(returned)} ({exc}); it returns a str, a "
                "number, a bool, a list, None, an attrs class, "
                "a dataclass, a TypedDict, a dict[str, T], a pydantic model, a content item "
                "or a CallResult"
            )
            raise _UnsupportedError(msg) from None
    return True


def _wrapped_output(returned: Any) -> dict[str, Any]:
    builder = _SchemaBuilder(for_output=True)
    bare = returned in (list, tuple)
    schema = {"type": "array"} if bare else builder.finish(builder.type_schema(returned))
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def _declared_output(returned: Any, structured: type[Any]) -> dict[str, Any]:
    if returned is not CallResult:
        has = (
            "no return annotation"
            if returned is inspect.Parameter.empty
            else f"the return annotation {_type_name(returned)}"
        )
        msg = (
            f"structured= declares the data of a returned CallResult, but it has {has}; "
            "annotate it '-> CallResult', or drop structured= and let the return "
            "annotation describe the data"
        )
        raise _UnsupportedError(msg)
    with _within("structured="):
        return _object_output(structured)


def _is_structured(annotation: Any) -> bool:
    """Whether a return annotation names data: an attrs class, a TypedDict, a mapping or a
    pydantic model."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation is CallResult or annotation in _CONTENT_ITEMS:
        return False  # attrs classes too, but the result or a piece of it, not its data
    is_mapping = get_origin(annotation) in (dict, Mapping)
    is_class = (
        _is_attrs_class(annotation) or _is_pydantic_model(annotation) or _is_dataclass(annotation)
    )
    return is_mapping or is_class or typing.is_typeddict(annotation)


def _object_output(annotation: Any) -> dict[str, Any]:
    builder = _SchemaBuilder(for_output=True)
    schema = builder.finish(builder.type_schema(annotation))
    if schema.get("type") != "object":
        msg = (
            f"{_type_name(annotation)} is no JSON object, and MCP requires an output schema "
            "of type object; return an attrs class, a TypedDict or a dict[str, T]"
        )
        raise _UnsupportedError(msg)
    return schema


def structured_data(value: object) -> dict[str, Any] | None:
    """The JSON data of what a handler returned, when it returned data; None otherwise.

    A mapping, an attrs instance or a pydantic model (one whose data is an
    object) becomes JSON data, every value in the form its schema states: a
    datetime as RFC 3339 text, bytes as base64, and so on. Anything else (a
    str, a CallResult) is no data.

    Raises:
        ValueError: for a value that has no JSON form: a naive datetime, or a
            Decimal that is not finite.
    """
    cls = type(value)
    if cls is CallResult:  # an attrs class too, but the result itself, not data
        return None
    if isinstance(value, Mapping):
        return {key: _converter.unstructure(item) for key, item in value.items()}
    if attrs.has(cls) or _is_pydantic_model(cls) or dataclasses.is_dataclass(cls):
        data = _converter.unstructure(value)
        return data if isinstance(data, dict) else None
    return None


class _UnsupportedError(Exception):
    """A handler annotation that no schema can describe; becomes a TypeError."""


@attrs.frozen
class _Field:
    """One property of an arguments object: a handler parameter or an attrs field."""

    name: str
    annotation: Any
    """`inspect.Parameter.empty` when the source has no annotation."""
    required: bool
    default: object
    """The default to show in the schema, or `attrs.NOTHING`."""


def _derive(handler: Callable[..., Any], takes_state: bool) -> Signature:
    parameters = _argument_parameters(handler, takes_state)
    hints = _hints(handler, getattr(handler, "__qualname__", "the handler"))
    context = _injected(parameters, hints, ToolContext)
    progress = _injected(parameters, hints, Progress)
    log = _injected(parameters, hints, "log")
    ask = _injected(parameters, hints, "ask")
    rest = [p for p in parameters if p.name not in (context, progress, log, ask)]
    builder = _SchemaBuilder()
    schema: dict[str, Any]
    if len(rest) == 1 and _is_attrs_class(hints.get(rest[0].name)):
        arguments_class: type[Any] = hints[rest[0].name]
        with _within(f"parameter {rest[0].name!r}"):
            schema = builder.class_schema(arguments_class)
        single_parameter: str | None = rest[0].name
    else:
        fields = [_parameter_field(p, hints) for p in rest]
        schema = builder.object_schema(fields, owner=None)
        arguments_class = _arguments_class(fields)
        single_parameter = None
    return Signature(
        input_schema=builder.finish(schema),
        context_parameter=context,
        progress_parameter=progress,
        log_parameter=log,
        ask_parameter=ask,
        injects=any(name is not None for name in (context, progress, log, ask)),
        arguments_class=arguments_class,
        structure=_converter.get_structure_hook(arguments_class),
        single_parameter=single_parameter,
        copy_arguments=builder.mentions_any,
        parameter_names=tuple(field.name for field in attrs.fields(arguments_class)),
    )


def _injected(
    parameters: list[inspect.Parameter], hints: dict[str, Any], kind: type | ChannelKind
) -> str | None:
    """The one parameter annotated `kind` (a type, or a channel's kind), which the runtime
    fills in; None if there is none."""
    names = [p.name for p in parameters if _annotates(hints.get(p.name), kind)]
    if len(names) > 1:
        taken = hints[names[0]].__name__
        msg = f"parameters {', '.join(map(repr, names))} all take the {taken}; keep one"
        raise _UnsupportedError(msg)
    return names[0] if names else None


def _annotates(hint: object, kind: type | ChannelKind) -> bool:
    """Whether a parameter annotated `hint` takes what `kind` names."""
    if isinstance(kind, str):
        return _is_channel(hint) and hint.kind == kind
    return hint is kind


def _is_channel(hint: object) -> TypeGuard[type[Channel]]:
    return isinstance(hint, type) and issubclass(hint, Channel)


def _argument_parameters(handler: Callable[..., Any], takes_state: bool) -> list[inspect.Parameter]:
    """The parameters after the state one, if any, each of which must be passable by keyword."""
    parameters = list(inspect.signature(handler).parameters.values())
    if takes_state:
        if not parameters or parameters[0].kind not in _POSITIONAL:
            msg = "its first parameter must be positional: it receives the module state"
            raise _UnsupportedError(msg)
        parameters = parameters[1:]
    for parameter in parameters:
        if parameter.kind not in _BY_KEYWORD:
            msg = (
                f"parameter {parameter.name!r} is {parameter.kind.description}, "
                "but arguments are passed by keyword"
            )
            raise _UnsupportedError(msg)
    return parameters


def takes_state(handler: Callable[..., Any], state_class: type[Any] | None) -> bool:
    """Whether `handler`'s first parameter receives the module state, or it takes none.

    It does when that parameter is positional and named ``state`` (whatever its
    annotation: ``state: list[str]`` is a state), unannotated, or annotated
    with the module's `state_class` (or a class related to it), ``Any``,
    ``object`` or ``None``, or -- the state's class being unknown -- with a
    class no argument list starts with (an attrs class, a plain class). A
    handler with no parameters, or whose first is annotated with an argument
    type (``str``, ``list[int]``, ``Annotated[...]``, a Literal, an Enum...) or
    with an injected one (`ToolContext`, `Progress`, `Log`, `Ask`), takes no
    state: FastMCP's ``def add(a: int, b: int)`` is a tool without state.
    """
    parameters = list(inspect.signature(handler).parameters.values())
    if not parameters or parameters[0].kind not in _POSITIONAL:
        return False
    first = parameters[0]
    try:
        hints = _hints(handler, getattr(handler, "__qualname__", "the handler"))
    except _UnsupportedError:
        return True  # `signature_of` names the annotation it cannot resolve
    if first.name == "state" or first.name not in hints:
        return True
    annotation = hints[first.name]
    if annotation in (Any, object, None, types.NoneType):
        return True
    if annotation in _INJECTED_TYPES or _is_channel(annotation):
        return False
    if isinstance(annotation, type) and state_class is not None:
        return issubclass(annotation, state_class) or issubclass(state_class, annotation)
    return not _names_arguments(annotation)


def _names_arguments(annotation: Any) -> bool:
    """Whether `annotation` can only describe an argument, never a module's state."""
    if annotation in _SCALARS or _is_choice(annotation) or _text_form(annotation) is not None:
        return True
    return get_origin(annotation) is not None  # list[...], Annotated[...], X | None...


_INJECTED_TYPES: Final = (ToolContext, Progress)  # and the channels (`_is_channel`)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _hints(annotated: object, name: str) -> dict[str, Any]:
    """Resolved annotations, `Annotated` kept, so string annotations work too."""
    try:
        return typing.get_type_hints(annotated, include_extras=True)
    except NameError as exc:
        msg = f"cannot resolve the annotations of {name} ({exc})"
        raise _UnsupportedError(msg) from exc


def _parameter_field(parameter: inspect.Parameter, hints: Mapping[str, Any]) -> _Field:
    annotation = hints.get(parameter.name, parameter.empty)
    default = parameter.default
    if _is_field_info(default):  # `count: int = Field(default=1, ge=0)`, as pydantic allows
        if annotation is not parameter.empty:
            annotation = Annotated[annotation, default]
        default = parameter.empty
    field = _field_of(annotation)
    if default is parameter.empty and field is not None and not field.is_required():
        default = field.default  # `Annotated[int, Field(default=1)]`
    has_default = default is not parameter.empty
    return _Field(
        name=parameter.name,
        annotation=annotation,
        required=not has_default,
        default=default if has_default else attrs.NOTHING,
    )


def _field_of(annotation: Any) -> Any:
    """The pydantic Field among an `Annotated`'s metadata; None when it has none."""
    if get_origin(annotation) is not Annotated:
        return None
    return next((item for item in get_args(annotation)[1:] if _is_field_info(item)), None)


def _class_fields(cls: type[Any]) -> list[_Field]:
    """The arguments an attrs class takes: its fields set by ``__init__``."""
    hints = _hints(cls, cls.__qualname__)
    return [
        _Field(
            name=field.name,
            annotation=hints.get(field.name, inspect.Parameter.empty),
            required=field.default is attrs.NOTHING,
            default=_shown_default(field),
        )
        for field in attrs.fields(cls)
        if field.init
    ]


def _output_fields(cls: type[Any]) -> list[_Field]:
    """The keys an attrs instance unstructures into: every field ``__init__`` sets, always."""
    return [
        attrs.evolve(field, required=True, default=attrs.NOTHING) for field in _class_fields(cls)
    ]


def _typed_dict_fields(cls: type[Any]) -> list[_Field]:
    """The keys of a TypedDict, required or not as it declares them."""
    hints = _hints(cls, cls.__qualname__)
    return [
        _typed_dict_field(name, hint, name in cls.__required_keys__) for name, hint in hints.items()
    ]


def _typed_dict_field(name: str, annotation: Any, required: bool) -> _Field:
    """One key; an explicit ``Required[...]`` or ``NotRequired[...]`` decides over `required`.

    Python 3.11 fills ``__required_keys__`` from the annotations as written, so
    it misses ``NotRequired`` in a module with ``from __future__ import annotations``.
    """
    while (wrapper := get_origin(annotation)) in (typing.Required, typing.NotRequired):
        required = wrapper is typing.Required
        annotation = get_args(annotation)[0]
    return _Field(name, annotation, required, attrs.NOTHING)


def _shown_default(field: attrs.Attribute[Any]) -> object:
    # attrs' stubs declare Factory a function, so that `x: list[int] = Factory(list)`
    # type-checks.
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        # A factory makes its value per instance, so no single default describes it.
        return attrs.NOTHING
    return field.default


def _arguments_class(fields: Sequence[_Field]) -> type[Any]:
    """An attrs class with one field per parameter, for cattrs to structure into."""
    # Keyword-only, as a required parameter may follow one with a default.
    attributes = {
        field.name: attrs.field(type=field.annotation, default=field.default, kw_only=True)
        for field in fields
    }
    return attrs.make_class("Arguments", attributes, frozen=True, slots=True)


@attrs.define
class _SchemaBuilder:
    """Turns annotations into JSON Schema, noting what binding needs to know."""

    for_output: bool = False
    """Whether the schema describes returned data rather than arguments: TypedDicts
    and mappings are allowed, and every attrs field is required."""
    mentions_any: bool = False
    """Whether some value is typed Any."""
    _enclosing: list[type[Any]] = attrs.Factory(list)
    """The classes being described, outermost first, to refuse recursion."""
    _models: list[type[Any]] = attrs.Factory(list)
    """The pydantic models met, whose schemas `finish` puts in place of their references."""

    def finish(self, schema: dict[str, Any]) -> dict[str, Any]:
        """`schema` with each pydantic model's schema in place, their definitions at its root.

        A model's schema refers to its parts (and to itself, when recursive) by
        ``#/$defs/Name``, which resolves against the root of the whole document:
        the definitions of every model of one schema, made together so that
        their names cannot collide, go there. A schema that is one model (a
        returned model) becomes that model's own object schema.
        """
        if not self._models:
            return schema
        mode: _SchemaMode = "serialization" if self.for_output else "validation"
        references, definitions = _model_definitions(self._models, mode)
        resolved = _placed(schema, references)
        own = str(resolved.get("$ref", "")).removeprefix(_DEFINITION)
        if own in definitions:
            rest = {key: value for key, value in resolved.items() if key != "$ref"}
            resolved = {**definitions[own], **rest}
            others = {name: value for name, value in definitions.items() if name != own}
            if json.dumps(f"{_DEFINITION}{own}") not in json.dumps([resolved, others]):
                definitions = others  # only the root was that model: nothing refers to it
        return {**resolved, "$defs": definitions} if definitions else resolved

    def _model_reference(self, model: type[Any]) -> dict[str, Any]:
        """A stand-in for `model`'s schema, until `finish` knows every model of the document."""
        if model not in self._models:
            self._models.append(model)
        return {"$ref": f"{_MODEL_STAND_IN}{self._models.index(model)}"}

    def class_schema(self, cls: type[Any]) -> dict[str, Any]:
        """The object schema of the fields of the attrs class `cls`."""
        return self._described(cls, _output_fields if self.for_output else _class_fields)

    def _described(
        self, cls: type[Any], fields_of: Callable[[type[Any]], list[_Field]]
    ) -> dict[str, Any]:
        if cls in self._enclosing:
            what = "data" if self.for_output else "arguments"
            msg = f"{cls.__qualname__} contains itself, and recursive {what} are unsupported"
            raise _UnsupportedError(msg)
        self._enclosing.append(cls)
        try:
            return self.object_schema(fields_of(cls), owner=cls.__qualname__)
        finally:
            self._enclosing.pop()

    def object_schema(self, fields: Sequence[_Field], owner: str | None) -> dict[str, Any]:
        """The schema of an object with exactly `fields`; `owner` names their class, if any."""
        properties = {}
        for field in fields:
            where = f"parameter {field.name!r}" if owner is None else f"field {owner}.{field.name}"
            with _within(where):
                properties[field.name] = self._property_schema(field)
        return {
            "type": "object",
            "properties": properties,
            "required": [field.name for field in fields if field.required],
            "additionalProperties": False,
        }

    def _property_schema(self, field: _Field) -> dict[str, Any]:
        if field.name.startswith("__") and not self.for_output:
            msg = "names starting with '__' are reserved for context fields; rename it"
            raise _UnsupportedError(msg)
        if field.annotation is inspect.Parameter.empty:
            msg = "it has no annotation, so no schema describes it"
            raise _UnsupportedError(msg)
        return {**self.type_schema(field.annotation), **_json_default(field.default)}

    def type_schema(self, annotation: Any) -> dict[str, Any]:
        """The schema of values of type `annotation`."""
        origin, args = get_origin(annotation), get_args(annotation)
        if origin is Annotated:
            return self._annotated_schema(args)
        if annotation is Any:
            self.mentions_any = True
            return {}
        if annotation in _SCALARS:
            return {"type": _SCALARS[annotation].json_type}
        if _is_choice(annotation):
            return _choice_schema(annotation)
        form = _text_form(annotation)
        if form is not None:
            return dict(form.schema)
        if _is_pydantic_model(annotation):
            return self._model_reference(annotation)
        if _is_optional(annotation):
            return {"anyOf": [self.type_schema(_not_none(annotation)), {"type": "null"}]}
        if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "items": self.type_schema(args[0])}
        # Arguments bind into a dict only; returned data may be any mapping.
        if (origin is dict or (self.for_output and origin is Mapping)) and args[0] is str:
            return {"type": "object", "additionalProperties": self.type_schema(args[1])}
        if _is_attrs_class(annotation):
            return self.class_schema(annotation)
        if self.for_output and typing.is_typeddict(annotation):
            return self._described(annotation, _typed_dict_fields)
        if self.for_output and _is_dataclass(annotation):
            return self._described(annotation, _dataclass_fields)
        supported = _SUPPORTED_OUTPUT if self.for_output else _SUPPORTED
        msg = f"unsupported annotation {_type_name(annotation)}; use {supported}"
        raise _UnsupportedError(msg)

    def _annotated_schema(self, args: tuple[Any, ...]) -> dict[str, Any]:
        annotation, *metadata = args
        schema = self.type_schema(annotation)
        for item in metadata:
            if isinstance(item, str):
                schema.setdefault("description", item)
            elif _is_field_info(item):
                schema.update(_field_notes(item))
        for bound in _bounds_of(metadata, schema.get("type")):
            schema[bound.keyword] = bound.limit
        return schema


@contextlib.contextmanager
def _within(where: str) -> Iterator[None]:
    """Prefix `where` to the message of an unsupported annotation found inside."""
    try:
        yield
    except _UnsupportedError as exc:
        msg = f"{where}: {exc}"
        raise _UnsupportedError(msg) from None


def _choice_schema(annotation: Any) -> dict[str, Any]:
    values = [value for value, _ in _choices(annotation)]
    json_types = {_json_type(value) for value in values}
    if None in json_types:
        msg = (
            f"{_type_name(annotation)} has a value that is no JSON string, number, boolean or null"
        )
        raise _UnsupportedError(msg)
    schema: dict[str, Any] = {"enum": values}
    if len(json_types) == 1:
        schema["type"] = json_types.pop()
    return schema


def _json_default(value: object) -> dict[str, Any]:
    """``{"default": value}`` with `value` as JSON data, or nothing if it has no JSON form."""
    if value is attrs.NOTHING:
        return {}
    try:
        return {"default": json.loads(json.dumps(_converter.unstructure(value), allow_nan=False))}
    except (TypeError, ValueError):
        return {}


def _type_name(annotation: Any) -> str:
    return annotation.__qualname__ if isinstance(annotation, type) else repr(annotation)


def _is_dataclass(annotation: object) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _dataclass_fields(cls: type[Any]) -> list[_Field]:
    """The keys a dataclass instance unstructures into: each of its fields, always."""
    hints = _hints(cls, cls.__qualname__)
    return [
        _Field(field.name, hints.get(field.name, inspect.Parameter.empty), True, attrs.NOTHING)
        for field in dataclasses.fields(cls)
    ]


def _is_attrs_class(annotation: object) -> bool:
    return isinstance(annotation, type) and attrs.has(annotation)


# Pydantic models, known without importing pydantic: a class can only be a
# model if pydantic is already imported.

_SchemaMode = Literal["validation", "serialization"]
_DEFINITION: Final = "#/$defs/"
_MODEL_STAND_IN: Final = "mcp-actors:pydantic-model:"


def _is_pydantic_model(annotation: object) -> bool:
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(annotation, type):
        return False
    return issubclass(annotation, pydantic.BaseModel)


def _model_definitions(
    models: Sequence[type[Any]], mode: _SchemaMode
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each model's schema (a reference) and the definitions they share, made in one go."""
    # Imported here: only a schema with a model, so with pydantic imported, gets here.
    from pydantic.json_schema import models_json_schema

    keys = [(model, mode) for model in models]
    schemas, document = models_json_schema(keys, ref_template=_DEFINITION + "{model}")
    return [dict(schemas[key]) for key in keys], dict(document.get("$defs", {}))


def _placed(schema: Any, references: Sequence[dict[str, Any]]) -> Any:
    """`schema` with every stand-in of `_model_reference` replaced by its model's schema."""
    if isinstance(schema, list):
        return [_placed(item, references) for item in schema]
    if not isinstance(schema, dict):
        return schema
    placed = {key: _placed(value, references) for key, value in schema.items()}
    stand_in = placed.get("$ref")
    if isinstance(stand_in, str) and stand_in.startswith(_MODEL_STAND_IN):
        del placed["$ref"]
        placed = {**references[int(stand_in.removeprefix(_MODEL_STAND_IN))], **placed}
    return placed


def _is_choice(annotation: Any) -> bool:
    """Whether `annotation` allows a fixed set of values: a Literal or an Enum."""
    is_enum = isinstance(annotation, type) and issubclass(annotation, enum.Enum)
    return is_enum or get_origin(annotation) is Literal


def _choices(annotation: Any) -> list[tuple[object, object]]:
    """Each allowed JSON value of a Literal or Enum, with the Python value it stands for."""
    if get_origin(annotation) is Literal:
        return [(value, value) for value in get_args(annotation)]
    return [(member.value, member) for member in annotation]


def _is_optional(annotation: Any) -> bool:
    """Whether `annotation` is ``T | None`` for a single T."""
    args = get_args(annotation)
    is_union = get_origin(annotation) in (Union, types.UnionType)
    return is_union and len(args) == 2 and types.NoneType in args


def _not_none(optional: Any) -> Any:
    (annotation,) = (arg for arg in get_args(optional) if arg is not types.NoneType)
    return annotation


# Constraints: pydantic's `Field(...)` and annotated_types' bounds (`Ge(0)`, `MaxLen(80)`),
# known without importing either, as models are: an object can only be one of theirs if its
# library is imported. Each constraint is a JSON Schema keyword in the listing and a check in
# the structuring hook, so the schema and the validation cannot disagree.


@attrs.frozen
class _Bound:
    """One constraint on a value: its schema keyword and how a value is checked against it."""

    keyword: str
    limit: Any
    says: str
    """What a value must do, for the message: ``be at least 0``."""
    holds: Callable[[Any], bool]


# annotated_types' class name -> (JSON Schema keyword, message, check); lengths are keyed
# by the value's JSON type below.
_NUMERIC_BOUNDS: Final[Mapping[str, tuple[str, str, Callable[[Any, Any], bool]]]] = {
    "Ge": ("minimum", "be at least", lambda value, limit: value >= limit),
    "Gt": ("exclusiveMinimum", "be greater than", lambda value, limit: value > limit),
    "Le": ("maximum", "be at most", lambda value, limit: value <= limit),
    "Lt": ("exclusiveMaximum", "be less than", lambda value, limit: value < limit),
    "MultipleOf": ("multipleOf", "be a multiple of", lambda value, limit: value % limit == 0),
}
_LENGTH_KEYWORDS: Final[Mapping[str, tuple[str, str]]] = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}
# The options of a pydantic Field that become schema and checks; any other is refused.
_FIELD_OPTIONS: Final = frozenset(
    {"annotation", "default", "description", "title", "examples", "ge", "gt", "le", "lt"}
    | {"multiple_of", "min_length", "max_length", "pattern"}
)


def _is_field_info(item: object) -> bool:
    """Whether `item` is a pydantic ``Field(...)``."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(item, pydantic.fields.FieldInfo)


def _is_annotated_type(item: object) -> bool:
    """Whether `item` is one of annotated_types' constraints, or pydantic's own (``pattern``)."""
    module = type(item).__module__
    return module == "annotated_types" or module.startswith("pydantic")


def _field_notes(field: Any) -> dict[str, Any]:
    """The schema keywords of a Field's own words: description, title, examples."""
    unsupported = sorted(set(getattr(field, "_attributes_set", {})) - _FIELD_OPTIONS)
    if unsupported:
        msg = (
            f"Field({', '.join(f'{name}=' for name in unsupported)}) is not supported here; "
            "keep to description=, title=, examples=, default= and the bounds (ge=, gt=, "
            "le=, lt=, multiple_of=, min_length=, max_length=, pattern=)"
        )
        raise _UnsupportedError(msg)
    notes = {"description": field.description, "title": field.title, "examples": field.examples}
    return {key: value for key, value in notes.items() if value is not None}


def _bounds_of(metadata: Sequence[object], json_type: object) -> list[_Bound]:
    """The constraints among an `Annotated`'s metadata (a Field's included)."""
    bounds: list[_Bound] = []
    for item in metadata:
        if _is_field_info(item):
            bounds += _bounds_of(getattr(item, "metadata", ()), json_type)
        elif _is_annotated_type(item):
            bounds += _item_bounds(item, json_type)
    return bounds


def _item_bounds(item: Any, json_type: object) -> list[_Bound]:
    name = type(item).__name__
    if name in ("Interval", "Len"):  # grouped metadata: Interval(ge=0, lt=9), Len(1, 5)
        return [bound for part in item for bound in _item_bounds(part, json_type)]
    if name in _NUMERIC_BOUNDS:
        return [_numeric_bound(name, item, json_type)]
    if name in ("MinLen", "MaxLen"):
        return [_length_bound(name, item, json_type)]
    if name == "Strict" and item.strict:
        return []  # the converter is strict already
    if name == "AllowInfNan":
        return []  # JSON has no infinity or NaN to allow
    options = {key: value for key, value in vars(item).items() if value is not None}
    if name == "_PydanticGeneralMetadata" and set(options) == {"pattern"}:
        pattern = str(options["pattern"])
        syntax = re.compile(pattern)
        return [_Bound("pattern", pattern, f"match {pattern!r}", lambda v: bool(syntax.search(v)))]
    msg = (
        f"the constraint {item!r} is not supported; use ge=, gt=, le=, lt=, multiple_of=, "
        "min_length=, max_length= or pattern="
    )
    raise _UnsupportedError(msg)


def _only_value(item: object) -> Any:
    """The one value an annotated_types constraint holds (``Ge(0)`` -> 0)."""
    (field,) = dataclasses.fields(item)  # type: ignore[arg-type]
    return getattr(item, field.name)


def _numeric_bound(name: str, item: object, json_type: object) -> _Bound:
    if json_type not in ("integer", "number"):
        msg = f"{name} bounds a number, but the value's schema type is {json_type}"
        raise _UnsupportedError(msg)
    keyword, says, check = _NUMERIC_BOUNDS[name]
    limit = _only_value(item)
    return _Bound(keyword, limit, f"{says} {limit}", lambda value: check(value, limit))


def _length_bound(name: str, item: object, json_type: object) -> _Bound:
    keywords = _LENGTH_KEYWORDS.get(str(json_type))
    if keywords is None:
        msg = f"{name} bounds a length, but the value's schema type is {json_type}"
        raise _UnsupportedError(msg)
    limit = _only_value(item)
    if name == "MinLen":
        return _Bound(keywords[0], limit, f"be at least {limit} long", lambda v: len(v) >= limit)
    return _Bound(keywords[1], limit, f"be at most {limit} long", lambda v: len(v) <= limit)


def _is_constrained(annotation: Any) -> bool:
    """Whether `annotation` is an `Annotated` with constraints the structuring hook checks."""
    if get_origin(annotation) is not Annotated:
        return False
    return any(_is_field_info(item) or _is_annotated_type(item) for item in get_args(annotation))


def _constrained_hook(annotation: Any, converter: cattrs.Converter) -> _Hook:
    base, *metadata = get_args(annotation)
    bounds = _bounds_of(metadata, _SchemaBuilder().type_schema(base).get("type"))
    structure_base = converter.get_structure_hook(base)

    def structure(value: object, _: object) -> object:
        structured = structure_base(value, base)
        for bound in bounds:
            if not bound.holds(structured):
                msg = f"must {bound.says}, got {reprlib.repr(structured)}"
                raise ValueError(msg)
        return structured

    return structure


# Strict structuring.


@attrs.frozen
class _Scalar:
    """How a JSON scalar type is described and recognised."""

    json_type: str
    expected: str
    accepts: Callable[[object], bool]


def _is_integer(value: object) -> bool:
    # bool subclasses int, but JSON's true is no number.
    return isinstance(value, int) and not isinstance(value, bool)


_SCALARS: Mapping[object, _Scalar] = {
    str: _Scalar("string", "a string", lambda value: isinstance(value, str)),
    int: _Scalar("integer", "an integer", _is_integer),
    float: _Scalar(
        "number", "a number", lambda value: isinstance(value, float) or _is_integer(value)
    ),
    bool: _Scalar("boolean", "a boolean", lambda value: isinstance(value, bool)),
}


def _json_type(value: object) -> str | None:
    """The JSON type of a scalar value; None if JSON has no scalar type for it."""
    if value is None:
        return "null"
    scalar = _SCALARS.get(type(value))
    return None if scalar is None else scalar.json_type


class _MismatchError(TypeError):
    """A value of the wrong JSON type, or outside a Literal or an Enum."""

    def __init__(self, expected: str, got: str) -> None:
        super().__init__(f"expected {expected}, got {got}")
        self.expected = expected
        self.got = got


def _got(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _structure_scalar(value: object, annotation: type[Any]) -> object:
    """Structure a str, int, float or bool without coercing any other JSON type."""
    # cattrs dispatches these types by subclass, so IntEnum and StrEnum arrive here too.
    if _is_choice(annotation):
        return _structure_choice(value, annotation)
    scalar = _SCALARS[annotation]
    if not scalar.accepts(value):
        raise _MismatchError(scalar.expected, _got(value))
    try:
        # float(3), so that a handler typed float never sees an int.
        return annotation(value)
    except OverflowError:
        raise _MismatchError(scalar.expected, "an integer beyond its range") from None


def _structure_choice(value: object, annotation: Any) -> object:
    """Structure one of the values a Literal or an Enum allows."""
    choices = _choices(annotation)
    # Compare JSON types too, or true would pass for 1 (True == 1 in Python).
    for option, result in choices:
        if _json_type(option) == _json_type(value) and option == value:
            return result
    expected = "one of " + ", ".join(repr(option) for option, _ in choices)
    raise _MismatchError(expected, reprlib.repr(value))


# Types JSON lacks, as strings of one syntax each: the rules of the module docstring, as data.


@attrs.frozen
class _TextForm:
    """How values of a type JSON lacks are written as strings, described and read back."""

    schema: Mapping[str, Any]
    """The JSON Schema of the string."""
    expected: str
    """What a caller must send, for error messages."""
    parse: Callable[[Any, str], object]
    """Reads a string into the annotated type; a ValueError says why it cannot."""
    render: Callable[[Any], str]
    """Writes a value as the string; a ValueError for one with no JSON form."""


_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?" + _OFFSET
)
_NAIVE_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?"
)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# JSON's own number syntax, which is also what str() of a finite Decimal writes.
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# RFC 4648 base64, padded: validate=True alone would still take "==" as empty.
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _matching(syntax: re.Pattern[str], text: str) -> str:
    if not syntax.fullmatch(text):
        raise ValueError
    return text


def _parse_datetime(annotation: Any, text: str) -> object:
    if not _DATE_TIME.fullmatch(text):
        if _NAIVE_DATE_TIME.fullmatch(text):
            msg = "no UTC offset: end it with Z or +HH:MM"
            raise ValueError(msg)
        raise ValueError
    # fromisoformat reads only an upper-case T and Z, which RFC 3339 does not require.
    return annotation.fromisoformat(text.upper())


def _render_datetime(value: datetime.datetime) -> str:
    offset = value.utcoffset()
    if offset is None:
        msg = (
            f"the datetime {value.isoformat()} has no UTC offset, so it names no instant; "
            "make it aware, e.g. datetime.now(timezone.utc)"
        )
        raise ValueError(msg)
    if offset % datetime.timedelta(minutes=1):  # RFC 3339 offsets have no seconds
        value = value.astimezone(datetime.UTC)
    return value.isoformat()


def _render_date(value: datetime.date) -> str:
    # Not isoformat(): a datetime where a date is declared would write its time too.
    return f"{value.year:04}-{value.month:02}-{value.day:02}"


def _parse_decimal(annotation: Any, text: str) -> object:
    try:
        return annotation(_matching(_DECIMAL, text))
    except decimal.InvalidOperation:  # an exponent beyond what Decimal holds
        msg = "out of range"
        raise ValueError(msg) from None


def _render_decimal(value: decimal.Decimal) -> str:
    if not value.is_finite():
        msg = f"Decimal({str(value)!r}) has no JSON form; return a finite Decimal"
        raise ValueError(msg)
    return str(value)


def _parse_path(annotation: Any, text: str) -> object:
    if not text:
        # Path("") is the current folder: say "." to mean it.
        msg = "empty; '.' names the current folder"
        raise ValueError(msg)
    return annotation(text)


_DATE_TIME_FORM = _TextForm(
    schema={"type": "string", "format": "date-time"},
    expected="an RFC 3339 date-time string with a UTC offset, such as '2026-05-09T14:30:00Z'",
    parse=_parse_datetime,
    render=_render_datetime,
)
_PATH_FORM = _TextForm(
    schema={"type": "string", "minLength": 1},
    expected="a path string",
    parse=_parse_path,
    render=str,
)
_TEXT_FORMS: Mapping[type, _TextForm] = {
    datetime.datetime: _DATE_TIME_FORM,
    datetime.date: _TextForm(
        schema={"type": "string", "format": "date"},
        expected="a date string (YYYY-MM-DD)",
        parse=lambda annotation, text: annotation.fromisoformat(_matching(_DATE, text)),
        render=_render_date,
    ),
    uuid.UUID: _TextForm(
        schema={"type": "string", "format": "uuid"},
        expected="a UUID string (8-4-4-4-12 hex digits)",
        parse=lambda annotation, text: annotation(_matching(_UUID, text)),
        render=str,
    ),
    decimal.Decimal: _TextForm(
        schema={"type": "string", "pattern": f"^{_DECIMAL.pattern}$"},
        expected="a decimal string, such as '12.50'",
        parse=_parse_decimal,
        render=_render_decimal,
    ),
    bytes: _TextForm(
        schema={"type": "string", "contentEncoding": "base64", "pattern": f"^{_BASE64.pattern}$"},
        expected="a base64 string",
        parse=lambda _, text: base64.b64decode(_matching(_BASE64, text), validate=True),
        render=lambda value: base64.b64encode(value).decode("ascii"),
    ),
    # Both: cattrs registers a lenient hook of its own for Path, a subclass.
    pathlib.PurePath: _PATH_FORM,
    pathlib.Path: _PATH_FORM,
}


def _text_form(annotation: object) -> _TextForm | None:
    """How `annotation` is written as a string; None for a type that is not."""
    if not isinstance(annotation, type):
        return None
    for cls in annotation.__mro__:
        form = _TEXT_FORMS.get(cls)
        if form is not None:
            return form
    return None


# Room for a date-time with fractions and offset, or a UUID in braces, shown whole.
_shown = reprlib.Repr()
_shown.maxstring = 60


def _text_hook(form: _TextForm) -> _Hook:
    """Structures a string in `form`'s syntax, and nothing else, into the annotated type."""

    def structure(value: object, annotation: object) -> object:
        if not isinstance(value, str):
            raise _MismatchError(form.expected, _got(value))
        try:
            return form.parse(annotation, value)
        except ValueError as exc:
            reason = f" ({exc})" if str(exc) else ""
            raise _MismatchError(form.expected, _shown.repr(value) + reason) from None

    return structure


class _ModelError(ValueError):
    """A pydantic model's validation errors, each as a path below the model and a message."""

    def __init__(self, problems: Sequence[tuple[str, str | None]]) -> None:
        super().__init__("; ".join(f"{where}: {message}" for where, message in problems))
        self.problems = problems
        """(path below the model, message); no message means the value is missing."""


def _structure_model(value: object, annotation: Any) -> object:
    """Validate JSON data with a pydantic model, in strict mode: no coercion, as elsewhere."""
    from pydantic import ValidationError  # only a model, so pydantic imported, gets here

    try:
        # JSON mode: in Python mode strict pydantic takes no string for a datetime.
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        expected = "JSON data"
        raise _MismatchError(expected, _got(value)) from None
    try:
        return annotation.model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise _ModelError([_model_problem(error) for error in exc.errors()]) from None


def _model_problem(error: Mapping[str, Any]) -> tuple[str, str | None]:
    location = [_location_step(step) for step in error["loc"]]
    if error["type"] == "missing":
        return "".join(location), None
    if error["type"] == "extra_forbidden" and location:
        return "".join(location[:-1]), f"unexpected key {error['loc'][-1]!r}"
    return "".join(location), str(error["msg"])


def _location_step(step: object) -> str:
    if isinstance(step, str) and step.isidentifier():
        return f".{step}"
    return f"[{step!r}]"


def _unstructure_model(value: Any) -> object:
    # By alias, as the schema pydantic makes describes it.
    return value.model_dump(mode="json", by_alias=True)


def _optional_hook(annotation: Any, converter: cattrs.Converter) -> _Hook:
    inner_type = _not_none(annotation)
    inner = converter.get_structure_hook(inner_type)

    def structure(value: object, _: object) -> object:
        if value is None:
            return None
        try:
            return inner(value, inner_type)
        except _MismatchError as exc:
            expected = f"{exc.expected} or null"
            raise _MismatchError(expected, exc.got) from None

    return structure


def _checking(kinds: type | tuple[type, ...], expected: str, structure: _Hook) -> _Hook:
    """`structure` behind a check of the value's JSON type.

    cattrs would structure a string into a list of characters and fail with a
    pathless error on a string given for an object.
    """

    def checked(value: object, annotation: object) -> object:
        if not isinstance(value, kinds):
            raise _MismatchError(expected, _got(value))
        return structure(value, annotation)

    return checked


def _is_array(annotation: Any) -> bool:
    return get_origin(annotation) in (list, tuple)


def _array_hook(annotation: Any, converter: cattrs.Converter) -> _Hook:
    is_tuple = get_origin(annotation) is tuple
    factory = homogenous_tuple_structure_factory if is_tuple else list_structure_factory
    return _checking((list, tuple), "an array", factory(annotation, converter))


def _is_dict(annotation: Any) -> bool:
    return get_origin(annotation) is dict


def _mapping_hook(annotation: Any, converter: cattrs.Converter) -> _Hook:
    return _checking(Mapping, "an object", make_mapping_structure_fn(annotation, converter))


def _object_hook(annotation: Any, converter: cattrs.Converter) -> _Hook:
    return _checking(Mapping, "an object", converter.gen_structure_attrs_fromdict(annotation))


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for scalar in _SCALARS:
        converter.register_structure_hook(scalar, _structure_scalar)
    # Later registrations take precedence over cattrs' own, lenient, hooks.
    converter.register_structure_hook_func(_is_choice, _structure_choice)
    converter.register_structure_hook_factory(_is_optional, _optional_hook)
    converter.register_structure_hook_factory(_is_array, _array_hook)
    converter.register_structure_hook_factory(_is_dict, _mapping_hook)
    converter.register_structure_hook_factory(_is_attrs_class, _object_hook)
    # By class: cattrs dispatches subclasses (a Path is a PurePath) to them too.
    for cls, form in _TEXT_FORMS.items():
        converter.register_structure_hook(cls, _text_hook(form))
        converter.register_unstructure_hook(cls, form.render)
    converter.register_structure_hook_func(_is_pydantic_model, _structure_model)
    converter.register_unstructure_hook_func(_is_pydantic_model, _unstructure_model)
    converter.register_structure_hook_factory(_is_constrained, _constrained_hook)
    return converter


_converter = _make_converter()


# Error messages.


def _explain(exc: BaseException, path: str) -> Iterator[str]:
    """One message per failure within `exc`, each naming the path of the value at fault."""
    if isinstance(exc, ClassValidationError | IterableValidationError):
        with_notes, without = exc.group_exceptions()
        for inner, note in with_notes:
            yield from _explain(inner, _step(path, note))
        for inner in without:
            yield from _explain(inner, path)
    elif isinstance(exc, KeyError):
        # cattrs lets the KeyError of looking up a missing key through.
        yield f"{path} is required"
    elif isinstance(exc, ForbiddenExtraKeysError):
        yield _unexpected(exc, path)
    elif isinstance(exc, _ModelError):
        for where, message in exc.problems:
            yield f"{path}{where} is required" if message is None else f"{path}{where}: {message}"
    else:
        yield f"{path}: {exc}"


def _step(path: str, note: AttributeValidationNote | IterableValidationNote) -> str:
    if isinstance(note, AttributeValidationNote):
        return f"{path}.{note.name}"
    return f"{path}[{note.index!r}]"


def _unexpected(exc: ForbiddenExtraKeysError, path: str) -> str:
    extra = ", ".join(sorted(map(repr, exc.extra_fields)))
    plural = "s" if len(exc.extra_fields) > 1 else ""
    known = ", ".join(field.name for field in attrs.fields(exc.cl) if field.init)
    if path == "$":
        return f"unexpected argument{plural} {extra}; the tool takes {known or 'no arguments'}"
    return f"{path}: unexpected key{plural} {extra}; the object takes {known or 'no keys'}"
