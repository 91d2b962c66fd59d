"""``--state URL`` on a command line: one store, or several PostgreSQL URLs for a split one.

The option repeats (``--state postgresql://…/a --state postgresql://…/b``);
nothing splits a value on commas, which libpq URLs use for several hosts. Its
environment variable (``MCP_ACTORS_STATE``) holds one URL, or several
PostgreSQL URLs separated by spaces (a libpq URL has none; a SQLite path may).
As for any option that is not repeatable, the command line wins over the
environment: one ``--state`` replaces what the variable says.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["StateUrls", "chosen_state", "state_urls"]

_POSTGRESQL = ("postgresql://", "postgres://")


def state_urls(text: str) -> tuple[str, ...]:
    """The URLs in one value: several if it is PostgreSQL URLs separated by spaces, else one."""
    pieces = text.split()
    if len(pieces) > 1 and all(piece.startswith(_POSTGRESQL) for piece in pieces):
        return tuple(pieces)
    return (text,)


class StateUrls(argparse.Action):
    """Gathers each ``--state`` (given through `state_urls`) into one tuple; the first one
    on the command line replaces the environment's default."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        """Add `values` to the URLs the command line gave before."""
        given = getattr(namespace, self.dest, None)
        if given is self.default or not isinstance(given, tuple):
            given = ()
        assert isinstance(values, tuple)  # the option's type is `state_urls`
        setattr(namespace, self.dest, (*given, *values))


def chosen_state(given: tuple[str, ...] | None) -> str | tuple[str, ...] | None:
    """What `StateUrls` gathered, as `actors.store.open_store` takes it: one URL as itself."""
    if given is not None and len(given) == 1:
        return given[0]
    return given
