"""Who sends an HTTP request: its bearer token's principal and tenant, or why it is refused.

A request's token (static, `actors.server.http._app`, or OAuth,
`actors.server.auth._oauth`) becomes an `AccessToken`; `principal_of` names
its holder — a `Principal`, the label and tenant that own the sessions it
opens, the events stored for them and the share of every fair cap it counts
against (`actors.server._fair_shares`). An `Authenticator` checks a token;
an `AuthRefusal` is its answer when the token will not do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol, final

import attrs
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

from .._fair_shares import ANONYMOUS, Principal

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from starlette.types import Scope

__all__ = [
    "NO_VALID_TOKEN",
    "TENANT_CLAIM",
    "AuthRefusal",
    "Authenticator",
    "access_token_of",
    "principal_of",
    "scope_principal",
]


TENANT_CLAIM: Final = "dev.mcp-actors/tenant"
"""The claim of a bearer token's `AccessToken` that names the tenant it is bound to."""


NO_VALID_TOKEN: Final = "a request without a valid bearer token"
"""The `RefusalLog` kind of a request whose token is missing or unknown."""


def access_token_of(scope: Scope) -> AccessToken | None:
    """The bearer token the gate accepted for the request `scope`; None without one."""
    user = scope.get("user")
    return user.access_token if isinstance(user, AuthenticatedUser) else None


@final
@attrs.frozen
class AuthRefusal:
    """Why a request's bearer token was refused, and the HTTP answer that says so."""

    status: int
    """401 (no valid token), 403 (a valid one without what is required) or 503 (it
    cannot be checked now)."""
    message: str
    """The JSON-RPC error's message: what is wrong and what to send."""
    headers: tuple[tuple[str, str], ...] = ()
    """``WWW-Authenticate``, ``Retry-After``."""
    kind: str = NO_VALID_TOKEN
    """How `RefusalLog` counts it."""
    detail: str = ""
    """What the log adds to the kind (never the token)."""


class Authenticator(Protocol):
    """What checks the bearer token of each request the gate lets through."""

    async def authenticate(self, authorization: str | None) -> AccessToken | AuthRefusal:
        """The token's `AccessToken` from an ``Authorization`` header value (``None``:
        no such header), or why the request is refused."""
        ...


def scope_principal(scope: Scope) -> Principal:
    """Whose sessions a request counts against: its token's, or every anonymous client's."""
    return principal_of(access_token_of(scope))


def principal_of(token: AccessToken | None) -> Principal:
    """Who sends a request with `token` (None: an anonymous one): its label and its tenant.

    The owner of the sessions it opens, and of the events stored for them.
    """
    if token is None:
        return Principal(ANONYMOUS)
    tenant = (token.claims or {}).get(TENANT_CLAIM)
    return Principal(token.client_id, tenant if isinstance(tenant, str) else None)
