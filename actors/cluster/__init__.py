"""Runtimes on Ray: shards in Ray actors, each session's calls on its one shard (``cluster`` extra).

    with open_cluster(["actors.modules:planning"], shards=2, state="postgresql://…") as c:
        result = c.call({"name": "planning__create_goal", ...})

Each shard is a Ray async actor whose runtime runs on the actor's own event
loop (`actors.open_asyncio_runtime`), its durable state in a store every
shard shares. `protocol.shard_for` places each session on one shard, so all
of its keys live there. A shard process that dies is restarted by Ray; its
sessions' durable state loads again from the store on their next call, and a
call that was in flight gets an error result, never a silent drop.

This is the first part of running on several processes: there is no HTTP
front end, handover on a change of membership, or ``cluster`` command yet.
"""

from ._cluster import Cluster as Cluster
from ._cluster import open_cluster as open_cluster
from ._shard import ShardHost as ShardHost
