"""Part of scenario ``mcp``: one light ``tools/call`` over Streamable HTTP at wire speed.

Three servers, each a subprocess on an ephemeral port of 127.0.0.1, started
once and always stopped:

* ``python -m actors serve --http … --state memory --log-level warning``, the
  default path (*new*);
* the same adapter behind the MCP SDK's own transport, every request through its
  session manager, on hypercorn (*SDK*: `benchmarks._sdk_transport_peer`, what
  ``serve --http`` was before it had a server and a fast path of its own);
* FastMCP 4 over Streamable HTTP (`benchmarks._fastmcp_server`, its access
  log off), when its virtual environment exists.

The call is the lightest one that keeps state: our ``planning__list_goals``
with the session named in ``_meta``, FastMCP's ``list_goals`` on a session its
``create_session`` minted once beforehand. The default path is loaded a second
way, as a contender of its own on the same process (*handle*): the same call
carrying a conversation handle that ``conversation__start`` minted, as the
``conversation`` argument, and no session in ``_meta``: what a client that names
no session sends (conversation handles are on by default over HTTP). Its server
CPU per call over the ``_meta``-named call's, paired by round, is judged.

Every call is sent in both protocol eras: 2026-07-28 (no HTTP session; the
``_meta`` envelope and headers of `benchmarks._http_floors`) and 2025-11-25
(``initialize`` and ``notifications/initialized`` first, then every request
carries ``Mcp-Session-Id`` and ``MCP-Protocol-Version``; answers may come as SSE).

wrk (`benchmarks._wrk`) repeats the one request for a fixed time at 1 and at
50 connections, rounds interleaved across servers, every answer checked for
``"isError":false``: a single mismatch fails the measurement instead of
producing a figure. The figures that decide are CPU times — the server's from
``/proc``, wrk's own from its rusage — since the machine is shared and wall
time drifts; calls/s and latencies are reported beside them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import attrs

from protocol import HANDLE_ARGUMENT, HANDLE_TOOL

from ._fastmcp_peer import FASTMCP_VERSION, find_fastmcp
from ._http_floors import (
    ACTORS_SERVE_URL,
    BODY,
    EXPECTED,
    HEADERS,
    TOOL,
    actors_serve,
    start_processes,
)
from ._measure import Stats
from ._report import Figure, Target, figure
from ._sdk_transport_peer import PEER
from ._sdk_transport_peer import command as sdk_transport_peer
from ._wrk import run_wrk

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from ._http_floors import Server
    from ._measure import Progress
    from ._sizes import Sizes
    from ._wrk import WrkResult

__all__ = [
    "CONNECTIONS",
    "CONTENDERS",
    "ERAS",
    "FASTMCP",
    "HANDLE",
    "NEW",
    "SDK",
    "SESSIONLESS",
    "Load",
    "envelope",
    "run_over_http",
]

NAME: Final = "mcp"
NEW: Final = "serve --http"
SDK: Final = PEER
HANDLE: Final = f"{NEW} (handle)"
FASTMCP: Final = f"FastMCP {FASTMCP_VERSION}"
CONTENDERS: Final = (NEW, HANDLE, SDK, FASTMCP)
"""In the order a round loads them (every other round, the reverse): the handle beside the
`_meta` call it is paired with, on the same server, so that the machine's drift touches the
pair alike."""
SESSIONLESS: Final = "2026-07-28"
SESSIONFUL: Final = "2025-11-25"
ERAS: Final = (SESSIONLESS, SESSIONFUL)
CONNECTIONS: Final = (1, 50)
CPU_TARGET: Final = Target("<=", 0.12)  # ours / the SDK transport's server CPU per call (#24)
RATE_TARGET: Final = Target(">=", 5)  # new / FastMCP calls/s at 50 connections (issue #24)
HANDLE_TARGET: Final = Target("<=", 1.1)  # handle / _meta server CPU per call (issue #35)
_FORGED: Final = '"isError":true'
"""What a call carrying a forged handle must get: proof the server reads the handle."""
WRK_HINT: Final = "apt-get install wrk"
PEER_HINT: Final = "pip install -e '.[bench]'"
_SERVER_SCRIPT: Final = Path(__file__).with_name("_fastmcp_server.py")

Runs = dict[tuple[str, str, int], list["WrkResult"]]
"""(contender, era, connections) -> one wrk run per round."""


@final
@attrs.frozen
class Load:
    """The one request wrk repeats against a server in one era."""

    body: str
    """The JSON-RPC ``tools/call`` it POSTs."""
    headers: Mapping[str, str]
    """Its HTTP headers."""


@final
@attrs.frozen
class _Contender:
    """A running server and its request in each era it serves."""

    name: str
    server: Server
    loads: dict[str, Load] = attrs.field(factory=dict)


# ---- requests --------------------------------------------------------------------------


def _call(name: str, arguments: Mapping[str, str], meta: Mapping[str, object]) -> str:
    """A ``tools/call`` request as compact JSON."""
    params: dict[str, object] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(request, separators=(",", ":"))


def envelope() -> dict[str, object]:
    """The 2026-era ``_meta`` envelope of `BODY`, without its ``sessionId``."""
    envelope: dict[str, object] = json.loads(BODY)["params"]["_meta"]
    del envelope["sessionId"]
    return envelope


def _headers_2025(session: str) -> dict[str, str]:
    """What a 2025-era client sends once it has an HTTP session."""
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": SESSIONFUL,
    }


def _post(url: str, body: str, headers: Mapping[str, str]) -> tuple[str | None, str]:
    """POST *body*: the answer's ``Mcp-Session-Id`` (if any) and its text."""
    request = urllib.request.Request(url, data=body.encode(), headers=dict(headers))
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("Mcp-Session-Id"), response.read().decode()


