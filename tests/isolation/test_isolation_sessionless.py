"""Invariant 11 (no shared fallback), hammered by a Hypothesis state machine of clients that name
no session.

The approach
------------
`SessionlessMachine` opens and closes MCP clients as rules and has them call an
append-only log concurrently, never naming a session: where such a call lands
is the server's choice, and must be a session of the client's connection alone.

* Two servers, as two ``serve`` processes would be: two runtimes, each with a
  store of its own on one SQLite file, and each with the Streamable HTTP app
  ``serve --http`` builds (`http_app` of `http_adapter`), all on a trio loop
  in a background thread (`TrioThread`, in ``tests/_stateful_harness.py``).
* A *stdio connection* is the SDK's in-memory client on a new `McpAdapter` of
  its own, built with the default ``identify`` (the one client of a private
  session) and ``end_connection_sessions``, so closing it ends that session
  as ``serve`` ends a stdio connection's. An *HTTP session* is the SDK's
  Streamable HTTP client over httpx2's ASGI transport, with an
  ``Mcp-Session-Id`` of its own; closing it sends DELETE. Each client lives
  in a task of its own on the loop, from its opening rule to its closing rule.
* The module's state is durable, so every append goes through the store, and
  it records the session it was made for, so every reply says where the call
  landed. Every appended value is unique, so its origin is known.
* The model is each client's own log. Every call must return exactly its
  client's earlier appends (plus its own value), nothing of any other client,
  open or closed; no two clients may land in one session. After every step
  each open client reads its log, the store must hold exactly that log under
  the client's session, and nothing under a closed client's session, on
  either server; live actors exist only for open clients' sessions.
* A 2026-era client without ``Mcp-Session-Id`` or tenant has no session of
  its own: its sessionless calls must be refused, and change nothing.

The last tests run the same machine with stdio connections that land in one
shared session (the design before every connection got a session of its own)
and with connections whose session outlives them, and prove that Hypothesis
finds each as a break of invariant 11. A last one runs it with stdio
connections in the 2026 era, where the SDK serves every request on a
connection of its own: no request may end the session, and since the adapter
cannot see such a connection end (``serve`` ends a stdio connection's session
when its transport stops, tested with real processes in
``tests/server/test_connection_sessions.py``), a closed one's session is not
required to be gone.
"""

from __future__ import annotations

import functools
import itertools
import shutil
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

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
from mcp import Client as SdkClient

from actors import Durable, ToolModule, open_runtime
from actors.server import McpAdapter, ServeOptions, http_app, stdio_caller
from actors.server.http._app import http_adapter
from actors.store import open_store
from protocol import ActorKey, ToolContext

from .._mcp_helpers import InProcessHttp, asgi_lifespan, texts
from .._stateful_harness import TrioThread, failure_of, machine_settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from mcp import types

    from actors import Runtime
    from actors.store import StateStore

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

SERVERS: Final = ("A", "B")
CLOSE_TIMEOUT: Final = 10.0
"""Seconds a client's opening, calls or closing may take before the test fails."""
END_TIMEOUT: Final = 2.0
"""Seconds an HTTP session's end may take after its DELETE is answered."""

# ---- the module under test -------------------------------------------------------


@attrs.define
class SessionLog:
    """The module's durable state: the session it was made for, and the values appended."""

    session: str
    entries: list[str] = attrs.Factory(list)


DURABLE: Final = Durable(SessionLog)
LOG: Final = ToolModule("log", lambda context: SessionLog(context.session_id), durable=DURABLE)


@LOG.tool
async def append(state: SessionLog, value: str) -> dict[str, Any]:
    """Append `value`; return the session and the log after it."""
    entries = state.entries
    await trio.lowlevel.checkpoint()  # another call on this state meanwhile would lose one
    state.entries = [*entries, value]
    return {"session": state.session, "log": list(state.entries)}


@LOG.tool
def read(state: SessionLog) -> dict[str, Any]:
    """Return the session and the log."""
    return {"session": state.session, "log": list(state.entries)}


