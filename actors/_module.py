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

A sync handler runs inline on its actor, so it holds up the whole event loop
while it runs: every other key, and signals. Declare one that may compute for
long (ranking many documents, parsing a big input) with
``@module.tool(heavy=True)``: it then runs in a worker thread while the loop
serves everyone else, and the per-call deadline applies to it (see the
runtime's module docstring for what a deadline does to a thread, which cannot
be stopped). Async handlers yield at every ``await`` and cannot be heavy.

A module whose state must survive its actor (TTL expiry, eviction, a crash, a
restart) declares ``durable=Durable(StateClass)``: with a store, the runtime
loads the state when the actor starts and writes it after every call of a
tool not declared ``read_only=True``, before the call's reply is sent.

What a tool declares about itself is also told to MCP clients, which may use
it to decide what to ask a user before a call: ``title``, ``read_only``,
``destructive``, ``idempotent`` and ``open_world`` become the tool's title and
annotations (hints, which a client must not trust from a server it does not
trust). A handler annotated to return structured data (an attrs class, a
TypedDict, a ``dict[str, T]``) gets an ``outputSchema`` describing it; one
returning a `CallResult` with data declares the data's type with
``structured=``.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, final, overload

import attrs
import cattrs

from protocol import BackendType, CallResult, Scope, ServiceInfo, TextContent, ToolContext

from ._progress import Progress
from ._schema import Signature, output_schema_of, signature_of

