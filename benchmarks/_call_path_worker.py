"""One round of ``call_path`` in a fresh process: ``python -m benchmarks._call_path_worker``.

``--against COMMIT`` (`benchmarks._against`) starts one of these per round and
per code version, with ``sys.path`` putting that version's ``actors`` and
``protocol`` first: the driver (this module, the designs, the baselines) is
always this checkout's, the runtime under it is the version's. Each opens,
warms and measures every design once at each key count, then writes a JSON
object to ``--out``: the batches (each with this process's CPU time during
it), and where ``actors`` and ``protocol`` were imported from, so that the
caller can check it measured the code it meant to.

It imports nothing from the runtime beyond what `call_path` uses
(``open_runtime``, ``RuntimeConfig``, ``ToolModule``, ``Runtime.call_tool``
and ``protocol``'s ``Scope``, ``ToolContext`` and ``CallResult``), which
older commits have too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import actors
import protocol

from ._call_path import measure_call_path
from ._measure import Batch

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._measure import Results

__all__ = ["decode_round", "encode_round", "main"]


def _counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _package_directory(module: Any) -> str:
    """The real directory a package was imported from (symbolic links resolved)."""
    return str(Path(module.__file__).resolve().parent)


def encode_round(per_keys: Mapping[int, Results]) -> dict[str, Any]:
    """One round's results as JSON: key count → design → phase → its one batch (its calls,
    wall-clock and CPU seconds, and latencies)."""
    return {
        str(keys): {
            design: {
                phase: [
                    {
                        "calls": b.calls,
                        "elapsed": b.elapsed,
                        "cpu": b.cpu,
                        "latencies": list(b.latencies),
                    }
                    for b in batches
                ]
                for phase, batches in phases.items()
            }
            for design, phases in results.items()
        }
        for keys, results in per_keys.items()
    }


def decode_round(data: Mapping[str, Any]) -> dict[int, Results]:
    """`encode_round`'s output back as results by key count."""
    return {
        int(keys): {
            design: {
                phase: [
                    Batch(
                        int(b["calls"]),
                        float(b["elapsed"]),
                        tuple(map(float, b["latencies"])),
                        None if b["cpu"] is None else float(b["cpu"]),
                    )
                    for b in batches
                ]
                for phase, batches in phases.items()
            }
            for design, phases in results.items()
        }
        for keys, results in data.items()
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure one round as the command line says; write it to ``--out``."""
    cli = argparse.ArgumentParser(prog="python -m benchmarks._call_path_worker")
    cli.add_argument("--keys", type=_counts, required=True, help="key counts, comma-separated")
    cli.add_argument("--callers", type=_counts, required=True, help="caller counts, likewise")
    cli.add_argument("--calls", type=int, required=True, help="calls per design per batch")
    cli.add_argument("--out", type=Path, required=True, help="where to write the JSON")
    args = cli.parse_args(argv)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    per_keys = measure_call_path(args.keys, args.callers, args.calls, 1, progress)
    data = {
        "imported": {
            "actors": _package_directory(actors),
            "protocol": _package_directory(protocol),
        },
        "round": encode_round(per_keys),
    }
    args.out.write_text(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
