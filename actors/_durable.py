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
    from protocol import ActorKey

__all__ = ["Durable", "StateLoadError"]

StateT = TypeVar("StateT")

_RESOURCE_HOOKS: Final = ("on_start", "on_stop", "start_background")


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
    """The version of the stored shape; a blob of another version is refused."""
    converter: cattrs.Converter = attrs.field(factory=_strict_converter)
    """How the state is (un)structured; by default strict about unknown fields."""

    def __attrs_post_init__(self) -> None:
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
        return json.dumps(
            {"schema": self.schema, "state": data}, ensure_ascii=False, separators=(",", ":")
        ).encode()

    def load(self, blob: bytes, key: ActorKey) -> StateT:
        """The state `blob` stores; StateLoadError naming `key` and the field if it cannot."""
        try:
            envelope = json.loads(blob)
        except ValueError as exc:
            msg = f"the stored state of {key} is not JSON ({exc}); it is kept unchanged"
            raise StateLoadError(msg) from None
        if not isinstance(envelope, dict) or "state" not in envelope:
            msg = f"the stored state of {key} has no 'state' field; it is kept unchanged"
            raise StateLoadError(msg)
        schema = envelope.get("schema")
        if schema != self.schema:
            msg = (
                f"the stored state of {key} has schema {schema!r}, but {key.module} reads "
                f"schema {self.schema}; it is kept unchanged until a version that reads it runs"
            )
            raise StateLoadError(msg)
        return self._structure(envelope["state"], key)

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
