"""A FastMCP 4 notes server on stdio: ``python fastmcp_notes.py {per-session | global}``.

Sessions are FastMCP's own (its ``SessionProvider``): ``create_session`` mints an id
and ``add_note`` / ``list_notes`` take it as ``session_id``. ``per-session`` keeps each
session's notes in its session state (``get_session``), as FastMCP documents;
``global`` is the same server with the bug the isolation check is for: the notes in a
module global, which every session reads and writes.

It runs in FastMCP's virtual environment (``benchmarks._fastmcp_peer.find_fastmcp``),
so it imports nothing from this project.
"""

from __future__ import annotations

import sys

from fastmcp import FastMCP
from fastmcp.server.dependencies import get_session
from fastmcp.server.sessions import SessionId, SessionProvider

NOTES: list[str] = []  # the global kind's store: one list for every session


def _server(kind: str) -> FastMCP:
    server = FastMCP("notes", session_state_store=None)
    server.add_provider(SessionProvider())

    async def notes_of(session_id: str) -> list[str]:
        if kind == "global":
            return NOTES
        return list(await (await get_session(session_id)).get("notes", []))

    @server.tool
    async def add_note(session_id: SessionId, text: str) -> str:
        """Add a note to the session's notes."""
        notes = await notes_of(session_id)
        notes.append(text)
        if kind == "per-session":
            await (await get_session(session_id)).set("notes", notes)
        return f"Noted ({len(notes)})."

    @server.tool
    async def list_notes(session_id: SessionId) -> str:
        """The session's notes, one a line."""
        notes = await notes_of(session_id)
        return "\n".join(notes) if notes else "No notes yet."

    return server


def main(argv: list[str]) -> int:
    """Serve on stdio until EOF."""
    if argv not in (["per-session"], ["global"]):
        print("usage: fastmcp_notes.py {per-session | global}", file=sys.stderr)
        return 2
    _server(argv[0]).run("stdio", show_banner=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
