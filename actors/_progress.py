"""Progress a tool reports while it works, for clients that asked to hear it.

    @store.tool(heavy=True)
    def reindex(state: Store, progress: Progress) -> str:
        for done, item in enumerate(state.items, 1):
            item.reindex()
            progress.report(done, total=len(state.items))
        return "reindexed"

A handler parameter annotated `Progress` is not an argument: it receives the
call's reporter. Over MCP, reports become ``notifications/progress`` when the
request carried a ``progressToken``; otherwise, and in process unless the
caller passed a listener to `Runtime.run`, the reporter does nothing.

`report` never blocks and never waits for the client: it hands the report
to the listener and returns. It may be called from an async handler, an
inline sync handler or a heavy handler's worker thread; from a thread, the
report crosses to the event loop with ``run_sync_soon``, and a report that
arrives after the call was answered (a thread that overran its deadline) is
dropped. How many reports reach a client is the listener's business: the MCP
server sends the latest one at a time, so a tool reporting in a tight loop
costs the client a bounded number of messages.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, final

import attrs

from ._delivery import Delivery

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MAX_PROGRESS_MESSAGE", "Progress", "ProgressReport"]

MAX_PROGRESS_MESSAGE: Final = 1000
"""The longest progress message, in characters."""


@final
@attrs.frozen
class ProgressReport:
    """One report: how far, out of how much (if known), and a short message."""

    progress: float
    """How far the work is: grows with every report."""
    total: float | None = None
    """How far it goes, if known."""
    message: str | None = None
    """What it is doing, in a few words (at most 1 000 characters)."""


@final
class Progress:
    """A tool's reporter for one call (see the module docstring)."""

    __slots__ = ("_delivery", "_last")

    def __init__(self, listener: Callable[[ProgressReport], None] | None = None) -> None:
        """A reporter for one call, handing reports to `listener` (None: to nobody).

        With a listener, it must be made on the runtime's thread, in trio.
        """
        self._delivery = Delivery(listener)
        self._last = -math.inf

    def report(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report `progress` (increasing with every report), out of `total` if known.

        Raises ValueError for a progress that is not a finite number larger
        than the last one, a total that is not a finite positive number, or a
        message that is not a string of at most `MAX_PROGRESS_MESSAGE`
        characters: all mistakes of the tool's author, which MCP forbids.
        """
        report = self._checked(progress, total, message)
        self._last = report.progress
        self._delivery.deliver(report)

    def _checked(self, progress: float, total: float | None, message: str | None) -> ProgressReport:
        if not _is_number(progress) or not math.isfinite(progress):
            msg = f"progress must be a finite number, got {progress!r:.40}"
            raise ValueError(msg)
        if not progress > self._last:
            msg = f"progress must increase with every report: {progress!r} after {self._last!r}"
            raise ValueError(msg)
        if total is not None and not (_is_number(total) and math.isfinite(total) and total > 0):
            msg = f"total must be a finite number above 0, or None, got {total!r:.40}"
            raise ValueError(msg)
        if message is not None and not (
            isinstance(message, str) and len(message) <= MAX_PROGRESS_MESSAGE
        ):
            msg = f"message must be a string of at most {MAX_PROGRESS_MESSAGE} characters"
            raise ValueError(msg)
        return ProgressReport(float(progress), None if total is None else float(total), message)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
