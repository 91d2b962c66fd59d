"""smolagents' MCP client (``smolagents[mcp]``) against ``mcp-actors serve``, as documented.

``tests/integrations/smolagents_example.py`` runs in a virtual environment of its own (its
``mcpadapt`` needs ``mcp < 2``, and the websocket client that module imports): a scripted
model holds two conversations at once, in two threads, on the tools of one `MCPClient` (or
`ToolCollection.from_mcp`), each opening with conversation__start and passing the handle to
create_goal and then list_goals. smolagents keeps one connection: with handles each
conversation sees only its own goal, over stdio and HTTP; without them the two conversations
share the connection's session and each sees both goals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .._integration_runs import STDIO_WITHOUT_HANDLES, apart, mixed, run_over_http, run_script
from .._venvs import framework_python
from ..integrations import FOLDER

if TYPE_CHECKING:
    from pathlib import Path

# smolagents 1.26.0's mcpadapt imports mcp.client.websocket, which needs websockets, and
# mcp 1's names (mcp 2 renamed them): pip alone picks mcp 2 and neither imports.
REQUIREMENTS = ("smolagents[mcp]==1.26.0", "mcp==1.30.0", "websockets==17.4")
SCRIPT = FOLDER / "smolagents_example.py"
SERVED = ("--state", "memory")  # one HTTP server process: its state need not outlive it
NO_HANDLES = (*SERVED, "--no-handles")
CLIENTS = pytest.mark.parametrize(
    "client", [(), ("--collection",)], ids=["MCPClient", "ToolCollection.from_mcp"]
)


@pytest.fixture(scope="module")
def smolagents() -> Path:
    """The Python of smolagents' environment (installed on first use)."""
    return framework_python(
        "smolagents", REQUIREMENTS, needed_by="the smolagents integration tests"
    )


class TestWithHandles:
    @CLIENTS
    async def test_over_stdio(self, smolagents: Path, tmp_path: Path, client: tuple[str]) -> None:
        """``mcp-actors serve --handles``, started by smolagents: one connection, two
        conversations kept apart by their handles."""
        apart(await run_script(smolagents, SCRIPT, *client, home=tmp_path))

    async def test_over_http(self, smolagents: Path, tmp_path: Path) -> None:
        """``serve --http``, handles on by default: one HTTP session, two conversations."""
        apart(await run_over_http(smolagents, SCRIPT, home=tmp_path, serve=SERVED))


class TestWithoutHandles:
    async def test_over_stdio_the_conversations_mix(self, smolagents: Path, tmp_path: Path) -> None:
        """Both conversations share the one connection's session."""
        mixed(await run_script(smolagents, SCRIPT, *STDIO_WITHOUT_HANDLES, home=tmp_path))

    async def test_over_http_the_conversations_mix(self, smolagents: Path, tmp_path: Path) -> None:
        """Both conversations share the one Mcp-Session-Id's session."""
        mixed(await run_over_http(smolagents, SCRIPT, home=tmp_path, serve=NO_HANDLES))
