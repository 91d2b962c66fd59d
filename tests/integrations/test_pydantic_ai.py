"""pydantic-ai's `MCPToolset`, used as its docs show, against ``mcp-actors serve`` with handles.

pydantic-ai runs from a virtual environment of its own (`tests._venvs.framework_python`:
its pins are not this project's), driven by its own fake model (`FunctionModel`) in the
documentation's example, ``tests/integrations/pydantic_ai_example.py``: two conversations
at once on one toolset, each over two agent runs, each model opening its conversation with
``conversation__start`` and passing the handle in every later call. Over stdio pydantic-ai
starts ``mcp-actors serve --handles`` itself (FastMCP's `StdioTransport`); over Streamable
HTTP it connects to a real ``serve --http`` on 127.0.0.1, handles on by default, in the
2026-07-28 era (FastMCP's default: no protocol session). Either way the example must print
each conversation's own goal and no other's, as the docs page shows. Without handles, the
one connection's session mixes the two over stdio, and over HTTP every call is refused:
what the handles fix.

``tests/integrations/pydantic_ai_resources.py`` reads a resource and a prompt with the
handle in the URI and the arguments: pydantic-ai cannot send ``_meta`` with either.
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

# The version the issue saw working over stdio; its `mcp` extra brings FastMCP's client.
REQUIREMENTS = ("pydantic-ai-slim[mcp]==2.68.0",)
SCRIPT = FOLDER / "pydantic_ai_example.py"


@pytest.fixture(scope="module")
def pydantic_ai() -> Path:
    """The Python of pydantic-ai's environment (installed once; a skip, or on CI a failure,
    without the package index)."""
    return framework_python(
        "pydantic-ai", REQUIREMENTS, needed_by="the pydantic-ai integration tests"
    )


class TestWithHandles:
    async def test_over_stdio(self, pydantic_ai: Path, tmp_path: Path) -> None:
        """`MCPToolset(StdioTransport("mcp-actors", ["serve", "--handles"]))`: one server
        process and one connection for both conversations, kept apart by their handles."""
        apart(await run_script(pydantic_ai, SCRIPT, home=tmp_path))

    async def test_over_streamable_http(self, pydantic_ai: Path, tmp_path: Path) -> None:
        """`MCPToolset(url)` against ``serve --http``, handles on by default: each
        conversation keeps its goal across runs, and neither sees the other's."""
        apart(await run_over_http(pydantic_ai, SCRIPT, home=tmp_path))

    async def test_resources_and_prompts_take_the_handle(
        self, pydantic_ai: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`read_resource("URI?conversation=…")` and `get_prompt(…, {"conversation": …})`
        reach the conversation's notes; a read without the handle is refused, saying what
        to do."""
        examples_importable(monkeypatch)
        script = FOLDER / "pydantic_ai_resources.py"
        notes_read(await run_over_http(pydantic_ai, script, home=tmp_path, serve=NOTES_SERVED))


class TestWithoutHandles:
    async def test_one_connection_mixes_over_stdio(self, pydantic_ai: Path, tmp_path: Path) -> None:
        """``serve --no-handles`` (stdio's default): both conversations share the toolset's
        one connection, and so its one session."""
        mixed(await run_script(pydantic_ai, SCRIPT, *STDIO_WITHOUT_HANDLES, home=tmp_path))

    async def test_every_call_is_refused_over_http(self, pydantic_ai: Path, tmp_path: Path) -> None:
        """A 2026-era connection has no session, and these calls name none."""
        refused(await run_over_http(pydantic_ai, SCRIPT, home=tmp_path, serve=["--no-handles"]))
