"""Preparing a call: parse, resolve, bind and route, in one place for every caller.

`Runtime.call`, the MCP server, the asyncio and blocking hosts and the
benchmarks' stand-ins all turn a tools/call-shaped mapping into a
`PreparedCall` here, so a call is parsed once and judged by one set of rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeAlias, final

import attrs

from protocol import (
    DEFAULT_POLICY,
    HANDLE_ARGUMENT,
    CallFormatError,
    call_name,
    handle_in_uri,
    parse_named_call,
    split_call,
)

from ._errors import UnknownResourceError
from ._module import URI_ARGUMENT
from ._names import did_you_mean
from ._resources import MAX_COMPLETIONS, Completions
from ._uri_template import text_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from protocol import Caller, ContextPolicy, ToolContext

    from ._module import Tool
    from ._registry import Registry

    CallParts: TypeAlias = tuple[
        Tool, ToolContext, dict[str, Any], "Route", bool, Mapping[str, Any] | None
    ]
    """A `PreparedCall`'s fields, in its order, as a plain tuple (`call_parts`)."""

__all__ = [
    "PreparedCall",
    "Route",
    "call_parts",
    "prepare_call",
    "prepare_completion",
    "prepare_prompt",
    "prepare_read",
]

_HANDLE_QUERY: Final = "{?" + HANDLE_ARGUMENT + "}"
_HANDLE_QUERY_MORE: Final = "{&" + HANDLE_ARGUMENT + "}"

Route = tuple[str, str, str | None, str | None]
"""An actor key's parts: (module, session, assistant, thread), the ones outside the
module's scope None. The routing table is keyed by this plain tuple; the `ActorKey`
object is built only when an actor starts."""


@final
@attrs.frozen
class PreparedCall:
    """A call that passed every check and is ready to run on its key's actor."""

    tool: Tool
    """The tool the call's name resolved to."""
    context: ToolContext
    """Who the call is for, after the caller's rules (default session, tenant)."""
    arguments: dict[str, Any]
    """The arguments, without context fields, structured for the handler."""
    route: Route
    """The key of the actor that runs it."""
    session_defaulted: bool
    """True when nothing named a session and the lenient policy's default was used."""
    meta: Mapping[str, Any] | None = None
    """The call's ``_meta`` as sent, for observers (a trace context may ride in it)."""


def prepare_call(
    registry: Registry,
    params: Mapping[str, Any],
    policy: ContextPolicy = DEFAULT_POLICY,
    caller: Caller | None = None,
) -> PreparedCall:
    """Check a tools/call-shaped call and work out where it runs; nothing is sent.

    In this order, so that each error does not depend on what comes later:
    the tool name is resolved (UnknownToolError, whatever the context or the
    arguments), the context is read and judged by `policy` and `caller`
    (ProtocolError), and the arguments are checked against the tool's schema
    (ArgumentsError). `caller` is who the transport says sent the call
    (`protocol.Caller`); ``None`` trusts the call's context as given.
    """
    return PreparedCall(*call_parts(registry, params, policy, caller))


def call_parts(
    registry: Registry,
    params: Mapping[str, Any],
    policy: ContextPolicy,
    caller: Caller | None,
) -> CallParts:
    """`prepare_call`'s checks, and the fields of its `PreparedCall` as a tuple: for a
    router that sends the call at once and has no use for the record (`Runtime.call`)."""
    name = call_name(params)
    tool = registry.resolve(name)
    # `_prepared`, inline and without a ParsedCall: every tool call comes through here.
    context, clean, _, defaulted, _ = split_call(params, policy, caller, stateless=tool.stateless)
    arguments = tool.signature.bind(clean)
    module = tool.module
    route = module.scope.route(module.name, context)
    # A stateless tool's default session is not worth a warning: nothing of it is kept.
    defaulted = defaulted and not tool.stateless
    return tool, context, arguments, route, defaulted, params.get("_meta")


def _prepared(
    operation: Tool,
    params: Mapping[str, Any],
    name: str,
    policy: ContextPolicy,
    caller: Caller | None,
    extra: Mapping[str, Any] | None = None,
) -> PreparedCall:
    """`params` judged and bound for `operation`, with `extra` arguments only the runtime adds."""
    parsed = parse_named_call(params, name, policy, caller)
    arguments = operation.signature.bind(parsed.arguments)
    if extra:
        arguments.update(extra)
    module = operation.module
    route = module.scope.route(module.name, parsed.context)
    return PreparedCall(
        operation, parsed.context, arguments, route, parsed.session_defaulted, params.get("_meta")
    )


