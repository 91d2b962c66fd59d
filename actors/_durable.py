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

import builtins
import collections
import collections.abc
import copy
import enum
import itertools
import json
import keyword
import types
import typing
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar, final

import attrs
import cattrs
from cattrs.errors import (
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    StructureHandlerNotFoundError,
)

from .store import PartChanges

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Set

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
# cattrs says what failed as a tree of exceptions, each sub-exception noted with the
# field, index or key it was structuring. That tree is walked into `_Misfit`s, each
# a place in the stored data; misfits at the same place in every item of a list or
# dict (notes[0].text, notes[1].text) are one group, told and fixed once. A stored
# blob may be hostile or huge, so every piece of it quoted is clipped, and so many
# groups are told.

_SHOWN: Final = 40  # characters of a stored string, key or name quoted in a message
_LISTED: Final = 5  # groups told (and fixed by the step); keys or names listed
_MAX_MESSAGE: Final = 4000  # characters: a last bound, for data nested past the others

_Step = tuple[Literal["field", "item", "value"], object]
"""One step into plain data: a class's field (by name), a list's item or a dict's value."""


@attrs.frozen
class _Misfit:
    """One place where the stored data does not fit the declared type."""

    kind: Literal["missing", "extra", "wrong"]
    """A field not stored, fields stored but not declared, or a value of another shape."""
    path: tuple[_Step, ...]
    """Where: the field (missing, wrong) or the object holding the fields (extra)."""
    declared: Any
    """The declared type there (for extra, the class of the object)."""
    names: tuple[str, ...] = ()
    """For extra, the stored fields the class does not declare."""

    @property
    def place(self) -> tuple[_Step, ...]:
        """`path` with the index or key of each item left out: the same for every item."""
        return tuple((kind, name if kind == "field" else None) for kind, name in self.path)


@attrs.frozen
class _Group:
    """The misfits of one kind at one place: the first, how many, and (for extra) which
    names were found, a few of them."""

    first: _Misfit
    count: int = 1
    names: frozenset[str] = frozenset()


def _misfits(exc: BaseException, path: tuple[_Step, ...], declared: Any) -> Iterator[_Misfit]:
    """The misfits cattrs' `exc` reports, found structuring `declared` at `path`."""
    if isinstance(exc, IterableValidationError):
        noted, unnoted = exc.group_exceptions()
        step: Literal["item", "value"] = "value" if _is_mapping(exc.cl) else "item"
        for inner, item_note in noted:
            yield from _misfits(inner, (*path, (step, item_note.index)), item_note.type)
    elif isinstance(exc, ClassValidationError):
        class_noted, unnoted = exc.group_exceptions()
        for inner, field_note in class_noted:
            where = (*path, ("field", field_note.name))
            if isinstance(inner, KeyError) and inner.args == (field_note.name,):
                yield _Misfit("missing", where, field_note.type)
            else:
                yield from _misfits(inner, where, field_note.type)
    else:
        yield _Misfit("wrong", path, declared)
        return
    for inner in unnoted:
        if isinstance(inner, ForbiddenExtraKeysError):
            yield _Misfit("extra", path, inner.cl, tuple(sorted(inner.extra_fields)))
        else:
            yield _Misfit("wrong", path, exc.cl)


def _grouped(misfits: Iterable[_Misfit]) -> list[_Group]:
    """`misfits` in groups of one kind and place, in the order first found."""
    groups: dict[tuple[str, tuple[_Step, ...]], _Group] = {}
    for misfit in misfits:
        found = groups.get((misfit.kind, misfit.place))
        names = frozenset(misfit.names) | (found.names if found else frozenset())
        names = names if len(names) <= _LISTED else frozenset(sorted(names)[: _LISTED + 1])
        count = found.count + 1 if found else 1
        groups[misfit.kind, misfit.place] = _Group(found.first if found else misfit, count, names)
    return list(groups.values())


