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

What a module lists beside its tools (`Resource`, `Prompt`, `Completion`) is
here too, each holding the hidden `Tool` that serves it; ``_resources`` turns
what their handlers return into results.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, final, overload

import attrs

from protocol import (
    AudioContent,
    BackendType,
    CallResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    Scope,
    ServiceInfo,
    TextContent,
    ToolContext,
)

from ._client import Ask, Log
from ._durable import Durable
from ._names import check_name
from ._progress import Progress
from ._resources import (
    completion_values,
    prompt_result,
    resource_result,
)
from ._schema import (
    Signature,
    output_schema_of,
    signature_of,
    structured_data,
    takes_state,
    wrapped_result,
    wraps_result,
)
from ._uri_template import STRING_ONLY, URI_TYPES, UriTemplate

__all__ = ["Completion", "Prompt", "PromptArgument", "Resource", "Tool", "ToolModule"]

if TYPE_CHECKING:
    from typing_extensions import TypeVar as DefaultingTypeVar

    # `ToolModule("math")`, declared without a state, is a `ToolModule[None]`.
    StateT = DefaultingTypeVar("StateT", default=None)
else:
    # typing's TypeVar takes no default before Python 3.13; only type checkers read it.
    StateT = TypeVar("StateT")
HandlerT = TypeVar("HandlerT", bound=Callable[..., Any])

_CONTENT_ITEMS: Final = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)
URI_ARGUMENT: Final = "resource uri"
"""The key under which a resource read's arguments carry the URI read (no parameter can
have this name, so it never reaches a handler)."""


def to_call_result(value: object, tool: str) -> CallResult:
    """Turn what a handler returned into a CallResult.

    ``str`` → text; a content item (`ImageContent`, `EmbeddedResource`…) →
    that item; a mapping, an attrs instance or a pydantic model → data with a
    JSON text rendering; a CallResult as it is. Anything else is a
    programming error.
    """
    if type(value) is CallResult:
        return value
    if isinstance(value, str):
        return CallResult.text(value)
    if value is None:
        return CallResult(())  # `-> None`: done, with nothing to say
    if isinstance(value, _CONTENT_ITEMS):
        return CallResult.of(value)
    data = structured_data(value)
    if data is not None:
        return CallResult.data(data)
    msg = (
        f"handler of {tool!r} returned {type(value).__name__}; return a str, None, a content "
        "item, a mapping, an attrs instance, a dataclass, a pydantic model or a CallResult, "
        "or annotate the return type (-> int, -> list[str]) to return other data"
    )
    raise TypeError(msg)


@final
@attrs.frozen
class Tool:
    """One registered tool: its names, schema and handler."""

    module: ToolModule[Any] = attrs.field(repr=lambda module: repr(module.name))
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
        """``module__tool``, the name listed to clients (made once: observers read it per call).

        The bare base name in a module declared ``namespaced=False``.
        """
        return f"{self.module.name}__{self.name}" if self.module.namespaced else self.name

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
    declared_schema: Mapping[str, Any] | None = None
    """The input schema the tool declared (``input_schema=``) to list instead of the derived one."""
    stateless: bool = False
    """Whether the tool keeps no state of a conversation (``stateless=True``): it then needs
    no conversation handle, and a call that names no session is never refused for that."""
    wraps_result: bool = False
    """Whether the handler returns data of no object type (``-> int``, ``-> list[str]``),
    which its result carries as ``{"result": value}``."""

    @property
    def input_schema(self) -> Mapping[str, Any]:
        """The JSON Schema listed for the arguments: the declared one, or the derived one."""
        declared = self.declared_schema
        return self.signature.input_schema if declared is None else declared

    def invoke(
        self,
        state: object,
        context: ToolContext,
        arguments: dict[str, Any],
        progress: Progress | None = None,
        log: Log | None = None,
        ask: Ask | None = None,
    ) -> Any:
        """Call the handler; returns its result, or a coroutine when `is_async`.

        `progress`, `log` and `ask` are the call's channels to its client, for
        a handler that takes them; when None, a reporter and a log to nobody,
        and an `Ask` that cannot ask.
        """
        signature = self.signature
        if not signature.injects:
            return self.handler(state, **arguments)
        arguments = dict(arguments)
        if signature.context_parameter is not None:
            arguments[signature.context_parameter] = context
        if signature.progress_parameter is not None:
            arguments[signature.progress_parameter] = Progress() if progress is None else progress
        if signature.log_parameter is not None:
            arguments[signature.log_parameter] = Log() if log is None else log
        if signature.ask_parameter is not None:
            arguments[signature.ask_parameter] = Ask() if ask is None else ask
        return self.handler(state, **arguments)

    def result_of(self, value: object) -> CallResult:
        """What the handler returned, as a CallResult stamped with this tool's ServiceInfo."""
        if type(value) is str:  # the common case, built without an intermediate result
            return CallResult.text(value, self.service)
        if self.wraps_result and value is not None:
            return wrapped_result(value).stamped(self.service)
        return to_call_result(value, self.full_name).stamped(self.service)


