"""Which hosts are this machine: what a loopback-only listener or URL may name."""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["LOOPBACK_NAMES", "is_loopback"]

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
"""Host names (as in a URL) that always mean this machine."""


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
