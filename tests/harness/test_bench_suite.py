"""``python -m benchmarks`` never loses a run: failures recorded, results saved as they come.

The scenarios here are small stand-ins handed to `main` through its
``scenarios`` registry (the one ``--only`` chooses from), so that a run can
be made to raise, to be interrupted, or to look at its own JSON half-way.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
from typing import TYPE_CHECKING, Any

import pytest
import trio

from benchmarks import PRESETS
from benchmarks.__main__ import main
from benchmarks._progress import RichView
from benchmarks._report import Failure, ScenarioResult, Target, figure
from benchmarks._suite import run_suite

if TYPE_CHECKING:
    from pathlib import Path

    from benchmarks._measure import Progress
    from benchmarks._sizes import Sizes
    from benchmarks._suite import Scenario

SPEED = Target(">=", 1_000_000)  # met by no stand-in: a speed target, meant for the quick sizes
COUNT = Target("==", 0, any_size=True)  # a correctness count: judged at every size


def measured(name: str, value: float = 1.0) -> Scenario:
    """A scenario with one figure under a speed target (missed) and one correctness count."""

    def scenario(_sizes: Sizes, progress: Progress) -> ScenarioResult:
        progress(f"{name}: measuring")
        figures = (
            figure(name, f"{name} calls/s", value, "/s", SPEED),
            figure(name, f"{name} lost calls", 0, "", COUNT),
        )
        return ScenarioResult(name, figures, (f"{name}'s note",))

    return scenario


def raising(name: str) -> Scenario:
    """A scenario that fails half-way, as `embedding` once did with a reset connection."""

    def scenario(_sizes: Sizes, progress: Progress) -> ScenarioResult:
        progress(f"{name}: measuring")
        msg = "connection reset by peer"
        raise ConnectionResetError(msg)

    return scenario


def counted(scenario: Scenario, runs: list[str], name: str) -> Scenario:
    """`scenario`, noting each time it runs."""

    def wrapper(sizes: Sizes, progress: Progress) -> ScenarioResult:
        runs.append(name)
        return scenario(sizes, progress)

    return wrapper


def saved(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def names_of(data: dict[str, Any]) -> dict[str, str]:
    """Each recorded scenario's status."""
    return {record["name"]: record["status"] for record in data["scenarios"]}


