"""The wrk load driver (`benchmarks._wrk`) against a minimal server of `benchmarks._http_floors`."""

from __future__ import annotations

import shutil

import pytest

from benchmarks._http_floors import BODY, EXPECTED, HEADERS, start_design
from benchmarks._wrk import WrkMissingError, WrkResult, run_wrk

needs_wrk = pytest.mark.skipif(
    shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)"
)


def _drive(*design: str) -> WrkResult:
    """One second of load on two connections against a hypercorn-on-trio floor."""
    with start_design("hypercorn-trio", *design) as server:
        return run_wrk(
            server.url,
            body=BODY,
            headers=HEADERS,
            connections=2,
            seconds=1,
            server_pid=server.process.pid,
            expected=EXPECTED,
        )


@needs_wrk
class TestRunWrk:
    def test_a_run_against_a_good_server_is_measured_and_clean(self) -> None:
        """Requests, both CPU times and the latencies are there, and nothing mismatched."""
        result = _drive()
        assert result.requests > 0, result
        assert result.server_cpu_seconds is not None
        assert result.server_cpu_seconds > 0, result
        assert result.wrk_cpu_seconds > 0, result
        assert 0 < result.p50_us <= result.p90_us <= result.p99_us, result
        assert result.mismatches == 0, result.first_mismatch
        assert result.clean, result
        assert result.server_us_per_request is not None
        assert result.server_us_per_request > 0

    def test_a_server_answering_errors_fast_is_all_mismatches(self) -> None:
        """A 200 carrying a JSON-RPC error counts against the run, every one of them."""
        result = _drive("--error")
        assert result.requests > 0, result
        assert result.mismatches == result.requests, result
        assert not result.clean
        assert result.first_mismatch.startswith('200 {"jsonrpc":"2.0","id":1,"error"')


class TestWithoutWrk:
    def test_a_missing_wrk_says_how_to_install_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("PATH", "")
        with pytest.raises(WrkMissingError, match=r"^wrk is not installed: .*apt-get install wrk"):
            run_wrk("http://127.0.0.1:9/", body="{}", headers={}, connections=1, seconds=1)
