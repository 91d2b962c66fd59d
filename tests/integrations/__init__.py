"""Scripts that drive the agent frameworks, and what their tests share.

Each ``<framework>_example.py`` runs with the Python of its framework's own virtual
environment (`tests._venvs.framework_python`), through `tests._integration_runs.run_script`,
never imported here: its imports are the framework's. What the examples print is compared
with `CONVERSATIONS`, and what the ``*_resources.py`` scripts print with `RESOURCES`: the
docs pages under ``docs/integrations/`` show both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

__all__ = ["CONVERSATIONS", "FOLDER", "NOTES_SERVED", "RESOURCES", "examples_importable"]

FOLDER = Path(__file__).resolve().parent
CONVERSATIONS = FOLDER / "conversations.txt"
"""What every ``*_example.py`` prints: each conversation's own goal, and no other's."""
RESOURCES = FOLDER / "resources.txt"
"""What every ``*_resources.py`` prints: a conversation's notes read through its handle."""
NOTES_SERVED = ("--modules", "planning", "--module", "examples.notes:notes")
"""``serve`` arguments for the ``*_resources.py`` scripts: the notes module has resources
and a prompt."""


def examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the servers a test starts import ``examples.notes`` (from this checkout)."""
    root = str(FOLDER.parent.parent)
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", root if path is None else f"{root}{os.pathsep}{path}")
