"""Shared test configuration: Hypothesis profiles, how many pytest-xdist workers ``-n auto``
starts, and a private state folder per test.

Neither profile times the examples: no deadline, no "too slow" health check.
A busy machine (a shared CI runner, `.ci/run` beside other work, which does
not set CI) makes an example or its data slow without anything being wrong,
and the properties are about what happens, not how fast. ``ci`` (selected
when the CI environment variable is set) also prints the blob that replays
a failure.
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", settings.get_profile("dev"), print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pytest-xdist): one worker more than the cores this process may use.

    Many tests spend part of their time waiting on a server process (its start, its
    drain after SIGTERM); a spare worker's test uses the core meanwhile.
    """
    return len(os.sched_getaffinity(0)) + 1


@pytest.fixture(autouse=True)
def _private_state_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test's servers keep their durable state in a folder of the test's own.

    ``serve`` stores state under ``$XDG_STATE_HOME`` by default; without this,
    tests would share one state file and see each other's sessions.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
        yield