def _is_mapping(kind: Any) -> bool:
    origin = typing.get_origin(kind) or kind
    return isinstance(origin, type) and issubclass(origin, collections.abc.Mapping)


def _is_collection(kind: Any) -> bool:
    """Whether `kind` is a list-like type: stored as a JSON list."""
    origin = typing.get_origin(kind) or kind
    collections_abc = (collections.abc.Sequence, collections.abc.Set)
    return (
        isinstance(origin, type)
        and issubclass(origin, collections_abc)
        and not issubclass(origin, (str, bytes))
    )


def _without_none(kind: Any) -> Any:
    """`kind` without ``None`` when it is an optional type (its first other member)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return next(arg for arg in typing.get_args(kind) if arg is not type(None))
    return kind


def _clipped(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"


def _listed(names: Iterable[str], total: int) -> str:
    """A few of `names`, each quoted (a stored name may hold a newline, a terminal escape)."""
    shown = [_clipped(repr(name)) for name in itertools.islice(names, _LISTED)]
    more = f" and {total - len(shown)} more" if total > len(shown) else ""
    return ", ".join(shown) + more


def _type_text(kind: Any) -> str:
    """`kind` as its annotation reads: ``list[str]``, ``Note``, ``int | None``."""
    if kind is type(None) or kind is None:
        return "None"
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(arg) for arg in args)
    if origin is Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if origin is not None:
        shown = ", ".join("..." if arg is ... else _type_text(arg) for arg in args)
        return f"{getattr(origin, '__name__', repr(origin))}[{shown}]"
    return kind.__name__ if isinstance(kind, type) else repr(kind)


_ABSENT: Final = object()
"""What `_at` finds where the stored data has nothing."""


def _at(data: Any, path: tuple[_Step, ...]) -> Any:
    """What `data` holds at `path`, or `_ABSENT`."""
    for kind, name in path:
        if kind == "item" and isinstance(data, list) and isinstance(name, int):
            found = data[name] if -len(data) <= name < len(data) else _ABSENT
        elif kind != "item" and isinstance(data, dict):
            found = data.get(name, _ABSENT)
        else:
            found = _ABSENT
        if found is _ABSENT:
            return _ABSENT
        data = found
    return data


def _shape(value: Any) -> str:
    """A short description of a stored value: ``a string 'x'``, ``a list of 3``."""
    if isinstance(value, str):
        length = f" of {len(value)} characters" if len(value) > _SHOWN else ""
        return f"a string {_clipped(repr(value[: _SHOWN + 1]))}{length}"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"the number {_clipped(repr(value))}"
    if isinstance(value, list):
        return f"a list of {len(value)}" if value else "an empty list"
    if isinstance(value, dict):
        if not value:
            return "an empty object"
        return f"an object with keys {_listed(map(str, value), len(value))}"
    return f"a {type(value).__name__}"  # a migration may return anything


def _path_text(path: tuple[_Step, ...]) -> str:
    """`path` as it reads in Python: ``notes[2].tags``, ``items['a']``; the root is
    "the state"."""
    text = ""
    for kind, name in path:
        if kind == "field":
            text += f".{name}" if text else str(name)
        else:
            text += f"[{_clipped(repr(name))}]"
    return text or "the state"


def _told(group: _Group, data: Any) -> str:
    """One group as a sentence part: where, what is stored there, what is declared."""
    misfit = group.first
    where = _path_text(misfit.path)
    like = f" (and {group.count - 1} more like it)" if group.count > 1 else ""
    if misfit.kind == "missing":
        holder = _shape(_at(data, misfit.path[:-1]))
        return (
            f"{where}{like} is missing ({_path_text(misfit.path[:-1])} is stored as {holder}), "
            f"declared {_type_text(misfit.declared)}"
        )
    if misfit.kind == "extra":
        names = _listed(sorted(group.names), len(group.names))
        return (
            f"{where}{like} stores fields {_type_text(misfit.declared)} does not declare: {names}"
        )
    stored = _at(data, misfit.path)
    shape = "nothing readable" if stored is _ABSENT else _shape(stored)
    return f"{where}{like} is stored as {shape}, declared {_type_text(misfit.declared)}"


# What a step writes for a field the stored data lacks, by the declared type.
_PLACEHOLDERS: Final[dict[Any, str]] = {str: '""', bool: "False", int: "0", float: "0.0"}


def _placeholder(kind: Any, seen: Set[type] = frozenset()) -> str:
    """A plain value of the declared type `kind`, as Python source, for a step to add."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        optional = type(None) in typing.get_args(kind)
        return "None" if optional else _placeholder(_without_none(kind), seen)
    if kind in _PLACEHOLDERS:
        return _PLACEHOLDERS[kind]
    if _is_collection(kind):
        return "[]"
    if _is_mapping(kind):
        return "{}"
    if typing.get_origin(kind) is Literal:
        return repr(typing.get_args(kind)[0])
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return repr(next(iter(kind)).value)
    if isinstance(kind, type) and attrs.has(kind) and kind not in seen:
        required = [field for field in attrs.fields(kind) if field.default is attrs.NOTHING]
        inner = (f"{field.name!r}: {_placeholder(field.type, seen | {kind})}" for field in required)
        return "{" + ", ".join(inner) + "}"
    return "None"


