"""The isolation check's terms: the calls it makes, its limits, what it reports.

`check_isolation` (in ``_isolation_check``) opens sessions with a session factory,
makes each session write watermarks that only it could know through the tool the
user names as "write" (a `ToolCall` holding `MARK`), and scans the text of every call
of the "read" tool for watermarks: another session's watermark is a `Leak`; a
watermark the session wrote, that was acknowledged before the read was sent and is
missing from it, is a `LostWrite`. `Budget` and `Timeouts` bound the search; an
`IsolationReport` is its verdict, and `NoVerdict` a server that stopped answering.
Both the check and its machine (``_isolation_machine``) import these from here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, final

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from mcp import ClientSession

    SessionFactory = Callable[[], AbstractAsyncContextManager[ClientSession]]

__all__ = [
    "PLACEHOLDERS",
    "Budget",
    "IsolationCheckError",
    "IsolationReport",
    "Leak",
    "LostWrite",
    "NoVerdict",
    "Timeouts",
    "ToolCall",
]

MARK: Final = "{mark}"
SESSION: Final = "{session}"
SETUP: Final = "{setup}"
PLACEHOLDERS: Final = (MARK, SESSION, SETUP)
"""What a template's strings may hold: the watermark (write only), a name the check makes
up for the session, and the text the session's setup call returned."""


class IsolationCheckError(Exception):
    """The check could not run as described: a bad template, or a call that failed.

    Not a verdict on isolation: a tool error result, a JSON-RPC error answer or a
    session that would not open stops the check at once (nothing is shrunk), with the
    sequence of calls that led to it. `NoVerdict`, a subclass, is a server that stopped
    answering.
    """


class NoVerdict(IsolationCheckError):
    """The server stopped answering, so the check has no verdict; raised at once, unshrunk.

    A call (or a session's opening) went unanswered within its timeout, its connection
    closed under it, or it was answered with what is not an MCP answer; or the check's
    total time ran out before it had one. The message names the calls, why each failed,
    the sequence that led to them, and what to check.
    """

    def __init__(
        self, message: str, *, unanswered: int, broken: int, examples: int, calls: int
    ) -> None:
        super().__init__(message)
        self.unanswered = unanswered
        """Calls and openings not answered within their timeout (or the total time)."""
        self.broken = broken
        """Calls whose connection closed, or whose answer was not MCP."""
        self.examples = examples
        """Sequences run, the one that stopped included."""
        self.calls = calls
        """Calls made, setup calls included."""

    def noting(self, text: str) -> NoVerdict:
        """The same no-verdict, `text` added to its message (what the transport saw)."""
        return NoVerdict(
            f"{self}{text}",
            unanswered=self.unanswered,
            broken=self.broken,
            examples=self.examples,
            calls=self.calls,
        )


