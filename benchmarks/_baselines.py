"""What the runtime is measured against, and the tool module every design serves.

Every design runs the same handler against the same kind of state, so the
differences measured are the designs' own:

* `ChannelFloor` — the floor of the runtime's design: one bare trio task per
  key, fed by a memory channel, answering through an Event. No parsing, no
  validation, no result type, no deadline: what an actor costs at the least.
* `LockedDict` — the replaced design's first fix done right: one dict of
  states, a ``trio.Lock`` per key, the handler run in the caller's task.
* `DirectCall` — the handler called directly: the cost of the work itself.
* `HandlersDirect` — `Runtime.call` without the actor, for the ``mcp``
  scenario's server that calls handlers directly.
* `SwitchContext` — the replaced design's bug: one global current context that
  each call switches before running its handler (see the `isolation`
  scenario).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, final

import trio

import actors
from actors import ToolModule
from protocol import CallResult, Scope, ToolContext

if TYPE_CHECKING:
    from actors import ProgressReport, Runtime, RuntimeConfig
    from actors.lowlevel import PreparedCall, Registry

__all__ = [
    "ChannelFloor",
    "DirectCall",
    "HandlersDirect",
    "KeyState",
    "LiveStates",
    "LockedDict",
    "SwitchContext",
    "bench_module",
    "noop",
    "whoami",
]

Handler = Callable[["KeyState"], str]


class KeyState:
    """The state of one key: just its name, so that a reply can prove which state served it."""

    __slots__ = ("key", "tracker")

    def __init__(self, key: str, tracker: LiveStates | None = None) -> None:
        self.key = key
        self.tracker = tracker
        if tracker is not None:
            tracker.started(key)

    def on_stop(self) -> None:
        """The runtime's stop hook: tell the tracker this key's state is gone."""
        if self.tracker is not None:
            self.tracker.stopped(self.key)


def noop(state: KeyState) -> str:
    """Do nothing and say so."""
    return "ok"


def whoami(state: KeyState) -> str:
    """Return the key of the state that served the call."""
    return state.key


@final
class LiveStates:
    """Our own check of "one live actor per key": states register on start, leave on stop."""

    __slots__ = ("_live", "duplicates", "unknown_stops")

    def __init__(self) -> None:
        self._live: set[str] = set()
        self.duplicates = 0
        """States created while another state of the same key was live."""
        self.unknown_stops = 0
        """Stops of a state that was not registered (a double stop)."""

    def started(self, key: str) -> None:
        """Register a new state for `key`, flagging a second live one."""
        if key in self._live:
            self.duplicates += 1
        self._live.add(key)

    def stopped(self, key: str) -> None:
        """Forget `key`'s state."""
        if key not in self._live:
            self.unknown_stops += 1
        self._live.discard(key)

    @property
    def live(self) -> int:
        """States started and not yet stopped."""
        return len(self._live)


def bench_module(
    name: str = "bench", *, ttl: float | None = None, tracker: LiveStates | None = None
) -> ToolModule[KeyState]:
    """A session-scoped module with the `noop` and `whoami` tools over `KeyState`."""

    def state(context: ToolContext) -> KeyState:
        return KeyState(context.session_id, tracker)

    module = ToolModule(name, state, scope=Scope.SESSION, ttl=ttl)
    module.tool(noop)
    module.tool(whoami)
    return module


@final
class _Request:
    """One call to a `ChannelFloor` actor and the slot of its reply."""

    __slots__ = ("done", "value")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: object = None


@final
class ChannelFloor:
    """One bare trio task per key: a memory channel in, an Event back.

    With a `ttl`, an idle task stops after that many seconds, serving what
    reached its mailbox meanwhile first, as the runtime does; without one it
    is the plainest possible loop.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        handler: Handler,
        *,
        ttl: float | None = None,
        mailbox: int = 64,
    ) -> None:
        self._nursery = nursery
        self._handler = handler
        self._ttl = ttl
        self._mailbox = mailbox
        self._mailboxes: dict[str, trio.MemorySendChannel[_Request]] = {}

    @property
    def live(self) -> int:
        """Tasks running now."""
        return len(self._mailboxes)

    async def call(self, key: str) -> object:
        """Send a request to `key`'s task (started on first use) and wait for the reply."""
        send = self._mailboxes.get(key)
        if send is None:
            send, receive = trio.open_memory_channel[_Request](self._mailbox)
            self._mailboxes[key] = send
            serve = self._serve if self._ttl is None else self._serve_until_idle
            self._nursery.start_soon(serve, key, receive)
        request = _Request()
        try:
            send.send_nowait(request)
        except trio.WouldBlock:
            await send.send(request)
        await request.done.wait()
        return request.value

    async def _serve(self, key: str, receive: trio.MemoryReceiveChannel[_Request]) -> None:
        state = KeyState(key)
        async for request in receive:
            request.value = self._handler(state)
            request.done.set()

    async def _serve_until_idle(
        self, key: str, receive: trio.MemoryReceiveChannel[_Request]
    ) -> None:
        state = KeyState(key)
        ttl = math.inf if self._ttl is None else self._ttl
        while True:
            request: _Request | None = None
            with trio.move_on_after(ttl):
                request = await receive.receive()
            if request is None:
                try:
                    request = receive.receive_nowait()
                except trio.WouldBlock:
                    del self._mailboxes[key]  # no checkpoint since the check: nothing is lost
                    return
            request.value = self._handler(state)
            request.done.set()


