"""actors.telemetry's Prometheus metrics from the observer seam: exact numbers.

The observer is fed a known sequence of events, directly and through a real
runtime, and its output is read back with prometheus-client's own parser.
Spans are tests/telemetry/test_tracing.py's; labels, buckets and hostile clients
tests/telemetry/test_prometheus.py's.
"""

from __future__ import annotations

import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

from actors import open_runtime
from actors.lowlevel import CallRecord, StopReason
from actors.modules import planning
from actors.telemetry import PrometheusMetrics
from protocol import ActorKey, ToolContext

KEY = ActorKey("planning", ToolContext("s1"))


def record(
    outcome: str = "ok",
    *,
    started: float | None = 1.25,
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
        meta=None,
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
