"""The error of serve options that contradict each other or are unsafe."""

from __future__ import annotations

__all__ = ["ConfigurationError"]


class ConfigurationError(ValueError):
    """The serve options contradict each other or are unsafe; the message says what to change."""