def _strings(value: object) -> list[str]:
    """Every string inside `value` (a JSON-like value), keys left out."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    return []


def _filled(value: object, values: Mapping[str, str]) -> object:
    """`value` with each placeholder of `values` replaced inside its strings."""
    if isinstance(value, str):
        for placeholder, replacement in values.items():
            value = value.replace(placeholder, replacement)
        return value
    if isinstance(value, Mapping):
        return {key: _filled(item, values) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_filled(item, values) for item in value]
    return value


@final
@attrs.frozen
class ToolCall:
    """A tool and its argument template: a JSON object whose strings may hold `PLACEHOLDERS`.

    ``ToolCall("add_note", {"text": "{mark}"})``, or ``ToolCall.parse('add_note {"text":
    "{mark}"}')``. Placeholders are replaced inside string values (not keys), wherever
    they are nested, by plain text replacement: ``"note {mark}"`` works too.
    """

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def parse(cls, text: str) -> ToolCall:
        """A tool call from ``NAME`` or ``NAME {JSON object}``; ValueError naming the problem."""
        name, _, rest = text.strip().partition(" ")
        if not name:
            msg = f"a tool call is 'NAME' or 'NAME {{JSON object}}', not {text!r}"
            raise ValueError(msg)
        try:
            arguments = json.loads(rest) if rest.strip() else {}
        except json.JSONDecodeError as exc:
            msg = f"the arguments of {name} are not JSON ({exc}): {rest.strip()!r}"
            raise ValueError(msg) from None
        if not isinstance(arguments, dict):
            msg = f"the arguments of {name} must be a JSON object, not {rest.strip()!r}"
            raise ValueError(msg)
        return cls(name, arguments)

    def uses(self, placeholder: str) -> bool:
        """Whether any string of the template holds `placeholder`."""
        return any(placeholder in text for text in _strings(self.arguments))

    def fill(self, values: Mapping[str, str]) -> dict[str, Any]:
        """The arguments with the placeholders of `values` replaced."""
        filled = _filled(self.arguments, values)
        assert isinstance(filled, dict)  # a mapping stays a mapping
        return filled

    def show(self, values: Mapping[str, str], added: Mapping[str, str] | None = None) -> str:
        """The call as one line, ``NAME {JSON}``, placeholders replaced, `added` added."""
        shown = {**self.fill(values), **(added or {})}
        return f"{self.name} {json.dumps(shown, ensure_ascii=False)}"


@final
@attrs.frozen
class Budget:
    """How hard the check searches: `examples` sequences of up to `steps` steps each.

    A step is one rule: a write, a read, a concurrent batch of up to `batch` calls, or
    closing a session; a call opens its session first if needed, and at most `sessions`
    are open at once. Once a sequence fails, Hypothesis shrinks it by running shorter
    ones, at most `shrinks` more sequences. The default runs in seconds against a
    local server.
    """

    examples: int = 25
    steps: int = 8
    sessions: int = 4
    batch: int = 6
    shrinks: int = 200

    def __attrs_post_init__(self) -> None:
        fields = (("examples", 1), ("steps", 1), ("sessions", 2), ("batch", 2), ("shrinks", 0))
        for field, least in fields:
            value = getattr(self, field)
            if not isinstance(value, int) or value < least:
                msg = f"Budget.{field} must be an integer >= {least}, not {value!r}"
                raise ValueError(msg)


def _positive_seconds(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not isinstance(value, int | float) or not 0 < value < math.inf:
        msg = f"Timeouts.{attribute.name} must be a positive number of seconds, not {value!r}"
        raise ValueError(msg)


@final
@attrs.frozen
class Timeouts:
    """How long the check waits, in seconds, before it stops with `NoVerdict`.

    `call` bounds each tool call, the setup call's included (and closing a session);
    `open` a session's opening (a stdio server's start and its answer to ``initialize``);
    `total` the whole check, shrinking included: a failure found by then is reported as
    far as it was shrunk, and without one the check stops with no verdict.
    """

    call: float = attrs.field(default=10.0, validator=_positive_seconds)
    open: float = attrs.field(default=60.0, validator=_positive_seconds)
    total: float = attrs.field(default=300.0, validator=_positive_seconds)


@final
@attrs.frozen
class Leak:
    """A read of session `reader` showed `mark`, which session `writer` wrote."""

    reader: int
    writer: int
    mark: str
    read: str
    """The read call, as a line of `IsolationReport.sequence`."""
    write: str
    """The call that wrote `mark`."""

    def describe(self) -> str:
        """One line: who saw whose watermark, through which calls."""
        return (
            f"session {self.reader} saw session {self.writer}'s watermark {self.mark}: "
            f"written by [{self.write}], shown by [{self.read}]"
        )


@final
@attrs.frozen
class LostWrite:
    """A read of `session` lacked `mark`, which the session wrote and was acknowledged."""

    session: int
    mark: str
    read: str
    """The read call, as a line of `IsolationReport.sequence`."""
    write: str
    """The acknowledged call that wrote `mark`."""

    def describe(self) -> str:
        """One line: which acknowledged write a later read of the same session lacked."""
        return (
            f"session {self.session} lost its watermark {self.mark}: acknowledged for "
            f"[{self.write}], missing from [{self.read}]"
        )


@final
@attrs.frozen
class IsolationReport:
    """What the check found; `passed` when no sequence showed a leak or a lost write.

    When it failed, `sequence` is the shortest failing sequence found (one showing a
    leak before one showing only lost writes), one line per step or call, and `leaks`
    and `lost_writes` are those of its first failing read. The counts cover every
    sequence the check ran, shrinking included.
    """

    passed: bool
    leaks: tuple[Leak, ...] = ()
    lost_writes: tuple[LostWrite, ...] = ()
    sequence: tuple[str, ...] = ()
    examples: int = 0
    """Sequences run, the replays while shrinking included."""
    sessions: int = 0
    """Sessions opened."""
    calls: int = 0
    """Tool calls made (setup, writes and reads)."""

    def describe(self) -> list[str]:
        """The report as lines of text, for a terminal or a log."""
        counts = f"{self.examples} sequences, {self.sessions} sessions, {self.calls} calls"
        if self.passed:
            return [f"isolation check passed: no leak, no lost write ({counts})"]
        lines = [f"isolation check FAILED ({counts})"]
        lines += [f"leak: {leak.describe()}" for leak in self.leaks]
        lines += [f"lost write: {lost.describe()}" for lost in self.lost_writes]
        lines.append("shortest failing sequence:")
        lines += [f"  {line}" for line in self.sequence]
        return lines
