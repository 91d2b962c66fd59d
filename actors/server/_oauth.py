"""OAuth 2.1 for the Streamable HTTP transport: the server as a resource server.

An operator names an issuer (``--oauth-issuer``) and the server's public URL
(``--oauth-resource``); clients bring access tokens (JWTs) the issuer signed
for that URL. `OAuthResource` checks each one (`actors.server._jwt`) and
turns it into the same `AccessToken` a static token becomes, so the gate, the
sessions-per-token table and the tenant rule (`protocol.Caller`) treat both
alike:

* **Tenant.** With ``tenant_claim``, a token is bound to the tenant its claim
  names (``{"tenant": "acme"}`` → the sessions ``acme`` and ``acme/…``). A
  token without the claim is a trusted gateway only when it carries
  ``gateway_scope``; otherwise it is refused (403). Being a gateway is always
  something the operator configured and the issuer granted, never what a
  token gets by leaving a claim out (``docs/concepts/security.md``, "Trust").
  A token that names a tenant is bound to it, whatever scopes it carries.
* **Scopes.** Every scope of ``required_scopes`` must be in the token's
  ``scope`` (space-separated) or ``scp`` claim, or the request is refused
  with 403 ``insufficient_scope``.
* **Who.** A token's principal (the sessions it may reach, what it counts
  against ``--max-sessions-per-token``) is its subject in its tenant,
  ``oauth:<tenant>/<sub>`` (a gateway's: ``oauth:<sub>``): a refreshed token
  reaches the HTTP sessions the old one opened, and the same subject in
  another tenant reaches none of them.
* **Discovery.** The RFC 9728 protected-resource metadata is served at
  ``/.well-known/oauth-protected-resource`` and at the same path followed by
  the MCP endpoint's path (as the MCP authorization spec has clients ask);
  every 401 carries ``WWW-Authenticate: Bearer … resource_metadata="…"``, with
  ``error="invalid_token"`` when a token was sent and refused.

Static tokens (``--token``) still work beside OAuth: a token that is one of
them is that; any other is verified as a JWT (`actors.server._http`).

Only `OAuthResource` imports the ``oauth`` extra (PyJWT), when it is built:
a server configured without OAuth never loads it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import urllib.parse
from typing import TYPE_CHECKING, Any, Final, final

import attrs
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.responses import PlainTextResponse

from ._gate import TENANT_CLAIM, AuthRefusal
from ._options import is_loopback

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "MAX_TOKEN_CHARACTERS",
    "PROTECTED_RESOURCE_PATH",
    "TENANT_NAME",
    "OAuthResource",
    "OAuthSettings",
]

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
PROTECTED_RESOURCE_PATH: Final = "/.well-known/oauth-protected-resource"
"""Where RFC 9728 puts a resource's metadata (followed by the resource's path)."""
MAX_TOKEN_CHARACTERS: Final = 8192
"""The longest bearer token read; an access token is a few hundred to a few thousand."""
TENANT_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""What a tenant's name is: 1-64 letters, digits, ``.``, ``_`` and ``-`` (match it whole)."""
DEFAULT_LEEWAY: Final = 30.0
DEFAULT_JWKS_TIMEOUT: Final = 5.0
DEFAULT_JWKS_REFETCH_INTERVAL: Final = 10.0
DEFAULT_JWKS_MAX_AGE: Final = 600.0
_MAX_LEEWAY: Final = 300.0
# RFC 6749 §3.3: a scope token is printable ASCII without space, '"' and '\'.
_SCOPE: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# RFC 6750 §3: what an error_description may hold.
_DESCRIPTION_UNSAFE: Final = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
# Characters RFC 3986 never has in a URL (outside percent-encoding).
_NOT_IN_URLS: Final = re.compile(r'["<>\\^`{|}]')
# A subject that logs can show as it is; any other is shown by a digest.
_PLAIN_SUBJECT: Final = re.compile(r"[A-Za-z0-9._:@|+=-]{1,128}")
_INVALID_KIND: Final = "a request with a refused OAuth token"
_FORBIDDEN_KIND: Final = "an OAuth token without the tenant or scopes it needs"
_UNAVAILABLE_KIND: Final = "an OAuth token while the issuer's keys cannot be fetched"
_MISSING_KIND: Final = "a request without a valid bearer token"


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


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    """A token's scopes: its ``scope`` claim (space-separated), or ``scp`` (a list or string)."""
    found: list[str] = []
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found += value.split()
        elif isinstance(value, list):
            found += [scope for scope in value if isinstance(scope, str)]
    return list(dict.fromkeys(found))


