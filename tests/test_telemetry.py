"""actors.telemetry: Prometheus metrics and OpenTelemetry spans from the observer seam.

Both observers are fed a known sequence of events, directly and through a
real runtime, and their output is read back with the libraries' own parsers
and exporters.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.parser import text_string_to_metric_families

from actors import CallRecord, StopReason, open_runtime
from actors.modules import planning
from actors.telemetry import PrometheusMetrics, TracingObserver
from protocol import ActorKey, ToolContext

KEY = ActorKey("planning", ToolContext("s1"))
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


def record(
    outcome: str = "ok",
    *,
    started: float | None = 1.25,
    meta: Any = None,
    session: str = "s1",
) -> CallRecord:
    return CallRecord(
        "planning__create_goal",
        "planning",
        ToolContext(session),
        outcome,
        accepted=1.0,
        started=started,
        finished=1.75,
        meta=meta,
    )


def samples(metrics: PrometheusMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    body, _ = metrics.exposition()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def value(metrics: PrometheusMetrics, name: str, **labels: str) -> float:
    return samples(metrics)[name, frozenset(labels.items())]


class TestPrometheus:
    def test_exact_numbers_for_a_known_sequence(self) -> None:
        metrics = PrometheusMetrics()
        metrics.actor_started(KEY)
        metrics.actor_started(KEY)
        metrics.actor_stopped(KEY, StopReason.EXPIRED)
        metrics.call_finished(record())
        metrics.call_finished(record())
        metrics.call_finished(record("timeout", started=None))
        metrics.call_refused(None, "unknown_tool")
        metrics.state_loaded(KEY, 0.002, found=True)
        metrics.state_saved(KEY, 0.004, "written")
        metrics.state_saved(KEY, 0.0, "unchanged")
        tool = "planning__create_goal"
        assert value(metrics, "mcp_actors_calls_total", tool=tool, outcome="ok") == 2
        assert value(metrics, "mcp_actors_calls_total", tool=tool, outcome="timeout") == 1
        assert value(metrics, "mcp_actors_call_queue_seconds_count", tool=tool) == 3
        # 0.25 s for each call that ran; 0.75 s for the one that waited until its error.
        assert value(metrics, "mcp_actors_call_queue_seconds_sum", tool=tool) == 1.25
        assert value(metrics, "mcp_actors_call_run_seconds_count", tool=tool) == 2
        assert value(metrics, "mcp_actors_call_run_seconds_sum", tool=tool) == 1.0
        refused = value(
            metrics, "mcp_actors_calls_refused_total", tool="unknown", outcome="unknown_tool"
        )
        assert refused == 1
        assert value(metrics, "mcp_actors_live_actors") == 1
        assert value(metrics, "mcp_actors_actors_started_total") == 2
        assert value(metrics, "mcp_actors_actors_stopped_total", reason="expired") == 1
        assert value(metrics, "mcp_actors_state_load_seconds_count", module="planning") == 1
        saves = "mcp_actors_state_save_seconds_count"
        assert value(metrics, saves, module="planning", outcome="written") == 1
        assert value(metrics, saves, module="planning", outcome="unchanged") == 1

    def test_clients_cannot_grow_the_series(self) -> None:
        """1 000 made-up tool names and session ids: not one more series."""
        metrics = PrometheusMetrics()
        metrics.call_finished(record())
        metrics.call_refused(None, "unknown_tool")
        before = len(samples(metrics))
        for number in range(1000):
            metrics.call_refused(None, "unknown_tool")  # what an unknown name is reported as
            metrics.call_finished(record(session=f"attacker-{number}"))
        assert len(samples(metrics)) == before
        assert not any("attacker" in str(labels) for _, labels in samples(metrics))

    def test_two_instances_share_nothing(self) -> None:
        first, second = PrometheusMetrics(), PrometheusMetrics()
        first.call_finished(record())
        tool = "planning__create_goal"
        assert value(first, "mcp_actors_calls_total", tool=tool, outcome="ok") == 1
        assert ("mcp_actors_calls_total", frozenset({("tool", tool), ("outcome", "ok")})) not in (
            samples(second)
        )

    async def test_through_a_real_runtime(self) -> None:
        metrics = PrometheusMetrics()
        async with open_runtime([planning], observer=metrics) as runtime:
            for session in ("a", "b"):
                await runtime.call_tool(
                    "planning__create_goal", {"goal": "g"}, meta={"sessionId": session}
                )
        tool = "planning__create_goal"
        assert value(metrics, "mcp_actors_calls_total", tool=tool, outcome="ok") == 2
        assert value(metrics, "mcp_actors_actors_started_total") == 2
        assert value(metrics, "mcp_actors_actors_stopped_total", reason="shutdown") == 2
        assert value(metrics, "mcp_actors_live_actors") == 0

    def test_importing_the_package_needs_no_extra(self) -> None:
        """``import actors.telemetry`` loads neither prometheus_client nor opentelemetry."""
        code = (
            "import sys, actors, actors.telemetry; "
            "print(sorted(m for m in ('prometheus_client', 'opentelemetry') if m in sys.modules))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
        assert out.stdout.strip() == b"[]"


@pytest.fixture(name="exporter")
def exporter_fixture() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def tracer(exporter: InMemorySpanExporter) -> TracingObserver:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return TracingObserver(tracer_provider=provider)


class TestTracing:
    def test_a_span_per_call_with_its_phases_under_the_clients_trace(
        self, exporter: InMemorySpanExporter
    ) -> None:
        tracer(exporter).call_finished(record(meta={"traceparent": TRACEPARENT, "sessionId": "s1"}))
        spans = {span.name: span for span in exporter.get_finished_spans()}
        assert set(spans) == {"tools/call planning__create_goal", "queue", "run"}
        call = spans["tools/call planning__create_goal"]
        assert call.kind is SpanKind.SERVER
        assert format(call.context.trace_id, "032x") == TRACE_ID
        assert call.parent is not None
        assert format(call.parent.span_id, "016x") == "b7ad6b7169203331"
        assert call.attributes is not None
        assert call.attributes["gen_ai.tool.name"] == "planning__create_goal"
        assert call.attributes["mcp.method.name"] == "tools/call"
        assert call.attributes["mcp.session.id"] == "s1"
        assert call.status.status_code is StatusCode.UNSET
        queue, run = spans["queue"], spans["run"]
        for phase in (queue, run):
            assert phase.parent is not None
            assert phase.parent.span_id == call.context.span_id
        assert call.start_time is not None
        assert call.end_time is not None
        assert queue.end_time == run.start_time
        assert call.end_time - call.start_time == pytest.approx(0.75e9, abs=1e3)
        assert queue.end_time is not None
        assert queue.start_time is not None
        assert queue.end_time - queue.start_time == pytest.approx(0.25e9, abs=1e3)

    async def test_through_a_real_runtime(self, exporter: InMemorySpanExporter) -> None:
        """The trace context a client puts in ``_meta`` parents the call's span."""
        async with open_runtime([planning], observer=tracer(exporter)) as runtime:
            meta = {"sessionId": "s1", "traceparent": TRACEPARENT}
            await runtime.call_tool("planning__create_goal", {"goal": "g"}, meta=meta)
            await runtime.call_tool("planning__list_goals", {}, meta={"sessionId": "s1"})
        calls = [s for s in exporter.get_finished_spans() if s.name.startswith("tools/call")]
        assert [s.name for s in calls] == [
            "tools/call planning__create_goal",
            "tools/call planning__list_goals",
        ]
        traced, untraced = calls
        assert format(traced.context.trace_id, "032x") == TRACE_ID
        assert untraced.parent is None  # no trace context: a trace of its own
        assert untraced.context.trace_id != traced.context.trace_id

    def test_an_error_and_a_call_that_never_ran(self, exporter: InMemorySpanExporter) -> None:
        tracer(exporter).call_finished(record("shutting_down", started=None))
        spans = {span.name: span for span in exporter.get_finished_spans()}
        assert set(spans) == {"tools/call planning__create_goal", "queue"}
        call = spans["tools/call planning__create_goal"]
        assert call.status.status_code is StatusCode.ERROR
        assert call.attributes is not None
        assert call.attributes["error.type"] == "shutting_down"

    @pytest.mark.parametrize(
        "meta",
        [
            "not a mapping",
            {"traceparent": "00-zz-yy-01"},
            {"traceparent": 12},
            {"traceparent": "00-" + "a" * 10_000},
            {"traceparent": f"00-{'0' * 32}-b7ad6b7169203331-01"},  # an all-zero trace id
            {"tracestate": "x" * 100_000},
        ],
    )
    def test_a_hostile_trace_context_starts_a_new_trace(
        self, exporter: InMemorySpanExporter, meta: Any
    ) -> None:
        tracer(exporter).call_finished(record(meta=meta))
        (call,) = [s for s in exporter.get_finished_spans() if s.name.startswith("tools/call")]
        assert call.parent is None
        assert call.attributes is not None
        assert all(len(str(v)) <= 256 for v in call.attributes.values())

    def test_without_an_sdk_tracing_is_not_configured(self) -> None:
        code = "from actors.telemetry import tracing_configured; print(tracing_configured())"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
        assert out.stdout.strip() == b"False"
        code = (
            "from opentelemetry import trace; from opentelemetry.sdk.trace import TracerProvider; "
            "trace.set_tracer_provider(TracerProvider()); "
            "from actors.telemetry import tracing_configured; print(tracing_configured())"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
        assert out.stdout.strip() == b"True"
