"""A clear error when a file of the user's hides the ``protocol`` package this one needs.

``python -m actors`` puts the current folder first on ``sys.path`` (Python
does that for ``-m``), and ``protocol.py`` is a likely name in an MCP
project: imported instead of this project's ``protocol`` package, it would
fail with a puzzling ``cannot import name``. Checked once, at import, before
anything imports ``protocol``. The ``mcp-actors`` command does not put the
current folder first, so it is not exposed to this.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__ = ["check_protocol_package"]

_OURS = Path(__file__).resolve().parent.parent / "protocol" / "__init__.py"


def check_protocol_package() -> None:
    """Raise ImportError naming the file that stands where the ``protocol`` package should."""
    spec = importlib.util.find_spec("protocol")
    found = None if spec is None or spec.origin is None else Path(spec.origin).resolve()
    if found == _OURS:
        return
    where = "nothing" if found is None else f"{found}"
    msg = (
        f"mcp-actors needs its package 'protocol' ({_OURS.parent}), but 'import protocol' finds "
        f"{where}, which comes before it on sys.path (python -m puts the current folder "
        "first); rename that file, or run the 'mcp-actors' command, which does not"
    )
    if sys.argv[:1] == ["-m"]:  # `python -m actors` importing its package: a usage error
        print(f"python -m actors: error: {msg}", file=sys.stderr)
        raise SystemExit(2)
    raise ImportError(msg)
