"""Back up and restore the state a store keeps: JSON lines, one per key, all checked first.

```python
scope = DumpScope(tenant="acme")
async with open_store("sqlite:///state.db", create="nothing") as store:
    count = await dump_state(store, "acme.jsonl", scope=scope)
    ...
    dump = check_dump(Path("acme.jsonl").read_bytes(), scope=scope)
    report = await restore_state(store, dump)
```

A dump is what ``mcp-actors state export`` writes and ``state import`` reads
(the command line calls these functions), one JSON line per key::

    {"key": {"module": "planning", "session": "s1", "assistant": null, "thread": null},
     "version": 3, "stored": {"schema": 1, "state": {...}}}

``stored`` is the blob parsed as JSON (what a durable module writes); a blob
that is not JSON comes as ``stored_text`` (UTF-8 text) or ``stored_base64``
(anything else) instead, so a dump never loses a byte. A state stored in parts
(``Durable(parts=...)``) has its header as ``stored`` and its parts in
``parts``, each part name → an object of the same three forms::

    {"key": {...}, "version": 4, "stored": {"schema": 3, "header": {...}},
     "parts": {"items:c1": {"stored": [...]}, "items:c2": {"stored": [...]}}}

Tenant-safe: every dump and every restore has a `DumpScope`, and none is the
default: one session, one tenant (``T`` and ``T/…``, never ``Tx`` or ``U/T``)
or, said in so many words, the whole store; optionally one module of it.

A restore is checked, then fenced. `check_dump` checks every line before
anything is written (JSON, arrays and objects nested at most 256 deep, fields,
ids by the protocol's rules, module names, a key given twice, every key inside
the scope) and raises `DumpError` naming each problem by line, so a bad dump
changes nothing. `restore_state` then writes each line only if its key is
still at the line's ``version`` (``null``: nothing was stored), leaving the key
with exactly the line's parts: a key that changed since the dump is refused,
never overwritten, and reported without the version now stored (a refusal is
no way to learn it: dump again).

A running server holds the state of its live keys in memory and writes it back
after each changing call: restore a key whose session is not live (stop the
server, or end the session, first). A restore that races a live server is
fenced by versions, but the server's copy then no longer matches the store.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from typing import TYPE_CHECKING, Any, Final, Protocol, final

import attrs
import trio

from protocol import (
    TENANT_SEPARATOR,
    ActorKey,
    ContextError,
    ToolContext,
    extract_context,
    tenant_of,
)

from .._names import check_name
from ._base import PartChanges, StoreError, VersionConflict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._base import StateStore, Stored, StoredEntry

__all__ = [
    "Dump",
    "DumpError",
    "DumpLine",
    "DumpScope",
    "DumpWriter",
    "RestoreReport",
    "RestoreStopped",
    "check_dump",
    "dump_state",
    "id_problem",
    "json_text",
    "key_json",
    "module_problem",
    "restore_state",
    "stored_entries",
    "stored_json",
    "tenant_problem",
]

_LOAD_CHUNK: Final = 256  # keys a dump loads at once
_ID_FIELDS: Final = {"session": "sessionId", "assistant": "assistantId", "thread": "threadId"}
_KEY_FIELDS: Final = ("module", "session", "assistant", "thread")
_BLOB_FIELDS: Final = ("stored", "stored_text", "stored_base64")
_LINE_FIELDS: Final = frozenset({"key", "version", "parts", *_BLOB_FIELDS})
# Arrays and objects within each other in one line. The line is scanned before it is
# parsed: json.loads recurses once per level, and a line nested 100 000 deep would end
# the restore with a RecursionError; a state nested near Python's recursion limit would
# also fail every load of it in a server (json.loads, then cattrs). The servers' JSON
# parser stops at 200 levels, so no state written through a call comes near this.
_MAX_DEPTH: Final = 256
_PART_DEPTH: Final = 3  # a part's value sits in its line, its "parts" and its own object
_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET: Final = re.compile(r"[\[\]{}]")
_NOT_JSON: Final = object()  # what `_parsed` gives for a text it will not parse


# ---- names -------------------------------------------------------------------------


def id_problem(field: str, value: object) -> str | None:
    """What breaks the protocol's id rules in `value`, or None: the protocol's own words.

    `field` is ``"session"``, ``"assistant"`` or ``"thread"``.
    """
    name = _ID_FIELDS[field]
    try:
        extract_context({}, {name: value})
    except ContextError as exc:
        return str(exc).replace(f"context field '_meta.{name}' ", "")
    return None


def tenant_problem(value: str) -> str | None:
    """What makes `value` no tenant (an id with no separator in it), or None."""
    problem = id_problem("session", value)
    if problem is None and TENANT_SEPARATOR in value:
        problem = (
            f"a tenant has no {TENANT_SEPARATOR!r}: it is what comes before the first one "
            "(name one session instead: --session, or session=)"
        )
    return problem


def module_problem(value: object) -> str | None:
    """What makes `value` no module name, or None."""
    if not isinstance(value, str):
        return f"must be a string, got {'null' if value is None else type(value).__name__}"
    try:
        check_name("module", value)
    except ValueError as exc:
        return str(exc)
    return None


# ---- the scope ---------------------------------------------------------------------


@final
@attrs.frozen(kw_only=True)
class DumpScope:
    """Which keys a dump holds, or a restore may write: give exactly one of the three.

    ``DumpScope(session="acme/42")``, ``DumpScope(tenant="acme")`` (the sessions
    ``acme`` and ``acme/…``) or ``DumpScope(whole_store=True)``; `module` narrows
    any of them to one module's keys. There is no default: leaving the scope out
    never reaches another tenant. Raises ValueError for a bad id or module name,
    or for a scope given twice or not at all.
    """

    session: str | None = None
    """Only this session's keys (its exact name)."""
    tenant: str | None = None
    """Only the keys of the sessions ``TENANT`` and ``TENANT/…``."""
    whole_store: bool = False
    """Every key, of every tenant."""
    module: str | None = None
    """Only this module's keys, within the scope; ``None``: every module's."""

    def __attrs_post_init__(self) -> None:
        given = [self.session is not None, self.tenant is not None, self.whole_store]
        if given.count(True) != 1:
            msg = (
                "a dump scope names exactly one of session=, tenant= or whole_store=True "
                f"(got {given.count(True)}): there is no default, so that none reaches "
                "another tenant's state"
            )
            raise ValueError(msg)
        for problem, field in (
            (None if self.session is None else id_problem("session", self.session), "session"),
            (None if self.tenant is None else tenant_problem(self.tenant), "tenant"),
            (None if self.module is None else module_problem(self.module), "module"),
        ):
            if problem is not None:
                msg = f"{field}: {problem}"
                raise ValueError(msg)

    def describe(self) -> str:
        """The scope in words: ``module 'm' of tenant 'acme'``, ``every session``…"""
        of_module = "" if self.module is None else f"module {self.module!r} of "
        return of_module + self.sessions()

    def sessions(self) -> str:
        """The sessions in words: ``session 's1'``, ``tenant 'acme'`` or ``every session``."""
        if self.session is not None:
            return f"session {self.session!r}"
        if self.tenant is not None:
            return f"tenant {self.tenant!r}"
        return "every session"

    def covers(self, key: ActorKey) -> bool:
        """Whether `key` is in the scope (a tenant's: sessions 'T' and 'T/…')."""
        if self.module is not None and key.module != self.module:
            return False
        session_id = key.context.session_id
        if self.session is not None:
            return session_id == self.session
        if self.tenant is not None:
            return tenant_of(session_id) == self.tenant
        return True


