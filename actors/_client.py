"""What a handler says to, and asks of, the client of its call: `Log` and `Ask`.

    @notes.tool
    async def import_notes(state: Notes, source: str, log: Log, ask: Ask) -> str:
        log.info(f"reading {source}")
        answer = await ask.user("Import how many?", int)
        if answer.data is None:  # declined or cancelled
            return "nothing imported"
        ...  # answer.data is the int the user gave

Like `Progress`, a parameter annotated `Log` or `Ask` is not an argument: it
receives the call's channel to its client.

`Log` sends ``notifications/message`` to the client, at or above the level it
asked for (``logging/setLevel``, or a request's log level in 2026-era
requests); in process, and for a client that asked for none, it goes nowhere.
Like `Progress.report`, it never blocks and may be called from any handler,
sync, async or heavy; how many messages reach the client is the listener's
business (the MCP server keeps a bounded queue per call and says how many it
dropped).

`Ask` sends the client a request and waits for its answer: the user (form
elicitation, ``ask.user``) or the client's model (sampling, ``ask.model``).
``ask.user`` takes the form as a flat JSON Schema, or as a type it derives the
schema from and structures the answer into (``Answer.data``), with the rules
and the cattrs converter of tool arguments (`actors._schema`).

Only async handlers can ask: the answer is awaited. While the handler waits,
its key's turn is held — that is the point, the conversation is serialized —
but no other key waits, and the call's deadline still applies. A client that
cannot be asked (it did not declare the capability, or the call was made in
process without an asker) raises `CannotAskError`, a `ToolError`: uncaught,
the call's result is an error that says so.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Protocol, final, overload

import attrs

from ._channel import Channel
from ._delivery import Delivery
from ._errors import ArgumentsError, ToolError
from ._schema import Signature, signature_of

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    # Bare `Answer`, as written before it took a type, stays valid: an answer without data.
    _Data_co = TypeVar("_Data_co", covariant=True, default=None)
else:
    from typing import TypeVar

    # typing's TypeVar takes no default before Python 3.13; only type checkers read it.
    _Data_co = TypeVar("_Data_co", covariant=True)

_T = TypeVar("_T")

__all__ = [
    "LOG_LEVELS",
    "MAX_LOG_TEXT",
    "Answer",
    "Ask",
    "Asker",
    "CannotAskError",
    "Log",
    "LogMessage",
    "check_form",
]

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: Final[tuple[LogLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""MCP's log levels (those of syslog), least severe first."""
MAX_LOG_TEXT: Final = 8000
"""The longest text of one log message, in characters: longer ones are cut, and say so."""


@final
@attrs.frozen
class LogMessage:
    """One message of a tool's log: its level, its text, and the logger it names (if any)."""

    level: LogLevel
    """How severe (one of `LOG_LEVELS`)."""
    text: str
    """What happened, at most `MAX_LOG_TEXT` characters."""
    logger: str | None = None
    """Which part of the tool speaks, if it says."""


@final
class Log(Channel):
    """A handler's log to the client of its call (see the module docstring)."""

    __slots__ = ("_delivery",)
    kind = "log"

    def __init__(self, listener: Callable[[LogMessage], None] | None = None) -> None:
        """A log handing messages to `listener` (None: to nobody).

        With a listener, it must be made on the runtime's thread, in trio.
        """
        self._delivery = Delivery(listener)

    def message(self, level: LogLevel, text: str, *, logger: str | None = None) -> None:
        """Send `text` at `level`; raises ValueError for a level MCP does not have."""
        if level not in LOG_LEVELS:
            msg = f"log level must be one of {', '.join(LOG_LEVELS)}; got {level!r:.40}"
            raise ValueError(msg)
        if not self._delivery.listened:
            return
        text = str(text)
        if len(text) > MAX_LOG_TEXT:
            text = f"{text[: MAX_LOG_TEXT - 40]}… ({len(text)} characters, cut)"
        self._delivery.deliver(LogMessage(level, text, logger))

    def debug(self, text: str, *, logger: str | None = None) -> None:
        """Send `text` at level ``debug``."""
        self.message("debug", text, logger=logger)

    def info(self, text: str, *, logger: str | None = None) -> None:
        """Send `text` at level ``info``."""
        self.message("info", text, logger=logger)

    def notice(self, text: str, *, logger: str | None = None) -> None:
        """Send `text` at level ``notice``."""
        self.message("notice", text, logger=logger)

    def warning(self, text: str, *, logger: str | None = None) -> None:
        """Send `text` at level ``warning``."""
        self.message("warning", text, logger=logger)

    def error(self, text: str, *, logger: str | None = None) -> None:
        """Send `text` at level ``error``."""
        self.message("error", text, logger=logger)


