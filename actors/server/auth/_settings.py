"""The settings of OAuth: which issuer, which resource, which claims and scopes, what leeway.

`OAuthSettings` is what an operator writes (``serve --oauth-…``); it is
checked when the serve options are, and needs nothing of the ``oauth``
extra. What runs with it at request time is in `actors.server.auth._oauth`
(the resource) and `actors.server.auth._jwt` (the tokens).
"""

from __future__ import annotations

import importlib.util
import math
import re
import urllib.parse
from typing import TYPE_CHECKING, Final, final

import attrs

from .._addresses import is_loopback

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["ASYMMETRIC_ALGORITHMS", "PROTECTED_RESOURCE_PATH", "TENANT_NAME", "OAuthSettings"]

PROTECTED_RESOURCE_PATH: Final = "/.well-known/oauth-protected-resource"
"""Where RFC 9728 puts a resource's metadata (followed by the resource's path)."""
ASYMMETRIC_ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
"""The signature algorithms a token may use: public-key ones only. ``none`` is no
signature, and an HMAC (``HS256``…) would need a secret every verifier shares, which
lets any verifier mint tokens."""
TENANT_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""What a tenant's name is: 1-64 letters, digits, ``.``, ``_`` and ``-`` (match it whole)."""
DEFAULT_LEEWAY: Final = 30.0
DEFAULT_JWKS_TIMEOUT: Final = 5.0
DEFAULT_JWKS_REFETCH_INTERVAL: Final = 10.0
DEFAULT_JWKS_MAX_AGE: Final = 600.0
_MAX_LEEWAY: Final = 300.0
# RFC 6749 §3.3: a scope token is printable ASCII without space, '"' and '\'.
_SCOPE: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# Characters RFC 3986 never has in a URL (outside percent-encoding).
_NOT_IN_URLS: Final = re.compile(r'["<>\\^`{|}]')


def _url_problem(flag: str, url: str, what: str) -> str | None:
    """Why `url`, given as `flag`, is not an https URL (or http on loopback), or None."""
    shown = repr(url[:200])
    if (
        not url
        or any(character.isspace() or not character.isprintable() for character in url)
        or _NOT_IN_URLS.search(url)  # also keeps the WWW-Authenticate header well-formed
    ):
        return f"{flag} {shown}: expected a URL such as https://{what}.example.com"
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 -- raises ValueError for a malformed port
    except ValueError:
        return f"{flag} {shown}: the port is not a number from 0 to 65535"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{flag} {shown}: expected an https URL such as https://{what}.example.com"
    if "@" in parts.netloc:
        return f"{flag} {shown}: a URL with a user name or password is not accepted"
    if parts.query or parts.fragment:
        return f"{flag} {shown}: must have no query (?…) or fragment (#…)"
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        return (
            f"{flag} {shown}: must be https; http is accepted only on a loopback host "
            "(localhost, 127.0.0.1, [::1])"
        )
    return None


def _word_problem(flag: str, value: str, pattern: re.Pattern[str], expected: str) -> str | None:
    if pattern.fullmatch(value):
        return None
    return f"{flag} {value[:200]!r}: expected {expected}"


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    """A list given for a tuple field, as a tuple (a string is refused, not split)."""
    if isinstance(values, str):
        msg = f"expected several strings, got the one string {values!r}"
        raise TypeError(msg)
    return tuple(values)


