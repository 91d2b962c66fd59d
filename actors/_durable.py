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

A blob that does not fit the class is refused with each place it does not fit
(``notes[0].text``), what is stored there and what the class declares, and the
step that would make it fit, written out. Without a class, ``Durable(schema=2,
migrations=...)`` stores the state class of the module it is given to
(`Durable.for_module`). What can be checked without a store is checked when a
`Durable` is declared: every migration is callable and keyed by a schema it
can upgrade from, the converter can read the class, and a default instance
(when the class can make one) reads back as it was stored.

State in parts
--------------
A state that is mostly a collection (a content store's items, a plan's goals)
can be stored part-wise, so that a write costs what the call changed rather
than the whole state: name the collections in ``parts``::

    Durable(ContentStoreState, parts=("items",))

Each named field is a ``dict[str, P]``; each of its entries is stored as a
part of its own beside a *header* that holds the rest of the state. After a
call, the parts whose value is no longer the same object as at the last
write are written, the keys that are gone are removed, and the header is
written if it changed, in one transaction behind the same version fence as a
whole state. Telling a change by identity is sound only if a part cannot
change in place, so ``P`` must be immutable: a frozen attrs class (or str,
int, float, bool, bytes, None, and tuples, frozensets, unions and frozen
attrs classes of those), checked when the module is declared. To change a
part, put a new one in its place (``attrs.evolve``).

The plain data is the same as a whole state's (the converter's, with each
named field a dict of the parts' plain data), so migrations see the state as
they always did; a blob stored whole by an older version is read, and its
first changing call writes it part-wise. The header's envelope is
``{"schema": n, "header": {...}}``, which an older version that stored the
state whole refuses to read (it has no ``state``) rather than mistake for an
empty state.

