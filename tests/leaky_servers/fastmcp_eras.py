"""A FastMCP 4 notes server over Streamable HTTP: ``python fastmcp_eras.py KIND``.

KIND is where the notes are kept between calls, each as FastMCP documents it:

* ``context``: in the request context's state (``ctx.set_state`` / ``ctx.get_state``),
  which FastMCP keys by the transport's session. A 2025-era client (the initialize
  handshake, an ``Mcp-Session-Id``) keeps its notes; a 2026-07-28 client has no
  session, every request is a connection of its own, and every note is lost, as
  FastMCP's own docs warn.
* ``session-id``: in FastMCP's session state (its ``SessionProvider``): ``create_session``
  mints an id, and ``add_note`` / ``list_notes`` take it as ``session_id``: the handle
  pattern, which works in both eras.

It listens on a free port of 127.0.0.1 (uvicorn prints ``Uvicorn running on URL``) at
FastMCP's default path, ``/mcp``, until killed. It runs in FastMCP's virtual environment
(``benchmarks._fastmcp_peer.find_fastmcp``), so it imports nothing from this project.
"""

from __future__ import annotations

import sys
from typing import Final

from fastmcp import Context, FastMCP
from fastmcp.server.dependencies import get_session
from fastmcp.server.sessions import SessionId, SessionProvider

KINDS: Final = ("context", "session-id")


def _context_server() -> FastMCP:
    server = FastMCP("notes-in-context-state")

    @server.tool
    async def add_note(text: str, ctx: Context) -> str:
        """Add a note to this session's notes."""
        notes = list(await ctx.get_state("notes") or [])
        notes.append(text)
        await ctx.set_state("notes", notes)
        return f"Noted ({len(notes)})."

    @server.tool
    async def list_notes(ctx: Context) -> str:
        """This session's notes, one a line."""
        notes = await ctx.get_state("notes") or []
        return "\n".join(notes) if notes else "No notes yet."

    return server


def _session_id_server() -> FastMCP:
    server = FastMCP("notes-in-session-state")
    server.add_provider(SessionProvider())

    @server.tool
    async def add_note(session_id: SessionId, text: str) -> str:
        """Add a note to the session's notes."""
        session = await get_session(session_id)
        notes = await session.get("notes", [])
        notes.append(text)
        await session.set("notes", notes)
        return f"Noted ({len(notes)})."

    @server.tool
    async def list_notes(session_id: SessionId) -> str:
        """The session's notes, one a line."""
        notes = await (await get_session(session_id)).get("notes", [])
        return "\n".join(notes) if notes else "No notes yet."

    return server


def main(argv: list[str]) -> int:
    """Serve KIND on a free port of 127.0.0.1 until killed."""
    if len(argv) != 1 or argv[0] not in KINDS:
        print(f"usage: fastmcp_eras.py {{{' | '.join(KINDS)}}}", file=sys.stderr)
        return 2
    server = _context_server() if argv[0] == "context" else _session_id_server()
    # Port 0: uvicorn's "Uvicorn running on URL" line (at INFO) names the port it bound.
    server.run(
        "http", host="127.0.0.1", port=0, show_banner=False, uvicorn_config={"access_log": False}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
