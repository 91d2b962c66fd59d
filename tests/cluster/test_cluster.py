"""Shards on a real local Ray (num_cpus=2) over a real PostgreSQL: placement and failover.

One Ray instance for the module (it takes seconds to start); each test opens
its own cluster on a fresh database.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing

from actors import RuntimeConfig, UnknownToolError
from actors.lowlevel import prepare_call
from protocol import ProtocolError

from .._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401  (fixtures)

ray = pytest.importorskip("ray")

from ray.exceptions import GetTimeoutError, RayActorError  # noqa: E402

from actors.cluster import (  # noqa: E402  (needs ray)
    NAMESPACE,
    RoutingStatistics,
    ShardLostError,
    open_cluster,
)
from actors.cluster import _cluster as cluster_module  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from actors.cluster import Cluster


@pytest.fixture(scope="module", autouse=True)
def _ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def goal(session: str, text: str) -> dict[str, Any]:
    return {
        "name": "planning__create_goal",
        "arguments": {"goal": text},
        "_meta": {"sessionId": session},
    }


def goals(cluster: Cluster, session: str) -> str:
    listing = {"name": "planning__list_goals", "arguments": {}, "_meta": {"sessionId": session}}
    return cluster.call_blocking(listing).first_text


SESSIONS = [f"s{n}" for n in range(12)]
PLANNING = ["actors.modules:planning"]


def test_each_session_lives_on_its_shard_and_sees_only_its_state(fresh_postgres_url: str) -> None:
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        placed = {session: cluster.shard_of(session) for session in SESSIONS}
        assert set(placed.values()) == set(cluster.shards)  # both shards hold sessions
        for session in SESSIONS:
            result = cluster.call_blocking(goal(session, f"goal of {session}"))
            assert not result.is_error, result.first_text
        for session in SESSIONS:
            assert goals(cluster, session) == f"Goals (1):\n- g1: goal of {session}"
        assert cluster.pid_of("shard-0") != cluster.pid_of("shard-1")


def test_bad_input_is_refused_before_it_crosses(fresh_postgres_url: str) -> None:
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        with pytest.raises(UnknownToolError):
            cluster.call_blocking({"name": "planning__nope", "_meta": {"sessionId": "s"}})
        with pytest.raises(ProtocolError):
            cluster.call_blocking({"name": "planning__list_goals", "_meta": {"sessionId": 7}})
        bad = cluster.call_blocking(
            {"name": "planning__create_goal", "arguments": {"goal": 3}, "_meta": {"sessionId": "s"}}
        )
        assert bad.is_error
        assert "$.goal: expected a string" in bad.first_text


def test_a_killed_shard_comes_back_with_every_acknowledged_change(fresh_postgres_url: str) -> None:
    """kill -9 of a shard's process: Ray restarts it and its sessions load from PostgreSQL."""
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        victim = "shard-0"
        mine = [session for session in SESSIONS if cluster.shard_of(session) == victim]
        assert mine
        for session in mine:
            assert not cluster.call_blocking(goal(session, "before")).is_error
        old = cluster.pid_of(victim)
        os.kill(old, signal.SIGKILL)
        answers = _until_back(cluster, mine[0])
        assert cluster.pid_of(victim) != old
        for session in mine:
            listed = goals(cluster, session)
            assert listed.startswith("Goals ("), listed
            assert "- g1: before" in listed  # acknowledged before the kill: still there
        # Calls refused while the shard was down said so; none was silently dropped.
        assert all("was lost during the call" in text for text in answers[:-1])


def _until_back(cluster: Cluster, session: str) -> list[str]:
    """Call until the restarted shard answers; every answer's text, the last a success."""
    answers = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result = cluster.call_blocking(goal(session, "after"))
        answers.append(result.first_text)
        if not result.is_error:
            return answers
        time.sleep(0.2)
    pytest.fail(f"the shard did not come back: {answers[-3:]}")


