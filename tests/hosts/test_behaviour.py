"""One behaviour suite (`_suite`), run against every host, each way it is met (`_hosts`).

Plain test functions: each runs its behaviour in a run of its host's event
loop (trio or asyncio), so the hosts of both loops share one suite.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from ._hosts import faces
from ._suite import BEHAVIOURS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from ._hosts import Driver, Face


@pytest.fixture(scope="module", autouse=True)
def _stop_the_cluster_hosts_ray() -> Iterator[None]:
    """Stop the local Ray the cluster host started (`_hosts._on_ray`) once this module is done.

    Ray is started once per process: left running, it would make the next module's own
    ``ray.init`` on this worker fail.
    """
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.mark.parametrize("face", faces(), ids=lambda face: face.id)
@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids=lambda behaviour: behaviour.__name__)
def test_every_host_behaves_alike(
    face: Face, behaviour: Callable[[Driver], Awaitable[None]]
) -> None:
    """The behaviour holds on this host, met this way."""
    face.run(behaviour)
