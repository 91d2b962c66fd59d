"""The call mix of a load run: which tools, with which arguments, how often.

A mix file is TOML, one ``[[call]]`` table per kind of call::

    [[call]]
    tool = "planning__create_goal"
    arguments = { goal = "goal {n} of caller {caller}" }
    weight = 1

    [[call]]
    tool = "planning__list_goals"
    weight = 3

``arguments`` (default none) is a template: any string in it, at any depth,
may hold the placeholders `PLACEHOLDERS` in braces (``{{`` and ``}}`` for
literal braces, a format spec such as ``{n:06}`` allowed), filled in afresh
for every call; other values are sent as written. ``weight`` (default 1) is
the call's share of the mix, relative to the others. ``meta`` (optional) is a
template too, sent as the request's ``_meta``.

``[[setup]]`` tables (optional) are calls made once on each session before the
load, in order; the text a setup call with a ``name`` answers becomes the
placeholder ``{name}`` in that session's later calls. A server that mints
session ids (FastMCP's ``create_session``) is loaded that way::

    [[setup]]
    tool = "create_session"
    name = "sid"

    [[call]]
    tool = "list_goals"
    arguments = { session_id = "{sid}" }

Every problem is a `MixError` naming the file, the entry and what is wrong;
`Mix.check_tools` adds the tools a server does not list.
"""

from __future__ import annotations

import itertools
import json
import math
import string
import tomllib
from typing import TYPE_CHECKING, Any, Final, final

import attrs

if TYPE_CHECKING:
    import random
    from collections.abc import Collection, Mapping
    from pathlib import Path

__all__ = ["PLACEHOLDERS", "Mix", "MixCall", "MixError", "load_mix", "one_tool_mix"]

PLACEHOLDERS: Final = {
    "session": "the number of the MCP session the call goes over (0, 1, ...)",
    "caller": "the number of the caller making it (0, 1, ...)",
    "n": "the call's number in the run, counted across all callers (0, 1, ...)",
    "random": "a random whole number from 0 to 2**32 - 1",
}
"""The placeholders a string of a template may hold, and what each is replaced with."""
_KEYS: Final = ("tool", "arguments", "weight", "meta")
_SETUP_KEYS: Final = ("tool", "arguments", "meta", "name")


class MixError(ValueError):
    """A mix that cannot be run; the message names the file, the entry and the problem."""


def _placeholders(text: str) -> list[str]:
    """The placeholder names in `text`, as `str.format` reads them."""
    return [field for _, field, _, _ in string.Formatter().parse(text) if field is not None]


def _check_template(value: object, where: str, named: Collection[str]) -> None:
    """Raise MixError for a string in `value` with a placeholder that is neither one of
    `PLACEHOLDERS` nor in `named` (the setup calls' names), or that cannot be formatted."""
    if isinstance(value, str):
        for field in _placeholders(value):
            if field not in PLACEHOLDERS and field not in named:
                known = ", ".join(f"{{{name}}}" for name in [*PLACEHOLDERS, *named])
                brace = "'{{' for a brace"
                msg = f"{where}: unknown placeholder {{{field}}} (known: {known}; {brace})"
                raise MixError(msg)
        try:
            # Format specs are checked on numbers: a setup call's text is rarely given one.
            value.format(**dict.fromkeys(PLACEHOLDERS, 0), **dict.fromkeys(named, ""))
        except (ValueError, IndexError) as exc:
            msg = f"{where}: {value!r} is not a valid template: {exc}"
            raise MixError(msg) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_template(item, f"{where}.{key}", named)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_template(item, f"{where}[{index}]", named)


