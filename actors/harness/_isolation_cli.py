"""``mcp-actors check-isolation``: the isolation check against any MCP server, from a shell.

The target, the era and the handles are named as for ``mcp-actors bench``
(`actors.harness._cli`). How the check's sessions map onto the server follows from
the templates:

* when they name the session (``{session}``, or ``{setup}``: the server keys its
  state by an argument), or the sessions carry handles (``--handles``), every
  session goes through **one** connection, so that state the server shares between
  them (a global, or the connection's) shows as a leak;
* otherwise each session is a connection of its own (a process over stdio, an
  HTTP client), and the connection is what the server keys its state by: in the
  2026-07-28 era, where no request carries a protocol session, a server that keys
  state by one loses every write.

Exit status: 0 the check passed, 1 it found a leak or a lost write, 2 bad usage,
3 it could not run (the server would not start, or a call answered an error), 4 no
verdict (the server stopped answering: a call or a session's opening unanswered
within its timeout, a connection closed mid-call, an answer that is not MCP; or
``--max-time`` ran out), 130 a signal ended it. Neither 3 nor 4 is shrunk: the check
stops at the first call that fails.
"""

from __future__ import annotations

import argparse
import functools
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import trio

from .._argparse import positive_int, positive_seconds
from ._cli import check_target, handles_of, open_target, run_until_signalled, targeting_parser
from ._eras import era_hint
from ._isolation import (
    SESSION,
    SETUP,
    Budget,
    IsolationCheckError,
    NoVerdict,
    Timeouts,
    ToolCall,
)
from ._isolation_check import check_isolation, check_templates
from ._load import unwrapped
from ._targets import NoAnswer, TargetError, garbage_note, quiet_sdk_garbage_logs

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from mcp import ClientSession

    from ._handles import Handles
    from ._isolation import IsolationReport, SessionFactory
    from ._targets import Target

__all__ = ["main", "parser"]

_DESCRIPTION: Final = """\
Check that no session of an MCP server ever sees another's state: sessions
write watermarks only they could know through the WRITE tool, every READ is
scanned for another session's (a leak) and for its own acknowledged ones (a lost
write), in sequences and concurrent batches that Hypothesis picks and shrinks
to the shortest one that still fails.
"""

_EPILOG: Final = """\
tool calls are 'NAME' or 'NAME {JSON object}'; placeholders in its strings:
  {mark}     the watermark (the write call must hold it)
  {session}  a name the check makes up for each session
  {setup}    the text the session's --setup call answered

sessions: when the templates name the session ({session} or {setup}) or the
sessions carry handles (--handles), all go through one connection, so that state
shared between them shows; otherwise each session is a connection (a process
over stdio, an HTTP client) of its own.

eras: --era 2026 (the default, as the SDK's Client) opens each session with
server/discover, and no request carries a protocol session: a server keeping
state per transport session loses it. --era 2025 opens with the initialize
handshake, whose Mcp-Session-Id carries a session over HTTP.

examples:
  mcp-actors check-isolation --module planning \\
      --write 'planning__create_goal {"goal": "{mark}"}' --read planning__list_goals
  mcp-actors check-isolation --command "python notes.py" --setup create_session \\
      --write 'add_note {"session_id": "{setup}", "text": "{mark}"}' \\
      --read 'list_notes {"session_id": "{setup}"}'
  mcp-actors check-isolation --url http://127.0.0.1:8000/mcp --handles \\
      --write 'planning__create_goal {"goal": "{mark}"}' --read planning__list_goals

timeouts: a call unanswered for --call-timeout, a session not open within
--open-timeout, a connection closed mid-call or an answer that is not MCP stops
the check at once (nothing is shrunk) with no verdict, exit 4; so does a check
still running after --max-time (a failure found by then is reported, exit 1).

exit status: 0 passed, 1 a leak or a lost write, 2 bad usage, 3 could not run
(the server did not start, or a call answered an error), 4 no verdict (the
server stopped answering).
"""

_FAILED: Final = 1
_COULD_NOT_RUN: Final = 3
_NO_VERDICT: Final = 4
_SIGNALLED: Final = 130


