"""The documentation's examples do what their pages say.

Every Python file under ``docs_src/start`` and ``docs_src/guides`` is included by a page
and run here as the page tells a reader to run it, on real components: the runtime, SQLite
stores in the test's folders, ``mcp-actors serve`` processes driven by the MCP SDK's
client, uvicorn. Where a page shows what an example prints, that text is a file beside the
example (``x.py`` → ``x.txt``) which the page includes, and the test compares the output
with it. The desktop hosts' configurations are started as a host would start them.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
from mcp import Client, StdioServerParameters

from actors._cli import main as mcp_actors
from actors.store import default_state_url

from .._mcp_helpers import http_server, text_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
START = ROOT / "docs_src" / "start"
GUIDES = ROOT / "docs_src" / "guides"
# The command a reader's virtual environment has: beside the interpreter running the tests.
MCP_ACTORS = Path(sys.executable).with_name("mcp-actors")

PAGES = [
    DOCS / "index.md",
    *(DOCS / "getting-started" / name for name in ("install.md", "first-tool.md")),
    *(DOCS / "getting-started" / name for name in ("serve.md", "desktop-hosts.md")),
    *(DOCS / "guides" / name for name in ("modules.md", "durable-state.md")),
    *(DOCS / "guides" / name for name in ("resources.md", "asking.md")),
    *(DOCS / "guides" / name for name in ("embedding.md", "testing.md")),
]

# Examples that run on their own and print what the page shows beside them.
PRINTING = [
    START / "try_notes.py",
    *(
        GUIDES / f"{name}.py"
        for name in (
            "modules_scopes",
            "modules_schemas",
            "modules_types",
            "modules_declarations",
            "modules_results",
            "modules_plain",
            "modules_annotations",
            "modules_heavy",
            "modules_names",
            "showing_recipes",
            "client_asking",
            "durable_migrations",
            "durable_parts",
            "embed_trio",
            "embed_asyncio",
            "embed_blocking",
            "embed_cancel",
            "embed_errors",
        )
    ),
]
# The others, each run by a test of its own below.
RUN_ELSEWHERE = {
    START / "notes.py": "imported by every notes example, served by the server tests",
    START / "stdio_client.py": "test_stdio_client_prints_what_serve_md_shows",
    START / "http_client.py": "test_http_client_prints_what_serve_md_shows",
    START / "test_notes.py": "test_the_tutorial_in_a_fresh_folder_starts_from_zero",
    GUIDES / "durable_store.py": "test_durable_store_and_the_state_commands",
    GUIDES / "durable_backup.py": "tests/store/test_dump.py, beside the store's own tests",
    GUIDES / "embed_fastapi.py": "test_the_fastapi_service_answers_rest_and_mcp",
}

SNIPPET = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::(?P<region>[\w-]+))?"$', re.MULTILINE)
FENCE = re.compile(r"^```(\w+)", re.MULTILINE)


def page_text(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def shell_lines(page: str, command: str) -> list[str]:
    """The lines of `page`'s shell blocks that start with `command`, each joined with the
    lines it continues onto (a line ending in a backslash, wrapped to fit the page)."""
    blocks = re.findall(r"^```sh\n(.*?)^```", page_text(page), re.MULTILINE | re.DOTALL)
    lines = [line for block in blocks for line in re.sub(r"\\\n\s*", " ", block).splitlines()]
    return [line for line in lines if line.startswith(command)]


def expected_output(example: Path) -> str:
    return example.with_suffix(".txt").read_text(encoding="utf-8")


def run_example(example: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run `example` as ``python example.py ARGV`` would, in this process; what it printed."""
    sys.modules.pop("notes", None)  # docs_src/start/notes.py, imported afresh from its folder
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(example.parent))
        patch.setattr(sys, "argv", [str(example), *argv])
        try:
            runpy.run_path(str(example), run_name="__main__")
        finally:
            sys.modules.pop("notes", None)
    return capsys.readouterr().out


def state_command(capsys: pytest.CaptureFixture[str], line: str) -> str:
    """Run a ``mcp-actors state …`` line from a page through the console script's function."""
    argv = shlex.split(line, comments=True)
    assert argv[0] == "mcp-actors", line
    code = mcp_actors(argv[1:])
    out = capsys.readouterr().out
    assert code == 0, f"{line!r} exited with {code}: {out}"
    return out


