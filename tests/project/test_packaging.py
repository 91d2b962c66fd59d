"""What the package ships and what importing it costs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from .._mcp_helpers import http_server, texts

ROOT = Path(__file__).resolve().parents[2]

# Heavier than the core's trio, attrs and cattrs: only the extras may pull these in.
EXTRAS_ONLY = ("mcp", "starlette", "hypercorn", "pydantic", "anyio", "psycopg", "httpx")

IMPORTS = """
import sys
import actors, actors.modules, actors.store, protocol
loaded = sorted({name.partition('.')[0] for name in sys.modules} & set(sys.argv[1:]))
print(','.join(loaded))
"""


def test_importing_the_library_needs_none_of_the_extras() -> None:
    """`import actors` (modules and stores included) never imports the server's dependencies."""
    found = subprocess.run(
        [sys.executable, "-c", IMPORTS, *EXTRAS_ONLY],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    assert found.stdout.strip() == ""


def test_the_wheel_ships_actors_and_protocol_only(tmp_path: Path) -> None:
    """A built wheel holds the two packages (server and modules included), not benchmarks."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", tmp_path, ROOT],
        check=True,
        timeout=240,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {
        name.partition("/")[0]
        for name in names
        if not name.partition("/")[0].endswith(".dist-info")
    }
    assert top == {"actors", "protocol"}
    for expected in ("actors/server/__init__.py", "actors/modules/__init__.py", "actors/py.typed"):
        assert expected in names


def test_hypercorn_is_a_benchmark_and_test_dependency_only() -> None:
    """The server extra serves HTTP on our own server: hypercorn comes with bench and test."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    with_hypercorn = {
        extra
        for extra, requirements in extras.items()
        if any(requirement.startswith("hypercorn") for requirement in requirements)
    }
    assert with_hypercorn == {"bench", "test"}


# `python -m actors`, reporting at exit into the file of its first argument which of the
# packages after it it had imported.
SERVE_AND_REPORT = """
import atexit, pathlib, runpy, sys
report, watched, sys.argv[1:] = pathlib.Path(sys.argv[1]), sys.argv[2].split(','), sys.argv[3:]
atexit.register(lambda: report.write_text(','.join(n for n in watched if n in sys.modules)))
runpy.run_module('actors', run_name='__main__')
"""


# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
@pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning")
@pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning")
async def test_serving_http_imports_no_hypercorn(tmp_path: Path) -> None:
    """``serve --http`` answers the SDK client (a 2025-era session: the SDK's session manager
    and the fast path both) without ever importing hypercorn."""
    report = tmp_path / "imported"
    watched = "hypercorn,httptools"  # httptools: proof the report sees what was imported
    command = (sys.executable, "-c", SERVE_AND_REPORT, str(report), watched, "serve")
    async with http_server("--state", "memory", command=command) as server:
        async with server.session() as client:
            called = await client.call_tool("planning__list_goals", {}, meta={"sessionId": "p"})
    assert texts(called) == "No goals yet."
    # Written at exit: the server stopped on SIGTERM, as it should.
    assert report.read_text() == "httptools"