def _key(session: str) -> ActorKey:
    return ActorKey(LOG.name, ToolContext(session))


# ---- clients, calls and the servers they reach ---------------------------------------


@attrs.frozen
class Call:
    """One call that names no session: an append of `value`, or a read; other parts `via`."""

    value: str | None
    via: str
    """``nothing``, or an assistant in the arguments, or a thread in ``_meta``: still no session."""

    def describe(self) -> str:
        call = "read()" if self.value is None else f"append({self.value!r})"
        return call if self.via == "nothing" else f"{call} with {self.via}"


VIAS: Final = ("nothing", "an __assistantId", "a _meta threadId")


@attrs.define(eq=False)
class Client:
    """One MCP client of the machine, its model (its own log), and its task on the loop."""

    kind: str
    """``stdio`` (a connection of its own), ``http`` (an HTTP session), or ``stateless`` (a
    2026-era HTTP client, which has no session of its own)."""
    number: int
    server: int
    log: list[str] = attrs.Factory(list)
    """What it appended, in order: all that its session may hold."""
    session: str | None = None
    """Where its calls land, once a reply has said so."""
    open: bool = True
    peer: Any = None
    """The SDK's client object, while open."""
    closing: trio.Event = attrs.Factory(trio.Event)
    closed: trio.Event = attrs.Factory(trio.Event)

    def __repr__(self) -> str:
        state = "" if self.open else " (closed)"
        return f"{self.kind} client {self.number} on server {SERVERS[self.server]}{state}"


@attrs.frozen
class Server:
    """One ``serve`` process, in this one: a runtime on its store, and its HTTP app."""

    runtime: Runtime
    store: StateStore
    http: InProcessHttp


def private_connection_adapter(runtime: Runtime) -> McpAdapter:
    """A stdio connection's adapter: its calls that name no session land in its own, ended
    when it closes."""
    return McpAdapter(runtime, end_connection_sessions=True)