class CannotAskError(ToolError):
    """The call's client cannot be asked: it did not declare the capability, or there is none."""


@final
@attrs.frozen
class Answer(Generic[_Data_co]):
    """What the user answered a form (``ask.user``); `Answer[T]` when it was asked as type T."""

    action: Literal["accept", "decline", "cancel"]
    """``accept``: the user filled in the form; ``decline``: said no; ``cancel``: dismissed it."""
    content: Mapping[str, Any] | None = None
    """The form's values, when accepted, as the client sent them: of the form's JSON types,
    and no more checked than that (`data` is, when the form was asked as a type)."""
    data: _Data_co | None = None
    """The answer structured into the type asked for, when accepted; None otherwise, and for
    a form asked as a JSON Schema."""

    @property
    def accepted(self) -> bool:
        """Whether the user filled in the form."""
        return self.action == "accept"


class Asker(Protocol):
    """What an `Ask` sends its requests through: the MCP server's, or a test's own."""

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """Ask the user to fill in a form described by `schema`."""
        ...

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
    ) -> str:
        """Ask the client's model to answer `messages`; its text."""
        ...


MAX_QUESTION: Final = 10_000
"""The longest message or prompt `Ask` sends, in characters."""


@final
class Ask(Channel):
    """A handler's requests to the client of its call (see the module docstring)."""

    __slots__ = ("_asker", "_why_not")
    kind = "ask"

    def __init__(self, asker: Asker | None = None, why_not: str = "") -> None:
        """Requests sent through `asker`; with none, each raises CannotAskError(`why_not`)."""
        self._asker = asker
        self._why_not = why_not or "this call has no client to ask (it was made in process)"

    @overload
    async def user(self, message: str, schema: Mapping[str, Any]) -> Answer: ...
    @overload
    async def user(self, message: str, schema: type[_T]) -> Answer[_T]: ...
    @overload
    async def user(self, message: str, schema: object) -> Answer[Any]: ...

    async def user(self, message: str, schema: object) -> Answer[Any]:
        """Show the user `message` and a form; their answer.

        `schema` is the form as a flat JSON Schema object, or a type: an
        attrs class, a dataclass, a pydantic model or a TypedDict whose fields
        are flat, or one flat type (``str``, ``int``, a Literal...), asked as
        the one field ``value``. An accepted answer to a type is structured
        into it (`Answer.data`; the value itself for one flat type).

        MCP forms are flat: a JSON Schema is ``{"type": "object",
        "properties": {...}}`` whose properties are strings (with ``format``
        email, uri, date or date-time), numbers, integers, booleans or enums
        (``enum``, or ``oneOf`` of ``{"const", "title"}``; arrays of those for
        several choices), each with an optional ``title``, ``description`` and
        ``default``. A form that is not flat raises ValueError naming the field;
        CannotAskError when the client cannot be asked, or answers what does not
        fit the form.
        """
        _check_text("message", message)
        typed: _TypedForm | None = None
        if isinstance(schema, Mapping):
            form: Mapping[str, Any] = schema
        else:
            typed = _typed_form(schema)
            form = typed.schema
        check_form(form)
        asker = self._asker
        if asker is None:
            msg = f"cannot ask the user: {self._why_not}"
            raise CannotAskError(msg)
        answer = await asker.elicit(message, form)
        if answer.content is not None:
            _check_answer(form, answer.content)
        if typed is None or not answer.accepted:
            return answer
        content = answer.content or {}
        return Answer(answer.action, content, typed.structure(content))

    async def model(
        self,
        prompt: str | Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
    ) -> str:
        """Have the client's model answer `prompt` (a text, or MCP sampling messages); its text.

        The client decides which model answers, and may show the request to
        the user first. Raises CannotAskError when the client cannot be asked.
        """
        if isinstance(prompt, str):
            _check_text("prompt", prompt)
            messages: Sequence[Mapping[str, Any]] = (
                {"role": "user", "content": {"type": "text", "text": prompt}},
            )
        else:
            messages = prompt
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            msg = f"max_tokens must be a positive integer, got {max_tokens!r:.40}"
            raise ValueError(msg)
        asker = self._asker
        if asker is None:
            msg = f"cannot ask the client's model: {self._why_not}"
            raise CannotAskError(msg)
        return await asker.sample(
            messages, max_tokens=max_tokens, system_prompt=system_prompt, temperature=temperature
        )


_FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})
_KINDS: Final = frozenset({"string", "number", "integer", "boolean", "array"})


def check_form(schema: object) -> None:
    """Refuse a form schema MCP clients cannot show: raises ValueError naming the property.

    A form is flat: an object whose properties are strings, numbers,
    integers, booleans, or arrays of string choices (multiple choice).
    """
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        msg = 'the form schema must be a JSON Schema object: {"type": "object", "properties": ...}'
        raise ValueError(msg)
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        msg = "the form schema needs 'properties', an object naming at least one field"
        raise ValueError(msg)
    for name, field in properties.items():
        _check_field(str(name), field)
    required = schema.get("required", [])
    if not isinstance(required, list) or not set(required) <= set(properties):
        msg = f"the form schema's 'required' must list some of its properties, got {required!r:.80}"
        raise ValueError(msg)


def _check_field(name: str, field: object) -> None:
    where = f"form field {name!r}"
    if not isinstance(field, Mapping) or field.get("type") not in _KINDS:
        kinds = ", ".join(sorted(_KINDS))
        msg = f"{where} must have a 'type' among {kinds} (forms are flat: no objects)"
        raise ValueError(msg)
    if field.get("type") == "string" and field.get("format", "none") not in {"none", *_FORMATS}:
        msg = f"{where}: format must be one of {', '.join(sorted(_FORMATS))}"
        raise ValueError(msg)
    if field.get("type") == "array":
        items = field.get("items")
        choices = isinstance(items, Mapping) and ("enum" in items or "anyOf" in items)
        if not choices:
            msg = f"{where}: an array is a multiple choice: give 'items' an 'enum' or 'anyOf'"
            raise ValueError(msg)


_JSON_TYPES: Final = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
}


def _check_answer(schema: Mapping[str, Any], content: Mapping[str, Any]) -> None:
    """Refuse an answer that does not fit its form: the client is not to be trusted blindly."""
    properties = schema["properties"]
    for name, value in content.items():
        field = properties.get(name)
        if field is None:
            msg = (
                "cannot ask the user: the client answered a field the form does not have: "
                f"{name!r:.80}"
            )
            raise CannotAskError(msg)
        kind = field["type"]
        fits = isinstance(value, _JSON_TYPES[kind]) and (
            kind == "boolean" or not isinstance(value, bool)
        )
        if not fits:
            msg = (
                f"cannot ask the user: the client answered {name!r:.80} with "
                f"{type(value).__name__}, not {kind}"
            )
            raise CannotAskError(msg)


# Forms asked as a type. The rules are those of tool arguments: `signature_of` derives the
# schema of a stand-in handler taking the form's fields, and its `bind` structures an answer
# with the same strict converter.

