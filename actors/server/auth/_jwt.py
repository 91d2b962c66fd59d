"""JWT access tokens and the issuer keys that sign them: the ``oauth`` extra's one import.

`JwtVerifier` checks a bearer token the way RFC 9068 and the MCP authorization
spec ask: signed (asymmetric algorithms only, from the operator's list, never
``none`` or an HMAC whose secret a verifier would share), by a key of the
configured issuer's JWK set, with ``iss``, ``aud``, ``exp`` (and ``nbf``/``iat``
when present) right, within a small leeway, and of an access token's type when
the header names one (``typ``: ``at+jwt``, RFC 9068 §4, or the generic ``JWT``;
see `ACCESS_TOKEN_TYPES`). What it returns are the verified claims;
`actors.server.auth._oauth` turns them into a tenant.

Why PyJWT
---------
The MCP SDK (the ``server`` extra) already depends on ``pyjwt[crypto]``, so
the ``oauth`` extra brings no package that is not installed anyway. PyJWT is
maintained, typed, verifies with ``cryptography``, and since 2.13 binds a
`jwt.PyJWK` to one algorithm (the allow-list cannot be bypassed through a
key). Its own `jwt.PyJWKClient` fetches with blocking ``urllib``, which would
stall the event loop: the JWK set is fetched here with httpx2, the SDK's HTTP
client, and handed to PyJWT as a document.

The issuer's keys (`IssuerKeys`)
--------------------------------
* Fetched when first needed (or by `JwtVerifier.prefetch` at startup), from
  ``jwks_url`` or the ``jwks_uri`` of the issuer's metadata (RFC 8414's
  ``/.well-known/oauth-authorization-server``, then OpenID Connect's
  ``openid-configuration``), whose ``issuer`` must be the configured one.
* Each fetch has one deadline for everything (a server that drips its answer
  byte by byte cannot hold it longer), takes no redirect, no compressed body
  (a small gzip bomb would inflate past any bound), and at most
  `MAX_DOCUMENT_BYTES` and `MAX_KEYS`.
* One fetch at a time: requests that need keys while one is under way wait
  for it. A new one starts at most once per ``jwks_refetch_interval``,
  whatever asks: a token naming an unknown ``kid`` (the issuer may have
  rotated its keys) or keys older than ``jwks_max_age``. So a client sending
  random ``kid`` values costs the issuer one request per interval, and its
  tokens are refused at once in between.
* A failed fetch keeps the keys fetched before; with none at all, tokens are
  answered 503 (try again) rather than 401 (get a new token), since a new
  token would not help.
* Keys are filtered: public asymmetric keys (``RSA`` of 2048 bits or more,
  ``EC``, ``OKP``) for signing, whose algorithm is on the list. A symmetric (``oct``) key is never
  used, and a key with private parameters is dropped with a warning: the
  issuer is publishing a secret.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import urllib.parse
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import attrs
import httpx2
import jwt

from .._addresses import is_loopback

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._settings import OAuthSettings

__all__ = [
    "ACCESS_TOKEN_TYPES",
    "MAX_DOCUMENT_BYTES",
    "MAX_KEYS",
    "MIN_RSA_BITS",
    "Invalid",
    "IssuerKeys",
    "JwtVerifier",
    "Unavailable",
    "discovery_urls",
]

logger = logging.getLogger("actors.serve")

MAX_DOCUMENT_BYTES: Final = 256 * 1024
"""The largest JWK set or issuer metadata document read; a real one is a few KB."""
MAX_KEYS: Final = 100
"""The most keys a JWK set may hold (an issuer publishes a handful)."""
MIN_RSA_BITS: Final = 2048
"""The shortest RSA key used (NIST SP 800-131A); a shorter one is ignored."""
ACCESS_TOKEN_TYPES: Final = frozenset({"at+jwt", "application/at+jwt", "jwt"})
"""The header ``typ`` values (compared in lowercase) of a token taken as an access token.