@pytest.mark.parametrize("shared", [None, True], ids=["fenced", "checked"])
def test_two_owners_of_one_session_lose_no_update(
    fresh_postgres_url: str, shared: bool | None
) -> None:
    """Two clusters (as during a handover) both serve one session: the store fences them.

    By default shards ask no version before a call, even on PostgreSQL (placement
    gives a session one owner): each stale owner's write is refused and its
    call runs again on the state as stored, so every acknowledged append is in
    the store, and the refusals show up as write conflicts. Told their store is
    shared, each owner asks the key's version before every call and loads what
    the other wrote: no write meets the fence, and either owner lists every goal.
    """
    session, appends = "contested", 15
    config = RuntimeConfig(shared_store=shared)
    with (
        open_cluster(PLANNING, shards=1, state=fresh_postgres_url, config=config) as first,
        open_cluster(PLANNING, shards=2, state=fresh_postgres_url, config=config) as second,
    ):
        acknowledged = [
            not cluster.call_blocking(goal(session, f"{label}{n}")).is_error
            for n in range(appends)
            for cluster, label in ((first, "a"), (second, "b"))  # turn by turn: always stale
        ]
        fenced = sum(s.write_conflicts for c in (first, second) for s in c.statistics().values())
        by_an_owner = goals(first, session)
    # Read through a new owner: a stale one's read-only calls see its own copy (no handover yet).
    with open_cluster(PLANNING, shards=1, state=fresh_postgres_url) as fresh:
        listed = goals(fresh, session)
    assert acknowledged.count(True) == 2 * appends
    assert listed.startswith(f"Goals ({2 * appends}):"), listed
    if shared is True:
        assert fenced == 0  # each owner loaded the other's writes before its own
        assert by_an_owner == listed
    else:
        assert fenced > 0  # the two owners did meet, and the store refused the stale one


def _load(cluster: Cluster, sessions: list[str], callers: int) -> tuple[Callable[[], None], Load]:
    """Callers in threads appending goals to `sessions` until stopped; what they saw."""
    load = Load({session: [] for session in sessions}, {session: [] for session in sessions}, [])
    stop = threading.Event()

    def call_until_stopped(mine: list[str]) -> None:
        for n in itertools.count():
            for session in mine:
                if stop.is_set():
                    return
                text = f"{session}-{n}"
                result = cluster.call_blocking(goal(session, text))
                if result.is_error:
                    load.errors.append(result.first_text)
                    load.uncertain[session].append(text)
                else:
                    load.acknowledged[session].append(text)

    threads = [
        threading.Thread(target=call_until_stopped, args=(sessions[n::callers],))
        for n in range(callers)
    ]
    for thread in threads:
        thread.start()

    def stop_and_join() -> None:
        stop.set()
        for thread in threads:
            thread.join()

    return stop_and_join, load


@attrs.frozen
class Load:
    acknowledged: dict[str, list[str]]  # by session, the appends that succeeded
    uncertain: dict[str, list[str]]  # by session, those answered with an error
    errors: list[str]

    def wait_for_each_session(self, *, errors_allowed: bool = False) -> None:
        """Until every session has two more acknowledged appends than now."""
        then = {session: len(appended) for session, appended in self.acknowledged.items()}
        deadline = time.monotonic() + 90
        while any(len(self.acknowledged[s]) < then[s] + 2 for s in then):
            assert time.monotonic() < deadline, "the load stalled"
            assert errors_allowed or not self.errors, self.errors[:3]
            time.sleep(0.05)


def _fenced(cluster: Cluster) -> int:
    """Writes the store refused to the cluster's shards now (a removed shard's go with it)."""
    return sum(s.write_conflicts for s in cluster.statistics().values())


def _owners_are_disjoint(cluster: Cluster) -> None:
    live = cluster.live_sessions()
    for (one, first), (other, second) in itertools.combinations(live.items(), 2):
        assert not first & second, f"{one} and {other} both hold {sorted(first & second)}"


