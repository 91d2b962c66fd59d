"""`PrometheusMetrics`: the runtime's observer events as Prometheus metrics.

Every metric is named ``mcp_actors_…`` and lives in the instance's own
`CollectorRegistry`, so two runtimes in one process never mix their numbers.
Label values come from bounded sets only: tool and module names from the
registry, outcomes and stop reasons from `actors.outcome_of`'s fixed set. A
tool name a client made up is counted under ``tool="unknown"``; a session id
is never a label.

The observer methods run on the runtime's loop for every call, so the
labelled children are looked up once per (tool, outcome) and kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from .._observe import Observer

if TYPE_CHECKING:
    from protocol import ActorKey

    from .._observe import CallRecord, StopReason

__all__ = ["LATENCY_BUCKETS", "UNKNOWN_TOOL", "PrometheusMetrics"]

LATENCY_BUCKETS: Final = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
"""Histogram buckets, in seconds: a no-op call takes tens of µs, a heavy one seconds."""
UNKNOWN_TOOL: Final = "unknown"
"""The tool label of a call whose name resolved to no tool."""


@final
class PrometheusMetrics(Observer):
    """Counts, gauges and latency histograms of calls, actors and stored state."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "mcp_actors_calls",
            "Calls answered by an actor, by tool and outcome.",
            ("tool", "outcome"),
            registry=registry,
        )
        self.refused = Counter(
            "mcp_actors_calls_refused",
            "Calls refused before any actor took them, by tool and outcome.",
            ("tool", "outcome"),
            registry=registry,
        )
        self.queued = Histogram(
            "mcp_actors_call_queue_seconds",
            "Time a call waited in its actor's mailbox.",
            ("tool",),
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.ran = Histogram(
            "mcp_actors_call_run_seconds",
            "Time a call ran: its handler, and the state's write after it.",
            ("tool",),
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.live = Gauge(
            "mcp_actors_live_actors", "Actors holding a state now.", registry=registry
        )
        self.started = Counter(
            "mcp_actors_actors_started", "Actors that took their state.", registry=registry
        )
        self.stopped = Counter(
            "mcp_actors_actors_stopped",
            "Actors stopped, by reason.",
            ("reason",),
            registry=registry,
        )
        self.loads = Histogram(
            "mcp_actors_state_load_seconds",
            "Time taken to load a durable state from the store, by module.",
            ("module",),
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.saves = Histogram(
            "mcp_actors_state_save_seconds",
            "Time taken by a durable state's write, by module and outcome.",
            ("module", "outcome"),
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "mcp_actors_mcp_calls_in_flight",
            "tools/call requests being served over MCP now (set by the server).",
            registry=registry,
        )
        # (tool, outcome) -> (calls counter, queue histogram, run histogram) children.
        self._per_call: dict[tuple[str, str], tuple[Counter, Histogram, Histogram]] = {}

    def actor_started(self, key: ActorKey) -> None:
        """Count the actor and its place among the live ones."""
        self.started.inc()
        self.live.inc()

    def actor_stopped(self, key: ActorKey, reason: StopReason) -> None:
        """Count the stop by reason."""
        self.live.dec()
        self.stopped.labels(reason.value).inc()

    def call_finished(self, record: CallRecord) -> None:
        """Count the call and observe its queue and run times."""
        children = self._per_call.get((record.tool, record.outcome))
        if children is None:
            children = self._per_call[record.tool, record.outcome] = (
                self.calls.labels(record.tool, record.outcome),
                self.queued.labels(record.tool),
                self.ran.labels(record.tool),
            )
        calls, queued, ran = children
        calls.inc()
        queued.observe(record.queued)
        run = record.ran
        if run is not None:
            ran.observe(run)

    def call_refused(self, tool: str | None, outcome: str) -> None:
        """Count the refusal; an unresolved name is ``unknown``, never the client's string."""
        self.refused.labels(UNKNOWN_TOOL if tool is None else tool, outcome).inc()

    def state_loaded(self, key: ActorKey, seconds: float, *, found: bool) -> None:
        """Observe the load's latency."""
        self.loads.labels(key.module).observe(seconds)

    def state_saved(self, key: ActorKey, seconds: float, outcome: str) -> None:
        """Observe the write's latency, by outcome."""
        self.saves.labels(key.module, outcome).observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in Prometheus' text format, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