async def stored_entries(store: StateStore, scope: DumpScope) -> list[StoredEntry]:
    """What `store` holds in `scope`, without the blobs, in the store's order."""
    entries = await store.entries(session=scope.session, tenant=scope.tenant)
    return [entry for entry in entries if scope.module in (None, entry.key.module)]


# ---- the format --------------------------------------------------------------------


def json_text(value: Any, **options: Any) -> str:
    """JSON text; non-ASCII kept as it is unless it cannot be written (a lone surrogate)."""
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, **options)
    return text


def key_json(key: ActorKey) -> dict[str, str | None]:
    """A key as a dump's line gives it: module, session, assistant, thread."""
    context = key.context
    return {
        "module": key.module,
        "session": context.session_id,
        "assistant": context.assistant_id,
        "thread": context.thread_id,
    }


def stored_json(stored: Stored) -> dict[str, Any]:
    """The blob as ``stored``, ``stored_text`` or ``stored_base64``; the parts under ``parts``."""
    if not stored.parts:
        return _blob_json(stored.blob)
    parts = {name: _blob_json(blob) for name, blob in stored.parts.items()}
    return {**_blob_json(stored.blob), "parts": parts}


def _blob_json(blob: bytes) -> dict[str, Any]:
    """The blob as ``stored`` (parsed JSON), ``stored_text`` or ``stored_base64``.

    JSON nested too deep for a line (even as a part's value) comes as
    ``stored_text``: a dump is never refused by its restore, nor ends in a
    RecursionError parsing it.
    """
    try:
        text = blob.decode()
    except UnicodeDecodeError:
        return {"stored_base64": base64.b64encode(blob).decode("ascii")}
    parsed = _parsed(text, _MAX_DEPTH - _PART_DEPTH)
    return {"stored_text": text} if parsed is _NOT_JSON else {"stored": parsed}


