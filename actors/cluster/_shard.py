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

Client channels
---------------
A call whose front has channels to its client (progress, a log, questions)
goes by `converse` instead, a Ray streaming generator: it yields what the
tool says as it says it (`Heard`: progress reports, log messages, and the
questions `Form` and `Sampling`), then the call's answer. The front answers
a question through `answer`; the tool waits for it, as it waits for a client
in process. When the front's caller goes away, the front cancels the stream:
the call is told (its questions waiting, and any it asks later, raise
CannotAskError) and the tool runs on without them, as a cancelled call does
in a runtime. A call without channels never takes this path: it costs what it
did before.

Changes
-------
A front that watches (`Cluster.watch`) streams each shard's changes
(`changes`, another streaming generator) for as long as it watches: the keys
whose state changed, the sessions ended (`SessionEnded`), and each membership
the shard commits, so that the front follows a shard that joins.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
from typing import TYPE_CHECKING, Any, Final, TypeAlias, final

import attrs
import ray

from .._client import Answer, CannotAskError, LogMessage
from .._error_result import error_result
from .._errors import RuntimeCallError
from .._guest import open_asyncio_runtime
from .._prepare import PreparedCall
from .._progress import ProgressReport
from ..server._module_specs import load_module
from ..server.mcp._client_channels import ASK_TIMEOUT, LOG_QUEUE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from prometheus_client.core import Metric

    from protocol import Membership, ToolContext

    from .._client import Asker
    from .._config import RuntimeConfig
    from .._guest import AsyncioRuntime
    from .._prepare import Route
    from .._runtime import RuntimeStatistics
    from ..telemetry import PrometheusMetrics

__all__ = [
    "Change",
    "Channels",
    "Failed",
    "Form",
    "Heard",
    "Moved",
    "Refused",
    "Said",
    "Sampling",
    "SessionEnded",
    "ShardHost",
    "WireCall",
]


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
@attrs.frozen
class Channels:
    """Which client channels a call's front has: only those reach the tool on its shard.

    A tool that asks with no ``ask`` here gets CannotAskError, as in process.
    """

    progress: bool
    """Whether the front hears progress reports."""
    log: bool
    """Whether the front hears log messages."""
    ask: bool
    """Whether the front can ask its client questions."""


@final
@attrs.frozen
class Form:
    """A call's question to its user (form elicitation), crossing to its front."""

    number: int
    """Which question of the call (the front's `ShardHost.answer` names it)."""
    message: str
    """What the user is asked."""
    schema: Mapping[str, Any]
    """The form, a flat JSON Schema object."""

    async def asked(self, asker: Asker) -> Answer:
        """Ask it through the front's `asker`: the user's answer."""
        return await asker.elicit(self.message, self.schema)


@final
@attrs.frozen
class Sampling:
    """A call's question to its client's model (sampling), crossing to its front."""

    number: int
    """Which question of the call (the front's `ShardHost.answer` names it)."""
    messages: Sequence[Mapping[str, Any]]
    """The MCP sampling messages."""
    max_tokens: int
    """How long the answer may be."""
    system_prompt: str | None
    """The system prompt, if any."""
    temperature: float | None
    """The sampling temperature, if any."""

    async def asked(self, asker: Asker) -> str:
        """Ask it through the front's `asker`: the model's text."""
        return await asker.sample(
            self.messages,
            max_tokens=self.max_tokens,
            system_prompt=self.system_prompt,
            temperature=self.temperature,
        )


@final
@attrs.frozen
class Refused:
    """The front's answer to a question it could not ask: the tool gets CannotAskError."""

    reason: str
    """Why, in the words the tool's error gives."""


Said: TypeAlias = "ProgressReport | LogMessage | Form | Sampling"
"""What a call says to its client on the way: a report, a log message, or a question."""


@final
@attrs.frozen
class Heard:
    """What a call said to its client since the stream last yielded, in order (`converse`)."""

    said: tuple[Said, ...]
    """Progress reports, log messages and questions, in the order the tool made them."""


@final
@attrs.frozen
class SessionEnded:
    """A change a shard streams (`ShardHost.changes`): the session was ended there."""

    session_id: str
    """The session ended."""


Change: TypeAlias = "Route | SessionEnded | Membership"
"""What a shard's change stream carries: a key changed, a session ended, a membership committed."""
_WAITING: Final = LOG_QUEUE
"""A call's log messages waiting on its shard at most (more are dropped, and counted), and its
progress reports (a newer one then replaces the newest kept: only the newest matters)."""
_ASK_GRACE: Final = 30.0
"""Seconds a shard's question outwaits the front's own bound (`ASK_TIMEOUT`), which names
the client: this one only ends a question whose front is gone without a word."""