@final
@attrs.frozen
class Resource:
    """A resource (a fixed URI) or a resource template (a URI with ``{variables}``) of a module."""

    template: UriTemplate
    """The URI, or the template the URIs it serves match."""
    title: str | None
    """A human-readable name for hosts to show; ``None`` when not declared."""
    description: str
    """What it holds (the handler's docstring unless declared)."""
    mime_type: str | None
    """The declared media type of its contents; ``None`` when the contents say."""
    operation: Tool
    """The hidden read-only operation that reads it on the key's actor."""

    @property
    def name(self) -> str:
        """The listed name: ``module__name``, or the bare name in a module not namespaced."""
        return self.operation.full_name

    @property
    def module(self) -> ToolModule[Any]:
        """The module that declares it."""
        return self.operation.module


@final
@attrs.frozen
class PromptArgument:
    """One argument of a prompt, as listed: hosts ask the user for it."""

    name: str
    """The argument's name, as the handler's parameter."""
    description: str | None
    """What to fill in, when the parameter's annotation says (``Annotated[str, "..."]``)."""
    required: bool
    """Whether the parameter has no default."""


@final
@attrs.frozen
class Prompt:
    """A prompt of a module: messages built from the arguments and the key's state."""

    title: str | None
    """A human-readable name for hosts to show; ``None`` when not declared."""
    description: str
    """What the prompt is for (the handler's docstring unless declared)."""
    arguments: tuple[PromptArgument, ...]
    """Its arguments, in the handler's order."""
    operation: Tool
    """The hidden read-only operation that builds the messages on the key's actor."""

    @property
    def name(self) -> str:
        """The listed name: ``module__prompt``, or the bare name in a module not namespaced."""
        return self.operation.full_name

    @property
    def module(self) -> ToolModule[Any]:
        """The module that declares it."""
        return self.operation.module


@final
@attrs.frozen
class Completion:
    """Suggestions for one argument of a prompt or one variable of a resource template."""

    target: str
    """The prompt's base name, or the resource template's URI template."""
    argument: str
    """The argument or variable it completes."""
    operation: Tool
    """The hidden read-only operation that suggests values on the key's actor."""


