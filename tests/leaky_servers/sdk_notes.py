"""Notes servers written with the ``mcp`` SDK's ``MCPServer``, in three kinds.

The caller names its session in each call (``session``), as the replaced design's
callers did (``docs/design.md``, "The design this replaces").

* ``keyed`` looks the session's notes up by the name the call carries: isolated.
* ``current`` is the replaced design: each call first makes its session the server's
  current one, then awaits (a store's round trip would), then works on the *current*
  session's notes. Calls one at a time are right; a concurrent call that switches the
  current session in between makes the first one read or write the other's notes.
* ``latest`` is keyed, but keeps only a session's latest note: no leak, and every
  earlier note lost (a bounded history).

Each `notes_server` has state of its own, shared by every connection to it.
"""

from __future__ import annotations

from typing import Final, Literal

import anyio
from mcp.server.mcpserver import MCPServer

Kind = Literal["keyed", "current", "latest"]
ROUND_TRIP: Final = 0.001  # seconds the current kind awaits between switching and working


def notes_server(kind: Kind) -> MCPServer:
    """A notes server of `kind`, with empty notes."""
    server = MCPServer(f"sdk-notes-{kind}")
    notes: dict[str, list[str]] = {}
    current = {"session": ""}  # the replaced design's shared current session

    async def notes_of(session: str) -> list[str]:
        if kind != "current":
            return notes.setdefault(session, [])
        current["session"] = session
        await anyio.sleep(ROUND_TRIP)  # other calls run meanwhile
        return notes.setdefault(current["session"], [])

    @server.tool()
    async def add_note(session: str, text: str) -> str:
        """Add a note to the session's notes."""
        kept = await notes_of(session)
        if kind == "latest":
            kept.clear()
        kept.append(text)
        return f"Noted ({len(kept)})."

    @server.tool()
    async def list_notes(session: str) -> str:
        """The session's notes, one a line."""
        kept = await notes_of(session)
        return "\n".join(kept) if kept else "No notes yet."

    return server
