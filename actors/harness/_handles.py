"""The handle pattern, as the harness drives it: a conversation's handle minted, then carried.

A server of the 2026-07-28 era keeps state across calls in a handle it mints and the
client passes back as an ordinary tool argument (``actors serve --handles``: the
tool ``conversation__start``, whose structured result is ``{"conversation":
HANDLE}``, and a required ``conversation`` argument on every stateful tool).
`Handles` names the three parts: the tool that mints, the member of its
structuredContent that holds the handle, and the argument that carries it. Each
session of a load run or of the isolation check calls the tool once as it opens,
and every later call of that session, its setup calls included, carries the
handle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["DEFAULT_ARGUMENT", "DEFAULT_KEY", "DEFAULT_TOOL", "HandleError", "Handles"]

DEFAULT_TOOL: Final = "conversation__start"
"""The tool that mints a conversation's handle on ``actors serve --handles``."""
DEFAULT_KEY: Final = "conversation"
"""The member of its structuredContent that holds the handle."""
DEFAULT_ARGUMENT: Final = "conversation"
"""The argument every later call carries the handle in."""
_SHOWN: Final = 12  # characters of a handle a report shows: enough to tell two apart


class HandleError(ValueError):
    """A minting call answered no handle, or a template sets the argument handles fill."""


def _name(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        msg = f"Handles.{attribute.name} must be a non-empty string, not {value!r}"
        raise ValueError(msg)


@final
@attrs.frozen
class Handles:
    """Which tool mints a handle, where its result holds it, which argument carries it."""

    tool: str = attrs.field(default=DEFAULT_TOOL, validator=_name)
    """The tool called once, with no arguments, as each session opens."""
    key: str = attrs.field(default=DEFAULT_KEY, validator=_name)
    """The member of the tool's structuredContent whose string is the handle."""
    argument: str = attrs.field(default=DEFAULT_ARGUMENT, validator=_name)
    """The argument every later call of the session passes the handle as."""

    def handle_of(self, result: Any) -> str:
        """The handle in `result`, the minting tool's successful result (an SDK
        ``CallToolResult``); `HandleError` saying what it holds instead."""
        structured = getattr(result, "structured_content", None)
        if not isinstance(structured, Mapping):
            text = " ".join(
                getattr(item, "text", "") for item in getattr(result, "content", ())
            ).strip()
            msg = (
                f"{self.tool} answered no structured content, so no handle under "
                f"{self.key!r} (its text: {text[:200]!r}): name the tool that mints handles"
            )
            raise HandleError(msg)
        handle = structured.get(self.key)
        if isinstance(handle, str) and handle:
            return handle
        strings = sorted(key for key, value in structured.items() if isinstance(value, str))
        hint = f"name the member: one of {', '.join(strings)}" if strings else "none is a string"
        msg = f"{self.tool}'s structured content has no string member {self.key!r}: {hint}"
        raise HandleError(msg)

    def carried(self, handle: str) -> dict[str, str]:
        """The argument that carries `handle`, to add to a call's own arguments."""
        return {self.argument: handle}

    def check_unset(self, calls: Iterable[tuple[str, Mapping[str, object]]]) -> None:
        """`HandleError` for a call, given as (its name, its arguments), that sets the
        argument the handle fills: the two would contend for it."""
        for name, arguments in calls:
            if self.argument in arguments:
                msg = (
                    f"{name} sets the argument {self.argument!r}, which carries the session's "
                    "handle: leave it out (every call gets it)"
                )
                raise HandleError(msg)

    @staticmethod
    def shown(handle: str) -> str:
        """`handle` as a report shows it: its start, never whole (it is a credential)."""
        return handle if len(handle) <= _SHOWN else f"{handle[:_SHOWN]}…"
