"""The MCP server adapter: the SDK's low-level ``Server`` in front of a `Runtime`.

What the SDK does and what we do
--------------------------------
The official ``mcp`` SDK owns the protocol: JSON-RPC framing, both protocol
eras (the ``initialize`` handshake up to 2025-11-25 and the per-request
``_meta`` envelope of 2026-07-28), capabilities, cancellation and the error
responses for malformed requests. This module only registers two handlers on
its low-level ``Server``:

* ``tools/list`` lists every enabled tool as ``module__tool`` with its
  description and input schema. The list is built once, so it is the same
  for every connection and every caller.
* ``tools/call`` hands the call to `Runtime.call` and turns the outcome into
  a ``CallToolResult``; `CallResult.to_wire` already carries each item's
  ServiceInfo in the item's ``_meta``.

How failures reach the client
-----------------------------
An unknown (or ambiguous) tool name is a JSON-RPC error, -32602 Invalid
params, as the MCP specification says; the name is resolved first, so that
error never depends on the call's context or arguments. Everything the model can correct or
retry is an ``isError`` result with a text that names the problem: bad
context fields, arguments that fail the tool's schema, a session outside the
caller's tenant, timeouts, crashed actors, the live-actor cap and shutdown.

Who may claim a context
-----------------------
The context travels in the call (``__sessionId`` … in the arguments or
``sessionId`` … in ``_meta``). The transport says who the *caller* is (a
`protocol.Caller`), and `actors.prepare_call` judges the call by the
caller's rules (default session, tenant, and which channel may name a
session: the stdio parent's arguments, which its model writes, only its own
unless the operator allows more; see `protocol.Caller`) before the runtime
sees it.

A call that names no session lands in its connection's own session
(invariant 11: never in one that another connection also reaches): the stdio
parent's is private to its connection unless the operator names one
(`stdio_caller`), an HTTP client's is its ``Mcp-Session-Id``. Such a session
exists only for its connection, so with ``end_connection_sessions`` the
adapter ends it (its actors stop, its stored state goes) when the connection
closes; the stdio transport ends its own when it stops.

``session__end`` is listed only when the operator enables it
(``allow_end_session``), and then ends the caller's own session, never one
the call names: ending other sessions is the operator's, through
`Runtime.end_session` or ``mcp-actors state delete``.

Every call is logged once, after it completes (or its caller went away),
with its tool, context, caller, outcome and duration: here, not in the
runtime's hot path. The tool name is the client's text, so it is escaped
(`loggable`) unless it is a plain name.
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
import re
import secrets
import time
import urllib.parse
import warnings
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import attrs
import pydantic
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from protocol import (
    HANDLE_ARGUMENT,
    HANDLE_TOOL,
    Caller,
    CallError,
    CallResult,
    ContextError,
    ReachError,
    ToolContext,
    parse_call,
    redacted_uri,
)

from ..._error_result import error_result
from ..._errors import ArgumentsError, RuntimeCallError, UnknownResourceError, UnknownToolError
from ..._observe import outcome_of
from ..._prepare import (
    PreparedCall,
    prepare_call,
    prepare_completion,
    prepare_prompt,
    prepare_read,
)
from ..._resources import completions_of, handler_data
from ...store import StoreError
from .._logs import EVENT_FIELD
from ._catalog import prompt_list, resource_list, template_list
from ._client_channels import (
    LOG_LEVEL_STATE,
    LogQueue,
    LogRelay,
    ProgressRelay,
    SessionAsker,
    client_log_level,
    send_logs,
    validation_problem,
)
from ._conversations import START_SERVICE, START_TOOL, check_handle_names, started, with_handle
from ._parked_calls import ParkedAsker, ParkedCall, ParkedCalls
from ._request_context import connection_of, meta_of, speaks_2026
from ._session_ends import (
    END_SESSION,
    END_SESSION_SERVICE,
    END_SESSION_TOOL,
    NO_ARGUMENTS,
    ConnectionSessions,
    not_own_session,
    own_session,
)
from ._subscriptions import Background, SubscriptionRequests, Subscriptions

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from mcp.server.context import ServerRequestContext

    from protocol import HandleKeys, HandleReader

    from ..._module import Tool
    from ..._observe import Observer
    from ..._registry import Registry
    from ..._target import CallTarget

__all__ = [
    "McpAdapter",
    "connection_session",
    "loggable",
    "stdio_caller",
]

logger = logging.getLogger("actors.mcp")

_PlainHandler = Callable[[Caller, Any], Awaitable[pydantic.BaseModel]]
"""A request's handler for a caller (not the SDK's request context), and its result's model."""
_Catalog = list[tuple[str, str, _PlainHandler]]
"""What the modules declare, served: (the SDK's keyword for the handler, its method, it)."""

