"""What the package ships and what importing it costs."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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
