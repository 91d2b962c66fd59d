"""Invariant 12 (a handle names one conversation, for its tenant alone), with 2 (no leakage)
and 11 (no shared fallback), hammered by a Hypothesis state machine of clients that name no
session and carry a server-minted conversation handle.

The approach
------------
`HandleMachine` starts conversations (``conversation__start``) as several principals
(two tokens of tenant ``alice``, one of ``bob``, and anonymous clients) and has them
call an append-only log concurrently, each call carrying a handle and naming no
session: where it lands is the handle's choice, and must be its conversation's alone.

* Two fronts, as two ``serve --http`` processes behind one load balancer would be:
  two runtimes, each with a store of its own on one SQLite file, and one `HandleKeys`
  for both (``--handle-key-file``), whose clock the machine moves. Each front serves
  the Streamable HTTP app ``serve`` builds twice, with tokens and without (for the
  anonymous clients), all on a trio loop in a background thread (`TrioThread`).
* A call reaches either front, in the 2026 era (no protocol session at all) or the
  2025 era (an ``Mcp-Session-Id``, which the handle overrides), over a new connection
  for that call alone (LangChain's ``get_tools()`` default) or over a connection that
  stays open across steps and carries calls of several conversations at once.
* The module is the session-less machine's durable log: every append goes through
  the store and every reply names the session the call landed in.
* Attacks: a conversation's handle called by another tenant; a handle tampered with
  (one character changed), made up (random bytes of the right form), signed with a
  key the fronts do not hold, or not a handle at all; a handle that outlived its
  lifetime (the clock moves by rules).

Invariants, after every step: every conversation reads exactly its own appends (on a
front whose copy is current, in the era the step's count picks) until its handle
expires, and is then refused saying so; a refused handle is told to start a new
conversation and changes nothing (the stores hold no session that no accepted call
landed in, and what they hold is the model's log); no two conversations share a
session; every stored session is in the tenant of the principal that minted its
handle. Messages start with the invariant's name (`CONVERSATIONS_APART`, `REFUSED`,
`ONE_SESSION_EACH`, `TENANT_BOUND`).

One allowance: a read on a front that served a conversation before another front's
append may answer from its older copy (`HandleMachine.stale_read_allowed`): versioned
writes make every append right on any front, not every read.

The last tests run the machine with foils, deliberately broken handle keys that serve
the same ``mint``/``session_for`` protocol, and prove that Hypothesis finds each:
handles whose tag ignores the tenant, handles read for their minter's tenant instead
of the caller's, handles drawn from two nonces (they collide), and handles that never
expire.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import shutil
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import attrs
import pytest
import trio
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from actors import open_runtime
from actors.server import ServeOptions, http_app
from actors.server.http._app import http_adapter
from actors.store import open_store
from protocol import (
    HANDLE_ARGUMENT,
    HANDLE_PREFIX,
    HANDLE_TOOL,
    TENANT_SEPARATOR,
    HandleKeys,
)

from .._mcp_helpers import InProcessHttp, asgi_lifespan, texts
from .._stateful_harness import TrioThread, machine_settings
from .test_isolation_sessionless import DURABLE, LOG

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator, Sequence

    from mcp import ClientSession, types

    from actors import Runtime
    from actors.store import StateStore

    from .._mcp_helpers import Era

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

CONVERSATIONS_APART: Final = "invariant 12 (a handle names one conversation), 2 (no leakage)"
REFUSED: Final = "invariant 12 (a handle names one conversation), a bad handle creates nothing"
ONE_SESSION_EACH: Final = "invariant 12 (a handle names one conversation), one session each"
TENANT_BOUND: Final = "invariant 12 (a handle names one conversation, for its tenant alone)"

FRONTS: Final = ("A", "B")
ERAS: Final[tuple[Era, ...]] = ("modern", "legacy")
LIFETIME: Final = 1000
"""Seconds a handle lasts here: the machine's clock moves by rules."""
START: Final = 1_000_000
TIMEOUT: Final = 30.0
"""Seconds a step's connections and calls may take before the test fails."""
KEY: Final = b"the fronts' shared handle key, 32+ bytes"
FOREIGN_KEY: Final = b"a key that no front of this cluster holds"


