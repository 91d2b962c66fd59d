"""PrometheusMetrics: exact histograms, series a client cannot grow, and its ASGI app.

The basic counts per observer event are in ``test_telemetry.py`` and the scrape of
a real ``serve`` in ``test_ops.py``; this file reads the histogram buckets
themselves, attacks the label sets through a real runtime (and every observer
event with hostile session ids, generated), and serves the exposition from a real
server under trio (hypercorn) and under asyncio (uvicorn).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import socket
from typing import TYPE_CHECKING, TypeAlias

import httpx2
import hypercorn.config
import hypercorn.trio
import prometheus_client
import pytest
import trio
import trio.testing
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Mount

from actors import ArgumentsError, UnknownToolError, open_runtime
from actors._observe import _OUTCOMES, OK, TOOL_ERROR
from actors.lowlevel import CallRecord, StopReason
from actors.modules import planning
from actors.telemetry import PrometheusMetrics
from actors.telemetry._prometheus import LATENCY_BUCKETS, UNKNOWN_TOOL
from protocol import BUILTIN_PREFIX, ActorKey, ToolContext

from ..strategies import ids

if TYPE_CHECKING:
    from collections.abc import Callable

    from hypercorn.typing import ASGIFramework
    from prometheus_client.core import Metric
    from prometheus_client.samples import Sample

CREATE = "planning__create_goal"
KEY = ActorKey("planning", ToolContext("s1"))
TOOLS = sorted(tool.full_name for tool in planning.tools.values())
OUTCOMES = [OK, TOOL_ERROR, *(label for _, label in _OUTCOMES)]
SAVE_OUTCOMES = ["written", "unchanged", "conflict", "failed"]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(body: bytes | str) -> Samples:
    """Every sample of an exposition, by name and labels, read with prometheus-client's parser."""
    text = body.decode() if isinstance(body, bytes) else body
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def queued_for(seconds: float) -> CallRecord:
    """A call that waited exactly `seconds` in its mailbox, then ran for none."""
    return CallRecord(
        CREATE, "planning", ToolContext("s1"), "ok", accepted=0.0, started=seconds,
        finished=seconds, meta=None,
    )  # fmt: skip


def buckets(samples: Samples, name: str, **labels: str) -> dict[str, float]:
    """The ``le`` → cumulative count of one histogram's series."""
    wanted = set(labels.items())
    return {
        dict(key)["le"]: value
        for (sample, key), value in samples.items()
        if sample == f"{name}_bucket" and wanted <= key
    }


class TestHistograms:
    def test_bounds_are_spelt_as_prometheus_client_spells_them(self) -> None:
        """``le="1.0"``, as every prometheus-client histogram: not a second series ``le="1"``."""
        expected = {sample.labels["le"] for sample in _reference_buckets()}
        metrics = PrometheusMetrics()
        metrics.call_finished(queued_for(0.5))
        queue = buckets(parse(metrics.exposition()[0]), "mcp_actors_call_queue_seconds")
        assert set(queue) == expected
        assert {"1.0", "30.0", "0.0001", "+Inf"} <= set(queue)

    def test_a_value_on_a_bound_counts_in_that_bucket_and_counts_are_cumulative(self) -> None:
        metrics = PrometheusMetrics()
        for seconds in (0.0001, 0.0003, 45.0):  # on the first bound; between; past the last
            metrics.call_finished(queued_for(seconds))
        samples = parse(metrics.exposition()[0])
        queue = buckets(samples, "mcp_actors_call_queue_seconds", tool=CREATE)
        assert queue["0.0001"] == 1
        assert queue["0.00025"] == 1
        assert queue["0.0005"] == 2
        assert queue["30.0"] == 2
        assert queue["+Inf"] == 3
        counts = [queue[bound] for bound in sorted(queue, key=float)]
        assert counts == sorted(counts)  # cumulative: never decreasing
        labels = frozenset({("tool", CREATE)})
        assert samples["mcp_actors_call_queue_seconds_count", labels] == 3
        assert samples["mcp_actors_call_queue_seconds_sum", labels] == pytest.approx(45.0004)
        # Each call ran for 0 s: all three in the first bucket of the run time.
        run = buckets(samples, "mcp_actors_call_run_seconds", tool=CREATE)
        assert run["0.0001"] == run["+Inf"] == 3

    def test_state_latency_by_module_and_save_outcome(self) -> None:
        metrics = PrometheusMetrics()
        metrics.state_loaded(KEY, 0.003, found=False)
        metrics.state_loaded(KEY, 0.007, found=True)
        for seconds, outcome in ((0.02, "written"), (0.04, "written"), (0.01, "conflict")):
            metrics.state_saved(KEY, seconds, outcome)
        samples = parse(metrics.exposition()[0])
        module = ("module", "planning")
        loads = frozenset({module})
        assert samples["mcp_actors_state_load_seconds_count", loads] == 2
        assert samples["mcp_actors_state_load_seconds_sum", loads] == pytest.approx(0.01)
        written = frozenset({module, ("outcome", "written")})
        conflict = frozenset({module, ("outcome", "conflict")})
        assert samples["mcp_actors_state_save_seconds_count", written] == 2
        assert samples["mcp_actors_state_save_seconds_sum", written] == pytest.approx(0.06)
        assert samples["mcp_actors_state_save_seconds_count", conflict] == 1
        assert (
            "mcp_actors_state_save_seconds_count",
            frozenset({module, ("outcome", "failed")}),
        ) not in samples


