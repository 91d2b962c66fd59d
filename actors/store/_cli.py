"""``python -m actors state``: look at and repair the state a store keeps.

An operator's tool over any store ``serve`` can use (``--state URL``; without
it, the SQLite file ``serve`` uses when it is given none)::

    list   (--session S | --tenant T | --all) [--module M] [--json]
    show   --session S --module M [--assistant A] [--thread T]
    export (--session S | --tenant T | --all) [--module M] [--output FILE]
    import (--session S | --tenant T | --all) [--module M] FILE
    delete --session S [--module M [--assistant A] [--thread T]]

``list`` prints one line per key: module, session, assistant, thread, version,
size in bytes and when it was last written or used (UTC). Ids are printed
quoted (``'s1'``, non-printable characters escaped) and an absent part as a
bare ``-``, so an assistant literally named ``-`` reads ``'-'``. With
``--json`` each line is a JSON object instead. ``show`` prints one key as a
JSON document. ``export`` writes JSON lines, one per key::

    {"key": {"module": "planning", "session": "s1", "assistant": null, "thread": null},
     "version": 3, "stored": {"schema": 1, "state": {...}}}

``stored`` is the blob parsed as JSON (what a durable module writes); a blob
that is not JSON comes as ``stored_text`` (UTF-8 text) or ``stored_base64``
(anything else) instead, so an export never loses a byte. A state stored in
parts (``Durable(parts=...)``) has its header as ``stored`` and its parts in
``parts``, each part name → an object of the same three forms::

    {"key": {...}, "version": 4, "stored": {"schema": 3, "header": {...}},
     "parts": {"items:c1": {"stored": [...]}, "items:c2": {"stored": [...]}}}

An imported line with ``parts`` leaves the key with exactly those parts. ``import`` reads
the same lines: edit an export, import it with the scope it was exported
with, and each line is written only if the key is still at the line's
``version`` (``null``: nothing was stored). A key that changed since the
export is refused, never overwritten, and reported by line, without the
version now stored (a refusal is no way to learn it: export again). Every line
is checked before anything is written (JSON, arrays and objects nested at
most 256 deep, fields, ids by the protocol's rules, module names, a key
given twice, every key inside the scope), so a bad file changes nothing.
``delete`` removes one key, or every key of one session.

Tenant-safe defaults: the listing, exporting and importing commands have no
default scope. One of ``--session``, ``--tenant`` (``T`` and ``T/…``, never
``Tx`` or ``U/T``) or an explicit ``--all`` is required, so an operator
acting for one tenant never sees another's state, nor writes it, by leaving
an option out: an import refuses a file with any key outside its scope (a
whole-store backup is imported with ``--all``).
``show`` and ``delete`` take exact names only: no pattern, no prefix, no
tenant-wide delete. Ids are data: ``%``, ``_`` or quotes match themselves.
The store is opened as it is: a missing SQLite file is an error, never a new
empty store (a typo in a path must not look like a store with nothing in it).
Several ``--state`` PostgreSQL URLs name a store split by session (see
`actors.store.open_split_store`): each command spans its partitions, and a
split not recorded in them is an error too.

A running server holds the state of its live keys in memory and writes it
back after each changing call. Repair a key whose session is not live: stop
the server, or end the session, first. An import that races a live server is
fenced by versions (the server's next write, or the import, is refused), but
the server's copy then no longer matches the store.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Final, final

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

from .._argparse import Parser, with_environment
from .._module import _check_name
from ._base import PartChanges, StoreError, VersionConflict
from ._open import check_store_url, default_state_url, open_store
from ._option import StateUrls, joined, state_urls

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Sequence

    from ._base import StateStore, Stored, StoredEntry

__all__ = ["main", "parser"]

_PROG: Final = "mcp-actors state"
_LOAD_CHUNK: Final = 256  # keys an export loads at once
_MAX_REPORTED: Final = 20  # problems of a bad import file printed before "and N more"
_ID_FIELDS: Final = {"session": "sessionId", "assistant": "assistantId", "thread": "threadId"}
_KEY_FIELDS: Final = ("module", "session", "assistant", "thread")
_BLOB_FIELDS: Final = ("stored", "stored_text", "stored_base64")
_LINE_FIELDS: Final = frozenset({"key", "version", "parts", *_BLOB_FIELDS})
# Arrays and objects within each other in one import line. The line is scanned before it is
# parsed: json.loads recurses once per level, and a line nested 100 000 deep would end the tool
# with a RecursionError; a state nested near Python's recursion limit would also fail every
# load of it in a server (json.loads, then cattrs). The servers' JSON parser stops at 200
# levels, so no state written through a call comes near this.
_MAX_DEPTH: Final = 256
_PART_DEPTH: Final = 3  # a part's value sits in its line, its "parts" and its own object
_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET: Final = re.compile(r"[\[\]{}]")
_NOT_JSON: Final = object()  # what `_parsed` gives for a text it will not parse

_DESCRIPTION: Final = """\
Look at and repair the durable state a store keeps: list keys, show one,
export them as JSON lines, import an edited export, delete a key or a session.
"""

_EPILOG: Final = """\
scope:
  list, export and import need --session S, --tenant T (the sessions 'T' and
  'T/...') or --all: nothing is listed, nor imported, by default. An import
  with a key outside its scope writes nothing. show and delete take exact names.

