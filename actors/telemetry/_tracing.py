"""`TracingObserver`: one OpenTelemetry span per tool call, with its queue and run phases.

A span ``tools/call <tool>`` (kind SERVER) covers a call from its acceptance
into its actor's mailbox to its reply; its children ``queue`` and ``run``
split that time (``run`` is missing for a call that never ran). Attribute
names follow OpenTelemetry's semantic conventions for MCP: ``mcp.method.name``,
``gen_ai.tool.name``, ``mcp.session.id``, and ``error.type`` (the outcome) with
an ERROR status for a call that did not end ``ok``.

The parent is the trace context the client sent in the request's ``_meta``
(``traceparent``, ``tracestate``, W3C Trace Context), read with the globally
configured propagator. What a client sends there is untrusted: anything but
short strings is ignored, a malformed context starts a new trace, and no
client string other than the validated context reaches the span.

The runtime reports a call once it is answered, with `time.perf_counter`
stamps; they are turned into wall-clock times with one offset taken when the
observer is made (a clock adjusted later shifts the spans by as much, not
their durations).

Only install it when the process has an SDK (`tracing_configured`): with the
API's default provider every span would be a no-op that still costs the
work of building it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, final

from opentelemetry import propagate, trace
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    SpanKind,
    Status,
    StatusCode,
)

from .._observe import OK, Observer

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from .._observe import CallRecord

__all__ = ["TRACE_KEYS", "TracingObserver", "tracing_configured"]

TRACE_KEYS: Final = ("traceparent", "tracestate")
"""The ``_meta`` keys a trace context is read from."""
_MAX_TRACE_FIELD: Final = 512  # a traceparent is 55 characters; tracestate at most 512
_MAX_SESSION_ATTRIBUTE: Final = 256


def tracing_configured() -> bool:
    """Whether a real TracerProvider is set globally (not the API's proxy or no-op one)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)


def _carrier(meta: object) -> dict[str, str]:
    """The trace fields of `meta` that are short strings; nothing else of it."""
    if not isinstance(meta, Mapping):
        return {}
    return {
        key: value
        for key in TRACE_KEYS
        if isinstance(value := meta.get(key), str) and len(value) <= _MAX_TRACE_FIELD
    }


@final
class TracingObserver(Observer):
    """Makes a span of every call the runtime answers (see the module docstring)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer("actors", tracer_provider=tracer_provider)
        # perf_counter seconds -> epoch nanoseconds, fixed once.
        self._offset_ns = time.time_ns() - time.perf_counter_ns()

    def _ns(self, stamp: float) -> int:
        return self._offset_ns + int(stamp * 1e9)

    def call_finished(self, record: CallRecord) -> None:
        """Record the call's span, with its queue and run phases."""
        parent = self._parent(record.meta)
        session = record.context.session_id[:_MAX_SESSION_ATTRIBUTE]
        span = self._tracer.start_span(
            f"tools/call {record.tool}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": record.tool,
                "mcp.session.id": session,
                "actors.module": record.module,
                "actors.outcome": record.outcome,
            },
            start_time=self._ns(record.accepted),
        )
        if record.outcome != OK:
            span.set_attribute("error.type", record.outcome)
            span.set_status(Status(StatusCode.ERROR, record.outcome))
        inside = trace.set_span_in_context(span)
        queue_end = record.finished if record.started is None else record.started
        self._phase("queue", inside, record.accepted, queue_end)
        if record.started is not None:
            self._phase("run", inside, record.started, record.finished)
        span.end(end_time=self._ns(record.finished))

    def _phase(self, name: str, parent: Context, start: float, end: float) -> None:
        phase = self._tracer.start_span(name, context=parent, start_time=self._ns(start))
        phase.end(end_time=self._ns(end))

    @staticmethod
    def _parent(meta: object) -> Context | None:
        carrier = _carrier(meta)
        if not carrier:
            return None
        try:
            return propagate.extract(carrier)
        except Exception:  # a propagator that chokes on a hostile value: start a new trace
            return None
