"""TracingObserver: one span per call, under the client's trace, whatever the client sends.

Records are fed straight to the observer (and, where the runtime matters,
through a real one); spans are read back from the SDK's in-memory exporter.
No test changes the process's global tracer provider; the one test that
swaps the global propagator puts it back.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry import propagate
from opentelemetry.propagators.textmap import CarrierT, Getter, TextMapPropagator
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    SpanKind,
    StatusCode,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from actors import open_runtime
from actors.lowlevel import CallRecord
from actors.modules import planning
from actors.telemetry._tracing import TracingObserver, tracing_configured
from protocol import ToolContext

if TYPE_CHECKING:
    from opentelemetry.context import Context

TOOL = "planning__create_goal"
CALL = f"tools/call {TOOL}"
TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
CLIENT_SPAN_ID = 0xB7AD6B7169203331
TRACEPARENT = f"00-{TRACE_ID:032x}-{CLIENT_SPAN_ID:016x}-01"
TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


def record(
    outcome: str = "ok",
    *,
    meta: Any = None,
    started: float | None = 101.25,
    session: str = "s1",
) -> CallRecord:
    """A call accepted at 101.0 s, started at 101.25 s (unless None), answered at 101.75 s."""
    return CallRecord(
        TOOL,
        "planning",
        ToolContext(session),
        outcome,
        accepted=101.0,
        started=started,
        finished=101.75,
        meta=meta,
    )


@pytest.fixture(name="exporter")
def exporter_fixture() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(name="observer")
def observer_fixture(exporter: InMemorySpanExporter) -> TracingObserver:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return TracingObserver(tracer_provider=provider)


def spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    found = {span.name: span for span in exporter.get_finished_spans()}
    assert len(found) == len(exporter.get_finished_spans()), "one span per name per call"
    return found


def the_call(exporter: InMemorySpanExporter) -> ReadableSpan:
    (call,) = [span for span in exporter.get_finished_spans() if span.kind is SpanKind.SERVER]
    return call


def bounds(span: ReadableSpan) -> tuple[int, int]:
    assert span.start_time is not None
    assert span.end_time is not None
    return span.start_time, span.end_time


def expected_attributes(outcome: str = "ok", session: str = "s1") -> dict[str, str]:
    error = {} if outcome == "ok" else {"error.type": outcome}
    return {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": TOOL,
        "mcp.session.id": session,
        "actors.module": "planning",
        "actors.outcome": outcome,
        **error,
    }


class TestTheSpan:
    def test_named_and_described_by_the_mcp_server_conventions(
        self, observer: TracingObserver, exporter: InMemorySpanExporter
    ) -> None:
        observer.call_finished(record())
        call = spans(exporter)[CALL]
        assert call.kind is SpanKind.SERVER
        assert dict(call.attributes or {}) == expected_attributes()
        assert call.status.status_code is StatusCode.UNSET
        assert call.instrumentation_scope is not None
        assert call.instrumentation_scope.name == "actors"

    def test_queue_and_run_are_children_that_split_the_call(
        self, observer: TracingObserver, exporter: InMemorySpanExporter
    ) -> None:
        done = record()
        observer.call_finished(done)
        found = spans(exporter)
        assert set(found) == {CALL, "queue", "run"}
        call, queue, run = found[CALL], found["queue"], found["run"]
        for phase in (queue, run):
            assert phase.parent is not None
            assert phase.parent.span_id == call.context.span_id
            assert phase.context.trace_id == call.context.trace_id
            assert phase.kind is SpanKind.INTERNAL
        (call_start, call_end), (queue_start, queue_end) = bounds(call), bounds(queue)
        run_start, run_end = bounds(run)
        assert call_start == queue_start < queue_end == run_start < run_end == call_end
        assert call_end - call_start == round((done.finished - done.accepted) * 1e9)
        assert queue_end - queue_start == round(done.queued * 1e9)
        assert done.ran is not None
        assert run_end - run_start == round(done.ran * 1e9)

    def test_a_call_that_never_ran_is_all_queue(
        self, observer: TracingObserver, exporter: InMemorySpanExporter
    ) -> None:
        observer.call_finished(record("shutting_down", started=None))
        found = spans(exporter)
        assert set(found) == {CALL, "queue"}
        assert bounds(found["queue"]) == bounds(found[CALL])

    @pytest.mark.parametrize("outcome", ["tool_error", "timeout", "crashed", "capacity"])
    def test_a_call_that_failed_has_an_error_type_and_status(
        self, observer: TracingObserver, exporter: InMemorySpanExporter, outcome: str
    ) -> None:
        observer.call_finished(record(outcome))
        call = the_call(exporter)
        assert dict(call.attributes or {}) == expected_attributes(outcome)
        assert call.status.status_code is StatusCode.ERROR
        assert call.status.description == outcome

    def test_times_are_on_the_wall_clock_of_the_report(
        self, observer: TracingObserver, exporter: InMemorySpanExporter, monkeypatch: Any
    ) -> None:
        """The wall clock is stepped an hour after the observer was made: spans follow it."""
        stepped = time.time_ns() + 3600 * 10**9
        monkeypatch.setattr(time, "time_ns", lambda: stepped)
        now = time.perf_counter()
        # The report comes at `now` exactly, however long this line takes to run.
        monkeypatch.setattr(time, "perf_counter_ns", lambda: round(now * 1e9))
        observer.call_finished(
            CallRecord(TOOL, "planning", ToolContext("s1"), "ok", now - 0.5, now - 0.25, now, None)
        )
        _, end = bounds(the_call(exporter))
        assert end == stepped  # the step is an hour: the offset is read at the report

    def test_a_long_session_id_is_cut_short(
        self, observer: TracingObserver, exporter: InMemorySpanExporter
    ) -> None:
        observer.call_finished(record(session="s" * 100_000))
        assert (the_call(exporter).attributes or {})["mcp.session.id"] == "s" * 256


class TestTheParent:
    def test_the_clients_trace_context_parents_the_call(
        self, observer: TracingObserver, exporter: InMemorySpanExporter
    ) -> None:
        meta = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE, "sessionId": "s1"}
        observer.call_finished(record(meta=meta))
        call = the_call(exporter)
        assert call.context.trace_id == TRACE_ID
        assert call.parent is not None
        assert call.parent.span_id == CLIENT_SPAN_ID
        assert call.parent.is_remote
        assert call.context.trace_state.to_header() == TRACESTATE

    @pytest.mark.parametrize(
        "tracestate",
        [
            "a=" * 5000,
            "rojo=1\n2026-01-01 CRITICAL forged log line",
            "rojo=1,UPPER=2",
            "rojo=1,=2",
            ",".join(f"k{number}=v" for number in range(33)),
            42,
        ],
    )
    def test_a_bad_tracestate_is_dropped_silently_and_the_parent_kept(
        self,
        observer: TracingObserver,
        exporter: InMemorySpanExporter,
        caplog: pytest.LogCaptureFixture,
        tracestate: Any,
    ) -> None:
        """Nothing the client wrote reaches the log (the SDK logs a malformed member)."""
        with caplog.at_level("DEBUG"):
            observer.call_finished(
                record(meta={"traceparent": TRACEPARENT, "tracestate": tracestate})
            )
        call = the_call(exporter)
        assert call.context.trace_id == TRACE_ID
        assert len(call.context.trace_state) == 0
        assert caplog.records == []

    def test_not_the_span_current_in_the_reporting_task(
        self, observer: TracingObserver, exporter: InMemorySpanExporter
    ) -> None:
        """An actor's task carries the context of whoever started it: not this call's parent."""
        other = TracerProvider().get_tracer("another request")
        with other.start_as_current_span("another request's span"):
            observer.call_finished(record())
            observer.call_finished(record(meta={"traceparent": "00-garbage"}))
        for call in exporter.get_finished_spans():
            if call.kind is SpanKind.SERVER:
                assert call.parent is None

    async def test_not_the_request_that_started_the_actor(
        self, observer: TracingObserver, exporter: InMemorySpanExporter
    ) -> None:
        """Through a real runtime: a later call is not filed under the first caller's trace."""
        first = TracerProvider().get_tracer("first caller")
        async with open_runtime([planning], observer=observer) as runtime:
            with first.start_as_current_span("first caller's request") as current:
                await runtime.call_tool(TOOL, {"goal": "g"}, meta={"sessionId": "s1"})
            await runtime.call_tool("planning__list_goals", {}, meta={"sessionId": "s1"})
        calls = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
        assert len(calls) == 2
        for call in calls:
            assert call.parent is None
            assert call.context.trace_id != current.get_span_context().trace_id


