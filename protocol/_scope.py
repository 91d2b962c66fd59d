"""Scopes and actor keys: which parts of a context key a module's state."""

from __future__ import annotations

import enum
from typing import Final, final

import attrs

from ._context import ToolContext

TENANT_SEPARATOR: Final = "/"
"""Sessions named ``T/…`` belong to tenant ``T``."""


def tenant_of(session_id: str) -> str:
    """The tenant a session belongs to: ``T`` for ``T`` and ``T/…``.

    A session with no ``/`` is a tenant of its own. The HTTP server's tenant
    tokens confine a caller to its tenant's sessions, and the runtime's
    eviction shares its actor slots fairly among tenants.
    """
    return session_id.partition(TENANT_SEPARATOR)[0]


__all__ = ["TENANT_SEPARATOR", "ActorKey", "Scope", "actor_key", "tenant_of"]


class Scope(enum.Enum):
    """Which context parts key a module's state.

    Parts outside the scope are dropped from the key, so e.g. every assistant
    of a session shares one ``SESSION``-scoped state.
    """

    SESSION = "session"
    """One state per session."""
    SESSION_ASSISTANT = "session+assistant"
    """One state per (session, assistant)."""
    SESSION_ASSISTANT_THREAD = "session+assistant+thread"
    """One state per (session, assistant, thread)."""

    def parts(self, context: ToolContext) -> tuple[str, str | None, str | None]:
        """(session, assistant, thread) of `context`, with the parts outside this scope None.

        Equal parts mean equal projections; a router may key by this tuple
        instead of building a `ToolContext` per call.
        """
        _, session, assistant, thread = self.route("", context)
        return (session, assistant, thread)

    def route(self, module: str, context: ToolContext) -> tuple[str, str, str | None, str | None]:
        """``(module, *self.parts(context))``, built at once: the key a router looks up per call."""
        # Module globals, not ``Scope.SESSION``: an Enum's class attribute costs
        # more to read than the rest of this method (this runs on every call).
        if self is _SESSION:
            return (module, context.session_id, None, None)
        if self is _SESSION_ASSISTANT:
            return (module, context.session_id, context.assistant_id, None)
        return (module, context.session_id, context.assistant_id, context.thread_id)

    def project(self, context: ToolContext) -> ToolContext:
        """Return `context` with the parts outside this scope set to ``None``."""
        return ToolContext(*self.parts(context))


_SESSION: Final = Scope.SESSION
_SESSION_ASSISTANT: Final = Scope.SESSION_ASSISTANT


@final
@attrs.frozen(cache_hash=True)
class ActorKey:
    """The identity of one actor: a module and a context projected on its scope.

    A structured value, never a concatenated string: two keys are equal only
    when every part is equal, and an absent part equals only another absent part.
    """

    module: str
    """The module whose state this key selects."""
    context: ToolContext
    """The context, projected on the module's scope."""

    def __str__(self) -> str:
        parts = [f"session={self.context.session_id!r}"]
        if self.context.assistant_id is not None:
            parts.append(f"assistant={self.context.assistant_id!r}")
        if self.context.thread_id is not None:
            parts.append(f"thread={self.context.thread_id!r}")
        return f"{self.module}({', '.join(parts)})"


def actor_key(module: str, scope: Scope, context: ToolContext) -> ActorKey:
    """The key of the actor that owns `module`'s state for `context`."""
    return ActorKey(module, scope.project(context))
