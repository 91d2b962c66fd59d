"""Comparing benchmark runs: ``python -m benchmarks compare`` and ``--against REF``.

No timing is asserted: only what is compared with what, the verdicts on
constructed spreads, the errors, and that ``--against COMMIT`` really runs
both versions, round by round, in subprocesses, and cleans up after itself.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from benchmarks import PRESETS, run_suite
from benchmarks import _against as against
from benchmarks.__main__ import main
from benchmarks._compare import (
    Compared,
    Measured,
    Row,
    beyond_spread,
    chance_beyond_spread,
    render,
)
from benchmarks._report import FORMAT

ROOT = against.ROOT
IN_GIT = shutil.which("git") is not None and (ROOT / ".git").exists()
needs_git = pytest.mark.skipif(not IN_GIT, reason="needs git and a git checkout")
TINY = PRESETS["tiny"]
# One key count, one caller count, few calls: a round in well under a second.
SMALLEST = attrs.evolve(TINY, rounds=1, call_keys=(1,), call_callers=(1,), calls_per_batch=10)
SCALED = "runtime / bare channel floor, by CPU, keys=10, callers=10"
DROPPED = "direct call calls/s, keys=1, callers=1"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run of call_path, saved as ``--json`` saves it."""
    path = tmp_path_factory.mktemp("saved") / "a.json"
    run_suite(TINY, ["call_path"], progress=lambda _line: None).write_json(path)
    return path


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def row_of(text: str, name: str) -> list[str]:
    """The cells of the table row of the figure `name` (cells are 2+ spaces apart)."""
    (line,) = [line for line in text.splitlines() if f"  {name}  " in line]
    return re.split(r"\s{2,}", line.strip())


def measured(low: float, high: float, rounds: int = 5) -> Measured:
    return Measured("s", "f", (low + high) / 2, "/s", low, high, rounds)


class TestBeyondSpread:
    @pytest.mark.parametrize(
        ("a", "b"),
        [((1.0, 2.0), (3.0, 4.0)), ((3.0, 4.0), (1.0, 2.0))],
        ids=["B above A", "B below A"],
    )
    def test_ranges_apart_are_beyond_spread_either_way(
        self, a: tuple[float, float], b: tuple[float, float]
    ) -> None:
        """Every round of one side beyond every round of the other, up or down."""
        assert beyond_spread(measured(*a), measured(*b)) is True
        assert Row(measured(*a), measured(*b)).verdict() == "beyond spread"

    @pytest.mark.parametrize(
        ("a", "b"),
        [((1.0, 3.0), (2.0, 4.0)), ((1.0, 2.0), (2.0, 3.0)), ((1.0, 4.0), (2.0, 3.0))],
        ids=["overlapping", "touching", "nested"],
    )
    def test_ranges_that_meet_are_within_spread(
        self, a: tuple[float, float], b: tuple[float, float]
    ) -> None:
        """A shared value, even one, puts the difference within the spread."""
        assert beyond_spread(measured(*a), measured(*b)) is False
        assert beyond_spread(measured(*b), measured(*a)) is False
        assert Row(measured(*a), measured(*b)).verdict() == "within spread"

    def test_a_single_measurement_is_not_judged(self) -> None:
        """One round, or no spread written, has nothing to be beyond."""
        assert beyond_spread(measured(1, 2), measured(5, 5, rounds=1)) is None
        no_spread = Measured("s", "f", 5.0, "/s", None, None, 5)
        assert beyond_spread(measured(1, 2), no_spread) is None
        assert Row(measured(1, 2), no_spread).verdict() == "n/a (1 round)"

    def test_the_chance_of_a_false_alarm_is_two_orders_in_all(self) -> None:
        """2 / C(n + m, n): 2 of 252 orders for 5 rounds a side, 2 of 6 for 2."""
        assert chance_beyond_spread(5, 5) == pytest.approx(2 / 252)
        assert chance_beyond_spread(2, 2) == pytest.approx(1 / 3)

    def test_the_change_is_b_over_a(self) -> None:
        """B / A, in percent too; no ratio of a zero or across units."""
        row = Row(measured(1, 3), measured(3.5, 4.5))
        assert row.ratio == pytest.approx(2.0)
        assert Row(Measured("s", "f", 0.0, ""), Measured("s", "f", 3.0, "")).ratio is None
        assert Row(Measured("s", "f", 0.0, ""), Measured("s", "f", 0.0, "")).ratio == 1.0
        assert Row(Measured("s", "f", 1.0, "µs"), Measured("s", "f", 2.0, "/s")).ratio is None
        side = Compared("a", "about", "tiny", (measured(1, 3),))
        other = Compared("b", "about", "tiny", (measured(3.5, 4.5),))
        assert row_of(render(side, other), "f")[-3:] == ["2.000", "+100.0 %", "beyond spread"]


