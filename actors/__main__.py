"""``python -m actors``: see `actors._cli`."""

import sys

from ._cli import main

sys.exit(main())