def test_shards_added_and_removed_under_load_hand_sessions_over(fresh_postgres_url: str) -> None:
    """Add a shard, remove it, remove an original one, all while callers append.

    Every acknowledged append is in the store afterwards; no call failed; no
    write was fenced (a session never had two owners writing: the old one
    stopped before the new one loaded); no session is live on two shards.
    Removing the added shard moves its sessions back to shards that held them
    before: a stale copy left there would show as a fenced write and a lost
    append.
    """
    sessions = [f"load{n}" for n in range(24)]
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        before = {session: cluster.shard_of(session) for session in sessions}
        stop, load = _load(cluster, sessions, callers=4)
        try:
            load.wait_for_each_session()
            added = cluster.add_shard()
            moved = [s for s in sessions if cluster.shard_of(s) != before[s]]
            assert moved
            assert {cluster.shard_of(s) for s in moved} == {added}  # only to the new shard
            load.wait_for_each_session()
            _owners_are_disjoint(cluster)
            conflicts = _fenced(cluster)
            cluster.remove_shard(added)
            assert {s: cluster.shard_of(s) for s in sessions} == before
            load.wait_for_each_session()
            conflicts += _fenced(cluster)
            cluster.remove_shard("shard-0")
            load.wait_for_each_session()
        finally:
            stop()
        _owners_are_disjoint(cluster)
        assert cluster.shards == ("shard-1",)
        assert cluster.membership.epoch == 3
        assert not load.errors, load.errors[:3]
        for session, appended in load.acknowledged.items():
            listed = goals(cluster, session)
            assert listed.startswith(f"Goals ({len(appended)}):"), (session, listed[:80])
            assert all(f": {text}\n" in listed + "\n" for text in appended)
        conflicts += _fenced(cluster)
        assert sum(s.duplicate_actors for s in cluster.statistics().values()) == 0
    assert conflicts == 0


def test_membership_changes_refuse_bad_input(fresh_postgres_url: str) -> None:
    with open_cluster(PLANNING, shards=1, state=fresh_postgres_url) as cluster:
        with pytest.raises(ValueError, match="no shard 'shard-9'"):
            cluster.remove_shard("shard-9")
        with pytest.raises(ValueError, match="last shard"):
            cluster.remove_shard("shard-0")
        assert cluster.shards == ("shard-0",)
        assert cluster.membership.epoch == 0


def test_a_shard_killed_under_load_loses_no_acknowledged_change(fresh_postgres_url: str) -> None:
    """kill -9 of a shard while callers append: nothing acknowledged lost, nothing applied twice.

    A call that was on the shard when it died is answered with an error saying
    so: it may or may not have been applied (it is there at most once). Every
    acknowledged append is there; nothing of another session is.
    """
    sessions = [f"kill{n}" for n in range(16)]
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        victim = "shard-0"
        assert any(cluster.shard_of(s) == victim for s in sessions)
        stop, load = _load(cluster, sessions, callers=4)
        try:
            load.wait_for_each_session()
            old = cluster.pid_of(victim)
            os.kill(old, signal.SIGKILL)
            load.wait_for_each_session(errors_allowed=True)  # the victim's sessions are back
        finally:
            stop()
        assert cluster.pid_of(victim) != old  # Ray restarted it
        assert all("was lost during the call" in error for error in load.errors), load.errors[:3]
        for session in sessions:
            listed = goals(cluster, session).splitlines()[1:]  # "- gN: text" after the count
            texts = [line.split(": ", 1)[1] for line in listed]
            assert len(texts) == len(set(texts)), f"{session}: an append applied twice"
            acknowledged, uncertain = load.acknowledged[session], load.uncertain[session]
            assert set(acknowledged) <= set(texts), f"{session}: an acknowledged append lost"
            assert set(texts) <= set(acknowledged) | set(uncertain), f"{session}: foreign data"
        assert _fenced(cluster) == 0


def test_async_callers_on_trio_and_asyncio_reach_the_same_shards(fresh_postgres_url: str) -> None:
    """`Cluster.run` and `end_session` await Ray's replies on either loop, no thread per call."""
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:

        async def create_then_end(session: str) -> tuple[str, int]:
            prepared = prepare_call(cluster.registry, goal(session, "awaited"))
            created = await cluster.run(prepared)
            return created.first_text, await cluster.end_session(session)

        on_trio = trio.run(create_then_end, "on-trio")
        on_asyncio = asyncio.run(create_then_end("on-asyncio"))
        on_trio_again = trio.run(create_then_end, "on-trio")
    assert on_trio == on_asyncio == on_trio_again == ("Created goal g1: awaited", 1)


