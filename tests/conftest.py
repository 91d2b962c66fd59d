"""Shared test configuration: Hypothesis profiles.

``ci`` (selected when the CI environment variable is set) has no deadline,
since shared CI machines are noisy; ``dev`` is Hypothesis' default with the
deadline relaxed for trio-based properties.
"""

import os

from hypothesis import settings

settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev", deadline=1000)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