def _depth_over(text: str, limit: int) -> int | None:
    """Where in `text` arrays and objects first nest deeper than `limit`, or None.

    Strings are skipped (a bracket in one is text); the rest is counted without
    parsing, so that no depth costs a recursion.
    """
    if text.count("[") + text.count("{") <= limit:
        return None  # the common case, without a scan
    depth = 0
    for bracket in _BRACKET.finditer(_STRING.sub(lambda string: " " * len(string[0]), text)):
        depth += 1 if bracket[0] in "[{" else -1
        if depth > limit:
            return bracket.start()
    return None


def _parsed(text: str, limit: int) -> Any:
    """`text` parsed as JSON, or `_NOT_JSON` if it is not JSON or nests deeper than `limit`."""
    if _depth_over(text, limit) is not None:
        return _NOT_JSON
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


# ---- dump --------------------------------------------------------------------------


class DumpWriter(Protocol):
    """Where `dump_state` writes, other than a file it makes: a trio text file, say."""

    async def write(self, text: str, /) -> object:
        """Write `text` (some whole lines)."""


async def dump_state(
    store: StateStore, destination: str | os.PathLike[str] | DumpWriter, *, scope: DumpScope
) -> int:
    """Write the keys of `scope` with their state, as JSON lines; return how many.

    `destination` is a path, made readable by its owner only (the dump holds
    every session's state of the scope) and never written over: an existing
    file raises FileExistsError, and a dump that fails is removed rather than
    left to pass for a whole one. Or it is a `DumpWriter`, which gets the text.
    A key deleted while the dump runs is left out. StoreError if the store fails.
    """
    entries = await stored_entries(store, scope)
    if not isinstance(destination, str | os.PathLike):
        return await _write_dump(store, entries, destination)
    # "x": never over an existing file; 0600: it holds the scope's state.
    file = await trio.open_file(destination, "x", encoding="utf-8", opener=_private_opener)
    try:
        async with file:
            return await _write_dump(store, entries, file)
    except BaseException:
        await trio.Path(destination).unlink(missing_ok=True)
        raise


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


async def _write_dump(store: StateStore, entries: Sequence[StoredEntry], out: DumpWriter) -> int:
    count = 0
    for start in range(0, len(entries), _LOAD_CHUNK):
        keys = [entry.key for entry in entries[start : start + _LOAD_CHUNK]]
        lines = [
            json_text(
                {"key": key_json(key), "version": stored.version, **stored_json(stored)},
                separators=(",", ":"),
            )
            + "\n"
            for key, stored in zip(keys, await _load_all(store, keys), strict=True)
            if stored is not None  # deleted since it was listed
        ]
        await out.write("".join(lines))
        count += len(lines)
    return count


async def _load_all(store: StateStore, keys: Sequence[ActorKey]) -> list[Stored | None]:
    """Each key's stored state, loaded together (the store batches them)."""
    found: list[Stored | None] = [None] * len(keys)
    failures: list[StoreError] = []

    async def load(index: int, key: ActorKey) -> None:
        try:
            found[index] = await store.load(key, parts=True)
        except StoreError as exc:  # kept out of the nursery's exception group
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        for index, key in enumerate(keys):
            nursery.start_soon(load, index, key)
    if failures:
        raise failures[0]
    return found


# ---- check -------------------------------------------------------------------------


@final
@attrs.frozen
class DumpLine:
    """One checked line of a dump."""

    number: int
    """Its line number in the dump, from 1."""
    key: ActorKey
    """The key it writes."""
    version: int | None
    """The version the key must still be at to be written (``None``: nothing stored)."""
    blob: bytes
    """The state it writes (a state stored in parts: the header)."""
    parts: Mapping[str, bytes]
    """The parts the key is to have (none for a state stored whole)."""


@final
@attrs.frozen
class Dump:
    """A dump whose every line passed `check_dump`: what `restore_state` writes."""

    lines: tuple[DumpLine, ...]
    """Its lines, in the dump's order, blank ones left out."""
    scope: DumpScope
    """The scope every key of it is in."""


