"""A cluster front is a whole host: channels back from a shard's tools, and changes from shards.

On a real local Ray (one instance for the module: it takes seconds to start)
with the suite's modules (`tests.hosts._modules`), imported in every shard by
spec: a tool on a shard asks (a form, the client's model), logs and reports
progress, and the front's caller hears it; a watcher of the front hears the
changes and the session ends of every shard, a shard that joins included, and
no shard streams anything once nobody watches; a cancelled asking call leaves
nothing waiting on its shard; and over MCP, the official SDK client answers a
shard's form and hears its log, its progress and a resource update.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pytest
import trio
from mcp import types
from mcp.shared.exceptions import MCPDeprecationWarning

from actors import Answer, CannotAskError
from actors.testing import connect

from ..core.test_resources import PLAIN_FORM, ScriptedAsker
from ..hosts._modules import SPECS

ray = pytest.importorskip("ray")

from actors.cluster import Cluster, connect_cluster, open_cluster  # noqa: E402  (needs ray)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Mapping

    from actors import LogMessage
    from actors._prepare import Route
    from actors._progress import ProgressReport
    from protocol import Membership

_SAY_HI = {"role": "user", "content": {"type": "text", "text": "Say hi."}}
DEADLINE = 60.0  # seconds anything on Ray may take here, at most (it is far less)


@pytest.fixture(scope="module", autouse=True)
def _ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with open_cluster(list(SPECS), shards=2, state="memory") as opened:
        yield opened


def session_on(shard: str, membership: Membership, prefix: str = "s") -> str:
    """A session `membership` places on `shard`."""
    return next(f"{prefix}-{n}" for n in range(1000) if membership.owner(f"{prefix}-{n}") == shard)


def meta(session: str) -> dict[str, Any]:
    return {"sessionId": session}


class Silent:
    """A front's asker whose user never answers; `asked` is set once a form is shown."""

    def __init__(self) -> None:
        self.asked = trio.Event()

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        self.asked.set()
        await trio.sleep_forever()
        raise AssertionError  # never reached

    async def sample(self, messages: Any, **_: Any) -> str:
        raise AssertionError  # the test asks only a form


class Refusing:
    """A front's asker whose client cannot be asked."""

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        raise CannotAskError("cannot ask the user: this client declared no elicitation")

    async def sample(self, messages: Any, **_: Any) -> str:
        raise CannotAskError("cannot ask the client's model: this client declared no sampling")


