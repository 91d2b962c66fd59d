"""Reading a saved run back to go on with it: ``--resume FILE`` and ``--failed FILE``.

A file written by ``--json`` holds, besides the figures, the scenarios the
run was asked for (``planned``) and a record of each that ended (``scenarios``:
ok or failed, with its error). `read_saved` turns it back into results, so
that the rest of the run can be added to it: the scenarios not yet in it
(``--resume``), or those recorded as failed (``--failed``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

import attrs

from ._compare import ReportFileError, compared_of, read_json
from ._report import MACHINE_KEYS, Failure, Figure, Load, ScenarioResult

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["Saved", "read_saved"]

_FIGURE_FIELDS = frozenset(attrs.fields_dict(Figure))
_FAILURE_FIELDS = frozenset(attrs.fields_dict(Failure))


@final
@attrs.frozen
class Saved:
    """A saved run, as far as it got."""

    preset: str
    """Its sizes' name."""
    planned: tuple[str, ...]
    """The scenarios it was asked for."""
    results: tuple[ScenarioResult, ...]
    """The scenarios that ended, ok or failed (without chart data: the file has none)."""
    machine: Mapping[str, Any]
    """The machine it ran on."""

    def missing(self) -> list[str]:
        """The planned scenarios with no record yet: what ``--resume`` runs."""
        done = {result.name for result in self.results}
        return [name for name in self.planned if name not in done]

    def failed(self) -> list[str]:
        """The scenarios recorded as failed: what ``--failed`` runs again."""
        return [result.name for result in self.results if result.failure is not None]

    def other_machine(self, here: Mapping[str, Any]) -> str | None:
        """How `here` differs from the machine the run began on, or None when it is the same."""
        differ = [
            f"{key} {self.machine.get(key)!r} there, {here.get(key)!r} here"
            for key in MACHINE_KEYS
            if self.machine.get(key) != here.get(key)
        ]
        return "; ".join(differ) or None


def read_saved(path: Path) -> Saved:
    """The run saved in `path`; raises `ReportFileError` naming the file and the problem."""
    data = read_json(path)
    try:
        compared_of(data, str(path))  # the figures' checks, as `compare` makes them
        assert isinstance(data, Mapping), "compared_of refuses anything else"
        return _saved(data)
    except ReportFileError as exc:
        msg = f"{path}: {exc}"
        raise ReportFileError(msg) from None


def _saved(data: Mapping[str, Any]) -> Saved:
    records = data.get("scenarios")
    planned = data.get("planned")
    if not isinstance(records, list) or not isinstance(planned, list):
        msg = (
            "no record of the scenarios it ran ('scenarios' and 'planned'): "
            "written before --resume existed, so it cannot be resumed"
        )
        raise ReportFileError(msg)
    figures: dict[str, list[Figure]] = {}
    for item in data["figures"]:
        fig = _figure(item)
        figures.setdefault(fig.scenario, []).append(fig)
    results = tuple(_result(record, figures, _mapping(data.get("notes"))) for record in records)
    return Saved(
        preset=str(data.get("preset", "?")),
        planned=tuple(str(name) for name in planned),
        results=results,
        machine=_mapping(data.get("machine")),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _figure(item: Mapping[str, Any]) -> Figure:
    fields = {key: value for key, value in item.items() if key in _FIGURE_FIELDS}
    if fields.get("value") is None:  # written as null: not a finite number
        fields["value"] = math.nan
    return Figure(**fields)


def _result(
    record: object, figures: Mapping[str, list[Figure]], notes: Mapping[str, Any]
) -> ScenarioResult:
    if not isinstance(record, Mapping) or not isinstance(record.get("name"), str):
        msg = f"a scenario record without a name: {record!r}"
        raise ReportFileError(msg)
    name = record["name"]
    failure = record.get("failure")
    load = record.get("load")
    return ScenarioResult(
        name,
        figures=tuple(figures.get(name, ())),
        notes=tuple(str(note) for note in notes.get(name, ())),
        failure=None
        if not isinstance(failure, Mapping)
        else Failure(**{k: str(v) for k, v in failure.items() if k in _FAILURE_FIELDS}),
        seconds=record.get("seconds"),
        load=None
        if not isinstance(load, Mapping)
        else Load(_triple(load.get("start")), _triple(load.get("end"))),
    )


def _triple(value: object) -> tuple[float, float, float] | None:
    if isinstance(value, list) and len(value) == 3:
        one, five, fifteen = (float(v) for v in value)
        return (one, five, fifteen)
    return None
