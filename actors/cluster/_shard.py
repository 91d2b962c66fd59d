"""`ShardHost`: one runtime on a Ray async actor's event loop, and its part in a handover.

A shard serves the sessions its committed `Membership` gives it. A call for
any other session is answered `Moved`, never run, and the caller reroutes
with the directory's newer membership. A change of membership comes in two
steps from the cluster's controller:

* `prepare`: the shard learns the next membership. Calls for sessions that
  change owner wait; once the calls already running for the sessions it
  gives up have finished, their actors stop (`Runtime.hand_over`), so their
  state is only in the store. Every shard acknowledges before the next one
  is published.
* `commit`: the next membership becomes the shard's; the waiting calls go on,
  to be served or answered `Moved`. Or `call_off`, when a step failed before
  the next membership was published: the shard goes on with the one it had.

So a new owner loads a session only after its old owner stopped it; the
store's versioned writes still refuse a stale owner's write whatever goes
wrong (a shard cut off from the controller, say).

Results cross Ray as the MCP wire mapping (`CallResult.to_wire`), and every
refusal as the ``isError`` result the MCP server would send
(`actors.error_result`): exceptions with arguments of their own do not
survive pickling reliably, and a caller on another process should read the
same words an MCP client reads.

A front sends the calls it has for a shard together (`call_batch`): one Ray
call for many tool calls, each run as `call` runs it and answered on its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
from typing import TYPE_CHECKING, Any, final

import attrs
import ray

from .._error_result import error_result
from .._errors import RuntimeCallError
from .._guest import open_asyncio_runtime
from .._prepare import PreparedCall
from ..server._options import load_module

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from prometheus_client.core import Metric

    from protocol import Membership, ToolContext

    from .._guest import AsyncioRuntime
    from .._prepare import Route
    from .._runtime import RuntimeConfig, RuntimeStatistics
    from ..telemetry import PrometheusMetrics

__all__ = ["Failed", "Moved", "ShardHost", "WireCall"]


@final
@attrs.frozen
class Moved:
    """A shard's answer to a call for a session it does not own: reroute, it did not run."""

    epoch: int
    """The epoch of the shard's membership: the caller's view is older than this."""


@final
@attrs.frozen
class Failed:
    """A shard's answer to a call of a batch that failed there unexpectedly (a bug, not a refusal).

    Refusals and tool errors are results; this says that the shard's own code
    raised, so that the batch's other calls still get their answers.
    """

    error: str
    """The exception's type and text."""


@final
@attrs.frozen
class WireCall:
    """A prepared call as it crosses to a shard: the tool by name, the rest as prepared.

    The context was judged where the call came in (the caller's tenant and
    default session applied), so the shard runs it as it is.
    """

    tool: str
    """The tool's full name (``module__tool``)."""
    context: ToolContext
    """Whom the call is for, as judged where it came in."""
    arguments: dict[str, Any]
    """The arguments, checked and bound, without context fields."""
    route: Route
    """The actor key's parts: module and projected context."""
    session_defaulted: bool
    """Whether the context policy supplied the session."""
    meta: Mapping[str, Any] | None
    """The call's ``_meta``, for observers (trace context)."""

    @classmethod
    def of(cls, call: PreparedCall) -> WireCall:
        """The wire form of `call`."""
        return cls(
            call.tool.full_name,
            call.context,
            call.arguments,
            call.route,
            call.session_defaulted,
            call.meta,
        )


