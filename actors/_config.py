"""What a runtime is configured with: `RuntimeConfig`, below every module that reads it."""

from __future__ import annotations

from typing import Any, final

import attrs

from protocol import DEFAULT_POLICY, ContextPolicy

__all__ = ["RuntimeConfig"]


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not value > 0:
        msg = f"{attribute.name} must be positive, got {value!r}"
        raise ValueError(msg)


def _not_negative(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value >= 0:
        msg = f"{attribute.name} must be zero or more, got {value!r}"
        raise ValueError(msg)


@final
@attrs.frozen
class RuntimeConfig:
    """How the runtime routes, bounds and stops actors."""

    ttl: float = attrs.field(default=3600.0, validator=_positive)
    """Seconds an actor may sit idle before it stops and its state is released."""
    mailbox_size: int = attrs.field(default=64, validator=_positive)
    """Calls an actor's mailbox holds before callers wait (backpressure)."""
    max_actors: int | None = attrs.field(default=None, validator=_positive)
    """Cap on live actors; at the cap an idle actor is evicted (see `tenant_of`)."""
    max_actors_per_tenant: int | None = attrs.field(default=None, validator=_positive)
    """Cap on one tenant's live actors: at it, the tenant's own least recently used idle
    actor is evicted, so that one tenant cannot take every slot of ``max_actors``."""
    call_timeout: float | None = attrs.field(default=60.0, validator=_positive)
    """Deadline for one handler run, in seconds; ``None`` for none."""
    shutdown_grace: float = attrs.field(default=10.0, validator=_not_negative)
    """On shutdown, how long accepted calls may keep running before they are cancelled."""
    stop_timeout: float = attrs.field(default=10.0, validator=_positive)
    """How long one state's ``on_stop`` hook may take."""
    heavy_threads: int = attrs.field(default=2, validator=_positive)
    """How many heavy sync handlers may run at once, each in a worker thread; more wait.

    Each one competes with the event loop for the GIL, so few is better for the loop."""
    policy: ContextPolicy = DEFAULT_POLICY
    """How context fields are checked (lenient default session, or strict)."""
    state_retention: float | None = attrs.field(default=30 * 24 * 3600.0, validator=_positive)
    """Stored state neither written nor used (loaded, or held by a live actor) for this many
    seconds is deleted (with a store); None keeps it."""
    shared_store: bool | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bool))
    )
    """Whether other processes write the store too, so that before each call of a durable
    module the key's stored version is asked (one query for the keys asked at once), and a
    state another process changed is loaded again: every read sees every write acknowledged
    before it, whichever process made it. ``None``: yes for PostgreSQL, the store for
    several processes; no for SQLite and memory (say ``True`` when processes share a
    SQLite file). Off, it costs nothing; writes are fenced by version either way."""
    mask_errors: bool | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bool))
    )
    """Whether a handler's unexpected exception (anything but a `ToolError`) reaches the
    caller only as an error id, its text and traceback logged under that id: exception text
    can carry paths, SQL, secrets or another key's data.

    ``None`` leaves it to the host. `actors.server.serve` (the ``serve`` and ``cluster``
    commands) masks over HTTP, whose clients are remote (``--no-mask-errors`` turns it off),
    and not over stdio, whose client is the user's own parent process; a runtime in process
    masks nothing, its caller being the code that embeds it."""