@attrs.define(eq=False)
class _Conversation:
    """A call with channels on its shard: what it said and not yet streamed, its open questions.

    Touched on the actor's loop only (the runtime's listeners run there too).
    """

    stirred: asyncio.Event = attrs.field(factory=asyncio.Event)  # said something, or ended
    said: list[Said] = attrs.field(factory=list)
    logs: int = 0  # log messages in `said`
    reports: int = 0  # progress reports in `said`
    dropped: int = 0  # log messages dropped since the stream last yielded
    questions: dict[int, asyncio.Future[Any]] = attrs.field(factory=dict)
    numbers: itertools.count[int] = attrs.field(factory=itertools.count)
    ended: str | None = None  # why no question is answered any more

    def hear(self, said: Said) -> None:
        """Keep `said` for the stream; beyond the bound, a report replaces the newest one kept."""
        if isinstance(said, ProgressReport):
            if self.reports >= _WAITING and isinstance(self.said[-1], ProgressReport):
                self.said[-1] = said
                return
            self.reports += 1
            self.said.append(said)
        elif isinstance(said, LogMessage):
            if self.logs >= _WAITING:
                self.dropped += 1
                return
            self.logs += 1
            self.said.append(said)
        else:
            self.said.append(said)
        self.stirred.set()

    def take(self) -> Heard:
        """Everything said since the last take."""
        said = self.said
        if self.dropped:
            text = f"{self.dropped} more log messages of this call were dropped on its shard"
            said.append(LogMessage("warning", text, "actors.cluster"))
        self.said, self.logs, self.reports, self.dropped = [], 0, 0, 0
        return Heard(tuple(said))

    async def ask(self, question: Callable[[int], Form | Sampling]) -> Any:
        """Send the question `question` makes of its number; the front's answer, when it comes."""
        if self.ended is not None:
            raise CannotAskError(self.ended)
        number = next(self.numbers)
        answer = self.questions[number] = asyncio.get_running_loop().create_future()
        self.hear(question(number))
        try:
            reply = await asyncio.wait_for(answer, ASK_TIMEOUT + _ASK_GRACE)
        except TimeoutError:
            msg = f"cannot ask: the call's front did not answer within {ASK_TIMEOUT:g} s"
            raise CannotAskError(msg) from None
        finally:
            self.questions.pop(number, None)
        if isinstance(reply, Refused):
            raise CannotAskError(reply.reason)
        return reply

    def answer(self, number: int, reply: Any) -> bool:
        """Deliver the front's `reply` to question `number`; False if it waits no more."""
        waiting = self.questions.get(number)
        if waiting is None or waiting.done():
            return False
        waiting.set_result(reply)
        return True

    def end(self, why: str) -> None:
        """No answer will come: each question waiting, and each later one, raises CannotAskError."""
        self.ended = why
        for waiting in self.questions.values():
            if not waiting.done():
                waiting.set_exception(CannotAskError(why))


@final
class _ShardAsker:
    """A call's `Asker` on its shard: each question crosses to the front, which asks its client."""

    def __init__(self, conversation: _Conversation) -> None:
        self._conversation = conversation

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """Ask the user to fill in a form, through the call's front."""
        answer: Answer = await self._conversation.ask(lambda number: Form(number, message, schema))
        return answer

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
    ) -> str:
        """Ask the client's model, through the call's front; its text."""
        text: str = await self._conversation.ask(
            lambda number: Sampling(number, messages, max_tokens, system_prompt, temperature)
        )
        return text