A durable state holds data only. Hooks that acquire resources (``on_start``,
``on_stop``, ``start_background``) make no sense for it — a process or a
socket cannot be stored — so a durable state class may not define them;
``heal`` is fine.
"""

from __future__ import annotations

import copy
import enum
import json
import types
import typing
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar, final

import attrs
import cattrs
from cattrs.errors import (
    StructureHandlerNotFoundError,
)

from ._misfits import (
    LISTED,
    MISFITS,
    Group,
    bounded,
    clipped,
    converted_by_hand,
    edited,
    edits,
    grouped,
    is_collection,
    misfits,
    step_source,
    told_all,
)
from .store import PartChanges

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from protocol import ActorKey

__all__ = ["Durable", "PartSnapshot", "StateLoadError"]

PartSnapshot = dict[str, dict[str, object]]
"""Parts field → (part id → the part object) as last written: what a write compares with."""

StateT = TypeVar("StateT")

_RESOURCE_HOOKS: Final = ("on_start", "on_stop", "start_background")
# One encoder for every dump: `json.dumps` with these options builds a new one
# per call, a cost every durable write paid. Encoding keeps no state in it, so
# a dump in a worker thread may use it at the same time.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class StateLoadError(Exception):
    """A stored state could not be read back; the stored blob is kept as it is."""


_NOT_STORED: Final = object()
"""What `changes` compares a part with when the stored one cannot be trusted: no part is it."""
_MAX_PART_ID: Final = 1024  # characters; a part's name is stored and indexed beside its key


def _order_changed(then: Mapping[str, object], now: Mapping[str, object]) -> bool:
    """Whether the parts in both `then` and `now` are in another order in `now`."""
    if not then:
        return False
    return [k for k in then if k in now] != [k for k in now if k in then]


def _check_part_id(field: str, part_id: object) -> None:
    """ValueError unless `part_id` is text the stores can take as part of a name."""
    problem = None
    if not isinstance(part_id, str):
        problem = f"is a {type(part_id).__name__}, not a str"
    elif not 0 < len(part_id) <= _MAX_PART_ID:
        problem = f"has {len(part_id)} characters; 1 to {_MAX_PART_ID} are stored"
    elif "\x00" in part_id:
        problem = "holds a NUL character"
    else:
        try:
            part_id.encode()
        except UnicodeEncodeError:
            problem = "is not valid Unicode (a lone surrogate)"
    if problem is not None:
        msg = f"the part id {part_id!r} of {field} {problem}"
        raise ValueError(msg)


def _parsed(blob: bytes, key: ActorKey) -> Any:
    try:
        return json.loads(blob)
    except ValueError as exc:
        msg = f"the stored state of {key} is not JSON ({exc})"
        raise StateLoadError(msg) from None


# What a frozen attrs class's __setattr__ is, learnt from one: attrs has no stable
# public "is frozen" question, and this asks it by behaviour.
_FROZEN_SETATTR: Final[object] = attrs.frozen(type("_Frozen", (), {})).__setattr__
_IMMUTABLE: Final = (str, bytes, int, float, bool, complex, type(None))


def _part_types(state_type: type, parts: tuple[str, ...]) -> dict[str, Any]:
    """Each parts field's part type; TypeError naming the field if it cannot hold parts."""
    if not isinstance(parts, tuple):  # parts="items" would name five one-letter fields
        msg = f"parts is a tuple of field names, like ('items',), got {parts!r}"
        raise TypeError(msg)
    if len(set(parts)) != len(parts):
        msg = f"parts names a field twice: {parts}"
        raise TypeError(msg)
    fields = {field.name: field for field in attrs.fields(_resolved(state_type))} if parts else {}
    found: dict[str, Any] = {}
    for name in parts:
        if name not in fields:
            msg = f"parts names {name!r}, which is not a field of {state_type.__name__}"
            raise TypeError(msg)
        hint = fields[name].type
        args = typing.get_args(hint)
        if typing.get_origin(hint) is not dict or len(args) != 2 or args[0] is not str:
            msg = (
                f"{state_type.__name__}.{name} is {hint!r}: a parts field is a dict[str, P], "
                "part id to part"
            )
            raise TypeError(msg)
        problem = _changeable(args[1])
        if problem is not None:
            msg = (
                f"the parts of {state_type.__name__}.{name} could change in place ({problem}): "
                "a part must be immutable, so that a changed part is a new object; make it a "
                "frozen attrs class of immutable fields and replace it with attrs.evolve"
            )
            raise TypeError(msg)
        found[name] = args[1]
    return found


def _resolved(kind: type) -> type:
    """`kind` with its fields' types resolved from their annotations' text (TypeError if
    an annotation names something not found)."""
    try:
        return attrs.resolve_types(kind)
    except NameError as exc:
        msg = f"the annotations of {kind.__name__} cannot be resolved: {exc}"
        raise TypeError(msg) from None


def _changeable(kind: Any, seen: frozenset[type] = frozenset()) -> str | None:
    """Why values of type `kind` could change in place; None when they cannot (`seen`: the
    attrs classes being checked further up, so that a recursive type ends)."""
    if kind in seen:
        return None  # checked further up, where its other fields are
    origin = typing.get_origin(kind)
    if kind in _IMMUTABLE or (isinstance(kind, type) and issubclass(kind, enum.Enum)):
        return None
    if origin is Literal:
        return None
    if origin in (typing.Union, types.UnionType, tuple, frozenset):
        args = (arg for arg in typing.get_args(kind) if arg is not ...)
        return next((why for arg in args if (why := _changeable(arg, seen))), None)
    if isinstance(kind, type) and attrs.has(kind):
        if kind.__setattr__ is not _FROZEN_SETATTR:
            return f"{kind.__name__} is not a frozen attrs class"
        for field in attrs.fields(_resolved(kind)):
            why = _changeable(field.type, seen | {kind})
            if why is not None:
                return f"{kind.__name__}.{field.name}: {why}"
        return None
    name = kind.__name__ if isinstance(kind, type) else repr(kind)
    return f"{name} is not immutable"