def _result_text(answer: str) -> str:
    """The text of a tool result, whether it came as JSON or as SSE ``data:`` lines."""
    lines = [line[5:].strip() for line in answer.splitlines() if line.startswith("data:")]
    message = json.loads(next((line for line in lines if line), answer))
    result = message.get("result") or {}
    if result.get("isError") is not False:
        msg = f"not a tool result: {answer[:300]!r}"
        raise RuntimeError(msg)
    return "".join(item.get("text", "") for item in result["content"])


def _handshake(url: str) -> str:
    """A 2025-era HTTP session: ``initialize``, then ``notifications/initialized``."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": SESSIONFUL,
            "capabilities": {},
            "clientInfo": {"name": "wrk", "version": "0"},
        },
    }
    first = {key: HEADERS[key] for key in ("Content-Type", "Accept")}
    session, _ = _post(url, json.dumps(initialize), first)
    if session is None:
        msg = f"{url} answered initialize without an Mcp-Session-Id"
        raise RuntimeError(msg)
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    _post(url, json.dumps(initialized), _headers_2025(session))
    return session


def _ours(url: str) -> dict[str, Load]:
    """Our request in each era: the session named in ``_meta``."""
    body_2025 = _call(TOOL, {}, {"sessionId": "bench"})
    return {
        SESSIONLESS: Load(BODY, HEADERS),
        SESSIONFUL: Load(body_2025, _headers_2025(_handshake(url))),
    }


def _handled(url: str) -> dict[str, Load]:
    """Our request in each era carrying a conversation handle instead of naming a session.

    The handle is minted once, as a 2026-era client does (``conversation__start``); the
    2025-era request carries it in an HTTP session of its own, where the handle wins.
    """
    meta = envelope()
    handle = _start_conversation(url, meta)
    loads = {
        SESSIONLESS: Load(_call(TOOL, {HANDLE_ARGUMENT: handle}, meta), HEADERS),
        SESSIONFUL: Load(
            _call(TOOL, {HANDLE_ARGUMENT: handle}, {}), _headers_2025(_handshake(url))
        ),
    }
    _refuses_forged(url, handle, loads)
    return loads


def _start_conversation(url: str, meta: Mapping[str, object]) -> str:
    """The handle ``conversation__start`` mints; an error saying so when there is none."""
    start = _call(HANDLE_TOOL, {}, meta)
    try:
        answer = _post(url, start, {**HEADERS, "Mcp-Name": HANDLE_TOOL})[1]
    except urllib.error.HTTPError as exc:  # a 400 for a tool the server does not list
        answer = exc.read().decode(errors="replace")
    found = (json.loads(answer).get("result") or {}).get("structuredContent") or {}
    if not isinstance(found.get(HANDLE_ARGUMENT), str):
        msg = (
            f"{NEW} minted no conversation handle ({HANDLE_TOOL} answered {answer[:300]!r}); "
            "serve it with conversation handles on (the default over HTTP)"
        )
        raise RuntimeError(msg)
    handle: str = found[HANDLE_ARGUMENT]
    return handle


def _refuses_forged(url: str, handle: str, loads: Mapping[str, Load]) -> None:
    """Raise unless a forged handle is refused in every era: the handle is read, not ignored.

    Otherwise a server that dropped the argument, running the call in some default
    session, would answer as fast and pass for a handle's cost.
    """
    forged = handle[:-4] + ("AAAA" if not handle.endswith("AAAA") else "BBBB")
    for era, load in loads.items():
        answer = _post(url, load.body.replace(handle, forged), load.headers)[1]
        if _FORGED not in answer:
            msg = (
                f"{NEW} ran a {era} call carrying a forged handle instead of refusing it: the "
                f"handle was not read, so its cost cannot be measured; it answered {answer[:300]!r}"
            )
            raise RuntimeError(msg)


def _theirs(url: str) -> dict[str, Load]:
    """FastMCP's request in each era, on one session its ``create_session`` minted."""
    headers = _headers_2025(_handshake(url))
    minted = _result_text(_post(url, _call("create_session", {}, {}), headers)[1])
    arguments = {"session_id": minted}
    return {
        SESSIONLESS: Load(
            _call("list_goals", arguments, envelope()),  # FastMCP's session is an argument
            {**HEADERS, "Mcp-Name": "list_goals"},
        ),
        SESSIONFUL: Load(_call("list_goals", arguments, {}), headers),
    }