def _tool_call(text: str) -> ToolCall:
    try:
        return ToolCall.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parser(prog: str = "mcp-actors check-isolation") -> argparse.ArgumentParser:
    """The ``check-isolation`` command line."""
    cli = targeting_parser(prog, _DESCRIPTION, _EPILOG)
    calls = cli.add_argument_group("calls")
    calls.add_argument(
        "--write",
        required=True,
        type=_tool_call,
        metavar="CALL",
        help="the call that writes a session's state; must hold {mark}",
    )
    calls.add_argument(
        "--read",
        required=True,
        type=_tool_call,
        metavar="CALL",
        help="the call that reads it back",
    )
    calls.add_argument(
        "--setup",
        type=_tool_call,
        metavar="CALL",
        help="a call made once as each session opens; its answer fills {setup}",
    )
    calls.add_argument(
        "--recent-only",
        action="store_true",
        help=("the server shows only recent history: a read need not show every write"),
    )
    timeouts = Timeouts()
    calls.add_argument(
        "--call-timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=timeouts.call,
        help=f"a call unanswered in this long stops the check: no verdict "
        f"(default {timeouts.call:g})",
    )
    calls.add_argument(
        "--max-time",
        metavar="SECONDS",
        type=positive_seconds,
        default=timeouts.total,
        help="the longest the search, shrinking included, may run: no verdict after it "
        f"unless a failure was found (default {timeouts.total:g})",
    )
    budget = cli.add_argument_group("budget (how hard it searches)")
    defaults = Budget()
    for name, what in (
        ("examples", "sequences to run"),
        ("steps", "steps per sequence"),
        ("sessions", "sessions open at once"),
        ("batch", "calls in a concurrent batch"),
        ("shrinks", "more sequences run to shrink one that failed"),
    ):
        budget.add_argument(
            f"--{name}",
            metavar="N",
            type=positive_int,
            default=getattr(defaults, name),
            help=f"{what} (default {getattr(defaults, name)})",
        )
    return cli


def _one_connection(
    write: ToolCall, read: ToolCall, setup: ToolCall | None, handles: Handles | None
) -> bool:
    """Whether the calls name the session (templates or handles), so that one connection
    serves them all."""
    calls = [call for call in (write, read, setup) if call is not None]
    return handles is not None or any(call.uses(SESSION) or call.uses(SETUP) for call in calls)


@asynccontextmanager
async def _shared(session: ClientSession) -> AsyncIterator[ClientSession]:
    yield session  # the one connection stays open for the whole check


async def _check(args: argparse.Namespace, budget: Budget, timeouts: Timeouts) -> IsolationReport:
    handles = handles_of(args)
    check = functools.partial(
        check_isolation,
        write=args.write,
        read=args.read,
        setup=args.setup,
        handles=handles,
        budget=budget,
        all_writes_visible=not args.recent_only,
        timeouts=timeouts,
    )
    async with open_target(args) as target:
        try:
            if not _one_connection(args.write, args.read, args.setup, handles):
                return await check(target.session)
            return await unwrapped(_on_one_connection(target, check), (IsolationCheckError,))
        except NoVerdict as exc:  # what the transport saw may say why
            raise exc.noting(garbage_note(target)) from None
        except NoAnswer as exc:
            raise exc.noting_garbage(target) from None


async def _on_one_connection(
    target: Target, check: Callable[[SessionFactory], Awaitable[IsolationReport]]
) -> IsolationReport:
    """`check` with every session on one connection to `target`, held open meanwhile."""
    async with target.session() as session:
        return await check(functools.partial(_shared, session))


def main(argv: Sequence[str] | None = None, prog: str = "mcp-actors check-isolation") -> int:
    """Run ``check-isolation`` with `argv`; the exit status the module docstring lists."""
    cli = parser(prog)
    args = cli.parse_args(sys.argv[1:] if argv is None else list(argv))
    check_target(cli, args)
    try:
        check_templates(args.write, args.read, args.setup, handles_of(args))
        budget = Budget(args.examples, args.steps, args.sessions, args.batch, args.shrinks)
        timeouts = Timeouts(args.call_timeout, args.open_timeout, args.max_time)
    except ValueError as exc:
        cli.error(str(exc))
    quiet_sdk_garbage_logs()
    check = functools.partial(_check, args, budget, timeouts)
    try:
        report = trio.run(run_until_signalled, check, (IsolationCheckError,))
    except (NoVerdict, NoAnswer) as exc:
        print(f"{prog}: no verdict: {exc}", file=sys.stderr)
        return _NO_VERDICT
    except (IsolationCheckError, TargetError) as exc:
        # A call refused in 2026-07-28's era may be one that names no session.
        refused = isinstance(exc, IsolationCheckError) and handles_of(args) is None
        hint = era_hint(args.era) if refused else ""
        print(f"{prog}: could not run the check: {exc}{hint}", file=sys.stderr)
        return _COULD_NOT_RUN
    if report is None:
        print(f"{prog}: interrupted: no verdict", file=sys.stderr)
        return _SIGNALLED
    print("\n".join(report.describe()))
    hint = era_hint(args.era)
    if report.lost_writes and not report.leaks and handles_of(args) is None and hint:
        print(hint.lstrip("\n"), file=sys.stderr)
    return 0 if report.passed else _FAILED
