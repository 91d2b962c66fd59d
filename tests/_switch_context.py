"""A deliberately broken runtime: the design this project replaces (docs/design.md), kept to fail
tests.

The servers of the application this project grew from held one "current
context" that a ``switch_context()`` request set before each tool call, and
every handler found its state through that global
(``sessions.get(currentSessionId)``). `SwitchContextRuntime` reproduces it with
this project's own modules and handlers, so the isolation tests can prove that
they catch it:

* ``call`` runs in the caller's task: it switches the shared context (a
  request of its own, so a checkpoint), then runs the handler;
* the handler's state is a proxy that looks the state up through the *current*
  context on every attribute access, as those servers' ``getCurrentState()``
  did, so an ``await`` inside a handler lets another call switch the context
  under it: a read-modify-write starts in one key's state and ends in
  another's.

That design breaks both isolation and order: two concurrent calls to one key
interleave their read-modify-writes as well. Options isolate one bug each:

* ``serialize="keys"`` makes calls to one key (the key of the call's own
  context) wait for each other, as an actor would, but keeps the shared
  current context: what is left is the leak between keys;
* ``string_keys=True`` keys states by the old string keys
  (``session::assistant-or-none::thread-or-default``), so an assistant named
  ``"none"`` shares the state of "no assistant", and a thread named
  ``"default"`` that of "no thread"; with ``serialize="calls"`` (one call at
  a time) that collision is the only bug left;
* ``context_per_call=True`` is the first fix (context passed with every call)
  without actors: each handler finds the state of its own call's context, but
  nothing makes calls to one key wait for each other, so two read-modify-writes
  interleave and one update is lost.

Not for use outside the tests.
"""

from __future__ import annotations

import contextlib
import inspect
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import trio

from actors import ToolError, ToolModule
from actors._module import to_call_result
from actors.lowlevel import Registry, prepare_call
from protocol import CallResult, ToolContext

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping

__all__ = ["SwitchContextRuntime", "open_switch_context_runtime"]


def _string_key(context: ToolContext) -> str:
    # The old key format, absent parts spelled as strings: the collision bug.
    return (
        f"{context.session_id}::{context.assistant_id or 'none'}::{context.thread_id or 'default'}"
    )


class _StateLookup:
    """A handler's state, looked up anew on every attribute access.

    Through the shared current context (the old servers' ``getCurrentState()``), or
    through the call's own context under ``context_per_call``.
    """

    def __init__(
        self, runtime: SwitchContextRuntime, module: ToolModule[Any], context: ToolContext | None
    ) -> None:
        object.__setattr__(self, "_runtime", runtime)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_context", context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime.state_of(self._module, self._context), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._runtime.state_of(self._module, self._context), name, value)


class SwitchContextRuntime:
    """The replaced design: one shared current context, states looked up through it."""

    def __init__(
        self,
        modules: Iterable[ToolModule[Any]],
        *,
        serialize: Literal["nothing", "calls", "keys"] = "nothing",
        string_keys: bool = False,
        context_per_call: bool = False,
    ) -> None:
        self._registry = Registry(modules)
        self._serialize = serialize
        self._string_keys = string_keys
        self._context_per_call = context_per_call
        self._locks: dict[object, trio.Lock] = {}
        self._current: ToolContext | None = None
        self._states: dict[tuple[str, object], object] = {}

    async def switch_context(self, context: ToolContext) -> None:
        """Make `context` current for every call, as the old servers' separate request did."""
        self._current = context
        await trio.lowlevel.checkpoint()  # a request of its own: a round trip

    def state_of(self, module: ToolModule[Any], context: ToolContext | None) -> object:
        """`module`'s state for `context` (None: the current one), created on first use."""
        if context is None:
            context = self._current
        if context is None:
            msg = "No session: call switch_context first"
            raise RuntimeError(msg)
        projected = module.scope.project(context)
        key = self._key(module, projected)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = module.state(projected)
        return state

    def _key(self, module: ToolModule[Any], projected: ToolContext) -> tuple[str, object]:
        return (module.name, _string_key(projected) if self._string_keys else projected)

    def _lock(
        self, module: ToolModule[Any], context: ToolContext
    ) -> contextlib.AbstractAsyncContextManager[object]:
        if self._serialize == "nothing":
            return contextlib.nullcontext()
        key = (
            "every call"
            if self._serialize == "calls"
            else self._key(module, module.scope.project(context))
        )
        return self._locks.setdefault(key, trio.Lock())

    async def call(self, params: Mapping[str, Any]) -> CallResult:
        """Run one tools/call-shaped call in the caller's task."""
        call = prepare_call(self._registry, params)
        tool = call.tool
        async with self._lock(tool.module, call.context):
            await self.switch_context(call.context)
            own = call.context if self._context_per_call else None
            state = _StateLookup(self, tool.module, own)
            try:
                value = tool.invoke(state, call.context, call.arguments)
                if inspect.isawaitable(value):
                    value = await value
            except ToolError as exc:  # as Runtime does: a clean error result
                return CallResult.error(str(exc)).stamped(tool.service)
        return to_call_result(value, tool.full_name).stamped(tool.service)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> CallResult:
        """`call` with the parts given separately."""
        return await self.call({"name": name, "arguments": arguments, "_meta": meta})


@asynccontextmanager
async def open_switch_context_runtime(
    modules: Iterable[ToolModule[Any]], **options: Any
) -> AsyncIterator[SwitchContextRuntime]:
    """Open a `SwitchContextRuntime`; the same shape as `actors.open_runtime`."""
    yield SwitchContextRuntime(modules, **options)