def _answers(contender: _Contender, era: str) -> bool:
    """Whether one request of *era*, sent by hand, gets the expected answer."""
    load = contender.loads[era]
    try:
        return EXPECTED in _post(contender.server.url, load.body, load.headers)[1]
    except OSError:  # urllib's HTTPError among them: a 4xx for an era it does not speak
        return False


# ---- the servers -----------------------------------------------------------------------


@contextlib.contextmanager
def _started(fastmcp: str | None, notes: list[str]) -> Iterator[list[_Contender]]:
    """Every contender, listening and with its requests checked by hand."""
    commands = [(NEW, actors_serve(), ACTORS_SERVE_URL)]
    commands.append((SDK, sdk_transport_peer(), ACTORS_SERVE_URL))  # it prints what serve does
    if fastmcp is not None:
        # -I: the script's folder (this package) is not put on FastMCP's path. uvicorn
        # prints the port it bound.
        argv = [fastmcp, "-I", str(_SERVER_SCRIPT), "memory", "--http", "0", "--quiet"]
        commands.append((FASTMCP, argv, r"Uvicorn running on http://127\.0\.0\.1:(\d+)"))
    with start_processes(commands) as servers:
        contenders = [
            _Contender(s.name, s, _theirs(s.url) if s.name == FASTMCP else _ours(s.url))
            for s in servers
        ]
        new = contenders[0].server
        contenders.insert(1, _Contender(HANDLE, new, _handled(new.url)))
        for contender in contenders:
            _keep_served_eras(contender, notes)
        yield contenders


