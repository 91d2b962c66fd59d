"""Conversation handles, served: the start tool, and what the lists carry of a handle.

With handles on (``serve --handles``; the default over HTTP), a model starts a
conversation with ``conversation__start`` and passes the handle it gets as the
``conversation`` argument of every later call (`protocol.HandleKeys` mints and reads
them; `protocol.Caller.handles` applies them to a call; `actors.server._handle_keys`
finds the keys). Here: the start tool and its result, and the listings: every stateful
tool's input schema, every prompt and every resource (as a template with
``{?conversation}``) gain the handle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from mcp import types

from protocol import HANDLE_ARGUMENT, HANDLE_TOOL, BackendType, CallResult, ServiceInfo

from .._configuration import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..._module import Tool
    from ..._registry import Registry

__all__ = [
    "START_SERVICE",
    "START_TOOL",
    "check_handle_names",
    "started",
    "with_handle",
    "with_handle_argument",
    "with_handle_query",
]

START_SERVICE: Final = ServiceInfo("conversation", "start", BackendType.BUILTIN)
_DESCRIBED: Final = (
    "The handle of this conversation, from conversation__start. Pass the same handle in "
    "every call of one conversation, and never one conversation's handle in another."
)
_PROPERTY: Final = {"type": "string", "description": _DESCRIBED}
START_TOOL: Final = types.Tool(
    name=HANDLE_TOOL,
    title="Start a conversation",
    description=(
        "Start a new conversation and get its handle. Call it once, before the other tools; "
        f"then pass the handle as {HANDLE_ARGUMENT!r} in every tool call of this "
        "conversation: their state (goals, playbooks, documents…) is kept per conversation. "
        "Start another conversation only for a separate task."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={
        "type": "object",
        "properties": {HANDLE_ARGUMENT: {"type": "string"}},
        "required": [HANDLE_ARGUMENT],
        "additionalProperties": False,
    },
    # Changes no state; each call starts another conversation.
    annotations=types.ToolAnnotations(
        title="Start a conversation", read_only_hint=True, open_world_hint=False
    ),
)
"""The tool a model calls to start a conversation, listed where handles are on."""


def started(handle: str) -> CallResult:
    """The result of ``conversation__start``: the handle, for the model and for programs."""
    text = (
        f"Started a new conversation; its handle is {handle}. Pass it as {HANDLE_ARGUMENT!r} "
        "in every tool call of this conversation."
    )
    return CallResult.both(text, {HANDLE_ARGUMENT: handle}).stamped(START_SERVICE)


# ---- what the lists carry --------------------------------------------------------------


def check_handle_names(registry: Registry) -> None:
    """Refuse modules that would collide with handles: a tool named ``conversation__start``,
    or a tool or prompt with an argument of the handle's name."""
    if HANDLE_TOOL in {tool.full_name for tool in registry.tools()}:
        msg = f"a module's tool is named {HANDLE_TOOL!r}, which conversation handles need"
        raise ConfigurationError(msg)
    operations = [tool.signature for tool in registry.tools()]
    operations += [prompt.operation.signature for prompt in registry.prompts()]
    operations += [resource.operation.signature for resource in registry.templates()]
    for signature in operations:
        if HANDLE_ARGUMENT in signature.input_schema.get("properties", {}):
            msg = (
                f"an argument of a tool or prompt, or a variable of a resource template, is "
                f"named {HANDLE_ARGUMENT!r}, which conversation handles take for themselves: "
                "rename it, or serve --no-handles"
            )
            raise ConfigurationError(msg)


def with_handle(tool: Tool) -> dict[str, Any]:
    """`tool`'s input schema with the required handle argument, unless the tool is stateless."""
    schema = tool.input_schema
    if tool.stateless:
        return dict(schema)
    properties = {**schema.get("properties", {}), HANDLE_ARGUMENT: dict(_PROPERTY)}
    required = [*schema.get("required", ()), HANDLE_ARGUMENT]
    return {**schema, "properties": properties, "required": required}


def with_handle_argument(arguments: Iterable[types.PromptArgument]) -> list[types.PromptArgument]:
    """A prompt's arguments with the handle's, required."""
    handle = types.PromptArgument(name=HANDLE_ARGUMENT, description=_DESCRIBED, required=True)
    return [*arguments, handle]


def with_handle_query(template: str) -> str:
    """The URI template that reads `template` (a URI or a template) for a conversation."""
    return template + ("{&" if "?" in template else "{?") + HANDLE_ARGUMENT + "}"
