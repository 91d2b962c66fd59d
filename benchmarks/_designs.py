"""The runtime and its in-process baselines, opened side by side as contenders.

`open_designs` opens each design named in `DESIGNS` (or a subset) in one
nursery and hands back one `CallContender` per design, all calling the same
no-op handler for the key with a given index.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final

import trio

from actors import Runtime, RuntimeConfig, open_runtime

from ._baselines import ChannelFloor, DirectCall, LockedDict, bench_module, noop
from ._measure import CallContender, KeyedCall

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

__all__ = [
    "BASELINES",
    "DESIGNS",
    "DIRECT",
    "FLOOR",
    "LOCKED",
    "RUNTIME",
    "RUNTIME_NO_DEADLINE",
    "key_names",
    "open_designs",
    "runtime_call",
]

RUNTIME: Final = "runtime"
RUNTIME_NO_DEADLINE: Final = "runtime, no deadline"
FLOOR: Final = "bare channel floor"
LOCKED: Final = "locked dict (replaced design)"
DIRECT: Final = "direct call"
DESIGNS: Final = (RUNTIME, RUNTIME_NO_DEADLINE, FLOOR, LOCKED, DIRECT)
"""Every in-process design, in the order they run within a round."""
BASELINES: Final = (FLOOR, LOCKED, DIRECT)
"""The designs the runtime is reported as a ratio of."""

_CONFIGS: Final = {
    RUNTIME: RuntimeConfig(),
    RUNTIME_NO_DEADLINE: RuntimeConfig(call_timeout=None),
}


def key_names(count: int) -> list[str]:
    """The session id of each key index (built once, so no call pays for formatting)."""
    return [f"key-{index}" for index in range(count)]


def runtime_call(runtime: Runtime, names: Sequence[str], tool: str = "bench__noop") -> KeyedCall:
    """A keyed call through `Runtime.call_tool`, the key as the session id."""

    async def call(index: int) -> object:
        return await runtime.call_tool(tool, {"__sessionId": names[index]})

    return call


def _baseline_call(design: str, nursery: trio.Nursery, names: Sequence[str]) -> KeyedCall:
    if design == DIRECT:
        direct = DirectCall(noop)

        async def call_direct(index: int) -> object:
            return direct.call(names[index])

        return call_direct
    baseline = ChannelFloor(nursery, noop) if design == FLOOR else LockedDict(noop)

    async def call(index: int) -> object:
        return await baseline.call(names[index])

    return call


@asynccontextmanager
async def open_designs(
    names: Sequence[str], designs: Sequence[str] = DESIGNS
) -> AsyncIterator[list[CallContender]]:
    """Open `designs` (names from `DESIGNS`) over the keys `names`; close them all on exit."""
    async with AsyncExitStack() as stack:
        nursery = await stack.enter_async_context(trio.open_nursery())
        stack.callback(nursery.cancel_scope.cancel)  # the floor's tasks serve until cancelled
        contenders: list[CallContender] = []
        for design in designs:
            if design in _CONFIGS:
                runtime = await stack.enter_async_context(
                    open_runtime([bench_module()], _CONFIGS[design])
                )
                call = runtime_call(runtime, names)
            else:
                call = _baseline_call(design, nursery, names)
            contenders.append(CallContender(design, call))
        yield contenders
