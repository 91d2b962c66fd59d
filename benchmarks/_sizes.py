"""How big each scenario runs: `Sizes`, read by every scenario and chosen by the suite's presets."""

from __future__ import annotations

from typing import final

import attrs

__all__ = ["Sizes"]


@final
@attrs.frozen
class Sizes:
    """How big each scenario runs."""

    name: str
    """The preset's name."""
    judged: bool
    """Whether the figures are judged against their targets, which are meant for
    the quick and full sizes; the tiny sizes judge only correctness counts."""
    rounds: int
    """Interleaved rounds per measurement."""
    call_keys: tuple[int, ...]
    """call_path: key counts."""
    call_callers: tuple[int, ...]
    """call_path: concurrent caller counts."""
    calls_per_batch: int
    """call_path: calls per design per batch."""
    activation_keys: int
    """activation: fresh keys per round, called by many callers."""
    activation_callers: int
    """activation: how many."""
    activation_latency_keys: int
    """activation: fresh keys per round, called by one caller (first and warm latency)."""
    memory_actors: tuple[int, ...]
    """memory: idle actor counts."""
    memory_heap_max: int
    """memory: the largest count also measured under tracemalloc (it is slow)."""
    memory_baseline_max: int
    """memory: the largest count the floor is measured at."""
    churn_calls: int
    """churn: calls per round."""
    churn_keys: int
    """churn: keys the calls spread over."""
    churn_callers: int
    """churn: concurrent callers."""
    isolation_contexts: tuple[int, int, int]
    """isolation: sessions, assistants, threads."""
    isolation_goals: int
    """isolation: goals each context creates."""
    peer_keys: int
    """peers: keys (pykka starts a thread for each)."""
    peer_calls: int
    """peers: calls per batch."""
    peer_callers: int
    """peers: calls in flight with many callers."""
    mcp_rounds: int
    """mcp: rounds (many short ones: the hop is a small difference of two round trips)."""
    mcp_sessions: int
    """mcp: sessions the calls spread over (one actor each)."""
    mcp_light_calls: int
    """mcp: calls per batch with one caller."""
    mcp_calls: int
    """mcp: calls per batch with many callers."""
    mcp_callers: int
    """mcp: concurrent callers with many."""
    http_seconds: int
    """mcp: seconds of each wrk run over Streamable HTTP (wrk counts whole seconds)."""
    http_rounds: int
    """mcp: interleaved rounds over Streamable HTTP."""
    http_warm_seconds: int
    """mcp: seconds of each server's unmeasured wrk run per era before them (0: none)."""
    handle_calls: int
    """mcp: calls per round of each in-process handle verification case."""
    durable_keys: int
    """durable: keys the call path's writes spread over."""
    durable_callers: int
    """durable: concurrent callers with many (call path and reactivation)."""
    durable_light_calls: int
    """durable: calls per batch with one caller."""
    durable_calls: int
    """durable: calls per batch with many callers."""
    durable_reactivation_keys: int
    """durable: expired keys called once each per round."""
    durable_large_bytes: int
    """durable: bytes of content in the large state."""
    durable_large_writes: int
    """durable: 1 KiB adds per batch to the large state (and to an empty one)."""
    durable_partwise_adds: int
    """durable: 1 KiB adds per round to each served store (empty, 1 MiB, 8 MiB; each variant)."""
    fastmcp_install: bool
    """durable: install FastMCP into its cache venv when missing (needs the package index)."""
    fastmcp_rounds: int
    """durable: rounds of the FastMCP peer."""
    fastmcp_sessions: int
    """durable: sessions the peer's mixed calls spread over."""
    fastmcp_calls: int
    """durable: the peer's mixed calls per batch."""
    fastmcp_callers: int
    """durable: the peer's concurrent callers."""
    fastmcp_appends: int
    """durable: appends per caller to the peer's one shared session, per round."""
    ts_install: bool
    """ts_peer: install the TypeScript SDK (npm) and FastMCP (pip) into the cache when missing."""
    ts_rounds: int
    """ts_peer: interleaved rounds."""
    ts_stdio_calls: int
    """ts_peer: calls per batch over stdio, each server, sequential and in flight alike."""
    ts_http_calls: int
    """ts_peer: calls per batch over HTTP (each opens a connection: the SDK client's way)."""
    ts_sessions: int
    """ts_peer: sessions the calls spread over."""
    embedding_keys: int
    """embedding: keys the handles' calls spread over."""
    embedding_calls: int
    """embedding: calls per host per batch (with one caller, many callers, one thread, many)."""
    embedding_callers: int
    """embedding: concurrent callers with many (native trio and the asyncio handle)."""
    embedding_threads: int
    """embedding: calling threads with many (the blocking handle)."""
    embedding_http_sessions: int
    """embedding: sessions the FastAPI example's requests spread over (one goal each)."""
    embedding_http_light_requests: int
    """embedding: requests per batch with one client."""
    embedding_http_requests: int
    """embedding: requests per batch with many clients."""
    embedding_http_clients: int
    """embedding: concurrent clients with many."""
    cluster_sessions: int
    """cluster: sessions the calls spread over."""
    cluster_documents: int
    """cluster: 32 KB documents in each session's content store."""
    cluster_calls: int
    """cluster: calls per batch."""
    cluster_callers: int
    """cluster: concurrent callers (threads) for the heavy calls."""
    cluster_handover_sessions: int
    """cluster: live sessions (over SQLite) when a shard is added and removed."""
    cluster_light_calls: int
    """cluster: light calls per batch, in process and through the shards."""
    cluster_light_callers: int
    """cluster: concurrent callers (trio tasks, a session each) for the light calls with many."""