class TestThePagesAndTheirExamples:
    def test_every_python_block_is_included_from_an_example_that_is_run(self) -> None:
        """No inline Python on these pages; every included file exists and is tested here."""
        included: set[Path] = set()
        for page in PAGES:
            text = page.read_text(encoding="utf-8")
            blocks = re.findall(r"^```python[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
            for block in blocks:
                assert SNIPPET.fullmatch(block.strip()), f"{page.name}: inline Python:\n{block}"
            for match in SNIPPET.finditer(text):
                path = ROOT / match["path"]
                assert path.is_file(), f"{page.name} includes {match['path']}, which is missing"
                if match["region"]:
                    marker = f"# --8<-- [start:{match['region']}]"
                    assert marker in path.read_text(encoding="utf-8"), f"{match[0]} has no region"
                included.add(path)
        examples = {*START.glob("*.py"), *GUIDES.glob("*.py")}
        assert examples <= included, f"not on any page: {sorted(examples - included)}"
        tested = {*PRINTING, *RUN_ELSEWHERE}
        assert examples == tested, f"not run by a test: {sorted(examples - tested)}"
        for example in PRINTING:
            assert example.with_suffix(".txt") in included, f"{example.name}'s output not shown"

    def test_every_fenced_block_says_its_language(self) -> None:
        """A block without a language renders unhighlighted: each page names it."""
        for page in PAGES:
            text = page.read_text(encoding="utf-8")
            fences = re.findall(r"^```(.*)$", text, re.MULTILINE)
            openings = fences[::2]
            assert all(opening.strip() for opening in openings), page.name


@pytest.mark.parametrize("example", PRINTING, ids=[example.stem for example in PRINTING])
def test_example_prints_what_its_page_shows(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python example.py`` prints exactly the text its page shows."""
    assert run_example(example, capsys) == expected_output(example)


# ---- install.md ---------------------------------------------------------------------------


def test_the_extras_table_names_real_extras() -> None:
    """Every extra the install page lists is one of the project's extras."""
    extras = re.findall(r"^\| `(\w+)` \|", page_text("getting-started/install.md"), re.MULTILINE)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert extras, "no extras table"
    assert set(extras) <= set(pyproject["project"]["optional-dependencies"])


def test_the_install_check_commands_work(capsys: pytest.CaptureFixture[str]) -> None:
    """``mcp-actors --version`` and the demo run; the demo ends as the page says."""
    with pytest.raises(SystemExit) as exited:
        mcp_actors(["--version"])
    assert exited.value.code == 0
    assert shell_lines("getting-started/install.md", "python -m actors demo")
    assert mcp_actors(["demo"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "runtime: 6 actors, 30 calls, 0 errors, 0 duplicate actors"
    assert f"`{last}`" in page_text("getting-started/install.md")


# ---- serve.md -----------------------------------------------------------------------------


@pytest.fixture
def reader_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A reader's shell: the virtual environment on PATH, and a home of the test's own.

    The SDK's stdio client passes a server only a few variables (HOME, PATH, …), not
    XDG_STATE_HOME: its state goes to ``$HOME/.local/state/mcp-actors/state.db``.
    """
    monkeypatch.setenv("PATH", f"{MCP_ACTORS.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def load_example(example: Path) -> Mapping[str, Any]:
    """The globals of `example`, imported as a module (its ``__main__`` block not run)."""
    return runpy.run_path(str(example), run_name=f"docs_example_{example.stem}")


async def stored_keys(state_file: Path) -> list[str]:
    """``mcp-actors state list --all --json`` on `state_file`: every stored key's session."""
    listed = await trio.run_process(
        [MCP_ACTORS, "state", "list", "--state", f"sqlite:///{state_file}", "--all", "--json"],
        capture_stdout=True,
    )
    return [json.loads(line)["key"]["session"] for line in listed.stdout.decode().splitlines()]


async def test_stdio_client_prints_what_serve_md_shows(
    reader_environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SDK client starts ``mcp-actors serve --module notes:notes``; the connection's own
    session is deleted when it closes, from the default state file."""
    example = START / "stdio_client.py"
    assert "mcp-actors serve --module notes:notes" in shell_lines("getting-started/serve.md", "")
    await load_example(example)["main"]()
    assert capsys.readouterr().out == expected_output(example)
    state_file = reader_environment / ".local/state/mcp-actors/state.db"
    assert state_file.is_file()
    assert await stored_keys(state_file) == []


async def test_http_client_prints_what_serve_md_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The client calls ``mcp-actors serve --module notes:notes --http …`` by session; the
    state stays in the reader's folder."""
    (line,) = shell_lines("getting-started/serve.md", "mcp-actors serve --module notes:notes --")
    arguments = shlex.split(line)[2:]
    at = arguments.index("--http")
    assert arguments[at + 1] == "127.0.0.1:8765"
    del arguments[at : at + 2]  # the test's server listens on a free port
    assert arguments[-2:] == ["--state", "sqlite:///notes.db"]
    shutil.copy(START / "notes.py", tmp_path)
    monkeypatch.chdir(tmp_path)  # the page serves from the folder of notes.py
    example = START / "http_client.py"
    async with http_server(*arguments, command=(str(MCP_ACTORS), "serve")) as server:
        await load_example(example)["main"](server.url)
    assert capsys.readouterr().out == expected_output(example)
    assert (tmp_path / "notes.db").is_file()


# ---- desktop-hosts.md ---------------------------------------------------------------------


def desktop_config(name: str, placeholders: Mapping[str, Path]) -> dict[str, Any]:
    """The one server entry of a host configuration, its placeholders replaced."""
    text = (START / name).read_text(encoding="utf-8")
    for placeholder, path in placeholders.items():
        assert placeholder in text, f"{name} no longer has {placeholder}"
        text = text.replace(placeholder, str(path))
    config = json.loads(text)
    (entry,) = (config.get("mcpServers") or config["servers"]).values()
    return dict(entry)


async def host_starts_and_calls(
    entry: Mapping[str, Any], cwd: Path, call: Callable[[Client], Any]
) -> Any:
    """Start the server as a host does (its command, args and env, in a folder not the
    user's); initialize, as hosts do, and make `call`."""
    server = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=entry.get("env"), cwd=cwd
    )
    async with Client(server, mode="legacy") as client:
        return await call(client)


async def add_then_list(client: Client) -> str:
    await client.call_tool("notes__add_note", {"text": "buy milk"})
    return text_of(await client.call_tool("notes__list_notes", {}))


async def just_list(client: Client) -> str:
    return text_of(await client.call_tool("notes__list_notes", {}))


async def test_the_claude_desktop_configuration_keeps_its_session(
    reader_environment: Path, tmp_path: Path
) -> None:
    """With ``--session desktop`` notes outlive the server; without it, each start is a
    private session, deleted when it ends; the state is in the default state file."""
    entry = desktop_config(
        "claude_desktop_config.json",
        {"/path/to/venv/bin/mcp-actors": MCP_ACTORS, "/path/to/folder-of-notes": START},
    )
    args = entry["args"]
    assert args[args.index("--session") + 1] == "desktop"
    anonymous = {**entry, "args": [a for a in args if a not in ("--session", "desktop")]}
    elsewhere = tmp_path / "wherever-the-host-starts-it"
    elsewhere.mkdir()
    outcomes: dict[str, list[str]] = {}

    async def restarts(name: str, server: Mapping[str, Any]) -> None:
        first = await host_starts_and_calls(server, elsewhere, add_then_list)
        second = await host_starts_and_calls(server, elsewhere, just_list)
        outcomes[name] = [first, second]
        if name == "desktop":  # $MCP_ACTORS_SESSION names the same session
            named = {**anonymous, "env": {**anonymous["env"], "MCP_ACTORS_SESSION": "desktop"}}
            outcomes[name].append(await host_starts_and_calls(named, elsewhere, just_list))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(restarts, "desktop", entry)
        nursery.start_soon(restarts, "anonymous", anonymous)
    assert outcomes["desktop"] == ["- buy milk", "- buy milk", "- buy milk"]
    assert outcomes["anonymous"] == ["- buy milk", "No notes yet."]
    state_file = reader_environment / ".local/state/mcp-actors/state.db"
    assert await stored_keys(state_file) == ["desktop"]
    # Without PYTHONPATH the server cannot find notes.py, and says so as the page shows.
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    lost = await trio.run_process(
        [entry["command"], *args], cwd=elsewhere, env=environment, capture_stderr=True, check=False
    )
    assert lost.returncode == 2
    message = "mcp-actors serve: error: module 'notes:notes': cannot import 'notes':"
    assert lost.stderr.decode().startswith(f"{message} ModuleNotFoundError")
    page = " ".join(page_text("getting-started/desktop-hosts.md").split())
    assert message in page


async def test_the_ide_configuration_starts_the_server(
    reader_environment: Path, tmp_path: Path
) -> None:
    """VS Code's ``.vscode/mcp.json`` starts a server that answers initialize and lists the
    notes tools (the Inspector's command is run by tests/server/test_inspect.py)."""
    workspace_command = "${workspaceFolder}/.venv/bin/mcp-actors"
    entry = desktop_config(
        "vscode_mcp.json", {workspace_command: MCP_ACTORS, "${workspaceFolder}": START}
    )
    assert entry["type"] == "stdio"

    async def tool_names(client: Client) -> set[str]:
        return {tool.name for tool in (await client.list_tools()).tools}

    names = await host_starts_and_calls(entry, tmp_path, tool_names)
    assert names == {"notes__add_note", "notes__list_notes"}


# ---- durable-state.md ---------------------------------------------------------------------


def test_durable_store_and_the_state_commands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example prints what the page shows; then the page's ``mcp-actors state`` lines,
    in order, list, show, export, import an edited export, and delete its state."""
    monkeypatch.chdir(tmp_path)
    example = GUIDES / "durable_store.py"
    (run,) = shell_lines("guides/durable-state.md", "python durable_store.py")
    assert run_example(example, capsys, *shlex.split(run)[2:]) == expected_output(example)
    lines = shell_lines("guides/durable-state.md", "mcp-actors state")
    assert [shlex.split(line)[2] for line in lines] == [
        "list",
        "show",
        "export",
        "import",
        "delete",
    ]
    listed, shown, exported, imported, deleted = lines
    row = re.search(r"^todos\s+'s1'\s+-\s+-\s+(\d+)\s", state_command(capsys, listed), re.MULTILINE)
    assert row is not None
    record = json.loads(state_command(capsys, shown))
    assert int(row[1]) == record["version"]  # random from its first save: the same in both
    assert record["stored"] == {"schema": 1, "state": {"items": ["write docs"]}}
    state_command(capsys, exported)
    export = tmp_path / "s1.jsonl"
    record = json.loads(export.read_text(encoding="utf-8"))
    record["stored"]["state"]["items"] = ["write better docs"]
    export.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert state_command(capsys, imported).startswith("written 1,")
    assert json.loads(state_command(capsys, shown))["stored"]["state"]["items"] == [
        "write better docs"
    ]
    state_command(capsys, deleted)
    assert "todos" not in state_command(capsys, listed)


def test_the_state_commands_default_to_the_servers_state_file() -> None:
    """Without ``--state`` the commands open the file ``serve`` uses (the page says so)."""
    assert default_state_url().endswith("/mcp-actors/state.db")
    assert "without one, on the file `mcp-actors serve`" in page_text("guides/durable-state.md")


# ---- embedding.md -------------------------------------------------------------------------


async def test_the_fastapi_service_answers_rest_and_mcp(tmp_path: Path) -> None:
    """Under uvicorn, the page's two requests answer what it shows, an MCP client at /mcp
    sees the same goal, and SIGTERM stops the service cleanly."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    import httpx2

    page = page_text("guides/embedding.md")
    answers = [json.loads(line[2:]) for line in page.splitlines() if line.startswith('# {"text"')]
    assert len(answers) == 2
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as errors:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "uvicorn", "embed_fastapi:app", "--port", "0"],
            cwd=GUIDES,
            stdin=subprocess.DEVNULL,
            stdout=errors,
            stderr=errors,
        )
        try:
            with trio.fail_after(30):
                while not (found := re.search(r"running on (http://\S+)", log.read_text())):
                    assert process.poll() is None, log.read_text()
                    await trio.sleep(0.05)
            base = found[1]
            async with httpx2.AsyncClient(base_url=base) as http:
                created = await http.post("/sessions/s1/goals", json={"goal": "Learn Rust"})
                listed = await http.get("/sessions/s1/goals")
            assert [created.json(), listed.json()] == answers
            async with Client(f"{base}/mcp") as client:
                result = await client.call_tool(
                    "planning__list_goals", {}, meta={"sessionId": "s1"}
                )
            assert text_of(result) == answers[1]["text"]
            process.terminate()
            with trio.fail_after(15):
                # uvicorn shuts down gracefully, then raises the signal again with its
                # default handler: the status of a process stopped by SIGTERM.
                assert await process.wait() == -signal.SIGTERM
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert "Application shutdown complete" in log.read_text()


# ---- the tutorial, as a reader runs it ---------------------------------------------------

# The files a reader of first-tool.md, serve.md and testing.md writes in their folder.
TUTORIAL = ("pyproject.toml", "notes.py", "try_notes.py", "http_client.py", "test_notes.py")


def http_serve_line(example: Path) -> list[str]:
    """The ``mcp-actors serve … --http HOST:PORT …`` line `example`'s docstring gives."""
    (line,) = re.findall(r"^mcp-actors serve .*$", example.read_text(encoding="utf-8"), re.M)
    return shlex.split(line)


async def run_in(folder: Path, *argv: str) -> str:
    """Run `argv` in `folder` as a reader's shell would; what it printed (it must succeed)."""
    ran = await trio.run_process(
        [sys.executable, *argv], cwd=folder, capture_stdout=True, capture_stderr=True, check=False
    )
    out = ran.stdout.decode()
    assert ran.returncode == 0, f"{argv} in {folder}: {out}{ran.stderr.decode()}"
    return out


async def test_the_tutorial_in_a_fresh_folder_starts_from_zero(
    reader_environment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twice, in a fresh folder outside this checkout, with the same home: ``python
    try_notes.py``, ``python -m pytest test_notes.py`` (the folder's own pytest settings)
    and the HTTP server of http_client.py with its client print what the pages show, the
    server's state in the folder — so the second reader's count is 1 again."""
    assert '--8<-- "docs_src/start/pyproject.toml"' in page_text("getting-started/first-tool.md")
    argv = http_serve_line(START / "http_client.py")
    port = argv.index("--http")
    for reader in ("first", "second"):
        folder = tmp_path / reader / "notes"
        folder.mkdir(parents=True)
        for name in TUTORIAL:
            (folder / name).write_bytes((START / name).read_bytes())
        assert await run_in(folder, "try_notes.py") == expected_output(START / "try_notes.py")
        tested = await run_in(folder, "-m", "pytest", "test_notes.py")
        assert re.search(r"\b6 passed\b", tested), tested
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(folder)  # the server imports notes.py from the folder it runs in
            rest = argv[2:port] + argv[port + 2 :]  # the helper serves on a free port
            async with http_server(*rest, command=(str(MCP_ACTORS), "serve")) as server:
                await load_example(folder / "http_client.py")["main"](server.url)
        assert capsys.readouterr().out == expected_output(START / "http_client.py"), reader
        assert await stored_keys(folder / "notes.db") == ["s1"]


# ---- testing.md ---------------------------------------------------------------------------


async def test_the_tutorials_tests_take_the_settings_of_its_folder() -> None:
    """In a folder inside this checkout, without pytest-xdist, the tests still run: pytest
    reads the folder's pyproject.toml, not the checkout's ``--numprocesses=auto``."""
    ran = await trio.run_process(
        [
            sys.executable,
            "-m",
            "pytest",
            str(START / "test_notes.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",  # a reader's environment has no pytest-xdist
            "no:xdist",
        ],
        cwd=ROOT,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    out = ran.stdout.decode()
    assert ran.returncode == 0, out + ran.stderr.decode()
    assert re.search(r"^6 passed", out, re.MULTILINE), out
    assert "```text\n6 passed\n```" in page_text("guides/testing.md")