def _conversion(value: Any, kind: Any, expr: str) -> str:
    """Python source turning `value`, the stored `expr`, into the declared type `kind`."""
    kind = _without_none(kind)
    if _is_collection(kind) and not isinstance(value, list):
        return f"[{expr}]"
    if isinstance(kind, type) and attrs.has(kind) and not isinstance(value, dict):
        fields = attrs.fields(kind)
        required = [field for field in fields if field.default is attrs.NOTHING] or fields[:1]
        if required:  # the stored value is its first field; the others get a placeholder
            rest = (f"{field.name!r}: {_placeholder(field.type, {kind})}" for field in required[1:])
            return "{" + ", ".join([f"{required[0].name!r}: {expr}", *rest]) + "}"
    if kind in (str, int, float):
        return f"{kind.__name__}({expr})"
    return f"convert({expr})"


_JSON_TYPES: Final = (str, int, float, bool, list, dict)


@attrs.frozen
class _Edit:
    """What a migration step does at one place (`path`, relative to where it is applied)."""

    kind: Literal["replace", "filter", "add"]
    """Replace the value there, keep some of its fields, or add the field `field` to it."""
    path: tuple[_Step, ...]
    code: Callable[[str], str]
    """The new value's source, from the source of the value there now."""
    field: str = ""
    stored: Any = None
    """For replace, the value found stored there (one of them)."""

    def test(self, expr: str) -> str:
        """Python source telling whether `expr` is of the stored shape this edit replaces."""
        if self.stored is None:
            return f"{expr} is None"
        kind = type(self.stored)
        return f"isinstance({expr}, {kind.__name__ if kind in _JSON_TYPES else 'object'})"


def _edits(groups: list[_Group], data: Any) -> list[_Edit]:
    """The step's edits mending `groups`. Where an object lacks one field and stores one
    (short) name it does not declare, the field was renamed: the new one takes the old
    one's value."""
    lacking = collections.Counter(g.first.place[:-1] for g in groups if g.first.kind == "missing")
    renamed = {
        group.first.place: next(iter(group.names))
        for group in groups
        if group.first.kind == "extra"
        and len(group.names) == 1
        and len(next(iter(group.names))) <= _SHOWN
        and lacking[group.first.place] == 1
    }
    return [_edit(group, data, renamed) for group in groups]