if TYPE_CHECKING:
    from ._durable import Durable

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

    @functools.cached_property
    def full_name(self) -> str:
        """``module__tool``, the name listed to clients (made once: observers read it per call)."""
        return f"{self.module.name}__{self.name}"

    is_async: bool
    """Whether the handler is a coroutine function (decided once, at registration)."""
    heavy: bool = False
    """Whether a sync handler runs in a worker thread, off the event loop (``heavy=True``)."""
    read_only: bool = False
    """Whether the tool never changes its state (``read_only=True``): a durable module
    then skips the write after it, and MCP clients see ``readOnlyHint``."""
    title: str | None = None
    """A human-readable name for hosts to show; ``None`` when not declared."""
    destructive: bool | None = None
    """Whether the tool may destroy or overwrite (``True``) or only adds (``False``);
    ``None`` when not declared. Only declared for a tool that is not read-only."""
    idempotent: bool | None = None
    """Whether calling it again with the same arguments changes nothing more;
    ``None`` when not declared. Only declared for a tool that is not read-only."""
    open_world: bool | None = None
    """Whether the tool reaches beyond the server's own state (programs, the network);
    ``None`` when not declared."""
    output_schema: Mapping[str, Any] | None = None
    """The JSON Schema of the structured data the tool returns; ``None`` when it returns none."""

    def invoke(
        self,
        state: object,
        context: ToolContext,
        arguments: dict[str, Any],
        progress: Progress | None = None,
    ) -> Any:
        """Call the handler; returns its result, or a coroutine when `is_async`.

        `progress` is the call's reporter, for a handler that takes one; a
        reporter to nobody when None.
        """
        signature = self.signature
        if signature.context_parameter is not None:
            arguments = {**arguments, signature.context_parameter: context}
        if signature.progress_parameter is not None:
            reporter = Progress() if progress is None else progress
            arguments = {**arguments, signature.progress_parameter: reporter}
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
    durable: Durable[StateT] | None = None
    """How the state is stored, for a module whose state survives its actor; see `Durable`."""
    _tools: dict[str, Tool] = attrs.field(factory=dict, init=False)

    @name.validator
    def _check_module_name(self, _attribute: object, value: str) -> None:
        _check_name("module", value)

    def __attrs_post_init__(self) -> None:
        if self.ttl is not None and not self.ttl > 0:
            msg = f"module {self.name!r}: ttl must be positive seconds, got {self.ttl}"
            raise ValueError(msg)

    @property
    def has_awaited_tools(self) -> bool:
        """Whether any tool's call is awaited (async or heavy), so that a deadline can end it."""
        return any(tool.is_async or tool.heavy for tool in self._tools.values())

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The module's tools by base name."""
        return self._tools

    @overload
    def tool(
        self,
        handler: HandlerT,
        /,
        *,
        heavy: bool = False,
        read_only: bool = False,
        title: str | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: type[Any] | None = None,
    ) -> HandlerT: ...

    @overload
    def tool(
        self,
        /,
        *,
        heavy: bool = False,
        read_only: bool = False,
        title: str | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: type[Any] | None = None,
    ) -> Callable[[HandlerT], HandlerT]: ...

    def tool(
        self,
        handler: Callable[..., Any] | None = None,
        /,
        *,
        heavy: bool = False,
        read_only: bool = False,
        title: str | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: type[Any] | None = None,
    ) -> Callable[..., Any]:
        """Register a handler as a tool named after the function; its docstring describes it.

        Use it bare, ``@module.tool``, or with declarations about the tool,
        ``@module.tool(heavy=True)`` (also ``module.tool(handler, heavy=True)``):

        * ``heavy`` -- the sync handler may compute for long, so it runs in a
          worker thread rather than on the event loop. Refused for an async
          handler, which already lets the loop run at every ``await``.
        * ``read_only`` -- the tool never changes the state, so a durable
          module does not write the state after it. Declare it only when true:
          a change made by a read-only tool is lost when the actor stops.
          MCP clients see it as ``readOnlyHint``.

        For MCP clients only (hints shown to hosts, which may ask a user before
        a call that is not read-only); leave out what is not known:

        * ``title`` -- a human-readable name, e.g. ``"Run a command"``.
        * ``destructive`` -- ``True`` if the tool may delete or overwrite,
          ``False`` if it only adds (``destructiveHint``).
        * ``idempotent`` -- ``True`` if calling it again with the same
          arguments changes nothing more (``idempotentHint``).
        * ``open_world`` -- ``True`` if it reaches beyond the server's own state:
          programs, files, the network (``openWorldHint``).

        ``destructive`` and ``idempotent`` describe a tool's changes, so they
        are refused with ``read_only=True``.

        * ``structured`` -- the type (attrs class, TypedDict or ``dict[str, T]``)
          of the data in the `CallResult` the handler returns; it becomes the
          tool's ``outputSchema``. A handler annotated to return an attrs class,
          a TypedDict or a mapping needs none: its annotation is the schema.
        """
        options = functools.partial(
            self._register,
            heavy=heavy,
            read_only=read_only,
            title=title,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            structured=structured,
        )
        return options if handler is None else options(handler)

    def _register(
        self,
        handler: HandlerT,
        *,
        heavy: bool,
        read_only: bool,
        title: str | None,
        destructive: bool | None,
        idempotent: bool | None,
        open_world: bool | None,
        structured: type[Any] | None,
    ) -> HandlerT:
        name = handler.__name__
        _check_name("tool", name)
        if name in self._tools:
            msg = f"module {self.name!r} already has a tool named {name!r}"
            raise ValueError(msg)
        where = f"tool {name!r} of module {self.name!r}"
        is_async = inspect.iscoroutinefunction(handler)
        if heavy and is_async:
            msg = (
                f"{where}: heavy=True is for sync handlers "
                "(they then run in a worker thread), but this one is async; drop heavy=True, "
                "and move its CPU-heavy part into `await trio.to_thread.run_sync(...)`"
            )
            raise TypeError(msg)
        _check_hints(where, read_only, title, destructive=destructive, idempotent=idempotent)
        self._tools[name] = Tool(
            module=self,
            name=name,
            description=inspect.cleandoc(handler.__doc__ or ""),
            handler=handler,
            signature=signature_of(handler),
            service=ServiceInfo(self.name, name, BackendType.BUILTIN),
            is_async=is_async,
            heavy=heavy,
            read_only=read_only,
            title=title,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            output_schema=output_schema_of(handler, structured),
        )
        return handler


def _check_hints(where: str, read_only: bool, title: str | None, **changes: bool | None) -> None:
    """Refuse a blank title, and hints about changes on a tool that makes none."""
    if title is not None and not title.strip():
        msg = f"{where}: title must not be blank; leave it out to show the tool's name"
        raise ValueError(msg)
    if not read_only:
        return
    for hint, value in changes.items():
        if value is not None:
            msg = (
                f"{where}: read_only=True says it changes nothing, but {hint}={value} "
                f"describes its changes; drop {hint}= or read_only=True"
            )
            raise TypeError(msg)


async def run_hook(hook: Callable[[], object] | None) -> None:
    """Run a lifecycle hook, sync or async; nothing when there is none."""
    if hook is None:
        return
    outcome = hook()
    if inspect.isawaitable(outcome):
        await outcome
