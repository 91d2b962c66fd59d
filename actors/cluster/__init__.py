"""Runtimes on Ray: shards in Ray actors, each session's calls on its one shard (``cluster`` extra).

    with open_cluster(["actors.modules:planning"], shards=2, state="postgresql://…") as c:
        result = c.call_blocking({"name": "planning__create_goal", ...})
        c.add_shard()  # about a third of the sessions move to it, handed over

Each shard is a Ray async actor whose runtime runs on the actor's own event
loop (`actors.open_asyncio_runtime`), its durable state in a store every
shard shares. A `protocol.Membership` places each session on one shard, so
all of its keys live there. When shards are added or removed, the sessions
that change owner are handed over: the old owner stops them before the new
one loads them. A shard process that dies is restarted by Ray; its sessions'
durable state loads again from the store on their next call, and a call that
was in flight gets an error, never a silent drop. ``python -m actors cluster``
serves the MCP endpoint in front of the shards.

A `Cluster` is a host like a runtime (`actors.CallTarget`): tools, resources,
prompts and completions; a shard's `Ask`, `Log` and `Progress` reach the
front's caller; and `Cluster.watch` hears the changes of every shard.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._cluster import NAMESPACE as NAMESPACE
    from ._cluster import Cluster as Cluster
    from ._cluster import ClusterUnavailableError as ClusterUnavailableError
    from ._cluster import Directory as Directory
    from ._cluster import MembershipError as MembershipError
    from ._cluster import RoutingStatistics as RoutingStatistics
    from ._cluster import ShardLostError as ShardLostError
    from ._cluster import connect_cluster as connect_cluster
    from ._cluster import open_cluster as open_cluster
    from ._shard import Change as Change
    from ._shard import Channels as Channels
    from ._shard import Failed as Failed
    from ._shard import Form as Form
    from ._shard import Heard as Heard
    from ._shard import Moved as Moved
    from ._shard import Refused as Refused
    from ._shard import Said as Said
    from ._shard import Sampling as Sampling
    from ._shard import SessionEnded as SessionEnded
    from ._shard import ShardHost as ShardHost
    from ._shard import WireCall as WireCall

# Imported on first use, not with the package: ``actors cluster`` sets Ray's
# environment (token authentication, loopback binds) before Ray is imported,
# and Ray reads it at import time.
_WHERE = {
    "NAMESPACE": "._cluster",
    "Cluster": "._cluster",
    "ClusterUnavailableError": "._cluster",
    "Directory": "._cluster",
    "MembershipError": "._cluster",
    "RoutingStatistics": "._cluster",
    "ShardLostError": "._cluster",
    "connect_cluster": "._cluster",
    "open_cluster": "._cluster",
    "Change": "._shard",
    "Channels": "._shard",
    "Failed": "._shard",
    "Form": "._shard",
    "Heard": "._shard",
    "Moved": "._shard",
    "Refused": "._shard",
    "Said": "._shard",
    "Sampling": "._shard",
    "SessionEnded": "._shard",
    "ShardHost": "._shard",
    "WireCall": "._shard",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    return getattr(importlib.import_module(module, __name__), name)
