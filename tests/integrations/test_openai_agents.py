"""openai-agents' MCP servers, used as its docs show, against ``mcp-actors serve`` with handles.

openai-agents runs from a virtual environment of its own (`tests._venvs.framework_python`:
its pins are not this project's), driven by a scripted `Model` subclass in the
documentation's example, ``tests/integrations/openai_agents_example.py``: two
conversations at once on one server connection, each over two runs, each model opening its
conversation with ``conversation__start`` and passing the handle in every later call, with
``mcp_config={"convert_schemas_to_strict": True}`` (the model refuses a tool whose schema
did not become strict, as OpenAI's API would). `MCPServerStdio` starts ``mcp-actors serve
--handles`` itself; `MCPServerStreamableHttp` connects to a real ``serve --http`` on
127.0.0.1, handles on by default, in the 2026-07-28 era (the MCP SDK 2 client's
``mode="auto"``). Either way the example must print each conversation's own goal and no
other's, as the docs page shows. Without handles, the one connection's session mixes the
two over stdio, and over HTTP every call is refused: what the handles fix.

``tests/integrations/openai_agents_resources.py`` reads a resource and a prompt with the
handle in the URI and the arguments: openai-agents cannot send ``_meta`` with either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .._integration_runs import (
    STDIO_WITHOUT_HANDLES,
    apart,
    mixed,
    notes_read,
    refused,
    run_over_http,
    run_script,
)
from .._venvs import framework_python
from ..integrations import FOLDER, NOTES_SERVED, examples_importable

if TYPE_CHECKING:
    from pathlib import Path

REQUIREMENTS = ("openai-agents==0.24.0",)  # the version the issue saw working over stdio
SCRIPT = FOLDER / "openai_agents_example.py"


@pytest.fixture(scope="module")
def openai_agents() -> Path:
    """The Python of openai-agents' environment (installed once; a skip, or on CI a
    failure, without the package index)."""
    return framework_python(
        "openai-agents", REQUIREMENTS, needed_by="the openai-agents integration tests"
    )


class TestWithHandles:
    async def test_mcp_server_stdio(self, openai_agents: Path, tmp_path: Path) -> None:
        """`MCPServerStdio(params={"command": "mcp-actors", "args": ["serve", "--handles"]})`:
        one server process and one connection for both conversations, kept apart by
        their handles."""
        apart(await run_script(openai_agents, SCRIPT, home=tmp_path))

    async def test_mcp_server_streamable_http(self, openai_agents: Path, tmp_path: Path) -> None:
        """`MCPServerStreamableHttp(params={"url": …})` against ``serve --http``, handles
        on by default: each conversation keeps its goal across runs, and neither sees the
        other's."""
        apart(await run_over_http(openai_agents, SCRIPT, home=tmp_path))

    async def test_resources_and_prompts_take_the_handle(
        self, openai_agents: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`read_resource("URI?conversation=…")` and `get_prompt(…, {"conversation": …})`
        reach the conversation's notes; a read without the handle is refused, saying what
        to do."""
        examples_importable(monkeypatch)
        script = FOLDER / "openai_agents_resources.py"
        notes_read(await run_over_http(openai_agents, script, home=tmp_path, serve=NOTES_SERVED))


class TestWithoutHandles:
    async def test_one_connection_mixes_over_stdio(
        self, openai_agents: Path, tmp_path: Path
    ) -> None:
        """``serve --no-handles`` (stdio's default): both conversations share the one
        `MCPServerStdio` connection, and so its one session."""
        mixed(await run_script(openai_agents, SCRIPT, *STDIO_WITHOUT_HANDLES, home=tmp_path))

    async def test_every_call_is_refused_over_http(
        self, openai_agents: Path, tmp_path: Path
    ) -> None:
        """A 2026-era connection has no session, and these calls name none."""
        refused(await run_over_http(openai_agents, SCRIPT, home=tmp_path, serve=["--no-handles"]))