# Why stored data does not fit its class, and the migration step that would make it.
#
def _check_migrations(schema: int, migrations: Mapping[int, Callable[[Any], Any]]) -> None:
    """ValueError (TypeError for what is no function) unless every migration is a function
    from a schema older than `schema`."""
    for version, step in migrations.items():
        if not isinstance(version, int) or isinstance(version, bool):
            msg = (
                "migrations are keyed by the schema each upgrades from, a whole number, got "
                f"{clipped(repr(version))}"
            )
            raise ValueError(msg)
        if not callable(step):
            msg = (
                f"migrations[{version}] is {clipped(repr(step))}, not a function: a migration "
                f"is a function from the plain data of schema {version} to that of "
                f"schema {version + 1}"
            )
            raise TypeError(msg)
    versions = sorted(migrations)
    if versions and versions[0] < 1:
        msg = (
            f"migrations has a step from schema {versions[0]}, but schemas start at 1: a "
            "migration from schema n upgrades blobs of schema n to n + 1"
        )
        raise ValueError(msg)
    if versions and versions[-1] >= schema:
        newest = versions[-1]
        msg = (
            f"migrations has a step from schema {newest}, which leads nowhere: a migration "
            f"from schema n upgrades blobs of schema n to n + 1, so with schema={schema} there "
            f"is nothing to upgrade to; to use this step, set schema={newest + 1}"
        )
        raise ValueError(msg)


def _check_round_trip(state_class: type, converter: cattrs.Converter) -> None:
    """TypeError unless `converter` can read `state_class`, and its default instance
    (when it has one) is stored as JSON that reads back as it was stored."""
    name = state_class.__name__
    hooks = "give Durable(converter=...) hooks that store it as JSON values and read them back"
    try:
        converter.get_structure_hook(state_class)
    except StructureHandlerNotFoundError as exc:
        msg = f"{name} cannot be read back from the store ({exc}): {hooks}"
        raise TypeError(msg) from None
    try:
        default = state_class()
    except Exception:  # needs arguments, or refuses its defaults: nothing to try
        return
    try:
        stored = _ENCODER.encode(converter.unstructure(default, state_class))
    except Exception as exc:  # the converter's hooks, or JSON's refusal
        msg = f"{name}() cannot be stored ({type(exc).__name__}: {exc}): {hooks}"
        raise TypeError(msg) from None
    plain = json.loads(stored)
    try:
        again = _ENCODER.encode(converter.unstructure(converter.structure(plain, state_class)))
    except MISFITS as exc:
        problems = told_all(grouped(misfits(exc, (), state_class)), plain)
        msg = f"{name}() is stored as data that does not read back as {name}: {problems}: {hooks}"
        raise TypeError(bounded(msg)) from None
    if again != stored:
        msg = (
            f"{name}() does not read back as it was stored: stored as {clipped(stored)}, "
            f"read back as {clipped(again)}: {hooks}"
        )
        raise TypeError(msg)


def _strict_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    # cattrs reads any iterable as a collection: a string stored before its field became
    # `list[str]` would be read as its characters, an object as its keys, and the state
    # changed without a word. Stored JSON holds every collection as an array: nothing else
    # is read as one.
    arrays = _ArraysOnly()
    converter.register_structure_hook_factory(arrays.applies, arrays.hook)
    return converter


