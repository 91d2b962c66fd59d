"""LangChain's MCP client (``langchain-mcp-adapters``) against ``mcp-actors serve``, as documented.

``tests/integrations/langchain_example.py`` runs in a virtual environment of its own (the
adapters pin ``mcp < 2``): a scripted model holds two conversations at once, each opening
with conversation__start and passing the handle to create_goal and then list_goals, with
`MultiServerMCPClient.get_tools` (LangChain's default: a new connection, and over stdio a
new server process, for every call) or one explicit `MultiServerMCPClient.session`. With
handles each conversation keeps its goal and sees only its own, over stdio and HTTP. Without
them, a connection per call forgets every goal and one session mixes the two conversations:
that is what the handles fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .._integration_runs import (
    STDIO_WITHOUT_HANDLES,
    apart,
    forgotten,
    mixed,
    run_over_http,
    run_script,
    seen_by,
)
from .._venvs import framework_python
from ..integrations import FOLDER

if TYPE_CHECKING:
    from pathlib import Path

REQUIREMENTS = ("langchain-mcp-adapters==0.3.2",)
SCRIPT = FOLDER / "langchain_example.py"
SERVED = ("--state", "memory")  # one HTTP server process: its state need not outlive it
NO_HANDLES = (*SERVED, "--no-handles")
MODES = pytest.mark.parametrize(
    "mode", [(), ("--session",)], ids=["a connection per call", "one session"]
)


@pytest.fixture(scope="module")
def langchain() -> Path:
    """The Python of LangChain's environment (installed on first use)."""
    return framework_python("langchain", REQUIREMENTS, needed_by="the LangChain integration tests")


class TestWithHandles:
    @MODES
    async def test_over_stdio(self, langchain: Path, tmp_path: Path, mode: tuple[str]) -> None:
        """``mcp-actors serve --handles``, started by LangChain: per call, each call is a server
        process of its own, and the handle (with the state file they share) keeps each goal."""
        apart(await run_script(langchain, SCRIPT, *mode, home=tmp_path))

    @MODES
    async def test_over_http(self, langchain: Path, tmp_path: Path, mode: tuple[str]) -> None:
        """``serve --http``, handles on by default: a new HTTP session per call, or one."""
        apart(await run_over_http(langchain, SCRIPT, *mode, home=tmp_path, serve=SERVED))


class TestWithoutHandles:
    async def test_a_connection_per_call_forgets_over_stdio(
        self, langchain: Path, tmp_path: Path
    ) -> None:
        """Each call's server process gives it a private session, ended with the call."""
        forgotten(await run_script(langchain, SCRIPT, *STDIO_WITHOUT_HANDLES, home=tmp_path))

    async def test_one_session_mixes_over_stdio(self, langchain: Path, tmp_path: Path) -> None:
        """Both conversations share the one connection's session."""
        arguments = ("--session", *STDIO_WITHOUT_HANDLES)
        mixed(await run_script(langchain, SCRIPT, *arguments, home=tmp_path))

    async def test_a_connection_per_call_forgets_over_http(
        self, langchain: Path, tmp_path: Path
    ) -> None:
        """Each call's Mcp-Session-Id is a session of its own, ended when the call's closes."""
        forgotten(await run_over_http(langchain, SCRIPT, home=tmp_path, serve=NO_HANDLES))

    async def test_one_session_mixes_over_http(self, langchain: Path, tmp_path: Path) -> None:
        """Both conversations share the one Mcp-Session-Id's session."""
        mixed(await run_over_http(langchain, SCRIPT, "--session", home=tmp_path, serve=NO_HANDLES))


async def test_memory_state_over_stdio_refuses_the_handles(langchain: Path, tmp_path: Path) -> None:
    """``--state memory`` with a connection per call: each server process signs with a key
    of its own, so the next process refuses the handle (and would have no state for it):
    the model is told to start a new conversation. Hence the docs' advice to keep the
    default state file."""
    arguments = ("mcp-actors", "serve", "--handles", "--state", "memory")
    for person, seen in seen_by(
        await run_script(langchain, SCRIPT, *arguments, home=tmp_path)
    ).items():
        assert "this server knows no conversation 'conv_" in seen, (person, seen)
        assert "call conversation__start to start a new conversation" in seen, (person, seen)
