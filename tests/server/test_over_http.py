"""The ``mcp`` scenario's HTTP part (`benchmarks._over_http`): how it refuses to report.

Its figures, at the tiny sizes, are checked in tests/harness/test_benchmarks.py with the
rest of the report; here, the two ways it produces none: without wrk, and on a
wrong answer.
"""

from __future__ import annotations

import shutil

import pytest

from benchmarks import PRESETS
from benchmarks import _over_http as over_http
from benchmarks._http_floors import BODY, HEADERS, start_design


def test_without_wrk_the_http_figures_are_skipped_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No wrk on the PATH: no figures, no server started, a note naming the package."""
    monkeypatch.setenv("PATH", "")
    figures, notes = over_http.run_over_http(PRESETS["tiny"], lambda _line: None)
    assert figures == []
    assert notes == ["HTTP figures skipped: wrk is not installed (apt-get install wrk)"]


@pytest.mark.skipif(
    shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)"
)
def test_a_wrong_answer_fails_the_measurement_instead_of_making_a_figure() -> None:
    """A server answering JSON-RPC errors at full speed raises, naming the first answer."""
    with start_design("raw-trio", "--error") as server:
        contender = over_http._Contender(
            "error floor", server, {over_http.SESSIONLESS: over_http.Load(BODY, HEADERS)}
        )
        with pytest.raises(
            RuntimeError, match=r"^error floor, 2026-07-28, 2 connections: \d+ wrong"
        ):
            over_http._loaded(contender, over_http.SESSIONLESS, 2, 1)