repair:
  Stop the server (or end the session) first: a live server keeps its keys'
  state in memory. Then export, edit the 'stored' value, and import:
    mcp-actors state export --session s1 --output s1.jsonl
    mcp-actors state import --session s1 s1.jsonl
  A line is written only if its key is still at the exported version.

examples:
  mcp-actors state list --tenant acme
  mcp-actors state show --session acme/42 --module planning --assistant a1
  mcp-actors state delete --session acme/42 --module content_store
"""


# ---- argument types ----------------------------------------------------------------


def _id_problem(field: str, value: object) -> str | None:
    """What breaks the protocol's id rules in `value`, or None: the protocol's own words."""
    name = _ID_FIELDS[field]
    try:
        extract_context({}, {name: value})
    except ContextError as exc:
        return str(exc).replace(f"context field '_meta.{name}' ", "")
    return None


def _module_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {'null' if value is None else type(value).__name__}"
    try:
        _check_name("module", value)
    except ValueError as exc:
        return str(exc)
    return None


def _id_type(field: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        problem = _id_problem(field, text)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return text

    return parse


def _tenant(text: str) -> str:
    problem = _id_problem("session", text)
    if problem is None and TENANT_SEPARATOR in text:
        problem = (
            f"a tenant has no {TENANT_SEPARATOR!r}: it is what comes before the first one "
            "(name one session with --session)"
        )
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _module(text: str) -> str:
    problem = _module_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


# ---- the command line --------------------------------------------------------------


def parser(prog: str = _PROG) -> argparse.ArgumentParser:
    """The ``state`` command line."""
    cli = Parser(
        prog=prog,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    state_help = (
        "the store: sqlite:///PATH or postgresql://USER@HOST/DB, repeated for each partition "
        "of a store split by session (default: the file a stdio serve uses by default, "
        "$XDG_STATE_HOME/mcp-actors/state.db; an HTTP serve's is http-state.db beside it)"
    )
    cli.add_argument("--state", metavar="URL", action=StateUrls, type=state_urls, help=state_help)
    # Also accepted after the command, kept apart from those before it (see `joined`).
    common = Parser(add_help=False, with_version=False)
    common.add_argument(
        "--state",
        dest="state_after",
        metavar="URL",
        action=StateUrls,
        type=state_urls,
        default=argparse.SUPPRESS,
        help=state_help,
    )
    commands = cli.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = commands.add_parser(
        "list", parents=[common], help="list stored keys, without their state"
    )
    _add_scope(listing)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")

    show = commands.add_parser("show", parents=[common], help="print one key's stored state")
    _add_key(show, required=True)

    export = commands.add_parser(
        "export", parents=[common], help="write stored keys and their state as JSON lines"
    )
    _add_scope(export)
    export.add_argument(
        "--output",
        metavar="FILE",
        help="write to FILE (made readable by you only; refused if it exists), not stdout",
    )

    importing = commands.add_parser(
        "import",
        parents=[common],
        help="write the keys of an (edited) export, each only if unchanged since",
    )
    _add_scope(importing, "import only keys", " (a file with any other key writes nothing)")
    importing.add_argument(
        "file", metavar="FILE", help="JSON lines as export writes them; - for stdin"
    )

    delete = commands.add_parser(
        "delete", parents=[common], help="delete one key (with --module), or a whole session"
    )
    _add_key(delete, required=False)
    return with_environment(cli)


def _add_scope(command: argparse.ArgumentParser, keys: str = "the keys", then: str = "") -> None:
    scope = command.add_mutually_exclusive_group(required=True)
    scope.add_argument("--session", type=_id_type("session"), help=f"{keys} of this session{then}")
    scope.add_argument(
        "--tenant", type=_tenant, help=f"{keys} of the sessions 'TENANT' and 'TENANT/...'{then}"
    )
    scope.add_argument("--all", action="store_true", help="every key, of every tenant")
    command.add_argument("--module", type=_module, help=f"only this module's keys{then}")


def _add_key(command: argparse.ArgumentParser, *, required: bool) -> None:
    command.add_argument(
        "--session", type=_id_type("session"), required=True, help="the session (its exact name)"
    )
    module_help = "the module" if required else "the module (without it: every key of the session)"
    command.add_argument("--module", type=_module, required=required, help=module_help)
    command.add_argument(
        "--assistant", type=_id_type("assistant"), help="the assistant, for a module keyed by it"
    )
    command.add_argument(
        "--thread", type=_id_type("thread"), help="the thread, for a module keyed by it"
    )


def main(argv: Sequence[str] | None = None, prog: str = _PROG) -> int:
    """Run ``state`` with the arguments `argv`; returns the process exit code."""
    cli = parser(prog)
    args = cli.parse_args(argv)
    if hasattr(args, "state_after"):
        args.state = joined(args.state, args.state_after, cli.get_default("state"))
    url: str | tuple[str, ...] = default_state_url() if args.state is None else args.state
    try:
        kind = check_store_url(url)
    except ValueError as exc:
        cli.error(f"--state: {exc}")
    if kind == "memory":
        cli.error(
            "--state memory names a store that lives and dies inside one process; name the "
            "store the server uses: sqlite:///PATH or postgresql://USER@HOST/DB"
        )
    if args.command == "delete" and args.module is None and (args.assistant or args.thread):
        cli.error("--assistant and --thread name a key within a module: add --module")
    out = _Output(cli.prog)
    work: Callable[[StateStore], Awaitable[int]]
    if args.command == "list":
        work = _Listing(out, _scope_of(args), args.module, args.json).run
    elif args.command == "show":
        work = _Show(out, _key_of(args)).run
    elif args.command == "export":
        work = _Export(out, _scope_of(args), args.module, args.output).run
    elif args.command == "import":
        lines = _read_import(out, args.file, _scope_of(args), args.module)
        if lines is None:
            return 1
        work = _Import(out, args.file, lines).run
    else:
        key = None if args.module is None else _key_of(args)
        work = _Delete(out, args.session, key).run
    code = 1
    broken = False
    try:
        code = trio.run(_with_store, out, url, args.state is None, work)
        sys.stdout.flush()
    except* BrokenPipeError:
        broken = True
    if broken:  # the reader went away (| head): stop quietly, and stay quiet at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


@final
@attrs.frozen
class _Scope:
    """Which sessions a listing or an export covers."""

    session: str | None
    tenant: str | None

    def describe(self) -> str:
        """The scope in words: ``session 's1'``, ``tenant 'acme'`` or ``every session``."""
        if self.session is not None:
            return f"session {self.session!r}"
        if self.tenant is not None:
            return f"tenant {self.tenant!r}"
        return "every session"

    def covers(self, session_id: str) -> bool:
        """Whether the session `session_id` is in scope (a tenant's: 'T' and 'T/…')."""
        if self.session is not None:
            return session_id == self.session
        if self.tenant is not None:
            return tenant_of(session_id) == self.tenant
        return True


def _scope_of(args: argparse.Namespace) -> _Scope:
    return _Scope(args.session, args.tenant)  # both None: --all


def _key_of(args: argparse.Namespace) -> ActorKey:
    return ActorKey(args.module, ToolContext(args.session, args.assistant, args.thread))


@final
@attrs.frozen
class _Output:
    """Where messages go: stdout carries only what a command was asked for."""

    prog: str

    def error(self, message: str) -> int:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        return 1

    def note(self, message: str) -> None:
        print(f"{self.prog}: {message}", file=sys.stderr)


async def _with_store(
    out: _Output,
    url: str | tuple[str, ...],
    default: bool,
    work: Callable[[StateStore], Awaitable[int]],
) -> int:
    """Open the store as it is (nothing made), run `work` on it; exit 1 if the store fails."""
    try:
        async with open_store(url, create="nothing") as store:
            # Caught here, inside the store's nursery, so that it comes out as it is.
            try:
                return await work(store)
            except StoreError as exc:
                return out.error(str(exc))
    except StoreError as exc:
        hint = (
            " (the default store: name the one the server uses with --state URL)" if default else ""
        )
        return out.error(f"{exc}{hint}")


# ---- rendering ---------------------------------------------------------------------


def _dumps(value: Any, **options: Any) -> str:
    """JSON text; non-ASCII kept as it is unless it cannot be written (a lone surrogate)."""
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, **options)
    return text