class _Recording(TextMapPropagator):
    """W3C Trace Context that remembers every carrier it was given."""

    def __init__(self) -> None:
        self.carriers: list[dict[str, Any]] = []
        self._w3c = TraceContextTextMapPropagator()

    def extract(
        self, carrier: CarrierT, context: Context | None = None, getter: Getter[Any] | None = None
    ) -> Context:
        assert isinstance(carrier, Mapping)
        self.carriers.append(dict(carrier))
        return self._w3c.extract(carrier, context)

    def inject(self, carrier: CarrierT, context: Context | None = None, setter: Any = None) -> None:
        raise AssertionError("the observer never injects")

    @property
    def fields(self) -> set[str]:
        return self._w3c.fields


@pytest.fixture(name="propagator")
def propagator_fixture() -> Iterator[_Recording]:
    before = propagate.get_global_textmap()
    recording = _Recording()
    propagate.set_global_textmap(recording)
    try:
        yield recording
    finally:
        propagate.set_global_textmap(before)


def test_the_global_propagator_sees_only_the_trace_fields(
    observer: TracingObserver, exporter: InMemorySpanExporter, propagator: _Recording
) -> None:
    """Baggage and everything else in ``_meta`` stay out of the trace context."""
    meta = {
        "traceparent": TRACEPARENT,
        "tracestate": TRACESTATE,
        "baggage": "tenant=someone-else",
        "sessionId": "s1",
    }
    observer.call_finished(record(meta=meta))
    assert propagator.carriers == [{"traceparent": TRACEPARENT, "tracestate": TRACESTATE}]
    assert the_call(exporter).context.trace_id == TRACE_ID