@final
class ShardHost:
    """The body of a shard's Ray actor; `open_cluster` starts them.

    `directory` names the cluster's directory actor (in `namespace`): a shard
    that Ray restarted reads the membership there before it serves anything.
    By name, not handle: Ray keeps a handle argument in its object store, from
    where a restart could not always read it back.
    """

    def __init__(
        self,
        name: str,
        directory: str,
        namespace: str,
        modules: Sequence[str],
        config: RuntimeConfig | None,
        state: str | Sequence[str],
        metrics: bool,
    ) -> None:
        self._name = name
        self._directory = (directory, namespace)
        # By spec, not object: modules hold what pickling cannot carry (converters, closures).
        self._modules = tuple(map(load_module, modules))
        self._config = config
        self._state = state
        self._metrics = _metrics() if metrics else None
        self._stack = contextlib.AsyncExitStack()
        self._runtime: AsyncioRuntime | None = None
        self._opening = asyncio.Lock()
        self._committed: Membership | None = None
        self._pending: Membership | None = None
        self._running: collections.Counter[str] = collections.Counter()  # calls per session
        # Notified when a commit lands and, during a handover, when a call ends.
        self._changed = asyncio.Condition()

    async def _opened(self) -> AsyncioRuntime:
        if self._runtime is not None:
            return self._runtime
        # Opened on first use, on the actor's loop: __init__ runs before the loop does.
        async with self._opening:
            if self._runtime is None:
                # A blocking lookup, once per (re)start of the shard.
                directory = ray.get_actor(*self._directory)
                committed, pending = await directory.memberships.remote()
                opening = open_asyncio_runtime(
                    self._modules, self._config, state=self._state, observer=self._metrics
                )
                self._runtime = await self._stack.enter_async_context(opening)
                self._committed, self._pending = committed, pending
            return self._runtime

    async def call(self, call: WireCall) -> dict[str, Any] | Moved:
        """Run `call` if its session is this shard's: its MCP wire result; else `Moved`."""
        async with self._owning(call.context.session_id) as runtime:
            if runtime is None:
                return self._moved()
            tool = runtime.registry.operation(call.tool)  # a tool, or a resource's read...
            prepared = PreparedCall(
                tool, call.context, call.arguments, call.route, call.session_defaulted, call.meta
            )
            try:
                result = await runtime.run(prepared)
            except RuntimeCallError as error:
                result = error_result(error, tool.service)
            return result.to_wire()

    async def call_batch(self, calls: list[WireCall]) -> list[dict[str, Any] | Moved | Failed]:
        """Each of `calls` as `call` runs it, all at once: their answers, in their order.

        They enter the runtime in their order (each task started here reaches
        its actor's mailbox before the next one runs), so one session's calls
        in a batch keep the order they were sent in; Ray itself promises no
        order between two calls of an async actor. One that fails unexpectedly
        is answered `Failed`; the others are not disturbed.
        """
        return await asyncio.gather(*map(self._answer, calls))

    async def _answer(self, call: WireCall) -> dict[str, Any] | Moved | Failed:
        try:
            return await self.call(call)
        except Exception as error:  # a bug here: say so for this call, answer the others
            return Failed(f"{type(error).__name__}: {error}")

    async def end_session(self, session_id: str) -> int | Moved:
        """`Runtime.end_session` for a session of this shard; `Moved` for another's."""
        async with self._owning(session_id) as runtime:
            return self._moved() if runtime is None else await runtime.end_session(session_id)

    @contextlib.asynccontextmanager
    async def _owning(self, session: str) -> AsyncIterator[AsyncioRuntime | None]:
        """The runtime, counted as busy with `session`, if this shard owns it; else None."""
        runtime = await self._opened()
        await self._settle(session)
        assert self._committed is not None
        if self._committed.owner(session) != self._name:
            yield None
            return
        # No await between the check above and this count: `prepare` sees every call it let in.
        self._running[session] += 1
        try:
            yield runtime
        finally:
            await self._call_done(session)

    def _moved(self) -> Moved:
        assert self._committed is not None
        return Moved(self._committed.epoch)

    def _moving(self, session: str) -> bool:
        """Whether a handover under way changes `session`'s owner."""
        pending, committed = self._pending, self._committed
        return pending is not None and committed is not None and committed.moves(session, pending)

    async def _settle(self, session: str) -> None:
        """Wait out a handover that moves `session` (to or from here)."""
        if self._pending is None:
            return  # the usual case, without taking the lock
        async with self._changed:
            await self._changed.wait_for(lambda: not self._moving(session))

    async def _call_done(self, session: str) -> None:
        self._running[session] -= 1
        if not self._running[session]:
            del self._running[session]
        if self._pending is not None:  # `prepare` may be waiting for this call
            async with self._changed:
                self._changed.notify_all()

    async def prepare(self, next_membership: Membership) -> int:
        """Step one of a handover: stop the sessions that leave; how many actors stopped."""
        runtime = await self._opened()
        assert self._committed is not None
        if next_membership.epoch <= self._committed.epoch:
            return 0  # a retry after the commit: nothing left to do
        committed, me = self._committed, self._name
        self._pending = next_membership

        def leaving(session: str) -> bool:
            return committed.owner(session) == me and next_membership.owner(session) != me

        async with self._changed:
            await self._changed.wait_for(lambda: not any(map(leaving, self._running)))
        return await runtime.hand_over(leaving)

    async def commit(self, membership: Membership) -> None:
        """Step two: `membership` is this shard's; calls that waited go on."""
        await self._opened()
        assert self._committed is not None
        async with self._changed:
            if membership.epoch > self._committed.epoch:
                self._committed = membership
            if self._pending is not None and self._pending.epoch <= membership.epoch:
                self._pending = None
            self._changed.notify_all()

    async def call_off(self, epoch: int) -> None:
        """The handover to `epoch` failed: go on with the committed membership."""
        await self._opened()
        async with self._changed:
            if self._pending is not None and self._pending.epoch == epoch:
                self._pending = None
            self._changed.notify_all()

    async def ready(self) -> None:
        """Return once the shard's runtime is open (its store reached) and it can serve."""
        await self._opened()

    async def metric_families(self) -> list[Metric]:
        """The shard's Prometheus metric families now; none unless it was started with metrics."""
        return [] if self._metrics is None else list(self._metrics.registry.collect())

    async def statistics(self) -> RuntimeStatistics:
        """The shard's runtime counters (`Runtime.statistics`)."""
        return (await self._opened()).statistics()

    async def live_sessions(self) -> frozenset[str]:
        """The sessions with a live actor here (tests check no session is live twice)."""
        runtime = await self._opened()
        return frozenset(info.key.context.session_id for info in runtime.actors())

    async def pid(self) -> int:
        """The shard's process id (tests kill it to fail it over)."""
        return os.getpid()

    async def close(self) -> None:
        """Stop the runtime: calls in flight finish, every state's ``on_stop`` runs."""
        await self._stack.aclose()
        self._runtime = None


def _metrics() -> PrometheusMetrics:
    from ..telemetry import PrometheusMetrics  # lazily: only with the metrics extra

    return PrometheusMetrics()


def shard_class() -> Any:
    """`ShardHost` as a Ray actor class, restarted by Ray whenever its process dies.

    Calls are not retried by Ray (``max_task_retries=0``): whether one that was
    running when the process died had written is not known, so its caller is told.
    """
    return ray.remote(max_restarts=-1, max_task_retries=0)(ShardHost)