class DumpError(ValueError):
    """A dump breaks the format's rules: nothing of it may be written.

    The message names the first problems; `problems` has every one, by line.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        """Each problem, ``line N: field: what is wrong``."""
        shown = "; ".join(self.problems[:3])
        more = f"; and {len(self.problems) - 3} more" if len(self.problems) > 3 else ""
        super().__init__(
            f"the dump has {len(self.problems)} problem(s), so nothing of it is restored: "
            f"{shown}{more}"
        )


class _BadLine(ValueError):
    """A line of a dump breaks a rule; the message names the field."""


def check_dump(data: bytes, *, scope: DumpScope) -> Dump:
    """The lines of `data` (a dump's bytes), every one checked; DumpError naming each problem.

    A key outside `scope` is a problem, as is a key on two lines: restore a
    whole-store backup with ``DumpScope(whole_store=True)``.
    """
    lines: list[DumpLine] = []
    problems: list[str] = []
    first_line_of: dict[ActorKey, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = _check_line(number, raw)
            _check_in_scope(line.key, scope)
        except _BadLine as exc:
            problems.append(f"line {number}: {exc}")
            continue
        first = first_line_of.setdefault(line.key, number)
        if first != number:
            problems.append(f"line {number}: key: {line.key} is on line {first} too")
            continue
        lines.append(line)
    if problems:
        raise DumpError(problems)
    return Dump(tuple(lines), scope)


def _check_line(number: int, raw: bytes) -> DumpLine:
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        msg = f"is not UTF-8 text (byte {exc.start})"
        raise _BadLine(msg) from None
    deep = _depth_over(text, _MAX_DEPTH)
    if deep is not None:
        msg = (
            f"nests arrays and objects deeper than {_MAX_DEPTH} levels (at character {deep}); "
            f"the limit is {_MAX_DEPTH}: a state nested so deep cannot be loaded"
        )
        raise _BadLine(msg)
    try:
        line = json.loads(text)
    except ValueError as exc:
        msg = f"is not JSON ({exc})"
        raise _BadLine(msg) from None
    if not isinstance(line, dict):
        msg = 'must be a JSON object {"key": ..., "version": ..., "stored": ...}'
        raise _BadLine(msg)
    unknown = sorted(set(line) - _LINE_FIELDS)
    if unknown:
        msg = f"unknown field(s) {', '.join(map(repr, unknown))}"
        raise _BadLine(msg)
    if "key" not in line:
        msg = "key: missing"
        raise _BadLine(msg)
    key = _check_key(line["key"])
    return DumpLine(number, key, _check_version(line), _check_blob(line), _check_parts(line))


def _check_key(value: object) -> ActorKey:
    if not isinstance(value, dict):
        msg = "key: must be an object with module, session, assistant and thread"
        raise _BadLine(msg)
    unknown = sorted(set(value) - set(_KEY_FIELDS))
    if unknown:
        msg = f"key: unknown field(s) {', '.join(map(repr, unknown))}; expected {_KEY_FIELDS}"
        raise _BadLine(msg)
    for field in ("module", "session"):
        if field not in value:
            msg = f"key.{field}: missing"
            raise _BadLine(msg)
    problem = module_problem(value["module"])
    if problem is not None:
        msg = f"key.module: {problem}"
        raise _BadLine(msg)
    for field in _ID_FIELDS:
        part = value.get(field)
        if field == "session" or part is not None:
            problem = id_problem(field, part)
            if problem is not None:
                msg = f"key.{field}: {problem}"
                raise _BadLine(msg)
    return ActorKey(
        value["module"], ToolContext(value["session"], value.get("assistant"), value.get("thread"))
    )


def _check_version(line: dict[str, Any]) -> int | None:
    if "version" not in line:
        msg = "version: missing; the key's version at export, or null if nothing was stored"
        raise _BadLine(msg)
    version = line["version"]
    if version is None:
        return None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        msg = f"version: must be a whole number of at least 1 or null, got {json.dumps(version)}"
        raise _BadLine(msg)
    return version


def _check_parts(line: dict[str, Any]) -> dict[str, bytes]:
    parts = line.get("parts", {})
    if not isinstance(parts, dict):
        msg = "parts: must be an object of part name → {stored | stored_text | stored_base64}"
        raise _BadLine(msg)
    checked: dict[str, bytes] = {}
    for name, part in parts.items():
        field, _, part_id = name.partition(":")
        if not field or not part_id:
            msg = f"parts.{name}: a part's name is FIELD:ID, as export writes it"
            raise _BadLine(msg)
        if not isinstance(part, dict) or set(part) - set(_BLOB_FIELDS):
            msg = f"parts.{name}: must be an object with one of {', '.join(_BLOB_FIELDS)}"
            raise _BadLine(msg)
        try:
            checked[name] = _check_blob(part)
        except _BadLine as exc:
            msg = f"parts.{name}: {exc}"
            raise _BadLine(msg) from None
    return checked


def _check_blob(line: dict[str, Any]) -> bytes:
    given = [field for field in _BLOB_FIELDS if field in line]
    if len(given) != 1:
        msg = (
            f"needs exactly one of {', '.join(_BLOB_FIELDS)}, "
            f"found {', '.join(given) if given else 'none'}"
        )
        raise _BadLine(msg)
    field = given[0]
    value = line[field]
    if field == "stored":
        return json_text(value, separators=(",", ":")).encode()
    if not isinstance(value, str):
        msg = f"{field}: must be a string, got {'null' if value is None else type(value).__name__}"
        raise _BadLine(msg)
    if field == "stored_text":
        try:
            return value.encode()
        except UnicodeEncodeError as exc:
            msg = f"stored_text: is not valid Unicode text ({exc.reason})"
            raise _BadLine(msg) from None
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        msg = f"stored_base64: is not base64 ({exc})"
        raise _BadLine(msg) from None


def _check_in_scope(key: ActorKey, scope: DumpScope) -> None:
    if scope.covers(key):
        return
    msg = (
        f"key: {key} is outside the import's scope ({scope.describe()}); import only the "
        "keys of the scope given (a whole-store backup: --all, DumpScope(whole_store=True))"
    )
    raise _BadLine(msg)


# ---- restore -----------------------------------------------------------------------


@final
@attrs.frozen
class RestoreReport:
    """What `restore_state` did with each line of a dump."""

    written: int
    """Lines written."""
    unchanged: int
    """Lines whose key already held exactly their state: nothing written."""
    refused: tuple[DumpLine, ...]
    """Lines whose key changed since the dump: not written (dump again, redo the change)."""
    total: int
    """Lines in the dump."""


class RestoreStopped(StoreError):
    """The store failed in the middle of a restore: the lines before `line` stay written."""

    def __init__(self, line: DumpLine, error: StoreError, report: RestoreReport) -> None:
        super().__init__(f"line {line.number}: {error}; the lines after it were not tried")
        self.line = line
        """The line whose load or write failed."""
        self.report = report
        """What was done before it."""


async def restore_state(store: StateStore, dump: Dump) -> RestoreReport:
    """Write each line of `dump` whose key is still at the line's version; say what was done.

    A line is written with exactly its parts (those the key held and the line
    has not are removed), behind the version fence: a key written since the
    dump is refused, even one written while this runs. A line whose key holds
    the same state already (equal bytes, or equal JSON) is left alone.
    RestoreStopped, with what was done so far, if the store fails.
    """
    written = unchanged = 0
    refused: list[DumpLine] = []
    for line in dump.lines:
        try:
            current = await store.load(line.key, parts=True)
            if (None if current is None else current.version) != line.version:
                refused.append(line)
                continue
            if current is not None and _same_state(current, line):
                unchanged += 1
                continue
            # Fenced by the version; the key is left with exactly the line's parts.
            await store.save(line.key, line.blob, line.version, changes=_changes(current, line))
        except VersionConflict:  # written since the load above
            refused.append(line)
            continue
        except StoreError as exc:
            so_far = RestoreReport(written, unchanged, tuple(refused), len(dump.lines))
            raise RestoreStopped(line, exc, so_far) from exc
        written += 1
    return RestoreReport(written, unchanged, tuple(refused), len(dump.lines))


def _same_state(current: Stored, line: DumpLine) -> bool:
    """Whether restoring `line` over `current` would change nothing."""
    parts = current.parts or {}
    return (
        _same(current.blob, line.blob)
        and parts.keys() == line.parts.keys()
        and all(_same(parts[name], blob) for name, blob in line.parts.items())
    )


def _changes(current: Stored | None, line: DumpLine) -> PartChanges | None:
    """What restoring `line` does to the key's parts: write its own, remove the others."""
    stored = set() if current is None or not current.parts else set(current.parts)
    if not stored and not line.parts:
        return None  # a state stored whole, as before parts existed
    removed = tuple(sorted(stored - line.parts.keys()))
    return PartChanges(tuple(line.parts.items()), removed)


def _same(stored: bytes, blob: bytes) -> bool:
    """Whether writing `blob` over `stored` would change nothing (equal bytes or equal JSON)."""
    if stored == blob:
        return True
    try:
        texts = stored.decode(), blob.decode()
    except UnicodeDecodeError:
        return False
    parsed = [_parsed(text, _MAX_DEPTH) for text in texts]
    return _NOT_JSON not in parsed and bool(parsed[0] == parsed[1])
