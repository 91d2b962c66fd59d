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

__all__ = ["StateUrls", "joined", "state_urls"]

_POSTGRESQL = ("postgresql://", "postgres://")


def state_urls(text: str) -> str | tuple[str, ...]:
    """The URLs in one value: several if it is PostgreSQL URLs separated by spaces, else one."""
    pieces = text.split()
    # Any PostgreSQL URL among them: a list, whose other pieces are then checked one by
    # one (a typo in a scheme is named by position), never one URL holding them all.
    if len(pieces) > 1 and any(piece.startswith(_POSTGRESQL) for piece in pieces):
        return tuple(pieces)
    return text


class StateUrls(argparse.Action):
    """Gathers each ``--state`` (given through `state_urls`): one URL stays a string, as
    `actors.store.open_store` takes it, several make a tuple. The first one on the command
    line replaces the environment's default."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        """Add `values` to the URLs the command line gave before."""
        given = getattr(namespace, self.dest, None)
        before = () if given is self.default or given is None else _urls(given)
        urls = (*before, *_urls(values))
        setattr(namespace, self.dest, urls[0] if len(urls) == 1 else urls)


def joined(before: object, after: object, default: object) -> str | tuple[str, ...]:
    """The URLs of ``--state`` given before a command (`before`, unless it is the
    `default`) and after it (`after`), as `StateUrls` gathers them.

    A subcommand's options are parsed into a namespace of their own, which then
    replaces the values given before the command: so the ones after it are kept
    apart, and joined here.
    """
    urls = (*(() if before is default or before is None else _urls(before)), *_urls(after))
    return urls[0] if len(urls) == 1 else urls


def _urls(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    assert isinstance(value, tuple)  # what `state_urls` makes
    return value
