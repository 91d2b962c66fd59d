"""Conversation handles: what a server mints so that a client that names no session keeps one.

The 2026-07-28 revision of MCP has no protocol sessions: state that spans calls travels in
a *handle* the server mints and the model passes back as an ordinary tool argument. A
handle here is ``conv_`` and 56 characters of base64url over 42 bytes:

``version (1) | key id (4) | minted at, in seconds (5) | nonce (16) | tag (16)``

* The nonce, 128 random bits, is what makes a handle unguessable; the conversation's
  session is derived from it alone (`session_of`), so a handle keeps naming one
  conversation whichever key signed it.
* The tag is an HMAC-SHA256 (truncated to 128 bits) under the operator's key over the
  other parts *and the tenant of the caller that minted it*. The tenant is not written in
  the handle: a verifier computes the tag for its own caller's tenant, so another
  tenant's handle fails exactly as a forged one does, and a handle tells nobody whose it is.
* Any front or worker that holds the keys verifies a handle alone: there is no table.
  `HandleKeys` holds several keys: the first mints, every one verifies, so a key is
  rotated by putting the new one first and dropping the old one after a handle lifetime.

Sans-IO: the clock is given (`HandleKeys.clock`), and `mint` takes the nonce's source.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
import urllib.parse
from typing import TYPE_CHECKING, Final, Protocol, final

import attrs

from ._errors import ContextError
from ._scope import TENANT_SEPARATOR

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "DEFAULT_LIFETIME",
    "HANDLE_ARGUMENT",
    "HANDLE_PREFIX",
    "HANDLE_REQUIRED",
    "HANDLE_TOOL",
    "HandleError",
    "HandleKeys",
    "HandleReader",
    "HandleRequiredError",
    "handle_in_uri",
    "redacted_uri",
    "shown_handle",
]

HANDLE_ARGUMENT: Final = "conversation"
"""The argument (and resource query parameter) that carries a handle."""
HANDLE_TOOL: Final = "conversation__start"
"""The tool a model calls to start a conversation and get its handle."""
HANDLE_PREFIX: Final = "conv_"
"""What every handle starts with (then 56 characters of base64url)."""
MIN_KEY_LENGTH: Final = 32
"""The shortest key accepted, in bytes: a tag is only as strong as its key."""
DEFAULT_LIFETIME: Final = 30 * 24 * 3600.0
"""How long a handle is valid after it is minted, in seconds: as long as state unused is kept."""

_VERSION: Final = 1
_KEY_ID: Final = 4
_MINTED: Final = 5
_NONCE: Final = 16
_TAG: Final = 16
_SIGNED: Final = 1 + _KEY_ID + _MINTED + _NONCE  # the bytes the tag covers, before it
_SIZE: Final = _SIGNED + _TAG
_TEXT: Final = len(HANDLE_PREFIX) + (_SIZE * 4 + 2) // 3  # base64url, unpadded: 56 + 5
_VERIFIED_KEPT: Final = 4096  # handles whose tag was checked, kept (about 1 MiB)
_DAY: Final = 86400.0
_CLOCK_SKEW: Final = 300.0  # seconds a handle may seem minted in the future (fronts' clocks)
_DOMAIN: Final = b"mcp-actors conversation handle\x00"
_SESSION_DOMAIN: Final = b"mcp-actors conversation session\x00"
_SESSION_PREFIX: Final = "c-"
_SHOWN: Final = 9  # characters of a handle an error or a log may show: its prefix and 4 more
_FORM: Final = re.compile(rf"{HANDLE_PREFIX}[A-Za-z0-9_-]{{{_TEXT - len(HANDLE_PREFIX)}}}")
_START_ANEW: Final = (
    f"call {HANDLE_TOOL} to start a new conversation, and pass the handle it returns as "
    f"{HANDLE_ARGUMENT!r} in every call of that conversation"
)
_NAMES_NO_CONVERSATION: Final = (
    "this call reaches state kept per conversation and names no conversation"
)
# Built from parts so that the reference, which shows a constant's value, fits its page.
HANDLE_REQUIRED: Final = f"{_NAMES_NO_CONVERSATION}: {_START_ANEW}"
"""What a stateful call that names no session and carries no handle is told."""


class HandleError(ContextError):
    """A call carried a handle that is malformed, forged, expired or another tenant's."""


