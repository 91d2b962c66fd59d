"""Shards on Ray from Python: calls on a session's shard, a shard added and removed."""

import sys

import ray

from actors.cluster import open_cluster


def main(state: str) -> None:
    with open_cluster(["actors.modules:planning"], shards=2, state=state) as cluster:
        meta = {"sessionId": "alpha/conversation-1"}
        goal = {"goal": "Ship"}
        call = {"name": "planning__create_goal", "arguments": goal, "_meta": meta}
        print(cluster.call_blocking(call).first_text)  # Created goal g1: Ship
        added = cluster.add_shard()  # about a third of the sessions move to it
        cluster.remove_shard(added)  # and back
        listing = {"name": "planning__list_goals", "_meta": meta}
        print(cluster.call_blocking(listing).first_text)  # Goals (1):\n- g1: Ship


if __name__ == "__main__":
    ray.init(num_cpus=2)  # Ray is yours to start: here a local instance
    main(sys.argv[1])  # python cluster.py postgresql://mcp@db.internal/mcp
