"""Who sent a call, and the rules that follow from it: default sessions and tenants.

A transport knows who is calling — the stdio parent, an HTTP client with or
without a bearer token — and the context a call claims is judged by that:

* **Default session.** A call that names no session gets the caller's
  transport session (the Streamable HTTP ``Mcp-Session-Id`` of older-era
  clients), prefixed with the caller's tenant if it has one; failing that, a
  tenant caller gets ``<tenant>/<default session>`` under the lenient policy
  (the tenant's own bucket). The sole client of a transport (the stdio
  parent, an embedding program) gets what the context policy decides. Any
  other caller is refused: its default would be one session shared by every
  such client, and one client's state must never turn up in another's calls.
* **Tenant.** A caller bound to tenant ``T`` may only name sessions ``T`` or
  ``T/…`` (`tenant_of`).
* **Handles.** Where the server mints conversation handles (`handles`), a call that
  names no session runs in the conversation of the handle it carries, then in its
  transport session; a stateful call with neither is refused (`HandleRequiredError`).
  A handle is bound to the tenant that minted it, so it cannot leave the tenant.
* **Channel.** A session named in ``_meta`` comes from the host; one named in
  the arguments (``__sessionId``) may come from the model, which writes them.
  A caller whose arguments may not name sessions (`arguments_may_name_sessions`
  false: the stdio parent, unless the operator allows it) stays in its own
  session whatever the model writes: arguments may name that one only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

import attrs

from ._errors import ContextError
from ._scope import TENANT_SEPARATOR, tenant_of

if TYPE_CHECKING:
    from ._context import ContextPolicy, SessionSource, ToolContext
    from ._handles import HandleReader

__all__ = ["Caller", "ConfinedError", "NoSessionError", "ReachError", "TenantError", "in_tenant"]


class ReachError(ContextError):
    """A call named a session its caller may not reach: the log names the session."""

    def __init__(self, message: str, context: ToolContext | None = None) -> None:
        super().__init__(message)
        self.context = context
        """The context the call named, for the log line that reports the refusal."""


class TenantError(ReachError):
    """A caller bound to a tenant named a session outside it."""


class ConfinedError(ReachError):
    """A call's arguments named a session other than its caller's own, where they may not."""


class NoSessionError(ContextError):
    """A call named no session where a default one would be shared between clients."""


def in_tenant(session_id: str, tenant: str) -> bool:
    """Whether a caller bound to `tenant` may address `session_id`: ``T`` itself or ``T/…``."""
    return tenant_of(session_id) == tenant


_NO_SESSION: Final = (
    "this call names no session, and without an Mcp-Session-Id every client of this "
    "server would share one; name it in _meta.sessionId (or the __sessionId argument)"
)


@final
@attrs.frozen
class Caller:
    """Who sent a call, as its transport established it."""

    label: str
    """How the logs name the caller: ``stdio``, ``anonymous`` or a token's label."""
    tenant: str | None = None
    """The tenant the caller's token is bound to; ``None`` may address any session."""
    transport_session: str | None = None
    """The transport's own session id (HTTP ``Mcp-Session-Id``), if any."""
    sole_client: bool = False
    """Whether the transport serves this one client only (stdio, an embedding
    program), so that a session it names by default cannot be shared with anyone."""
    handles: HandleReader | None = None
    """What reads the conversation handles of this caller's calls (`HandleKeys`), when the
    server mints them: a stateful call that names no session must then carry one, or
    run in its transport session. ``None``: handles are off."""
    arguments_may_name_sessions: bool = True
    """Whether a call's arguments (``__sessionId``, which a model can write) may name a
    session other than the caller's own (`own_session`). ``_meta``, the host's channel,
    may either way; the tenant rule holds either way. False for the stdio parent unless
    its operator allows it (``serve --allow-session-naming``)."""

    @property
    def own_session(self) -> str | None:
        """The caller's own session, its transport's (tenant-prefixed); ``None`` if it has none."""
        if self.transport_session is None:
            return None
        prefix = "" if self.tenant is None else self.tenant + TENANT_SEPARATOR
        return prefix + self.transport_session

    def default_session(self, policy: ContextPolicy) -> str | None:
        """The session a call naming none lands in; ``None`` leaves it to `policy`.

        Raises NoSessionError where the only default would be one that every
        client of a shared transport lands in.
        """
        # `own_session`, inline: every call that names no session comes through here.
        prefix = "" if self.tenant is None else self.tenant + TENANT_SEPARATOR
        if self.transport_session is not None:
            return prefix + self.transport_session
        if self.tenant is not None and not policy.require_session:
            return prefix + policy.default_session  # the tenant's own bucket
        if self.sole_client or policy.require_session:
            return None
        raise NoSessionError(_NO_SESSION)

    def check(self, context: ToolContext, source: SessionSource = "meta") -> None:
        """Raise ReachError if this caller may not reach `context`'s session from `source`.

        ConfinedError where `source` is the arguments, which may not name sessions
        here, and the session is not the caller's own; TenantError where it is outside
        the caller's tenant.
        """
        if (
            source == "arguments"
            and not self.arguments_may_name_sessions
            and context.session_id != self.own_session
        ):
            raise ConfinedError(self._confined(context.session_id), context)
        tenant = self.tenant
        if tenant is not None and not in_tenant(context.session_id, tenant):
            msg = (
                f"session {context.session_id!r} is outside tenant {tenant!r} of this token; "
                f"name a session {tenant!r} or {tenant + TENANT_SEPARATOR + '…'!r}"
            )
            raise TenantError(msg, context)

    def _confined(self, named: str) -> str:
        """Why arguments may not name session `named` here, and what to do instead."""
        own = self.own_session
        where = (
            "this connection has no session of its own (--require-session)"
            if own is None
            else f"this connection is confined to its own session {own!r}"
        )
        return (
            f"{where}: the call's arguments, which the model writes, may not name session "
            f"{named!r}; the host names a session in _meta.sessionId, or the server's "
            "operator lets arguments name sessions (mcp-actors serve --allow-session-naming)"
        )
