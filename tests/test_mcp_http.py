"""``python -m actors serve --http`` as a process: one smoke test, and what only a process shows.

The gate's rules (Origin, Host, tokens, body size, sessions per token) and the
tenant rules are tested in process, against the same app, in
`tests/test_http_gate.py`; hostile traffic on the wire in
`tests/test_mcp_http_limits.py`.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import pytest
import trio

from ._mcp_helpers import SERVE, anonymous_and_foreign, http_server, service_of, texts

if TYPE_CHECKING:
    from pathlib import Path

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]
ALPHA, GATEWAY = "Zq9#xK2pLw7Vn4Rt3sYbT0uQ", "hB1vR8mC4nW6eK2jL9pX5tZ0"
APP = "https://app.example"


async def test_a_server_with_a_tokens_file_serves_refuses_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """The docs' tokens file and client (guides/tenants.md): tools listed, a tenant's call
    served, foreign requests refused, and SIGTERM with a client still connected exits 0."""
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(
        "# operators' tokens\n"
        f"{ALPHA}=alpha   # a '#' inside a token is part of it\n"
        "\n"
        f"{GATEWAY}         # a gateway: any session\n"
    )
    async with http_server("--tokens-file", str(tokens), "--allow-origin", APP) as server:
        async with server.session(ALPHA, headers={"Origin": APP}) as alpha:
            listed = {tool.name for tool in (await alpha.list_tools()).tools}
            meta = {"sessionId": "alpha/conversation-1"}
            created = await alpha.call_tool("planning__create_goal", {"goal": "Ship"}, meta=meta)
            mine = await alpha.call_tool("planning__list_goals", {}, meta=meta)
            theirs = await alpha.call_tool("planning__list_goals", {"__sessionId": "beta/s"})
            anonymous, foreign = await anonymous_and_foreign(server.url, GATEWAY)
            server.process.send_signal(signal.SIGTERM)
            with trio.fail_after(15):
                code = await server.process.wait()
        log = server.log.text()
    assert {"planning__create_goal", "content_store__search_content"} <= listed
    assert "session__end" not in listed  # the operator's to enable
    assert not created.is_error
    assert service_of(created)["serverName"] == "planning"  # item _meta survives HTTP
    assert "g1: Ship" in texts(mine)
    assert theirs.is_error
    assert texts(theirs).startswith("session 'beta/s' is outside tenant 'alpha' of this token")
    assert anonymous.status_code == 401
    assert foreign.status_code == 403
    assert code == 0, log
    assert "tokens: 1 gateway(s), tenant 'alpha': 1" in log
    assert "outcome=outside_tenant" in log
    assert "SIGTERM received: shutting down" in log
    assert "Traceback" not in log


async def test_a_public_bind_without_tokens_refuses_to_start() -> None:
    """0.0.0.0 without --token or --insecure: a clear message and exit code 2, nothing bound."""
    result = await trio.run_process(
        [*SERVE, "--http", "0.0.0.0:0"], capture_stderr=True, check=False
    )
    assert result.returncode == 2
    assert b"refusing to serve on 0.0.0.0 without tokens" in result.stderr
