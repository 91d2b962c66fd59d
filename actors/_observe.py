"""The observer seam: what the runtime reports about its actors, calls and store.

    class Counting(Observer):
        def call_finished(self, record: CallRecord) -> None:
            calls[record.tool, record.outcome] += 1

    async with open_runtime(modules, observer=Counting()) as runtime: ...

An `Observer` subclass overrides the methods it cares about; the others do
nothing. The runtime calls them synchronously, in its own tasks, as things
happen, so an observer must be quick and must not block: count, record, or
hand the event to a task of its own. It should not raise; if it does, the
exception is logged and dropped (see `Observers`), and the runtime goes on.

Nothing here is called when no observer is given: an unobserved runtime
takes no timestamps and builds no records (the ``observer`` benchmark
scenario measures what an observer costs).

Times are `time.perf_counter` readings, in seconds. Metrics, traces and
structured logs are observers (``actors.telemetry``); none of them lives in
the core, which needs nothing beyond trio, attrs and cattrs.
"""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from protocol import (
    ConfinedError,
    HandleError,
    HandleRequiredError,
    NoSessionError,
    ProtocolError,
    TenantError,
)

from ._errors import (
    ActorCrashedError,
    ArgumentsError,
    CallTimeoutError,
    CapacityError,
    HandlerError,
    RuntimeCallError,
    RuntimeClosedError,
    SessionEndingError,
    StateUnreadableError,
    UnknownPromptError,
    UnknownResourceError,
    UnknownToolError,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from protocol import ActorKey, CallError, ToolContext

__all__ = [
    "CallRecord",
    "Observer",
    "Observers",
    "StopReason",
    "outcome_of",
]

logger = logging.getLogger("actors.observe")


@final
class StopReason(enum.Enum):
    """Why an actor stopped."""

    EXPIRED = "expired"
    """Idle for its TTL."""
    EVICTED = "evicted"
    """Idle, and its slot was needed under ``max_actors``."""
    CRASHED = "crashed"
    """Its state factory, a hook or the runtime failed."""
    SESSION_ENDED = "session_ended"
    """Its session was ended (``end_session``)."""
    HANDED_OVER = "handed_over"
    """Its session moved to another runtime (``hand_over``); its stored state stays."""
    SHUTDOWN = "shutdown"
    """The runtime shut down."""


# Outcome labels, most specific class first. A bounded set: safe as a metric label.
_OUTCOMES: Final[tuple[tuple[type[Exception], str], ...]] = (
    (TenantError, "outside_tenant"),
    (ConfinedError, "outside_connection"),
    (NoSessionError, "no_session"),
    (HandleRequiredError, "no_conversation"),
    (HandleError, "bad_handle"),
    (ProtocolError, "bad_context"),
    (UnknownToolError, "unknown_tool"),
    (UnknownResourceError, "unknown_resource"),
    (UnknownPromptError, "unknown_prompt"),
    (HandlerError, "handler_error"),
    (ArgumentsError, "bad_arguments"),
    (CallTimeoutError, "timeout"),
    (StateUnreadableError, "state_unreadable"),
    (ActorCrashedError, "crashed"),
    (CapacityError, "capacity"),
    (RuntimeClosedError, "shutting_down"),
    (SessionEndingError, "session_ending"),
    (RuntimeCallError, "refused"),
)
OK: Final = "ok"
"""The outcome of a call whose result is not an error."""
TOOL_ERROR: Final = "tool_error"
"""The outcome of a call whose result is an ``isError`` result (the tool said no)."""


def outcome_of(error: CallError) -> str:
    """The outcome label of a call that failed with `error`: ``"timeout"``, ``"bad_arguments"``…"""
    return next(label for kind, label in _OUTCOMES if isinstance(error, kind))


@final
@attrs.frozen
class CallRecord:
    """One call the runtime accepted, once its reply went out."""

    tool: str
    """The tool's full name (``planning__create_goal``); from the registry, so a bounded set."""
    module: str
    """The tool's module."""
    context: ToolContext
    """Whom the call was for. Unbounded: never a metric label."""
    outcome: str
    """``"ok"``, ``"tool_error"``, or the label `outcome_of` gives the error replied."""
    accepted: float
    """When the call entered its actor's mailbox."""
    started: float | None
    """When its actor began to run it; ``None`` if it never ran (shutdown, crash, capacity)."""
    finished: float
    """When its reply was given."""
    meta: Mapping[str, Any] | None
    """The call's ``_meta`` as the caller sent it (a trace context may ride in it)."""

    @property
    def queued(self) -> float:
        """Seconds the call waited in the mailbox (until its reply, if it never ran)."""
        return (self.finished if self.started is None else self.started) - self.accepted

    @property
    def ran(self) -> float | None:
        """Seconds its handler (and the write after it) took; ``None`` if it never ran."""
        return None if self.started is None else self.finished - self.started


class Observer:
    """What the runtime reports; override the methods you need, the rest do nothing."""

    def actor_started(self, key: ActorKey) -> None:
        """An actor now holds `key`'s state (made, or loaded from the store)."""

    def actor_stopped(self, key: ActorKey, reason: StopReason) -> None:
        """The actor of `key` stopped, and its state was released."""

    def call_finished(self, record: CallRecord) -> None:
        """A call accepted into a mailbox got its reply."""

    def call_refused(self, tool: str | None, outcome: str) -> None:
        """A call was refused before any actor took it.

        `tool` is the full name when the name resolved (``None`` for an
        unknown one: a client chooses it, so it is never a label); `outcome`
        is the label of the error (`outcome_of`).
        """

    def state_loaded(self, key: ActorKey, seconds: float, *, found: bool) -> None:
        """A durable state was read from the store (`found`: something was stored)."""

    def state_saved(self, key: ActorKey, seconds: float, outcome: str) -> None:
        """A durable state write ended: ``"written"``, ``"unchanged"``, ``"conflict"``
        (another writer changed the key) or ``"failed"``."""


@final
class Observers(Observer):
    """Several observers as one; each is guarded, so one that raises does not stop the rest.

    The runtime wraps the observer it is given in this, so an observer's bug
    is logged (once per method, then at DEBUG) and never reaches a call.
    """

    def __init__(self, observers: Iterable[Observer]) -> None:
        self._observers = tuple(observers)
        self._failed: set[str] = set()
        # The hot path, once per call: only the observers that override it.
        self._call_finished = tuple(
            (observer, observer.call_finished)
            for observer in self._observers
            if type(observer).call_finished is not Observer.call_finished
        )

    def _each(self, method: str, *args: Any, **kwargs: Any) -> None:
        for observer in self._observers:
            try:
                getattr(observer, method)(*args, **kwargs)
            except Exception:
                self._report_failure(observer, method)

    def _report_failure(self, observer: object, method: str) -> None:
        """Log an observer's exception: in full the first time, at DEBUG after that."""
        level = logging.DEBUG if method in self._failed else logging.ERROR
        self._failed.add(method)
        logger.log(level, "observer %r failed in %s", observer, method, exc_info=True)

    def actor_started(self, key: ActorKey) -> None:
        """Tell every observer."""
        self._each("actor_started", key)

    def actor_stopped(self, key: ActorKey, reason: StopReason) -> None:
        """Tell every observer."""
        self._each("actor_stopped", key, reason)

    def call_finished(self, record: CallRecord) -> None:
        """Tell every observer that listens for calls."""
        for observer, deliver in self._call_finished:
            try:
                deliver(record)
            except Exception:
                self._report_failure(observer, "call_finished")

    def call_refused(self, tool: str | None, outcome: str) -> None:
        """Tell every observer."""
        self._each("call_refused", tool, outcome)

    def state_loaded(self, key: ActorKey, seconds: float, *, found: bool) -> None:
        """Tell every observer."""
        self._each("state_loaded", key, seconds, found=found)

    def state_saved(self, key: ActorKey, seconds: float, outcome: str) -> None:
        """Tell every observer."""
        self._each("state_saved", key, seconds, outcome)
