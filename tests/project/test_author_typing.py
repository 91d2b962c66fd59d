"""A module written as the docs write it type-checks under ``mypy --strict``.

The runtime takes ``ToolModule("notes", Notes, durable=True)``; a type checker must too,
and infer the state's type from it, or an author who runs mypy on the tutorial's module
is told it is wrong. The tutorial's and the FastMCP port's modules are checked as they
are, and a probe pins what the declarations' types are inferred as (`assert_type` is an
error when they are not).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

AS_DOCUMENTED = (
    ROOT / "docs_src" / "start" / "notes.py",
    ROOT / "examples" / "fastmcp_port" / "notes.py",
    ROOT / "docs_src" / "guides" / "modules_plain.py",
)

PROBE = """
from typing import assert_type

import attrs

from actors import Answer, Ask, Durable, ToolContext, ToolModule


@attrs.define
class Notes:
    items: list[str] = attrs.Factory(list)


def new_notes() -> Notes:
    return Notes()


def from_context(context: ToolContext) -> Notes:
    return Notes()


assert_type(ToolModule("a", Notes, durable=True), ToolModule[Notes])
assert_type(ToolModule("b", new_notes, durable=Durable(schema=2)), ToolModule[Notes])
assert_type(ToolModule("c", from_context, durable=Durable(Notes)), ToolModule[Notes])
assert_type(ToolModule("d", lambda context: Notes()), ToolModule[Notes])
assert_type(ToolModule("e"), ToolModule[None])


async def asked(ask: Ask) -> None:
    assert_type(await ask.user("Which?", Notes), Answer[Notes])
    assert_type(await ask.user("How many?", int), Answer[int])
"""


def strict_mypy(module: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on `module` alone, with an author's empty settings, not the project's."""
    settings = folder / "mypy.ini"
    settings.write_text("[mypy]\n", encoding="utf-8")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(folder / "cache"),
            "--config-file",
            str(settings),
            str(module),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=folder,
        check=False,
        # An editable install is found by an import hook mypy does not run: the checkout's
        # folder is where `actors` and `protocol` (and their py.typed) are.
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )


@pytest.mark.parametrize("module", AS_DOCUMENTED, ids=lambda path: path.parent.name)
def test_a_documented_module_passes_mypy_strict(module: Path, tmp_path: Path) -> None:
    """The module, as the page shows it, has no error under ``mypy --strict``."""
    checked = strict_mypy(module, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_declarations_are_inferred_as_their_state(tmp_path: Path) -> None:
    """Each way of declaring the state gives ``ToolModule[State]``; a typed ask, its type."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    checked = strict_mypy(probe, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