def test_a_handover_that_fails_is_called_off(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard gone for good fails the prepare: every shard goes on as before, nothing held."""
    monkeypatch.setattr(cluster_module, "_RETRY_FOR", 1.0)  # give up on the dead shard soon
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        mine = [s for s in SESSIONS if cluster.shard_of(s) == "shard-0"]
        for session in mine:
            assert not cluster.call_blocking(goal(session, "before")).is_error
        dead = ray.get_actor(f"{cluster.name}/shard-1", namespace=NAMESPACE)
        ray.kill(dead, no_restart=True)
        with pytest.raises(RayActorError):
            cluster.add_shard()
        assert cluster.membership.epoch == 0
        for session in mine:  # served, not held for a handover that will never come
            assert "- g2: after" in goals_after(cluster, session)
        with pytest.raises(RayActorError):  # refused by the dead shard, not "under way"
            cluster.add_shard()
        assert not _named(cluster, "shard-2")  # the shard it started is stopped


def goals_after(cluster: Cluster, session: str) -> str:
    assert not cluster.call_blocking(goal(session, "after")).is_error
    return goals(cluster, session)


def _named(cluster: Cluster, shard: str) -> bool:
    """Whether Ray still has a live actor of that name (a killed one may linger briefly).

    An actor that is slow to answer is not gone: only Ray saying so counts.
    """
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            handle = ray.get_actor(f"{cluster.name}/{shard}", namespace=NAMESPACE)
            ray.get(handle.pid.remote(), timeout=5)
        except (ValueError, RayActorError):
            return False
        except GetTimeoutError:
            pass  # a busy machine, or an actor on its way out: ask again
        time.sleep(0.1)
    return True


def test_each_shard_counts_the_calls_it_ran(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With metrics on, every shard's families say what ran there, and nothing else."""
    # A scrape leaves out a shard that is slow to answer, as a busy machine's may be.
    monkeypatch.setattr(cluster_module, "_SCRAPE_TIMEOUT", 60.0)
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url, metrics=True) as cluster:
        for session in SESSIONS:
            assert not cluster.call_blocking(goal(session, "counted")).is_error
        families = cluster.metric_families()
        placed = collections.Counter(cluster.shard_of(session) for session in SESSIONS)
    assert set(families) == {"shard-0", "shard-1"}
    for shard, shard_families in families.items():
        (calls,) = [family for family in shard_families if family.name == "mcp_actors_calls"]
        counted = {
            sample.labels["tool"]: sample.value
            for sample in calls.samples
            if sample.name == "mcp_actors_calls_total"
        }
        assert counted == {"planning__create_goal": placed[shard]}


def test_without_metrics_shards_report_none(fresh_postgres_url: str) -> None:
    with open_cluster(PLANNING, shards=1, state=fresh_postgres_url) as cluster:
        assert cluster.metric_families() == {"shard-0": []}


# ---- calls for one shard share Ray calls (the async path's lanes) ----------------------------

SLOW = ["actors.modules:planning", "tests._slow_module:slow"]


def _prepared(cluster: Cluster, params: dict[str, Any]) -> Any:
    return prepare_call(cluster.registry, params, cluster.config.policy)


def on_shard(cluster: Cluster, shard: str, count: int, prefix: str = "b") -> list[str]:
    """`count` session names that `shard` owns."""
    names = (f"{prefix}{n}" for n in itertools.count())
    return list(itertools.islice((s for s in names if cluster.shard_of(s) == shard), count))


def wait_for(session: str, path: str) -> dict[str, Any]:
    """A call that runs until a file exists at `path`: in flight for as long as a test wants."""
    return {"name": "slow__wait_for", "arguments": {"path": path}, "_meta": {"sessionId": session}}


def listing(session: str) -> dict[str, Any]:
    return {"name": "planning__list_goals", "arguments": {}, "_meta": {"sessionId": session}}


async def until_running(cluster: Cluster, live: dict[str, int]) -> None:
    """Wait until each shard has (at least) as many live actors as `live` says, at most 60 s."""

    def running() -> bool:
        statistics = cluster.statistics()
        return all(statistics[shard].live_actors >= count for shard, count in live.items())

    with trio.fail_after(60):
        while not await trio.to_thread.run_sync(running):  # noqa: ASYNC110  (a shard is asked)
            await trio.sleep(0.05)


async def until(done: Callable[[], bool]) -> None:
    """Wait until `done()` (a counter of the router, a dict the callers fill), at most 60 s."""
    with trio.fail_after(60):
        while not done():  # noqa: ASYNC110  (nothing to wait on: a predicate polled)
            await trio.sleep(0.01)


