"""The protocol eras the harness speaks, and how a client session opens in each.

* ``2026``, the 2026-07-28 revision: the session opens with one ``server/discover``,
  and there is no protocol session: every request stands alone, state that spans
  calls travels in what the calls carry (a handle, a session named in ``_meta``).
  What the official SDK's ``Client``, FastMCP's ``Client``, pydantic-ai and
  openai-agents negotiate by default, so the harness's default: a server checked in
  this era is checked as the clients people use meet it.
* ``2025``, the initialize handshake (2025-11-25 and before): ``initialize``, then
  ``notifications/initialized``; over Streamable HTTP the server names an
  ``Mcp-Session-Id`` that every later request of the session carries.

Neither falls back to the other (the SDK's ``Client(mode="auto")`` does): a server
that does not speak the era asked for is an error that says which era to ask for.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = ["DEFAULT_ERA", "ERAS", "OPENING", "Era", "check_era", "era_hint", "version_of"]

Era = Literal["2026", "2025"]
"""A protocol era: ``"2026"`` (2026-07-28, no session) or ``"2025"`` (the handshake)."""
ERAS: Final[tuple[Era, ...]] = get_args(Era)
"""Every era, the default first."""
DEFAULT_ERA: Final[Era] = "2026"
"""The SDK client's default era, and so the harness's."""
_VERSIONS: Final[dict[Era, str]] = {"2026": "2026-07-28", "2025": "2025-11-25"}
OPENING: Final[dict[Era, str]] = {"2026": "server/discover", "2025": "initialize"}
"""The request that opens a session of each era."""


def version_of(era: Era) -> str:
    """The protocol version a session opened in `era` speaks (``2026-07-28``…)."""
    return _VERSIONS[era]


def check_era(era: object) -> Era:
    """`era` if it is one of `ERAS`, else ValueError naming them."""
    for known in ERAS:
        if era == known:
            return known
    msg = (
        f"the era must be one of {', '.join(ERAS)} (2026-07-28 or the 2025 handshake), not {era!r}"
    )
    raise ValueError(msg)


def era_hint(era: Era) -> str:
    """What to try when calls of `era` that carry no handle are refused or lose state."""
    if era == "2025":
        return ""
    return (
        "\nnote: in the 2026-07-28 era no call carries a protocol session: if the server "
        "mints handles (a tool such as conversation__start), give --handles; for the "
        "initialize handshake's sessions, --era 2025"
    )