class HandleRequiredError(ContextError):
    """A call of a stateful tool named no session and carried no handle, where one is needed."""


def shown_handle(text: str) -> str:
    """How much of a would-be handle a message may show: never enough to use it."""
    return repr(text[:_SHOWN] + "…") if len(text) > _SHOWN else repr(text)


class HandleReader(Protocol):
    """What reads a handle into its conversation's session for a caller of `tenant`."""

    def session_for(self, handle: object, tenant: str | None) -> str:
        """The session `handle` names for a caller of `tenant`; raises HandleError if none."""
        ...


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(b"key id\x00" + key).digest()[:_KEY_ID]


def _tenant_bytes(tenant: str | None) -> bytes:
    # None and "" must differ, and a tenant's bytes must not run into the next field.
    if tenant is None:
        return b"\x00"
    encoded = tenant.encode()
    return b"\x01" + len(encoded).to_bytes(4, "big") + encoded


def _tag(key: bytes, signed: bytes, tenant: str | None) -> bytes:
    message = _DOMAIN + _tenant_bytes(tenant) + signed
    return hmac.digest(key, message, "sha256")[:_TAG]


def session_of(nonce: bytes, tenant: str | None) -> str:
    """The session of the conversation whose handle carries `nonce`, for `tenant`.

    A hash of the nonce, not the nonce: the session shows in logs and stores, and a
    handle cannot be rebuilt from it.
    """
    digest = hashlib.sha256(_SESSION_DOMAIN + nonce).digest()[:16]
    name = _SESSION_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    return name if tenant is None else tenant + TENANT_SEPARATOR + name


def _checked_keys(keys: Sequence[bytes]) -> tuple[bytes, ...]:
    if not keys:
        msg = "conversation handles need at least one key"
        raise ValueError(msg)
    for index, key in enumerate(keys):
        if len(key) < MIN_KEY_LENGTH:
            msg = (
                f"handle key {index + 1} is {len(key)} bytes long; a key must have at least "
                f"{MIN_KEY_LENGTH} (for example: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')"
            )
            raise ValueError(msg)
    return tuple(keys)


@final
@attrs.frozen
class HandleKeys:
    """The operator's handle keys: the first mints, every one verifies (rotation)."""

    keys: tuple[bytes, ...] = attrs.field(converter=_checked_keys)
    """The secrets, each of at least 32 bytes; the first signs new handles."""
    clock: Callable[[], float]
    """Seconds since the epoch, now (``time.time``): when a handle is minted and checked."""
    lifetime: float = DEFAULT_LIFETIME
    """How long a handle is valid after it is minted, in seconds."""
    _by_id: dict[bytes, bytes] = attrs.field(init=False, repr=False, eq=False)
    _verified: Callable[[str, str | None], tuple[str, int]] = attrs.field(
        init=False, repr=False, eq=False
    )

    def __attrs_post_init__(self) -> None:
        by_id = {_key_id(key): key for key in reversed(self.keys)}  # the first key's id wins
        object.__setattr__(self, "_by_id", by_id)
        # A conversation's calls carry one handle again and again: its tag is checked once.
        # Only handles that verify are kept (an error is not cached), so what fills the
        # cache costs its sender a conversation__start each; a full one only re-verifies.
        verified = functools.lru_cache(maxsize=_VERIFIED_KEPT)(self._verify)
        object.__setattr__(self, "_verified", verified)

    def mint(self, tenant: str | None, nonce: Callable[[int], bytes] = secrets.token_bytes) -> str:
        """A new conversation's handle, bound to `tenant` (the minting caller's, or None)."""
        key = self.keys[0]
        minted = int(self.clock()).to_bytes(_MINTED, "big")
        signed = bytes((_VERSION,)) + _key_id(key) + minted + nonce(_NONCE)
        raw = signed + _tag(key, signed, tenant)
        return HANDLE_PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def session_for(self, handle: object, tenant: str | None) -> str:
        """The session `handle` names for a caller of `tenant`.

        Raises HandleError when it is not a handle this server mints, when no key of
        this server signed it for `tenant` (forged, unknown key, another tenant's: one
        answer for all three), or when it expired.
        """
        if type(handle) is not str:  # a str subclass could hash and compare as it likes
            kind = type(handle).__name__
            msg = f"{HANDLE_ARGUMENT!r} must be a string, got {kind}: {_START_ANEW}"
            raise HandleError(msg)
        session, minted = self._verified(handle, tenant)
        age = self.clock() - minted
        if age > self.lifetime:
            days = self.lifetime / _DAY
            shown = shown_handle(handle)
            msg = f"conversation {shown} has expired (a handle lasts {days:g} days): {_START_ANEW}"
            raise HandleError(msg)
        if age < -_CLOCK_SKEW:
            # Signed by a front whose clock is ahead of this one's by more than the skew.
            shown = shown_handle(handle)
            msg = (
                f"conversation {shown} was minted {-age:.0f} s from now by this server's "
                f"clock (the servers' clocks disagree): {_START_ANEW}"
            )
            raise HandleError(msg)
        return session

    def _verify(self, handle: str, tenant: str | None) -> tuple[str, int]:
        """(session, minted at) of a handle tagged by one of the keys for `tenant`."""
        raw = _decoded(handle)
        key = self._by_id.get(raw[1 : 1 + _KEY_ID])
        signed = raw[:_SIGNED]
        if key is None or not hmac.compare_digest(_tag(key, signed, tenant), raw[_SIGNED:]):
            msg = f"this server knows no conversation {shown_handle(handle)}: {_START_ANEW}"
            raise HandleError(msg)
        minted = int.from_bytes(raw[1 + _KEY_ID : 1 + _KEY_ID + _MINTED], "big")
        return session_of(raw[1 + _KEY_ID + _MINTED : _SIGNED], tenant), minted