def _key_json(key: ActorKey) -> dict[str, str | None]:
    context = key.context
    return {
        "module": key.module,
        "session": context.session_id,
        "assistant": context.assistant_id,
        "thread": context.thread_id,
    }


def _time(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="seconds")


def _stored_json(stored: Stored) -> dict[str, Any]:
    """The blob as `_blob_json` gives it, and the parts, if any, under ``parts``."""
    if not stored.parts:
        return _blob_json(stored.blob)
    parts = {name: _blob_json(blob) for name, blob in stored.parts.items()}
    return {**_blob_json(stored.blob), "parts": parts}


def _blob_json(blob: bytes) -> dict[str, Any]:
    """The blob as ``stored`` (parsed JSON), ``stored_text`` or ``stored_base64``.

    JSON nested too deep for an import line (even as a part's value) comes as
    ``stored_text``: an export is never refused by the import, nor ends in a
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


def _part(value: str | None) -> str:
    """An id quoted (non-printable characters escaped), an absent part as a bare ``-``."""
    return "-" if value is None else repr(value)


def _table(entries: Iterable[StoredEntry]) -> list[str]:
    rows = [("MODULE", "SESSION", "ASSISTANT", "THREAD", "VERSION", "BYTES", "USED (UTC)")]
    for entry in entries:
        context = entry.key.context
        module = entry.key.module
        rows.append(
            (
                module if module.isidentifier() else repr(module),
                _part(context.session_id),
                _part(context.assistant_id),
                _part(context.thread_id),
                str(entry.version),
                str(entry.size),
                _time(entry.used_at),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


# ---- the commands ------------------------------------------------------------------


async def _entries(store: StateStore, scope: _Scope, module: str | None) -> list[StoredEntry]:
    entries = await store.entries(session=scope.session, tenant=scope.tenant)
    return [entry for entry in entries if module is None or entry.key.module == module]


def _nothing_in(scope: _Scope, module: str | None) -> str:
    of_module = "" if module is None else f" of module {module!r}"
    if scope.session is None and scope.tenant is None:
        return f"nothing stored{of_module}"
    return f"nothing stored{of_module} for {scope.describe()}"


@final
@attrs.frozen
class _Listing:
    """``list``: the keys in scope, as a table or as JSON lines."""

    out: _Output
    scope: _Scope
    module: str | None
    as_json: bool

    async def run(self, store: StateStore) -> int:
        entries = await _entries(store, self.scope, self.module)
        if not entries:
            self.out.note(_nothing_in(self.scope, self.module))
            return 0
        if self.as_json:
            lines = [
                _dumps(
                    {
                        "key": _key_json(entry.key),
                        "version": entry.version,
                        "size": entry.size,
                        "used_at": _time(entry.used_at),
                    }
                )
                for entry in entries
            ]
        else:
            lines = _table(entries)
        sys.stdout.write("".join(line + "\n" for line in lines))
        return 0


@final
@attrs.frozen
class _Show:
    """``show``: one key and its stored state, as one JSON document."""

    out: _Output
    key: ActorKey

    async def run(self, store: StateStore) -> int:
        stored = await store.load(self.key, parts=True)
        if stored is None:
            return self.out.error(
                f"nothing stored for {self.key}; list the session's keys with: "
                f"list --session {self.key.context.session_id!r}"
            )
        used_at = next(
            (
                _time(entry.used_at)
                for entry in await store.entries(session=self.key.context.session_id)
                if entry.key == self.key
            ),
            None,
        )
        document = {
            "key": _key_json(self.key),
            "version": stored.version,
            "size": stored.size,
            "used_at": used_at,
            **_stored_json(stored),
        }
        sys.stdout.write(_dumps(document, indent=2) + "\n")
        return 0


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


async def _write_stdout(text: str) -> None:
    sys.stdout.write(text)


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


@final
@attrs.frozen
class _Export:
    """``export``: the keys in scope with their state, as JSON lines."""

    out: _Output
    scope: _Scope
    module: str | None
    output: str | None

    async def run(self, store: StateStore) -> int:
        entries = await _entries(store, self.scope, self.module)
        if self.output is None:
            count = await self._write(store, entries, _write_stdout)
            self.out.note(f"exported {count} key(s) of {self.scope.describe()}")
            return 0
        try:
            # "x": never over an existing file; 0600: it holds every exported session's state.
            file = await trio.open_file(self.output, "x", encoding="utf-8", opener=_private_opener)
        except OSError as exc:
            return self.out.error(f"cannot write the export to {self.output}: {exc}")
        try:
            async with file:
                count = await self._write(store, entries, file.write)
        except BaseException:
            # Half an export must not pass for a whole one.
            await trio.Path(self.output).unlink(missing_ok=True)
            raise
        self.out.note(f"exported {count} key(s) of {self.scope.describe()} to {self.output}")
        return 0

    async def _write(
        self,
        store: StateStore,
        entries: Sequence[StoredEntry],
        write: Callable[[str], Awaitable[object]],
    ) -> int:
        count = 0
        for start in range(0, len(entries), _LOAD_CHUNK):
            keys = [entry.key for entry in entries[start : start + _LOAD_CHUNK]]
            lines = [
                _dumps(
                    {"key": _key_json(key), "version": stored.version, **_stored_json(stored)},
                    separators=(",", ":"),
                )
                + "\n"
                for key, stored in zip(keys, await _load_all(store, keys), strict=True)
                if stored is not None  # deleted since it was listed
            ]
            await write("".join(lines))
            count += len(lines)
        return count


# ---- import ------------------------------------------------------------------------


@final
@attrs.frozen
class _Line:
    """One checked line of an import file."""

    number: int
    key: ActorKey
    version: int | None
    blob: bytes
    parts: dict[str, bytes]
    """The parts the key is to have (none for a state stored whole)."""


class _BadLine(ValueError):
    """A line of an import file breaks a rule; the message names the field."""


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
    problem = _module_problem(value["module"])
    if problem is not None:
        msg = f"key.module: {problem}"
        raise _BadLine(msg)
    for field in _ID_FIELDS:
        part = value.get(field)
        if field == "session" or part is not None:
            problem = _id_problem(field, part)
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
        return _dumps(value, separators=(",", ":")).encode()
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


def _check_line(number: int, raw: bytes) -> _Line:
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
    return _Line(number, key, _check_version(line), _check_blob(line), _check_parts(line))


def _check_lines(data: bytes, scope: _Scope, module: str | None) -> tuple[list[_Line], list[str]]:
    """The lines of an import file, and every problem found in them (by line number)."""
    lines: list[_Line] = []
    problems: list[str] = []
    first_line_of: dict[ActorKey, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = _check_line(number, raw)
            _check_in_scope(line.key, scope, module)
        except _BadLine as exc:
            problems.append(f"line {number}: {exc}")
            continue
        first = first_line_of.setdefault(line.key, number)
        if first != number:
            problems.append(f"line {number}: key: {line.key} is on line {first} too")
            continue
        lines.append(line)
    return lines, problems


def _check_in_scope(key: ActorKey, scope: _Scope, module: str | None) -> None:
    if scope.covers(key.context.session_id) and module in (None, key.module):
        return
    of_module = "" if module is None else f"module {module!r} of "
    msg = (
        f"key: {key} is outside the import's scope ({of_module}{scope.describe()}); "
        "import only the keys of the scope given (a whole-store backup: --all)"
    )
    raise _BadLine(msg)


def _read_import(out: _Output, path: str, scope: _Scope, module: str | None) -> list[_Line] | None:
    """The checked lines of `path`; None (and the problems reported) if any line is bad."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as file:
                data = file.read()
    except OSError as exc:
        out.error(f"cannot read {path}: {exc}")
        return None
    lines, problems = _check_lines(data, scope, module)
    if problems:
        for problem in problems[:_MAX_REPORTED]:
            out.error(f"{path}: {problem}")
        if len(problems) > _MAX_REPORTED:
            out.error(f"{path}: and {len(problems) - _MAX_REPORTED} more problem(s)")
        out.error(f"{path}: nothing was imported; correct the file and import it again")
        return None
    return lines