def _label(subject: str, tenant: str | None) -> str:
    """How logs and the session table name a token's principal: ``oauth:<tenant>/<sub>``,
    or ``oauth:<sub>`` for a gateway's (neither a tenant's name nor a plain subject has a
    ``/``: the two cannot be confused)."""
    shown = subject
    if not _PLAIN_SUBJECT.fullmatch(subject):
        shown = f"#{hashlib.sha256(subject.encode()).hexdigest()[:16]}"
    return f"oauth:{shown}" if tenant is None else f"oauth:{tenant}/{shown}"


def _description(text: str) -> str:
    """`text` as an RFC 6750 ``error_description`` may carry it."""
    return _DESCRIPTION_UNSAFE.sub("?", text.replace('"', "'"))[:300]


@final
class OAuthResource:
    """A server's OAuth side at run time: access tokens into `AccessToken`s, the
    metadata document, and the ``WWW-Authenticate`` challenge of its refusals."""

    def __init__(self, settings: OAuthSettings) -> None:
        # The oauth extra, imported only by a server configured with OAuth.
        from ._jwt import JwtVerifier

        self.settings: Final = settings
        """What this resource was built from."""
        self.verifier: Final = JwtVerifier(settings)
        """The JWT checker, with the issuer's keys."""

    async def prefetch(self) -> None:
        """Fetch the issuer's keys now, so that the log says at startup whether it can."""
        await self.verifier.prefetch()

    async def authenticate(self, token: str | None) -> AccessToken | AuthRefusal:
        """The `AccessToken` for a bearer `token` (``None``: none was sent), or the refusal."""
        from ._jwt import Invalid

        if token is None:
            message = (
                "a valid bearer token is required: send 'Authorization: Bearer <token>' with an "
                f"access token of {self.settings.issuer} for {self.settings.expected_audience} "
                f"(see {self.settings.metadata_url})"
            )
            return AuthRefusal(401, message, self._challenge_headers(), kind=_MISSING_KIND)
        if len(token) > MAX_TOKEN_CHARACTERS:
            reason = (
                f"the token has {len(token)} characters; at most {MAX_TOKEN_CHARACTERS} are read"
            )
            return self._invalid(reason)
        verdict = await self.verifier.verify(token)
        if isinstance(verdict, Invalid):
            return self._invalid(verdict.reason)
        if not isinstance(verdict, dict):
            message = (
                f"the bearer token cannot be checked now: {verdict.reason}; try again in "
                f"{math.ceil(verdict.retry_after)} s"
            )
            headers = (("Retry-After", str(math.ceil(verdict.retry_after))),)
            return AuthRefusal(503, message, headers, _UNAVAILABLE_KIND, verdict.reason)
        return self.access_token(token, verdict)

    def access_token(self, token: str, claims: Mapping[str, Any]) -> AccessToken | AuthRefusal:
        """The `AccessToken` of a verified token's `claims`: its tenant (or none, for a
        gateway), scopes and principal; a 403 when it lacks what this server requires."""
        settings = self.settings
        scopes = _scopes(claims)
        missing = [scope for scope in settings.required_scopes if scope not in scopes]
        if missing:
            reason = f"the token lacks the scope(s) {' '.join(missing)} this server requires"
            return self._forbidden(reason, " ".join(settings.required_scopes))
        tenant = None if settings.tenant_claim is None else claims.get(settings.tenant_claim)
        if tenant is not None:
            if not isinstance(tenant, str) or not TENANT_NAME.fullmatch(tenant):
                reason = (
                    f"the token's claim {settings.tenant_claim!r} is not a tenant name (1-64 "
                    f"letters, digits, '.', '_' or '-'): {repr(tenant)[:80]}"
                )
                return self._forbidden(reason)
        elif settings.gateway_scope is None or settings.gateway_scope not in scopes:
            return self._forbidden(self._no_tenant(), settings.gateway_scope)
        subject = str(claims["sub"])
        bound = {"iss": settings.issuer}
        if tenant is not None:
            bound[TENANT_CLAIM] = tenant
        return AccessToken(
            token=token,
            # The SDK's own session-owner check compares client_id, issuer and subject:
            # the tenant must be in one of them, or beta's "alice" would own alpha's.
            client_id=_label(subject, tenant),
            scopes=scopes,
            expires_at=int(claims["exp"]),
            resource=settings.expected_audience,
            subject=subject,
            claims=bound,
        )

    def _no_tenant(self) -> str:
        claim, scope = self.settings.tenant_claim, self.settings.gateway_scope
        if claim is None:
            return f"this server takes gateway tokens only, and the token lacks the scope {scope!r}"
        if scope is None:
            return f"the token names no tenant: this server needs its claim {claim!r}"
        return f"the token names no tenant (claim {claim!r}) and is no gateway's (scope {scope!r})"

    def challenge(
        self, error: str | None = None, description: str | None = None, scope: str | None = None
    ) -> str:
        """The ``WWW-Authenticate`` value of a refusal: RFC 6750's Bearer challenge with
        RFC 9728's ``resource_metadata``, and the required scopes unless `scope` says others."""
        scope = scope or " ".join(self.settings.required_scopes)
        parts = ['realm="mcp"']
        if error is not None:
            parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{_description(description)}"')
        if scope:
            parts.append(f'scope="{scope}"')
        parts.append(f'resource_metadata="{self.settings.metadata_url}"')
        return "Bearer " + ", ".join(parts)

    def _challenge_headers(
        self, error: str | None = None, description: str | None = None, scope: str | None = None
    ) -> tuple[tuple[str, str], ...]:
        return (("WWW-Authenticate", self.challenge(error, description, scope)),)

    def _invalid(self, reason: str) -> AuthRefusal:
        message = f"the bearer token was refused: {reason}"
        headers = self._challenge_headers("invalid_token", reason)
        return AuthRefusal(401, message, headers, _INVALID_KIND, reason)

    def _forbidden(self, reason: str, scope: str | None = None) -> AuthRefusal:
        message = f"the bearer token was refused: {reason}"
        headers = self._challenge_headers("insufficient_scope", reason, scope)
        return AuthRefusal(403, message, headers, _FORBIDDEN_KIND, reason)

    def metadata(self) -> ProtectedResourceMetadata:
        """This resource's RFC 9728 metadata: its URL, its issuer, the scopes it requires."""
        return ProtectedResourceMetadata.model_validate(
            {
                "resource": self.settings.resource,
                "authorization_servers": [self.settings.issuer],
                "scopes_supported": list(self.settings.required_scopes) or None,
                "resource_name": "mcp-actors",
            }
        )

    def routes(self, app: ASGIApp, endpoint_path: str) -> ASGIApp:
        """`app` with the metadata document answered in front of it, without a token.

        At ``/.well-known/oauth-protected-resource``, that path followed by
        `endpoint_path` (where the MCP spec has clients look for the endpoint's
        document), and followed by the path of the configured resource URL (when
        a proxy serves the endpoint under another path).
        """
        handler = ProtectedResourceMetadataHandler(self.metadata())
        resource_path = urllib.parse.urlsplit(self.settings.metadata_url).path
        paths = {PROTECTED_RESOURCE_PATH, PROTECTED_RESOURCE_PATH + endpoint_path, resource_path}
        return _MetadataRoutes(app, cors_middleware(handler.handle, ["GET", "OPTIONS"]), paths)


@final
class _MetadataRoutes:
    """ASGI: the metadata document at its paths, everything else (lifespan too) to `app`."""

    def __init__(self, app: ASGIApp, document: ASGIApp, paths: Iterable[str]) -> None:
        self._app = app
        self._document = document
        self._paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self._paths:
            await self._app(scope, receive, send)
        elif scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self._document(scope, receive, send)
        else:
            allow = {"Allow": "GET, HEAD, OPTIONS"}
            await PlainTextResponse("use GET\n", status_code=405, headers=allow)(
                scope, receive, send
            )