def test_calls_for_one_shard_share_ray_calls_and_keep_each_sessions_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls made at once go to each shard in two Ray calls: the first alone, the rest together.

    Each session's appends, made in one go on asyncio (whose tasks start in the order
    they were made), are in the store in that order: a batch runs its calls in order.
    """
    # Queued calls wait for the batch ahead however long making 80 calls takes here.
    monkeypatch.setattr(cluster_module, "_HOLD", 60.0)
    sessions, appends = [f"o{n}" for n in range(8)], 10
    with open_cluster(PLANNING, shards=2, state="memory") as cluster:

        async def append_all() -> list[str]:
            made = [goal(s, f"{s}-{n}") for n in range(appends) for s in sessions]
            results = await asyncio.gather(*(cluster.run(_prepared(cluster, c)) for c in made))
            return [result.first_text for result in results]

        texts = asyncio.run(append_all())
        sent = cluster.routing_statistics()
        shards = {cluster.shard_of(session) for session in sessions}
        for session in sessions:
            listed = goals(cluster, session).splitlines()[1:]
            assert [line.split(": ", 1)[1] for line in listed] == [
                f"{session}-{n}" for n in range(appends)
            ]
        listings = cluster.routing_statistics()
    assert all(text.startswith("Created goal g") for text in texts)
    assert sent == RoutingStatistics(len(sessions) * appends, 2 * len(shards))
    # Through Cluster.call (a thread's, blocking on Ray): each call alone.
    assert listings == RoutingStatistics(sent.calls_sent + 8, sent.ray_calls + 8)


def test_many_callers_on_trio_share_ray_calls_in_order() -> None:
    """Callers that each append in turn: every append answered, in its order, in fewer Ray calls."""
    sessions, appends = [f"t{n}" for n in range(20)], 8
    with open_cluster(PLANNING, shards=2, state="memory") as cluster:

        async def caller(session: str) -> None:
            for n in range(appends):
                created = await cluster.run(_prepared(cluster, goal(session, f"{session}-{n}")))
                assert created.first_text == f"Created goal g{n + 1}: {session}-{n}"

        async def all_callers() -> None:
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(caller, session)

        trio.run(all_callers)
        sent = cluster.routing_statistics()
        listed = {session: goals(cluster, session) for session in sessions}
    assert sent.calls_sent == len(sessions) * appends
    assert sent.ray_calls < sent.calls_sent / 2, sent
    for text in listed.values():
        assert text.startswith(f"Goals ({appends}):"), text


def test_a_shard_lost_mid_batch_fails_that_batchs_calls_only(tmp_path: Path) -> None:
    """kill -9 of a shard with a batch in flight: its calls, and only they, say it was lost.

    Calls to the other shard in flight meanwhile are answered; one the lost shard
    answered before is not touched; the next call to its sessions reaches the
    restarted shard.
    """
    release = tmp_path / "release"
    with open_cluster(SLOW, shards=2, state="memory") as cluster:
        lost, kept = on_shard(cluster, "shard-0", 3), on_shard(cluster, "shard-1", 3)
        victim = cluster.pid_of("shard-0")
        outcomes: dict[str, str] = {}

        async def call(name: str, params: dict[str, Any]) -> None:
            try:
                outcomes[name] = (await cluster.run(_prepared(cluster, params))).first_text
            except ShardLostError as error:
                outcomes[name] = f"lost: {error}"

        async def scenario() -> None:
            await call("before", listing(lost[0]))
            async with trio.open_nursery() as nursery:
                for n, session in enumerate(lost):  # held there until the kill
                    nursery.start_soon(call, f"lost {n}", wait_for(session, str(release)))
                for n, session in enumerate(kept):
                    nursery.start_soon(call, f"kept {n}", wait_for(session, str(release)))
                await until(lambda: cluster.routing_statistics().calls_sent == 1 + 6)
                # At the shards and running: each held call keeps an actor of its session live.
                await until_running(cluster, {"shard-0": 1 + 3, "shard-1": 3})
                os.kill(victim, signal.SIGKILL)
                await until(lambda: sum(name.startswith("lost") for name in outcomes) == 3)
                release.touch()  # the other shard's calls may end now

        trio.run(scenario)
        after = _until_back(cluster, lost[0])
    assert outcomes["before"].startswith("No goals yet"), outcomes
    for n in range(len(lost)):
        assert outcomes[f"lost {n}"].startswith("lost: shard 'shard-0' was lost during the call")
    for n in range(len(kept)):
        assert outcomes[f"kept {n}"] == "the file is there"
    assert after[-1].startswith("Created goal g1")


def test_a_moved_call_in_a_batch_is_rerouted_alone(fresh_postgres_url: str) -> None:
    """A front with an old membership sends a batch: only the moved sessions' calls go again."""
    sessions = [f"m{n}" for n in range(24)]
    with open_cluster(PLANNING, shards=2, state=fresh_postgres_url) as cluster:
        stale = cluster_module.connect_cluster(cluster.name)
        cluster.add_shard()
        moved = [s for s in sessions if cluster.shard_of(s) == "shard-2"]
        assert moved
        assert stale.membership.epoch == 0

        async def append_all() -> list[str]:
            made = [goal(s, f"{s}-moved") for s in sessions]
            results = await asyncio.gather(*(stale.run(_prepared(stale, c)) for c in made))
            return [result.first_text for result in results]

        texts = asyncio.run(append_all())
        sent = stale.routing_statistics()
        listed = {session: goals(cluster, session) for session in sessions}
    assert all(text.startswith("Created goal g1") for text in texts), texts
    assert stale.membership.epoch == 1
    assert sent.calls_sent == len(sessions) + len(moved)  # the moved ones twice, no other
    for session, text in listed.items():
        assert text == f"Goals (1):\n- g1: {session}-moved"