class TestHostileClients:
    async def test_made_up_tools_and_fresh_sessions_through_a_runtime_add_no_series(
        self,
    ) -> None:
        """1 000 unknown tool names and 1 000 session ids, sent to a real runtime."""
        metrics = PrometheusMetrics()
        async with open_runtime([planning], observer=metrics) as runtime:

            async def attack(number: int) -> None:
                session = {"sessionId": f"attacker-{number}"}
                await runtime.call_tool(CREATE, {"goal": "g"}, meta=session)
                # A name crafted to look like a label, and one near a real tool's.
                for name in (f'evil-{number}",tool="x', f"planning__create_goal{number}"):
                    with pytest.raises(UnknownToolError):
                        await runtime.call_tool(name, {}, meta=session)

            await attack(-1)  # the series every later call lands in
            before = parse(metrics.exposition()[0])
            for number in range(1000):
                await attack(number)
            after_body = metrics.exposition()[0]
        after = parse(after_body)
        assert set(after) == set(before)
        assert (
            after["mcp_actors_calls_total", frozenset({("tool", CREATE), ("outcome", "ok")})]
            == 1001
        )
        refused = frozenset({("tool", "unknown"), ("outcome", "unknown_tool")})
        assert after["mcp_actors_calls_refused_total", refused] == 2002
        assert after["mcp_actors_actors_started_total", frozenset()] == 1001
        assert b"attacker" not in after_body
        assert b"evil" not in after_body

    async def test_a_refusal_of_a_known_tool_is_labelled_with_it(self) -> None:
        metrics = PrometheusMetrics()
        async with open_runtime([planning], observer=metrics) as runtime:
            with pytest.raises(ArgumentsError):
                await runtime.call_tool(CREATE, {"goal": 12}, meta={"sessionId": "s1"})
        samples = parse(metrics.exposition()[0])
        labels = frozenset({("tool", CREATE), ("outcome", "bad_arguments")})
        assert samples["mcp_actors_calls_refused_total", labels] == 1

    async def test_a_short_or_prefixed_name_is_labelled_with_the_full_name(self) -> None:
        """Every spelling of one tool lands in that tool's series: a client cannot fork it."""
        metrics = PrometheusMetrics()
        async with open_runtime([planning], observer=metrics) as runtime:
            for name in (CREATE, "create_goal", BUILTIN_PREFIX + CREATE):
                await runtime.call_tool(name, {"goal": "g"}, meta={"sessionId": "s1"})
                with pytest.raises(ArgumentsError):
                    await runtime.call_tool(name, {"goal": 12}, meta={"sessionId": "s1"})
        samples = parse(metrics.exposition()[0])
        tools = {dict(labels).get("tool") for _, labels in samples}
        assert tools == {CREATE, None}
        ok = frozenset({("tool", CREATE), ("outcome", "ok")})
        bad = frozenset({("tool", CREATE), ("outcome", "bad_arguments")})
        assert samples["mcp_actors_calls_total", ok] == 3
        assert samples["mcp_actors_calls_refused_total", bad] == 3


Event: TypeAlias = "Callable[[PrometheusMetrics], None]"
"""One observer event, given to the metrics it is fed to."""


def _call(tool: str, outcome: str, session: str) -> Event:
    record = CallRecord(
        tool, "planning", ToolContext(session), outcome, accepted=0.0, started=0.001,
        finished=0.002, meta={"sessionId": session},
    )  # fmt: skip
    return lambda metrics: metrics.call_finished(record)


def _refused(tool: str | None, outcome: str) -> Event:
    return lambda metrics: metrics.call_refused(tool, outcome)