class TestCompare:
    def test_each_figure_in_both_is_shown_with_its_change(
        self, saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A figure ten times larger is beyond spread; an unchanged one is within."""
        data = json.loads(saved.read_text())
        changed = copy.deepcopy(data)
        # Spreads of its own: a tiny run's rounds may be more than ten times apart.
        for figures, value in ((data["figures"], 1.0), (changed["figures"], 10.0)):
            (figure,) = [f for f in figures if f["name"] == SCALED]
            figure.update(value=value, low=value * 0.9, high=value * 1.1)
        a = write(tmp_path / "a.json", data)
        assert main(["compare", str(a), str(write(tmp_path / "b.json", changed))]) == 0
        out = capsys.readouterr().out
        assert f"A: {a} (tiny run" in out
        assert row_of(out, SCALED)[-3:] == ["10.000", "+900.0 %", "beyond spread"]
        same = row_of(out, "runtime calls/s, keys=1, callers=1")
        assert same[-3:] == ["1.000", "+0.0 %", "within spread"]
        assert f"{len(data['figures'])} figures in both, 1 of them beyond spread" in out
        assert "with 2 rounds against 2, chance alone does that 33.3 % of the time" in out

    def test_figures_of_one_side_only_are_listed_as_such(
        self, saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A figure B lost is "only in A"; one B added is "only in B"."""
        data = json.loads(saved.read_text())
        kept = [f for f in data["figures"] if f["name"] != DROPPED]
        added = {**kept[0], "name": "a new figure"}
        b = write(tmp_path / "b.json", {**data, "figures": [*kept, added]})
        assert main(["compare", str(saved), str(b)]) == 0
        out = capsys.readouterr().out
        only_a = out.split(f"only in A ({saved}):\n")[1].split("\n\n")[0]
        only_b = out.split(f"only in B ({b}):\n")[1].split("\n\n")[0]
        assert only_a.splitlines() == [f"  call_path: {DROPPED} = " + only_a.split(" = ")[1]]
        assert only_b.startswith("  call_path: a new figure = ")
        assert f"  {DROPPED}  " not in out.split("only in A")[0]  # not a row of the table

    def test_a_report_of_another_size_is_flagged(
        self, saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Comparing a tiny run with a quick one says the sizes differ."""
        data = json.loads(saved.read_text())
        b = write(tmp_path / "b.json", {**data, "preset": "quick"})
        assert main(["compare", str(saved), str(b)]) == 0
        assert "A is a tiny run and B a quick run" in capsys.readouterr().out

    def test_a_report_written_before_the_format_field_is_read(
        self, saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The field is new; the layout without it is version 1."""
        data = json.loads(saved.read_text())
        assert data["format"] == FORMAT == 1
        del data["format"]
        assert main(["compare", str(saved), str(write(tmp_path / "old.json", data))]) == 0
        assert "figures in both" in capsys.readouterr().out

    @pytest.mark.parametrize(
        ("content", "problem"),
        [
            (None, "no such file"),
            ("{not json", "not JSON"),
            ("[1, 2]", "not a benchmark report: the top level is a list"),
            ('{"preset": "tiny"}', "not a benchmark report: it has no 'figures' list"),
            (
                '{"format": 99, "figures": []}',
                "a benchmark report of format version 99; this harness reads 1",
            ),
            ('{"figures": [{"name": "x"}]}', "figure 1 has no text 'scenario'"),
            (
                '{"figures": [{"scenario": "s", "name": "x", "unit": "", "value": "fast"}]}',
                "figure 1: value is 'fast', not a number",
            ),
        ],
        ids=["missing", "not json", "a list", "no figures", "other format", "no scenario", "text"],
    )
    def test_bad_input_exits_2_naming_the_file_and_the_problem(
        self,
        saved: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        content: str | None,
        problem: str,
    ) -> None:
        """Either side: the message says which file and what is wrong with it."""
        bad = tmp_path / "bad.json"
        if content is not None:
            bad.write_text(content)
        for argv in ([str(saved), str(bad)], [str(bad), str(saved)]):
            with pytest.raises(SystemExit) as exited:
                main(["compare", *argv])
            assert exited.value.code == 2
            err = capsys.readouterr().err
            assert f"compare: error: {bad}: {problem}" in err


class TestAgainstSaved:
    def test_this_run_is_shown_beside_the_saved_one(
        self, saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Every call_path figure in both; the saved scenarios that did not run are left out."""
        data = json.loads(saved.read_text())
        other = {**data["figures"][0], "scenario": "isolation", "name": "not run now"}
        with_more = write(tmp_path / "saved.json", {**data, "figures": [*data["figures"], other]})
        assert main(["--tiny", "--only", "call_path", "--against", str(with_more)]) == 0
        out = capsys.readouterr().out
        assert f"A: {with_more} (tiny run" in out
        assert "B: this run (tiny run" in out
        assert f"{len(data['figures'])} figures in both" in out
        assert "not run now" not in out
        assert "# Benchmark report" not in out  # the comparison replaces the report

    def test_an_unreadable_report_is_refused_before_running(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A bad REF exits 2 at once, naming the file."""
        missing = tmp_path / "nowhere.json"
        with pytest.raises(SystemExit) as exited:
            main(["--tiny", "--only", "call_path", "--against", str(missing)])
        assert exited.value.code == 2
        captured = capsys.readouterr()
        assert f"--against: {missing}: no such file" in captured.err
        assert "call_path: starting" not in captured.err


def worktrees() -> str:
    return subprocess.run(
        ["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def side_with(tmp_path: Path, name: str, actors_init: str) -> against.Side:
    """A side whose ``actors`` is a package of one `__init__`, beside the real ``protocol``."""
    root = tmp_path / name
    (root / "actors").mkdir(parents=True)
    (root / "actors" / "__init__.py").write_text(actors_init)
    (root / "protocol").symlink_to(ROOT / "protocol", target_is_directory=True)
    return against.Side.of(name, root, tmp_path / f"{name}-entry")


class TestAgainstCommit:
    @needs_git
    def test_head_runs_on_both_sides_round_by_round(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Tiny sizes: both sides' ratios, rounds taken in turn, the worktree gone after."""
        out_json = tmp_path / "this.json"
        argv = ["--tiny", "--only", "call_path", "--against", "HEAD", "--json", str(out_json)]
        assert main(argv) == 0
        captured = capsys.readouterr()
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        rounds = re.findall(r"call_path: round (\d)/2: (.+)", captured.err)
        assert [(number, label.startswith("this")) for number, label in rounds] == [
            ("1", True),
            ("1", False),
            ("2", True),
            ("2", False),
        ]
        assert {label for _, label in rounds if not label.startswith("this")} == {head}
        (tree,) = re.findall(r"call_path: \w+ checked out at (\S+)", captured.err)
        assert not Path(tree).exists()
        assert tree not in worktrees()
        assert f"A: {head} (commit " in captured.out
        assert "B: this checkout (" in captured.out
        ratios = 6 * len(TINY.call_keys) * len(TINY.call_callers)
        assert f"{ratios} figures in both" in captured.out
        row = row_of(captured.out, SCALED)
        assert row[-1] in ("beyond spread", "within spread")  # both sides had 2 rounds
        figures = json.loads(out_json.read_text())["figures"]
        assert {f["rounds"] for f in figures} == {TINY.rounds}
        assert all(f["value"] > 0 for f in figures if f["unit"] == "x")

    def test_a_failing_round_is_reported_with_its_standard_error(self, tmp_path: Path) -> None:
        """The subprocess's traceback reaches the user, with the command that ran it."""
        broken = side_with(tmp_path, "broken", "raise RuntimeError('broken on purpose')\n")
        with pytest.raises(against.RoundError) as failed:
            against.run_round(broken, SMALLEST, tmp_path / "round.json")
        message = str(failed.value)
        assert message.startswith("broken: a round's process exited with status 1")
        assert "RuntimeError: broken on purpose" in message
        assert "benchmarks._call_path_worker" in message

    def test_a_round_that_measured_other_code_is_refused(self, tmp_path: Path) -> None:
        """A side whose links lead elsewhere than its tree is an error, not a figure."""
        root = tmp_path / "elsewhere"
        for package in ("actors", "protocol"):
            (root / package).mkdir(parents=True)
        entry = tmp_path / "entry"
        entry.mkdir()
        for package in ("actors", "protocol"):  # this checkout's, not the tree's
            (entry / package).symlink_to(ROOT / package, target_is_directory=True)
        liar = against.Side("liar", root, entry)
        with pytest.raises(against.RoundError, match=r"liar: the round imported actors from "):
            against.run_round(liar, SMALLEST, tmp_path / "round.json")

    def test_the_worker_imports_no_other_scenario(self) -> None:
        """Older commits lack what other scenarios import: the worker must not pull them in."""
        code = (
            "import sys, benchmarks._call_path_worker\n"
            "print(sorted(m for m in sys.modules if m.startswith('benchmarks')))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert "benchmarks._suite" not in done.stdout
        assert "benchmarks._durable" not in done.stdout

    @needs_git
    @pytest.mark.parametrize("interruption", [RuntimeError, KeyboardInterrupt])
    def test_the_worktree_is_removed_on_an_error_or_ctrl_c(
        self, tmp_path: Path, interruption: type[BaseException]
    ) -> None:
        """Whatever ends the block, the checkout and its registration are gone."""
        where = tmp_path / "tree"

        def interrupted() -> None:
            with against.checked_out(against.resolve_commit("HEAD"), where):
                assert (where / "actors" / "__init__.py").is_file()
                assert str(where) in worktrees()
                raise interruption

        with pytest.raises(interruption):
            interrupted()
        assert not where.exists()
        assert str(where) not in worktrees()

    @needs_git
    def test_a_commit_needs_only_call_path(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Other scenarios have no per-round subprocess: asking for them is a usage error."""
        with pytest.raises(SystemExit) as exited:
            main(["--tiny", "--only", "call_path,churn", "--against", "HEAD"])
        assert exited.value.code == 2
        assert "--against a commit runs call_path only" in capsys.readouterr().err

    @needs_git
    def test_an_unknown_ref_is_refused(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Neither a file nor a commit: exit 2, saying so."""
        with pytest.raises(SystemExit) as exited:
            main(["--tiny", "--only", "call_path", "--against", "no-such-ref-4f1c"])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "'no-such-ref-4f1c' is neither a saved report (no such file) nor a commit" in err