async def run(
    cluster: Cluster,
    name: str,
    session: str,
    arguments: dict[str, Any] | None = None,
    **channels: Any,
) -> Any:
    prepared = cluster.prepare({"name": name, "arguments": arguments or {}, "_meta": meta(session)})
    return await cluster.run(prepared, **channels)


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait until `check` holds (asked of Ray again and again), within the deadline."""
    with trio.fail_after(DEADLINE):
        while not await check():  # noqa: ASYNC110  (the shard is asked: no event to wait on)
            await trio.sleep(0.05)


async def test_a_shard_s_tools_ask_log_and_report_to_the_front(cluster: Cluster) -> None:
    """On each shard: a form answered, the model asked, every log message and report heard."""
    for shard in cluster.shards:
        session = session_on(shard, cluster.membership)
        asker = ScriptedAsker()  # accepts each form with {"confirm": True}
        confirmed = await run(cluster, "asking__confirm", session, ask=asker)
        assert confirmed.structured_content == {"action": "accept", "content": {"confirm": True}}
        assert asker.asked == [("Go ahead?", PLAIN_FORM)]
        consulted = await run(cluster, "asking__consult", session, ask=asker)
        assert consulted.first_text == "the model's answer"
        assert asker.asked[-1] == ("sample", ([_SAY_HI], 5, "Be brief.", None))
        logs: list[LogMessage] = []
        words = ["one", "two", "three", "four"]
        chatty = await run(cluster, "asking__chatty", session, {"words": words}, log=logs.append)
        assert chatty.first_text == "done"
        assert [(m.level, m.text, m.logger) for m in logs] == [
            ("debug", "one", None),
            ("info", "two", "chatty"),
            ("warning", "three", None),
            ("error", "four", None),
        ]
        reports: list[ProgressReport] = []
        walked = await run(cluster, "steps__walk", session, {"steps": 3}, progress=reports.append)
        assert walked.first_text == "walked"
        assert [(r.progress, r.total, r.message) for r in reports] == [
            (n, 3, f"step {n}") for n in (1, 2, 3)
        ]


async def test_a_question_the_front_cannot_ask_fails_as_in_process(cluster: Cluster) -> None:
    """The front's refusal reaches the tool as CannotAskError; no asker, the runtime's own."""
    session = session_on(cluster.shards[0], cluster.membership)
    refused = await run(cluster, "asking__confirm", session, ask=Refusing())
    assert refused.is_error
    assert refused.first_text == "cannot ask the user: this client declared no elicitation"
    no_asker = await run(cluster, "asking__confirm", session, log=lambda _: None)
    assert no_asker.is_error
    assert "this call has no client to ask" in no_asker.first_text


async def test_a_cancelled_asking_call_leaves_no_waiter_on_its_shard(cluster: Cluster) -> None:
    """The front's caller goes away while the tool waits for its user: the shard lets it go."""
    shard = cluster.shards[1]
    session = session_on(shard, cluster.membership, "cancelled")
    handle = ray.get_actor(f"{cluster.name}/{shard}", namespace="mcp-actors")
    asker = Silent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: run(cluster, "asking__confirm", session, ask=asker))
        with trio.fail_after(DEADLINE):
            await asker.asked.wait()
        assert list((await _conversations(handle)).values()) == [1]  # one call, one question
        nursery.cancel_scope.cancel()
    await eventually(lambda: _no_conversation(handle))
    # The tool ended (its key's turn is free): the key's next call is answered.
    with trio.fail_after(DEADLINE):
        after = await run(cluster, "asking__chatty", session, {"words": ["a", "b", "c", "d"]})
    assert after.first_text == "done"


async def _conversations(handle: Any) -> dict[str, int]:
    conversations: dict[str, int] = await trio.to_thread.run_sync(
        ray.get, handle.conversations.remote()
    )
    return conversations


async def _no_conversation(handle: Any) -> bool:
    return not await _conversations(handle)


async def test_a_call_with_channels_follows_its_session_to_a_new_owner() -> None:
    """A front with an old membership is answered `Moved`, and its asking call goes on there."""
    with open_cluster(list(SPECS), shards=1, state="memory") as cluster:
        stale = connect_cluster(cluster.name)  # reads the membership before the change
        added = cluster.add_shard()
        session = session_on(added, cluster.membership, "moved")
        assert stale.shard_of(session) != added
        asker = ScriptedAsker(Answer("decline"))
        declined = await run(stale, "asking__confirm", session, ask=asker)
        assert declined.structured_content == {"action": "decline", "content": None}
        assert stale.shard_of(session) == added  # it read the new membership
        assert stale.routing_statistics().calls_sent == 2  # sent again once, to the new owner


class Heard:
    """A watcher noting every change it is told of, waking whoever waits for one."""

    def __init__(self) -> None:
        self.changed: list[Route] = []
        self.ended: list[str] = []
        self._news = trio.Event()

    def key_changed(self, route: Route) -> None:
        self.changed.append(route)
        self._news.set()

    def session_ended(self, session_id: str) -> None:
        self.ended.append(session_id)
        self._news.set()

    async def until(self, check: Callable[[], bool]) -> None:
        with trio.fail_after(DEADLINE):
            while not check():
                await self._news.wait()
                self._news = trio.Event()