_VALUE: Final = "value"
"""The one field of a form asking for one flat value."""
_CLASS_DEFAULT: Final = object()
"""The stand-in's default for a field the class fills in itself (a factory): no JSON shows it,
and the class is not passed it."""
_FLAT_FIELDS: Final = (
    "a form field is a str, int, float, bool, date or datetime (or one of those | None), a "
    "Literal or an Enum of strings, or a list of a Literal or an Enum (several choices)"
)


@final
@attrs.frozen
class _TypedForm:
    """A form derived from a type: its schema, and how an answer becomes an instance."""

    what: str
    """The type, for messages."""
    schema: Mapping[str, Any]
    """The flat JSON Schema sent to the client."""
    signature: Signature
    """The stand-in handler's, whose `bind` structures the answer's values."""
    cls: Callable[..., Any] | None
    """The class the values make; None for one flat value, the form's field `value`."""

    def structure(self, content: Mapping[str, Any]) -> Any:
        """The instance `content` makes; CannotAskError naming the field it does not fit."""
        try:
            bound = self.signature.bind(content)
        except ArgumentsError as exc:
            # Its message names each value at fault by its path ($.age) after this prefix.
            problems = str(exc).removeprefix("invalid arguments: ")
            msg = f"cannot ask the user: the client's answer does not fit {self.what}: {problems}"
            raise CannotAskError(msg) from None
        if self.cls is None:
            return bound[_VALUE]
        # A field the answer leaves out gets the class's own default, factories included.
        given = {name: value for name, value in bound.items() if name in content}
        try:
            return self.cls(**given)
        except (ValueError, TypeError) as exc:  # the class's own validators
            msg = f"cannot ask the user: the client's answer makes no {self.what}: {exc!s:.300}"
            raise CannotAskError(msg) from None


def _typed_form(annotation: object) -> _TypedForm:
    """The form asking for `annotation`; ValueError naming a field no form can show."""
    what = _type_name(annotation)
    fields = _class_fields(annotation)
    if fields is None:
        value = _keyword(_VALUE, annotation, inspect.Parameter.empty)
        properties = {_VALUE: _form_field(what, value)}
        fields, cls = [value], None
    else:
        properties = {
            field.name: _form_field(f"{what}.{field.name} ({_type_name(field.annotation)})", field)
            for field in fields
        }
        cls = typing.cast("Callable[..., Any]", annotation)
    signature = signature_of(_stand_in(fields), takes_state=False)
    required = list(signature.input_schema["required"])
    schema = {"type": "object", "properties": properties, "required": required}
    return _TypedForm(what, schema, signature, cls)


