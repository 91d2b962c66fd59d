"""`Cluster`: Ray shards, and the routing of each call to its session's shard.

The router parses the call's context here, with the same rules a runtime
applies (`protocol.parse_call`), so a call with a bad context is refused
before it crosses to a shard, and the session it names picks the shard
(`protocol.shard_for`). Each shard is a Ray actor restarted by Ray when its
process dies (``max_restarts=-1``); a call that was in flight on it is
answered with an error result saying so, and the next call to the session
reaches the restarted shard, which loads the session's state from the store.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final, final

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from protocol import (
    DEFAULT_POLICY,
    CallResult,
    ServiceInfo,
    TextContent,
    parse_call,
    service_info_of,
    shard_for,
)

from .._registry import Registry
from ..server._options import load_module
from ._shard import ShardHost

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from protocol import Caller

    from .._runtime import RuntimeConfig, RuntimeStatistics

__all__ = ["Cluster", "open_cluster"]

_SHARD_LOST: Final = (ActorDiedError, ActorUnavailableError, RayActorError)


@final
class Cluster:
    """The shards of a cluster and the router in front of them (see `open_cluster`)."""

    def __init__(
        self, registry: Registry, config: RuntimeConfig | None, shards: Mapping[str, Any]
    ) -> None:
        self._registry = registry
        self._policy = DEFAULT_POLICY if config is None else config.policy
        self._shards = dict(shards)
        self._names = tuple(self._shards)

    @property
    def shards(self) -> tuple[str, ...]:
        """The shard names, in the order they were made."""
        return self._names

    def shard_of(self, session_id: str) -> str:
        """The shard that owns `session_id`."""
        return shard_for(session_id, self._names)

    def call(self, params: Mapping[str, Any], *, caller: Caller | None = None) -> CallResult:
        """Run a tools/call-shaped call on its session's shard, waiting for its result.

        Raises UnknownToolError and ProtocolError as `Runtime.call` does; every
        other refusal, and a shard lost during the call, is an ``isError``
        result naming the problem.
        """
        tool = self._registry.resolve(params["name"])  # UnknownToolError, before anything
        context = parse_call(params, self._policy, caller).context  # ProtocolError
        shard = self.shard_of(context.session_id)
        try:
            wire = ray.get(self._shards[shard].call.remote(dict(params), caller))
        except _SHARD_LOST as lost:
            text = (
                f"shard {shard!r} was lost during the call ({type(lost).__name__}); the call "
                "may or may not have happened: check, then retry"
            )
            return CallResult.error(text).stamped(tool.service)
        return _from_wire(wire, tool.service)

    def statistics(self) -> dict[str, RuntimeStatistics]:
        """Each shard's runtime counters, by shard name (``write_conflicts``: fenced writes)."""
        return {name: ray.get(handle.statistics.remote()) for name, handle in self._shards.items()}

    def pid_of(self, shard: str) -> int:
        """The process id of `shard` now."""
        pid: int = ray.get(self._shards[shard].pid.remote())
        return pid


def _from_wire(wire: Mapping[str, Any], service: ServiceInfo) -> CallResult:
    """The result a shard sent, each item with its own provenance (or the tool's)."""
    items = tuple(
        TextContent(item["text"], service_info_of(item) or service) for item in wire["content"]
    )
    return CallResult(items, wire.get("structuredContent"), bool(wire["isError"]))


@contextlib.contextmanager
def open_cluster(
    modules: Sequence[str],
    *,
    shards: int,
    state: str,
    config: RuntimeConfig | None = None,
) -> Iterator[Cluster]:
    """Start `shards` shard actors on the connected Ray cluster; stop them when the block ends.

    `modules` are specs, ``package.module:attribute`` (``actors.modules:planning``),
    imported here and in every shard. Ray must be initialized (``ray.init``).
    `state` is the store every shard shares (PostgreSQL, for shards on several
    machines). Raises ValueError for fewer than one shard, ConfigurationError
    for a module spec that does not import.
    """
    if shards < 1:
        msg = f"shards must be at least 1, got {shards}"
        raise ValueError(msg)
    registry = Registry(map(load_module, modules))
    remote = ray.remote(max_restarts=-1, max_task_retries=0)(ShardHost)
    # Any: Ray's handle types do not carry the methods of the class they run.
    specs = tuple(modules)
    handles: dict[str, Any] = {
        f"shard-{n}": remote.remote(specs, config, state) for n in range(shards)
    }
    try:
        yield Cluster(registry, config, handles)
    finally:
        for handle in handles.values():
            with contextlib.suppress(*_SHARD_LOST):
                ray.get(handle.close.remote())
            ray.kill(handle, no_restart=True)
