"""`connect`: the official SDK's client, in memory, in front of a runtime or of modules.

What a test of a module wants to know is what a host will see: the tools as
listed, each result as it crosses the wire (text, structured data, ``isError``),
the refusals as a client gets them. `connect` gives the SDK's own `mcp.Client`,
connected in this process to an `actors.server.McpAdapter` (the adapter
``mcp-actors serve`` runs), over the protocol's real request and result objects:
no subprocess, no socket, no port.

The client's calls that name no session land in one session of its own, as a
stdio host's do; `caller` makes it another kind of client (a tenant's token, an
HTTP client). Given modules rather than a runtime, `connect` opens a runtime with
its state in memory for the block; given a runtime, it serves that one, so the
test can also call it, or look at it, directly.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs

from .._module import ToolModule
from .._runtime import open_runtime

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp import Client

    from protocol import Caller, HandleKeys

    from .._target import CallTarget

__all__ = ["connect"]


@asynccontextmanager
async def connect(
    target: CallTarget | ToolModule[Any] | Iterable[ToolModule[Any]],
    *,
    caller: Caller | None = None,
    allow_end_session: bool = False,
    handles: HandleKeys | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """The SDK's `mcp.Client`, connected in memory to `target`, for the length of the block.

    `target` is a runtime (`open_runtime`'s, or anything `McpAdapter` serves),
    a module, or modules, served by a runtime opened for the block (state in
    memory). `caller` is who the client is (`protocol.Caller`); by default, the
    one client of a session of its own. `allow_end_session` lists
    ``session__end``. `handles` serves conversation handles minted and read with
    those keys (``conversation__start``; `caller` then reads them too). Other keywords
    go to `mcp.Client` (``mode="legacy"`` for
    the handshake era, ``logging_callback``, ``read_timeout_seconds``…).
    Raises ImportError naming the extra when the MCP SDK is not installed.
    """
    if importlib.util.find_spec("mcp") is None:
        msg = "actors.testing needs the MCP SDK: pip install 'mcp-actors[server]'"
        raise ImportError(msg)
    from mcp import Client

    from ..server import McpAdapter

    async with _served(target) as runtime:
        if caller is not None and handles is not None:
            caller = attrs.evolve(caller, handles=handles)
        identify = None if caller is None else (lambda _ctx: caller)
        adapter = McpAdapter(
            runtime, identify=identify, allow_end_session=allow_end_session, handles=handles
        )
        async with Client(adapter.server, **client_options) as client:
            yield client


@asynccontextmanager
async def _served(
    target: CallTarget | ToolModule[Any] | Iterable[ToolModule[Any]],
) -> AsyncIterator[CallTarget]:
    """`target` itself if it runs calls, else a runtime of its modules for the block."""
    if isinstance(target, ToolModule):
        modules = [target]
    elif isinstance(target, Iterable):
        modules = list(target)
    else:  # not modules: a host (`actors.CallTarget`), which no iterable is
        yield target
        return
    async with open_runtime(modules) as runtime:
        yield runtime