@final
class LockedDict:
    """The replaced design's first fix done right: a dict of states, one ``trio.Lock`` per key."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._entries: dict[str, tuple[trio.Lock, KeyState]] = {}

    async def call(self, key: str) -> object:
        """Run the handler on `key`'s state in the caller's task, holding the key's lock."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = (trio.Lock(), KeyState(key))
        lock, state = entry
        async with lock:
            return self._handler(state)


@final
class DirectCall:
    """The handler called directly on a dict of states: the cost of the work itself."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._states: dict[str, KeyState] = {}

    def call(self, key: str) -> object:
        """Run the handler on `key`'s state."""
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = KeyState(key)
        return self._handler(state)


@final
class HandlersDirect:
    """`Runtime.call` without the actor: the handler runs in the caller's task.

    It prepares the call (`actors.prepare_call`) and shapes the result as the
    runtime does, with the runtime's registry and context policy, and keeps
    one state per key in a dict. What it leaves out besides the hop: the log line for a call
    without a session, and turning a handler's exception into an error result
    (it propagates). It is not safe for concurrent calls on a key whose
    handler awaits — which is the point of actors — but the benchmark's no-op
    handler never awaits.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._states: dict[tuple[object, ...], object] = {}

    @property
    def config(self) -> RuntimeConfig:
        """The runtime's settings."""
        return self._runtime.config

    @property
    def registry(self) -> Registry:
        """The runtime's tools."""
        return self._runtime.registry

    async def end_session(self, session_id: str) -> int:
        """Forget the session's states (nothing is stored)."""
        doomed = [route for route in self._states if route[1] == session_id]
        for route in doomed:
            del self._states[route]
        return 0

    def watch(self, _watcher: object) -> Callable[[], None]:
        """Changes are never told: the benchmark serves no resource to follow."""
        return lambda: None

    async def unavailable(self) -> str | None:
        """Always serving: there is no backend to lose."""
        return None

    async def call(self, params: Mapping[str, Any]) -> CallResult:
        """Prepare and run one call on its key's state, here and now."""
        # Looked up at the call: the --against worker imports this module against older
        # runtimes, which lack `prepare_call` (only the mcp scenario's stand-in needs it),
        # or have it in `actors` rather than `actors.lowlevel`.
        try:
            from actors.lowlevel import prepare_call
        except ImportError:
            prepare_call = actors.prepare_call
        return await self.run(prepare_call(self.registry, params, self.config.policy))

    async def run(
        self,
        call: PreparedCall,
        *,
        progress: Callable[[ProgressReport], None] | None = None,
        log: Callable[[Any], None] | None = None,
        ask: Any = None,
    ) -> CallResult:
        """Run a prepared call on its key's state, here and now (progress and log go nowhere)."""
        tool = call.tool
        module = tool.module
        state = self._states.get(call.route)
        if state is None:
            state = self._states[call.route] = module.state(module.scope.project(call.context))
        value = tool.invoke(state, call.context, call.arguments)
        return tool.result_of(await value if tool.is_async else value)


@final
class SwitchContext:
    """The replaced design (docs/design.md): a global current context, switched before every call.

    `call_tool` first switches the context (a request of its own, so a
    checkpoint), then runs the handler, which reads the current context,
    awaits a checkpoint (any I/O) and then writes into the state it found. A
    concurrent call switching in between makes the write land in — or the
    read come from — another context's state.
    """

    def __init__(self, module: ToolModule[Any]) -> None:
        self._module = module
        self._current: ToolContext | None = None
        self._states: dict[ToolContext, object] = {}

    async def switch_context(self, context: ToolContext) -> None:
        """Make `context` the current one for every later call."""
        self._current = context
        await trio.lowlevel.checkpoint()

    async def call_tool(self, context: ToolContext, tool: str, arguments: Mapping[str, Any]) -> str:
        """Switch to `context`, then run `tool` against the current context's state."""
        await self.switch_context(context)
        handler = self._module.tools[tool].handler
        state = self._current_state()
        await trio.lowlevel.checkpoint()
        return str(handler(state, **arguments))

    def _current_state(self) -> object:
        assert self._current is not None, "switch_context runs first"
        key = self._module.scope.project(self._current)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = self._module.state(key)
        return state
