"""Notes servers of the handle pattern, written with the ``mcp`` SDK's ``MCPServer``.

``conversation__start`` mints a handle (its structured result ``{"conversation":
HANDLE}``, as ``actors serve --handles`` answers), and ``add_note`` / ``list_notes``
take it as ``conversation``. Three kinds:

* ``minted``: 256 random bits a handle, the notes keyed by it, an unknown handle
  refused: isolated.
* ``clock``: the handle is the clock's second, so conversations started in the same
  second share one: a leak (handles that collide).
* ``ignored``: handles minted as ``minted`` mints them, and checked, but the notes kept
  in one list for the whole server, whatever the handle: a leak (a handle that
  names nothing).

Run on stdio with ``python handle_notes.py KIND``, or in process with `notes_server`.
"""

from __future__ import annotations

import secrets
import sys
import time
from typing import Final, Literal, get_args

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

Kind = Literal["minted", "clock", "ignored"]
KINDS: Final = get_args(Kind)


def notes_server(kind: Kind) -> MCPServer:
    """A notes server of `kind`, with no conversations yet."""
    server = MCPServer(f"handle-notes-{kind}")
    notes: dict[str, list[str]] = {}
    everyone: list[str] = []  # the ignored kind's one list

    def notes_of(conversation: str) -> list[str]:
        if conversation not in notes:
            raise ToolError("unknown conversation: call conversation__start for a new one")
        return everyone if kind == "ignored" else notes[conversation]

    @server.tool(name="conversation__start")
    def start() -> dict[str, str]:
        """Start a conversation; pass its handle as `conversation` to every later call."""
        if kind == "clock":
            handle = f"conv_{int(time.time())}"
        else:
            handle = f"conv_{secrets.token_urlsafe(32)}"
        notes.setdefault(handle, [])
        return {"conversation": handle}

    @server.tool()
    def add_note(conversation: str, text: str) -> str:
        """Add a note to the conversation's notes."""
        kept = notes_of(conversation)
        kept.append(text)
        return f"Noted ({len(kept)})."

    @server.tool()
    def list_notes(conversation: str) -> str:
        """The conversation's notes, one a line."""
        kept = notes_of(conversation)
        return "\n".join(kept) if kept else "No notes yet."

    return server


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in KINDS:
        sys.exit(f"usage: handle_notes.py {{{' | '.join(KINDS)}}}")
    notes_server(sys.argv[1]).run()  # type: ignore[arg-type]  # checked against KINDS
