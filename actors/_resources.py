"""Resources, prompts and completions: what a module shows a host, read from a key's state.

    @notes.resource("notes://all", mime_type="text/markdown")
    def all_notes(state: Notes) -> str:
        '''Every note of this conversation.'''
        return "\\n".join(f"- {text}" for text in state.texts)

    @notes.prompt
    def summarize(state: Notes, style: str = "short") -> str:
        '''Ask for a summary of the notes.'''
        return f"Summarize these notes, {style}: {state.texts}"

A resource, a resource template, a prompt and a completion are each served
like a read-only tool: the handler runs in the turn of the actor that owns
the caller's key, on that key's state, so a host reading ``notes://all``
sees its own conversation's notes and nobody else's. The runtime runs them
as hidden operations (`Tool` objects that are never listed as tools). What is
listed about them (`Resource`, `Prompt`, `Completion`) is in ``_module``, beside
the `Tool` each holds; this module turns what their handlers return into
results, and reads those results back.

What a handler may return:

* a resource's: ``str`` (text, ``text/plain`` unless declared), ``bytes``
  (a blob, ``application/octet-stream`` unless declared), a mapping, a list or
  an attrs instance (JSON text, ``application/json``), a `ResourceContents`,
  several of them, or a whole `ResourceResult`;
* a prompt's: ``str`` (one user message), a content item (`TextContent`,
  `ImageContent`, `EmbeddedResource`…, one user message), a `PromptMessage`,
  a list of any of those, or a whole `PromptResult`;
* a completion's: the suggested values, an iterable of ``str`` (at most
  `MAX_COMPLETIONS` are sent).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, Final, final

import attrs
import cattrs

from protocol import (
    AudioContent,
    CallResult,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    PromptResult,
    ResourceContents,
    ResourceLink,
    ResourceResult,
    TextContent,
    render_data,
)

from ._errors import HandlerError

__all__ = [
    "MAX_COMPLETIONS",
    "Completions",
    "completion_values",
    "completions_of",
    "handler_data",
    "prompt_result",
    "resource_result",
]

MAX_COMPLETIONS: Final = 100
"""The most values one completion answers with (MCP's own bound)."""

_CONTENT_ITEMS: Final = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)
_JSON: Final = cattrs.Converter()


@final
@attrs.frozen
class Completions:
    """Suggested values for an argument, and whether there were more than these."""

    values: tuple[str, ...]
    """At most `MAX_COMPLETIONS` suggestions, best first."""
    has_more: bool = False
    """Whether there were more than `values` holds."""


def handler_data(result: CallResult) -> Mapping[str, Any]:
    """The wire form a resource, prompt or completion result carries; or HandlerError."""
    if result.is_error or result.structured_content is None:
        raise HandlerError(result.first_text)
    return result.structured_content


def completions_of(result: CallResult) -> Completions:
    """What a completion handler's result suggests; HandlerError if it failed."""
    data = handler_data(result)
    return Completions(tuple(data["values"]), bool(data["hasMore"]))


def _as_call_result(wire: Mapping[str, Any]) -> CallResult:
    """A result carried through the actor as a CallResult: no text, the wire form as its data."""
    return CallResult((), wire)


def resource_result(value: object, *, uri: str, mime_type: str | None, where: str) -> CallResult:
    """What a resource handler returned, for `uri`, as the CallResult the actor replies with."""
    return _as_call_result(_resource_result(value, uri, mime_type, where).to_wire())


def _resource_result(value: object, uri: str, mime_type: str | None, where: str) -> ResourceResult:
    if isinstance(value, ResourceResult):
        return value
    if isinstance(value, ResourceContents):
        return ResourceResult((value,))
    if isinstance(value, str):
        return ResourceResult((ResourceContents(uri, mime_type or "text/plain", text=value),))
    if isinstance(value, bytes | bytearray | memoryview):
        blob = bytes(value)
        return ResourceResult((ResourceContents(uri, mime_type or _BINARY, blob=blob),))
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(item, ResourceContents) for item in value)
    ):
        return ResourceResult(tuple(value))
    if isinstance(value, Mapping | list | tuple) or attrs.has(type(value)):
        text = render_data(_JSON.unstructure(value))
        return ResourceResult((ResourceContents(uri, mime_type or "application/json", text=text),))
    msg = (
        f"{where} returned {type(value).__name__}; return str, bytes, a mapping, a list, an "
        "attrs instance, ResourceContents (or several) or a ResourceResult"
    )
    raise TypeError(msg)


_BINARY: Final = "application/octet-stream"


def prompt_result(value: object, *, description: str | None, where: str) -> CallResult:
    """What a prompt handler returned, as the CallResult the actor replies with."""
    if isinstance(value, PromptResult):
        return _as_call_result(value.to_wire())
    items = value if isinstance(value, list | tuple) else (value,)
    messages = tuple(_prompt_message(item, where) for item in items)
    if not messages:
        msg = f"{where} returned no message; return at least one"
        raise ValueError(msg)
    return _as_call_result(PromptResult(messages, description).to_wire())


def _prompt_message(item: object, where: str) -> PromptMessage:
    if isinstance(item, PromptMessage):
        return item
    if isinstance(item, str):
        return PromptMessage("user", TextContent(item))
    if isinstance(item, _CONTENT_ITEMS):
        return PromptMessage("user", item)
    msg = (
        f"{where} returned {type(item).__name__} as a message; return str, a content item "
        "(TextContent, ImageContent, EmbeddedResource…), a PromptMessage, a list of those, "
        "or a PromptResult"
    )
    raise TypeError(msg)


def completion_values(value: object, *, where: str) -> CallResult:
    """The values a completion handler suggested, as the CallResult the actor replies with.

    At most `MAX_COMPLETIONS` are sent; ``hasMore`` says that there were more.
    """
    if isinstance(value, str) or not isinstance(value, Iterable):
        msg = f"{where} returned {type(value).__name__}; return an iterable of str"
        raise TypeError(msg)
    values = list(itertools.islice(value, MAX_COMPLETIONS + 1))
    for suggestion in values:
        if not isinstance(suggestion, str):
            msg = f"{where} suggested {type(suggestion).__name__} {suggestion!r:.40}; only str"
            raise TypeError(msg)
    more = len(values) > MAX_COMPLETIONS
    return _as_call_result({"values": values[:MAX_COMPLETIONS], "hasMore": more})
