"""Places under a server-wide cap, shared fairly per token and per tenant (invariant 10).

Some bounds are on what all clients hold together: the ``subscriptions/listen``
streams open, the parked calls of 2026-era clients, the HTTP sessions open.
Counted per token alone, one tenant with many tokens (or many OAuth subjects)
takes every place, and every other tenant is refused until it lets go.
`FairShares` counts each place against its holder, a `Principal` (a token, and
the tenant it is bound to), and against the holder's *group*: its tenant, or,
for a principal bound to none (a gateway token, every anonymous client
together, the stdio client), that principal alone.

A place is granted while

1. the holder holds fewer than ``per_holder``,
2. its group holds fewer than its share, ``max(1, total // (others + 2))``,
   where ``others`` counts the other groups holding any place, and
3. fewer than ``total`` are held in all.

So a group alone holds at most half the places, and one that takes a place
while k others hold some at most a (k + 2)th. One group never holds every
place, nor do two: of any two, the one granted last took its place while the
other held some, so it holds at most a third, and the other at most half.
A tenant holding none finds room beside one or two that hold all they may;
only three or more tenants, each holding its share, can take every place.
(This is for totals of three places and more; the floor of one place lets
two groups take a total of two. The caps here are hundreds and more.) No place is
taken back: a group over its share now (it took the places while alone) keeps
them, and gets no more until it is under its share again.
"""

from __future__ import annotations

import enum
from collections import Counter
from typing import TYPE_CHECKING, Final, TypeVar, final

import attrs

if TYPE_CHECKING:
    from protocol import Caller

__all__ = ["ANONYMOUS", "Bound", "FairShares", "Full", "Group", "Principal"]

ANONYMOUS: Final = "anonymous"
"""The label of every client without a token (a loopback server configured without any)."""

Group = tuple[str, str]
"""Whose share a place counts against: ``("tenant", name)`` or ``("principal", label)``."""


@final
@attrs.frozen
class Principal:
    """Who holds a place, or owns a session: a token's label and the tenant it is bound to.

    Two principals are the same only if both are: an OAuth subject of tenant
    beta is not the same subject of tenant alpha.
    """

    label: str
    """The token's label (``token-1``, ``oauth:acme/alice``), or `ANONYMOUS`."""
    tenant: str | None = None
    """The tenant the token is bound to; None for a gateway, or without a token."""

    @classmethod
    def of(cls, caller: Caller) -> Principal:
        """The principal of `caller`, as its transport established it."""
        return cls(caller.label, caller.tenant)

    @property
    def group(self) -> Group:
        """Whose share the principal's places count against: its tenant's, or its own."""
        return ("tenant", self.tenant) if self.tenant is not None else ("principal", self.label)

    def __str__(self) -> str:
        """How the logs name it: the label, and the tenant if it has one."""
        return self.label if self.tenant is None else f"{self.label} (tenant {self.tenant!r})"


class Bound(enum.Enum):
    """Which of `FairShares`'s bounds refused a place."""

    HOLDER = "holder"
    """The holder's own: ``per_holder``."""
    GROUP = "group"
    """The holder's tenant's (or its own, bound to none) share of the total."""
    TOTAL = "total"
    """All places together: ``total``."""


@final
@attrs.frozen
class Full:
    """Why `FairShares.take` refused a place."""

    bound: Bound
    limit: int
    """How many places that bound allowed."""
    principal: Principal
    others: int = 0
    """For `Bound.GROUP`: how many other groups held places then."""

    def says(self, things: str, doing: str) -> str:
        """The reason, for a refusal's message: ``100 calls of this client already wait
        for answers (the most one client may hold)``, `things` and `doing` naming the places."""
        tenant = self.principal.tenant
        match self.bound:
            case Bound.HOLDER:
                whose, why = "this client", "the most one client may hold"
            case Bound.GROUP:
                whose = "this client" if tenant is None else f"tenant {tenant!r}"
                why = (
                    f"its share while {self.others} others hold some"
                    if self.others
                    else "its share while no one else holds any"
                )
            case Bound.TOTAL:
                whose, why = "all clients", "the most this server holds"
        return f"{self.limit} {things} of {whose} already {doing} ({why})"


@final
class FairShares:
    """Counts of places taken, per principal and per group, under the rules of this module."""

    def __init__(self, total: int, per_holder: int) -> None:
        if total < 1 or per_holder < 1:
            msg = f"total and per_holder must be at least 1, got {total} and {per_holder}"
            raise ValueError(msg)
        self.total: Final = total
        """Places in all."""
        self.per_holder: Final = per_holder
        """Places one principal may hold."""
        self._held = 0
        self._per_holder: Counter[Principal] = Counter()
        self._per_group: Counter[Group] = Counter()

    def held(self, principal: Principal) -> int:
        """Places `principal` holds now."""
        return self._per_holder[principal]

    def _share(self, principal: Principal) -> int:
        """How many places `principal`'s group may hold, given who holds some now."""
        group = principal.group
        others = len(self._per_group) - (group in self._per_group)
        return max(1, self.total // (others + 2))

    def _refusal(self, principal: Principal) -> Full | None:
        """Why `principal` may not take a place now; None if it may."""
        if self._per_holder[principal] >= self.per_holder:
            return Full(Bound.HOLDER, self.per_holder, principal)
        share = self._share(principal)
        if self._per_group[principal.group] >= share:
            others = len(self._per_group) - 1  # the group holds some: it is counted
            return Full(Bound.GROUP, share, principal, others)
        if self._held >= self.total:
            return Full(Bound.TOTAL, self.total, principal)
        return None

    def take(self, principal: Principal) -> Full | None:
        """Take a place for `principal`; None when taken, or why it is refused."""
        refused = self._refusal(principal)
        if refused is None:
            self._held += 1
            self._per_holder[principal] += 1
            self._per_group[principal.group] += 1
        return refused

    def give_back(self, principal: Principal) -> None:
        """`principal` lets go of one place it took."""
        assert self._per_holder[principal] > 0, "a place given back that was never taken"
        self._held -= 1
        _decrement(self._per_holder, principal)
        _decrement(self._per_group, principal.group)


_K = TypeVar("_K")


def _decrement(counts: Counter[_K], key: _K) -> None:
    """One less for `key`, forgotten at zero: a counter's keys are those that hold some."""
    counts[key] -= 1
    if not counts[key]:
        del counts[key]
