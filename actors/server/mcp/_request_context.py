"""What a low-level handler knows of its request: the connection it came on, and its ``_meta``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp import types
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext

__all__ = ["connection_of", "meta_of", "speaks_2026"]


def speaks_2026(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request's connection speaks 2026-07-28 or later (no requests mid-call)."""
    return connection_of(ctx).protocol_version in MODERN_PROTOCOL_VERSIONS


def meta_of(params: types.RequestParams) -> Mapping[str, Any] | None:
    """A request's ``_meta``, for its context fields (``sessionId``…), as tools/call reads it."""
    return params.meta


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The SDK's `Connection` a request came on.

    Its ``session_id`` is the transport's session (an HTTP session the SDK
    tracks, tied to the credential that opened it), and its ``exit_stack``
    is where the SDK has per-connection cleanup pushed. This SDK version hands
    a low-level handler the connection only through the request's session
    (`tests/server/test_connection_sessions.py` fails if that changes).
    """
    return ctx.session._connection
