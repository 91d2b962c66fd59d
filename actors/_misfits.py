"""How stored data that no longer fits its durable class is told, and the migration step
that would make it fit written out as code (`actors._durable`'s refusals).

A leaf beside `actors._durable`: reading cattrs' tree of errors into places, describing
what is stored and what is declared there, and writing a step's source.
"""

from __future__ import annotations

import builtins
import collections
import collections.abc
import enum
import itertools
import json
import keyword
import types
import typing
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
from cattrs.errors import (
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Set

__all__ = [
    "LISTED",
    "MISFITS",
    "Group",
    "bounded",
    "clipped",
    "converted_by_hand",
    "edited",
    "edits",
    "grouped",
    "is_collection",
    "misfits",
    "step_source",
    "told_all",
]

# cattrs says what failed as a tree of exceptions, each sub-exception noted with the
# field, index or key it was structuring. That tree is walked into `_Misfit`s, each
# a place in the stored data; misfits at the same place in every item of a list or
# dict (notes[0].text, notes[1].text) are one group, told and fixed once. A stored
# blob may be hostile or huge, so every piece of it quoted is clipped, and so many
# groups are told.

_SHOWN: Final = 40  # characters of a stored string, key or name quoted in a message
LISTED: Final = 5  # groups told (and fixed by the step); keys or names listed
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
class Group:
    """The misfits of one kind at one place: the first, how many, and (for extra) which
    names were found, a few of them."""

    first: _Misfit
    count: int = 1
    names: frozenset[str] = frozenset()


def misfits(exc: BaseException, path: tuple[_Step, ...], declared: Any) -> Iterator[_Misfit]:
    """The misfits cattrs' `exc` reports, found structuring `declared` at `path`."""
    if isinstance(exc, IterableValidationError):
        noted, unnoted = exc.group_exceptions()
        step: Literal["item", "value"] = "value" if _is_mapping(exc.cl) else "item"
        for inner, item_note in noted:
            yield from misfits(inner, (*path, (step, item_note.index)), item_note.type)
    elif isinstance(exc, ClassValidationError):
        class_noted, unnoted = exc.group_exceptions()
        for inner, field_note in class_noted:
            where = (*path, ("field", field_note.name))
            if isinstance(inner, KeyError) and inner.args == (field_note.name,):
                yield _Misfit("missing", where, field_note.type)
            else:
                yield from misfits(inner, where, field_note.type)
    else:
        yield _Misfit("wrong", path, declared)
        return
    for inner in unnoted:
        if isinstance(inner, ForbiddenExtraKeysError):
            yield _Misfit("extra", path, inner.cl, tuple(sorted(inner.extra_fields)))
        else:
            yield _Misfit("wrong", path, exc.cl)


def grouped(misfits: Iterable[_Misfit]) -> list[Group]:
    """`misfits` in groups of one kind and place, in the order first found."""
    groups: dict[tuple[str, tuple[_Step, ...]], Group] = {}
    for misfit in misfits:
        found = groups.get((misfit.kind, misfit.place))
        names = frozenset(misfit.names) | (found.names if found else frozenset())
        names = names if len(names) <= LISTED else frozenset(sorted(names)[: LISTED + 1])
        count = found.count + 1 if found else 1
        groups[misfit.kind, misfit.place] = Group(found.first if found else misfit, count, names)
    return list(groups.values())


def _is_mapping(kind: Any) -> bool:
    origin = typing.get_origin(kind) or kind
    return isinstance(origin, type) and issubclass(origin, collections.abc.Mapping)


def is_collection(kind: Any) -> bool:
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


def clipped(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"


def _listed(names: Iterable[str], total: int) -> str:
    """A few of `names`, each quoted (a stored name may hold a newline, a terminal escape)."""
    shown = [clipped(repr(name)) for name in itertools.islice(names, LISTED)]
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
        return f"a string {clipped(repr(value[: _SHOWN + 1]))}{length}"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"the number {clipped(repr(value))}"
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
            text += f"[{clipped(repr(name))}]"
    return text or "the state"


def _told(group: Group, data: Any) -> str:
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
    if is_collection(kind):
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
    if is_collection(kind) and not isinstance(value, list):
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


def edits(groups: list[Group], data: Any) -> list[_Edit]:
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


def _edit(group: Group, data: Any, renamed: Mapping[tuple[_Step, ...], str]) -> _Edit:
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


def _kept(group: Group, declared: Any) -> str:
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


def edited(edits: list[_Edit], expr: str, at: tuple[_Step, ...] = ()) -> str:
    """Python source for the value `expr` (at `at`) with `edits` made to it."""
    here = [edit for edit in edits if not edit.path]
    replaced = next((edit for edit in here if edit.kind == "replace"), None)
    if replaced is not None:
        others = [edit for edit in edits if edit is not replaced]
        if not others:
            return replaced.code(expr)
        # Items of one list stored in two shapes: the step tells them apart.
        return f"({replaced.code(expr)} if {replaced.test(expr)} else {edited(others, expr, at)})"
    deeper = [edit for edit in edits if edit.path]
    if deeper and deeper[0].path[0][0] != "field":  # into every item of a list or dict
        step = deeper[0].path[0]
        inner = [attrs.evolve(edit, path=edit.path[1:]) for edit in deeper if edit.path[0] == step]
        item = _item_name(at)
        value = edited(inner, item, (*at, step))
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
        f"{name!r}: {edited(inner, f'{expr}[{name!r}]', (*at, ('field', name)))}"
        for name, inner in fields.items()
    ]
    return f"{{**{base}, {', '.join(entries)}}}" if entries else base


# What structuring data that does not fit raises: cattrs' validation errors, and what a
# hook or cattrs itself raises on a value of another shape (a string where an object is).
MISFITS: Final = (BaseValidationError, TypeError, ValueError, KeyError, AttributeError)


def told_all(groups: list[Group], data: Any) -> str:
    """The first groups told, and how many more there are."""
    told = "; ".join(_told(group, data) for group in groups[:LISTED])
    more = len(groups) - LISTED
    return f"{told}; and {more} more problems" if more > 0 else told


def converted_by_hand(group: Group, data: Any) -> bool:
    """Whether the step's edit for `group` calls ``convert``, which the reader writes."""
    if group.first.kind != "wrong":
        return False
    return _conversion(_at(data, group.first.path), group.first.declared, "x") == "convert(x)"


def step_source(step: Callable[[Any], Any]) -> str:
    """How a migration already given is written in a `Durable(...)`: its name, if it has one."""
    name = getattr(step, "__name__", "")
    return name if name.isidentifier() else "..."


def bounded(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else f"{message[:_MAX_MESSAGE]}…"