@attrs.define(eq=False)
class _Feed:
    """A `Watcher` of a shard's runtime for one front's change stream (`ShardHost.changes`)."""

    stirred: asyncio.Event = attrs.field(factory=asyncio.Event)
    changes: list[Change] = attrs.field(factory=list)

    def tell(self, change: Change) -> None:
        """Keep `change` for the stream."""
        self.changes.append(change)
        self.stirred.set()

    def key_changed(self, route: Route) -> None:
        """The runtime's word: the state of `route`'s key may have changed."""
        self.tell(route)

    def session_ended(self, session_id: str) -> None:
        """The runtime's word: the session was ended."""
        self.tell(SessionEnded(session_id))


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
        self._conversations: dict[str, _Conversation] = {}  # calls with channels, by call id
        self._feeds: set[_Feed] = set()  # the change streams of the fronts that watch

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
            return await _run(runtime, call)

    async def converse(
        self, call_id: str, call: WireCall, channels: Channels
    ) -> AsyncIterator[Heard | dict[str, Any] | Moved | Failed]:
        """`call` with its client channels, as a Ray streaming generator (see "Client channels").

        Yields `Heard` as the tool says things, then the MCP wire result (or
        only `Moved`). The front answers the questions with `answer`, naming
        `call_id`. Cancelled (the front's caller went away), the call's
        questions raise CannotAskError and the tool runs on without its front.
        """
        async with self._owning(call.context.session_id) as runtime:
            if runtime is None:
                yield self._moved()
                return
            conversation = self._conversations[call_id] = _Conversation()
            running = asyncio.ensure_future(
                _run(runtime, call, **_listeners(conversation, channels))
            )
            running.add_done_callback(lambda _: conversation.stirred.set())
            try:
                while True:
                    if conversation.said:
                        yield conversation.take()
                    elif running.done():
                        break
                    else:
                        conversation.stirred.clear()  # nothing waits unheard: checked just above
                        await conversation.stirred.wait()
                yield _outcome(running)
            finally:
                conversation.end("cannot ask: the call's client went away (the call was cancelled)")
                running.cancel()  # the runtime's rules: withdrawn if queued, else it runs on
                del self._conversations[call_id]

    async def answer(self, call_id: str, number: int, reply: Answer | str | Refused) -> bool:
        """The front's `reply` to question `number` of call `call_id`; False if none waits."""
        conversation = self._conversations.get(call_id)
        return conversation is not None and conversation.answer(number, reply)

    async def conversations(self) -> dict[str, int]:
        """The calls with channels here, with their questions waiting (tests check none stays)."""
        return {call: len(each.questions) for call, each in self._conversations.items()}

    async def watching(self) -> int:
        """How many change streams are open here (tests check none outlives its watchers)."""
        return len(self._feeds)

    async def changes(self) -> AsyncIterator[tuple[Change, ...]]:
        """This shard's changes, as a Ray streaming generator, until the front cancels it.

        First the committed membership (the stream is watching from then on),
        then every change of a key's state and every ended session, in
        batches, and every membership committed later.
        """
        runtime = await self._opened()
        feed = _Feed()
        unwatch = runtime.watch(feed)
        self._feeds.add(feed)
        try:
            assert self._committed is not None
            yield (self._committed,)
            while True:
                await feed.stirred.wait()
                feed.stirred.clear()
                changes, feed.changes = feed.changes, []
                yield tuple(changes)
        finally:
            self._feeds.discard(feed)
            unwatch()

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
                for feed in self._feeds:  # the fronts that watch follow a shard that joins
                    feed.tell(membership)
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


async def _run(
    runtime: AsyncioRuntime,
    call: WireCall,
    progress: Callable[[ProgressReport], None] | None = None,
    log: Callable[[LogMessage], None] | None = None,
    ask: Asker | None = None,
) -> dict[str, Any]:
    """Run `call` on `runtime` with the channels given: its MCP wire result, refusals included."""
    tool = runtime.registry.operation(call.tool)  # a tool, or a resource's read...
    prepared = PreparedCall(
        tool, call.context, call.arguments, call.route, call.session_defaulted, call.meta
    )
    try:
        result = await runtime.run(prepared, progress=progress, log=log, ask=ask)
    except RuntimeCallError as error:
        result = error_result(error, tool.service)
    return result.to_wire()


def _outcome(running: asyncio.Future[dict[str, Any]]) -> dict[str, Any] | Failed:
    """A finished call's wire result; `Failed` if the shard's own code raised (a bug)."""
    try:
        return running.result()
    except Exception as error:  # as `call_batch` says so: for this call, in words
        return Failed(f"{type(error).__name__}: {error}")


def _listeners(conversation: _Conversation, channels: Channels) -> dict[str, Any]:
    """The runtime's listeners and asker for the channels the front has, all to `conversation`."""
    return {
        "progress": conversation.hear if channels.progress else None,
        "log": conversation.hear if channels.log else None,
        "ask": _ShardAsker(conversation) if channels.ask else None,
    }


def _metrics() -> PrometheusMetrics:
    from ..telemetry import PrometheusMetrics  # lazily: only with the metrics extra

    return PrometheusMetrics()


def shard_class() -> Any:
    """`ShardHost` as a Ray actor class, restarted by Ray whenever its process dies.

    Calls are not retried by Ray (``max_task_retries=0``): whether one that was
    running when the process died had written is not known, so its caller is told.
    """
    return ray.remote(max_restarts=-1, max_task_retries=0)(ShardHost)