def _edit(group: _Group, data: Any, renamed: Mapping[tuple[_Step, ...], str]) -> _Edit:
    """The step's edit mending `group` (`renamed`: each object's field renamed, by place,
    its old name)."""
    misfit = group.first
    if misfit.kind == "missing":
        *holder, (_, name) = misfit.place
        old = renamed.get(tuple(holder))
        default = _placeholder(misfit.declared)
        value = (lambda expr: f"{expr}[{old!r}]") if old else (lambda _expr: default)
        return _Edit("add", tuple(holder), value, str(name))
    if misfit.kind == "extra":
        keep = _kept(group, misfit.declared)
        return _Edit(
            "filter", misfit.place, lambda expr: f"{{k: v for k, v in {expr}.items() if {keep}}}"
        )
    stored = _at(data, misfit.path)
    return _Edit(
        "replace",
        misfit.place,
        lambda expr: _conversion(stored, misfit.declared, expr),
        stored=stored,
    )


def _kept(group: _Group, declared: Any) -> str:
    """The condition keeping a stored field: not one of the few short extra names, or
    (when they are many or long) one the class declares."""
    names = sorted(group.names)
    if len(names) == 1 and len(names[0]) <= _SHOWN:
        return f"k != {names[0]!r}"
    if len(names) <= 3 and all(len(name) <= _SHOWN for name in names):
        return f"k not in {{{', '.join(map(repr, names))}}}"
    declared_names = [field.name for field in attrs.fields(declared)]
    return f"k in {{{', '.join(map(repr, declared_names))}}}"


# Names a step's code already uses, and the builtins it may call (`int(...)`): an item is
# never named like one of them.
_TAKEN: Final = frozenset({"k", "v", "key", "old", "item", "convert", *dir(builtins)})


def _item_name(path: tuple[_Step, ...]) -> str:
    """What an item of the list or dict at `path` is called in a step: a note of notes."""
    last = path[-1] if path else None
    if last is not None and last[0] == "field":
        name = str(last[1])
        single = name[:-1] if name.endswith("s") and len(name) > 1 else ""
        if single.isidentifier() and not keyword.iskeyword(single) and single not in _TAKEN:
            return single
    return "item"


def _edited(edits: list[_Edit], expr: str, at: tuple[_Step, ...] = ()) -> str:
    """Python source for the value `expr` (at `at`) with `edits` made to it."""
    here = [edit for edit in edits if not edit.path]
    replaced = next((edit for edit in here if edit.kind == "replace"), None)
    if replaced is not None:
        others = [edit for edit in edits if edit is not replaced]
        if not others:
            return replaced.code(expr)
        # Items of one list stored in two shapes: the step tells them apart.
        return f"({replaced.code(expr)} if {replaced.test(expr)} else {_edited(others, expr, at)})"
    deeper = [edit for edit in edits if edit.path]
    if deeper and deeper[0].path[0][0] != "field":  # into every item of a list or dict
        step = deeper[0].path[0]
        inner = [attrs.evolve(edit, path=edit.path[1:]) for edit in deeper if edit.path[0] == step]
        item = _item_name(at)
        value = _edited(inner, item, (*at, step))
        if step[0] == "item":
            return f"[{value} for {item} in {expr}]"
        return f"{{key: {value} for key, {item} in {expr}.items()}}"
    base = expr
    for edit in here:
        if edit.kind == "filter":
            base = edit.code(base)
    fields: dict[str, list[_Edit]] = {}
    for edit in deeper:
        fields.setdefault(str(edit.path[0][1]), []).append(attrs.evolve(edit, path=edit.path[1:]))
    entries = [f"{edit.field!r}: {edit.code(expr)}" for edit in here if edit.kind == "add"]
    entries += [
        f"{name!r}: {_edited(inner, f'{expr}[{name!r}]', (*at, ('field', name)))}"
        for name, inner in fields.items()
    ]
    return f"{{**{base}, {', '.join(entries)}}}" if entries else base


