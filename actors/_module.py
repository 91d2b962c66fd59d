"""The tool-module API: a named group of tools sharing one state class.

    planning = ToolModule("planning", PlanningState, scope=Scope.SESSION_ASSISTANT_THREAD)

    @planning.tool
    def create_goal(state: PlanningState, goal: str) -> str:
        '''Create a goal.'''
        return state.add_goal(goal)

The state factory is called with the call's context projected on the scope,
once per actor. A handler's first parameter is the state; a parameter
annotated `ToolContext` receives the (read-only) context; every other
parameter is an argument, listed in the tool's input schema and validated
with cattrs before the call reaches the actor.

A state object may define lifecycle hooks, sync or async: ``on_start()``
(acquire per-key resources), ``on_stop()`` (release them: runs on TTL expiry,
eviction, crash and shutdown) and ``heal()`` (run before every call, when the
module's ``heal_before_call`` is on, to repair a dead resource transparently).
A state that needs tasks of its own (watching a subprocess, say) defines
``start_background(nursery)``: it is called after ``on_start`` with a nursery
its actor owns; ``on_stop`` runs while those tasks still live, and whatever is
left is cancelled after it. If one of them fails, the actor crashes.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar, final

import attrs
import cattrs

from protocol import BackendType, CallResult, Scope, ServiceInfo, TextContent, ToolContext

from ._schema import Signature, signature_of

__all__ = ["Tool", "ToolModule"]

StateT = TypeVar("StateT")
HandlerT = TypeVar("HandlerT", bound=Callable[..., Any])

_NAME: Final = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
_RESULTS: Final = cattrs.Converter()


def _check_name(kind: str, name: str) -> None:
    if not _NAME.match(name):
        msg = (
            f"{kind} name {name!r} must be lowercase snake_case (letters, digits, single "
            "underscores): '__' separates module and tool in full names"
        )
        raise ValueError(msg)


def to_call_result(value: object, tool: str) -> CallResult:
    """Turn what a handler returned into a CallResult.

    ``str`` → text; a mapping or an attrs instance → data with a JSON text
    rendering; a CallResult as it is. Anything else is a programming error.
    """
    if type(value) is CallResult:
        return value
    if isinstance(value, str):
        return CallResult.text(value)
    if isinstance(value, Mapping):
        return CallResult.data(value)
    if attrs.has(type(value)):
        return CallResult.data(_RESULTS.unstructure(value))
    msg = (
        f"handler of {tool!r} returned {type(value).__name__}; return a str, a mapping, "
        "an attrs instance or a CallResult"
    )
    raise TypeError(msg)


@final
@attrs.frozen
class Tool:
    """One registered tool: its names, schema and handler."""

    module: ToolModule[Any]
    """The module the tool belongs to."""
    name: str
    """The base name, e.g. ``create_goal``."""
    description: str
    """What the tool does, for the model."""
    handler: Callable[..., Any]
    """The decorated function."""
    signature: Signature
    """The input schema and argument binding."""
    service: ServiceInfo
    """Stamped on every content item of the tool's results."""

    @property
    def full_name(self) -> str:
        """``module__tool``, the name listed to clients."""
        return f"{self.module.name}__{self.name}"

    is_async: bool
    """Whether the handler is a coroutine function (decided once, at registration)."""

    def invoke(self, state: object, context: ToolContext, arguments: dict[str, Any]) -> Any:
        """Call the handler; returns its result, or a coroutine when `is_async`."""
        if self.signature.context_parameter is not None:
            arguments = {**arguments, self.signature.context_parameter: context}
        return self.handler(state, **arguments)

    def result_of(self, value: object) -> CallResult:
        """What the handler returned, as a CallResult stamped with this tool's ServiceInfo."""
        if type(value) is str:  # the common case, built without an intermediate result
            return CallResult((TextContent(value, self.service),))
        return to_call_result(value, self.full_name).stamped(self.service)


@final
@attrs.define(eq=False)
class ToolModule(Generic[StateT]):
    """A named group of tools sharing one state per key of its scope."""

    name: str = attrs.field()
    """The module name: the ``server`` part of ``server__tool``."""
    state: Callable[[ToolContext], StateT]
    """Builds the state for one key; called with the projected context."""
    scope: Scope = Scope.SESSION
    """Which context parts key the state."""
    ttl: float | None = None
    """Idle time-to-live for this module's actors; ``None`` uses the runtime's."""
    description: str = ""
    """What the module is for."""
    heal_before_call: bool = True
    """Run the state's ``heal()`` hook, if it has one, before every call."""
    _tools: dict[str, Tool] = attrs.field(factory=dict, init=False)

    @name.validator
    def _check_module_name(self, _attribute: object, value: str) -> None:
        _check_name("module", value)

    def __attrs_post_init__(self) -> None:
        if self.ttl is not None and not self.ttl > 0:
            msg = f"module {self.name!r}: ttl must be positive seconds, got {self.ttl}"
            raise ValueError(msg)

    @property
    def has_async_tools(self) -> bool:
        """Whether any tool's handler is a coroutine function (a deadline can act on it)."""
        return any(tool.is_async for tool in self._tools.values())

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The module's tools by base name."""
        return self._tools

    def tool(self, handler: HandlerT) -> HandlerT:
        """Register `handler` as a tool named after the function; its docstring describes it."""
        name = handler.__name__
        _check_name("tool", name)
        if name in self._tools:
            msg = f"module {self.name!r} already has a tool named {name!r}"
            raise ValueError(msg)
        self._tools[name] = Tool(
            module=self,
            name=name,
            description=inspect.cleandoc(handler.__doc__ or ""),
            handler=handler,
            signature=signature_of(handler),
            service=ServiceInfo(self.name, name, BackendType.BUILTIN),
            is_async=inspect.iscoroutinefunction(handler),
        )
        return handler


async def run_hook(hook: Callable[[], object] | None) -> None:
    """Run a lifecycle hook, sync or async; nothing when there is none."""
    if hook is None:
        return
    outcome = hook()
    if inspect.isawaitable(outcome):
        await outcome
