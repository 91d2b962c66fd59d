"""`TracingObserver`: one OpenTelemetry span per tool call, with its queue and run phases.

A span ``tools/call <tool>`` (kind SERVER) covers a call from its acceptance
into its actor's mailbox to its reply. Its children ``queue`` and ``run``
split that time (``run`` is missing for a call that never ran): child spans
rather than span events, because trace views draw a child as a bar with its
duration, where an event is only a mark in time. Names and attributes follow
OpenTelemetry's semantic conventions for MCP server spans: ``mcp.method.name``,
``gen_ai.operation.name``, ``gen_ai.tool.name``, ``mcp.session.id``, and, for
a call that did not end ``ok``, ``error.type`` (the outcome label, so
``tool_error`` for an ``isError`` result) with an ERROR status.

The parent is the trace context the client sent in the request's ``_meta``
(``traceparent`` and ``tracestate``, W3C Trace Context, unprefixed, as MCP
clients put them there), read with the globally configured propagator. What a
client sends there is untrusted: only those two keys are read, and only as
short strings (never ``baggage``, which a span processor could copy into
attributes); a malformed context starts a new trace; no client string other
than the validated context reaches the span. A call without a usable context
is a root span, never a child of whatever span happened to be current in the
actor's task: that task inherits the context of the call that started it, so
its current span belongs to another request.

The runtime reports a call when its reply is given, with `time.perf_counter`
stamps. They become wall-clock times through an offset read at that moment,
so durations are exact and a long-lived server does not drift from the wall
clock that other services stamp their spans with.

Only install it when the process has an SDK (`tracing_configured`): without
one every span is a no-op that still costs the work of building it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, final

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import NoOpTracer, ProxyTracer, SpanKind, Status, StatusCode

from .._observe import OK, Observer

if TYPE_CHECKING:
    from opentelemetry.util.types import Attributes

    from .._observe import CallRecord

__all__ = ["TRACE_KEYS", "TracingObserver", "tracing_configured"]

TRACE_KEYS: Final = ("traceparent", "tracestate")
"""The ``_meta`` keys a trace context is read from."""
_SCOPE: Final = "actors"  # the instrumentation scope the spans are reported under
_METHOD: Final = "tools/call"
# A traceparent is 55 characters; W3C asks that a tracestate of up to 512 be kept.
_MAX_TRACE_FIELD: Final = 512
_MAX_SESSION_ATTRIBUTE: Final = 256  # the default context policy's id limit
# A tracestate list member, by the W3C grammar: key=value, printable ASCII, no "," or "=" in
# the value. The SDK logs a member that does not match, client text and all, so one that
# does not is dropped here first: a client cannot write into the server's log.
_TRACESTATE_MEMBER: Final = re.compile(
    r"(?:[a-z][_0-9a-z*/-]{0,255}|[a-z0-9][_0-9a-z*/-]{0,240}@[a-z][_0-9a-z*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
_MAX_TRACESTATE_MEMBERS: Final = 32


def tracing_configured(tracer_provider: trace.TracerProvider | None = None) -> bool:
    """Whether spans made with `tracer_provider` (default: the global one) are recorded.

    False for the API's defaults: the proxy provider it hands out before an
    SDK is set, which gives `ProxyTracer`s, and the no-op provider; and for an
    SDK provider switched off with ``OTEL_SDK_DISABLED=true``, which gives
    `NoOpTracer`s. The tracer a provider hands out is what tells them apart.
    """
    provider = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
    return not isinstance(provider.get_tracer(_SCOPE), NoOpTracer | ProxyTracer)


@final
class TracingObserver(Observer):
    """Makes a span of every call the runtime answers (see the module docstring)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)

    def call_finished(self, record: CallRecord) -> None:
        """Record the call's span, with its queue and run phases."""
        # The record is reported as its reply is given: read both clocks now.
        offset = time.time_ns() - time.perf_counter_ns()

        def ns(stamp: float) -> int:
            return offset + round(stamp * 1e9)

        span = self._tracer.start_span(
            f"{_METHOD} {record.tool}",
            context=_parent(record.meta),
            kind=SpanKind.SERVER,
            attributes=_attributes(record),
            start_time=ns(record.accepted),
        )
        if record.outcome != OK:
            span.set_status(Status(StatusCode.ERROR, record.outcome))
        inside = trace.set_span_in_context(span, Context())
        queued = self._tracer.start_span("queue", context=inside, start_time=ns(record.accepted))
        if record.started is None:
            queued.end(end_time=ns(record.finished))
        else:
            queued.end(end_time=ns(record.started))
            ran = self._tracer.start_span("run", context=inside, start_time=ns(record.started))
            ran.end(end_time=ns(record.finished))
        span.end(end_time=ns(record.finished))


def _attributes(record: CallRecord) -> Attributes:
    """The call span's attributes: the tool name is the registry's, the session id is bounded."""
    attributes: dict[str, str] = {
        "mcp.method.name": _METHOD,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": record.tool,
        "mcp.session.id": record.context.session_id[:_MAX_SESSION_ATTRIBUTE],
        "actors.module": record.module,
        "actors.outcome": record.outcome,
    }
    if record.outcome != OK:
        attributes["error.type"] = record.outcome
    return attributes


def _parent(meta: object) -> Context:
    """The client's trace context from `meta`, or an empty context (a new trace)."""
    try:
        carrier = _carrier(meta)
        # An explicit empty context: `extract` must not fall back on the current one.
        return propagate.extract(carrier, context=Context()) if carrier else Context()
    except Exception:  # a hostile mapping or a propagator that chokes: start a new trace
        return Context()


def _carrier(meta: object) -> dict[str, str]:
    """The trace fields of `meta` that are short strings (a tracestate, a well-formed one)."""
    if not isinstance(meta, Mapping):
        return {}
    carrier = {
        key: value
        for key in TRACE_KEYS
        if isinstance(value := meta.get(key), str) and len(value) <= _MAX_TRACE_FIELD
    }
    if not _well_formed_tracestate(carrier.get("tracestate", "")):
        del carrier["tracestate"]
    return carrier


def _well_formed_tracestate(value: str) -> bool:
    """Whether `value` is a tracestate the SDK takes in without a warning (empty is)."""
    members = [member for part in value.split(",") if (member := part.strip(" \t"))]
    return len(members) <= _MAX_TRACESTATE_MEMBERS and all(
        _TRACESTATE_MEMBER.fullmatch(member) for member in members
    )