def _decoded(handle: object) -> bytes:
    """The bytes of a well-formed handle; HandleError naming what is wrong otherwise."""
    if not isinstance(handle, str):
        msg = f"{HANDLE_ARGUMENT!r} must be a string, got {type(handle).__name__}: {_START_ANEW}"
        raise HandleError(msg)
    # One alphabet, one length: a handle has one spelling (no '+', '/', padding or junk).
    if _FORM.fullmatch(handle) is None:
        msg = (
            f"{shown_handle(handle)} is not a conversation handle (those are "
            f"{HANDLE_PREFIX!r} and {_TEXT - len(HANDLE_PREFIX)} characters of base64url): "
            f"{_START_ANEW}"
        )
        raise HandleError(msg)
    raw = base64.urlsafe_b64decode(handle[len(HANDLE_PREFIX) :])
    if raw[0] != _VERSION:
        msg = f"{shown_handle(handle)} is a conversation handle of another version: {_START_ANEW}"
        raise HandleError(msg)
    return raw


def handle_in_uri(uri: str) -> tuple[str, str | None]:
    """`uri` without its ``conversation`` query parameter, and that parameter's value.

    (uri, None) when it has none; HandleError when it has it twice.
    """
    base, mark, query = uri.partition("?")
    if not mark:
        return uri, None
    pairs = query.split("&")
    found = [pair for pair in pairs if pair.partition("=")[0] == HANDLE_ARGUMENT]
    if not found:
        return uri, None
    if len(found) > 1:
        msg = f"the URI names {len(found)} conversations; give {HANDLE_ARGUMENT}= once"
        raise HandleError(msg)
    kept = [pair for pair in pairs if pair not in found]
    handle = urllib.parse.unquote(found[0].partition("=")[2])
    return base + ("?" + "&".join(kept) if kept else ""), handle


def redacted_uri(uri: str) -> str:
    """`uri` as a log may show it: a ``conversation`` query value cut to `shown_handle`'s."""
    base, mark, query = uri.partition("?")
    if not mark or HANDLE_ARGUMENT not in query:
        return uri
    pairs = []
    for pair in query.split("&"):
        name, equals, value = pair.partition("=")
        pairs.append(f"{name}={value[:_SHOWN]}…" if equals and name == HANDLE_ARGUMENT else pair)
    return f"{base}?{'&'.join(pairs)}"
