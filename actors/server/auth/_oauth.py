"""OAuth 2.1 for the Streamable HTTP transport: the server as a resource server.

An operator names an issuer (``--oauth-issuer``) and the server's public URL
(``--oauth-resource``); clients bring access tokens (JWTs) the issuer signed
for that URL. `OAuthResource` checks each one (`actors.server.auth._jwt`) and
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
them is that; any other is verified as a JWT (`actors.server.http._app`).

Only `OAuthResource` imports the ``oauth`` extra (PyJWT), when it is built:
a server configured without OAuth never loads it.
"""

from __future__ import annotations

import hashlib
import math
import re
import urllib.parse
from typing import TYPE_CHECKING, Any, Final, final

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.responses import PlainTextResponse

from ._principals import TENANT_CLAIM, AuthRefusal
from ._settings import PROTECTED_RESOURCE_PATH, TENANT_NAME

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from starlette.types import ASGIApp, Receive, Scope, Send

    from ._settings import OAuthSettings

__all__ = [
    "MAX_TOKEN_CHARACTERS",
    "PROTECTED_RESOURCE_PATH",
    "OAuthResource",
]

MAX_TOKEN_CHARACTERS: Final = 8192
"""The longest bearer token read; an access token is a few hundred to a few thousand."""
# RFC 6750 §3: what an error_description may hold.
_DESCRIPTION_UNSAFE: Final = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
# A subject that logs can show as it is; any other is shown by a digest.
_PLAIN_SUBJECT: Final = re.compile(r"[A-Za-z0-9._:@|+=-]{1,128}")
_INVALID_KIND: Final = "a request with a refused OAuth token"
_FORBIDDEN_KIND: Final = "an OAuth token without the tenant or scopes it needs"
_UNAVAILABLE_KIND: Final = "an OAuth token while the issuer's keys cannot be fetched"
_MISSING_KIND: Final = "a request without a valid bearer token"


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
