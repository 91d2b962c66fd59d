"""Part of scenario ``mcp``: what reading a conversation handle costs one call, in process.

A handle adds two steps to a call on the server, timed here alone in this thread's
CPU time (``time.thread_time_ns``) over a loop of calls:

* `protocol.HandleKeys.session_for`, the handle's verification. A conversation sends
  one handle call after call and a verified handle's tag is kept (an LRU cache), so
  the figure that prices a call is *verified before*; a handle's *first* call also
  checks its HMAC-SHA256 tag (fresh handles, minted untimed, each read once).
* `protocol.split_call`, which every ``tools/call`` goes through: the call of the HTTP
  part (``planning__list_goals``) naming its session in ``_meta`` with handles off (as
  before handles) and on, and carrying a handle instead, for a 2026-era caller (no
  transport session) and a 2025-era one (an HTTP session, which the handle overrides).

The cases interleave round by round; each figure is the median over rounds of the CPU
per call, with its spread. A Python loop's own step (tens of ns) is in every figure.
"""

from __future__ import annotations

import gc
import itertools
import json
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from protocol import HANDLE_ARGUMENT, Caller, ContextPolicy, HandleKeys, split_call

from ._http_floors import BODY, TOOL
from ._measure import Stats
from ._over_http import ERAS, SESSIONLESS, envelope
from ._report import Figure, figure

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._measure import Progress
    from ._sizes import Sizes

__all__ = ["run_handle_cost"]

NAME: Final = "mcp"
VERIFIED: Final = "handle verification (HandleKeys.session_for), verified before"
FIRST: Final = "handle verification (HandleKeys.session_for), first call of a handle"
SPLIT: Final = "split_call"
_TRANSPORT_SESSION: Final = "http-session"
"""The 2025-era caller's HTTP session (``Mcp-Session-Id``)."""

Loop = Callable[[int], Callable[[], object]]
"""A case: given the calls per round, prepares (untimed) what runs them all (timed)."""


def _repeated(step: Callable[..., object], *arguments: object) -> Loop:
    """A case that calls ``step(*arguments)`` again and again."""

    def prepare(calls: int) -> Callable[[], object]:
        def loop() -> None:
            for _ in itertools.repeat(None, calls):
                step(*arguments)

        return loop

    return prepare


def _first_reads(keys: HandleKeys) -> Loop:
    """A case that reads handles never read before, one each: the tag checked every time."""

    def prepare(calls: int) -> Callable[[], object]:
        handles = [keys.mint(None) for _ in range(calls)]
        read = keys.session_for

        def loop() -> None:
            for handle in handles:
                read(handle, None)

        return loop

    return prepare


def _cpu_us_per_call(case: Loop, calls: int) -> float:
    """One round of `case`: this thread's CPU µs per call."""
    loop = case(calls)
    gc.collect(1)  # the previous case's garbage is not this one's to collect
    start = time.thread_time_ns()
    loop()
    return (time.thread_time_ns() - start) / calls / 1e3


def _params(era: str, arguments: Mapping[str, str], session: str | None) -> dict[str, Any]:
    """The ``tools/call`` params of the HTTP part's call in `era`, its session in `_meta`."""
    if era == SESSIONLESS:
        meta: dict[str, object] = envelope()
        if session is not None:
            meta["sessionId"] = session
        return {"name": TOOL, "arguments": dict(arguments), "_meta": meta}
    named = {} if session is None else {"_meta": {"sessionId": session}}
    return {"name": TOOL, "arguments": dict(arguments), **named}


def _split_cases(keys: HandleKeys, handle: str) -> dict[str, Loop]:
    """`split_call` of the `_meta`-named call (handles off and on) and the handle's, per era."""
    session = json.loads(BODY)["params"]["_meta"]["sessionId"]
    policy = ContextPolicy()
    cases = {}
    for era in ERAS:
        transport = None if era == SESSIONLESS else _TRANSPORT_SESSION
        off = Caller("anonymous", transport_session=transport)
        on = Caller("anonymous", transport_session=transport, handles=keys)
        named = _params(era, {}, session)
        carried = _params(era, {HANDLE_ARGUMENT: handle}, None)
        cases[_split(era, "_meta session, handles off")] = _repeated(split_call, named, policy, off)
        cases[_split(era, "_meta session")] = _repeated(split_call, named, policy, on)
        cases[_split(era, "handle")] = _repeated(split_call, carried, policy, on)
    return cases


def _split(era: str, what: str) -> str:
    return f"{SPLIT}, {what}, {era}"


def _measure(sizes: Sizes, progress: Progress) -> dict[str, list[float]]:
    """Every case's CPU µs per call, one per round, the cases interleaved."""
    keys = HandleKeys((secrets.token_bytes(32),), time.time)
    handle = keys.mint(None)
    cases = {
        VERIFIED: _repeated(keys.session_for, handle, None),
        FIRST: _first_reads(keys),
        **_split_cases(keys, handle),
    }
    rounds: dict[str, list[float]] = {name: [] for name in cases}
    for number in range(sizes.rounds):
        progress(f"{NAME}: handle verification: round {number + 1}/{sizes.rounds}")
        for name, case in cases.items():
            rounds[name].append(_cpu_us_per_call(case, sizes.handle_calls))
    return rounds


def _ratios(rounds: Mapping[str, list[float]]) -> list[Figure]:
    """`split_call` of the handle's call over the `_meta`-named one's, paired by round."""
    figures = []
    for era in ERAS:
        top, bottom = rounds[_split(era, "handle")], rounds[_split(era, "_meta session")]
        paired = Stats.of([a / b for a, b in zip(top, bottom, strict=True)])
        figures.append(figure(NAME, f"{SPLIT}, handle / _meta session, {era}", paired, "x"))
    return figures


def run_handle_cost(sizes: Sizes, progress: Progress) -> tuple[list[Figure], list[str]]:
    """The verification's cost per call: the figures and a note."""
    rounds = _measure(sizes, progress)
    figures = [
        figure(NAME, f"{name}, CPU per call", Stats.of(v), "µs") for name, v in rounds.items()
    ]
    note = (
        f"handle verification: {sizes.handle_calls} calls per case and round, {sizes.rounds} "
        "rounds interleaved, this thread's CPU time; 'verified before' is every call after a "
        "conversation's first (its tag kept), 'first call' checks the HMAC tag; split_call is "
        "the HTTP part's call, handles off and on, 2026-era caller with no transport session, "
        "2025-era with one (the handle wins over it)"
    )
    return [*figures, *_ratios(rounds)], [note]
