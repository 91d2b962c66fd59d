"""What the Hypothesis state machines share: the context pool, a trio loop in a thread, proofs.

Rules of a `RuleBasedStateMachine` are synchronous, so a machine serves its
runtime from a trio loop in a background thread (`TrioThread`) and submits
each batch of calls with `trio.from_thread.run`: `run_lanes` runs each
lane's calls one after the other and all lanes concurrently. `run_requests`
does the same with requests of any kind (a resource read, a prompt get)
made by functions of the runtime, whose context travels in `context_meta`.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any, Final, TypeVar

import pytest
import trio
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from actors import Runtime
from protocol import ActorKey, CallResult, ToolContext

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from contextlib import AbstractAsyncContextManager

    from actors import RuntimeStatistics

__all__ = [
    "ASSISTANTS",
    "CONTEXTS",
    "SESSIONS",
    "THREADS",
    "VIAS",
    "TrioThread",
    "call_params",
    "check_live_actors",
    "context_meta",
    "failure_of",
    "machine_settings",
    "run_lanes",
    "run_requests",
]

T = TypeVar("T")

# A small pool, so keys collide often. It holds an assistant named "none" and
# a thread named "default", the strings the replaced design's string keys used
# for absent parts (docs/design.md, "The design this replaces").
SESSIONS: Final = ("s1", "s2", "s3")
ASSISTANTS: Final = (None, "a1", "a2", "none")
THREADS: Final = (None, "t1", "default")
CONTEXTS: Final = [
    ToolContext(session, assistant, thread)
    for session, assistant, thread in itertools.product(SESSIONS, ASSISTANTS, THREADS)
]

# How a call carries its context.
VIAS: Final = ("arguments", "snake_case", "meta", "split")
_ARGUMENT_NAMES: Final = {
    "arguments": ("__sessionId", "__assistantId", "__threadId"),
    "snake_case": ("__session_id", "__assistant_id", "__thread_id"),
}
_META_NAMES: Final = ("sessionId", "assistantId", "threadId")
_SPLIT_META_NAMES: Final = ("session_id", "assistant_id", "thread_id")


def call_params(
    name: str, arguments: Mapping[str, Any], context: ToolContext, via: str
) -> dict[str, Any]:
    """The tools/call-shaped mapping calling `name` with `arguments`, `context` carried `via`."""
    carried = dict(arguments)
    meta: dict[str, Any] = {}
    parts = (context.session_id, context.assistant_id, context.thread_id)
    for index, part in enumerate(parts):
        if part is None:
            continue  # an absent part is omitted, never spelled
        if via in _ARGUMENT_NAMES:
            carried[_ARGUMENT_NAMES[via][index]] = part
        elif via == "meta":
            meta[_META_NAMES[index]] = part
        elif index == 0:  # split: the session in the arguments, the rest in _meta
            carried["__sessionId"] = part
        else:
            meta[_SPLIT_META_NAMES[index]] = part
    params: dict[str, Any] = {"name": name, "arguments": carried}
    if meta:
        params["_meta"] = meta
    return params


def context_meta(context: ToolContext, via: str) -> dict[str, str]:
    """The ``_meta`` carrying `context` for a request with no arguments to carry it in.

    A resource read or a prompt get has only ``_meta`` for the context:
    camelCase names, or snake_case ones for the vias that use them.
    """
    names = _SPLIT_META_NAMES if via in {"snake_case", "split"} else _META_NAMES
    parts = (context.session_id, context.assistant_id, context.thread_id)
    return {name: part for name, part in zip(names, parts, strict=True) if part is not None}


class TrioThread:
    """A runtime served by a trio loop in a background thread, until `close`.

    With a `clock` (a `trio.testing.MockClock`), the loop's time moves only
    when a test moves it, so TTL expiry happens exactly when a rule says.
    """

    def __init__(
        self,
        open_target: Callable[[], AbstractAsyncContextManager[Any]],
        clock: trio.abc.Clock | None = None,
    ) -> None:
        self._open = open_target
        self._clock = clock
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: trio.Event | None = None
        self.runtime: Any = None
        self.token: trio.lowlevel.TrioToken | None = None
        self._thread = threading.Thread(target=self._main, name="isolation runtime", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=30)
        if self.token is None:
            self.close()
            raise RuntimeError("the runtime's trio loop did not start")

    def _main(self) -> None:
        try:
            trio.run(self._serve, clock=self._clock)
        except BaseException as exc:  # re-raised in the test's thread by close()
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        async with self._open() as runtime:
            self.runtime = runtime
            self._stop = trio.Event()
            self.token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._stop.wait()

    def run(self, afn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        return trio.from_thread.run(afn, *args, trio_token=self.token)

    def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        return trio.from_thread.run_sync(fn, *args, trio_token=self.token)

    def close(self) -> None:
        """Close the runtime, join the thread, and re-raise whatever the loop raised."""
        if self._stop is not None and self._thread.is_alive():
            self.run_sync(self._stop.set)
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the runtime's trio loop did not stop"
        if self._error is not None:
            raise self._error


async def run_lanes(runtime: Any, lanes: list[list[dict[str, Any]]]) -> list[list[CallResult]]:
    """Run each lane's calls one after the other, all lanes concurrently."""
    results: list[list[CallResult]] = [[] for _ in lanes]

    async def run_lane(index: int) -> None:
        for params in lanes[index]:
            results[index].append(await runtime.call(params))

    async with trio.open_nursery() as nursery:
        for index in range(len(lanes)):
            nursery.start_soon(run_lane, index)
    return results


