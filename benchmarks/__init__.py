"""The benchmark and stress harness: ``python -m benchmarks``.

Every scenario runs the runtime beside its baselines in one process, the
contenders interleaved round by round (A, B, C, A, B, C, ...), and reports the
median of the rounds with their spread, each figure beside its target:

* ``call_path`` — a no-op ``Runtime.call_tool`` against a bare trio task per
  key (the design's floor), a dict of states behind per-key ``trio.Lock`` (the
  replaced design's first fix) and a direct function call;
* ``activation`` — actors started per second, first call against warm call;
* ``memory`` — heap and RSS per idle actor, and what TTL expiry gives back,
  one fresh subprocess per size;
* ``churn`` — a TTL near zero under load: no lost, wrong or duplicated call;
* ``isolation`` — interleaved sessions through the ``planning`` module: no
  leaked goal, while the replaced ``switch_context`` design leaks;
* ``mcp`` — tools/call over stdio with the SDK client, through a server with
  actors and one calling handlers directly: the actor hop's share;
* ``durable`` — durable state: SQLite and the memory store against no store
  (call path, acknowledged writes per second, reactivation, a 1 MiB state),
  and over stdio against FastMCP's session state (calls/s, lost updates);
* ``peers`` — the same keyed call through Ray and pykka, when installed.

A number never makes the harness fail: it reports. `run_suite` is the entry
point for programs (the tests use it with the ``tiny`` sizes).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._report import Figure as Figure
    from ._report import Report as Report
    from ._sizes import Sizes as Sizes
    from ._suite import PRESETS as PRESETS
    from ._suite import SCENARIOS as SCENARIOS
    from ._suite import run_suite as run_suite

__all__ = ["PRESETS", "SCENARIOS", "Figure", "Report", "Sizes", "run_suite"]

_HOMES: Final = {
    "Figure": "._report",
    "Report": "._report",
    "PRESETS": "._suite",
    "SCENARIOS": "._suite",
    "Sizes": "._suite",
    "run_suite": "._suite",
}


def __getattr__(name: str) -> object:
    """Import the suite on first use of one of its names, not with the package.

    ``--against COMMIT`` runs `benchmarks._call_path_worker` against another
    commit's ``actors``, which may lack what the other scenarios import:
    importing every scenario with the package would fail there.
    """
    home = _HOMES.get(name)
    if home is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    return getattr(importlib.import_module(home, __name__), name)
