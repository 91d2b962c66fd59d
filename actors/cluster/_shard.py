"""`ShardHost`: one runtime on a Ray async actor's event loop, answering calls as wire results.

Results cross Ray as the MCP wire mapping (`CallResult.to_wire`), and every
refusal as the ``isError`` result the MCP server would send
(`actors.error_result`): exceptions with arguments of their own do not
survive pickling reliably, and a caller on another process should read the
same words an MCP client reads. An unknown tool is the one error raised, as
`UnknownToolError`, since it has no tool to stamp a result with.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, final

from protocol import ProtocolError

from .._error_result import error_result
from .._errors import RuntimeCallError, UnknownToolError
from .._guest import open_asyncio_runtime
from ..server._options import load_module

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from protocol import Caller

    from .._guest import AsyncioRuntime
    from .._runtime import RuntimeConfig, RuntimeStatistics

__all__ = ["ShardHost"]


@final
class ShardHost:
    """The body of a shard's Ray actor; run it with ``ray.remote(ShardHost)``."""

    def __init__(self, modules: Sequence[str], config: RuntimeConfig | None, state: str) -> None:
        # By spec, not object: modules hold what pickling cannot carry (converters, closures).
        self._modules = tuple(map(load_module, modules))
        self._config = config
        self._state = state
        self._stack = contextlib.AsyncExitStack()
        self._runtime: AsyncioRuntime | None = None

    async def _opened(self) -> AsyncioRuntime:
        # Opened on first use, on the actor's loop: __init__ runs before the loop does.
        if self._runtime is None:
            opening = open_asyncio_runtime(self._modules, self._config, state=self._state)
            self._runtime = await self._stack.enter_async_context(opening)
        return self._runtime

    async def call(self, params: Mapping[str, Any], caller: Caller | None = None) -> dict[str, Any]:
        """Run one tools/call-shaped call here; its MCP wire result."""
        runtime = await self._opened()
        try:
            result = await runtime.call(params, caller=caller)
        except UnknownToolError:
            raise
        except (ProtocolError, RuntimeCallError) as error:
            service = runtime.registry.resolve(params["name"]).service
            result = error_result(error, service)
        return result.to_wire()

    async def statistics(self) -> RuntimeStatistics:
        """The shard's runtime counters (`Runtime.statistics`)."""
        return (await self._opened()).statistics()

    async def pid(self) -> int:
        """The shard's process id (tests kill it to fail it over)."""
        return os.getpid()

    async def close(self) -> None:
        """Stop the runtime: calls in flight finish, every state's ``on_stop`` runs."""
        await self._stack.aclose()
        self._runtime = None
