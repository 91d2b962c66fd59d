"""Which shard owns a session: rendezvous (highest random weight) hashing.

Every shard gets a score for the session, a hash of (shard, session), and the
highest score wins. All of a session's keys (every module, assistant and
thread) therefore sit on one shard, and when a shard joins or leaves, only
the sessions whose winner changed move: about 1/N of them, each to or from
that one shard, never between two shards that stayed. Any process that knows
the list of shards computes the same owner, with no table to share.

The hash is BLAKE2b with a fixed key, so placement is the same in every
process and every Python run (the built-in `hash` of a string is not).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["shard_for"]

_PERSON: Final = b"mcp-actors-shard"  # 16 bytes: BLAKE2b's personalization


def _score(shard: str, session_id: str) -> int:
    digest = hashlib.blake2b(
        f"{len(shard)}:{shard}{session_id}".encode(), digest_size=8, person=_PERSON
    )
    return int.from_bytes(digest.digest(), "big")


def shard_for(session_id: str, shards: Sequence[str]) -> str:
    """The shard of `shards` that owns `session_id`.

    The order of `shards` does not matter. Raises ValueError for an empty
    list or a name given twice (two shards by one name would split a
    session's keys between them).
    """
    if not shards:
        msg = "no shards to place the session on"
        raise ValueError(msg)
    if len(set(shards)) != len(shards):
        repeated = sorted({shard for shard in shards if shards.count(shard) > 1})
        msg = f"shard names must be unique, got {', '.join(map(repr, repeated))} more than once"
        raise ValueError(msg)
    return max(shards, key=lambda shard: (_score(shard, session_id), shard))
