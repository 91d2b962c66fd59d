"""The wrk load driver (`benchmarks._wrk`) against a minimal server of `benchmarks._http_floors`."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarks._http_floors import BODY, EXPECTED, HEADERS, start_design
from benchmarks._wrk import WrkMissingError, WrkResult, _id_halves, _script, run_wrk

needs_wrk = pytest.mark.skipif(
    shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)"
)


def _drive(*design: str, expected: str = EXPECTED, request_ids: bool = False) -> WrkResult:
    """One second of load on two connections against the raw trio and httptools floor."""
    with start_design("raw-trio", *design) as server:
        return run_wrk(
            server.url,
            body=BODY,
            headers=HEADERS,
            connections=2,
            seconds=1,
            server_pid=server.process.pid,
            expected=expected,
            request_ids=request_ids,
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

    def test_with_request_ids_every_request_has_an_id_of_its_own(self) -> None:
        """The error floor echoes each id: one answer of all carries a given one."""
        # The third id wrk's thread hands out (it builds one request to check the script
        # first): with one fixed body every answer, or none, would carry it.
        result = _drive("--error", expected='"id":1000000003,', request_ids=True)
        assert result.requests > 3, result
        assert result.mismatches == result.requests - 1, result
        assert result.first_mismatch.startswith('200 {"jsonrpc":"2.0","id":10000000')


class TestWithoutWrk:
    def test_a_missing_wrk_says_how_to_install_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("PATH", "")
        with pytest.raises(WrkMissingError, match=r"^wrk is not installed: .*apt-get install wrk"):
            run_wrk("http://127.0.0.1:9/", body="{}", headers={}, connections=1, seconds=1)


class TestRequestIds:
    def test_a_body_without_an_id_is_refused(self) -> None:
        """Only a JSON-RPC request has an id to vary; anything else is refused by name."""
        with pytest.raises(ValueError, match=r"^request_ids needs a JSON-RPC request with an id"):
            _script('{"jsonrpc":"2.0"}', {}, EXPECTED, request_ids=True)

    def test_the_body_is_whole_around_each_id(self) -> None:
        """The halves joined by an id are the body with that id, nothing else changed."""
        prefix, suffix = _id_halves(BODY)
        assert json.loads(f"{prefix}1000000007{suffix}") == {**json.loads(BODY), "id": 1000000007}

    def test_only_a_run_with_request_ids_builds_each_request(self) -> None:
        """Without them wrk sends its one prebuilt request, the cheapest for the client."""
        assert "function request()" in _script(BODY, HEADERS, EXPECTED, request_ids=True)
        assert "function request()" not in _script(BODY, HEADERS, EXPECTED, request_ids=False)