@final
@attrs.define(eq=False, init=False)
class ToolModule(Generic[StateT]):
    """A named group of tools sharing one state per key of its scope."""

    name: str = attrs.field()
    """The module name: the ``server`` part of ``server__tool``."""
    state: Callable[[ToolContext], StateT]
    """Builds the state for one key; called with the projected context.

    Declared as the state's class (``ToolModule("notes", Notes)``, called with no
    arguments per key), a factory of no arguments, or one taking the context;
    omitted, the module keeps no state and its tools take none."""
    scope: Scope = Scope.SESSION
    """Which context parts key the state."""
    ttl: float | None = None
    """Idle time-to-live for this module's actors; ``None`` uses the runtime's."""
    description: str = ""
    """What the module is for."""
    heal_before_call: bool = True
    """Run the state's ``heal()`` hook, if it has one, before every call."""
    durable: Durable[StateT] | None = None
    """How the state is stored, for a module whose state survives its actor; see `Durable`.
    ``durable=True`` stores the state's class as declared (``Durable(Notes)``)."""
    namespaced: bool = True
    """Whether its tools and prompts are listed as ``module__name`` (the default) or by their
    bare names, which must then be nobody else's (``namespaced=False``)."""
    _tools: dict[str, Tool] = attrs.field(factory=dict, init=False)
    _resources: dict[str, Resource] = attrs.field(factory=dict, init=False)
    _prompts: dict[str, Prompt] = attrs.field(factory=dict, init=False)
    _completions: list[Completion] = attrs.field(factory=list, init=False)
    _names: dict[str, str] = attrs.field(factory=dict, init=False)  # name -> what it names
    _awaited: bool = attrs.field(default=False, init=False)  # see has_awaited_tools
    _state_class: type[Any] | None = attrs.field(default=None, init=False)
    _has_state: bool = attrs.field(default=True, init=False)

    @name.validator
    def _check_module_name(self, _attribute: object, value: str) -> None:
        # Also when the name is set later: a module renamed must still be named right.
        check_name("module", value)

    def __init__(
        self,
        name: str,
        state: type[StateT] | Callable[[], StateT] | Callable[[ToolContext], StateT] | None = None,
        scope: Scope = Scope.SESSION,
        ttl: float | None = None,
        description: str = "",
        heal_before_call: bool = True,
        durable: Durable[Any] | bool | None = None,
        namespaced: bool = True,
    ) -> None:
        """A module named `name` whose each key's state `state` makes (see the fields).

        Written out rather than made by attrs so that what it takes is typed as written:
        the state as its class or a factory, ``durable=True``. Raises ValueError or
        TypeError naming what is wrong; nothing is kept of a module refused.
        """
        check_name("module", name)  # first: the messages below name the module
        if ttl is not None and not ttl > 0:
            msg = f"module {name!r}: ttl must be positive seconds, got {ttl}"
            raise ValueError(msg)
        factory, state_class = _state_factory(name, state)
        stored = _durability(name, durable, state_class)
        self.__attrs_init__(
            name, factory, scope, ttl, description, heal_before_call, stored, namespaced
        )
        self._has_state = state is not None
        self._state_class = state_class or (stored.state_class if stored else None)

    def __repr__(self) -> str:
        durable = self.durable
        kept = (
            ""
            if durable is None
            else f", durable={durable.state_class.__name__} schema {durable.schema}"
        )
        return (
            f"ToolModule({self.name!r}, scope={self.scope.name}, tools={len(self._tools)}, "
            f"resources={len(self._resources)}, "
            f"prompts={len(self._prompts)}{kept})"
        )

    @property
    def state_class(self) -> type[Any] | None:
        """The class of the module's state, when it is known: declared as the state, named
        by the factory's return annotation or by `durable`; None otherwise."""
        return self._state_class

    @property
    def has_state(self) -> bool:
        """Whether the module keeps a state (False when declared without one)."""
        return self._has_state

    @property
    def has_awaited_tools(self) -> bool:
        """Whether any tool's call is awaited (async or heavy), so that a deadline can end it.

        Kept as tools are declared: every new actor asks.
        """
        return self._awaited

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
        name: str | None = None,
        description: str | None = None,
        heavy: bool = False,
        read_only: bool = False,
        title: str | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: type[Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        stateless: bool = False,
    ) -> HandlerT: ...

    @overload
    def tool(
        self,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        heavy: bool = False,
        read_only: bool = False,
        title: str | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: type[Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        stateless: bool = False,
    ) -> Callable[[HandlerT], HandlerT]: ...

    def tool(
        self,
        handler: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        heavy: bool = False,
        read_only: bool = False,
        title: str | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: type[Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        stateless: bool = False,
    ) -> Callable[..., Any]:
        """Register a handler as a tool named after the function; its docstring describes it.

        The handler's first parameter receives the state when it is named
        ``state``, unannotated, or annotated with the state's class (see
        `actors._schema.takes_state`); a handler without one (``def add(a: int,
        b: int)``) is a stateless tool, its every parameter an argument. A
        return annotation no result can carry is refused here.

        Use it bare, ``@module.tool``, or with declarations about the tool,
        ``@module.tool(heavy=True)`` (also ``module.tool(handler, heavy=True)``):

        * ``name`` -- the tool's name instead of the function's, lowercase
          snake_case like it; clients call it ``module__name``.
        * ``description`` -- what the tool does, instead of the docstring. MCP
          hosts show it to the model, which picks tools by it, so a handler
          with neither is refused.

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
        * ``input_schema`` -- the JSON Schema to list for the arguments instead
          of the one derived from the annotations, for a client that needs a
          particular form (``$defs``, a ``$schema``, descriptions). It must name
          the same arguments; the annotations still check every call.
        * ``stateless`` -- the tool keeps nothing of a conversation (it reads
          no state, or only what every session shares): served with
          conversation handles, it takes none, and a call that names no
          session runs in the default one rather than being refused.
        """
        options = functools.partial(
            self._register,
            name=name,
            description=description,
            heavy=heavy,
            read_only=read_only,
            title=title,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            structured=structured,
            input_schema=input_schema,
            stateless=stateless,
        )
        return options if handler is None else options(handler)

    def _register(
        self,
        handler: HandlerT,
        *,
        name: str | None,
        description: str | None,
        heavy: bool,
        read_only: bool,
        title: str | None,
        destructive: bool | None,
        idempotent: bool | None,
        open_world: bool | None,
        structured: type[Any] | None,
        input_schema: Mapping[str, Any] | None,
        stateless: bool,
    ) -> HandlerT:
        name = self._new_name("tool", handler, name)
        where = f"tool {name!r} of module {self.name!r}"
        description = _described(
            where, handler, description, "what the tool does", "the model, which picks tools by it"
        )
        is_async = inspect.iscoroutinefunction(handler)
        if heavy and is_async:
            msg = (
                f"{where}: heavy=True is for sync handlers "
                "(they then run in a worker thread), but this one is async; drop heavy=True, "
                "and move its CPU-heavy part into `await trio.to_thread.run_sync(...)`"
            )
            raise TypeError(msg)
        _check_hints(where, read_only, title, destructive=destructive, idempotent=idempotent)
        stateful = self._takes_state(where, handler)
        signature = signature_of(handler, takes_state=stateful)
        _check_asking(where, signature, is_async)
        self._tools[name] = Tool(
            module=self,
            name=name,
            description=description,
            handler=handler if stateful else _without_state(handler),
            signature=signature,
            service=ServiceInfo(self.name, name, BackendType.BUILTIN),
            is_async=is_async,
            heavy=heavy,
            read_only=read_only,
            title=title,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            output_schema=output_schema_of(handler, structured),
            declared_schema=_declared_schema(where, input_schema, signature),
            stateless=stateless or not stateful,
            wraps_result=structured is None and wraps_result(handler),
        )
        self._names[name] = "tool"
        self._awaited = self._awaited or is_async or heavy
        return handler

    def _takes_state(self, where: str, handler: Callable[..., Any]) -> bool:
        """Whether `handler` takes the state first (see `takes_state`); refused when it seems
        to and the module has none."""
        stateful = takes_state(handler, self._state_class)
        if stateful and not self._has_state:
            first = next(iter(inspect.signature(handler).parameters))
            msg = (
                f"{where}: module {self.name!r} keeps no state, but the first parameter "
                f"{first!r} reads as the state's (it is unannotated, or annotated with a class); "
                f"annotate it as an argument, drop it, or give the module a state: "
                f"ToolModule({self.name!r}, MyState)"
            )
            raise TypeError(msg)
        return stateful

    def _new_name(self, kind: str, handler: Callable[..., Any], name: str | None) -> str:
        """`name`, or the handler's; refused unless snake_case and new in this module.

        Nothing is recorded: a declaration that fails later changes nothing.
        """
        if name is None:
            name = getattr(handler, "__name__", None)
            if name is None:
                msg = f"{handler!r} has no __name__ to name its {kind} after; pass name="
                raise TypeError(msg)
        check_name(kind, name)
        taken = self._names.get(name)
        if taken is not None:
            msg = f"module {self.name!r} already has a {taken} named {name!r}"
            if taken != kind:
                msg += f"; a module's tools, resources, prompts share names: rename the {kind}"
            raise ValueError(msg)
        return name

    # ---- resources, prompts, completions --------------------------------------

    @property
    def namespaced_name(self) -> str:
        """The prefix of the names this module lists: ``module__``, or nothing."""
        return f"{self.name}__" if self.namespaced else ""

    @property
    def resources(self) -> Mapping[str, Resource]:
        """The module's resources and resource templates by base name."""
        return self._resources

    @property
    def prompts(self) -> Mapping[str, Prompt]:
        """The module's prompts by base name."""
        return self._prompts

    @property
    def completions(self) -> tuple[Completion, ...]:
        """The module's completions, in declaration order."""
        return tuple(self._completions)

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        heavy: bool = False,
    ) -> Callable[[HandlerT], HandlerT]:
        """Declare a resource (a fixed `uri`) or a resource template (a `uri` with ``{variables}``).

        The handler reads the state of the caller's key, in its actor's turn,
        and never changes it (a durable module does not write after it); its
        parameters after the state are the template's variables, each of a
        type one segment of a URI can write (``str``, ``int``, ``float``,
        ``bool``, a ``Literal`` or an Enum of those, ``UUID``, ``date``…,
        bounded with ``Annotated`` as a tool's argument may be), plus an
        optional `ToolContext`. A variable's text is read as its type (see
        `actors._uri_template`) and checked like a tool's argument. It returns the
        contents: ``str``, ``bytes``, JSON data, `ResourceContents` (see
        `actors._resources`). `mime_type` is the contents' media type
        (``text/plain`` for text, ``application/octet-stream`` for bytes and
        ``application/json`` for data unless declared). `name` and
        `description` default to the handler's name and docstring; `heavy`
        runs a sync handler in a worker thread, as for tools.
        """
        template = UriTemplate.parse(uri)

        def declare(handler: HandlerT) -> HandlerT:
            base = self._new_name("resource", handler, name)
            where = f"resource {uri!r} of module {self.name!r}"
            text = _described(where, handler, description, "what the resource holds")
            if title is not None and not title.strip():
                msg = f"{where}: title must not be blank; leave it out to show the name"
                raise ValueError(msg)
            convert = functools.partial(resource_result, mime_type=mime_type, where=where)
            operation = self._operation(base, text, handler, heavy, where, convert, reads_uri=True)
            arguments = tuple(operation.signature.input_schema.get("properties", {}))
            if set(arguments) != set(template.variables):
                msg = (
                    f"{where}: the handler's arguments ({', '.join(arguments) or 'none'}) must "
                    f"be the template's variables ({', '.join(template.variables) or 'none'})"
                )
                raise TypeError(msg)
            typed = template.typed(_variable_types(where, operation.signature))
            self._resources[base] = Resource(typed, title, text, mime_type, operation)
            self._names[base] = "resource"
            return handler

        return declare

    @overload
    def prompt(self, handler: HandlerT, /) -> HandlerT: ...

    @overload
    def prompt(
        self,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
    ) -> Callable[[HandlerT], HandlerT]: ...

    def prompt(
        self,
        handler: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
    ) -> Callable[..., Any]:
        """Declare a prompt: messages a host offers its user, built from arguments and the state.

        The handler's parameters after the state are the prompt's arguments,
        each of a type that travels as a string (``str``, ``str | None =
        None``, a string ``Literal``…), checked like a tool's; a parameter with
        a default is optional. It returns the messages: ``str`` (one user
        message), content items, `PromptMessage` objects, or a `PromptResult`.
        It reads the state in its actor's turn and never changes it. Listed as
        ``module__name`` (bare in a module not namespaced).
        """

        def declare(handler: HandlerT) -> HandlerT:
            base = self._new_name("prompt", handler, name)
            where = f"prompt {base!r} of module {self.name!r}"
            text = _described(where, handler, description, "what the prompt is for")
            if title is not None and not title.strip():
                msg = f"{where}: title must not be blank; leave it out to show the name"
                raise ValueError(msg)
            convert = functools.partial(prompt_result, description=text, where=where)
            operation = self._operation(base, text, handler, False, where, convert)
            _check_string_arguments(where, operation.signature, "a prompt argument")
            arguments = _prompt_arguments(operation.signature.input_schema)
            self._prompts[base] = Prompt(title, text, arguments, operation)
            self._names[base] = "prompt"
            return handler

        return declare if handler is None else declare(handler)

    def completion(self, target: str, argument: str) -> Callable[[HandlerT], HandlerT]:
        """Declare how to complete `argument` of the prompt or resource template `target`.

        `target` is a prompt's base name or a resource template's URI template,
        declared on this module before. The handler takes the state and the
        text typed so far (its one argument, a ``str``; a `ToolContext` too if
        it likes) and returns suggestions, an iterable of ``str`` (the first
        100 are sent). It reads the state of the caller's key in its actor's
        turn. An argument whose type lists its values (a ``Literal``, an
        Enum) is completed from them without a declaration.
        """

        def declare(handler: HandlerT) -> HandlerT:
            where = f"completion of {argument!r} of {target!r} in module {self.name!r}"
            self._check_completion_target(where, target, argument)
            base = self._new_name("completion", handler, None)
            operation = self._operation(
                base,
                where,
                handler,
                False,
                where,
                functools.partial(completion_values, where=where),
            )
            properties = dict(operation.signature.input_schema.get("properties", {}))
            if len(properties) != 1:
                msg = f"{where}: the handler takes one argument, the text typed so far"
                raise TypeError(msg)
            _check_string_arguments(where, operation.signature, "the text typed so far")
            self._completions.append(Completion(target, argument, operation))
            self._names[base] = "completion"
            return handler

        return declare

    def _check_completion_target(self, where: str, target: str, argument: str) -> None:
        if "://" in target:
            declared = {r.template.text: r.template.variables for r in self._resources.values()}
        else:
            declared = {
                base: tuple(a.name for a in prompt.arguments)
                for base, prompt in self._prompts.items()
            }
        if target not in declared:
            msg = f"{where}: declare the prompt or resource template {target!r} first"
            raise ValueError(msg)
        if argument not in declared[target]:
            known = ", ".join(declared[target]) or "none"
            msg = f"{where}: {target!r} has no argument {argument!r} (it has: {known})"
            raise ValueError(msg)
        if any(c.target == target and c.argument == argument for c in self._completions):
            msg = f"{where}: it is declared already"
            raise ValueError(msg)

    def _operation(
        self,
        name: str,
        description: str,
        handler: Callable[..., Any],
        heavy: bool,
        where: str,
        convert: Callable[..., CallResult],
        *,
        reads_uri: bool = False,
    ) -> Tool:
        """The hidden read-only operation that runs `handler` on a key's actor, never listed.

        `convert` turns what the handler returns into the result; with
        `reads_uri`, it is also given the URI read (``uri=``).
        """
        is_async = inspect.iscoroutinefunction(handler)
        if heavy and is_async:
            msg = f"{where}: heavy=True is for sync handlers, but this one is async"
            raise TypeError(msg)
        # As a tool's: a handler without a state parameter (FastMCP's way) reads no state.
        stateful = self._takes_state(where, handler)
        signature = signature_of(handler, takes_state=stateful)
        injected = (signature.progress_parameter, signature.log_parameter, signature.ask_parameter)
        if any(parameter is not None for parameter in injected):
            msg = (
                f"{where}: only a tool's handler may take Progress, Log or Ask: a host "
                "reads resources, prompts and completions with no user waiting on them"
            )
            raise TypeError(msg)
        return Tool(
            module=self,
            name=name,
            description=description,
            handler=_converting(
                handler if stateful else _without_state(handler),
                convert,
                is_async=is_async,
                reads_uri=reads_uri,
            ),
            signature=signature,
            service=ServiceInfo(self.name, name, BackendType.BUILTIN),
            is_async=is_async,
            heavy=heavy,
            read_only=True,
        )


def _described(
    where: str,
    handler: Callable[..., Any],
    description: str | None,
    says: str,
    shown_to: str = "the user and the model, who pick by it",
) -> str:
    """`description`, or the handler's docstring; refused when blank or missing."""
    if description is not None and not description.strip():
        msg = f"{where}: description must not be blank; say {says}"
        raise ValueError(msg)
    text = inspect.cleandoc((handler.__doc__ or "") if description is None else description)
    if not text.strip():
        # Hosts show it to the model or the user, who pick by it: an empty one is a bug.
        msg = (
            f"{where}: it has no description; add a docstring saying {says}, or pass "
            f"description= (MCP hosts show it to {shown_to})"
        )
        raise TypeError(msg)
    return text


def _declared_schema(
    where: str, schema: Mapping[str, Any] | None, signature: Signature
) -> Mapping[str, Any] | None:
    """A declared input schema, refused unless it is a JSON object schema naming the arguments.

    The handler's annotations still check every call: the declared schema
    only replaces what is listed, so it must name the same arguments.
    """
    if schema is None:
        return None
    try:
        copied = json.loads(json.dumps(schema))
    except (TypeError, ValueError) as exc:
        msg = f"{where}: input_schema= must be JSON data: {exc}"
        raise TypeError(msg) from None
    if not isinstance(copied, dict) or copied.get("type") != "object":
        msg = f'{where}: input_schema= must be a JSON Schema object: {{"type": "object", ...}}'
        raise ValueError(msg)
    declared = set(copied.get("properties", {}))
    derived = set(signature.input_schema.get("properties", {}))
    if declared != derived:
        msg = (
            f"{where}: input_schema= lists the arguments {sorted(declared)}, but the handler "
            f"takes {sorted(derived)}; they must agree (the handler's annotations check calls)"
        )
        raise ValueError(msg)
    return copied


def _check_asking(where: str, signature: Signature, is_async: bool) -> None:
    """Refuse `Ask` in a sync handler: the answer must be awaited."""
    if signature.ask_parameter is not None and not is_async:
        msg = (
            f"{where}: parameter {signature.ask_parameter!r} takes an Ask, whose questions are "
            "awaited; make the handler async"
        )
        raise TypeError(msg)


def _check_string_arguments(where: str, signature: Signature, what: str) -> None:
    """Refuse arguments that do not travel as strings: prompts carry only strings."""
    for argument, types in _argument_types(signature).items():
        if types != STRING_ONLY:
            msg = (
                f"{where}: parameter {argument!r} is {what}, which is always a string; "
                "annotate it str, or a type written as one (a string Literal or Enum, "
                "UUID, date, datetime, Decimal, Path)"
            )
            raise TypeError(msg)


def _variable_types(where: str, signature: Signature) -> dict[str, frozenset[str]]:
    """The JSON types each URI variable is read as; refused for a type no URI text is."""
    types = _argument_types(signature)
    for argument, kinds in types.items():
        if not kinds or not kinds <= URI_TYPES:
            msg = (
                f"{where}: parameter {argument!r} is a URI variable, read from the text of "
                "one segment; annotate it str, int, float, bool, a Literal or an Enum of "
                "those, UUID, date, datetime, Decimal or Path (Annotated with bounds if "
                "you like), not a list, a mapping or a class"
            )
            raise TypeError(msg)
    return types


def _argument_types(signature: Signature) -> dict[str, frozenset[str]]:
    """Per argument, the JSON types its values may have (none known: empty)."""
    schema = signature.input_schema
    definitions = schema.get("$defs", {})
    return {
        argument: _json_types(property_schema, definitions)
        for argument, property_schema in schema.get("properties", {}).items()
    }


def _json_types(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> frozenset[str]:
    """The JSON types a value of `schema` may have (a union's null left out: it stands for
    a value left out); empty when the schema does not say."""
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        return _json_types(definitions.get(reference.removeprefix("#/$defs/"), {}), {})
    if "anyOf" in schema:  # `str | None`: a string, or left out
        options = [option for option in schema["anyOf"] if option != {"type": "null"}]
        each = [_json_types(option, definitions) for option in options]
        # One option of no known type (Any) makes the whole unknown.
        return frozenset().union(*each) if each and all(each) else frozenset()
    if "enum" in schema:
        return frozenset(_JSON_TYPE_NAMES.get(type(value), "other") for value in schema["enum"])
    kind = schema.get("type")
    return frozenset({kind}) if isinstance(kind, str) else frozenset()


# A Literal's or an Enum's values in a schema are JSON values; bool is no integer here.
_JSON_TYPE_NAMES: Final[Mapping[type, str]] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _prompt_arguments(schema: Mapping[str, Any]) -> tuple[PromptArgument, ...]:
    required = set(schema.get("required", ()))
    return tuple(
        PromptArgument(name, property_schema.get("description"), name in required)
        for name, property_schema in schema.get("properties", {}).items()
    )


def _converting(
    handler: Callable[..., Any],
    convert: Callable[..., CallResult],
    *,
    is_async: bool,
    reads_uri: bool,
) -> Callable[..., Any]:
    """`handler`, what it returns turned into a CallResult by `convert`.

    A resource read's arguments carry the URI read under `URI_ARGUMENT`: it is
    taken out before the handler is called, and given to `convert`.
    """
    if is_async:

        async def converting_async(state: object, /, **arguments: Any) -> CallResult:
            uri = arguments.pop(URI_ARGUMENT, None)
            value = await handler(state, **arguments)
            return convert(value, uri=uri) if reads_uri else convert(value)

        return functools.wraps(handler)(converting_async)

    def converting(state: object, /, **arguments: Any) -> CallResult:
        uri = arguments.pop(URI_ARGUMENT, None)
        value = handler(state, **arguments)
        return convert(value, uri=uri) if reads_uri else convert(value)

    return functools.wraps(handler)(converting)


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


# ---- the state a module is declared with


def _without_state(handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler`, which takes no state, called as a tool's handler is: the state first.

    The wrapper keeps the function's name, docs and ``__wrapped__``; it is a
    coroutine function when `handler` is one, so the runtime awaits it.
    """
    if inspect.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def call_async(_state: object, /, **arguments: Any) -> Any:
            return await handler(**arguments)

        return call_async

    @functools.wraps(handler)
    def call(_state: object, /, **arguments: Any) -> Any:
        return handler(**arguments)

    return call


def _no_state(_context: ToolContext) -> None:
    """The state of a module declared without one."""


def _state_factory(
    module: str, declared: object
) -> tuple[Callable[[ToolContext], Any], type | None]:
    """The factory called with each key's context, and the state's class where it is known."""
    if declared is None:
        return _no_state, None
    if not callable(declared):
        msg = (
            f"module {module!r}: state must be the state's class or a function making it, got "
            f"{declared!r}; write ToolModule({module!r}, MyState)"
        )
        raise TypeError(msg)
    required = _required_positional(declared)
    state_class = declared if isinstance(declared, type) else _returned_class(declared)
    if required == 0:
        return (lambda _context: declared()), state_class
    if required == 1:
        return declared, state_class  # takes the context, as it always could
    msg = (
        f"module {module!r}: the state's factory {declared!r} needs {required} arguments; "
        "it is called with none (a class, or `def new_state() -> MyState`) or with the "
        "call's context (`def new_state(context: ToolContext) -> MyState`)"
    )
    raise TypeError(msg)


def _required_positional(factory: Callable[..., Any]) -> int:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: take it as it is
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in kinds and p.default is p.empty)


def _returned_class(factory: Callable[..., Any]) -> type | None:
    try:
        returned = typing.get_type_hints(factory).get("return")
    except Exception:  # an unresolvable annotation only hides the class
        return None
    return returned if isinstance(returned, type) else None


def _durability(module: str, durable: object, state_class: type | None) -> Durable[Any] | None:
    """`durable` as a `Durable`: ``True`` names the state's class, which must then be known."""
    if durable is None:
        return None
    if isinstance(durable, Durable):
        return durable.for_module(module, state_class)
    if durable is not True:
        msg = f"module {module!r}: durable= takes True or a Durable(...), got {durable!r}"
        raise TypeError(msg)
    if state_class is None:
        msg = (
            f"module {module!r}: durable=True stores the state's class, which is unknown here; "
            f"declare the state as a class (ToolModule({module!r}, MyState, durable=True)) or "
            "name it: durable=Durable(MyState)"
        )
        raise TypeError(msg)
    return Durable(state_class)
