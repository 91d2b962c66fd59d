"""Which shard owns a session: rendezvous (highest random weight) hashing.

Every shard gets a score for the session, a hash of (shard, session), and the
highest score wins. All of a session's keys (every module, assistant and
thread) therefore sit on one shard, and when a shard joins or leaves, only
the sessions whose winner changed move: about 1/N of them, each to or from
that one shard, never between two shards that stayed. Any process that knows
the list of shards computes the same owner, with no table to share.

The hash is BLAKE2b with a fixed key, so placement is the same in every
process and every Python run (the built-in `hash` of a string is not).

A `Membership` is the list of shards at one epoch: what a cluster's processes
agree on to route, and compare by epoch to tell which of two views is newer.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final, final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["Membership", "shard_for"]

_PERSON: Final = b"mcp-actors-shard"  # 16 bytes: BLAKE2b's personalization


def _score(shard: str, session_id: str) -> int:
    digest = hashlib.blake2b(
        f"{len(shard)}:{shard}{session_id}".encode(), digest_size=8, person=_PERSON
    )
    return int.from_bytes(digest.digest(), "big")


def _check_shards(shards: Sequence[str]) -> None:
    if not shards:
        msg = "no shards to place the session on"
        raise ValueError(msg)
    if len(set(shards)) != len(shards):
        repeated = sorted({shard for shard in shards if shards.count(shard) > 1})
        msg = f"shard names must be unique, got {', '.join(map(repr, repeated))} more than once"
        raise ValueError(msg)


def _owner(session_id: str, shards: Iterable[str]) -> str:
    return max(shards, key=lambda shard: (_score(shard, session_id), shard))


def shard_for(session_id: str, shards: Sequence[str]) -> str:
    """The shard of `shards` that owns `session_id`.

    The order of `shards` does not matter. Raises ValueError for an empty
    list or a name given twice (two shards by one name would split a
    session's keys between them).
    """
    _check_shards(shards)
    return _owner(session_id, shards)


def _shard_names(shards: Iterable[str]) -> tuple[str, ...]:
    names = tuple(shards)
    _check_shards(names)
    return names


@final
@attrs.frozen
class Membership:
    """The shards of a cluster at one epoch; each change makes the next epoch.

    Raises ValueError for no shards, a name given twice, or a negative epoch.
    """

    epoch: int = attrs.field(validator=attrs.validators.ge(0))
    """Counts the changes: of two views of one cluster, the higher epoch is the newer."""
    shards: tuple[str, ...] = attrs.field(converter=_shard_names)
    """The shard names, in the order they joined."""

    def owner(self, session_id: str) -> str:
        """The shard that owns `session_id` (`shard_for`)."""
        return _owner(session_id, self.shards)

    def moves(self, session_id: str, later: Membership) -> bool:
        """Whether `session_id` has another owner in `later` than in this membership."""
        return self.owner(session_id) != later.owner(session_id)

    def successor(self, shards: Iterable[str]) -> Membership:
        """The membership of `shards`, one epoch later."""
        return Membership(self.epoch + 1, tuple(shards))