@attrs.frozen
class Principal:
    """Who calls: a bearer token bound to a tenant, or an anonymous client (no token)."""

    name: str
    tenant: str | None
    token: str | None


PRINCIPALS: Final = {
    principal.name: principal
    for principal in (
        Principal("alice", "alice", "alice-token-0123456789"),
        Principal("alice-2", "alice", "alice-second-token-0123"),  # one tenant, two tokens
        Principal("bob", "bob", "bob-token-0123456789ab"),
        Principal("anonymous", None, None),
    )
}
TOKENS: Final = {p.token: p.tenant for p in PRINCIPALS.values() if p.token is not None}


class Clock:
    """The fronts' clock, which rules move: a handle's age is the machine's to choose."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return float(self.now)


class Keys(Protocol):
    """What a front mints and reads handles with: `HandleKeys`, or a foil below."""

    def mint(self, tenant: str | None) -> str:
        """A new conversation's handle, for a caller of `tenant`."""
        ...

    def session_for(self, handle: object, tenant: str | None) -> str:
        """The session `handle` names for a caller of `tenant`; HandleError if none."""
        ...


def right_keys(clock: Clock) -> Keys:
    """The keys as ``serve`` builds them: the fronts' one key, `clock`, `LIFETIME`."""
    return HandleKeys((KEY,), clock, LIFETIME)


# ---- the fronts, the connections, the calls ----------------------------------------------


@attrs.frozen
class Front:
    """One ``serve --http`` process, in this one: a runtime on its store, its apps by kind."""

    runtime: Runtime
    store: StateStore
    with_tokens: InProcessHttp
    anonymous: InProcessHttp

    def app_for(self, principal: Principal) -> InProcessHttp:
        """Where `principal`'s requests go: the app with tokens, or the one without."""
        return self.anonymous if principal.token is None else self.with_tokens


@attrs.define(eq=False)
class Connection:
    """A client connection that stays open across steps, and its task on the loop."""

    number: int
    principal: Principal
    front: int
    era: Era
    peer: ClientSession | None = None
    closing: trio.Event = attrs.Factory(trio.Event)
    closed: trio.Event = attrs.Factory(trio.Event)

    def __repr__(self) -> str:
        return (
            f"connection {self.number} of {self.principal.name} to front {FRONTS[self.front]} "
            f"({self.era})"
        )


@attrs.frozen
class Route:
    """How one call travels: as `principal`, over `connection` or a new one to `front`."""

    principal: Principal
    front: int
    era: Era
    connection: Connection | None = None

    def describe(self) -> str:
        if self.connection is not None:
            return f"over {self.connection!r}"
        return (
            f"as {self.principal.name} over a new connection to front {FRONTS[self.front]} "
            f"({self.era})"
        )


