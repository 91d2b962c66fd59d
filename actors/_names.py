"""The rule for the names a module gives itself and its tools, resources and prompts.

A leaf, so that whatever checks a module name (`ToolModule`, the ``state``
command reading an export) imports it downward.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["check_name"]

_NAME: Final = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def check_name(kind: str, name: str) -> None:
    """Raise ValueError, naming the rule, unless `name` is lowercase snake_case.

    `kind` says what the name is for (``"module"``, ``"tool"``…), in the message.
    """
    if not _NAME.match(name):
        msg = (
            f"{kind} name {name!r} must be lowercase snake_case (letters, digits, single "
            "underscores): '__' separates module and tool in full names"
        )
        raise ValueError(msg)