async def test_a_watcher_of_the_front_hears_every_shard_while_it_watches() -> None:
    """Changes and ends on each shard, and on a shard that joined; nothing streams after."""
    with open_cluster(list(SPECS), shards=2, state="memory") as cluster:
        heard = Heard()
        unwatch = cluster.watch(heard)
        sessions = [session_on(shard, cluster.membership, "watched") for shard in cluster.shards]
        for session in sessions:
            await cluster.call_tool("notes__add_note", {"text": "hi"}, meta=meta(session))
        await heard.until(
            lambda: {("notes", s, None, None) for s in sessions} <= set(heard.changed)
        )
        await cluster.end_session(sessions[0])
        await heard.until(lambda: heard.ended == [sessions[0]])
        await trio.to_thread.run_sync(cluster.add_shard)
        joined = session_on(cluster.shards[-1], cluster.membership, "joined")
        await cluster.call_tool("notes__add_note", {"text": "hi"}, meta=meta(joined))
        await heard.until(lambda: ("notes", joined, None, None) in heard.changed)
        assert all(route[1] in {*sessions, joined} for route in heard.changed)
        handles = [
            ray.get_actor(f"{cluster.name}/{s}", namespace="mcp-actors") for s in cluster.shards
        ]
        assert await _watching(handles) == [1, 1, 1]
        unwatch()
        await eventually(lambda: _none_watching(handles))


async def _watching(handles: list[Any]) -> list[int]:
    refs = [handle.watching.remote() for handle in handles]
    watching: list[int] = await trio.to_thread.run_sync(ray.get, refs)
    return watching


async def _none_watching(handles: list[Any]) -> bool:
    return not any(await _watching(handles))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_mcp_a_shard_s_tool_reaches_the_sdk_client(cluster: Cluster, mode: str) -> None:
    """The SDK client answers a shard's form and hears its log and progress, in both eras."""
    forms: list[types.ElicitRequestParams] = []
    logs: list[Any] = []
    reports: list[float] = []

    async def answer(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        forms.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def logged(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def progressed(progress: float, _total: float | None, _message: str | None) -> None:
        reports.append(progress)

    session = session_on(cluster.shards[1], cluster.membership, "mcp")
    async with connect(
        cluster, mode=mode, elicitation_callback=answer, logging_callback=logged, log_level="debug"
    ) as client:
        if mode == "legacy":  # its level is the connection's, set by a request of its own
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("debug")
        confirmed = await client.call_tool("asking__confirm", {}, meta=meta(session))
        assert confirmed.structured_content == {"action": "accept", "content": {"confirm": True}}
        assert [form.message for form in forms] == ["Go ahead?"]
        words = ["one", "two", "three", "four"]
        chatty = await client.call_tool("asking__chatty", {"words": words}, meta=meta(session))
        assert not chatty.is_error
        assert logs == words
        walked = await client.call_tool(
            "steps__walk", {"steps": 3}, progress_callback=progressed, meta=meta(session)
        )
        assert not walked.is_error
        assert reports
        assert reports[-1] == 3  # the newest goes out last (the relay may skip some between)


async def test_over_mcp_a_subscription_hears_a_call_on_a_shard(cluster: Cluster) -> None:
    """``resources/subscribe`` through the front; a call on the session's shard updates it."""
    updated: list[str] = []
    news = trio.Event()

    async def heard(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            news.set()

    session = session_on(cluster.shards[0], cluster.membership, "subscribed")
    other = session_on(cluster.shards[1], cluster.membership, "other")
    async with connect(cluster, mode="legacy", message_handler=heard) as client:
        with warnings.catch_warnings():  # removed from 2026-07-28 on; this is 2025-11-25
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource("notes://all", meta=meta(session))
        await client.call_tool("notes__add_note", {"text": "elsewhere"}, meta=meta(other))
        await client.call_tool("notes__add_note", {"text": "here"}, meta=meta(session))
        with trio.fail_after(DEADLINE):
            await news.wait()
        assert updated == ["notes://all"]  # the other session's change was not this key's