@attrs.define(eq=False)
class World:
    """The fronts, and the tasks of the open connections, on the loop."""

    fronts: list[Front]
    nursery: trio.Nursery
    connections: list[Connection] = attrs.Factory(list)

    async def open(self, connection: Connection) -> None:
        """Connect `connection`; return once it is open."""
        self.connections.append(connection)
        with trio.fail_after(TIMEOUT):
            await self.nursery.start(self._host, connection)

    async def close(self, connection: Connection) -> None:
        """Close `connection` (a 2025-era one sends DELETE); return once it has."""
        connection.closing.set()
        with trio.fail_after(TIMEOUT):
            await connection.closed.wait()

    def _session(self, principal: Principal, front: int, era: Era) -> Any:
        return self.fronts[front].app_for(principal).session(principal.token, era)

    async def _host(self, connection: Connection, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            async with self._session(connection.principal, connection.front, connection.era) as p:
                connection.peer = p
                task_status.started()
                await connection.closing.wait()
        finally:
            connection.peer = None
            connection.closed.set()

    async def call(
        self, route: Route, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """Call tool `name` with `arguments` the way `route` says."""
        if route.connection is not None:
            assert route.connection.peer is not None, f"{route.connection!r} is closed"
            result: types.CallToolResult = await route.connection.peer.call_tool(name, arguments)
            return result
        async with self._session(route.principal, route.front, route.era) as peer:
            result = await peer.call_tool(name, arguments)
            return result


@asynccontextmanager
async def open_world(path: Path, keys: Keys) -> AsyncIterator[World]:
    """Two fronts on one SQLite file sharing `keys`; open connections close at the end."""
    url = f"sqlite:///{path}"
    served = {
        "with_tokens": ServeOptions(modules=(LOG,), http=("127.0.0.1", 0), tokens=TOKENS),
        "anonymous": ServeOptions(modules=(LOG,), http=("127.0.0.1", 0)),
    }
    async with contextlib.AsyncExitStack() as stack:
        fronts = []
        for _ in FRONTS:
            store = await stack.enter_async_context(open_store(url))
            runtime = await stack.enter_async_context(open_runtime([LOG], store=store))
            apps = {}
            for kind, options in served.items():
                app = http_app(http_adapter(runtime, options, handles=keys), options)
                await stack.enter_async_context(asgi_lifespan(app))
                apps[kind] = InProcessHttp(app, runtime)
            fronts.append(Front(runtime, store, **apps))
        async with trio.open_nursery() as nursery:
            world = World(fronts, nursery)
            try:
                yield world
            finally:
                with trio.move_on_after(TIMEOUT):
                    for connection in world.connections:
                        await world.close(connection)
                nursery.cancel_scope.cancel()


async def run_lanes(
    world: World, lanes: Sequence[Sequence[tuple[Route, str, dict[str, Any]]]]
) -> list[list[types.CallToolResult]]:
    """Run each lane's calls one after the other, all lanes concurrently."""
    results: list[list[types.CallToolResult]] = [[] for _ in lanes]

    async def run_lane(index: int) -> None:
        for route, name, arguments in lanes[index]:
            results[index].append(await world.call(route, name, arguments))

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for index in range(len(lanes)):
                nursery.start_soon(run_lane, index)
    return results


async def stored_logs(world: World) -> list[dict[str, list[str]]]:
    """What each front's store holds: the log of every session it has a key of."""
    held = []
    for front in world.fronts:
        logs = {}
        for entry in await front.store.entries():
            stored = await front.store.load(entry.key)
            assert stored is not None, f"{entry.key!r} is listed but holds nothing"
            logs[entry.key.context.session_id] = DURABLE.load(stored.blob, entry.key).entries
        held.append(logs)
    return held


def _tenant_of(session: str) -> str | None:
    """The tenant a conversation's session is in: ``T`` of ``T/c-…``, None for ``c-…``."""
    tenant, separator, _ = session.rpartition(TENANT_SEPARATOR)
    return tenant if separator else None


# ---- the model ------------------------------------------------------------------------------


@attrs.define(eq=False)
class Conversation:
    """One started conversation: who minted it, when, its handle and its own appends."""

    number: int
    minter: Principal
    handle: str
    minted: int
    """The clock's reading when it was minted."""
    log: list[str] = attrs.Factory(list)
    session: str | None = None
    """Where its calls land, once a reply has said so."""
    served: dict[int, int] = attrs.Factory(dict)
    """How much of its log each front that served it has answered with or written."""
    current_on: set[int] = attrs.Factory(set)
    """The fronts whose copy of its state is known to be current: the last append's, and
    those that read it whole since."""

    def __repr__(self) -> str:
        return f"conversation {self.number} of {self.minter.name} ({self.handle[:9]}…)"

    def expired(self, now: int) -> bool:
        """Whether its handle has outlived `LIFETIME` at `now`."""
        return now - self.minted > LIFETIME


@attrs.frozen
class Way:
    """How a call travels, as drawn: to a front in an era, or over an open connection."""

    front: int
    era: Era
    kept: int | None
    """Which open connection carries it (modulo their number), if any: then its principal
    is the caller."""


@attrs.frozen
class Plan:
    """One call of a lane, as drawn: an append or a read, who sends it and how."""

    append: bool
    caller: str
    """A principal's name, or ``minter``: the conversation's own (unless `way` picks an
    open connection: then that connection's principal calls)."""
    way: Way


@attrs.frozen
class Expected:
    """What one call must get: accepted in its conversation, or refused saying `why`."""

    conversation: Conversation
    value: str | None
    route: Route
    why: str | None
    """``knows no conversation`` or ``expired``; None when the call must be accepted."""

    def describe(self) -> str:
        call = "read()" if self.value is None else f"append({self.value!r})"
        return f"{call} with the handle of {self.conversation!r} {self.route.describe()}"

    @property
    def arguments(self) -> dict[str, Any]:
        carried: dict[str, Any] = {HANDLE_ARGUMENT: self.conversation.handle}
        if self.value is not None:
            carried["value"] = self.value
        return carried

    @property
    def tool(self) -> str:
        return f"{LOG.name}__{'read' if self.value is None else 'append'}"


@attrs.frozen
class Forgery:
    """A bad handle, as drawn: its kind, and what each kind is made of."""

    kind: Literal["tampered", "made up", "foreign key", "not a handle"]
    position: int
    replacement: str
    raw: bytes
    text: str

    def handle(self, real: str, tenant: str | None, clock: Clock) -> str:
        """The bad handle: `real` tampered with, made up, foreign (for `tenant`), or text."""
        if self.kind == "tampered":
            # One character after the prefix changed: every bit of a handle is signed.
            body = real[len(HANDLE_PREFIX) :]
            index = self.position % len(body)
            replacement = self.replacement
            if replacement == body[index]:  # a change, always: "B" for an "A", else "A"
                replacement = "B" if replacement == "A" else "A"
            return HANDLE_PREFIX + body[:index] + replacement + body[index + 1 :]
        if self.kind == "made up":  # the right form and version; no front signed it
            return (
                HANDLE_PREFIX + base64.urlsafe_b64encode(b"\x01" + self.raw).rstrip(b"=").decode()
            )
        if self.kind == "foreign key":  # well made, for the caller's tenant, by another cluster
            return HandleKeys((FOREIGN_KEY,), clock, LIFETIME).mint(tenant)
        return self.text

    def describe(self, conversation: Conversation) -> str:
        if self.kind == "tampered":
            return f"{conversation!r}'s handle tampered with at {self.position}"
        return {
            "made up": "a handle made up",
            "foreign key": "a handle signed with a key no front holds",
            "not a handle": f"{self.text!r}, not a handle",
        }[self.kind]


# ---- the machine ------------------------------------------------------------------------------

principals = st.sampled_from(list(PRINCIPALS.values()))
fronts = st.integers(0, len(FRONTS) - 1)
eras = st.sampled_from(ERAS)
# Mostly the conversation's own minter; else any principal, of its tenant or another's.
callers = st.sampled_from(("minter", "minter", "minter", *PRINCIPALS))
ways = st.builds(Way, front=fronts, era=eras, kept=st.none() | st.integers(0, 3))
plans = st.builds(Plan, append=st.sampled_from((True, True, False)), caller=callers, way=ways)
base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
forgeries = st.builds(
    Forgery,
    kind=st.sampled_from(("tampered", "made up", "foreign key", "not a handle")),
    position=st.integers(0, 55),
    replacement=st.sampled_from(base64url),
    raw=st.binary(min_size=41, max_size=41),
    text=st.text(max_size=70),
)


class HandleMachine(RuleBasedStateMachine):
    """Conversations started and called by several principals over two fronts and both eras."""

    conversations = Bundle("conversations")
    connections = Bundle("connections")

    # What the fronts mint and read handles with; a foil below overrides it.
    keys: Callable[[Clock], Keys] = staticmethod(right_keys)

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="handles-"))
        self.clock = Clock()
        keys = type(self).keys(self.clock)
        self.loop = TrioThread(lambda: open_world(self.folder / "state.db", keys))
        self.world: World = self.loop.runtime
        self.numbers = itertools.count()
        self.values = itertools.count()
        self.origin: dict[str, Conversation | str] = {}  # every value sent -> whose it is
        self.everyone: list[Conversation] = []
        self.open: list[Connection] = []
        self.reads = itertools.count()

    def teardown(self) -> None:
        try:
            self.loop.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    # ---- rules ------------------------------------------------------------------------------

    @rule(target=connections, principal=principals, front=fronts, era=eras)
    def open_connection(self, principal: Principal, front: int, era: Era) -> Connection:
        connection = Connection(next(self.numbers), principal, front, era)
        self.loop.run(self.world.open, connection)
        self.open.append(connection)
        return connection

    @rule(connection=consumes(connections))
    def close_connection(self, connection: Connection) -> None:
        """A 2025-era connection's close ends its own session: never a conversation's."""
        self.open.remove(connection)
        self.loop.run(self.world.close, connection)

    @rule(target=conversations, principal=principals, way=ways)
    def start_conversation(self, principal: Principal, way: Way) -> Conversation:
        route = self._route(principal, way)
        principal = route.principal
        result = self.loop.run(self.world.call, route, HANDLE_TOOL, {})
        said = f"{HANDLE_TOOL} {route.describe()}"
        assert not result.is_error, f"{said} failed: {texts(result)}"
        assert result.structured_content is not None, f"{said} returned no handle"
        handle = result.structured_content[HANDLE_ARGUMENT]
        for other in self.everyone:
            if other.handle == handle:
                raise AssertionError(
                    f"{ONE_SESSION_EACH}: {said} returned the handle of {other!r} again"
                )
        conversation = Conversation(next(self.numbers), principal, handle, self.clock.now)
        self.everyone.append(conversation)
        return conversation

    @precondition(lambda self: len(self.everyone) > 1)
    @rule(
        lanes=st.lists(
            st.tuples(conversations, st.lists(plans, min_size=1, max_size=3)),
            min_size=2,
            max_size=4,
            unique_by=lambda lane: id(lane[0]),
        )
    )
    def calls_of_several_conversations(self, lanes: list[tuple[Conversation, list[Plan]]]) -> None:
        """Several conversations' calls at once; each lane one conversation's, in order."""
        self._run([[self._expect(talk, plan) for plan in plans] for talk, plans in lanes])

    @precondition(lambda self: bool(self.everyone))
    @rule(conversation=conversations, plans=st.lists(plans, min_size=2, max_size=5))
    def calls_of_one_conversation(self, conversation: Conversation, plans: list[Plan]) -> None:
        """One conversation's calls in turn, each by its own way: fronts, eras, connections."""
        self._run([[self._expect(conversation, plan) for plan in plans]])

    @precondition(lambda self: bool(self.everyone))
    @rule(conversation=conversations, forgery=forgeries, principal=principals, way=ways)
    def bad_handle_is_refused(
        self, conversation: Conversation, forgery: Forgery, principal: Principal, way: Way
    ) -> None:
        """A handle tampered with (`conversation`'s), made up, signed with a key no front
        holds, or not a handle: refused, saying to start anew; nothing is made for it."""
        value = f"v{next(self.values)}"
        self.origin[value] = "a refused call"
        handle = forgery.handle(conversation.handle, principal.tenant, self.clock)
        arguments = {"value": value, HANDLE_ARGUMENT: handle}
        route = self._route(principal, way)
        result = self.loop.run(self.world.call, route, f"{LOG.name}__append", arguments)
        text = texts(result)
        if not result.is_error or HANDLE_TOOL not in text:
            raise AssertionError(
                f"{REFUSED}: append({value!r}) with {forgery.describe(conversation)} "
                f"{route.describe()} was not refused with a word to call {HANDLE_TOOL}: {text}"
            )

    @precondition(lambda self: bool(self.everyone))
    @rule()
    def some_time_passes(self) -> None:
        """Less than a handle's lifetime: its conversations go on."""
        self.clock.now += LIFETIME // 10

    @precondition(lambda self: bool(self.everyone))
    @rule()
    def a_handles_lifetime_passes(self) -> None:
        """Every handle minted so far expires, to the second."""
        self.clock.now += LIFETIME + 1

    # ---- what the rules share -----------------------------------------------------------

    def _route(self, principal: Principal, way: Way) -> Route:
        """How a call drawn as `way` travels: over the open connection it picks, if any, as
        that connection's principal; else as `principal` over a new connection."""
        if way.kept is not None and self.open:
            connection = self.open[way.kept % len(self.open)]
            return Route(connection.principal, connection.front, connection.era, connection)
        return Route(principal, way.front, way.era)

    def _expect(self, conversation: Conversation, plan: Plan) -> Expected:
        named = conversation.minter if plan.caller == "minter" else PRINCIPALS[plan.caller]
        route = self._route(named, plan.way)
        caller = route.principal
        why = self._refusal(conversation, caller)
        value = None
        if plan.append:
            value = f"v{next(self.values)}"
            self.origin[value] = conversation if why is None else "a refused call"
        return Expected(conversation, value, route, why)

    def _refusal(self, conversation: Conversation, caller: Principal) -> str | None:
        """Why a call of `caller` with `conversation`'s handle must be refused; None: it
        must not."""
        if caller.tenant != conversation.minter.tenant:
            return "knows no conversation"  # as a forged one: nothing tells that it exists
        if conversation.expired(self.clock.now):
            return "expired"
        return None

    def _run(self, lanes: list[list[Expected]]) -> None:
        calls = [[(call.route, call.tool, call.arguments) for call in lane] for lane in lanes]
        results = self.loop.run(run_lanes, self.world, calls)
        for lane, lane_results in zip(lanes, results, strict=True):
            for call, result in zip(lane, lane_results, strict=True):
                self._check(call, result)

    # ---- checks ---------------------------------------------------------------------------------

    def _check(self, call: Expected, result: types.CallToolResult) -> None:
        """The reply is what the model says: the refusal, or exactly the conversation's log."""
        said = call.describe()
        conversation, text = call.conversation, texts(result)
        if call.why is not None:
            if not result.is_error or call.why not in text or HANDLE_TOOL not in text:
                raise AssertionError(
                    f"{REFUSED}: {said} must be refused ({call.why}, with a word to call "
                    f"{HANDLE_TOOL}); it got: {text}"
                )
            return
        assert not result.is_error, f"{CONVERSATIONS_APART}: {said} failed: {text}"
        data = result.structured_content
        assert data is not None, f"{said} returned no data"
        log, session = data["log"], data["session"]
        said = f"{said} returned {log} in session {session!r}"
        for other in self.everyone:
            if other is not conversation and other.session == session:
                raise AssertionError(f"{ONE_SESSION_EACH}: {said}, where {other!r} landed too")
        if _tenant_of(session) != conversation.minter.tenant:
            raise AssertionError(
                f"{TENANT_BOUND}: {said}, outside the tenant {conversation.minter.tenant!r} "
                "of its minter"
            )
        for value in log:
            source = self.origin.get(value, "nobody")
            if source is not conversation:
                raise AssertionError(
                    f"{CONVERSATIONS_APART}: {said}, but {value!r} is {source!r}'s"
                )
        if conversation.session is None:
            conversation.session = session
        if session != conversation.session:
            raise AssertionError(
                f"{CONVERSATIONS_APART}: {said}, but it lives in {conversation.session!r}"
            )
        self._check_log(call, said, log)

    def _check_log(self, call: Expected, said: str, log: list[str]) -> None:
        """An append returns the whole log; so does a read, unless its front may answer from
        a copy it holds from before another front's append (`stale_read_allowed`)."""
        conversation, front = call.conversation, call.route.front
        own = conversation.log if call.value is None else [*conversation.log, call.value]
        # An older copy is a prefix of the log, and no older than what this front last had.
        older = conversation.served.get(front, 0) <= len(log) and log == own[: len(log)]
        if log != own and not (self.stale_read_allowed(call) and older):
            raise AssertionError(f"{CONVERSATIONS_APART}: {said}, but its own appends are {own}")
        conversation.served[front] = len(log)
        if call.value is not None:
            conversation.log.append(call.value)
            conversation.current_on = {front}
        elif log == own:
            conversation.current_on.add(front)

    @staticmethod
    def stale_read_allowed(call: Expected) -> bool:
        """Whether `call` may return an older prefix of its conversation's log.

        A front's actor keeps a conversation's state in memory; another front's append
        reaches the store, but the first front learns of it only when its own next write
        is refused (versioned writes, guarantee 9: one writer, not one reader). So a read
        on a front that served the conversation before, and not since its latest append
        elsewhere, may answer with the older state. The `mcp-actors cluster` routes every
        key to its one owner; two plain ``serve`` fronts on one store do not.
        """
        conversation, front = call.conversation, call.route.front
        return (
            call.value is None
            and front in conversation.served
            and front not in conversation.current_on
        )

    @invariant()
    def every_conversation_reads_exactly_its_own_appends_until_it_expires(self) -> None:
        """Read as its minter, on the front and in the era this read's number picks: its
        log, or, once its handle has expired, a refusal that says so."""
        number = next(self.reads)
        lanes = [
            [Expected(talk, None, self._reading(talk, number), self._refusal(talk, talk.minter))]
            for talk in self.everyone
        ]
        if lanes:
            self._run(lanes)

    @staticmethod
    def _reading(conversation: Conversation, number: int) -> Route:
        """Read `number`'s route for `conversation`: as its minter, on a front whose copy is
        current (else either), in the era the number picks."""
        current = sorted(conversation.current_on) or list(range(len(FRONTS)))
        front = current[number % len(current)]
        return Route(conversation.minter, front, ERAS[number // 2 % 2])

    @invariant()
    def the_stores_hold_exactly_the_conversations_logs_in_their_tenants(self) -> None:
        """Nothing for a refused call, each conversation's own log, in its minter's tenant."""
        held: list[dict[str, list[str]]] = self.loop.run(stored_logs, self.world)
        of_session = {c.session: c for c in self.everyone if c.session is not None}
        for front, logs in zip(FRONTS, held, strict=True):
            for session, log in logs.items():
                conversation = of_session.get(session)
                if conversation is None:
                    raise AssertionError(
                        f"{REFUSED}: front {front}'s store holds {log} in session {session!r}, "
                        "where no accepted call landed"
                    )
                if _tenant_of(session) != conversation.minter.tenant:
                    raise AssertionError(
                        f"{TENANT_BOUND}: front {front}'s store holds {conversation!r} in "
                        f"{session!r}, outside its minter's tenant"
                    )
            for conversation in of_session.values():
                stored = logs.get(conversation.session or "", [])
                if stored != conversation.log:
                    raise AssertionError(
                        f"{CONVERSATIONS_APART}: front {front}'s store holds {stored} for "
                        f"{conversation!r}, whose own appends are {conversation.log}"
                    )


# 15 to 40 seconds on a loaded 2-core machine: each example builds two fronts.
_SETTINGS: Final = machine_settings(max_examples=50, stateful_step_count=12)

TestHandlesKeepConversationsApart = HandleMachine.TestCase
TestHandlesKeepConversationsApart.settings = _SETTINGS


# ---- proof that the machine can fail: foils ---------------------------------------------------


@attrs.frozen
class TenantBlindTag:
    """Foil: handles signed for no tenant, and read into the caller's tenant: a handle then
    works in every tenant, each landing in a conversation of its own."""

    keys: HandleKeys

    def mint(self, tenant: str | None) -> str:
        """A handle signed as if no tenant minted it."""
        return self.keys.mint(None)

    def session_for(self, handle: object, tenant: str | None) -> str:
        """The handle's session, checked for no tenant, put in the caller's."""
        session = self.keys.session_for(handle, None)
        return session if tenant is None else tenant + TENANT_SEPARATOR + session


@attrs.frozen
class MinterTenantKeys:
    """Foil: a handle read for its minter's tenant, not the caller's (as if the handle named
    its tenant unsigned, and the reader trusted it): another tenant reaches the conversation."""

    keys: HandleKeys
    minters: dict[str, str | None] = attrs.Factory(dict)

    def mint(self, tenant: str | None) -> str:
        """A handle bound to `tenant`, which is noted beside it."""
        handle = self.keys.mint(tenant)
        self.minters[handle] = tenant
        return handle

    def session_for(self, handle: object, tenant: str | None) -> str:
        """The handle's session for its minter's tenant, whoever calls."""
        return self.keys.session_for(handle, self.minters.get(str(handle), tenant))


@attrs.frozen
class FewNonces:
    """Foil: handles whose nonce comes from a pool of two: every other handle minted has
    the same nonce, and within one tenant the same nonce is the same conversation."""

    keys: HandleKeys
    pool: Iterator[bytes] = attrs.Factory(lambda: itertools.cycle((b"\x01", b"\x02")))

    def mint(self, tenant: str | None) -> str:
        """A handle bound to `tenant`, its nonce the pool's next."""
        byte = next(self.pool)
        return self.keys.mint(tenant, nonce=lambda size: byte * size)

    def session_for(self, handle: object, tenant: str | None) -> str:
        """As `HandleKeys` reads it."""
        return self.keys.session_for(handle, tenant)


class TenantBlindMachine(HandleMachine):
    """The machine, with handles whose tag ignores the tenant."""

    keys = staticmethod(lambda clock: TenantBlindTag(right_keys(clock)))


class MinterTenantMachine(HandleMachine):
    """The machine, with handles read for their minter's tenant, whoever calls."""

    keys = staticmethod(lambda clock: MinterTenantKeys(right_keys(clock)))


class CollidingMachine(HandleMachine):
    """The machine, with handles of two nonces."""

    keys = staticmethod(lambda clock: FewNonces(right_keys(clock)))


class EndlessMachine(HandleMachine):
    """The machine, with handles that never expire."""

    keys = staticmethod(lambda clock: HandleKeys((KEY,), clock, float(LIFETIME * 10**9)))


# Hypothesis found each foil within 4 to 105 examples (about 10 typically; 30 runs of each).
# Derandomized: a run that finds a foil finds it again, on every machine (the full suite's
# load once let a random one miss the expiry foil in 200 examples).
_PROOF: Final = settings(
    _SETTINGS,
    max_examples=200,
    derandomize=True,
    phases=[Phase.generate],
    report_multiple_bugs=False,
    print_blob=False,
)


def found(machine: type[HandleMachine]) -> str:
    """The message of the first failure Hypothesis finds in `machine`, unshrunk.

    `failure_of` shrinks it too, which here costs a minute a foil (each example builds two
    fronts); the steps that led to the failure are printed all the same (``-s``).
    """
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(machine, settings=_PROOF)
    print(*getattr(failure.value, "__notes__", []), failure.value, sep="\n")
    return str(failure.value)


def test_machine_finds_a_handle_whose_tag_ignores_the_tenant() -> None:
    """Another tenant's call with the handle is served (in a conversation of its own)."""
    message = found(TenantBlindMachine)
    assert message.startswith(REFUSED), message
    assert "(knows no conversation" in message


def test_machine_finds_a_handle_read_for_its_minters_tenant() -> None:
    """Another tenant's call reaches the conversation: an anonymous caller's is served, a
    tenant's is refused only by its token's reach, without a word to start anew."""
    message = found(MinterTenantMachine)
    assert message.startswith(REFUSED), message
    assert "(knows no conversation" in message


def test_machine_finds_two_conversations_of_one_handle() -> None:
    message = found(CollidingMachine)
    assert message.startswith(ONE_SESSION_EACH), message


def test_machine_finds_a_handle_that_outlives_its_lifetime() -> None:
    message = found(EndlessMachine)
    assert message.startswith(REFUSED), message
    assert "(expired" in message
