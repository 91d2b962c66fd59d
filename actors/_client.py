"""What a handler says to, and asks of, the client of its call: `Log` and `Ask`.

    @notes.tool
    async def import_notes(state: Notes, source: str, log: Log, ask: Ask) -> str:
        log.info(f"reading {source}")
        answer = await ask.user("Import how many?", {"type": "object", ...})
        if answer.action != "accept":
            return "nothing imported"
        ...

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
Only async handlers can ask: the answer is awaited. While the handler waits,
its key's turn is held — that is the point, the conversation is serialized —
but no other key waits, and the call's deadline still applies. A client that
cannot be asked (it did not declare the capability, or the call was made in
process without an asker) raises `CannotAskError`, a `ToolError`: uncaught,
the call's result is an error that says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, final

import attrs

from ._delivery import Delivery
from ._errors import ToolError

if TYPE_CHECKING:
    from collections.abc import Callable

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
class Log:
    """A handler's log to the client of its call (see the module docstring)."""

    __slots__ = ("_delivery",)

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
class Answer:
    """What the user answered a form (``ask.user``)."""

    action: Literal["accept", "decline", "cancel"]
    """``accept``: the user filled in the form; ``decline``: said no; ``cancel``: dismissed it."""
    content: Mapping[str, Any] | None = None
    """The form's values, when accepted: checked by the client, not by us — validate them."""

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
class Ask:
    """A handler's requests to the client of its call (see the module docstring)."""

    __slots__ = ("_asker", "_why_not")

    def __init__(self, asker: Asker | None = None, why_not: str = "") -> None:
        """Requests sent through `asker`; with none, each raises CannotAskError(`why_not`)."""
        self._asker = asker
        self._why_not = why_not or "this call has no client to ask (it was made in process)"

    async def user(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """Show the user `message` and a form (a flat JSON Schema object); their answer.

        MCP forms are flat: `schema` is ``{"type": "object", "properties":
        {...}}`` whose properties are strings (with ``format`` email, uri,
        date or date-time), numbers, integers, booleans or enums (``enum``, or
        ``oneOf`` of ``{"const", "title"}``; arrays of those for several
        choices), each with an optional ``title``, ``description`` and
        ``default``. Raises CannotAskError when the client cannot be asked.
        """
        _check_text("message", message)
        check_form(schema)
        asker = self._asker
        if asker is None:
            msg = f"cannot ask the user: {self._why_not}"
            raise CannotAskError(msg)
        answer = await asker.elicit(message, schema)
        if answer.content is not None:
            _check_answer(schema, answer.content)
        return answer

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


def _check_text(name: str, text: object) -> None:
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_QUESTION:
        msg = f"{name} must be a non-blank string of at most {MAX_QUESTION} characters"
        raise ValueError(msg)
