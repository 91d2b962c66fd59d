"""Full tool names: ``server__tool`` (external) and ``builtin.server__tool`` (built-in).

A name with a URI-like scheme prefix (``tauri:open``) is not a tool name at
all but a host command; it is passed through untouched.
"""

from __future__ import annotations

import re
from typing import Final, final

import attrs

from ._errors import ToolNameError
from ._result import BackendType, ServiceInfo

__all__ = ["BUILTIN_PREFIX", "SEPARATOR", "ToolName", "has_scheme", "name_from_service"]

SEPARATOR: Final = "__"
"""Separates the server from the tool in a full name."""
BUILTIN_PREFIX: Final = "builtin."
"""Marks a built-in module's full name."""
_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def has_scheme(name: str) -> bool:
    """True for a name like ``tauri:open`` that must be passed through untouched."""
    return _SCHEME.match(name) is not None


@final
@attrs.frozen
class ToolName:
    """A full tool name taken apart."""

    server: str
    """The module or external server, e.g. ``planning``."""
    tool: str
    """The base tool name, e.g. ``create_goal``."""
    backend_type: BackendType = BackendType.EXTERNAL
    """BUILTIN when the name carried the ``builtin.`` prefix."""

    @classmethod
    def parse(cls, name: str) -> ToolName:
        """Parse ``server__tool`` or ``builtin.server__tool``; a bare base name is an error."""
        backend = BackendType.EXTERNAL
        rest = name
        if name.startswith(BUILTIN_PREFIX):
            backend = BackendType.BUILTIN
            rest = name[len(BUILTIN_PREFIX) :]
        server, separator, tool = rest.partition(SEPARATOR)
        if not separator or not server or not tool:
            msg = (
                f"{name!r} is not a full tool name; "
                "expected 'server__tool' or 'builtin.server__tool'"
            )
            raise ToolNameError(msg)
        return cls(server, tool, backend)

    def __str__(self) -> str:
        prefix = BUILTIN_PREFIX if self.backend_type is BackendType.BUILTIN else ""
        return f"{prefix}{self.server}{SEPARATOR}{self.tool}"


def name_from_service(name: str, service: ServiceInfo | None) -> str:
    """Resolve `name` to a full name using the ServiceInfo of the result it came from.

    A base name becomes the full name of `service`'s server (``builtin.``
    added for a built-in tool). Everything else is returned as it is: a
    scheme-prefixed name, a name that is already full (it has ``__``, or the
    ``builtin.`` prefix that only full names carry), and any name when there
    is no `service` to resolve it with. This is how a UI that re-calls a tool
    by the base name it found in a result gets the name to call.
    """
    if service is None or has_scheme(name) or SEPARATOR in name or name.startswith(BUILTIN_PREFIX):
        return name
    return str(ToolName(service.server_name, name, service.backend_type))