def _started(key: ActorKey) -> Event:
    return lambda metrics: metrics.actor_started(key)


def _stopped(key: ActorKey, reason: StopReason) -> Event:
    return lambda metrics: metrics.actor_stopped(key, reason)


def _loaded(key: ActorKey, found: bool) -> Event:
    return lambda metrics: metrics.state_loaded(key, 0.001, found=found)


def _saved(key: ActorKey, outcome: str) -> Event:
    return lambda metrics: metrics.state_saved(key, 0.001, outcome)


# Session ids a client chooses, two of them shaped to break out of a label or a line.
_SESSIONS = ids | st.just('x",tool="y') | st.just("\n# HELP x")
_KEYS = st.builds(ActorKey, st.just("planning"), st.builds(ToolContext, _SESSIONS))
_EVENTS = st.one_of(
    st.builds(_call, st.sampled_from(TOOLS), st.sampled_from(OUTCOMES), _SESSIONS),
    st.builds(_refused, st.none() | st.sampled_from(TOOLS), st.sampled_from(OUTCOMES)),
    st.builds(_started, _KEYS),
    st.builds(_stopped, _KEYS, st.sampled_from(StopReason)),
    st.builds(_loaded, _KEYS, st.booleans()),
    st.builds(_saved, _KEYS, st.sampled_from(SAVE_OUTCOMES)),
)


@given(st.lists(_EVENTS, max_size=60))
def test_every_label_value_comes_from_a_bounded_set(events: list[Event]) -> None:
    """Whatever sessions a client names, each label is a tool, module, outcome, reason or bound."""
    metrics = PrometheusMetrics()
    for event in events:
        event(metrics)
    allowed = {
        "tool": {*TOOLS, UNKNOWN_TOOL},
        "outcome": {*OUTCOMES, *SAVE_OUTCOMES},
        "reason": {reason.value for reason in StopReason},
        "module": {"planning"},
        "le": {*(sample.labels["le"] for sample in _reference_buckets()), "+Inf"},
    }
    for _, labels in parse(metrics.exposition()[0]):
        for name, value in labels:
            assert value in allowed[name], (name, value)


def _reference_buckets() -> list[Sample]:
    """The bucket samples of a prometheus-client histogram with our bounds."""
    theirs = prometheus_client.Histogram(
        "reference", "reference", buckets=LATENCY_BUCKETS, registry=None
    )
    return [s for s in next(iter(theirs.collect())).samples if "le" in s.labels]


class TestGaugesAndRegistries:
    def test_stops_by_every_reason_and_the_live_gauge(self) -> None:
        metrics = PrometheusMetrics()
        for reason in StopReason:
            metrics.actor_started(KEY)
            metrics.actor_started(KEY)
            metrics.actor_stopped(KEY, reason)
        samples = parse(metrics.exposition()[0])
        for reason in StopReason:
            assert (
                samples["mcp_actors_actors_stopped_total", frozenset({("reason", reason.value)})]
                == 1
            )
        assert samples["mcp_actors_live_actors", frozenset()] == len(StopReason)

    def test_in_flight_is_read_at_each_scrape(self) -> None:
        metrics = PrometheusMetrics()
        in_flight = 0
        metrics.track_in_flight(lambda: in_flight)
        name = ("mcp_actors_mcp_calls_in_flight", frozenset[tuple[str, str]]())
        assert parse(metrics.exposition()[0])[name] == 0
        in_flight = 3
        assert parse(metrics.exposition()[0])[name] == 3

    def test_nothing_reaches_prometheus_clients_global_registry(self) -> None:
        """Two instances with the same series coexist, and the default registry never sees them."""
        first, second = PrometheusMetrics(), PrometheusMetrics()
        first.call_finished(queued_for(0.5))
        second.call_finished(queued_for(0.5))
        second.call_finished(queued_for(0.5))
        ok = ("mcp_actors_calls_total", frozenset({("tool", CREATE), ("outcome", "ok")}))
        assert (parse(first.exposition()[0])[ok], parse(second.exposition()[0])[ok]) == (1, 2)
        assert b"mcp_actors" not in prometheus_client.generate_latest(prometheus_client.REGISTRY)


def _host(metrics: PrometheusMetrics) -> Starlette:
    """A host's app with the exposition mounted, as the docstring of `asgi_app` says."""
    return Starlette(routes=[Mount("/metrics", app=metrics.asgi_app())])


def _check_scrape(response: httpx2.Response) -> None:
    assert response.status_code == 200
    # prometheus-client negotiates the version from the scraper's Accept header.
    assert response.headers["content-type"].startswith("text/plain; version=")
    ok = ("mcp_actors_calls_total", frozenset({("tool", CREATE), ("outcome", "ok")}))
    assert parse(response.text)[ok] == 2