def _same_state(current: Stored, line: _Line) -> bool:
    """Whether importing `line` over `current` would change nothing."""
    parts = current.parts or {}
    return (
        _same(current.blob, line.blob)
        and parts.keys() == line.parts.keys()
        and all(_same(parts[name], blob) for name, blob in line.parts.items())
    )


def _changes(current: Stored | None, line: _Line) -> PartChanges | None:
    """What importing `line` does to the key's parts: write its own, remove the others."""
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


@final
@attrs.frozen
class _Import:
    """``import``: checked lines, each written only if its key is still at its version."""

    out: _Output
    path: str
    lines: Sequence[_Line]

    async def run(self, store: StateStore) -> int:
        written = unchanged = 0
        refused: list[str] = []
        failed: str | None = None
        for line in self.lines:
            try:
                current = await store.load(line.key, parts=True)
                if (None if current is None else current.version) != line.version:
                    refused.append(self._changed(line))
                    continue
                if current is not None and _same_state(current, line):
                    unchanged += 1
                    continue
                # Fenced by the version; the key is left with exactly the line's parts.
                await store.save(line.key, line.blob, line.version, changes=_changes(current, line))
            except VersionConflict:  # written since the load above
                refused.append(self._changed(line))
                continue
            except StoreError as exc:  # the lines before this one stay written: say which
                failed = (
                    f"{self.path}: line {line.number}: {exc}; the lines after it were not tried"
                )
                break
            written += 1
        for reason in refused if failed is None else [*refused, failed]:
            self.out.error(reason)
        sys.stdout.write(
            f"written {written}, unchanged {unchanged}, refused {len(refused)} "
            f"(of {len(self.lines)} key(s) in {self.path})\n"
        )
        return 1 if refused or failed else 0

    def _changed(self, line: _Line) -> str:
        # No version in the words: a refusal that named the stored one was an edit away
        # from an overwrite (the line's version set to it, the import run again).
        return (
            f"{self.path}: line {line.number}: {line.key}: the stored state changed since the "
            "export; not written: export it again and redo the change"
        )


# ---- delete ------------------------------------------------------------------------


@final
@attrs.frozen
class _Delete:
    """``delete``: one key, or every key of one session."""

    out: _Output
    session: str
    key: ActorKey | None

    async def run(self, store: StateStore) -> int:
        if self.key is not None:
            if not await store.delete(self.key):
                return self.out.error(f"nothing stored for {self.key}")
            sys.stdout.write(f"deleted {self.key}\n")
            return 0
        count = await store.delete_session(self.session)
        if count == 0:
            return self.out.error(f"nothing stored for session {self.session!r}")
        sys.stdout.write(f"deleted {count} key(s) of session {self.session!r}\n")
        return 0