def _form_field(asked: str, field: inspect.Parameter) -> dict[str, Any]:
    """The flat schema of one field; ValueError naming what was `asked` if it has none."""
    refused = (
        f"cannot ask the user for {asked}: a form cannot show it; {_FLAT_FIELDS}. Ask for a "
        "nested class's fields in a form of their own, and for anything else as a str"
    )
    if isinstance(field.annotation, type) and attrs.has(field.annotation):
        # Nested; and a stand-in taking one attrs class would take its fields as the form's.
        raise ValueError(refused)
    try:
        signature = signature_of(_stand_in([field]), takes_state=False)
    except TypeError as exc:
        raise ValueError(refused) from exc
    described = signature.input_schema["properties"].get(field.name)
    if described is None:  # a type the runtime fills in (ToolContext, Ask...): no value
        raise ValueError(refused)
    schema = _without_null(dict(described))
    try:
        _check_field(field.name, schema)
    except ValueError:
        raise ValueError(refused) from None
    choices = schema.get("items", schema)
    if "enum" in choices and choices.get("type") != "string":
        raise ValueError(refused)  # MCP's choices are strings
    return schema


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A ``T | None`` field's schema as T's: a form has no null, it leaves the field out."""
    options = schema.pop("anyOf", None)
    if options is None:
        return schema
    if len(options) != 2 or options[1] != {"type": "null"}:
        return {"anyOf": options, **schema}  # not `T | None`: refused as it is
    if schema.get("default", ...) is None:
        del schema["default"]
    return {**options[0], **schema}


def _type_name(annotation: object) -> str:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]  # its notes and bounds are no type
    return annotation.__qualname__ if isinstance(annotation, type) else repr(annotation)


def _class_fields(annotation: object) -> list[inspect.Parameter] | None:
    """The fields of a class asked as a form, as keyword parameters; None for another type."""
    if not isinstance(annotation, type):
        return None
    if attrs.has(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        return [_attrs_field(field, hints) for field in attrs.fields(annotation) if field.init]
    if dataclasses.is_dataclass(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        return [
            _keyword(field.name, hints[field.name], _dataclass_default(field))
            for field in dataclasses.fields(annotation)
            if field.init
        ]
    if typing.is_typeddict(annotation):
        return _typed_dict_fields(annotation)
    pydantic = sys.modules.get("pydantic")  # a model's class needs pydantic imported
    if pydantic is not None and issubclass(annotation, pydantic.BaseModel):
        model: Any = annotation  # a BaseModel, which mypy cannot know without pydantic
        return [_model_field(name, field) for name, field in model.model_fields.items()]
    return None


def _keyword(name: str, annotation: object, default: object) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def _attrs_field(field: attrs.Attribute[Any], hints: Mapping[str, Any]) -> inspect.Parameter:
    # By the name __init__ takes (`_x` is passed as `x`).
    name, annotation = field.alias or field.name, hints[field.name]
    if field.default is attrs.NOTHING:
        return _keyword(name, annotation, inspect.Parameter.empty)
    # attrs' stubs declare Factory a function; a factory's value is made per instance.
    factory = isinstance(field.default, attrs.Factory)  # type: ignore[arg-type]
    return _keyword(name, annotation, _CLASS_DEFAULT if factory else field.default)


def _dataclass_default(field: dataclasses.Field[Any]) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return _CLASS_DEFAULT
    return inspect.Parameter.empty


def _typed_dict_fields(cls: type[Any]) -> list[inspect.Parameter]:
    fields = []
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        annotation, required = hint, name in cls.__required_keys__
        # Python 3.11 fills __required_keys__ from the annotations as written, so it misses
        # NotRequired in a module with `from __future__ import annotations`.
        while (wrapper := typing.get_origin(annotation)) in (typing.Required, typing.NotRequired):
            required = wrapper is typing.Required
            annotation = typing.get_args(annotation)[0]
        default = inspect.Parameter.empty if required else _CLASS_DEFAULT
        fields.append(_keyword(name, annotation, default))
    return fields


def _model_field(name: str, field: Any) -> inspect.Parameter:
    """A pydantic field; its notes and bounds as `Annotated` metadata, as arguments have them."""
    pydantic = sys.modules["pydantic"]
    notes = pydantic.Field(description=field.description, title=field.title)
    annotation = typing.Annotated[field.annotation, *field.metadata, notes]
    if field.is_required():
        return _keyword(name, annotation, inspect.Parameter.empty)
    has_default = field.default_factory is None
    return _keyword(name, annotation, field.default if has_default else _CLASS_DEFAULT)


def _stand_in(fields: Sequence[inspect.Parameter]) -> Callable[..., None]:
    """A handler taking `fields`, for `signature_of` to read as it reads a tool's."""

    def form(**_values: Any) -> None:
        """Never called."""

    form.__signature__ = inspect.Signature(fields)  # type: ignore[attr-defined]
    form.__annotations__ = {field.name: field.annotation for field in fields}
    return form


def _check_text(name: str, text: object) -> None:
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_QUESTION:
        msg = f"{name} must be a non-blank string of at most {MAX_QUESTION} characters"
        raise ValueError(msg)
