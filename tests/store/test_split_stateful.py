"""The built-in modules' durable state machine (tests/store/test_durable_stateful.py: isolation,
order, durability through expiry and restarts) over a store split by session in two
PostgreSQL databases; and the proof that it catches a partition list silently changed.

Both partitions are fresh databases on the test session's PostgreSQL server
(``tests/_postgres.py``), emptied before each example (the split they make
stays recorded).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from actors.store import SplitStore, open_store

from .. import _stateful_harness as harness
from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_urls_fixture,
    postgres_server_fixture,
)
from .test_durable_stateful import DurableBuiltinsMachine
from .test_split_store import empty_partitions

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from actors.store import StateStore

# Each example restarts its runtime on two PostgreSQL databases: a few dozen
# examples reach every rule and keep the test short.
_SETTINGS: Final = harness.machine_settings(max_examples=25, stateful_step_count=8)


def _machine(
    urls: list[str], open_store_in: Callable[[Path], AbstractAsyncContextManager[StateStore]]
) -> type[DurableBuiltinsMachine]:
    class SplitMachine(DurableBuiltinsMachine):
        def __init__(self) -> None:
            empty_partitions(urls)
            super().__init__()

    SplitMachine.open_store_in = staticmethod(open_store_in)  # type: ignore[method-assign]
    return SplitMachine


def test_the_machine_holds_over_a_store_split_in_two(
    fresh_postgres_urls: Callable[[int], list[str]],
) -> None:
    urls = fresh_postgres_urls(2)
    run_state_machine_as_test(_machine(urls, lambda _folder: open_store(urls)), settings=_SETTINGS)


def test_machine_finds_sessions_lost_to_a_partition_list_changed_silently(
    fresh_postgres_urls: Callable[[int], list[str]],
) -> None:
    """What recording the list prevents: each restart swaps which database holds which
    partition, as a store hashing URL positions would after the URLs were reordered."""
    urls = fresh_postgres_urls(2)
    opened = 0

    @asynccontextmanager
    async def swapping(_folder: Path) -> AsyncIterator[StateStore]:
        nonlocal opened
        opened += 1
        async with open_store(urls) as split:
            assert isinstance(split, SplitStore)
            ids = sorted(split.partitions)
            stores = [split.partitions[pid] for pid in ids]
            if opened % 2 == 0:
                stores.reverse()
            yield SplitStore(dict(zip(ids, stores, strict=True)), split.url)

    # Not shrunk (harness.failure_of would): on PostgreSQL that takes longer than finding it.
    unshrunk = settings(_SETTINGS, phases=[Phase.generate], report_multiple_bugs=False)
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(_machine(urls, swapping), settings=unshrunk)
    message = str(failure.value)
    assert message.startswith("invariant 8 (durability): after a restart, "), message