def test_a_cancelled_caller_leaves_the_rest_of_its_batch_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while queued, a call is never sent; cancelled once sent, only its answer is
    dropped: the other calls of its batch are answered either way."""
    monkeypatch.setattr(cluster_module, "_HOLD", 60.0)  # queued calls wait for the batch ahead
    release = tmp_path / "release"
    with open_cluster(SLOW, shards=1, state="memory") as cluster:
        sessions = [f"c{n}" for n in range(5)]
        answers: dict[str, str] = {}

        async def call(name: str, params: dict[str, Any], scope: trio.CancelScope) -> None:
            with scope:
                answers[name] = (await cluster.run(_prepared(cluster, params))).first_text

        async def scenario() -> None:
            scopes = {name: trio.CancelScope() for name in ("ahead", "a", "withdrawn", "b")}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    call, "ahead", wait_for(sessions[0], str(release)), scopes["ahead"]
                )
                await until(lambda: cluster.routing_statistics().calls_sent == 1)
                for name, session in zip(("a", "withdrawn", "b"), sessions[1:], strict=False):
                    nursery.start_soon(call, name, listing(session), scopes[name])
                # All three queued behind the call ahead: every task of this run waits.
                await trio.testing.wait_all_tasks_blocked()
                assert cluster.routing_statistics().calls_sent == 1
                scopes["withdrawn"].cancel()
                await trio.testing.wait_all_tasks_blocked()
                scopes["ahead"].cancel()  # sent: it runs on; its answer is dropped
                release.touch()
            assert cluster.routing_statistics() == RoutingStatistics(3, 2)

        trio.run(scenario)
    assert set(answers) == {"a", "b"}  # "withdrawn" and "ahead" were cancelled
    assert all(text.startswith("No goals yet") for text in answers.values()), answers


def test_a_slow_call_holds_up_the_calls_behind_it_briefly(tmp_path: Path) -> None:
    """A call queued behind a batch that runs on goes after `_HOLD`, not when that batch ends."""
    release = tmp_path / "release"
    with open_cluster(SLOW, shards=1, state="memory") as cluster:
        quick: list[str] = []
        slow_done = trio.Event()

        async def run_slow() -> None:
            await cluster.run(_prepared(cluster, wait_for("slow", str(release))))
            slow_done.set()

        async def scenario() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_slow)
                await until(lambda: cluster.routing_statistics().calls_sent == 1)
                # Held behind the slow call's batch until it ends, these would wait for the
                # release, which comes only after them: a hang, cut by the generous deadline.
                with trio.fail_after(120):
                    for n in range(5):
                        result = await cluster.run(_prepared(cluster, listing(f"quick{n}")))
                        quick.append(result.first_text)
                answered_before_the_slow_one = not slow_done.is_set()
                release.touch()
            assert answered_before_the_slow_one

        trio.run(scenario)
    assert all(text.startswith("No goals yet") for text in quick), quick
