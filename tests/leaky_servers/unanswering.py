"""MCP servers that stop answering, in raw JSON-RPC (no SDK: they start in a blink).

Run as ``python tests/leaky_servers/unanswering.py MODE``, a stdio server; or with
``--http``, an HTTP server on 127.0.0.1 that prints ``listening on http://…/mcp``
and then accepts connections and never answers a byte on any of them (the ``mute``
mode over TCP). Over stdio, every mode but ``mute`` answers ``initialize`` and
``tools/list`` (two tools, ``add_note`` and ``list_notes``) as a server would; what it
does with a ``tools/call`` is the mode:

* ``mute``: answers nothing at all, ``initialize`` included;
* ``unlisted``: answers ``initialize``, and never ``tools/list``;
* ``deaf``: answers everything but tools calls, which it reads and never answers;
* ``garbage``: answers a tools call with a line that is not JSON;
* ``wrong-id``: answers a tools call with a valid result for another request id;
* ``not-mcp``: answers a tools call with a JSON-RPC result that is not a tool result;
* ``closes``: exits as soon as a tools call arrives;
* ``stalls``: writes the first half of a valid answer, and nothing more.

Every tools call the server reads is counted on stderr, one ``tools/call`` line each.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from typing import Any, Final

MODES: Final = ("mute", "unlisted", "deaf", "garbage", "wrong-id", "not-mcp", "closes", "stalls")
TOOLS: Final = [
    {"name": name, "inputSchema": {"type": "object", "properties": {"session": {"type": "string"}}}}
    for name in ("add_note", "list_notes")
]


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _answer_setup(request: dict[str, Any]) -> None:
    """Answer what a working server answers: initialize, tools/list, ping; notifications not."""
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "unanswering", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    else:
        result = {}
    _send({"jsonrpc": "2.0", "id": ident, "result": result})


def _misbehave(mode: str, ident: object) -> None:
    """What `mode` does with the tools call `ident`."""
    answer = {"jsonrpc": "2.0", "id": ident, "result": {"content": []}}
    if mode == "garbage":
        sys.stdout.write("this is not JSON-RPC\n")
    elif mode == "wrong-id":
        _send({**answer, "id": 987654321})
    elif mode == "not-mcp":
        _send({**answer, "result": {"content": "not a list of content blocks"}})
    elif mode == "closes":
        sys.exit(0)
    elif mode == "stalls":
        sys.stdout.write(json.dumps(answer)[:20])
    sys.stdout.flush()


def serve_stdio(mode: str) -> None:
    """Read requests a line at a time until stdin closes."""
    for line in sys.stdin:
        request = json.loads(line)
        if mode == "mute" or (mode == "unlisted" and request.get("method") == "tools/list"):
            continue
        if request.get("method") != "tools/call":
            _answer_setup(request)
            continue
        print("tools/call", file=sys.stderr, flush=True)
        _misbehave(mode, request.get("id"))


def serve_mute_http() -> None:
    """Accept every connection on 127.0.0.1 and read it, never answering."""
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}/mcp", flush=True)
    held = []  # every connection stays open, unanswered, until the process ends
    while True:
        connection, _ = listener.accept()
        held.append(connection)
        threading.Thread(target=_drain, args=(connection,), daemon=True).start()


def _drain(connection: socket.socket) -> None:
    while connection.recv(65536):
        pass


if __name__ == "__main__":
    if sys.argv[1:] == ["--http"]:
        serve_mute_http()
    elif len(sys.argv) == 2 and sys.argv[1] in MODES:
        serve_stdio(sys.argv[1])
    else:
        sys.exit(f"usage: unanswering.py {{{','.join(MODES)}}} | --http")
