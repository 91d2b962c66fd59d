"""What a run shows while it runs: plain lines, or a live view on a terminal (rich).

The suite tells a `View` when a scenario starts, each progress line the
scenario reports, and how it ended. `PlainView` prints lines (CI logs,
pipes); `RichView` keeps a bar for the run and a line per scenario with its
latest step and time, which stay on the screen once the scenario ends.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._measure import Progress
    from ._report import ScenarioResult

__all__ = ["PlainView", "RichView", "View", "ended_line", "terminal_view"]


class View(Protocol):
    """Where the suite reports a run as it goes."""

    def started(self, name: str, number: int, total: int) -> None:
        """Scenario `name`, the `number`-th of `total`, starts."""

    def line(self, text: str) -> None:
        """The running scenario reports a step."""

    def ended(self, result: ScenarioResult) -> None:
        """A scenario ended (`result.failure` says whether it raised)."""


def ended_line(result: ScenarioResult) -> str:
    """``call_path: done in 12.3 s (load 1.52 -> 2.03)`` or ``...: FAILED after ...: why``."""
    took = f"{result.seconds:.1f} s" if result.seconds is not None else "?"
    load = "" if result.load is None else f" ({result.load.describe()})"
    if result.failure is None:
        return f"{result.name}: done in {took}{load}"
    return f"{result.name}: FAILED after {took}{load}: {result.failure.describe()}"


@final
@attrs.frozen
class PlainView:
    """Progress as lines (`stderr_progress`'s, with their timestamps): for logs and pipes."""

    progress: Progress
    """Where each line goes."""

    def started(self, name: str, number: int, total: int) -> None:
        """See `View.started`."""
        self.progress(f"{name}: starting ({number}/{total})")

    def line(self, text: str) -> None:
        """See `View.line`."""
        self.progress(text)

    def ended(self, result: ScenarioResult) -> None:
        """See `View.ended`."""
        self.progress(ended_line(result))


@final
@attrs.frozen
class RichView:
    """A live view on a terminal: the run's bar, and a line per scenario (rich.progress)."""

    bars: Any
    """The `rich.progress.Progress` it draws with."""
    run: Any
    """The task id of the whole run's bar."""

    def started(self, name: str, number: int, total: int) -> None:
        """See `View.started`."""
        self.bars.update(self.run, total=total, description=f"scenario {number}/{total}")
        self.bars.add_task(name, total=None, step="starting")

    def line(self, text: str) -> None:
        """See `View.line`: the running scenario's line shows its latest step."""
        self.bars.update(self._current(), step=_escape(text))

    def ended(self, result: ScenarioResult) -> None:
        """See `View.ended`: its line stays, with its time, or in red with its error."""
        if result.failure is None:
            step = "[green]done[/]"
        else:
            step = f"[red]FAILED[/] {_escape(result.failure.describe())}"
        self.bars.update(self._current(), total=1, completed=1, step=step)
        self.bars.advance(self.run)

    def _current(self) -> Any:
        return self.bars.task_ids[-1]


def _escape(text: str) -> str:
    """`text` shown as it is, its square brackets not read as rich markup."""
    import rich.markup  # only a RichView calls this: rich is there

    return rich.markup.escape(text)


@contextmanager
def terminal_view(progress: Progress) -> Iterator[View]:
    """A `RichView` when stderr is a terminal and rich is installed, else a `PlainView`."""
    try:
        import rich.console  # optional (the bench extra): plain lines otherwise
        import rich.progress as rp
    except ImportError:
        yield PlainView(progress)
        return
    if not sys.stderr.isatty():
        yield PlainView(progress)
        return
    bars = rp.Progress(
        rp.SpinnerColumn(finished_text="·"),
        rp.TextColumn("{task.description:<12}"),
        rp.BarColumn(bar_width=24),
        rp.TimeElapsedColumn(),
        rp.TextColumn("{task.fields[step]}", markup=True),
        console=rich.console.Console(file=sys.stderr),
        redirect_stdout=False,
    )
    with bars:
        yield RichView(bars, bars.add_task("suite", total=None, step=""))
