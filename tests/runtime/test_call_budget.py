"""Budgets of the call path, held without a clock: how many of this project's functions a call runs.

Features landed one by one each cost a little on every call, and no single change showed
it. Wall-clock figures belong in ``benchmarks/``; a test
can hold a count. cProfile's counts are deterministic: the same code makes the same calls,
on any machine, however busy.

A coroutine counts once more each time it is resumed after waiting, so a checkpoint added
to the path counts too. Only this project's functions are counted (those of ``actors``
and ``protocol``, and the methods attrs and cattrs generate for their classes): trio's,
the SDK's and the standard library's counts change with their versions, which this
project does not pin, and a budget that failed on a dependency's release would teach
people to ignore it.

Each budget is the count measured when it was set. A change that makes a call run more of
this project's functions fails here, with the functions counted, and the budget is raised
only in a commit that says why; one that makes it run fewer fails too, until the budget
is lowered to keep the saving.

The plain case is measured: no store, no observer, no tenant, no progress, a sync tool,
and no access log kept (``actors.mcp`` below INFO).
"""

from __future__ import annotations

import cProfile
import logging
import os
import pstats
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import httpx2
import pytest

import actors
import protocol
from actors import ToolModule, open_runtime
from actors.server import ServeOptions, http_app
from actors.server.http._app import http_adapter
from actors.testing import connect
from protocol import Scope
from protocol._call import _lenient

from .._mcp_helpers import asgi_lifespan

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

# What one call may run of this project's functions (see the module docstring).
WARM_CALL: Final = 29
"""A call to a key whose actor is running: `Runtime.call_tool` to the reply. (29, not 31: the
call's parts go into its envelope with no `PreparedCall`, and a text result is built
without the frozen classes' ``__init__``.)"""
ACTIVATION: Final = 45
"""A first call to a key: the warm call, plus starting its actor and making its state."""
MCP_CALL: Final = 25
"""A ``tools/call`` through the MCP adapter (the SDK's client in memory), beyond the runtime's.
(22, not 20: one coroutine more, the call body shared with the lean HTTP path. 25, not 22:
the adapter's path still makes a `PreparedCall` and its result's items, which the warm
call no longer counts, and the runtime's `run` hands back its sending coroutine.)"""
HTTP_CALL: Final = 77
"""A ``tools/call`` POSTed to the Streamable HTTP app (a 2026-era request), beyond the runtime's:
the fast path (`actors.server.http._fast_path`), whose parts (`plain_request` and the
`PlainAnswers` of `actors.server.mcp._plain`) the 2025-era sessions' and stdio's answers
share. (56, not 54: its answer is a `FastPathReply`, which the wire's fast handler sends as
it is and the ASGI app wraps in a Starlette response. 72, not 56: `_plain` checks the
envelope and the params and shapes the result itself, 16 functions of its own in place of
the SDK's pydantic validations and dump, which cost 3-4 times as much CPU. 77, not 72: as
`MCP_CALL`, what the warm call saved that this path still runs.)"""

CALLS: Final = 50
_PACKAGES: Final = tuple(
    str(Path(package.__file__).parent) + os.sep for package in (actors, protocol)
)
_GENERATED: Final = ("<attrs generated", "<cattrs generated")
_INLINED: Final = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>"})
"""Comprehensions: a function of their own up to Python 3.11, inlined from 3.12."""


class Counted:
    """This project's functions that `CALLS` calls ran, each with its calls per call."""

    def __init__(self, profile: cProfile.Profile, calls: int) -> None:
        stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        per_function: Counter[str] = Counter()
        for (filename, line, name), (_, total, *_) in stats.items():
            if _ours(filename) and name not in _INLINED:
                per_function[f"{_shown(filename)}:{line}({name})"] += total
        self.functions = {name: count / calls for name, count in per_function.items()}
        self.per_call = sum(per_function.values()) / calls

    def report(self) -> str:
        """The functions, most called first: where to look when a budget is exceeded."""
        rows = sorted(self.functions.items(), key=lambda item: (-item[1], item[0]))
        return "\n".join(f"{count:6.2f}  {name}" for name, count in rows)

    def check(self, budget: int, what: str) -> None:
        """Fail unless a call runs `budget` of this project's functions: no more, and no fewer
        (a saving lowers the budget, so that the next change cannot spend it unseen)."""
        assert self.per_call <= budget, (
            f"{what} now runs {self.per_call:g} of this project's functions per call, over its "
            f"budget of {budget}: find what was added, or raise the budget in a commit that "
            f"says why.\n{self.report()}"
        )
        assert self.per_call == budget, (
            f"{what} now runs {self.per_call:g} of this project's functions per call, under its "
            f"budget of {budget}: lower the budget to keep the saving.\n{self.report()}"
        )


def _ours(filename: str) -> bool:
    if filename.startswith(_GENERATED):
        return " actors." in filename or " protocol." in filename
    return filename.startswith(_PACKAGES)


def _shown(filename: str) -> str:
    for package in _PACKAGES:
        if filename.startswith(package):
            return Path(package).name + os.sep + filename[len(package) :]
    return filename


