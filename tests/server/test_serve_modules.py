"""Serving your own modules: ``serve --module package.module:attribute`` and `ServeOptions`."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

from actors.server import ConfigurationError, ServeOptions, load_module
from actors.server._options import build_modules
from examples.notes import notes

from .._mcp_helpers import LISTENING, SERVE, HttpServer, LogFile, texts

ROOT = Path(__file__).resolve().parents[2]

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]


@pytest.fixture
def own_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path with modules that are and are not ToolModules."""
    (tmp_path / "mine.py").write_text(
        textwrap.dedent(
            """
            from actors import ToolModule
            box = ToolModule("box", lambda context: [])
            again = ToolModule("planning", lambda context: [])
            class Holder:
                inner = box
            not_a_module = 42
            """
        )
    )
    (tmp_path / "broken.py").write_text("raise RuntimeError('import-time failure')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


class TestModuleSpecs:
    def test_a_spec_names_a_module_object(self, own_modules: Path) -> None:
        with pytest.raises(ConfigurationError, match="box given more than once"):
            ServeOptions(modules=("mine:box", "mine:Holder.inner")).check()
        options = ServeOptions(modules=("planning", "mine:Holder.inner"))
        options.check()
        assert [module.name for module in build_modules(options)] == ["planning", "box"]

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ("mine", "unknown module 'mine'"),
            ("mine:", "expected package.module:attribute"),
            (":box", "expected package.module:attribute"),
            ("mine:box:extra", "expected package.module:attribute"),
            ("nowhere_at_all:box", "cannot import 'nowhere_at_all': ModuleNotFoundError"),
            ("broken:x", "cannot import 'broken': RuntimeError: import-time failure"),
            ("mine:missing", "'mine' has no attribute 'missing'"),
            ("mine:not_a_module", "'not_a_module' is a int, not a ToolModule"),
            ("mine:again", "planning given more than once"),
        ],
    )
    def test_a_bad_spec_is_refused_naming_it(
        self, own_modules: Path, spec: str, message: str
    ) -> None:
        with pytest.raises(ConfigurationError, match=re.escape(message)):
            ServeOptions(modules=("planning", spec)).check()

    def test_module_objects_are_served_as_given(self) -> None:
        options = ServeOptions(modules=(notes,))
        options.check()
        assert build_modules(options) == [notes]

    def test_load_module(self) -> None:
        assert load_module("examples.notes:notes") is notes


async def test_serve_module_over_stdio(tmp_path: Path) -> None:
    """``serve --module examples.notes:notes`` serves that module alone, state per context."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[*SERVE[1:], "--module", "examples.notes:notes", "--state", "memory"],
        cwd=ROOT,
        env={"XDG_STATE_HOME": str(tmp_path)},
    )
    with (tmp_path / "stderr").open("w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                mine = {"sessionId": "s1", "assistantId": "a"}
                await session.call_tool("notes__add_note", {"text": "one"}, meta=mine)
                counted = await session.call_tool("notes__count_notes", {}, meta=mine)
                other = await session.call_tool(
                    "notes__count_notes", {}, meta={"sessionId": "s1", "assistantId": "b"}
                )
    assert {tool.name for tool in listed.tools} == {
        "notes__add_note",
        "notes__count_notes",
        "notes__clear_notes",
    }
    assert '"count": 1' in texts(counted)
    assert '"count": 0' in texts(other)


SERVE_NOTES_FROM_PYTHON = """
from actors.server import ServeOptions, run
from examples.notes import notes
run(ServeOptions(modules=(notes,), http=("127.0.0.1", 0), state="memory"))
"""


async def test_serve_modules_from_python(tmp_path: Path) -> None:
    """`actors.server.run` serves module objects over HTTP and stops cleanly on SIGTERM."""
    with (tmp_path / "stderr").open("w+b") as file:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-c", SERVE_NOTES_FROM_PYTHON],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stderr=file,
        )
        try:
            log = LogFile(file)
            url = (await log.wait_for(LISTENING, process)).group(1)
            async with HttpServer(process, log, url).session() as session:
                meta = {"sessionId": "s1", "assistantId": "a"}
                await session.call_tool("notes__add_note", {"text": "one"}, meta=meta)
                counted = await session.call_tool("notes__count_notes", {}, meta=meta)
            process.terminate()
            with trio.fail_after(15):
                assert await process.wait() == 0
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.wait()
    assert '"count": 1' in texts(counted)