class TestAFailingScenario:
    def test_is_recorded_with_its_error_and_the_others_run(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The failure's type, message and place are saved and shown; the exit status is 1;
        the scenarios before and after it keep every figure."""
        path = tmp_path / "run.json"
        registry = {"first": measured("first"), "boom": raising("boom"), "last": measured("last")}
        assert main(["--tiny", "--json", str(path)], scenarios=registry) == 1
        data = saved(path)
        assert names_of(data) == {"first": "ok", "boom": "failed", "last": "ok"}
        assert data["failed"] == ["boom"]
        (boom,) = (r for r in data["scenarios"] if r["name"] == "boom")
        failure = boom["failure"]
        assert failure["kind"] == "ConnectionResetError"
        assert failure["message"] == "connection reset by peer"
        assert failure["where"].startswith("tests/harness/test_bench_suite.py:")
        assert failure["where"].endswith(" in scenario")
        assert "Traceback" in failure["traceback"]
        assert {f["scenario"] for f in data["figures"]} == {"first", "last"}
        out = capsys.readouterr()
        assert "boom FAILED: ConnectionResetError: connection reset by peer" in out.out
        assert "1 scenario FAILED: boom" in out.out
        assert "boom: FAILED after" in out.err  # the progress line, when it happened

    def test_an_error_raised_in_a_nursery_is_reported_as_itself(self) -> None:
        """trio wraps a task's error in an ExceptionGroup: the failure names the error within."""

        async def crash() -> None:
            msg = "no such session"
            raise KeyError(msg)

        async def run() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(crash)

        with pytest.raises(BaseExceptionGroup) as caught:
            trio.run(run)
        failure = Failure.of(caught.value)
        assert (failure.kind, failure.message) == ("KeyError", "'no such session'")
        assert failure.where.endswith(" in crash")


class TestSavedAsItGoes:
    def test_the_json_holds_each_scenario_once_it_ended(self, tmp_path: Path) -> None:
        """While the second scenario runs, the file already holds the first one's figures."""
        path = tmp_path / "run.json"
        seen: list[dict[str, str]] = []

        def looking(sizes: Sizes, progress: Progress) -> ScenarioResult:
            seen.append(names_of(saved(path)))
            return measured("second")(sizes, progress)

        registry = {"first": measured("first"), "second": looking, "third": measured("third")}
        assert main(["--tiny", "--json", str(path)], scenarios=registry) == 0
        assert seen == [{"first": "ok"}]
        assert names_of(saved(path)) == {"first": "ok", "second": "ok", "third": "ok"}
        assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left

    def test_ctrl_c_keeps_what_ended_and_resume_runs_the_rest(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Ctrl-C in the third scenario: exit 130, two kept; --resume runs only the third."""
        path = tmp_path / "run.json"
        interrupt = [True]

        def third(sizes: Sizes, progress: Progress) -> ScenarioResult:
            if interrupt[0]:
                raise KeyboardInterrupt
            return measured("third")(sizes, progress)

        runs: list[str] = []
        registry = {
            name: counted(scenario, runs, name)
            for name, scenario in {
                "first": measured("first", 1.0),
                "second": measured("second"),
                "third": third,
            }.items()
        }
        assert main(["--tiny", "--json", str(path)], scenarios=registry) == 130
        assert names_of(saved(path)) == {"first": "ok", "second": "ok"}
        assert f"--resume {path}" in capsys.readouterr().err

        interrupt[0] = False
        runs.clear()
        before = saved(path)["figures"]
        assert main(["--resume", str(path)], scenarios=registry) == 0
        assert runs == ["third"]
        data = saved(path)
        assert names_of(data) == {"first": "ok", "second": "ok", "third": "ok"}
        assert data["figures"][: len(before)] == before  # the saved figures, as they were
        assert data["preset"] == "tiny"  # the file's sizes, though --tiny was not given again

    def test_resuming_a_finished_run_runs_nothing_and_leaves_its_file(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Nothing missing: no scenario runs, the table is the file's, the file is unchanged."""
        path = tmp_path / "run.json"
        runs: list[str] = []
        registry = {"first": counted(measured("first"), runs, "first")}
        assert main(["--tiny", "--json", str(path)], scenarios=registry) == 0
        written = path.read_bytes()
        capsys.readouterr()
        assert main(["--resume", str(path)], scenarios=registry) == 0
        assert runs == ["first"]
        assert path.read_bytes() == written
        out = capsys.readouterr()
        assert "first calls/s" in out.out
        assert "nothing to run" in out.err


class TestFailedAgain:
    def test_failed_runs_only_the_failures_and_keeps_the_rest(self, tmp_path: Path) -> None:
        """--failed FILE reruns the failed scenario alone; fixed, the run exits 0."""
        path = tmp_path / "run.json"
        broken = [True]

        def flaky(sizes: Sizes, progress: Progress) -> ScenarioResult:
            if broken[0]:
                return raising("flaky")(sizes, progress)
            return measured("flaky")(sizes, progress)

        runs: list[str] = []
        registry = {
            name: counted(scenario, runs, name)
            for name, scenario in {
                "first": measured("first"),
                "flaky": flaky,
                "last": measured("last"),
            }.items()
        }
        assert main(["--tiny", "--json", str(path)], scenarios=registry) == 1
        broken[0] = False
        runs.clear()
        assert main(["--failed", str(path)], scenarios=registry) == 0
        assert runs == ["flaky"]
        data = saved(path)
        assert names_of(data) == {"first": "ok", "flaky": "ok", "last": "ok"}
        assert data["failed"] == []
        assert [f["scenario"] for f in data["figures"]].count("flaky") == 2

    def test_resume_is_refused_at_other_sizes_or_from_a_file_without_records(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A tiny run is resumed at tiny sizes only; a file with no records says why not."""
        path = tmp_path / "run.json"
        registry = {"first": measured("first")}
        assert main(["--tiny", "--json", str(path)], scenarios=registry) == 0
        with pytest.raises(SystemExit) as exited:
            main(["--full", "--resume", str(path)], scenarios=registry)
        assert exited.value.code == 2
        assert "is a tiny run; run it at its own sizes" in capsys.readouterr().err
        old = tmp_path / "old.json"
        old.write_text(json.dumps({"format": 1, "figures": []}))
        with pytest.raises(SystemExit):
            main(["--resume", str(old)], scenarios=registry)
        assert "written before --resume existed" in capsys.readouterr().err


class TestTargetsForTheirSize:
    def test_a_tiny_run_judges_only_correctness_counts(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Tiny: the missed speed target is "not judged", the count is judged; no MISSED."""
        path = tmp_path / "run.json"
        assert main(["--tiny", "--json", str(path)], scenarios={"only": measured("only")}) == 0
        out = capsys.readouterr().out
        assert "MISSED" not in out
        assert "1 of 1 targets met; 1 not judged at tiny sizes" in out
        figures = {f["name"]: f for f in saved(path)["figures"]}
        assert figures["only calls/s"]["judged"] is False
        assert figures["only lost calls"]["judged"] is True
        assert saved(path)["missed"] == []

    def test_the_quick_sizes_judge_every_target(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The same figure at the quick sizes is judged, and missed."""
        assert main([], scenarios={"only": measured("only")}) == 0
        out = capsys.readouterr().out
        assert "MISSED" in out
        assert "1 of 2 targets met" in out


class TestOutput:
    def test_the_table_is_printed_once(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Each figure appears once on stdout: the table, not the table and the Markdown."""
        registry = {"first": measured("first"), "second": measured("second")}
        assert main(["--tiny"], scenarios=registry) == 0
        out = capsys.readouterr().out
        assert out.count("first calls/s") == 1
        assert out.count("second's note") == 1

    def test_the_machines_load_is_recorded_for_the_run_and_each_scenario(
        self, tmp_path: Path
    ) -> None:
        """Load averages at the start and the end, the cores, and each scenario's time."""
        path = tmp_path / "run.json"
        assert main(["--tiny", "--json", str(path)], scenarios={"one": measured("one")}) == 0
        data = saved(path)
        assert data["machine"]["cpu_count"] >= data["machine"]["cores_usable"] >= 1
        (record,) = data["scenarios"]
        for load in (data["load"], record["load"]):
            for end in ("start", "end"):
                assert len(load[end]) == 3
                assert all(math.isfinite(v) and v >= 0 for v in load[end])
        assert record["seconds"] >= 0

    def test_plain_progress_says_when_each_scenario_starts_and_ends(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Not a terminal: timestamped lines, the scenario's own and the suite's."""
        assert main(["--tiny"], scenarios={"one": measured("one")}) == 0
        err = capsys.readouterr().err.splitlines()
        lines = [line.split("] ", 1)[1] for line in err if line.startswith("[")]
        assert lines[:2] == ["one: starting (1/1)", "one: measuring"]
        assert lines[2].startswith("one: done in ")

    @pytest.mark.skipif(not importlib.util.find_spec("rich"), reason="needs rich")
    def test_the_live_view_shows_each_scenario_and_how_it_ended(self) -> None:
        """rich on a terminal: a line per scenario, its last step, and a failure in full."""
        import rich.console
        import rich.progress

        screen = io.StringIO()
        console = rich.console.Console(
            file=screen, force_terminal=True, color_system=None, width=200
        )
        step = rich.progress.TextColumn("{task.description} {task.fields[step]}", markup=True)
        with rich.progress.Progress(step, console=console) as bars:
            view = RichView(bars, bars.add_task("suite", total=None, step=""))
            registry = {"first": measured("first"), "boom": raising("boom")}
            report = run_suite(PRESETS["tiny"], view=view, scenarios=registry)
        assert [s.name for s in report.failed] == ["boom"]
        text = screen.getvalue()
        assert "first done" in text
        assert "boom FAILED ConnectionResetError: connection reset by peer" in text
