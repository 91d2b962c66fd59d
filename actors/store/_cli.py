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
JSON document. ``export`` writes a dump and ``import`` restores one, through
`actors.store.dump_state` and `actors.store.restore_state` (which say the
format): edit an export, import it with the scope it was exported with, and
each line is written only if the key is still at the line's ``version``. A key
that changed since the export is refused, never overwritten, and reported by
line; every line is checked first, so a bad file changes nothing.
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
import datetime
import os
import sys
from typing import TYPE_CHECKING, Final, final

import attrs
import trio

from protocol import ActorKey, ToolContext

from .._argparse import Parser, with_environment
from ._base import StoreError
from ._dump import (
    DumpError,
    DumpScope,
    RestoreStopped,
    check_dump,
    dump_state,
    id_problem,
    json_text,
    key_json,
    module_problem,
    restore_state,
    stored_entries,
    stored_json,
    tenant_problem,
)
from ._open import check_store_url, default_state_url, open_store
from ._option import StateUrls, joined, state_urls

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Sequence

    from ._base import StateStore, StoredEntry
    from ._dump import Dump, DumpLine

__all__ = ["main", "parser"]

_PROG: Final = "mcp-actors state"
_MAX_REPORTED: Final = 20  # problems of a bad import file printed before "and N more"

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


def _id_type(field: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        problem = id_problem(field, text)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return text

    return parse


def _tenant(text: str) -> str:
    problem = tenant_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _module(text: str) -> str:
    problem = module_problem(text)
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
        work = _Listing(out, _scope_of(args), args.json).run
    elif args.command == "show":
        work = _Show(out, _key_of(args)).run
    elif args.command == "export":
        work = _Export(out, _scope_of(args), args.output).run
    elif args.command == "import":
        dump = _read_import(out, args.file, _scope_of(args))
        if dump is None:
            return 1
        work = _Import(out, args.file, dump).run
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


def _scope_of(args: argparse.Namespace) -> DumpScope:
    return DumpScope(
        session=args.session, tenant=args.tenant, whole_store=args.all, module=args.module
    )


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


def _time(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="seconds")


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


def _nothing_in(scope: DumpScope) -> str:
    of_module = "" if scope.module is None else f" of module {scope.module!r}"
    if scope.whole_store:
        return f"nothing stored{of_module}"
    return f"nothing stored{of_module} for {scope.sessions()}"


@final
@attrs.frozen
class _Listing:
    """``list``: the keys in scope, as a table or as JSON lines."""

    out: _Output
    scope: DumpScope
    as_json: bool

    async def run(self, store: StateStore) -> int:
        entries = await stored_entries(store, self.scope)
        if not entries:
            self.out.note(_nothing_in(self.scope))
            return 0
        if self.as_json:
            lines = [
                json_text(
                    {
                        "key": key_json(entry.key),
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
            "key": key_json(self.key),
            "version": stored.version,
            "size": stored.size,
            "used_at": used_at,
            **stored_json(stored),
        }
        sys.stdout.write(json_text(document, indent=2) + "\n")
        return 0


@final
@attrs.frozen
class _Stdout:
    """The dump's lines to stdout (a reader gone away ends the command quietly: see `main`)."""

    async def write(self, text: str) -> None:
        sys.stdout.write(text)


@final
@attrs.frozen
class _Export:
    """``export``: the keys in scope with their state, as a dump (`dump_state`)."""

    out: _Output
    scope: DumpScope
    output: str | None

    async def run(self, store: StateStore) -> int:
        if self.output is None:
            count = await dump_state(store, _Stdout(), scope=self.scope)
            self.out.note(f"exported {count} key(s) of {self.scope.sessions()}")
            return 0
        try:
            count = await dump_state(store, self.output, scope=self.scope)
        except OSError as exc:  # made, not written over: the file is gone again
            return self.out.error(f"cannot write the export to {self.output}: {exc}")
        self.out.note(f"exported {count} key(s) of {self.scope.sessions()} to {self.output}")
        return 0


# ---- import ------------------------------------------------------------------------


def _read_import(out: _Output, path: str, scope: DumpScope) -> Dump | None:
    """The checked dump in `path`; None (and the problems reported) if any line is bad."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as file:
                data = file.read()
    except OSError as exc:
        out.error(f"cannot read {path}: {exc}")
        return None
    try:
        return check_dump(data, scope=scope)
    except DumpError as exc:
        for problem in exc.problems[:_MAX_REPORTED]:
            out.error(f"{path}: {problem}")
        if len(exc.problems) > _MAX_REPORTED:
            out.error(f"{path}: and {len(exc.problems) - _MAX_REPORTED} more problem(s)")
        out.error(f"{path}: nothing was imported; correct the file and import it again")
        return None


@final
@attrs.frozen
class _Import:
    """``import``: a checked dump, each line written only if its key is still at its version."""

    out: _Output
    path: str
    dump: Dump

    async def run(self, store: StateStore) -> int:
        failed: str | None = None
        try:
            report = await restore_state(store, self.dump)
        except RestoreStopped as exc:  # the lines before it stay written: say which
            report, failed = exc.report, f"{self.path}: {exc}"
        for line in report.refused:
            self.out.error(self._changed(line))
        if failed is not None:
            self.out.error(failed)
        sys.stdout.write(
            f"written {report.written}, unchanged {report.unchanged}, "
            f"refused {len(report.refused)} (of {report.total} key(s) in {self.path})\n"
        )
        return 1 if report.refused or failed else 0

    def _changed(self, line: DumpLine) -> str:
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
