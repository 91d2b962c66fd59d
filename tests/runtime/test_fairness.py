"""Fair eviction among tenants: one tenant's load never pushes out a lighter tenant's state.

A tenant is the part of a session id before its first ``/`` (`protocol.tenant_of`).
"""

from __future__ import annotations

import pytest
import trio

from actors import CapacityError, RuntimeConfig
from protocol import tenant_of

from .test_runtime import Gate, Liveness, append, box_module, running


def sessions_of(liveness: Liveness, tenant: str) -> set[str]:
    """The sessions of `tenant` whose state is live."""
    return {
        key.context.session_id
        for key in liveness.live
        if tenant_of(key.context.session_id) == tenant
    }


class TestTenantOf:
    @pytest.mark.parametrize(
        ("session", "tenant"),
        [
            ("alpha", "alpha"),
            ("alpha/s1", "alpha"),
            ("alpha/s1/t", "alpha"),
            ("alphabet", "alphabet"),
        ],
    )
    def test_the_tenant_is_the_part_before_the_first_slash(self, session: str, tenant: str) -> None:
        """``T`` and ``T/…`` belong to ``T``; ``Tx`` is a tenant of its own."""
        assert tenant_of(session) == tenant


class TestFairEviction:
    async def test_a_heavy_tenant_evicts_only_its_own_actors(self) -> None:
        """B's stream of new sessions never evicts A's states while B holds more than A."""
        liveness = Liveness()
        async with running([box_module(liveness)], max_actors=8) as runtime:
            for index in range(3):
                await append(runtime, f"A/s{index}", "kept")
            for index in range(60):  # far past the cap: B must make room among its own
                await append(runtime, f"B/s{index}", "x")
            assert sessions_of(liveness, "A") == {"A/s0", "A/s1", "A/s2"}
            assert len(sessions_of(liveness, "B")) == 5
            assert runtime.statistics().evicted == 55
            assert liveness.overlaps == 0

    async def test_a_light_tenant_may_evict_a_heavier_ones_idle_actor(self) -> None:
        """A new tenant gets a slot from the tenant holding more, least recently used first."""
        liveness = Liveness()
        async with running([box_module(liveness)], max_actors=3) as runtime:
            for session in ("B/1", "B/2", "B/3"):
                await append(runtime, session, "x")
            await append(runtime, "B/1", "again")  # B/2 is now B's least recently used
            await append(runtime, "A/1", "x")
            assert sessions_of(liveness, "B") == {"B/1", "B/3"}
            assert sessions_of(liveness, "A") == {"A/1"}

    async def test_equal_tenants_do_not_evict_each_other(self) -> None:
        """With A and B at one actor each, B's second session evicts B's own, not A's."""
        liveness = Liveness()
        async with running([box_module(liveness)], max_actors=2) as runtime:
            await append(runtime, "A/1", "x")
            await append(runtime, "B/1", "x")
            await append(runtime, "B/2", "x")
            assert sessions_of(liveness, "A") == {"A/1"}
            assert sessions_of(liveness, "B") == {"B/2"}

    async def test_a_busy_heavy_tenant_gets_capacity_error_instead_of_a_lighter_ones_slot(
        self,
    ) -> None:
        """When all of B's actors are busy and A's are idle, B's new call is refused, not A's."""
        gates = {"held": Gate()}
        liveness = Liveness()
        async with running([box_module(liveness, gates=gates)], max_actors=2) as runtime:
            await append(runtime, "A/1", "x")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "B/1", "held")
                await gates["held"].entered.wait()
                with pytest.raises(
                    CapacityError,
                    match=r"^all 2 live actors are taken: tenant 'B''s are busy and the idle "
                    r"ones belong to tenants holding fewer",
                ):
                    await append(runtime, "B/2", "x")
                gates["held"].release.set()
            assert sessions_of(liveness, "A") == {"A/1"}


class TestPerTenantCap:
    async def test_a_tenant_at_its_cap_evicts_its_own_least_recently_used(self) -> None:
        """max_actors_per_tenant bounds one tenant with room to spare for the others."""
        liveness = Liveness()
        async with running([box_module(liveness)], max_actors_per_tenant=2) as runtime:
            await append(runtime, "A/1", "x")
            await append(runtime, "B/1", "x")
            await append(runtime, "B/2", "x")
            await append(runtime, "B/1", "again")
            await append(runtime, "B/3", "x")  # B at its cap: B/2 goes
            assert sessions_of(liveness, "B") == {"B/1", "B/3"}
            assert sessions_of(liveness, "A") == {"A/1"}

    async def test_a_tenant_whose_actors_are_all_busy_is_refused(self) -> None:
        """At its cap with nothing idle, the tenant's new key gets CapacityError naming it."""
        gates = {"held": Gate()}
        async with running(
            [box_module(Liveness(), gates=gates)], max_actors_per_tenant=1
        ) as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append, runtime, "B/1", "held")
                await gates["held"].entered.wait()
                with pytest.raises(
                    CapacityError,
                    match=r"^tenant 'B' holds 1 live actors, its limit \(max_actors_per_tenant\)",
                ):
                    await append(runtime, "B/2", "x")
                await append(runtime, "A/1", "x")  # another tenant is not affected
                gates["held"].release.set()

    def test_the_per_tenant_cap_must_be_positive(self) -> None:
        """A nonsensical cap is refused, naming it."""
        with pytest.raises(ValueError, match=r"^max_actors_per_tenant must be positive, got 0$"):
            RuntimeConfig(max_actors_per_tenant=0)

    async def test_the_tenant_table_forgets_tenants_whose_actors_are_gone(self) -> None:
        """Tenants come and go: their counts do not pile up in the runtime."""
        async with running([box_module(Liveness())], max_actors=1) as runtime:
            for index in range(50):
                await append(runtime, f"T{index}/s", "x")
            assert len(runtime._admission.held) == 1