SERVER_NAME: Final = "mcp-actors"
_INSTRUCTIONS: Final = (
    "Stateful tools whose state is kept per conversation session (planning also per assistant "
    "and thread). The host application, not the model, names each call's context: the _meta "
    "keys sessionId, assistantId and threadId, or the arguments __sessionId, __assistantId and "
    "__threadId."
)


def connection_session() -> str:
    """A new session id for one connection alone: random, so no other client can name it."""
    return f"connection-{secrets.token_urlsafe(18)}"


def stdio_caller(
    session: str | None,
    *,
    arguments_may_name_sessions: bool = False,
    handles: HandleReader | None = None,
) -> Caller:
    """The parent process on stdio: a trusted middleware, bound to no tenant, the only client.

    Its calls that name no session land in `session`: one made by
    `connection_session` for this connection alone, or one the operator named
    (``serve --session``) to share on purpose. ``None`` leaves them to the
    context policy (``--require-session`` refuses them). The host names other
    sessions in ``_meta``; the arguments, which its model writes, may name
    `session` only, unless `arguments_may_name_sessions` (``serve
    --allow-session-naming``): see `Caller.arguments_may_name_sessions`.
    """
    return Caller(
        "stdio",
        transport_session=session,
        sole_client=True,
        arguments_may_name_sessions=arguments_may_name_sessions,
        handles=handles,
    )


def _version() -> str:
    try:
        return importlib.metadata.version(SERVER_NAME)
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        return ""


_REACHED_TOO_FAR: Final = frozenset({"outside_tenant", "outside_connection"})
"""The outcomes of a call that named a session its caller may not reach (`ReachError`)."""


def _tool_list(
    registry: Registry, *, end_session: bool, handles: bool = False
) -> types.ListToolsResult:
    if END_SESSION in {tool.full_name for tool in registry.tools()}:
        msg = f"a module's tool is named {END_SESSION!r}, which the MCP server keeps for itself"
        raise ValueError(msg)
    tools = [
        types.Tool(
            name=tool.full_name,
            title=tool.title,
            description=tool.description or None,
            input_schema=with_handle(tool) if handles else dict(tool.input_schema),
            output_schema=None if tool.output_schema is None else dict(tool.output_schema),
            annotations=_annotations(tool),
        )
        for tool in registry.tools()
    ]
    # The start tool first: a model reads the list in order.
    listed = [START_TOOL, *tools] if handles else tools
    return types.ListToolsResult(tools=[*listed, END_SESSION_TOOL] if end_session else listed)


def _annotations(tool: Tool) -> types.ToolAnnotations | None:
    """What the tool declared about itself, as MCP hints; None when it declared nothing."""
    # Undeclared is read-only=False, which is also the hint's default.
    read_only = True if tool.read_only else None
    hints = (tool.title, read_only, tool.destructive, tool.idempotent, tool.open_world)
    if all(hint is None for hint in hints):
        return None
    return types.ToolAnnotations(
        # Also here, where clients of 2025-03-26 (before Tool.title) look for a title.
        title=tool.title,
        read_only_hint=read_only,
        destructive_hint=tool.destructive,
        idempotent_hint=tool.idempotent,
        open_world_hint=tool.open_world,
    )


@attrs.frozen
class _Report:
    """What goes back to the client: a result, or a JSON-RPC error."""

    result: CallResult | None = None
    """The result, or ``None`` for a JSON-RPC error (`error`)."""
    error: str = ""


_CALL_LINE: Final = "%s %s %s caller=%s%s outcome=%s %.1f ms"
"""The per-call log line: method, target, context, caller, tenant, outcome, duration."""


@attrs.define
class _Attempt:
    """One call as its log line will tell it, filled in as the call gets further."""

    name: str
    caller: Caller
    started: float
    method: str = "tools/call"
    """The request: ``tools/call``, ``resources/read``, ``prompts/get``…"""
    context: ToolContext | None = None
    """Known once the call's context is claimed, so a cancelled call is logged with it."""
    outcome: str = "cancelled"
    """How the call ended; stays ``cancelled`` if the caller went away first."""

    def log(self) -> None:
        """One line: what ran, for whom, on whose behalf, how it ended, how long it took."""
        # A call that reached for a session it may not: worth an operator's look.
        level = logging.WARNING if self.outcome in _REACHED_TOO_FAR else logging.INFO
        if not logger.isEnabledFor(level):
            return  # a line nobody keeps costs nothing to build (one per request)
        milliseconds = (time.perf_counter() - self.started) * 1000
        context = self.context
        where = (
            "session=? assistant=? thread=?"
            if context is None
            else f"session={_describe(context.session_id)} "
            f"assistant={_describe(context.assistant_id)} thread={_describe(context.thread_id)}"
        )
        caller = self.caller
        tenant = "" if caller.tenant is None else f" tenant={caller.tenant!r}"
        event = {
            "event": self.method,
            "tool" if self.method == "tools/call" else "target": self.name,
            "session": None if context is None else context.session_id,
            "assistant": None if context is None else context.assistant_id,
            "thread": None if context is None else context.thread_id,
            "caller": caller.label,
            "tenant": caller.tenant,
            "outcome": self.outcome,
            "ms": round(milliseconds, 3),
        }
        arguments = (
            self.method,
            loggable(self.name),
            where,
            caller.label,
            tenant,
            self.outcome,
            milliseconds,
        )
        # Made as `logger.log` makes it, without its walk up the stack to find the caller:
        # a line per request, and its place in the code is always this one.
        record = logger.makeRecord(
            logger.name, level, __file__, 0, _CALL_LINE, arguments, None, extra={EVENT_FIELD: event}
        )
        logger.handle(record)


