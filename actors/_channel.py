"""The mark of a type whose handler parameter receives one of the call's channels to its
client: `Log` and `Ask` (`actors._client`).

A leaf. `actors._schema` knows those parameters by this mark, and `actors._client`, whose
`Ask` derives typed forms through `_schema`, marks its types with it: neither imports the
other in a circle.
"""

from __future__ import annotations

from typing import ClassVar, Literal

__all__ = ["Channel", "ChannelKind"]

ChannelKind = Literal["log", "ask"]


class Channel:
    """Base of the channel types: a handler parameter annotated with one receives the call's
    channel of that `kind`, and is no argument."""

    __slots__ = ()
    kind: ClassVar[ChannelKind]
    """Which channel a parameter annotated with the type receives."""
