"""`PrometheusMetrics`: the runtime's observer events as Prometheus metrics.

Every metric is named ``mcp_actors_…`` and lives in the instance's own
`CollectorRegistry`, so two runtimes in one process never mix their numbers.
Label values come from bounded sets only: tool and module names from the
registry, outcomes and stop reasons from `actors.outcome_of`'s fixed set. A
tool name a client made up is counted under ``tool="unknown"``; a session id
is never a label.

The observer methods run on the runtime's loop for every call, so they only
add to plain numbers (no lock: the runtime is one thread); the Prometheus
families are built from them when the registry is scraped. prometheus-client's
own metric objects take a lock per update, which cost a no-op call about a
quarter of its throughput in the ``observer`` benchmark.
"""

from __future__ import annotations

import bisect
import collections
import logging
import math
from typing import TYPE_CHECKING, Final, TypeAlias, final

import trio
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    generate_latest,
    make_asgi_app,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .._observe import Observer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping

    from protocol import ActorKey

    from .._observe import CallRecord, StopReason

    _Source: TypeAlias = Callable[[], Awaitable[Mapping[str, Iterable[Metric]]]]

__all__ = ["LATENCY_BUCKETS", "UNKNOWN_TOOL", "PrometheusMetrics"]

logger = logging.getLogger("actors.metrics")

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
# Spelt as prometheus-client spells its own buckets (``le="1.0"``, not ``"1"``): a server
# that does not normalise ``le`` would otherwise see two different series for one bound.
_BOUNDS: Final = (*map(floatToGoString, LATENCY_BUCKETS), "+Inf")
UNKNOWN_TOOL: Final = "unknown"
REFRESH_REUSE: Final = 1.0
"""Seconds one gathering of the included sources serves scrapes for (see `refresh`)."""
"""The tool label of a call whose name resolved to no tool."""