def _keep_served_eras(contender: _Contender, notes: list[str]) -> None:
    """Drop FastMCP's eras it does not answer (with a note); ours must answer both."""
    for era in ERAS:
        if _answers(contender, era):
            continue
        if contender.name != FASTMCP:
            msg = f"{contender.name} did not answer a {era} tools/call with a tool result"
            raise RuntimeError(msg)
        del contender.loads[era]
        notes.append(f"HTTP: {FASTMCP} does not serve {era}: its figures are of the other era")


# ---- the load --------------------------------------------------------------------------


def _loaded(contender: _Contender, era: str, connections: int, seconds: int) -> WrkResult:
    """One wrk run; raises, with the first wrong answer, unless every answer was right."""
    load = contender.loads[era]
    result = run_wrk(
        contender.server.url,
        body=load.body,
        headers=load.headers,
        connections=connections,
        seconds=seconds,
        server_pid=contender.server.process.pid,
        expected=EXPECTED,
        request_ids=True,  # 50 connections share one 2025-era session: ids must differ
    )
    if not result.clean or not result.requests:
        msg = (
            f"{contender.name}, {era}, {connections} connections: {result.mismatches} wrong "
            f"answers, {result.non_2xx} HTTP errors, {result.socket_errors} socket errors of "
            f"{result.requests}; first wrong answer: {result.first_mismatch!r}"
        )
        raise RuntimeError(msg)
    return result


def _measure(contenders: Sequence[_Contender], sizes: Sizes, progress: Progress) -> Runs:
    """A warm-up run each, then the rounds: connections, eras and servers interleaved.

    Every other round loads the servers in the reverse order: a pair run back to back
    (the handle and its `_meta` call above all) takes turns going first, so that
    whatever the first of two runs pays (the other runs' caches, a core just woken) is
    not always paid by the same side.
    """
    if sizes.http_warm_seconds:  # imports, caches, the allocator; not measured
        for contender in contenders:
            for era in contender.loads:
                _loaded(contender, era, max(CONNECTIONS), sizes.http_warm_seconds)
    runs: Runs = {}
    for number in range(sizes.http_rounds):
        progress(f"{NAME}: HTTP round {number + 1}/{sizes.http_rounds}")
        order = contenders if number % 2 == 0 else contenders[::-1]
        for connections in CONNECTIONS:
            for era in ERAS:
                for contender in order:
                    if era in contender.loads:
                        result = _loaded(contender, era, connections, sizes.http_seconds)
                        runs.setdefault((contender.name, era, connections), []).append(result)
    return runs


# ---- the figures -----------------------------------------------------------------------


def _server_us(result: WrkResult) -> float:
    """Server CPU µs per call (the server's pid is always given, so it is known)."""
    assert result.server_us_per_request is not None, "measured with the server's pid"
    return result.server_us_per_request


def _wrk_us(result: WrkResult) -> float:
    assert result.wrk_us_per_request is not None, "clean runs have requests"
    return result.wrk_us_per_request


def _per_run(runs: Sequence[WrkResult], value: Callable[[WrkResult], float]) -> Stats:
    return Stats.of([value(run) for run in runs])


def _paired(
    top: Sequence[WrkResult], bottom: Sequence[WrkResult], value: Callable[[WrkResult], float]
) -> Stats:
    """*value* of one server over another's, paired by round."""
    return Stats.of([value(a) / value(b) for a, b in zip(top, bottom, strict=True)])


def _contender_figures(name: str, runs: Sequence[WrkResult], where: str) -> list[Figure]:
    def rate(run: WrkResult) -> float:
        return run.requests_per_second

    cpu = _per_run(runs, _server_us)
    return [
        figure(NAME, f"HTTP: {name} server CPU per call, {where}", cpu, "µs"),
        figure(NAME, f"HTTP: {name} calls/s, {where}", _per_run(runs, rate), "/s"),
        figure(NAME, f"HTTP: {name} p50, {where}", _per_run(runs, lambda r: r.p50_us), "µs"),
        figure(NAME, f"HTTP: {name} p99, {where}", _per_run(runs, lambda r: r.p99_us), "µs"),
        figure(NAME, f"HTTP: {name} wrk CPU per call, {where}", _per_run(runs, _wrk_us), "µs"),
    ]