@attrs.define(eq=False)
class World:
    """The servers and the tasks of the open clients, on the loop."""

    servers: list[Server]
    nursery: trio.Nursery
    stdio_adapter: Callable[[Runtime], McpAdapter]
    mode: str
    """The protocol era of stdio connections, as the SDK's in-memory client names it."""
    clients: list[Client] = attrs.Factory(list)

    async def open(self, client: Client) -> None:
        """Connect `client`; return once it is initialized."""
        self.clients.append(client)
        with trio.fail_after(CLOSE_TIMEOUT):
            await self.nursery.start(self._host, client)

    async def close(self, client: Client) -> None:
        """Close `client` (stdio: end the connection; HTTP: DELETE); return once it is closed."""
        client.closing.set()
        with trio.fail_after(CLOSE_TIMEOUT):
            await client.closed.wait()

    def _connect(self, client: Client) -> Any:
        server = self.servers[client.server]
        if client.kind == "stdio":
            return SdkClient(self.stdio_adapter(server.runtime).server, mode=self.mode)
        return server.http.session(era="legacy" if client.kind == "http" else "modern")

    async def _host(self, client: Client, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            async with self._connect(client) as peer:
                client.peer = peer
                task_status.started()
                await client.closing.wait()
        finally:
            client.peer = None
            client.closed.set()


async def _call(client: Client, call: Call) -> types.CallToolResult:
    arguments: dict[str, Any] = {} if call.value is None else {"value": call.value}
    meta: dict[str, Any] | None = None
    if call.via == "an __assistantId":
        arguments["__assistantId"] = "a1"
    elif call.via == "a _meta threadId":
        meta = {"threadId": "t1"}
    name = f"{LOG.name}__{'read' if call.value is None else 'append'}"
    result: types.CallToolResult = await client.peer.call_tool(name, arguments, meta=meta)
    return result


async def _run_lanes(lanes: list[tuple[Client, list[Call]]]) -> list[list[types.CallToolResult]]:
    """Run each client's calls one after the other, all clients concurrently."""
    results: list[list[types.CallToolResult]] = [[] for _ in lanes]

    async def run_lane(index: int) -> None:
        client, calls = lanes[index]
        for call in calls:
            results[index].append(await _call(client, call))

    with trio.fail_after(CLOSE_TIMEOUT):
        async with trio.open_nursery() as nursery:
            for index in range(len(lanes)):
                nursery.start_soon(run_lane, index)
    return results


@asynccontextmanager
async def open_world(
    path: Path, stdio_adapter: Callable[[Runtime], McpAdapter], mode: str
) -> AsyncIterator[World]:
    """Two servers on one SQLite file, and a nursery for clients; open clients close at the end."""
    options = ServeOptions(modules=(LOG,), http=("127.0.0.1", 0))
    url = f"sqlite:///{path}"
    async with (
        open_store(url) as store_a,
        open_store(url) as store_b,
        open_runtime([LOG], store=store_a) as runtime_a,
        open_runtime([LOG], store=store_b) as runtime_b,
    ):
        servers = []
        for runtime, store in ((runtime_a, store_a), (runtime_b, store_b)):
            app = http_app(http_adapter(runtime, options), options)
            servers.append(Server(runtime, store, InProcessHttp(app, runtime)))
        async with (
            asgi_lifespan(servers[0].http.app),
            asgi_lifespan(servers[1].http.app),
            trio.open_nursery() as nursery,
        ):
            world = World(servers, nursery, stdio_adapter, mode)
            try:
                yield world
            finally:
                with trio.move_on_after(CLOSE_TIMEOUT):
                    for client in world.clients:
                        await world.close(client)
                nursery.cancel_scope.cancel()


@attrs.frozen
class Traces:
    """What the servers keep of one session: what each one's store holds, where it is live."""

    stored: tuple[SessionLog | None, ...]
    live: tuple[bool, ...]

    @property
    def gone(self) -> bool:
        return not any(self.stored) and not any(self.live)


async def _traces(world: World, session: str) -> Traces:
    stored = []
    for server in world.servers:
        blob = await server.store.load(_key(session))
        stored.append(None if blob is None else DURABLE.load(blob.blob, _key(session)))
    live = tuple(
        any(actor.key.context.session_id == session for actor in server.runtime.actors())
        for server in world.servers
    )
    return Traces(tuple(stored), live)


async def _stored_sessions(world: World) -> set[str]:
    """Every session that either server's store holds a key of."""
    return {
        entry.key.context.session_id
        for server in world.servers
        for entry in await server.store.entries()
    }


# ---- the machine ----------------------------------------------------------------------

servers = st.integers(0, len(SERVERS) - 1)
vias = st.sampled_from(VIAS)


class SessionlessMachine(RuleBasedStateMachine):
    """Stdio connections and HTTP sessions, opened and closed, whose calls name no session."""

    clients = Bundle("clients")

    # How a stdio connection's adapter is built, and its era; overridden below.
    stdio_adapter: Callable[[Runtime], McpAdapter] = staticmethod(private_connection_adapter)
    stdio_mode = "legacy"
    # Whether the adapter sees a stdio connection close, and so ends its session.
    stdio_close_ends_session = True

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="sessionless-"))
        opener = functools.partial(
            open_world, self.folder / "state.db", type(self).stdio_adapter, self.stdio_mode
        )
        self.loop = TrioThread(opener)
        self.world: World = self.loop.runtime
        self.numbers = itertools.count()
        self.values = itertools.count()
        self.origin: dict[str, Client | str] = {}  # every value sent -> who appended it
        self.everyone: list[Client] = []

    def teardown(self) -> None:
        try:
            self.loop.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _open(self, kind: str, server: int) -> Client:
        client = Client(kind, next(self.numbers), server)
        self.loop.run(self.world.open, client)
        self.everyone.append(client)
        return client

    @rule(target=clients, server=servers)
    def open_stdio_connection(self, server: int) -> Client:
        return self._open("stdio", server)

    @rule(target=clients, server=servers)
    def open_http_session(self, server: int) -> Client:
        return self._open("http", server)

    @precondition(lambda self: any(client.open for client in self.everyone))
    @rule(
        lanes=st.lists(
            st.tuples(
                clients,
                st.lists(
                    st.tuples(st.sampled_from((True, True, False)), vias), min_size=1, max_size=3
                ),
            ),
            min_size=1,
            max_size=4,
            unique_by=lambda lane: id(lane[0]),
        )
    )
    def concurrent_calls_on_clients(
        self, lanes: list[tuple[Client, list[tuple[bool, str]]]]
    ) -> None:
        planned = [
            (client, [Call(f"v{next(self.values)}" if add else None, via) for add, via in calls])
            for client, calls in lanes
        ]
        for client, calls in planned:
            for call in calls:
                if call.value is not None:
                    self.origin[call.value] = client
        results = self.loop.run(_run_lanes, planned)
        for (client, calls), lane_results in zip(planned, results, strict=True):
            for call, result in zip(calls, lane_results, strict=True):
                self._check_reply(client, call, result)
                if call.value is not None:
                    client.log.append(call.value)

    @rule(client=consumes(clients))
    def close(self, client: Client) -> None:
        self.loop.run(self.world.close, client)
        client.open = False
        if client.kind == "http" and client.session is not None:
            # The DELETE is answered before the HTTP session's task has unwound and ended
            # the session: wait for that end (a stdio connection's close includes it).
            self.loop.run(self._wait_gone, client)

    @rule(server=servers, via=vias)
    def stateless_client_is_refused(self, server: int, via: str) -> None:
        value = f"v{next(self.values)}"
        self.origin[value] = "a refused call"
        client = Client("stateless", next(self.numbers), server)

        async def call_once() -> types.CallToolResult:
            await self.world.open(client)
            try:
                return await _call(client, Call(value, via))
            finally:
                await self.world.close(client)

        result: types.CallToolResult = self.loop.run(call_once)
        text = texts(result)
        if not result.is_error or "names no session" not in text:
            raise AssertionError(
                f"invariant 11 (no shared fallback): {client!r} sent append({value!r}) naming no "
                f"session and without Mcp-Session-Id, and it was not refused: {text}"
            )

    # ---- checks ---------------------------------------------------------------------

    def _check_reply(self, client: Client, call: Call, result: types.CallToolResult) -> None:
        """The call's reply shows exactly its client's own log, in its client's own session."""
        said = f"{client!r}: {call.describe()}"
        assert not result.is_error, f"{said} failed: {texts(result)}"
        data = result.structured_content
        assert data is not None, f"{said} returned no data"
        log, session = data["log"], data["session"]
        said = f"{said} returned {log} in session {session!r}"
        for value in log:
            source = self.origin.get(value, "nobody")
            if source is not client:
                raise AssertionError(
                    f"invariant 11 (no shared fallback), invariant 2 (no leakage): {said}, but "
                    f"{value!r} was appended by {source!r}: two clients that name no session "
                    "share state"
                )
        for other in self.everyone:
            if other is not client and other.session == session:
                raise AssertionError(
                    f"invariant 11 (no shared fallback): {said}, where {other!r} also landed: "
                    "two clients that name no session share one"
                )
        if client.session is None:
            client.session = session
        expected = client.log if call.value is None else [*client.log, call.value]
        if session != client.session or log != expected:
            raise AssertionError(
                f"invariant 8 (durability): {said}, but its own appends are {expected}, in "
                f"session {client.session!r}: a connection's own session keeps its state while "
                "the connection is open"
            )

    async def _wait_gone(self, client: Client) -> None:
        assert client.session is not None
        with trio.move_on_after(END_TIMEOUT):
            # The session ends in the SDK's task for the HTTP session: no event to wait on.
            while not (await _traces(self.world, client.session)).gone:  # noqa: ASYNC110
                await trio.sleep(0.01)

    @invariant()
    def every_open_client_reads_exactly_its_own_appends(self) -> None:
        lanes = [(client, [Call(None, "nothing")]) for client in self.everyone if client.open]
        if not lanes:
            return
        results = self.loop.run(_run_lanes, lanes)
        for (client, (call,)), (result,) in zip(lanes, results, strict=True):
            self._check_reply(client, call, result)

    @invariant()
    def stores_hold_open_sessions_exactly_and_closed_ones_not_at_all(self) -> None:
        for client in self.everyone:
            if client.session is None:
                continue  # it made no call that got a reply
            traces: Traces = self.loop.run(_traces, self.world, client.session)
            where = f"session {client.session!r} of {client!r}"
            if not client.open:
                if client.kind == "stdio" and not self.stdio_close_ends_session:
                    continue
                if not traces.gone:
                    raise AssertionError(
                        f"invariant 11 (no shared fallback): {where} is still "
                        f"{'stored' if any(traces.stored) else 'live'} after its client closed: "
                        "a connection's own session ends with it"
                    )
                continue
            for server, state in zip(SERVERS, traces.stored, strict=True):
                entries = [] if state is None else state.entries
                if entries != client.log:
                    raise AssertionError(
                        f"invariant 11 (no shared fallback), invariant 2 (no leakage): server "
                        f"{server}'s store holds {entries} for {where}, whose own appends are "
                        f"{client.log}"
                    )
            on = [server for server, live in zip(SERVERS, traces.live, strict=True) if live]
            assert on == [SERVERS[client.server]], (
                f"{where} is live on {on}, not on its own server {SERVERS[client.server]} alone: "
                "a connection's own session lives while the connection is open"
            )
        # And nothing else: no session that no open client's call landed in.
        stored: set[str] = self.loop.run(_stored_sessions, self.world)
        landed = {
            client.session
            for client in self.everyone
            if client.open or (client.kind == "stdio" and not self.stdio_close_ends_session)
        }
        assert stored <= landed, (
            f"stored sessions {sorted(stored - landed)} belong to no open client"
        )