async def counted(call: Callable[[int], Awaitable[object]], calls: int = CALLS) -> Counted:
    """Run ``call(i)`` for i in range(`calls`) under cProfile; this project's counts per call."""
    profile = cProfile.Profile()
    for index in range(calls):
        profile.enable()
        try:
            await call(index)
        finally:
            profile.disable()
    return Counted(profile, calls)


def _noop_module() -> ToolModule[object]:
    module: ToolModule[object] = ToolModule("budget", lambda _context: object(), Scope.SESSION)

    @module.tool
    def noop(state: object) -> str:
        """Do nothing."""
        return "ok"

    return module


@pytest.fixture(autouse=True)
def _one_policy_cached() -> None:
    """A server judges every call by one policy object, which `protocol._call._lenient`
    then finds by identity. A test run earlier in this process may have left an equal but
    other policy in that cache, which would cost an ``__eq__`` per call here only."""
    _lenient.cache_clear()


@pytest.fixture(autouse=True)
def _access_log_off(caplog: pytest.LogCaptureFixture) -> None:
    """The plain case: the per-request access line (``actors.mcp`` at INFO) is not kept,
    whatever another test left the logger at, so it is not built either."""
    caplog.set_level(logging.WARNING, logger="actors.mcp")


@pytest.fixture
async def runtime() -> AsyncIterator[actors.Runtime]:
    async with open_runtime([_noop_module()]) as opened:
        yield opened


def _session(index: int) -> dict[str, str]:
    return {"sessionId": f"s{index}"}


class TestInProcess:
    async def test_a_warm_call(self, runtime: actors.Runtime) -> None:
        for index in range(CALLS):
            await runtime.call_tool("budget__noop", meta=_session(index))

        async def call(index: int) -> object:
            return await runtime.call_tool("budget__noop", meta=_session(index))

        (await counted(call)).check(WARM_CALL, "a warm Runtime.call")

    async def test_an_activation(self, runtime: actors.Runtime) -> None:
        # The runtime's own first steps (its reaper's first run) are not an activation's.
        await runtime.call_tool("budget__noop", meta=_session(-1))

        async def call(index: int) -> object:
            return await runtime.call_tool("budget__noop", meta=_session(index))

        (await counted(call)).check(ACTIVATION, "a first call to a key")
        assert runtime.statistics().live_actors == CALLS + 1

    async def test_one_more_function_on_the_path_is_over_budget(
        self, runtime: actors.Runtime, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The count sees a change of one function call: a wrapper around `call_parts`."""
        from actors import _runtime

        parts = _runtime.call_parts

        def wrapped(*args: Any) -> Any:
            return parts(*args)

        wrapped.__code__ = wrapped.__code__.replace(co_filename=_runtime.__file__)
        monkeypatch.setattr(_runtime, "call_parts", wrapped)
        for index in range(CALLS):
            await runtime.call_tool("budget__noop", meta=_session(index))

        async def call(index: int) -> object:
            return await runtime.call_tool("budget__noop", meta=_session(index))

        found = await counted(call)
        assert found.per_call == WARM_CALL + 1, found.report()
        with pytest.raises(AssertionError, match=r"over its budget of \d+"):
            found.check(WARM_CALL, "a warm Runtime.call")
        with pytest.raises(AssertionError, match=r"under its budget of \d+"):
            found.check(WARM_CALL + 2, "a warm Runtime.call")


class TestOverMcp:
    async def test_a_tools_call_through_the_adapter(self, runtime: actors.Runtime) -> None:
        """The SDK's client in memory (`actors.testing.connect`): the adapter's share."""
        async with connect(runtime) as client:
            await client.call_tool("budget__noop", {})

            async def call(_index: int) -> object:
                return await client.call_tool("budget__noop", {})

            found = await counted(call)
        found.check(MCP_CALL + WARM_CALL, "a tools/call through the MCP adapter")

    async def test_a_tools_call_over_http(self, runtime: actors.Runtime) -> None:
        """A 2026-era ``tools/call`` POSTed to the HTTP app: the gate's, the adapter's share."""
        options = ServeOptions(http=("127.0.0.1", 0))
        app = http_app(http_adapter(runtime, options), options)
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Mcp-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "budget__noop",
        }
        transport = httpx2.ASGITransport(app=app)
        async with (
            asgi_lifespan(app),
            httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
        ):

            async def call(index: int) -> object:
                body = {
                    "jsonrpc": "2.0",
                    "id": index,
                    "method": "tools/call",
                    "params": {
                        "name": "budget__noop",
                        "arguments": {},
                        "_meta": {
                            **_session(0),
                            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientInfo": {
                                "name": "budget",
                                "version": "0",
                            },
                            "io.modelcontextprotocol/clientCapabilities": {},
                        },
                    },
                }
                answered = await http.post("/mcp", json=body, headers=headers)
                assert answered.status_code == 200, answered.text
                assert '"isError":false' in answered.text.replace(" ", ""), answered.text
                return answered

            await call(-1)
            found = await counted(call)
        found.check(HTTP_CALL + WARM_CALL, "a tools/call over Streamable HTTP")
