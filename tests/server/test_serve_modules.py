"""Serving your own modules: ``serve --module package.module:attribute`` and `ServeOptions`."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

from actors.server import ConfigurationError, ServeOptions, load_module
from actors.server._options import build_modules
from examples.notes import notes

from .._mcp_helpers import LISTENING, SERVE, HttpServer, LogFile, texts

if TYPE_CHECKING:
    from collections.abc import Iterator

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


@pytest.fixture
def in_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh current folder; the modules and sys.path entries loading adds are undone after."""
    monkeypatch.chdir(tmp_path)
    modules, path = set(sys.modules), sys.path[:]
    yield tmp_path
    for name in set(sys.modules) - modules:
        del sys.modules[name]
    sys.path[:] = path


ONE_MODULE = """
from actors import ToolModule
from helper import GREETING

box = ToolModule("box", lambda context: [])

@box.tool
def hello(state: list[str]) -> str:
    'Say hello, in the words of the file beside this one.'
    return GREETING
"""


class TestFileSpecs:
    """``--module`` takes a Python file, as ``python path/to/file.py`` would run it."""

    def _write(self, folder: Path, name: str, text: str) -> Path:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def test_a_file_with_one_module_needs_no_attribute_and_imports_its_siblings(
        self, in_a_folder: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        path = self._write(in_a_folder / "tools", "notes_here.py", ONE_MODULE)
        self._write(in_a_folder / "tools", "helper.py", "GREETING = 'hi'\n")
        with caplog.at_level("INFO", logger="actors.serve"):
            loaded = load_module("tools/notes_here.py")
        assert loaded.name == "box"
        assert list(loaded.tools) == ["hello"]
        assert str(path) in caplog.text  # which file it loaded is said

    @pytest.mark.parametrize("spelling", ["relative", "dot-relative", "absolute"])
    def test_a_file_and_an_attribute_name_the_module(
        self, in_a_folder: Path, spelling: str
    ) -> None:
        path = self._write(in_a_folder, "two.py", TWO_MODULES)
        spec = {
            "relative": "two.py:second",
            "dot-relative": "./two.py:second",
            "absolute": f"{path}:second",
        }[spelling]
        assert load_module(spec).name == "second"

    def test_a_file_named_like_a_standard_module_neither_hides_it_nor_is_hidden(
        self, in_a_folder: Path
    ) -> None:
        self._write(in_a_folder, "calendar.py", TWO_MODULES)
        import calendar

        assert load_module("calendar.py:first").name == "first"
        assert sys.modules["calendar"] is calendar
        assert hasattr(calendar, "monthrange")  # still the standard library's

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ("missing.py", "there is no file"),
            ("folder/", "is not a Python file"),
            (
                "two.py",
                "the file defines 2 ToolModules (first, second); name one, e.g. two.py:first",
            ),
            ("empty.py", "the file defines no ToolModule at its top level"),
            ("broken.py", "cannot import"),
            ("two.py:third", "has no attribute 'third'"),
        ],
    )
    def test_a_bad_file_spec_is_refused_naming_it(
        self, in_a_folder: Path, spec: str, message: str
    ) -> None:
        self._write(in_a_folder, "two.py", TWO_MODULES)
        self._write(in_a_folder, "empty.py", "X = 1\n")
        self._write(in_a_folder, "broken.py", "raise RuntimeError('import-time failure')\n")
        (in_a_folder / "folder").mkdir()
        with pytest.raises(ConfigurationError, match=re.escape(message)):
            ServeOptions(modules=(spec,)).check()

    def test_a_broken_file_leaves_no_half_module_behind(self, in_a_folder: Path) -> None:
        self._write(in_a_folder, "broken_here.py", "raise RuntimeError('import-time failure')\n")
        with pytest.raises(ConfigurationError, match="RuntimeError: import-time failure"):
            load_module("broken_here.py")
        assert "broken_here" not in sys.modules


TWO_MODULES = """
from actors import ToolModule
first = ToolModule("first", lambda context: [])
second = ToolModule("second", lambda context: [])
"""


async def test_serve_a_module_file_over_stdio(tmp_path: Path) -> None:
    """``serve --module /path/to/notes.py`` (a file outside the current folder) serves it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[*SERVE[1:], "--module", str(ROOT / "examples" / "notes.py"), "--state", "memory"],
        cwd=tmp_path,
        env={"XDG_STATE_HOME": str(tmp_path)},
    )
    with (tmp_path / "stderr").open("w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                mine = {"sessionId": "s1"}
                await session.call_tool("notes__add_note", {"text": "one"}, meta=mine)
                counted = await session.call_tool("notes__count_notes", {}, meta=mine)
        errlog.seek(0)
        log = errlog.read()
    assert "notes__add_note" in {tool.name for tool in listed.tools}
    assert '"count": 1' in texts(counted)
    assert str(ROOT / "examples" / "notes.py") in log  # the file it loaded, named