async def run_requests(
    runtime: Any, lanes: list[list[Callable[[Any], Awaitable[T]]]]
) -> list[list[T]]:
    """`run_lanes` for requests of any kind: each is a function of the runtime to await."""
    results: list[list[T]] = [[] for _ in lanes]

    async def run_lane(index: int) -> None:
        for request in lanes[index]:
            results[index].append(await request(runtime))

    async with trio.open_nursery() as nursery:
        for index in range(len(lanes)):
            nursery.start_soon(run_lane, index)
    return results


def check_live_actors(
    loop: TrioThread, keys: set[ActorKey], errors: int
) -> RuntimeStatistics | None:
    """Check that `loop`'s runtime has one live actor per key of `keys` and no other, none
    duplicated or crashed, and replied with `errors` errors; return its statistics.

    None, checking nothing, for a runtime without actors (the broken ones).
    """
    runtime = loop.runtime
    if not isinstance(runtime, Runtime):
        return None
    snapshot: tuple[RuntimeStatistics, set[ActorKey]] = loop.run_sync(
        lambda: (runtime.statistics(), {actor.key for actor in runtime.actors()})
    )
    stats, live = snapshot
    assert live == keys, (
        f"invariant 2 (no leakage): actors for {sorted(live - keys, key=repr)} that no call's "
        f"key names, none for {sorted(keys - live, key=repr)}"
    )
    assert stats.duplicate_actors == stats.crashed == 0, stats
    assert stats.errors == errors, f"{stats.errors} calls failed, not the {errors} expected"
    return stats


def machine_settings(*, max_examples: int, stateful_step_count: int) -> settings:
    """A machine's settings: no deadline (a step runs many calls), no example database."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        stateful_step_count=stateful_step_count,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def failure_of(machine: type[RuleBasedStateMachine], base: settings) -> str:
    """The message of the assertion Hypothesis finds failing, after the steps that led to it.

    One bug reported, shrunk, without the slow "explain" phase.
    """
    proof = settings(
        base,
        report_multiple_bugs=False,
        print_blob=False,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(machine, settings=proof)
    # Printed for -s and failure reports: Hypothesis attaches the steps as notes.
    print(*getattr(failure.value, "__notes__", []), failure.value, sep="\n")
    return str(failure.value)