@final
class _Histogram:
    """Counts per bucket and a sum, exported cumulatively as Prometheus expects."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        # bisect_left: a value equal to a bound falls in that bound's bucket (le).
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds

    def buckets(self) -> list[tuple[str, float]]:
        running, cumulative = 0, []
        for bound, count in zip(_BOUNDS, self.counts, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        return cumulative


@final
class _ToolCalls:
    """One (tool, outcome)'s count, and its tool's two latency histograms."""

    __slots__ = ("count", "queued", "ran")

    def __init__(self, queued: _Histogram, ran: _Histogram) -> None:
        self.count = 0
        self.queued = queued
        self.ran = ran


@final
class PrometheusMetrics(Observer, Collector):
    """Counts, gauges and latency histograms of calls, actors and stored state."""

    def __init__(self) -> None:
        self._calls: dict[tuple[str, str], _ToolCalls] = {}
        self._queued: collections.defaultdict[str, _Histogram] = collections.defaultdict(_Histogram)
        self._ran: collections.defaultdict[str, _Histogram] = collections.defaultdict(_Histogram)
        self._refused: collections.Counter[tuple[str, ...]] = collections.Counter()
        self._live = 0
        self._started = 0
        self._stopped: collections.Counter[str] = collections.Counter()
        self._loads: collections.defaultdict[str, _Histogram] = collections.defaultdict(_Histogram)
        self._saves: collections.defaultdict[tuple[str, ...], _Histogram] = collections.defaultdict(
            _Histogram
        )
        self._in_flight: Callable[[], float] | None = None
        self._included: tuple[str, _Source] | None = None
        self._gathered: Mapping[str, Iterable[Metric]] = {}
        self._gathered_at = -math.inf
        self._gathering: trio.Event | None = None
        self.registry: Final = CollectorRegistry(auto_describe=True)
        """Where the metrics are registered; scrape it, or `exposition`."""
        self.registry.register(self)

    def track_in_flight(self, in_flight: Callable[[], float]) -> None:
        """Export ``mcp_actors_mcp_calls_in_flight``, read from `in_flight` at each scrape."""
        self._in_flight = in_flight

    # ---- the observer --------------------------------------------------------------

    def actor_started(self, key: ActorKey) -> None:
        """Count the actor and its place among the live ones."""
        self._started += 1
        self._live += 1

    def actor_stopped(self, key: ActorKey, reason: StopReason) -> None:
        """Count the stop by reason."""
        self._live -= 1
        self._stopped[reason.value] += 1

    def call_finished(self, record: CallRecord) -> None:
        """Count the call and observe its queue and run times."""
        calls = self._calls.get((record.tool, record.outcome))
        if calls is None:
            calls = _ToolCalls(self._queued[record.tool], self._ran[record.tool])
            self._calls[record.tool, record.outcome] = calls
        calls.count += 1
        calls.queued.observe(record.queued)
        ran = record.ran
        if ran is not None:
            calls.ran.observe(ran)

    def call_refused(self, tool: str | None, outcome: str) -> None:
        """Count the refusal; an unresolved name is ``unknown``, never the client's string."""
        self._refused[UNKNOWN_TOOL if tool is None else tool, outcome] += 1

    def state_loaded(self, key: ActorKey, seconds: float, *, found: bool) -> None:
        """Observe the load's latency."""
        self._loads[key.module].observe(seconds)

    def state_saved(self, key: ActorKey, seconds: float, outcome: str) -> None:
        """Observe the write's latency, by outcome."""
        self._saves[key.module, outcome].observe(seconds)

    # ---- the collector ------------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in Prometheus' text format, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def asgi_app(self) -> Callable[..., Awaitable[None]]:
        """An ASGI app serving the exposition, to mount in a host's own app.

        ``app.mount("/metrics", metrics.asgi_app())`` in FastAPI or Starlette. It
        is prometheus-client's, which only awaits ``receive`` and ``send``, so it
        runs under asyncio and trio alike; it serves HTTP only (no lifespan), as a
        mounted app is, and takes no token: put it where only operators reach.
        """
        return make_asgi_app(self.registry)

    def include(self, label: str, sources: _Source) -> None:
        """Also export the families `sources` gathers, by source name, as of the last `refresh`.

        Each of their samples gets the label `label` with its source's name, and
        joins this instance's family of the same name: a cluster's front
        includes its shards' metrics as ``shard="shard-0"``…, so one scrape and a
        ``sum by (tool)`` cover the cluster. `sources` is awaited by `refresh`,
        never by a scrape itself, so a source that hangs cannot hold up the
        event loop or the scrape beyond the source's own timeouts.
        """
        self._included = (label, sources)

    async def refresh(self) -> None:
        """Gather the included sources again (under trio), if the last gathering is over a
        second old: however often /metrics is scraped, the sources are asked at most
        once a second, one gathering at a time. A source that fails is logged and
        left out until it answers again."""
        if self._included is None:
            return
        if self._gathering is not None:
            await self._gathering.wait()
            return
        if trio.current_time() - self._gathered_at < REFRESH_REUSE:
            return
        self._gathering = trio.Event()
        try:
            try:
                self._gathered = await self._included[1]()
            except Exception:  # a scrape still answers with what this process knows
                logger.exception("metrics of the included sources could not be read")
                self._gathered = {}
            self._gathered_at = trio.current_time()
        finally:
            self._gathering.set()
            self._gathering = None

    def collect(self) -> Iterator[Metric]:
        """The metric families, built from the numbers now (called at each scrape)."""
        families = {family.name: family for family in self._own()}
        if self._included is not None:
            label = self._included[0]
            for source, source_families in self._gathered.items():
                for family in source_families:
                    _merge(families, family, label, source)
        yield from families.values()

    def _own(self) -> Iterator[Metric]:
        """This instance's families."""
        calls = CounterMetricFamily(
            "mcp_actors_calls", "Calls answered by an actor.", labels=("tool", "outcome")
        )
        for (tool, outcome), counted in list(self._calls.items()):
            calls.add_metric((tool, outcome), counted.count)
        yield calls
        yield _counter(
            "mcp_actors_calls_refused",
            "Calls refused before any actor took them.",
            ("tool", "outcome"),
            self._refused,
        )
        yield _histograms(
            "mcp_actors_call_queue_seconds",
            "Time a call waited in its actor's mailbox.",
            ("tool",),
            {(tool,): histogram for tool, histogram in list(self._queued.items())},
        )
        yield _histograms(
            "mcp_actors_call_run_seconds",
            "Time a call ran: its handler, and the state's write after it.",
            ("tool",),
            {(tool,): histogram for tool, histogram in list(self._ran.items())},
        )
        yield GaugeMetricFamily("mcp_actors_live_actors", "Actors holding a state.", self._live)
        yield CounterMetricFamily(
            "mcp_actors_actors_started", "Actors that took their state.", self._started
        )
        yield _counter(
            "mcp_actors_actors_stopped",
            "Actors stopped, by reason.",
            ("reason",),
            {(reason,): count for reason, count in list(self._stopped.items())},
        )
        yield _histograms(
            "mcp_actors_state_load_seconds",
            "Time taken to load a durable state from the store.",
            ("module",),
            {(module,): histogram for module, histogram in list(self._loads.items())},
        )
        yield _histograms(
            "mcp_actors_state_save_seconds",
            "Time taken by a durable state's write, by outcome.",
            ("module", "outcome"),
            self._saves,
        )
        if self._in_flight is not None:
            yield GaugeMetricFamily(
                "mcp_actors_mcp_calls_in_flight",
                "tools/call requests being served over MCP.",
                self._in_flight(),
            )


def _merge(families: dict[str, Metric], family: Metric, label: str, source: str) -> None:
    """Add `family`'s samples to the family of its name in `families`, labelled with `source`."""
    into = families.get(family.name)
    if into is None:
        into = families[family.name] = Metric(
            family.name, family.documentation, family.type, family.unit
        )
    into.samples.extend(
        sample._replace(labels={**sample.labels, label: source}) for sample in family.samples
    )


def _counter(
    name: str, documentation: str, labels: tuple[str, ...], counts: Mapping[tuple[str, ...], int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for values, count in list(counts.items()):
        family.add_metric(values, count)
    return family


def _histograms(
    name: str,
    documentation: str,
    labels: tuple[str, ...],
    histograms: Mapping[tuple[str, ...], _Histogram],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for values, histogram in list(histograms.items()):
        family.add_metric(values, histogram.buckets(), histogram.total)
    return family
