"""Placement (protocol.shard_for): one owner per session, and little movement on change."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import Membership, shard_for

SESSIONS = [f"tenant-{n % 7}/conversation-{n}" for n in range(20_000)]
FOUR = ["shard-0", "shard-1", "shard-2", "shard-3"]


@given(st.text(max_size=64), st.permutations(FOUR))
def test_the_order_of_the_shards_does_not_matter(session: str, shards: list[str]) -> None:
    assert shard_for(session, shards) == shard_for(session, FOUR)


def test_sessions_spread_evenly() -> None:
    counts = collections.Counter(shard_for(session, FOUR) for session in SESSIONS)
    assert set(counts) == set(FOUR)
    for count in counts.values():
        assert abs(count - len(SESSIONS) / 4) < 0.05 * len(SESSIONS) / 4


def test_a_new_shard_takes_about_a_fifth_and_nothing_else_moves() -> None:
    before = {session: shard_for(session, FOUR) for session in SESSIONS}
    after = {session: shard_for(session, [*FOUR, "shard-4"]) for session in SESSIONS}
    moved = [session for session in SESSIONS if before[session] != after[session]]
    assert all(after[session] == "shard-4" for session in moved)
    assert abs(len(moved) / len(SESSIONS) - 1 / 5) < 0.02


def test_a_shard_leaving_moves_only_its_own_sessions() -> None:
    before = {session: shard_for(session, FOUR) for session in SESSIONS}
    after = {session: shard_for(session, FOUR[:-1]) for session in SESSIONS}
    moved = {session for session in SESSIONS if before[session] != after[session]}
    assert moved == {session for session in SESSIONS if before[session] == "shard-3"}


def test_placement_is_the_same_in_every_process() -> None:
    """Another process, another string-hash seed: the same owners (and a pinned one)."""
    code = (
        "from protocol import shard_for; "
        f"print([shard_for(f's{{n}}', {FOUR!r}) for n in range(200)])"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert other.stdout.strip() == str([shard_for(f"s{n}", FOUR) for n in range(200)])
    assert shard_for("alpha/conversation-1", FOUR) == "shard-2"


@pytest.mark.parametrize(
    ("shards", "problem"),
    [([], "no shards"), (["a", "b", "a"], "'a' more than once")],
)
def test_bad_shard_lists_are_refused(shards: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        shard_for("s", shards)


class TestMembership:
    def test_owners_and_moves_follow_shard_for(self) -> None:
        now = Membership(3, tuple(FOUR))
        later = now.successor([*FOUR, "shard-4"])
        assert later.epoch == 4
        for session in SESSIONS[:500]:
            assert now.owner(session) == shard_for(session, FOUR)
            assert now.moves(session, later) == (later.owner(session) == "shard-4")

    @pytest.mark.parametrize(
        ("epoch", "shards", "problem"),
        [
            (0, (), "no shards"),
            (0, ("a", "a"), "'a' more than once"),
            (-1, ("a",), "'epoch' must be >= 0"),
        ],
    )
    def test_a_bad_membership_is_refused(
        self, epoch: int, shards: tuple[str, ...], problem: str
    ) -> None:
        with pytest.raises(ValueError, match=problem):
            Membership(epoch, shards)
