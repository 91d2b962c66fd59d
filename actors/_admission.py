"""Admission: room for actors' states under ``max_actors`` and ``max_actors_per_tenant``.

The map
-------
* `Admission.seat_now` and `Admission.seat`: an actor's task asks for a seat
  before it makes its key's state (`actors._actor.Seats`). Without a cap every
  seat is granted at once; under one, the task waits for room, evicting idle
  actors fairly among tenants (`Admission.seat`), or fails with
  `CapacityError`, worded here (``_no_room``).
* `Admission.release`: a FINISHED actor gives its seat back.
* Every seat is also a check that a key never has two live states
  (``statistics().duplicate_actors`` counts the times it had).

Admission reads the router's tables through `routed` and `running`, the two
callables the runtime gives it: the tables are rebuilt now and then (see
`Runtime._compact_if_sparse`), so a reference to one would go stale.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs

from protocol import tenant_of

from ._errors import CapacityError
from ._observe import StopReason

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ._actor import Actor, Counters
    from ._prepare import Route

__all__ = ["Admission"]

logger = logging.getLogger("actors")


@attrs.define(eq=False)
class Admission:
    """Who may hold a state now: the caps, the seats taken, and the live keys."""

    max_actors: int | None
    max_actors_per_tenant: int | None
    counters: Counters  # the runtime's: evictions and duplicate states are counted here
    routed: Callable[[], Iterable[Actor]]  # each key's newest actor, least recently used first
    running: Callable[[], Iterable[Actor]]  # every actor task, routed or still stopping
    capped: bool = attrs.field(init=False)
    holding: int = 0  # actors holding a state, counted against max_actors
    held: dict[str, int] = attrs.field(factory=dict)  # tenant -> seats, under a cap
    # Keys with a state; by route, which is hashed per call anyway, where an
    # ActorKey would be hashed once more per activation.
    live_routes: set[Route] = attrs.field(factory=set)

    def __attrs_post_init__(self) -> None:
        self.capped = self.max_actors is not None or self.max_actors_per_tenant is not None

    def seat_now(self, actor: Actor) -> bool:
        """Seat `actor` at once when no cap applies; whether it did."""
        if self.capped:
            return False
        self.holding += 1
        actor.holds_state = True
        self._note_live(actor)
        return True

    async def seat(self, actor: Actor) -> None:
        """Seat `actor`, under the caps waiting for room (see `_make_room`)."""
        if self.capped:
            await self._make_room(actor)
        else:
            self.holding += 1
            actor.holds_state = True
        self._note_live(actor)

    def release(self, actor: Actor) -> None:
        """Give back the seat of a FINISHED actor, if it had one."""
        if not actor.holds_state:
            return
        self.live_routes.discard(actor.route)
        self.holding -= 1
        if actor.tenant is not None:  # counted per tenant only under a cap
            self.held[actor.tenant] -= 1
            if not self.held[actor.tenant]:
                del self.held[actor.tenant]  # tenants come and go: keep the table small

    def compact(self) -> None:
        """Rebuild the live keys' set, which never gives back capacity by itself."""
        self.live_routes = set(self.live_routes)

    def _note_live(self, actor: Actor) -> None:
        """Record that `actor` holds its key's state; a second live state is a bug."""
        if actor.route in self.live_routes:
            self.counters.duplicate_actors += 1
            logger.error("BUG: a second state for %s while one was live", actor.key)
        self.live_routes.add(actor.route)
        logger.debug("actor started for %s", actor.key)

    async def _make_room(self, actor: Actor) -> None:
        """Wait until `actor` may hold a state under the caps, evicting idle actors.

        Eviction is fair among tenants (`protocol.tenant_of`): at ``max_actors``
        a call may evict an idle actor of its own tenant, or of a tenant that
        holds more actors than its own, the least recently used first; at
        ``max_actors_per_tenant`` only one of its own. So a tenant's load never
        pushes out the state of a tenant that holds fewer actors. Raises
        CapacityError when nothing may be evicted and nothing is stopping.
        """
        tenant = tenant_of(actor.key.context.session_id)
        while (own_only := self._full(tenant)) is not None:
            victim = self._victim(tenant, own_only=own_only)
            if victim is not None:
                self.counters.evicted += 1
                logger.debug("evicting %s to make room for tenant %r", victim.key, tenant)
                victim.stop_reason = StopReason.EVICTED
                victim.retire()
                await victim.wait_finished()
                continue
            stopping = next(
                (
                    a
                    for a in self.running()
                    if a.holds_state
                    and not a.phase.accepting
                    and (a.tenant == tenant or not own_only)
                ),
                None,
            )
            if stopping is None:
                raise CapacityError(self._no_room(tenant, own_only=own_only))
            await stopping.wait_finished()  # a seat frees up when it finishes
        self.holding += 1
        self.held[tenant] = self.held.get(tenant, 0) + 1
        actor.tenant = tenant
        actor.holds_state = True

    def _full(self, tenant: str) -> bool | None:
        """None if `tenant` may hold one more state; else whether only its own may make room."""
        per_tenant = self.max_actors_per_tenant
        if per_tenant is not None and self.held.get(tenant, 0) >= per_tenant:
            return True
        cap = self.max_actors
        if cap is not None and self.holding >= cap:
            return False
        return None

    def _victim(self, tenant: str, *, own_only: bool) -> Actor | None:
        """The least recently used idle actor a call of `tenant` may evict, if any."""
        mine = self.held.get(tenant, 0)
        for candidate in self.routed():  # least recently used first
            if not (candidate.phase.accepting and candidate.holds_state and not candidate.pending):
                continue
            assert candidate.tenant is not None  # every state is counted under a cap
            if candidate.tenant == tenant or (not own_only and self.held[candidate.tenant] > mine):
                return candidate
        return None

    def _no_room(self, tenant: str, *, own_only: bool) -> str:
        """Why `tenant`'s actor gets no seat, and what to do about it."""
        if own_only:
            return (
                f"tenant {tenant!r} holds {self.held[tenant]} live actors, its limit "
                "(max_actors_per_tenant), and all are busy; retry later"
            )
        cap = self.max_actors
        if any(a.holds_state and a.phase.accepting and not a.pending for a in self.running()):
            return (
                f"all {cap} live actors are taken: tenant {tenant!r}'s are busy and the idle "
                "ones belong to tenants holding fewer; raise max_actors or retry later"
            )
        return f"all {cap} live actors are busy; raise max_actors or retry later"
