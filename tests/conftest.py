"""Shared test configuration: Hypothesis profiles, and a private state folder per test.

``ci`` (selected when the CI environment variable is set) has no deadline,
since shared CI machines are noisy; ``dev`` is Hypothesis' default with the
deadline relaxed for trio-based properties.
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev", deadline=1000)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _private_state_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test's servers keep their durable state in a folder of the test's own.

    ``serve`` stores state under ``$XDG_STATE_HOME`` by default; without this,
    tests would share one state file and see each other's sessions.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
        yield