def prepare_read(
    registry: Registry,
    uri: str,
    meta: Mapping[str, Any] | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    caller: Caller | None = None,
) -> PreparedCall:
    """A ``resources/read`` of `uri`, for the context in `meta` (or `caller`'s default).

    Raises UnknownResourceError, then ProtocolError and ArgumentsError as
    `prepare_call` does (a template's variables are its arguments).
    """
    if not isinstance(uri, str) or not uri:
        msg = f"a resource read needs 'uri', a non-empty string; got {uri!r:.80}"
        raise CallFormatError(msg)
    handle = None
    if caller is not None and caller.handles is not None:
        uri, handle = handle_in_uri(uri)  # the handler sees the URI without it
    resource, variables = registry.resource(uri)
    if handle is not None:
        variables[HANDLE_ARGUMENT] = handle
    operation = resource.operation
    params = {"name": operation.full_name, "arguments": variables, "_meta": meta}
    extra = {URI_ARGUMENT: uri}
    return _prepared(operation, params, operation.full_name, policy, caller, extra)


def prepare_prompt(
    registry: Registry,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    caller: Caller | None = None,
) -> PreparedCall:
    """A ``prompts/get`` of the prompt listed as `name` with `arguments`.

    Raises UnknownPromptError, then ProtocolError and ArgumentsError as
    `prepare_call` does.
    """
    operation = registry.prompt(name).operation
    params = {"name": operation.full_name, "arguments": arguments, "_meta": meta}
    return _prepared(operation, params, operation.full_name, policy, caller)


def prepare_completion(
    registry: Registry,
    target: str,
    argument: str,
    value: str,
    meta: Mapping[str, Any] | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    caller: Caller | None = None,
    handle: str | None = None,
) -> PreparedCall | Completions:
    """A ``completion/complete`` of `argument` of the prompt or resource template `target`.

    `target` is a listed prompt name or a URI template as listed; `value` is
    what was typed so far. A declared completion runs on its key's actor: the
    PreparedCall to run. An argument whose type lists its values (a
    ``Literal``, an Enum) is completed from them here, as is an argument the
    target does not have (with nothing): the Completions themselves. Raises
    UnknownPromptError or UnknownResourceError for an unknown target. `handle` is
    the conversation handle the client gave among the arguments it filled in already
    (a template listed with ``{?conversation}`` is the template without it).
    """
    kind = "ref/resource" if "://" in target else "ref/prompt"
    if caller is not None and caller.handles is not None:
        target = target.removesuffix(_HANDLE_QUERY).removesuffix(_HANDLE_QUERY_MORE)
    properties = _arguments_of(registry, kind, target)
    if argument not in properties:
        return Completions(())
    completion = registry.completion(kind, target, argument)
    if completion is None:
        found = [choice for choice in _choices(properties[argument]) if choice.startswith(value)]
        return Completions(tuple(found[:MAX_COMPLETIONS]), len(found) > MAX_COMPLETIONS)
    operation = completion.operation
    (parameter,) = operation.signature.input_schema["properties"]
    arguments = (
        {parameter: value} if handle is None else {parameter: value, HANDLE_ARGUMENT: handle}
    )
    params = {"name": operation.full_name, "arguments": arguments, "_meta": meta}
    return _prepared(operation, params, operation.full_name, policy, caller)


def _choices(schema: Mapping[str, Any]) -> list[str]:
    """The values `schema` lists (its ``enum``, or its union members', ``X | None``), each
    as the text a URI or a prompt writes it: ``1`` for an IntEnum's member."""
    members = [schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())]
    listed = [text_of(choice) for member in members for choice in member.get("enum", ())]
    return list(dict.fromkeys(listed))


def _arguments_of(registry: Registry, kind: str, target: str) -> Mapping[str, Any]:
    """The argument schemas of the prompt or resource template `target`, by name."""
    if kind == "ref/prompt":
        operation = registry.prompt(target).operation
    else:
        templates = {resource.template.text: resource for resource in registry.templates()}
        if target not in templates:
            guess = did_you_mean(target, templates)
            msg = f"no resource template is {target!r:.300}; {guess}see resources/templates/list"
            raise UnknownResourceError(msg, target)
        operation = templates[target].operation
    properties: Mapping[str, Any] = operation.signature.input_schema.get("properties", {})
    return properties