def _render(value: object, values: Mapping[str, object]) -> object:
    """`value` with the placeholders of each string in it filled in."""
    if isinstance(value, str):
        return value.format(**values) if "{" in value or "}" in value else value
    if isinstance(value, dict):
        return {key: _render(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_render(item, values) for item in value]
    return value


@final
@attrs.frozen
class MixCall:
    """One kind of call in a mix: a tool, its argument template, its weight."""

    tool: str
    """The tool's name as the server lists it."""
    arguments: Mapping[str, object] = attrs.field(factory=dict)
    """The arguments, strings in them templates (`PLACEHOLDERS`)."""
    weight: float = 1.0
    """Its share of the calls, relative to the other entries' weights."""
    meta: Mapping[str, object] | None = None
    """The request's ``_meta``, a template like `arguments`; None sends none."""
    name: str | None = None
    """A setup call's: the placeholder its answer's text fills in the session's later calls."""

    def render(self, values: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The arguments and ``_meta`` of one call, `values` filling the placeholders."""
        arguments = _render(self.arguments, values)
        meta = None if self.meta is None else _render(self.meta, values)
        return arguments, meta  # type: ignore[return-value]  # dicts render to dicts


@final
@attrs.frozen
class Mix:
    """The calls of a load run and where they were read from."""

    calls: tuple[MixCall, ...]
    """The kinds of calls, in the order given."""
    source: str
    """The file the mix came from, or how it was given on the command line."""
    setup: tuple[MixCall, ...] = ()
    """Calls made once on each session before the load, in order."""
    _cumulative: tuple[float, ...] = attrs.field(init=False, repr=False)

    @_cumulative.default
    def _sum_weights(self) -> tuple[float, ...]:
        return tuple(itertools.accumulate(call.weight for call in self.calls))

    def pick(self, rng: random.Random) -> MixCall:
        """One call, drawn by weight."""
        return rng.choices(self.calls, cum_weights=self._cumulative)[0]

    def check_tools(self, listed: Collection[str]) -> None:
        """Raise MixError naming the entries whose tool is not among `listed`."""
        for kind, entries in (("setup", self.setup), ("call", self.calls)):
            for number, call in enumerate(entries, 1):
                if call.tool not in listed:
                    shown = ", ".join(sorted(listed)[:20]) or "none"
                    msg = (
                        f"{self.source}: {kind} {number}: tool {call.tool!r} is not in the "
                        f"server's tools/list (it lists {shown})"
                    )
                    raise MixError(msg)


def _table(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        msg = f"{where} must be a table, not {type(value).__name__} {value!r}"
        raise MixError(msg)
    return value


def _tool(entry: dict[str, object], keys: tuple[str, ...], where: str) -> str:
    """An entry's tool, once its keys are checked."""
    unknown = sorted(set(entry) - set(keys))
    if unknown:
        msg = f"{where}: unknown key(s) {', '.join(unknown)} (expected {', '.join(keys)})"
        raise MixError(msg)
    tool = entry.get("tool")
    if not isinstance(tool, str) or not tool:
        msg = f"{where}: 'tool' must be a tool's name, got {tool!r}"
        raise MixError(msg)
    return tool


def _templates(
    entry: dict[str, object], where: str, named: Collection[str]
) -> tuple[dict[str, object], dict[str, object] | None]:
    """An entry's arguments and meta, checked as templates."""
    arguments = _table(entry.get("arguments", {}), f"{where}: 'arguments'")
    _check_template(arguments, f"{where}: arguments", named)
    meta = entry.get("meta")
    if meta is None:
        return arguments, None
    meta = _table(meta, f"{where}: 'meta'")
    _check_template(meta, f"{where}: meta", named)
    return arguments, meta


def _entry(raw: object, where: str, named: Collection[str] = ()) -> MixCall:
    """One ``[[call]]`` table, checked; `named` are the setup calls' names."""
    entry = _table(raw, where)
    tool = _tool(entry, _KEYS, where)
    where = f"{where} ({tool})"
    weight = entry.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        msg = f"{where}: 'weight' must be a number, got {weight!r}"
        raise MixError(msg)
    if not 0 <= weight < math.inf:
        msg = f"{where}: 'weight' must be zero or more (and finite), got {weight!r}"
        raise MixError(msg)
    arguments, meta = _templates(entry, where, named)
    return MixCall(tool, arguments, float(weight), meta)


def _setup_entry(raw: object, where: str, named: list[str]) -> MixCall:
    """One ``[[setup]]`` table, checked; its name (if any) is added to `named`."""
    entry = _table(raw, where)
    tool = _tool(entry, _SETUP_KEYS, where)
    where = f"{where} ({tool})"
    arguments, meta = _templates(entry, where, named)  # earlier setup calls' names only
    name = entry.get("name")
    if name is not None:
        if not isinstance(name, str) or not name.isidentifier():
            msg = f"{where}: 'name' must be a placeholder's name (letters, digits, _), got {name!r}"
            raise MixError(msg)
        if name in PLACEHOLDERS or name in named:
            msg = f"{where}: the name {name!r} is taken: give another"
            raise MixError(msg)
        named.append(name)
    return MixCall(tool, arguments, 1.0, meta, name)


def _mix(calls: list[MixCall], source: str, setup: list[MixCall] | None = None) -> Mix:
    if not sum(call.weight for call in calls) > 0:
        msg = f"{source}: every weight is zero: give at least one call a positive weight"
        raise MixError(msg)
    return Mix(tuple(calls), source, tuple(setup or ()))


def load_mix(path: Path) -> Mix:
    """The mix in TOML file `path`; MixError naming the problem if it is not a valid one."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        msg = f"{path}: cannot read the mix file: {exc.strerror or exc}"
        raise MixError(msg) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        msg = f"{path}: not valid TOML: {exc}"
        raise MixError(msg) from None
    unknown = sorted(set(document) - {"call", "setup"})
    if unknown:
        msg = (
            f"{path}: unknown key(s) {', '.join(unknown)}: a mix is a list of [[call]] tables "
            "(and [[setup]] tables)"
        )
        raise MixError(msg)
    entries, setups = document.get("call"), document.get("setup", [])
    if not isinstance(entries, list) or not entries:
        msg = f"{path}: no calls: add at least one [[call]] table with a 'tool'"
        raise MixError(msg)
    if not isinstance(setups, list):
        msg = f"{path}: 'setup' must be a list of [[setup]] tables"
        raise MixError(msg)
    named: list[str] = []
    setup = [_setup_entry(raw, f"{path}: setup {n}", named) for n, raw in enumerate(setups, 1)]
    calls = [_entry(raw, f"{path}: call {n}", named) for n, raw in enumerate(entries, 1)]
    return _mix(calls, str(path), setup)


def one_tool_mix(tool: str, arguments: str = "{}") -> Mix:
    """A mix of one call: `tool` with `arguments`, a JSON object (a template, as in a file)."""
    source = "--tool/--arguments"
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        msg = f"{source}: --arguments is not valid JSON: {exc}"
        raise MixError(msg) from None
    return _mix([_entry({"tool": tool, "arguments": parsed}, f"{source}: call 1")], source)