RFC 9068's ``at+jwt`` (``application/`` may prefix it), so that another JWT the
issuer signs with the same keys (a logout token, a security event, a DPoP
proof: ``logout+jwt``, ``secevent+jwt``, ``dpop+jwt``) is never taken for an
access token. A header without ``typ``, or with the generic ``JWT``, is taken
too: many issuers put no ``typ`` on their access tokens, and Keycloak, Entra ID
and Auth0 (unless asked for RFC 9068's profile) put ``JWT`` on them; refusing
those would refuse every token such an issuer signs. An ID token (``JWT``
too) is still refused: its audience is the client, not this server."""

# Each algorithm's key type, and the curves it may use (None: any size of RSA key).
_FAMILIES: Final[Mapping[str, tuple[str, frozenset[str] | None]]] = {
    **{alg: ("RSA", None) for alg in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")},
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}
# Parameters only a private (or symmetric) JWK has (RFC 7518 §6.2.2, §6.3.2, §6.4).
_PRIVATE: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_REQUIRED_CLAIMS: Final = ["exp", "iss", "aud", "sub"]
_SHOWN: Final = 80


def _shown(value: object) -> str:
    """A value from a token or a document, as a message may quote it: repr'd, cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


@final
@attrs.frozen
class Invalid:
    """The token is refused (HTTP 401, ``invalid_token``)."""

    reason: str
    """What is wrong with it, for the client and the log."""


@final
@attrs.frozen
class Unavailable:
    """The issuer's keys cannot be had now (HTTP 503): the token could not be checked."""

    reason: str
    """Why, for the client and the log."""
    retry_after: float
    """Seconds until the keys will be asked for again."""


class _FetchError(Exception):
    """A document could not be fetched or read; the message says what went wrong."""


class _NotThere(_FetchError):
    """The server answered, with another status than 200."""


def _url_problem(url: str) -> str | None:
    """Why `url` may not be fetched for keys (not https, nor http on loopback), or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return None
    return f"{_shown(url)} is not an https URL (http is allowed only on loopback)"


def discovery_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be, in the order the MCP authorization spec tries them.

    RFC 8414 puts ``/.well-known/oauth-authorization-server`` before the
    issuer's path; OpenID Connect puts ``/.well-known/openid-configuration``
    before it too (RFC 8414 §5) or after it (OpenID Connect Discovery §4).
    """
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    urls = [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]
    return list(dict.fromkeys(urls))


async def _get_json(url: str, *, limit: int = MAX_DOCUMENT_BYTES) -> Any:
    """GET `url` and parse its JSON body; `_FetchError` for anything but a small 200 JSON.

    The caller sets the deadline. No redirect is followed (the operator named
    this URL, or the issuer's metadata did), and no compressed body is taken.
    """
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    try:
        async with (
            httpx2.AsyncClient(follow_redirects=False) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if response.status_code != 200:
                msg = f"{url} answered HTTP {response.status_code}"
                raise _NotThere(msg)
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                msg = f"{url} sent a {_shown(encoding)}-encoded body; only identity is read"
                raise _FetchError(msg)
            body = bytearray()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > limit:
                    msg = f"{url} sent more than {limit} bytes"
                    raise _FetchError(msg)
    except (httpx2.HTTPError, httpx2.InvalidURL) as error:
        msg = f"{url}: {type(error).__name__}: {error or 'no detail'}"
        raise _FetchError(msg) from None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        msg = f"{url} sent a body that is not JSON"
        raise _FetchError(msg) from None


def _rsa_bits(key: Mapping[str, Any]) -> int | None:
    """The modulus size of an RSA JWK (0 if unreadable); None for other keys."""
    if key.get("kty") != "RSA":
        return None
    modulus = key.get("n")
    if not isinstance(modulus, str):
        return 0
    try:
        decoded = base64.urlsafe_b64decode(modulus + "=" * (-len(modulus) % 4))
    except ValueError:
        return 0
    return int.from_bytes(decoded, "big").bit_length()


def _fits(key: Mapping[str, Any], alg: str) -> bool:
    """Whether the JWK `key` can verify a token signed with `alg`."""
    family = _FAMILIES.get(alg)
    if family is None:
        return False
    kty, curves = family
    return (
        key.get("kty") == kty
        and (curves is None or key.get("crv") in curves)
        and key.get("alg", alg) == alg
    )


def _signing_keys(document: Any, algorithms: Sequence[str], url: str) -> list[dict[str, Any]]:
    """The keys of a JWK set that can verify tokens signed with one of `algorithms`."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        msg = f"{url} sent no JWK set (a JSON object with a 'keys' array)"
        raise _FetchError(msg)
    keys: list[Any] = document["keys"]
    if len(keys) > MAX_KEYS:
        msg = f"{url} holds {len(keys)} keys; at most {MAX_KEYS} are read"
        raise _FetchError(msg)
    usable: list[dict[str, Any]] = []
    for key in keys:
        if not isinstance(key, dict) or not isinstance(key.get("kid", ""), str):
            continue
        if _PRIVATE & key.keys():
            # Publishing a private or symmetric key lets anyone mint tokens: never use it.
            logger.warning(
                "oauth: %s publishes key %s with private parameters; it is ignored, and the "
                "issuer's operator should rotate it",
                url,
                _shown(key.get("kid")),
            )
            continue
        if key.get("use", "sig") != "sig":
            continue
        bits = _rsa_bits(key)
        if bits is not None and bits < MIN_RSA_BITS:
            logger.warning(
                "oauth: %s: key %s is a %d-bit RSA key, too short to trust (at least %d); "
                "it is ignored",
                url,
                _shown(key.get("kid")),
                bits,
                MIN_RSA_BITS,
            )
            continue
        operations = key.get("key_ops", ["verify"])
        if not isinstance(operations, list) or "verify" not in operations:
            continue
        fitting = [alg for alg in algorithms if _fits(key, alg)]
        if not fitting:
            continue
        try:
            jwt.PyJWK(key, fitting[0])
        except jwt.PyJWTError as error:
            logger.warning("oauth: %s: key %s is unusable: %s", url, _shown(key.get("kid")), error)
            continue
        usable.append(key)
    if not usable:
        msg = f"{url} holds no public signing key for {', '.join(algorithms)}"
        raise _FetchError(msg)
    return usable


@final
class IssuerKeys:
    """The issuer's signing keys: fetched, bounded, cached, refetched at most once per interval.

    See the module docstring for the rules. `fetches` counts the fetches
    started (each one a JWK set request, after a metadata request or a few
    the first time).
    """

    def __init__(self, settings: OAuthSettings) -> None:
        self._settings = settings
        self._jwks_url = settings.jwks_url
        self._keys: list[dict[str, Any]] | None = None
        self._prepared: dict[tuple[int, str], jwt.PyJWK] = {}
        self._fetched_at = -math.inf
        self._attempted_at = -math.inf
        self._failure = "the keys have not been fetched yet"
        self._fetching: anyio.Event | None = None
        self.fetches = 0
        """How many fetches have been started."""

    @property
    def count(self) -> int:
        """How many usable keys are held."""
        return 0 if self._keys is None else len(self._keys)

    async def key(self, kid: str | None, alg: str) -> jwt.PyJWK | Invalid | Unavailable:
        """The key that verifies a token with header `kid` and `alg`, fetching keys if due."""
        found = self._find(kid, alg)
        fresh = anyio.current_time() - self._fetched_at < self._settings.jwks_max_age
        if isinstance(found, jwt.PyJWK) and fresh:
            return found
        await self.refresh()
        found = self._find(kid, alg)
        if found is None:
            return Unavailable(
                f"the issuer's signing keys cannot be fetched: {self._failure}",
                self._retry_after(),
            )
        return found

    async def refresh(self) -> None:
        """Fetch the keys, unless a fetch is under way (then wait for it) or one was started
        less than ``jwks_refetch_interval`` seconds ago."""
        if self._fetching is not None:
            await self._fetching.wait()
            return
        now = anyio.current_time()
        if now - self._attempted_at < self._settings.jwks_refetch_interval:
            return
        self._attempted_at = now
        self.fetches += 1
        done = self._fetching = anyio.Event()
        try:
            # Shielded (and bounded by jwks_timeout): a client that leaves while its request
            # fetches must not waste the one fetch of the interval for the others waiting.
            with anyio.CancelScope(shield=True):
                await self._fetch()
        finally:
            self._fetching = None
            done.set()

    def _retry_after(self) -> float:
        waited = anyio.current_time() - self._attempted_at
        return max(self._settings.jwks_refetch_interval - waited, 1.0)

    async def _fetch(self) -> None:
        timeout = self._settings.jwks_timeout
        where = self._jwks_url or self._settings.issuer
        try:
            with anyio.fail_after(timeout):
                url = self._jwks_url or await self._discover()
                where = url
                keys = _signing_keys(await _get_json(url), self._settings.algorithms, url)
        except TimeoutError:
            self._failed(where, f"{where} gave no answer within {timeout:g} s")
            return
        except _FetchError as error:
            self._failed(where, str(error))
            return
        self._keys = keys
        self._prepared = {}
        self._fetched_at = anyio.current_time()
        logger.info("oauth: %d signing key(s) from %s", len(keys), url)

    def _failed(self, where: str, reason: str) -> None:
        self._failure = reason
        kept = (
            f"keeping the {len(self._keys)} key(s) fetched before"
            if self._keys
            else "tokens are answered 503 until it can"
        )
        logger.warning("oauth: cannot fetch the signing keys (%s): %s; %s", where, reason, kept)

    async def _discover(self) -> str:
        """The ``jwks_uri`` of the issuer's metadata, which must name this issuer."""
        issuer = self._settings.issuer
        answers = []
        for url in discovery_urls(issuer):
            try:
                metadata = await _get_json(url)
            except _NotThere as error:
                # Not at this address; an unreachable issuer (any other error) is not
                # tried further.
                answers.append(str(error))
                continue
            if not isinstance(metadata, dict) or metadata.get("issuer") != issuer:
                named = metadata.get("issuer") if isinstance(metadata, dict) else None
                msg = f"the metadata at {url} is for issuer {_shown(named)}, not {issuer!r}"
                raise _FetchError(msg)
            jwks_uri = metadata.get("jwks_uri")
            problem = (
                "it names no jwks_uri" if not isinstance(jwks_uri, str) else _url_problem(jwks_uri)
            )
            if problem is not None:
                msg = f"the metadata at {url}: {problem}; give the JWK set's URL (--oauth-jwks-url)"
                raise _FetchError(msg)
            assert isinstance(jwks_uri, str)
            logger.info("oauth: the issuer's keys are at %s (from %s)", jwks_uri, url)
            self._jwks_url = jwks_uri
            return jwks_uri
        msg = (
            f"the issuer publishes no metadata ({'; '.join(answers)}); "
            "give the JWK set's URL (--oauth-jwks-url)"
        )
        raise _FetchError(msg)

    def _find(self, kid: str | None, alg: str) -> jwt.PyJWK | Invalid | None:
        """The held key for `kid` and `alg`; Invalid when there is none; None with no keys."""
        if self._keys is None:
            return None
        positions = [
            position
            for position, key in enumerate(self._keys)
            if (kid is None or key.get("kid") == kid) and _fits(key, alg)
        ]
        if not positions:
            if kid is None:
                return Invalid(f"the issuer has no key for {alg} tokens")
            if any(key.get("kid") == kid for key in self._keys):
                return Invalid(f"the issuer's key {_shown(kid)} does not verify {alg} tokens")
            return Invalid(f"the token's key {_shown(kid)} is not one of the issuer's keys")
        if kid is None and len(positions) > 1:
            return Invalid(
                f"the token names no key (no 'kid' in its header), and the issuer has "
                f"{len(positions)} keys for {alg} tokens"
            )
        position = positions[0]
        prepared = self._prepared.get((position, alg))
        if prepared is None:
            try:
                prepared = jwt.PyJWK(self._keys[position], alg)
            except jwt.PyJWTError as error:
                return Invalid(f"the issuer's key {_shown(kid)} is unusable: {error}")
            self._prepared[position, alg] = prepared
        return prepared


def _access_token_type(typ: object) -> bool:
    return isinstance(typ, str) and typ.lower() in ACCESS_TOKEN_TYPES


@final
class JwtVerifier:
    """Checks JWT access tokens against `OAuthSettings`; the claims of a good one."""

    def __init__(self, settings: OAuthSettings) -> None:
        self._settings = settings
        self.keys: Final = IssuerKeys(settings)
        """The issuer's signing keys."""
        self._jwt = jwt.PyJWT(
            options={
                "verify_signature": True,
                "require": _REQUIRED_CLAIMS,
                # A short RSA key is refused, not warned about.
                "enforce_minimum_key_length": True,
            }
        )

    async def prefetch(self) -> None:
        """Fetch the issuer's keys now (at startup), so that a bad setting shows in the log."""
        await self.keys.refresh()

    async def verify(self, token: str) -> dict[str, Any] | Invalid | Unavailable:
        """The verified claims of `token`, or why it was refused or could not be checked."""
        dots = token.count(".")
        if dots != 2:
            if dots == 4:
                return Invalid("the token is encrypted (a JWE); only signed JWTs are accepted")
            return Invalid("the token is not a JWT (three base64url parts separated by '.')")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            return Invalid(f"the token's header cannot be read: {error}")
        if "typ" in header and not _access_token_type(header["typ"]):
            return Invalid(
                f"the token's type (typ {_shown(header['typ'])}) is not an access token's "
                "(at+jwt, RFC 9068)"
            )
        alg = header.get("alg")
        algorithms = self._settings.algorithms
        if alg not in algorithms:
            return Invalid(
                f"the token is signed with {_shown(alg)}; this server accepts only "
                f"{', '.join(algorithms)} (keys of the issuer's JWK set)"
            )
        kid = header.get("kid")
        key = await self.keys.key(kid, alg)
        if not isinstance(key, jwt.PyJWK):
            return key
        try:
            claims: dict[str, Any] = self._jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self._settings.expected_audience,
                issuer=self._settings.issuer,
                leeway=self._settings.leeway,
            )
        except jwt.PyJWTError as error:
            return Invalid(self._why(error, token))
        except (ValueError, TypeError) as error:  # a library's surprise: refuse, never crash
            return Invalid(f"the token cannot be verified: {type(error).__name__}")
        return claims

    def _why(self, error: jwt.PyJWTError, token: str) -> str:
        """What the client is told about a token PyJWT refused."""
        match error:
            case jwt.ExpiredSignatureError():
                return "the token has expired"
            case jwt.ImmatureSignatureError():
                return "the token is not valid yet (nbf or iat in the future)"
            case jwt.InvalidSignatureError():
                return "the token's signature does not verify"
            case jwt.MissingRequiredClaimError(claim=claim):
                return f"the token has no {claim!r} claim"
            case jwt.InvalidAudienceError():
                return (
                    f"the token is not for this server: its audience (aud) is not "
                    f"{self._settings.expected_audience!r}"
                )
            case jwt.InvalidIssuerError():
                issued_by = self._unverified_issuer(token)
                return f"the token was issued by {issued_by}, not by {self._settings.issuer!r}"
            case jwt.InvalidKeyError():
                return f"the issuer's key is not accepted: {error}"
            case _:
                return f"the token is malformed: {error}"

    @staticmethod
    def _unverified_issuer(token: str) -> str:
        """The ``iss`` the token claims (its signature was good; only its issuer was not)."""
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return "another issuer"
        return _shown(claims.get("iss"))
