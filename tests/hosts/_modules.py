"""The modules the host suite serves, by spec (``tests.hosts._modules:notes``…).

Specs, so that a host in other processes (a cluster's shards) imports the same
ones. They are the existing test modules: notes with a resource, a template,
a prompt and a completion (tests/core/test_resources.py), tools that ask and log
(the same file), and tools that report progress (tests/core/test_progress.py).
"""

from __future__ import annotations

from ..core.test_progress import reporting_module
from ..core.test_resources import asking_module, notes_module

notes = notes_module()
asking = asking_module()
steps = reporting_module()

SPECS = tuple(f"{__name__}:{name}" for name in ("notes", "asking", "steps"))
"""Every module of the suite, as ``package.module:attribute``."""