@final
class _ArraysOnly:
    """A hook factory: cattrs' own structuring of a collection type, behind a check that the
    stored value is an array. cattrs' hook is what the converter gives for the type while
    this factory stands aside for it, so a deque stays a deque and a Sequence a tuple."""

    __slots__ = ("_aside",)

    def __init__(self) -> None:
        self._aside: set[Any] = set()

    def applies(self, kind: Any) -> bool:
        """Whether `kind` is a collection type this factory makes the hook of."""
        return kind not in self._aside and is_collection(kind)

    def hook(self, kind: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
        """cattrs' hook for `kind`, behind the check."""
        self._aside.add(kind)
        try:
            # Uncached: with this factory aside, the answer is not the converter's for `kind`.
            items = converter.get_structure_hook(kind, cache_result=False)
        finally:
            self._aside.discard(kind)

        def structure(value: Any, annotation: Any) -> Any:
            if not isinstance(value, list):
                msg = f"stored as {type(value).__name__}, where an array is declared"
                raise TypeError(msg)
            return items(value, annotation)

        return structure


@final
@attrs.frozen
class Durable(Generic[StateT]):
    """A module's declaration that its state is stored: the state's class and schema version.

    Raise `schema` whenever the class changes in a way old blobs cannot be
    read as; give `converter` hooks for fields cattrs cannot handle alone.
    """

    state_type: type[StateT] | None = None
    """The attrs class of the module's state; None: the state class of the module it is
    given to (see `for_module`)."""
    schema: int = 1
    """The version of the stored shape; a blob of another version is migrated or refused."""
    converter: cattrs.Converter = attrs.field(factory=_strict_converter)
    """How the state is (un)structured; by default strict about unknown fields."""
    migrations: Mapping[int, Callable[[Any], Any]] = attrs.field(factory=dict)
    """Schema ``n`` → a function from the plain data of schema ``n`` to that of ``n + 1``."""
    parts: tuple[str, ...] = ()
    """The fields stored part-wise, each a ``dict[str, P]`` of immutable parts (see above)."""
    _part_types: dict[str, Any] = attrs.field(init=False, factory=dict, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.schema, int) or isinstance(self.schema, bool) or self.schema < 1:
            msg = f"schema must be a whole number of at least 1, got {self.schema!r}"
            raise ValueError(msg)
        _check_migrations(self.schema, self.migrations)
        if self.state_type is None:
            return  # checked when a module names the class (`for_module`)
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
        self._part_types.update(_part_types(self.state_type, self.parts))
        _check_round_trip(self.state_type, self.converter)

    @property
    def state_class(self) -> type[StateT]:
        """The attrs class of the state; TypeError when no class is named yet."""
        if self.state_type is None:
            msg = (
                f"Durable(schema={self.schema}, ...) names no state class, and no module gave "
                "it one: give it to a module whose state is a class (ToolModule('notes', "
                "Notes, durable=Durable(...))), or name the class: Durable(Notes, ...)"
            )
            raise TypeError(msg)
        return self.state_type

    def for_module(self, module: str, state_class: type[Any] | None) -> Durable[Any]:
        """This declaration as module `module` uses it, whose state's class is
        `state_class` (None: unknown): bound to that class when it names none.

        TypeError when neither names a class, or when the module's state is not of the
        class this one stores.
        """
        if self.state_type is None:
            if state_class is None:
                msg = (
                    f"module {module!r}: Durable(schema={self.schema}, ...) stores the "
                    "module's state class, which is unknown here; declare the state as a "
                    f"class (ToolModule({module!r}, MyState, durable=Durable(...))) or name "
                    "it: Durable(MyState, ...)"
                )
                raise TypeError(msg)
            return attrs.evolve(self, state_type=state_class)
        if state_class is not None and not issubclass(state_class, self.state_type):
            msg = (
                f"module {module!r}: its state is {state_class.__qualname__}, but durable= "
                f"stores {self.state_type.__qualname__}; write durable=True, or "
                f"Durable({state_class.__qualname__}, ...)"
            )
            raise TypeError(msg)
        return self

    @property
    def partwise(self) -> bool:
        """Whether the state is stored in parts."""
        return bool(self.parts)

    def snapshot(self, state: StateT) -> PartSnapshot:
        """The parts of `state` as they are now, to compare the next write with (a copy of
        each parts dict: the parts themselves are immutable)."""
        return {name: dict(getattr(state, name)) for name in self.parts}

    def dump_header(self, state: StateT) -> bytes:
        """The stored form of `state` without its parts."""
        shell = copy.copy(state)  # shallow: the parts fields are replaced, nothing else touched
        for name in self.parts:
            object.__setattr__(shell, name, {})
        data = self.converter.unstructure(shell, self.state_class)
        if not isinstance(data, dict) or any(data.get(name) != {} for name in self.parts):
            msg = (
                f"the converter stores {self.state_class.__name__} in a form without the fields "
                f"{', '.join(self.parts)} as top-level dicts, which part-wise storage needs"
            )
            raise TypeError(msg)
        header = {name: value for name, value in data.items() if name not in self.parts}
        return _ENCODER.encode({"schema": self.schema, "header": header}).encode()

    def changes(self, before: PartSnapshot, state: StateT) -> PartChanges:
        """The parts of `state` made, replaced, moved or dropped since `before`, in stored form.

        ValueError for a part id the store cannot take (see `_check_part_id`), so
        that the call which made it fails, and no other.
        """
        written: list[tuple[str, bytes]] = []
        moved: list[str] = []
        removed: list[str] = []
        for name in self.parts:
            now: dict[str, object] = getattr(state, name)
            then = before.get(name, {})
            # A part moved (popped and put back, the dict rebuilt in another order) is
            # the same object in another place: the field is written anew, in order.
            reordered = _order_changed(then, now)
            kind = self._part_types[name]
            for part_id, part in now.items():
                if reordered or then.get(part_id) is not part:
                    _check_part_id(name, part_id)
                    data = self.converter.unstructure(part, kind)
                    written.append((f"{name}:{part_id}", _ENCODER.encode(data).encode()))
                    if reordered:
                        moved.append(written[-1][0])
            removed.extend(f"{name}:{part_id}" for part_id in then.keys() - now.keys())
        for name, then in before.items():  # a field no longer stored in parts
            if name not in self.parts:
                removed.extend(f"{name}:{part_id}" for part_id in then)
        return PartChanges(tuple(written), tuple(removed), tuple(moved))

    def dump(self, state: StateT) -> bytes:
        """The stored form of `state`."""
        data = self.converter.unstructure(state, self.state_class)
        return _ENCODER.encode({"schema": self.schema, "state": data}).encode()

    def load(self, blob: bytes, key: ActorKey) -> StateT:
        """The state `blob` stores; StateLoadError naming `key` and the field if it cannot."""
        state, _stored = self.load_parts(blob, None, key)
        return state

    def load_parts(
        self, blob: bytes, parts: Mapping[str, bytes] | None, key: ActorKey
    ) -> tuple[StateT, PartSnapshot | None]:
        """The state stored as `blob` (whole, or a header with `parts`), and what of it is
        stored as parts (``None``: nothing, it was stored whole), for `changes` to compare
        with; StateLoadError naming `key` and the field if it cannot be read."""
        envelope = _parsed(blob, key)
        if not isinstance(envelope, dict) or not ("state" in envelope or "header" in envelope):
            msg = f"the stored state of {key} has no 'state' field"
            raise StateLoadError(msg)
        partwise = "header" in envelope
        data = self._assembled(envelope["header"], parts, key) if partwise else envelope["state"]
        schema = envelope.get("schema")
        migrated = schema != self.schema
        if migrated:
            data = self._migrated(data, schema, key)
        state = self._structure(data, key, schema)
        if not partwise:
            return state, None
        return state, self._as_stored(state, parts or {}, trusted=not migrated)

    def _as_stored(
        self, state: StateT, parts: Mapping[str, bytes], *, trusted: bool
    ) -> PartSnapshot:
        """What the store holds as parts, as `changes` compares it: each stored part's
        loaded object when the state is exactly what was stored (`trusted`), otherwise a
        stand-in no part is, so that every part is written again and what the state no
        longer has is removed (a migration may have changed, renamed or dropped any)."""
        stored: PartSnapshot = {}
        for part_name in parts:
            field, _, part_id = part_name.partition(":")
            loaded = getattr(state, field) if trusted and field in self.parts else {}
            stored.setdefault(field, {})[part_id] = loaded.get(part_id, _NOT_STORED)
        return stored

    def _assembled(self, header: Any, parts: Mapping[str, bytes] | None, key: ActorKey) -> Any:
        """The whole state's plain data: the header's, with each part in its field."""
        if parts is None or not self.parts or not isinstance(header, dict):
            msg = (
                f"the stored state of {key} is stored in parts, which {key.module}'s durable "
                f"state does not declare (Durable(parts=...)); a version that does wrote it"
            )
            raise StateLoadError(msg)
        data = dict(header)
        for name in self.parts:  # a field declared in parts since: the header still holds it
            data.setdefault(name, {})
        for part_name, part_blob in parts.items():
            # A part of a field no longer declared in parts goes where the whole state has it.
            field, _, part_id = part_name.partition(":")
            collection = data.setdefault(field, {}) if field else None
            if not isinstance(collection, dict):
                msg = f"the stored state of {key} has a part {part_name!r} of no dict field"
                raise StateLoadError(msg)
            collection[part_id] = _parsed(part_blob, key)
        return data

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

    def _structure(self, data: Any, key: ActorKey, schema: object) -> StateT:
        """`data` as the state; StateLoadError saying where it does not fit, what is stored
        there and what is declared, and the migration that would make it fit (`data` was
        stored in `schema`, and migrated if that is older)."""
        state_class = self.state_class
        try:
            return self.converter.structure(data, state_class)
        except MISFITS as exc:
            groups = grouped(misfits(exc, (), state_class))
            msg = (
                f"the stored state of {key} does not fit {state_class.__name__}: "
                f"{told_all(groups, data)}. {self._advice_or_none(groups, data, schema)}"
            )
            raise StateLoadError(bounded(msg)) from None

    def _advice_or_none(self, groups: list[Group], data: Any, schema: object) -> str:
        """`_advice`, or a pointer to the guide when no step can be written for this data:
        the refusal must reach the caller whatever the stored data holds."""
        try:
            return self._advice(groups, data, schema)
        except Exception:  # a stored value or a declared type the advice cannot write
            return (
                f"If {self.state_class.__name__} changed on purpose, raise its schema and add "
                "a migration step (see Durable's migrations)"
            )

    def _raised(self, step: str) -> str:
        """This declaration as code, with its schema raised and `step` the newest step."""
        given = {version: step_source(function) for version, function in self.migrations.items()}
        steps = [f"{version}: {code}" for version, code in sorted(given.items())]
        steps.append(f"{self.schema}: {step}")
        parts = f"parts={self.parts!r}, " if self.parts else ""
        return (
            f"Durable({self.state_class.__name__}, schema={self.schema + 1}, {parts}"
            f"migrations={{{', '.join(steps)}}})"
        )

    def _advice(self, groups: list[Group], data: Any, schema: object) -> str:
        """The migration step that would make `data` (stored in `schema`) fit, as code."""
        name = self.state_class.__name__
        shown = groups[:LISTED]
        step = f"lambda old: {edited(edits(shown, data), 'old')}"
        fits = (
            "makes the stored data fit"
            if len(groups) <= LISTED
            else (f"mends the first {LISTED} of these problems (mend the others as well)")
        )
        if schema == self.schema:
            advice = (
                f"If {name} changed on purpose, raise its schema and add a step from schema "
                f"{self.schema} that {fits}:\n    {self._raised(step)}"
            )
        else:
            advice = (
                f"It was migrated from schema {schema} to {self.schema}, and the data the step "
                f"from schema {self.schema - 1} returns does not fit; that step should also do "
                f"this to the data it returns:\n    {step}"
            )
        if any(converted_by_hand(group, data) for group in shown):
            advice += "\nwhere convert(value) is yours to write: it returns the new value"
        if any(step_source(function) == "..." for function in self.migrations.values()):
            advice += "\nwith each ... replaced by the step already given there"
        return (
            f"{advice}\n(a step from schema n gets the plain data of schema n, as dicts, "
            "lists, strings and numbers, and returns that of schema n + 1)"
        )