# What structuring data that does not fit raises: cattrs' validation errors, and what a
# hook or cattrs itself raises on a value of another shape (a string where an object is).
_MISFITS: Final = (BaseValidationError, TypeError, ValueError, KeyError, AttributeError)


def _told_all(groups: list[_Group], data: Any) -> str:
    """The first groups told, and how many more there are."""
    told = "; ".join(_told(group, data) for group in groups[:_LISTED])
    more = len(groups) - _LISTED
    return f"{told}; and {more} more problems" if more > 0 else told


def _converted_by_hand(group: _Group, data: Any) -> bool:
    """Whether the step's edit for `group` calls ``convert``, which the reader writes."""
    if group.first.kind != "wrong":
        return False
    return _conversion(_at(data, group.first.path), group.first.declared, "x") == "convert(x)"


def _source(step: Callable[[Any], Any]) -> str:
    """How a migration already given is written in a `Durable(...)`: its name, if it has one."""
    name = getattr(step, "__name__", "")
    return name if name.isidentifier() else "..."


def _bounded(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else f"{message[:_MAX_MESSAGE]}…"


def _check_migrations(schema: int, migrations: Mapping[int, Callable[[Any], Any]]) -> None:
    """ValueError (TypeError for what is no function) unless every migration is a function
    from a schema older than `schema`."""
    for version, step in migrations.items():
        if not isinstance(version, int) or isinstance(version, bool):
            msg = (
                "migrations are keyed by the schema each upgrades from, a whole number, got "
                f"{_clipped(repr(version))}"
            )
            raise ValueError(msg)
        if not callable(step):
            msg = (
                f"migrations[{version}] is {_clipped(repr(step))}, not a function: a migration "
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
    except _MISFITS as exc:
        problems = _told_all(_grouped(_misfits(exc, (), state_class)), plain)
        msg = f"{name}() is stored as data that does not read back as {name}: {problems}: {hooks}"
        raise TypeError(_bounded(msg)) from None
    if again != stored:
        msg = (
            f"{name}() does not read back as it was stored: stored as {_clipped(stored)}, "
            f"read back as {_clipped(again)}: {hooks}"
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
        return kind not in self._aside and _is_collection(kind)

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
        except _MISFITS as exc:
            groups = _grouped(_misfits(exc, (), state_class))
            msg = (
                f"the stored state of {key} does not fit {state_class.__name__}: "
                f"{_told_all(groups, data)}. {self._advice_or_none(groups, data, schema)}"
            )
            raise StateLoadError(_bounded(msg)) from None

    def _advice_or_none(self, groups: list[_Group], data: Any, schema: object) -> str:
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
        given = {version: _source(function) for version, function in self.migrations.items()}
        steps = [f"{version}: {code}" for version, code in sorted(given.items())]
        steps.append(f"{self.schema}: {step}")
        parts = f"parts={self.parts!r}, " if self.parts else ""
        return (
            f"Durable({self.state_class.__name__}, schema={self.schema + 1}, {parts}"
            f"migrations={{{', '.join(steps)}}})"
        )

    def _advice(self, groups: list[_Group], data: Any, schema: object) -> str:
        """The migration step that would make `data` (stored in `schema`) fit, as code."""
        name = self.state_class.__name__
        shown = groups[:_LISTED]
        step = f"lambda old: {_edited(_edits(shown, data), 'old')}"
        fits = (
            "makes the stored data fit"
            if len(groups) <= _LISTED
            else (f"mends the first {_LISTED} of these problems (mend the others as well)")
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
        if any(_converted_by_hand(group, data) for group in shown):
            advice += "\nwhere convert(value) is yours to write: it returns the new value"
        if any(_source(function) == "..." for function in self.migrations.values()):
            advice += "\nwith each ... replaced by the step already given there"
        return (
            f"{advice}\n(a step from schema n gets the plain data of schema n, as dicts, "
            "lists, strings and numbers, and returns that of schema n + 1)"
        )