@final
class McpAdapter:
    """Serves a `Runtime`'s tools through the SDK's low-level MCP ``Server``.

    `identify` tells, for each request, who the caller is (see `Caller`); the
    default treats every request as coming from one trusted client, the stdio
    parent, whose calls that name no session land in one session private to
    this adapter, and whose arguments may name that session only (`stdio_caller`).
    `caller` names that one caller instead (every request is its), which
    lets a transport serve it without a request context (`sole_caller`).
    One adapter can serve any number of connections at once:
    give it an `identify` that tells them apart.

    With `end_connection_sessions`, a connection's own session (the one its
    calls land in by default, see `Caller.default_session`) is ended when the
    connection closes: nobody else can name it, so what it holds would only
    pile up. With `allow_end_session`, ``session__end`` is listed and lets a
    client end its own session.
    """

    def __init__(
        self,
        runtime: CallTarget,
        *,
        identify: Callable[[ServerRequestContext[Any, Any]], Caller] | None = None,
        caller: Caller | None = None,
        observer: Observer | None = None,
        allow_end_session: bool = False,
        end_connection_sessions: bool = False,
        handles: HandleKeys | None = None,
    ) -> None:
        self._runtime = runtime
        self._handles = handles
        # Told of the calls refused here, before the runtime sees them (the runtime
        # reports the rest to its own observer: pass the same one to both).
        self._observer = observer
        if identify is not None and caller is not None:
            msg = "give McpAdapter either identify= or caller=, not both"
            raise ValueError(msg)
        sole = None
        if identify is None:
            sole = caller or stdio_caller(connection_session(), handles=handles)
            identify = lambda _ctx: sole  # noqa: E731 -- one caller for every request
        self.sole_caller: Final = sole
        """The caller of every request, when that is fixed (not told by `identify`)."""
        self._identify = identify
        self._policy = runtime.config.policy
        self._allow_end_session = allow_end_session
        self._end_connection_sessions = end_connection_sessions
        registry = runtime.registry
        on = handles is not None
        if on:
            check_handle_names(registry)
        self._tools = _tool_list(registry, end_session=allow_end_session, handles=on)
        self._resources = resource_list(registry)
        self._templates = template_list(registry, handles=on)
        self._prompts = prompt_list(registry, handles=on)
        self._subscriptions = Subscriptions(runtime.watch)
        self._parked = ParkedCalls()
        self._connection_sessions = ConnectionSessions(runtime.end_session, identify, self._policy)
        catalog = self._catalog()
        self._plain_handlers: Final[dict[str, _PlainHandler]] = {
            "ping": _pong,
            **{method: handler for _, method, handler in catalog},
        }
        self._closing = False
        self._in_flight = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._last_request = -math.inf
        with warnings.catch_warnings():
            # logging/setLevel is deprecated from 2026-07-28 on; clients of before still use it.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Final[Server[Any]] = Server(
                SERVER_NAME,
                version=_version(),
                instructions=_INSTRUCTIONS,
                lifespan=self._lifespan,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                get_tool_input_schema=self.input_schema,
                on_set_logging_level=self._set_log_level,
                **self._catalog_handlers(catalog),
            )
        """The SDK server: run it on any transport (`Server.run`, ``streamable_http_app``)."""
        self.server.middleware.append(_invalid_params_named)
        if end_connection_sessions:
            self.server.middleware.append(self._connection_sessions.middleware)

    def _catalog_handlers(self, catalog: _Catalog) -> dict[str, Any]:
        """The SDK's handlers of what the modules declare: resources, prompts, completions.

        A server whose modules declare no resource answers ``resources/list``
        "Method not found" and does not claim the capability, and so on.
        """
        handlers = {keyword: self._for_request(handler) for keyword, _, handler in catalog}
        if self._resources.resources or self._templates.resource_templates:
            requests = SubscriptionRequests(self._subscriptions, self._followed, self._identify)
            handlers.update(requests.handlers())
        return handlers

    def _catalog(self) -> _Catalog:
        """What the modules declare, served: each handler with its SDK keyword and method.

        Each takes the caller rather than the SDK's request context, so that a lean
        path can serve it too (`serve_plainly`).
        """
        catalog: _Catalog = []
        if self._resources.resources or self._templates.resource_templates:
            catalog += [
                ("on_list_resources", "resources/list", self._list_resources),
                ("on_list_resource_templates", "resources/templates/list", self._list_templates),
                ("on_read_resource", "resources/read", self._read_resource),
            ]
        if self._prompts.prompts:
            catalog += [
                ("on_list_prompts", "prompts/list", self._list_prompts),
                ("on_get_prompt", "prompts/get", self._get_prompt),
            ]
        if self._prompts.prompts or self._templates.resource_templates:
            catalog.append(("on_completion", "completion/complete", self._complete))
        return catalog

    def _for_request(self, handler: _PlainHandler) -> Callable[..., Awaitable[Any]]:
        """`handler` as the SDK calls it: with the request's context, which tells the caller."""

        async def handle(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
            return await handler(self._identify(ctx), params)

        return handle

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[Background]:
        """While the SDK serves: a task group for the tasks that send resource updates."""
        async with anyio.create_task_group() as tasks:
            try:
                yield Background(tasks)
            finally:
                self._parked.abandon_all()  # their clients cannot come back with answers
                # The connections have closed by now; their sessions' ends may still run.
                config = self._runtime.config
                await self._connection_sessions.ends.settle(
                    config.shutdown_grace + config.stop_timeout
                )
                tasks.cancel_scope.cancel()  # the deliveries of connections still open

    @property
    def handles(self) -> HandleKeys | None:
        """The keys this adapter mints and reads conversation handles with; None: off."""
        return self._handles

    @property
    def in_flight(self) -> int:
        """How many tools/call requests are being served now."""
        return self._in_flight

    def close(self) -> None:
        """Refuse new calls from now on (an ``isError`` result); calls in flight go on."""
        self._closing = True

    async def wait_idle(self) -> None:
        """Return once no call is in flight."""
        while self._in_flight:
            await self._idle.wait()

    async def wait_quiet(self, quiet: float) -> None:
        """Return once no call is in flight and no request came for `quiet` seconds.

        A client sends requests around its last call (the SDK's client lists
        the tools to check a result against its output schema): a server that
        stops draining only after a quiet spell still answers them.
        """
        while True:
            await self.wait_idle()
            remaining = self._last_request + quiet - anyio.current_time()
            if remaining <= 0 and not self._in_flight:
                return
            await anyio.sleep(max(remaining, 0.0))

    # ---- handlers -------------------------------------------------------------

    async def _list_tools(
        self, _ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return self.list_tools_plainly()

    def list_tools_plainly(self) -> types.ListToolsResult:
        """The ``tools/list`` result (the same for every caller); notes the request (drain)."""
        self._last_request = anyio.current_time()
        return self._tools

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The input schema of the tool `name`; None when there is no such tool."""
        if name == END_SESSION:
            return NO_ARGUMENTS if self._allow_end_session else None
        if name == HANDLE_TOOL and self._handles is not None:
            return START_TOOL.input_schema
        try:
            return self._runtime.registry.resolve(name).input_schema
        except UnknownToolError:
            return None

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        call = {"name": params.name, "arguments": params.arguments, "_meta": params.meta}
        if params.request_state is None:
            report = await self._tools_call(call, self._identify(ctx), ctx)
        else:  # a 2026-era client coming back with the answers to a parked call's question
            report = await self._tools_call(call, self._identify(ctx), ctx, resuming=params)
        if isinstance(report, types.InputRequiredResult):
            return report
        return types.CallToolResult.model_validate(report.to_wire())

    def plain_tool(self, name: str) -> bool:
        """Whether calls to the tool `name` may be served without the SDK (`call_plainly`).

        They may when the tool exists and reaches nothing of the client's but
        its result: it reports no progress, logs nothing to the client and
        asks nothing, so a single response body carries all it sends.
        ``session__end`` is the SDK's (it needs the connection's own session);
        ``conversation__start`` may be served plainly.
        """
        if name == HANDLE_TOOL:
            return self._handles is not None
        try:
            tool = self._runtime.registry.resolve(name)
        except UnknownToolError:
            return False
        return not tool.signature.injects

    async def call_plainly(
        self, name: str, arguments: Any, meta: Mapping[str, Any] | None, caller: Caller
    ) -> dict[str, Any]:
        """The wire form of a ``tools/call`` result, served without the SDK's request context.

        For a 2026-era request (no connection, so no connection session to
        end) to a tool `plain_tool` admits: the same rules, refusals, log line
        and drain accounting as a call through the SDK. Raises `MCPError`
        where that call gets a JSON-RPC error.
        """
        call = {"name": name, "arguments": arguments, "_meta": meta}
        report = await self._tools_call(call, caller, None)
        assert not isinstance(report, types.InputRequiredResult)  # a plain tool never asks
        return report.to_wire()

    def plain_params(
        self, method: str, params: Mapping[str, Any] | None
    ) -> pydantic.BaseModel | None:
        """`params` as `serve_plainly` takes them for `method`; None: the request is the SDK's.

        It is when no handler here serves `method` without the SDK's request context
        (the subscriptions and ``logging/setLevel`` need the connection; an undeclared
        method is the SDK's "Method not found"), when the SDK would shape its result
        with a cache hint, or when `params` do not parse as the SDK's handler takes
        them (the SDK then refuses them in its own words).
        """
        entry = self.server.get_request_handler(method)
        if method not in self._plain_handlers or entry is None or method in self.server.cache_hints:
            return None
        try:
            # As the SDK parses them: absent params as {}, so that required fields still fail.
            parsed: pydantic.BaseModel = entry.params_type.model_validate(
                {} if params is None else params, by_name=False
            )
        except pydantic.ValidationError:
            return None
        return parsed

    async def serve_plainly(
        self, method: str, params: pydantic.BaseModel, caller: Caller
    ) -> dict[str, Any]:
        """The result of a request `plain_params` admitted, dumped as the SDK dumps a
        handler's result (the transport shapes it for the wire).

        The same handler as through the SDK, for `caller`; raises `MCPError` where the
        SDK answers a JSON-RPC error (the handler's, or its params refused by name).
        """
        try:
            result = await self._plain_handlers[method](caller, params)
        except pydantic.ValidationError as error:
            raise invalid_params_of(method, error) from None
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    # ---- one call -------------------------------------------------------------

    async def _tools_call(
        self,
        call: dict[str, Any],
        caller: Caller,
        ctx: ServerRequestContext[Any, Any] | None,
        *,
        resuming: types.CallToolRequestParams | None = None,
    ) -> CallResult | types.InputRequiredResult:
        """One tools/call, counted in flight and logged once: its result or next question.

        Raises `MCPError` for what the client gets as a JSON-RPC error, and
        for a bug in here (the details go to the log, not to the client).
        """
        attempt = _Attempt(call["name"], caller, time.perf_counter())
        self._enter()
        try:
            if resuming is None:
                report = await self._run(call, attempt, ctx)
            else:
                assert ctx is not None
                report = await self._resume(resuming, attempt, ctx)
        except MCPError:
            raise
        except Exception:
            # A bug here, not the caller's fault: keep the details in the log.
            attempt.outcome = "internal_error"
            logger.exception("tools/call %s failed inside the adapter", loggable(call["name"]))
            msg = "internal error while serving the call; the server log has the details"
            raise MCPError(types.INTERNAL_ERROR, msg) from None
        finally:
            self._leave()
            attempt.log()
        if isinstance(report, types.InputRequiredResult):
            return report
        if report.result is None:
            raise MCPError(types.INVALID_PARAMS, report.error)
        return report.result

    async def _run(
        self,
        call: dict[str, Any],
        attempt: _Attempt,
        ctx: ServerRequestContext[Any, Any] | None,
    ) -> _Report | types.InputRequiredResult:
        """Apply the caller's rules, run the call, and record in `attempt` how it ended."""
        if self._closing:
            attempt.outcome = "shutting_down"
            self._refused(None, attempt.outcome)
            text = "the server is stopping and takes no new calls; retry once it is back"
            return _Report(CallResult.error(text))
        if call["name"] == END_SESSION and self._allow_end_session:
            return await self._end_session(call, attempt)
        if call["name"] == HANDLE_TOOL and self._handles is not None:
            return self._start_conversation(call, attempt, self._handles)
        try:
            # First, so that an unknown tool is the same JSON-RPC error whatever
            # the call's context, its caller or its arguments.
            tool = self._runtime.registry.resolve(call["name"])
        except UnknownToolError as exc:
            attempt.outcome = "unknown_tool"
            self._refused(None, attempt.outcome)
            return _Report(error=str(exc))
        try:
            prepared = prepare_call(self._runtime.registry, call, self._policy, attempt.caller)
        except CallError as exc:
            self._refused(tool.full_name, outcome_of(exc))
            return self._refusal(exc, tool, attempt)
        attempt.context = prepared.context
        if self._end_connection_sessions:
            self._connection_sessions.note(prepared.context.session_id, attempt.caller)
        if ctx is not None and tool.signature.ask_parameter is not None and speaks_2026(ctx):
            return await self._run_parked(prepared, ctx, attempt)
        try:
            if ctx is not None and tool.signature.injects:
                result = await self._run_with_channels(prepared, ctx)
            else:
                result = await self._runtime.run(prepared)
        except RuntimeCallError as exc:
            return self._refusal(exc, tool, attempt)
        attempt.outcome = "tool_error" if result.is_error else "ok"
        return _Report(result)

    async def _run_parked(
        self, prepared: PreparedCall, ctx: ServerRequestContext[Any, Any], attempt: _Attempt
    ) -> _Report | types.InputRequiredResult:
        """Run a call that may ask its 2026-era client something, parked in the server's task.

        Returns its result, or its first question for the client to answer
        (see `actors.server.mcp._parked_calls`). What it logs goes out with the
        response of each round; its progress goes nowhere: no request stays
        open for it.
        """
        tool = prepared.tool
        parked = self._parked.park(attempt.caller, tool.full_name, prepared.context)
        asker = ParkedAsker(parked, ctx.session.client_capabilities)
        logs = None if tool.signature.log_parameter is None else LogQueue(client_log_level(ctx))

        async def call() -> _Report:
            try:
                result = await self._runtime.run(
                    prepared, ask=asker, log=None if logs is None else logs.hear
                )
            except RuntimeCallError as exc:
                return self._refusal(exc, tool, _Attempt(tool.full_name, attempt.caller, 0.0))
            return _Report(result)

        report: _Report | types.InputRequiredResult
        if not isinstance(parked, ParkedCall):  # too many parked already: questions fail at once
            report = await call()
        else:
            parked.logs = logs
            background: Background = ctx.lifespan_context
            background.start_soon(self._parked.run, parked, call)
            report = await parked.next_step()
        if logs is not None:
            await send_logs(logs, ctx.session, ctx.request_id)
        return self._stepped(report, attempt)

    async def _resume(
        self,
        params: types.CallToolRequestParams,
        attempt: _Attempt,
        ctx: ServerRequestContext[Any, Any],
    ) -> _Report | types.InputRequiredResult:
        """The retry of a parked call: hand it the answers, then wait for its next step."""
        assert params.request_state is not None
        try:
            tool = self._runtime.registry.resolve(params.name).full_name
        except UnknownToolError as exc:
            attempt.outcome = "unknown_tool"
            return _Report(error=str(exc))
        parked = self._parked.find(params.request_state, attempt.caller, tool)
        if parked is None:
            attempt.outcome = "unknown_request_state"
            msg = (
                "requestState names no call of this client waiting for an answer: it ended, "
                "its answer came too late, or it is not this client's; call the tool again"
            )
            raise MCPError(types.INVALID_PARAMS, msg)
        attempt.context = parked.context
        parked.answer(params.input_responses)
        step = await parked.next_step()
        if parked.logs is not None:  # what it logged since the last round
            await send_logs(parked.logs, ctx.session, ctx.request_id)
        return self._stepped(step, attempt)

    @staticmethod
    def _stepped(
        step: _Report | types.InputRequiredResult, attempt: _Attempt
    ) -> _Report | types.InputRequiredResult:
        """`step` of a parked call, its outcome recorded in `attempt`."""
        if isinstance(step, types.InputRequiredResult):
            attempt.outcome = "input_required"
        elif step.result is not None:
            attempt.outcome = "tool_error" if step.result.is_error else "ok"
        return step

    async def _run_with_channels(
        self, prepared: PreparedCall, ctx: ServerRequestContext[Any, Any]
    ) -> CallResult:
        """Run a call of a tool that reports, logs or asks, with its channels to the client.

        What the relays hold is sent before the result goes out.
        """
        signature = prepared.tool.signature
        session = ctx.session
        progress = None if signature.progress_parameter is None else ProgressRelay(session)
        log = (
            None
            if signature.log_parameter is None
            else LogRelay(session, ctx.request_id, client_log_level(ctx))
        )
        before = None if log is None else log.drain  # what it logged goes out before it asks
        ask = (
            None
            if signature.ask_parameter is None
            else SessionAsker(session, ctx.request_id, before)
        )
        relays = [relay for relay in (progress, log) if relay is not None]
        async with anyio.create_task_group() as relaying:
            for relay in relays:
                relaying.start_soon(relay.send_until_finished)
            try:
                result = await self._runtime.run(
                    prepared,
                    progress=None if progress is None else progress.hear,
                    log=None if log is None else log.hear,
                    ask=ask,
                )
            finally:
                for relay in relays:
                    relay.finish()
        return result

    def _refusal(self, exc: CallError, tool: Tool, attempt: _Attempt) -> _Report:
        """The ``isError`` result of a call refused with `exc`, and the outcome in `attempt`."""
        attempt.outcome = outcome_of(exc)
        if isinstance(exc, ReachError):
            attempt.context = exc.context  # which session the caller reached for
        return _Report(error_result(exc, tool.service))

    def _refused(self, tool: str | None, outcome: str) -> None:
        if self._observer is not None:
            self._observer.call_refused(tool, outcome)

    def _start_conversation(
        self, call: dict[str, Any], attempt: _Attempt, handles: HandleKeys
    ) -> _Report:
        """Mint a new conversation's handle, bound to the caller's tenant; nothing is made yet."""
        arguments = call["arguments"] or {}
        if arguments:
            attempt.outcome = "bad_arguments"
            self._refused(HANDLE_TOOL, attempt.outcome)
            names = ", ".join(map(repr, arguments))
            msg = f"{HANDLE_TOOL} takes no arguments, got {names}"
            return _Report(error_result(ArgumentsError(msg), START_SERVICE))
        tenant = attempt.caller.tenant
        handle = handles.mint(tenant)
        # The log names the conversation's session, never its handle.
        attempt.context = ToolContext(handles.session_for(handle, tenant))
        attempt.outcome = "ok"
        return _Report(started(handle))

    async def _end_session(self, call: dict[str, Any], attempt: _Attempt) -> _Report:
        """End the caller's own session: the one its calls land in when they name none."""
        try:
            parsed = parse_call(call, self._policy, attempt.caller)
            attempt.context = parsed.context
            if parsed.arguments:
                names = ", ".join(map(repr, parsed.arguments))
                msg = f"{END_SESSION} takes no arguments, got {names}"
                raise ArgumentsError(msg)
            session = parsed.context.session_id
            own = own_session(attempt.caller, self._policy)
            if session != own:
                raise ContextError(not_own_session(session, own))
            deleted = await self._runtime.end_session(session)
        except CallError as exc:
            attempt.outcome = outcome_of(exc)
            return _Report(error_result(exc, END_SESSION_SERVICE))
        except StoreError as exc:
            # The store's own message: it names the store's trouble, not a secret.
            attempt.outcome = "store_error"
            return _Report(CallResult.error(str(exc)).stamped(END_SESSION_SERVICE))
        attempt.outcome = "ok"
        text = f"Session {session!r} ended: its state is gone ({deleted} stored item(s) deleted)."
        data = {"sessionId": session, "deleted": deleted}
        return _Report(CallResult.both(text, data).stamped(END_SESSION_SERVICE))

    # ---- resources, prompts, completions, logging -----------------------------

    async def _list_resources(
        self, _caller: Caller, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        self._last_request = anyio.current_time()
        return self._resources

    async def _list_templates(
        self, _caller: Caller, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        self._last_request = anyio.current_time()
        return self._templates

    async def _list_prompts(
        self, _caller: Caller, _params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        self._last_request = anyio.current_time()
        return self._prompts

    async def _read_resource(
        self, caller: Caller, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        registry, policy, meta = self._runtime.registry, self._policy, meta_of(params)
        data = await self._served(
            caller,
            "resources/read",
            redacted_uri(params.uri),  # the log's: never a whole handle
            lambda caller: prepare_read(registry, params.uri, meta, policy, caller),
        )
        return types.ReadResourceResult.model_validate(data)

    async def _get_prompt(
        self, caller: Caller, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        registry, policy, meta = self._runtime.registry, self._policy, meta_of(params)
        data = await self._served(
            caller,
            "prompts/get",
            params.name,
            lambda caller: prepare_prompt(
                registry, params.name, params.arguments, meta, policy, caller
            ),
        )
        return types.GetPromptResult.model_validate(data)

    async def _complete(
        self, caller: Caller, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        reference = params.ref
        target = reference.name if isinstance(reference, types.PromptReference) else reference.uri
        argument, value = params.argument.name, params.argument.value
        registry, policy, meta = self._runtime.registry, self._policy, meta_of(params)
        filled = {} if params.context is None else params.context.arguments or {}
        handle = None if self._handles is None else filled.get(HANDLE_ARGUMENT)
        completions = await self._served(
            caller,
            "completion/complete",
            target,
            lambda caller: prepare_completion(
                registry, target, argument, value, meta, policy, caller, handle
            ),
            completions_of,
        )
        return types.CompleteResult(
            completion=types.Completion(
                values=list(completions.values), has_more=completions.has_more
            )
        )

    async def _served(
        self,
        caller: Caller,
        method: str,
        name: str,
        prepare: Callable[[Caller], PreparedCall | Any],
        read: Callable[[CallResult], Any] = handler_data,
    ) -> Any:
        """Prepare a read of a resource, prompt or completion for the caller, and run it.

        Bad input is a JSON-RPC error naming it (an unknown URI carries it in
        the error's data); so is a handler's failure and the runtime's.
        """
        attempt = _Attempt(name, caller, time.perf_counter(), method)
        self._enter()
        try:
            if self._closing:
                attempt.outcome = "shutting_down"
                msg = "the server is stopping and takes no new requests; retry once it is back"
                raise MCPError(types.INTERNAL_ERROR, msg)
            try:
                prepared = prepare(attempt.caller)
                if not isinstance(prepared, PreparedCall):
                    attempt.outcome = "ok"
                    return prepared  # answered without an actor
                attempt.context = prepared.context
                if self._end_connection_sessions:
                    self._connection_sessions.note(prepared.context.session_id, attempt.caller)
                outcome = read(await self._runtime.run(prepared))
            except UnknownResourceError as exc:
                attempt.outcome = outcome_of(exc)
                raise MCPError(types.INVALID_PARAMS, str(exc), {"uri": exc.uri}) from None
            except CallError as exc:
                attempt.outcome = outcome_of(exc)
                raise MCPError(types.INVALID_PARAMS, str(exc)) from None
            except pydantic.ValidationError:
                raise  # params refused by name (`invalid_params_of`), on either path
            except Exception:
                # A bug or a failure below, not the caller's fault: the details (which may
                # name a store's address) go to the log, and either path answers alike.
                attempt.outcome = "internal_error"
                logger.exception("%s %s failed inside the adapter", method, loggable(name))
                msg = f"internal error while serving {method}; the server log has the details"
                raise MCPError(types.INTERNAL_ERROR, msg) from None
            attempt.outcome = "ok"
            return outcome
        finally:
            self._leave()
            attempt.log()

    async def _set_log_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """``logging/setLevel``: the least severe level of the messages this connection gets."""
        connection_of(ctx).state[LOG_LEVEL_STATE] = params.level
        return types.EmptyResult()

    # ---- subscriptions --------------------------------------------------------

    def _followed(
        self, ctx: ServerRequestContext[Any, Any], uri: str, meta: Mapping[str, Any] | None
    ) -> PreparedCall:
        """What following `uri` means for this caller: a read of it (its key), or an MCPError."""
        caller = self._identify(ctx)
        try:
            prepared = prepare_read(self._runtime.registry, uri, meta, self._policy, caller)
        except UnknownResourceError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), {"uri": exc.uri}) from None
        except CallError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        if self._end_connection_sessions:
            self._connection_sessions.note(prepared.context.session_id, caller)
        return prepared

    def _enter(self) -> None:
        if not self._in_flight:  # only then: someone may be waiting on the current event
            self._idle = anyio.Event()
        self._in_flight += 1

    def _leave(self) -> None:
        self._in_flight -= 1
        self._last_request = anyio.current_time()  # quiet counts from the last answer
        if not self._in_flight:
            self._idle.set()


async def _invalid_params_named(ctx: Any, call_next: Any) -> Any:
    """Server middleware: params the SDK refuses get an error that says what is wrong.

    The SDK validates each request's params before its handler runs and
    answers a failure with a bare "Invalid request parameters"; a client
    sending ``arguments: {"focus": 3}`` to ``prompts/get`` learns nothing.
    """
    try:
        return await call_next(ctx)
    except pydantic.ValidationError as error:
        raise invalid_params_of(ctx.method, error) from None


def invalid_params_of(method: str, error: pydantic.ValidationError) -> MCPError:
    """The JSON-RPC error for params of `method` that `error` refused, naming what is wrong."""
    message = f"Invalid params of {method}: {validation_problem(error)}"
    return MCPError(code=types.INVALID_PARAMS, message=message)


async def _pong(_caller: Caller, _params: Any) -> types.EmptyResult:
    """``ping``: an empty result, as the SDK's own handler answers it."""
    return types.EmptyResult()


def _describe(value: str | None) -> str:
    return "-" if value is None else repr(value)


_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
_LOGGED_CHARACTERS: Final = 128


def loggable(text: str) -> str:
    """`text` as it may stand in a log line: itself if plainly a name, else percent-encoded.

    A client chooses the tool name it sends, so a newline in it could forge a
    whole log record, and spaces or quotes could forge fields of this one:
    anything but a short plain name is written with every other character
    percent-encoded (``a b`` → ``a%20b``), cut at 128 characters.
    """
    if _PLAIN_NAME.fullmatch(text):
        return text
    cut = "…" if len(text) > _LOGGED_CHARACTERS else ""
    return urllib.parse.quote(text[:_LOGGED_CHARACTERS], safe="_.:/-") + cut
