"""The host contract: what every host of tool modules offers, and the part written once.

A *host* runs calls of tool modules: `Runtime` (trio), `AsyncioRuntime` (trio
in guest mode on an asyncio loop), `Cluster` (a front routing to shards), and
`BlockingRuntime` (trio in a thread, for synchronous code). The MCP server
(`actors.server.McpAdapter`) serves any of the async ones.

`CallTarget` is the contract, every member explicit: a server asks no host
whether it happens to have ``watch`` or ``unavailable``. `Host` is the base
the async hosts inherit: a host writes `run`, `end_session` and `watch`; the
base turns a tools/call, a ``resources/read``, a ``prompts/get`` and a
``completion/complete`` into a `PreparedCall` (`actors.prepare_call` and its
siblings, with the host's registry and context policy) and runs it with
`run`. Synchronous code cannot await, so `BlockingRuntime` implements
`BlockingTarget`, the same contract with blocking methods.

Which thread hears what is each host's to say (`progress`, `log`, watchers):
see its `run` and `watch`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from protocol import CallError, PromptResult, ResourceResult, call_name

from ._observe import outcome_of
from ._prepare import prepare_call, prepare_completion, prepare_prompt, prepare_read
from ._resources import Completions, completions_of, handler_data

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from protocol import Caller, CallResult

    from ._client import Answer, Asker, LogMessage
    from ._config import RuntimeConfig
    from ._observe import Observer
    from ._prepare import PreparedCall, Route
    from ._progress import ProgressReport
    from ._registry import Registry

__all__ = ["BlockingAsker", "BlockingTarget", "CallTarget", "Host", "Watcher"]

_Prepared = TypeVar("_Prepared")
"""What a prepare function returns: a PreparedCall, or Completions answered without one."""


class Watcher(Protocol):
    """Told of changes of keys' states (`CallTarget.watch`); must not block."""

    def key_changed(self, route: Route) -> None:
        """The state of the key `route` (module, session, assistant, thread) may have changed."""

    def session_ended(self, session_id: str) -> None:
        """The session was ended: every key of it is fresh again."""