@final
@attrs.frozen(kw_only=True)
class OAuthSettings:
    """How an HTTP server checks OAuth access tokens: JWTs an issuer signed for this server.

    ``ServeOptions(oauth=OAuthSettings(issuer=..., resource=..., tenant_claim=...))``;
    from the command line, the ``--oauth-…`` options. Needs the ``oauth`` extra.
    A token must carry ``iss``, ``aud``, ``exp`` and ``sub``; see
    `actors.server._oauth` for how it maps onto tenants and gateways.
    """

    issuer: str
    """The issuer's identifier, exactly as its tokens' ``iss`` has it (https, or http on
    loopback): ``https://auth.example.com/realms/mcp``."""
    resource: str
    """This server's MCP endpoint as clients reach it: ``https://mcp.example.com/mcp``.
    The metadata document names it, and it is the default audience."""
    audience: str | None = None
    """The ``aud`` a token must carry; ``None``: `resource` (RFC 8707). Some issuers use
    another identifier for an API (``api://mcp``)."""
    jwks_url: str | None = None
    """The issuer's JWK set; ``None``: the ``jwks_uri`` of its metadata
    (``/.well-known/oauth-authorization-server`` or ``openid-configuration``)."""
    tenant_claim: str | None = None
    """The claim naming a token's tenant (``tenant``, ``org_id``,
    ``https://example.com/tenant``: a top-level claim, the name taken as it is)."""
    gateway_scope: str | None = None
    """The scope that makes a token without a tenant claim a trusted gateway (any
    session); ``None``: such tokens are refused."""
    required_scopes: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    """Scopes every token must carry (``scope`` or ``scp`` claim)."""
    algorithms: tuple[str, ...] = attrs.field(default=ASYMMETRIC_ALGORITHMS, converter=_strings)
    """The signature algorithms accepted, some of `ASYMMETRIC_ALGORITHMS`."""
    leeway: float = DEFAULT_LEEWAY
    """Seconds of clock difference allowed around ``exp``, ``nbf`` and ``iat``."""
    jwks_timeout: float = DEFAULT_JWKS_TIMEOUT
    """Seconds one fetch of the issuer's keys (metadata included) may take, in all."""
    jwks_refetch_interval: float = DEFAULT_JWKS_REFETCH_INTERVAL
    """The least time between two fetches of the keys, whatever asks for them (a token
    with an unknown ``kid``, keys past `jwks_max_age`, a failed fetch)."""
    jwks_max_age: float = DEFAULT_JWKS_MAX_AGE
    """Seconds after which the keys are fetched again (a removed key stops working)."""

    @property
    def expected_audience(self) -> str:
        """The ``aud`` a token must carry: `audience`, or else `resource`."""
        return self.resource if self.audience is None else self.audience

    @property
    def metadata_url(self) -> str:
        """Where clients read this resource's metadata (RFC 9728 §3.1): the well-known
        path inserted between `resource`'s host and its path."""
        parts = urllib.parse.urlsplit(self.resource)
        path = "" if parts.path == "/" else parts.path
        return f"{parts.scheme}://{parts.netloc}{PROTECTED_RESOURCE_PATH}{path}"

    def check(self) -> None:
        """Raise ValueError naming the first setting (by its option) that is wrong."""
        problems = [
            _url_problem("--oauth-issuer", self.issuer, "auth"),
            _url_problem("--oauth-resource", self.resource, "mcp"),
            None
            if self.jwks_url is None
            else _url_problem("--oauth-jwks-url", self.jwks_url, "auth"),
            *self._word_problems(),
            *self._number_problems(),
        ]
        for problem in problems:
            if problem is not None:
                raise ValueError(problem)
        if self.tenant_claim is None and self.gateway_scope is None:
            msg = (
                "--oauth-issuer needs --oauth-tenant-claim CLAIM (each token bound to the tenant "
                "its claim names) or --oauth-gateway-scope SCOPE (tokens with that scope may "
                "address any session), or both"
            )
            raise ValueError(msg)
        if any(importlib.util.find_spec(name) is None for name in ("jwt", "cryptography")):
            msg = "--oauth-issuer needs PyJWT with cryptography: pip install 'mcp-actors[oauth]'"
            raise ValueError(msg)

    def _word_problems(self) -> Iterable[str | None]:
        audience = self.expected_audience
        if not audience or not audience.isprintable() or len(audience) > 1000:
            yield f"--oauth-audience {audience[:200]!r}: expected the printable aud of the tokens"
        if self.tenant_claim is not None and (
            not self.tenant_claim.isprintable() or not 1 <= len(self.tenant_claim) <= 200
        ):
            yield f"--oauth-tenant-claim {self.tenant_claim[:200]!r}: expected a claim's name"
        scopes = [("--oauth-required-scope", scope) for scope in self.required_scopes]
        if self.gateway_scope is not None:
            scopes.append(("--oauth-gateway-scope", self.gateway_scope))
        for flag, scope in scopes:
            yield _word_problem(flag, scope, _SCOPE, "a scope: printable ASCII without spaces")
        if not self.algorithms:
            yield "--oauth-algorithm: at least one algorithm must be accepted"
        for algorithm in self.algorithms:
            if algorithm not in ASYMMETRIC_ALGORITHMS:
                yield (
                    f"--oauth-algorithm {algorithm[:40]!r}: only public-key algorithms are "
                    f"accepted ({', '.join(ASYMMETRIC_ALGORITHMS)}); with HMAC every verifier "
                    "could mint tokens, and 'none' is no signature"
                )

    def _number_problems(self) -> Iterable[str | None]:
        if not 0 <= self.leeway <= _MAX_LEEWAY:
            yield f"OAuthSettings.leeway must be from 0 to {_MAX_LEEWAY:g} s, got {self.leeway}"
        for name, value in (
            ("jwks_timeout", self.jwks_timeout),
            ("jwks_refetch_interval", self.jwks_refetch_interval),
            ("jwks_max_age", self.jwks_max_age),
        ):
            if not 0 < value < math.inf:
                yield f"OAuthSettings.{name} must be a positive number of seconds, got {value}"

    def describe(self) -> str:
        """One line for the startup log: issuer, audience, keys, tenants, gateways, scopes."""
        claim = self.tenant_claim
        tenants = "no tenant claim" if claim is None else f"tenant claim {claim!r}"
        gateways = (
            "no gateways"
            if self.gateway_scope is None
            else f"gateways by scope {self.gateway_scope!r}"
        )
        parts = [
            f"issuer {self.issuer}",
            f"audience {self.expected_audience!r}",
            f"keys {self.jwks_url or 'from the issuer metadata'}",
            tenants,
            gateways,
        ]
        if self.required_scopes:
            parts.append(f"required scopes {' '.join(self.required_scopes)}")
        return ", ".join(parts)