def _pair_figures(runs: Runs, era: str, connections: int, where: str) -> list[Figure]:
    new, sdk = runs[NEW, era, connections], runs[SDK, era, connections]
    label = f"HTTP: server CPU per call, {NEW} / {SDK}, {where}"
    figures = [figure(NAME, label, _paired(new, sdk, _server_us), "x", CPU_TARGET)]
    label = f"HTTP: server CPU per call, {HANDLE} / {NEW}, {where}"
    handled = _paired(runs[HANDLE, era, connections], new, _server_us)
    figures.append(figure(NAME, label, handled, "x", HANDLE_TARGET))
    theirs = runs.get((FASTMCP, era, connections))
    if theirs is None:
        return figures
    label = f"HTTP: server CPU per call, {FASTMCP} / {NEW}, {where}"
    figures.append(figure(NAME, label, _paired(theirs, new, _server_us), "x"))
    if connections == max(CONNECTIONS):
        label = f"HTTP: calls/s, {NEW} / {FASTMCP}, {where}"
        rates = _paired(new, theirs, lambda run: run.requests_per_second)
        figures.append(figure(NAME, label, rates, "x", RATE_TARGET))
    return figures


def _figures(runs: Runs) -> list[Figure]:
    figures = []
    for era in ERAS:
        for connections in CONNECTIONS:
            where = f"{era}, connections={connections}"
            for name in CONTENDERS:
                if (name, era, connections) in runs:
                    figures += _contender_figures(name, runs[name, era, connections], where)
            figures += _pair_figures(runs, era, connections, where)
    return figures


def _notes(sizes: Sizes, fastmcp: str | None) -> list[str]:
    notes = [
        f"HTTP: wrk (1 thread) POSTs one tools/call (planning__list_goals, FastMCP's list_goals) "
        f"for {sizes.http_seconds} s per run, {sizes.http_rounds} rounds interleaved across "
        f"servers and eras (every other round in the reverse order); {NEW} is the default "
        f"path, {SDK} the same adapter behind the SDK's own transport, every request through "
        "its session manager (no gate, no fast path); 2026-07-28 is session-less, "
        "2025-11-25 one HTTP session per server",
        f"HTTP: {NEW} names the call's session in _meta (sessionId); {HANDLE} is the same "
        f"server and call with a handle from {HANDLE_TOOL} as its {HANDLE_ARGUMENT!r} argument "
        "and no session named (a forged handle checked to be refused in both eras first), "
        "loaded beside it in every round and era, every other round first",
        "HTTP: server CPU per call = the server process's CPU time over the run (/proc, clock "
        "ticks) / calls answered; wrk CPU per call is the client's: where it nears the "
        "server's, the client shares the 2 cores and calls/s understates the server",
    ]
    if fastmcp is None:
        hint = "python -m benchmarks --only mcp (quick or --full) installs it"
        notes.append(f"HTTP: {FASTMCP} skipped: it is not installed; {hint}")
    return notes


def run_over_http(sizes: Sizes, progress: Progress) -> tuple[list[Figure], list[str]]:
    """The HTTP figures and notes; none, and a note saying why, without wrk or hypercorn."""
    if shutil.which("wrk") is None:
        return [], [f"HTTP figures skipped: wrk is not installed ({WRK_HINT})"]
    if importlib.util.find_spec("hypercorn") is None:
        return [], [f"HTTP figures skipped: {SDK} needs hypercorn ({PEER_HINT})"]
    fastmcp = find_fastmcp()
    notes = _notes(sizes, fastmcp)
    servers = len(CONTENDERS) - 1 - (fastmcp is None)  # the handle shares the default path
    progress(f"{NAME}: HTTP: starting {servers} servers")
    with _started(fastmcp, notes) as contenders:
        runs = _measure(contenders, sizes, progress)
    return _figures(runs), notes
