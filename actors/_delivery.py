"""Handing what a handler reports to a listener on the runtime's loop, from any thread.

`Progress` and `Log` are made on the runtime's thread, for one call. A sync
handler reports from that thread, and is heard at once; a heavy handler
reports from its worker thread, and what it reports is scheduled on the loop.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Generic, TypeVar, final

import trio

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Delivery"]

T = TypeVar("T")


@final
class Delivery(Generic[T]):
    """Items for `listener`, on the runtime's loop; dropped when nobody listens."""

    __slots__ = ("_listener", "_thread", "_token")

    def __init__(self, listener: Callable[[T], None] | None) -> None:
        """With a listener, it must be made on the runtime's thread, in trio."""
        self._listener = listener
        if listener is not None:
            self._thread = threading.get_ident()
            self._token: trio.lowlevel.TrioToken | None = trio.lowlevel.current_trio_token()
        else:
            self._thread = 0
            self._token = None

    @property
    def listened(self) -> bool:
        """Whether anyone hears what is delivered."""
        return self._listener is not None

    def deliver(self, item: T) -> None:
        """Hand `item` to the listener: now on the loop's thread, soon from another."""
        listener = self._listener
        if listener is None:
            return
        if threading.get_ident() == self._thread:
            listener(item)
            return
        assert self._token is not None
        # A worker thread. Once the run is over, nobody listens: drop the item.
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(listener, item)