def _two_calls() -> PrometheusMetrics:
    metrics = PrometheusMetrics()
    metrics.call_finished(queued_for(0.5))
    metrics.call_finished(queued_for(0.5))
    return metrics


class TestAsgiApp:
    async def test_served_by_hypercorn_under_trio(self) -> None:
        config = hypercorn.config.Config()
        config.bind = ["127.0.0.1:0"]
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            framework: ASGIFramework = _host(_two_calls())  # type: ignore[assignment]
            serve = functools.partial(
                hypercorn.trio.serve, framework, config, shutdown_trigger=stop.wait
            )
            (where,) = await nursery.start(serve)
            async with httpx2.AsyncClient(follow_redirects=True) as http:
                response = await http.get(f"{where}/metrics")
            stop.set()
        _check_scrape(response)

    def test_served_by_uvicorn_under_asyncio(self) -> None:
        async def serve_and_scrape() -> httpx2.Response:
            config = uvicorn.Config(_host(_two_calls()), log_level="warning", ws="none")
            server = uvicorn.Server(config)
            with socket.create_server(("127.0.0.1", 0)) as listening:
                # Bound before uvicorn starts: the request waits in the backlog until it accepts.
                serving = asyncio.create_task(server.serve(sockets=[listening]))
                try:
                    port = listening.getsockname()[1]
                    async with httpx2.AsyncClient(follow_redirects=True) as http:
                        return await http.get(f"http://127.0.0.1:{port}/metrics")
                finally:
                    server.should_exit = True
                    await serving

        _check_scrape(asyncio.run(serve_and_scrape()))


class TestIncluded:
    async def test_sources_join_the_families_of_their_names_labelled_with_their_source(
        self,
    ) -> None:
        """A cluster's front: its own refusal, and each shard's calls under ``shard``."""
        front = PrometheusMetrics()
        shards = {"shard-0": PrometheusMetrics(), "shard-1": PrometheusMetrics()}
        front.call_refused(None, "unknown_tool")
        for count, metrics in enumerate(shards.values(), start=1):
            for _ in range(count):
                metrics.call_finished(queued_for(0.001))

        async def gather() -> dict[str, list[Metric]]:
            await trio.lowlevel.checkpoint()
            return {name: list(metrics.registry.collect()) for name, metrics in shards.items()}

        front.include("shard", gather)
        await front.refresh()
        samples = parse(front.exposition()[0])
        calls = "mcp_actors_calls_total"
        assert (
            samples[calls, frozenset({("tool", CREATE), ("outcome", OK), ("shard", "shard-0")})]
            == 1
        )
        assert (
            samples[calls, frozenset({("tool", CREATE), ("outcome", OK), ("shard", "shard-1")})]
            == 2
        )
        assert not any(name == calls and "shard" not in dict(key) for name, key in samples)
        refused = frozenset({("tool", UNKNOWN_TOOL), ("outcome", "unknown_tool")})
        assert samples["mcp_actors_calls_refused_total", refused] == 1  # the front's own
        queued = buckets(samples, "mcp_actors_call_queue_seconds", shard="shard-1")
        assert queued["+Inf"] == 2

    async def test_a_source_that_fails_leaves_the_scrape_with_the_own_families(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        front = PrometheusMetrics()
        front.call_finished(queued_for(0.001))

        async def unreachable() -> dict[str, list[Metric]]:
            raise ConnectionError("shard gone")

        front.include("shard", unreachable)
        await front.refresh()
        samples = parse(front.exposition()[0])
        mine = frozenset({("tool", CREATE), ("outcome", OK)})
        assert samples["mcp_actors_calls_total", mine] == 1
        assert "metrics of the included sources could not be read" in caplog.text

    async def test_sources_are_asked_at_most_once_a_second_one_gathering_at_a_time(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """However often /metrics is scraped, the shards are not asked more than that."""
        front = PrometheusMetrics()
        asked: list[float] = []

        async def slow() -> dict[str, list[Metric]]:
            asked.append(trio.current_time())
            await trio.sleep(0.3)  # a shard that takes its time
            return {}

        front.include("shard", slow)
        async with trio.open_nursery() as nursery:
            for _ in range(300):  # a scrape every 10 ms for 3 s, each waiting for the gathering
                nursery.start_soon(front.refresh)
                await trio.sleep(0.01)
        assert 2 <= len(asked) <= 4
        assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(asked))
