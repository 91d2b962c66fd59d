"""How a durable module's state becomes a stored blob and back.

A module opts in with ``ToolModule(..., durable=Durable(PlanningState))``. The
state is an attrs class; cattrs unstructures it to plain data, stored as
compact JSON with the module's schema version beside it::

    {"schema": 1, "state": {...}}

JSON rather than pickle: a stored blob must never run code when it is read
back, and an operator should be able to read it. Loading checks the schema
version and structures the data strictly (unknown fields are an error), so a
state class that changed incompatibly is a `StateLoadError` naming the key
and the field, never a state silently missing data. The runtime then leaves
the stored blob as it is: nothing is written for that key until it loads.

State that changes shape
------------------------
When the class changes, raise ``schema`` and give a *migration* for each
older version still stored: a function from the plain data of schema ``n``
(what cattrs made of the old class: dicts, lists, strings, numbers) to the
plain data of schema ``n + 1``. A blob of schema ``n`` is read through every
step from ``n`` up; the migrated state is written back, in the new schema,
by the key's first call that changes it. A blob of a newer schema than the
class reads (an older version of the module running beside a newer one) is
refused, never read as something else::

    Durable(Notes, schema=2, migrations={1: lambda old: {**old, "tags": []}})

A durable state holds data only. Hooks that acquire resources (``on_start``,
``on_stop``, ``start_background``) make no sense for it — a process or a
socket cannot be stored — so a durable state class may not define them;
``heal`` is fine.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, final

import attrs
import cattrs
from cattrs.errors import BaseValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from protocol import ActorKey

__all__ = ["Durable", "StateLoadError"]

StateT = TypeVar("StateT")

_RESOURCE_HOOKS: Final = ("on_start", "on_stop", "start_background")
# One encoder for every dump: `json.dumps` with these options builds a new one
# per call, a cost every durable write paid. Encoding keeps no state in it, so
# a dump in a worker thread may use it at the same time.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class StateLoadError(Exception):
    """A stored state could not be read back; the stored blob is kept as it is."""


def _strict_converter() -> cattrs.Converter:
    return cattrs.Converter(forbid_extra_keys=True)


@final
@attrs.frozen
class Durable(Generic[StateT]):
    """A module's declaration that its state is stored: the state's class and schema version.

    Raise `schema` whenever the class changes in a way old blobs cannot be
    read as; give `converter` hooks for fields cattrs cannot handle alone.
    """

    state_type: type[StateT]
    """The attrs class of the module's state."""
    schema: int = 1
    """The version of the stored shape; a blob of another version is migrated or refused."""
    converter: cattrs.Converter = attrs.field(factory=_strict_converter)
    """How the state is (un)structured; by default strict about unknown fields."""
    migrations: Mapping[int, Callable[[Any], Any]] = attrs.field(factory=dict)
    """Schema ``n`` → a function from the plain data of schema ``n`` to that of ``n + 1``."""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.schema, int) or self.schema < 1:
            msg = f"schema must be a whole number of at least 1, got {self.schema!r}"
            raise ValueError(msg)
        stray = sorted(
            repr(version)
            for version in self.migrations
            if not isinstance(version, int) or not 1 <= version < self.schema
        )
        if stray:
            msg = (
                f"migrations {', '.join(stray)} lead nowhere: with schema={self.schema}, a "
                f"migration is keyed by the schema it upgrades from, 1 to {self.schema - 1}"
            )
            raise ValueError(msg)
        if not attrs.has(self.state_type):
            msg = f"a durable state must be an attrs class, got {self.state_type!r}"
            raise TypeError(msg)
        hooks = [name for name in _RESOURCE_HOOKS if hasattr(self.state_type, name)]
        if hooks:
            msg = (
                f"{self.state_type.__name__} defines {', '.join(hooks)}: a durable state holds "
                "data only, since resources cannot be stored; drop the hooks or the durability"
            )
            raise TypeError(msg)

    def dump(self, state: StateT) -> bytes:
        """The stored form of `state`."""
        data = self.converter.unstructure(state, self.state_type)
        return _ENCODER.encode({"schema": self.schema, "state": data}).encode()

    def load(self, blob: bytes, key: ActorKey) -> StateT:
        """The state `blob` stores; StateLoadError naming `key` and the field if it cannot."""
        try:
            envelope = json.loads(blob)
        except ValueError as exc:
            msg = f"the stored state of {key} is not JSON ({exc})"
            raise StateLoadError(msg) from None
        if not isinstance(envelope, dict) or "state" not in envelope:
            msg = f"the stored state of {key} has no 'state' field"
            raise StateLoadError(msg)
        schema = envelope.get("schema")
        data = envelope["state"]
        if schema != self.schema:
            data = self._migrated(data, schema, key)
        return self._structure(data, key)

    def _migrated(self, data: Any, schema: object, key: ActorKey) -> Any:
        """`data` of `schema` brought up to `self.schema`, one migration at a time."""
        if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
            msg = f"the stored state of {key} has schema {schema!r}, which is no schema version"
            raise StateLoadError(msg)
        if schema > self.schema:
            msg = (
                f"the stored state of {key} has schema {schema}, newer than the schema "
                f"{self.schema} this version of {key.module} reads: a newer version wrote it"
            )
            raise StateLoadError(msg)
        for version in range(schema, self.schema):
            step = self.migrations.get(version)
            if step is None:
                msg = (
                    f"the stored state of {key} has schema {schema}, but {key.module} reads "
                    f"schema {self.schema} and has no migration from schema {version}"
                )
                raise StateLoadError(msg)
            try:
                data = step(data)
            except Exception as exc:  # the module's code: any failure names the step
                msg = (
                    f"the stored state of {key} could not be migrated from schema {version} "
                    f"to {version + 1}: {type(exc).__name__}: {exc}"
                )
                raise StateLoadError(msg) from exc
        return data

    def _structure(self, data: Any, key: ActorKey) -> StateT:
        try:
            return self.converter.structure(data, self.state_type)
        except BaseValidationError as exc:
            problems = "; ".join(cattrs.transform_error(exc, path="$.state"))
            msg = f"the stored state of {key} does not fit {self.state_type.__name__}: {problems}"
            raise StateLoadError(msg) from None
        except (TypeError, ValueError, KeyError) as exc:
            msg = f"the stored state of {key} does not fit {self.state_type.__name__}: {exc}"
            raise StateLoadError(msg) from None
