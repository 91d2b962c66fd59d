"""The FastMCP peer: ``python _fastmcp_server.py {memory | file DIR | memory --http PORT}``.

A FastMCP 4 server on stdio (or Streamable HTTP, for the ``mcp`` scenario, where
``--quiet`` after PORT turns off uvicorn's line per request, as ``actors serve
--log-level warning`` logs none) with the planning-style tools of the ``durable`` scenario,
its state kept the way FastMCP documents for state across calls: the
``SessionProvider`` mints session ids (``create_session``), and each tool
resolves its ``session_id`` with ``get_session`` and reads and writes the
session's dict (``Session.get`` / ``Session.set``). ``memory`` keeps the
sessions in FastMCP's default in-process store; ``file`` in a
``FileTreeStore`` under DIR, which writes every ``set`` to a file of its own
(write to a temporary file, fsync, rename).

It runs in a virtual environment of its own (see `benchmarks._fastmcp_peer`),
so it imports nothing from this project. The texts it answers match the
``planning`` module's, so one client reads both.
"""

from __future__ import annotations

import sys

from fastmcp import FastMCP
from fastmcp.server.dependencies import get_session
from fastmcp.server.sessions import SessionId, SessionProvider

__all__ = ["main"]


def _server(kind: str, directory: str | None) -> FastMCP:
    store = None
    if kind == "file":
        from key_value.aio.stores.filetree import FileTreeStore

        store = FileTreeStore(data_directory=directory)
    server = FastMCP("fastmcp-peer", session_state_store=store)
    server.add_provider(SessionProvider())

    @server.tool
    async def create_goal(session_id: SessionId, goal: str) -> str:
        """Create a goal in the session's plan and return its id."""
        session = await get_session(session_id)
        goals = await session.get("goals", [])
        goals.append(goal)
        await session.set("goals", goals)  # read-modify-write, as FastMCP's docs show it
        return f"Created goal g{len(goals)}: {goal}"

    @server.tool
    async def list_goals(session_id: SessionId) -> str:
        """List the goals of the session's plan with their ids."""
        session = await get_session(session_id)
        goals = await session.get("goals", [])
        if not goals:
            return "No goals yet."
        lines = [f"- g{number}: {goal}" for number, goal in enumerate(goals, 1)]
        return f"Goals ({len(lines)}):\n" + "\n".join(lines)

    return server


def _port(text: str) -> int | None:
    """The port `text` names, 0 to 65535 (ASCII digits only); None if it names none."""
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        return None
    return int(text)


def main(argv: list[str]) -> int:
    """Check the arguments and serve on stdio until EOF, or on HTTP until killed."""
    usage = "usage: _fastmcp_server.py {memory | file DIR | memory --http PORT [--quiet]}"
    if argv[:2] == ["memory", "--http"] and len(argv) >= 3 and argv[3:] in ([], ["--quiet"]):
        port = _port(argv[2])
        if port is None:
            print(
                f"{usage}\nPORT must be 0 (any free port) to 65535, not {argv[2]!r}",
                file=sys.stderr,
            )
            return 2
        # Streamable HTTP at http://127.0.0.1:PORT/mcp, FastMCP's default path; uvicorn logs
        # "Uvicorn running on URL" with the port it bound, which is how port 0 is learnt (so
        # --quiet drops the access log alone, not the log level: that line is at INFO).
        uvicorn_config = {"access_log": argv[3:] != ["--quiet"]}
        _server("memory", None).run(
            "http", host="127.0.0.1", port=port, show_banner=False, uvicorn_config=uvicorn_config
        )
        return 0
    kinds = ("memory", "file")
    if not argv or argv[0] not in kinds or (argv[0] == "file") != (len(argv) == 2):
        print(usage, file=sys.stderr)
        return 2
    _server(argv[0], argv[1] if len(argv) == 2 else None).run("stdio", show_banner=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