class _Treacherous(Mapping[str, Any]):
    """A mapping that fails on every lookup."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        return 1


HOSTILE: list[Any] = [
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # a traceparent, not a mapping
    ["traceparent", TRACEPARENT],
    42,
    _Treacherous(),
    {},
    {"traceparent": "00-zz-yy-01"},
    {"traceparent": ""},
    {"traceparent": TRACEPARENT + "\r\nx-injected: 1"},
    {"traceparent": TRACEPARENT.replace("00-", "ff-", 1)},  # the version W3C forbids
    {"traceparent": f"00-{0:032x}-{CLIENT_SPAN_ID:016x}-01"},  # an all-zero trace id
    {"traceparent": f"00-{TRACE_ID:032x}-{0:016x}-01"},  # an all-zero parent id
    {"traceparent": TRACEPARENT.upper()},
    {"TRACEPARENT": TRACEPARENT},  # `_meta` keys are exact, unlike HTTP header names
    {"traceparent": TRACEPARENT + " " * 10_000},
    {"traceparent": "00-" + "a" * 1_000_000},
    {"traceparent": 12},
    {"traceparent": [TRACEPARENT]},
    {"traceparent": {"value": TRACEPARENT}},
    {"traceparent": TRACEPARENT.encode()},
    {"traceparent": None, "tracestate": TRACESTATE},
    {"tracestate": "x" * 100_000},
    {"tracestate": TRACESTATE},
    {"traceparent": "\u202e" * 55},
]


@pytest.mark.parametrize("meta", HOSTILE)
def test_a_hostile_trace_context_starts_a_new_trace_and_leaves_no_trace(
    observer: TracingObserver,
    exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
    meta: Any,
) -> None:
    """No exception, no log line, a root span, and only the observer's own strings on it."""
    with caplog.at_level("DEBUG"):
        observer.call_finished(record(meta=meta))
    assert caplog.records == []
    found = spans(exporter)
    call = found[CALL]
    assert call.parent is None
    assert call.context.trace_id != TRACE_ID
    assert len(call.context.trace_state) == 0
    assert dict(call.attributes or {}) == expected_attributes()
    for span in found.values():
        assert not span.events
        assert not span.links


class TestConfigured:
    def test_an_sdk_provider_records(self) -> None:
        assert tracing_configured(TracerProvider())

    @pytest.mark.parametrize("provider", [NoOpTracerProvider(), ProxyTracerProvider()])
    def test_the_apis_defaults_do_not(self, provider: Any) -> None:
        assert not tracing_configured(provider)

    def test_an_sdk_switched_off_does_not(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
        assert not tracing_configured(TracerProvider())

    def test_the_global_provider_by_default(self) -> None:
        """In a fresh process: not configured, then configured once an SDK is set."""
        code = (
            "from opentelemetry import trace\n"
            "from opentelemetry.sdk.trace import TracerProvider\n"
            "from actors.telemetry._tracing import tracing_configured\n"
            "print(tracing_configured())\n"
            "trace.set_tracer_provider(TracerProvider())\n"
            "print(tracing_configured())\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
        assert out.stdout.split() == [b"False", b"True"]
