"""LlamaIndex's MCP tools (``llama-index-tools-mcp``) against ``mcp-actors serve``, as documented.

``tests/integrations/llamaindex_example.py`` runs in a virtual environment of its own: a
scripted model holds two conversations at once on the tools `McpToolSpec` makes of a
`BasicMCPClient`, each opening with conversation__start and passing the handle to
create_goal and then list_goals. `BasicMCPClient` opens a connection for every request (over
stdio, a server process): with handles each conversation keeps its goal and sees only its
own, over stdio and HTTP; without them every goal is forgotten at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .._integration_runs import STDIO_WITHOUT_HANDLES, apart, forgotten, run_over_http, run_script
from .._venvs import framework_python
from ..integrations import FOLDER

if TYPE_CHECKING:
    from pathlib import Path

REQUIREMENTS = ("llama-index-tools-mcp==0.6.0",)
SCRIPT = FOLDER / "llamaindex_example.py"
SERVED = ("--state", "memory")  # one HTTP server process: its state need not outlive it
NO_HANDLES = (*SERVED, "--no-handles")


@pytest.fixture(scope="module")
def llamaindex() -> Path:
    """The Python of LlamaIndex's environment (installed on first use)."""
    return framework_python(
        "llamaindex", REQUIREMENTS, needed_by="the LlamaIndex integration tests"
    )


class TestWithHandles:
    async def test_over_stdio(self, llamaindex: Path, tmp_path: Path) -> None:
        """``mcp-actors serve --handles``, a server process per call: the handle (with the
        state file they share) keeps each conversation's goal, and apart."""
        apart(await run_script(llamaindex, SCRIPT, home=tmp_path))

    async def test_over_http(self, llamaindex: Path, tmp_path: Path) -> None:
        """``serve --http``, handles on by default: a new HTTP session for every call."""
        apart(await run_over_http(llamaindex, SCRIPT, home=tmp_path, serve=SERVED))


class TestWithoutHandles:
    async def test_over_stdio_every_goal_is_forgotten(
        self, llamaindex: Path, tmp_path: Path
    ) -> None:
        """Each call's server process gives it a private session, ended with the call."""
        forgotten(await run_script(llamaindex, SCRIPT, *STDIO_WITHOUT_HANDLES, home=tmp_path))

    async def test_over_http_every_goal_is_forgotten(
        self, llamaindex: Path, tmp_path: Path
    ) -> None:
        """Each call's Mcp-Session-Id is a session of its own, ended when the call's closes."""
        forgotten(await run_over_http(llamaindex, SCRIPT, home=tmp_path, serve=NO_HANDLES))