class CallTarget(Protocol):
    """What every async host offers, and what an `McpAdapter` serves (see the module docstring).

    Tools, resources and templates, prompts, completions; `Ask`, `Log` and
    `Progress` through `run`'s channels; changes through `watch`; and whether
    the host can serve at all (`unavailable`). `Host` writes all but `run`,
    `end_session` and `watch` once.
    """

    @property
    def config(self) -> RuntimeConfig:
        """The settings; a server reads the context policy."""
        ...

    @property
    def registry(self) -> Registry:
        """The tools, resources and prompts: to list, resolve and stamp errors with."""
        ...

    def prepare(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> PreparedCall:
        """Check a tools/call-shaped call and work out its actor without sending it."""
        ...

    async def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: Asker | None = None,
    ) -> CallResult:
        """Run a prepared call on its key's actor, with the call's client channels."""
        ...

    async def call(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> CallResult:
        """Prepare and run one tools/call-shaped call ``{"name", "arguments", "_meta"}``."""
        ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> CallResult:
        """`call` with the parts given separately."""
        ...

    async def read_resource(
        self,
        uri: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> ResourceResult:
        """Read the resource (or template instance) `uri` for the context in `meta`."""
        ...

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> PromptResult:
        """Build the prompt listed as `name` with `arguments`, for the context in `meta`."""
        ...

    async def complete(
        self,
        target: str,
        argument: str,
        value: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> Completions:
        """Suggest values for `argument` of the prompt or resource template `target`."""
        ...

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Tell `watcher` of every change of a key's state from now on; returns how to stop."""
        ...

    async def end_session(self, session_id: str) -> int:
        """Stop the session's actors and delete its stored state; how many keys were deleted."""
        ...

    async def unavailable(self) -> str | None:
        """Why the host cannot serve now (for ``/readyz``), or None when it can."""
        ...


class Host(ABC):
    """The base of the async hosts: `CallTarget` with all but `run`, `end_session`, `watch`.

    A host sets ``_registry`` and ``_config`` in its ``__init__`` (read
    directly on the call path: a property is one more function per call) and
    may set ``_observer`` to be told of the calls refused here.
    """

    _registry: Registry
    _config: RuntimeConfig
    _observer: Observer | None = None

    @property
    def config(self) -> RuntimeConfig:
        """The configuration the host was opened with."""
        return self._config

    @property
    def registry(self) -> Registry:
        """The enabled modules and tools."""
        return self._registry

    @abstractmethod
    async def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: Asker | None = None,
    ) -> CallResult:
        """Run a prepared call on its key's actor (see the host's own `run`)."""

    @abstractmethod
    async def end_session(self, session_id: str) -> int:
        """Stop the session's actors and delete its stored state; how many keys were deleted."""

    @abstractmethod
    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Tell `watcher` of every change of a key's state from now on; returns how to stop."""

    async def unavailable(self) -> str | None:
        """None: a host in this process serves for as long as it is open."""
        return None

    # ---- calling (the caller's task) -----------------------------------------

    async def call(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> CallResult:
        """Run one tools/call-shaped call: ``{"name", "arguments", "_meta"}``.

        Returns the tool's result (``is_error`` set for a tool error). Raises
        UnknownToolError, ProtocolError (bad context or call shape, a session
        outside `caller`'s tenant) or ArgumentsError before anything is sent
        (see `prepare`), and CallTimeoutError, ActorCrashedError,
        RuntimeClosedError or CapacityError for a call the host could not
        complete (a cluster adds ShardLostError). A cancelled caller withdraws a call not
        started yet; a started one runs to completion and its reply is dropped.
        """
        return await self._prepared_and_run(params, caller)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> CallResult:
        """`call` with the parts given separately."""
        params = {"name": name, "arguments": arguments, "_meta": meta}
        # Not through `call`: a coroutine less to resume at every wake-up.
        return await self._prepared_and_run(params, caller)

    def _prepared_and_run(
        self, params: Mapping[str, Any], caller: Caller | None
    ) -> Awaitable[CallResult]:
        """`prepare`, then what `run` returns: what `call` and `call_tool` await.

        A plain function, so that it adds no coroutine; a host may send a call's parts
        without a `PreparedCall` (`Runtime`). Raises what `prepare` does.
        """
        return self.run(self.prepare(params, caller=caller))

    def prepare(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> PreparedCall:
        """Check a call and work out its actor without sending it (`actors.prepare_call`).

        `caller` is who sent the call as a transport established it
        (`protocol.Caller`): its default session and tenant apply. ``None``, an
        embedding program's own call, takes the call's context as given.
        """
        try:
            return prepare_call(self._registry, params, self._config.policy, caller)
        except CallError as error:
            self._refused(params, error)
            raise

    async def read_resource(
        self,
        uri: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> ResourceResult:
        """Read the resource `uri` for the context in `meta` (``sessionId``…) or `caller`'s.

        The handler runs on the actor of that context's key, in its turn.
        Raises UnknownResourceError, ProtocolError and ArgumentsError before
        anything is sent, HandlerError if the handler failed, and the runtime
        errors `call` raises.
        """
        call = self._checked(prepare_read, uri, meta, self._config.policy, caller)
        return ResourceResult.from_wire(handler_data(await self.run(call)))

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> PromptResult:
        """Build the prompt listed as `name` with `arguments`, for the context in `meta`.

        Raises UnknownPromptError, ProtocolError and ArgumentsError before
        anything is sent, HandlerError if the handler failed, and the runtime
        errors `call` raises.
        """
        call = self._checked(prepare_prompt, name, arguments, meta, self._config.policy, caller)
        return PromptResult.from_wire(handler_data(await self.run(call)))

    async def complete(
        self,
        target: str,
        argument: str,
        value: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> Completions:
        """Suggest values for `argument` of the prompt or resource template `target`.

        `target` is a listed prompt name, or a URI template as listed; `value`
        is what was typed so far. A declared completion runs on the actor of
        the context's key; an argument whose type lists its values (a
        ``Literal``, an Enum) is completed from them; any other gets none.
        Raises UnknownPromptError or UnknownResourceError for an unknown
        target, and as `get_prompt` does.
        """
        policy = self._config.policy
        call = self._checked(prepare_completion, target, argument, value, meta, policy, caller)
        if isinstance(call, Completions):
            return call
        return completions_of(await self.run(call))

    def _checked(self, prepare: Callable[..., _Prepared], *arguments: Any) -> _Prepared:
        """``prepare(registry, *arguments)``; what it refuses is told to the observer first."""
        try:
            return prepare(self._registry, *arguments)
        except CallError as error:
            self._refused({}, error)
            raise

    def _refused(self, params: Mapping[str, Any], error: CallError) -> None:
        """Tell the observer, if any, that `params` was refused with `error`."""
        if self._observer is not None:
            self._observer.call_refused(self._resolved_name(params), outcome_of(error))

    def _resolved_name(self, params: Mapping[str, Any]) -> str | None:
        """The full name of the tool `params` names; None when it names none (never a label)."""
        try:
            return self._registry.resolve(call_name(params)).full_name
        except CallError:
            return None


class BlockingAsker(Protocol):
    """`Asker` for synchronous code: what `BlockingTarget.run`'s questions go through.

    Called in a worker thread of the runtime (never its trio thread), so it
    may block until the user or the model answers.
    """

    def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """Ask the user to fill in a form described by `schema`."""
        ...

    def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
    ) -> str:
        """Ask the client's model to answer `messages`; its text."""
        ...


class BlockingTarget(Protocol):
    """`CallTarget` for synchronous code: the same members, each blocking until it is answered.

    `BlockingRuntime` implements it. It is no MCP `CallTarget` (a server
    awaits); `BlockingRuntime` documents which thread hears what.
    """

    @property
    def config(self) -> RuntimeConfig:
        """The settings the host was opened with."""
        ...

    @property
    def registry(self) -> Registry:
        """The tools, resources and prompts."""
        ...

    def prepare(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> PreparedCall:
        """`CallTarget.prepare`."""
        ...

    def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[LogMessage], None] | None = None,
        ask: BlockingAsker | None = None,
    ) -> CallResult:
        """`CallTarget.run`, with a blocking asker."""
        ...

    def call(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> CallResult:
        """`CallTarget.call`."""
        ...

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> CallResult:
        """`CallTarget.call_tool`."""
        ...

    def read_resource(
        self,
        uri: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> ResourceResult:
        """`CallTarget.read_resource`."""
        ...

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> PromptResult:
        """`CallTarget.get_prompt`."""
        ...

    def complete(
        self,
        target: str,
        argument: str,
        value: str,
        *,
        meta: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> Completions:
        """`CallTarget.complete`."""
        ...

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """`CallTarget.watch`."""
        ...

    def end_session(self, session_id: str) -> int:
        """`CallTarget.end_session`."""
        ...
