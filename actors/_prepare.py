"""Preparing a call: parse, resolve, bind and route, in one place for every caller.

`Runtime.call`, the MCP server, the asyncio and blocking hosts and the
benchmarks' stand-ins all turn a tools/call-shaped mapping into a
`PreparedCall` here, so a call is parsed once and judged by one set of rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

import attrs

from protocol import DEFAULT_POLICY, call_name, parse_named_call

if TYPE_CHECKING:
    from collections.abc import Mapping

    from protocol import Caller, ContextPolicy, ToolContext

    from ._module import Tool
    from ._registry import Registry

__all__ = ["PreparedCall", "Route", "prepare_call"]

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
    name = call_name(params)
    tool = registry.resolve(name)
    parsed = parse_named_call(params, name, policy, caller)
    arguments = tool.signature.bind(parsed.arguments)
    module = tool.module
    route = (module.name, *module.scope.parts(parsed.context))
    return PreparedCall(
        tool, parsed.context, arguments, route, parsed.session_defaulted, params.get("_meta")
    )