_SETTINGS: Final = machine_settings(max_examples=25, stateful_step_count=8)

TestSessionlessClientsAreIsolated = SessionlessMachine.TestCase
TestSessionlessClientsAreIsolated.settings = _SETTINGS


# ---- proof that the machine can fail ------------------------------------------------------


def shared_session_adapter(runtime: Runtime) -> McpAdapter:
    """Every stdio connection in one session nobody named: the fallback before this design."""
    caller = stdio_caller("default")
    return McpAdapter(runtime, identify=lambda _ctx: caller, end_connection_sessions=True)


class SharedFallbackMachine(SessionlessMachine):
    """The same machine, with stdio connections whose sessionless calls share one session."""

    stdio_adapter = staticmethod(shared_session_adapter)


class KeptSessionMachine(SessionlessMachine):
    """The same machine, with stdio connections whose own session outlives them."""

    stdio_adapter = staticmethod(lambda runtime: McpAdapter(runtime))


def test_machine_finds_two_connections_sharing_the_fallback_session() -> None:
    message = failure_of(SharedFallbackMachine, _SETTINGS)
    assert message.startswith("invariant 11 (no shared fallback)")
    assert "'default'" in message


def test_machine_finds_a_connections_session_outliving_it() -> None:
    message = failure_of(KeptSessionMachine, _SETTINGS)
    assert message.startswith("invariant 11 (no shared fallback)")
    assert "after its client closed" in message


# A known failure needs no shrinking, nor its explanation.
_KNOWN_FAILURE: Final = settings(_SETTINGS, phases=[Phase.generate], print_blob=False)


class ModernEraConnectionMachine(SessionlessMachine):
    """The same machine, with stdio connections in the 2026 era (the SDK client's default)."""

    stdio_mode = "auto"
    stdio_close_ends_session = False


def test_connections_in_the_2026_era_keep_their_session_while_open() -> None:
    """The SDK serves each 2026-era request on a connection of its own: none ends a session."""
    run_state_machine_as_test(ModernEraConnectionMachine, settings=_SETTINGS)
