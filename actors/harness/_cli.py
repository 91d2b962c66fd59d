"""``mcp-actors bench``: put a call mix on any MCP server and report what it measured."""

from __future__ import annotations

import argparse
import functools
import math
import os
import shlex
import signal
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

import trio

from .._argparse import Parser, positive_int, positive_seconds, seconds_or_zero
from ._eras import DEFAULT_ERA, ERAS, era_hint, version_of
from ._handles import DEFAULT_ARGUMENT, DEFAULT_KEY, DEFAULT_TOOL, Handles
from ._load import SILENCE_TIMEOUTS, LoadPlan, first_of_ours, run_load
from ._mix import MixError, load_mix, one_tool_mix
from ._report import print_report, write_json
from ._targets import (
    OPEN_TIMEOUT,
    HttpTarget,
    StdioTarget,
    TargetError,
    quiet_sdk_garbage_logs,
    serve_command,
    serve_module_http,
    serve_module_in_process,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from ._load import LoadResult
    from ._mix import Mix
    from ._targets import Target

__all__ = [
    "check_target",
    "handles_of",
    "main",
    "open_target",
    "parser",
    "run_until_signalled",
    "targeting_parser",
]

_DEFAULT_SECONDS: Final = 10.0
ResultT = TypeVar("ResultT")

_DESCRIPTION: Final = """\
Load-test any MCP server: callers call the tools of a mix over one or more MCP
sessions (the official SDK's client), for a duration or a number of calls, and
one table reports calls/s, latency percentiles, errors by kind, the server's
and the client's CPU time per call and the machine's load.
"""

_EPILOG: Final = """\
targets:
  --module SPEC     this project serves SPEC (a built-in module such as planning,
                    package.module:attribute, or path/to/file.py[:attribute]),
                    a process per session over
                    stdio, or one process over Streamable HTTP with --http,
                    or in this process with --in-process
  --command CMD     any stdio MCP server: CMD is started once per session
  --url URL         any Streamable HTTP endpoint (--token sends a bearer token;
                    --server-pid names its local process to read its CPU time)

protocol:
  --era 2026        (the default, as the SDK's Client) 2026-07-28: no protocol
                    session, each request stands alone
  --era 2025        the initialize handshake (over HTTP, an Mcp-Session-Id)
  --handles         each session first calls conversation__start and passes the
                    handle it returns as 'conversation' in every later call
                    (--handle-tool, --handle-key, --handle-argument for other
                    names; with --module, the server is started with --handles)

a mix file (TOML):
  [[call]]
  tool = "planning__create_goal"
  arguments = { goal = "goal {n} from caller {caller}" }
  weight = 1
  Placeholders in strings: {session} {caller} {n} {random}.

examples:
  mcp-actors bench --module planning --tool planning__list_goals --calls 1000
  mcp-actors bench --url http://127.0.0.1:8765/mcp --mix mix.toml \\
      --sessions 50 --callers 50 --duration 30
  mcp-actors bench --command "python server.py" --mix mix.toml --rate 200 --duration 20
  mcp-actors bench --module planning --http --handles --tool planning__list_goals \\
      --sessions 10 --calls 2000

exit status: 0 measured; 1 the server failed: it did not start, did not open a
session within --open-timeout, left tools/list or a setup call unanswered for
--timeout, or answered no call for 3 times --timeout; 2 bad usage; 130 a signal.
"""


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        msg = f"must be a positive number of calls per second, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _add_target_options(cli: argparse.ArgumentParser) -> None:
    group = cli.add_argument_group("target (one of)")
    targets = group.add_mutually_exclusive_group(required=True)
    targets.add_argument(
        "--module",
        metavar="SPEC",
        action="append",
        help="serve this module with 'actors serve' (a built-in name or "
        "package.module:attribute; repeatable)",
    )
    targets.add_argument(
        "--command", metavar="CMD", help="a stdio MCP server's command line, run per session"
    )
    targets.add_argument("--url", help="a Streamable HTTP MCP endpoint, e.g. http://HOST:PORT/mcp")
    served = group.add_mutually_exclusive_group()
    served.add_argument(
        "--http",
        action="store_true",
        help="with --module: serve over Streamable HTTP on 127.0.0.1 (one process for all "
        "sessions) instead of a stdio process per session",
    )
    served.add_argument(
        "--in-process",
        action="store_true",
        help="with --module: serve in this process, each session the SDK's client connected "
        "in memory (no transport; the server's CPU is counted as the client's)",
    )
    group.add_argument(
        "--state",
        metavar="URL",
        default="memory",
        help="with --module: the server's --state (default memory)",
    )
    group.add_argument(
        "--token",
        help="with --url: sent as 'Authorization: Bearer TOKEN' (with --module "
        "--http, the server is started with it too)",
    )
    group.add_argument(
        "--server-pid",
        metavar="PID",
        type=positive_int,
        help="with --url: the local server's process, to report its CPU time per call",
    )
    group.add_argument(
        "--open-timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=OPEN_TIMEOUT,
        help="a session not open in this long (the server started and its answer to "
        f"initialize received) stops the run: no answer (default {OPEN_TIMEOUT:g})",
    )


def _add_protocol_options(cli: argparse.ArgumentParser) -> None:
    group = cli.add_argument_group("protocol")
    group.add_argument(
        "--era",
        choices=ERAS,
        default=DEFAULT_ERA,
        help=f"the protocol era every session speaks: 2026 ({version_of('2026')}, no protocol "
        "session: what the SDK's Client and most frameworks speak by default) or 2025 (the "
        f"initialize handshake, {version_of('2025')}) (default {DEFAULT_ERA})",
    )
    group.add_argument(
        "--handles",
        action="store_true",
        help=f"the handle pattern: each session first calls {DEFAULT_TOOL} and every later "
        "call carries the handle it minted (with --module, the server is started with "
        "--handles); the three options below imply it",
    )
    for option, default, what in (
        ("--handle-tool", DEFAULT_TOOL, "the tool that mints a handle (called with no arguments)"),
        ("--handle-key", DEFAULT_KEY, "the member of its structuredContent holding the handle"),
        ("--handle-argument", DEFAULT_ARGUMENT, "the argument later calls carry it in"),
    ):
        group.add_argument(option, metavar="NAME", help=f"{what} (default {default})")


def handles_of(args: argparse.Namespace) -> Handles | None:
    """The handle pattern the options name, or None when they name none."""
    names = {"tool": args.handle_tool, "key": args.handle_key, "argument": args.handle_argument}
    given = {field: name for field, name in names.items() if name is not None}
    if not args.handles and not given:
        return None
    return Handles(**given)


def _add_mix_options(cli: argparse.ArgumentParser) -> None:
    group = cli.add_argument_group("calls (one of)")
    mixes = group.add_mutually_exclusive_group(required=True)
    mixes.add_argument("--mix", metavar="FILE", type=Path, help="a mix file (TOML)")
    mixes.add_argument("--tool", metavar="NAME", help="call this one tool")
    group.add_argument(
        "--arguments",
        metavar="JSON",
        help="with --tool: its arguments, a JSON object (placeholders as in a mix file)",
    )
    group.add_argument(
        "--allow-unlisted-tools",
        action="store_true",
        help="call tools the server's tools/list does not have (their errors are counted)",
    )


def _add_load_options(cli: argparse.ArgumentParser) -> None:
    group = cli.add_argument_group("load")
    group.add_argument(
        "--sessions", metavar="N", type=positive_int, default=1, help="MCP sessions (default 1)"
    )
    group.add_argument(
        "--callers",
        metavar="N",
        type=positive_int,
        help="concurrent callers, spread over the sessions (default: one per session)",
    )
    length = group.add_mutually_exclusive_group()
    length.add_argument(
        "--duration",
        metavar="SECONDS",
        type=positive_seconds,
        help=f"measure for this long (default {_DEFAULT_SECONDS:g} s)",
    )
    length.add_argument("--calls", metavar="N", type=positive_int, help="measure this many calls")
    group.add_argument(
        "--warmup",
        metavar="SECONDS",
        type=seconds_or_zero,
        default=0.0,
        help="run the load this long first, not counted (default 0)",
    )
    group.add_argument(
        "--rate",
        metavar="CALLS_PER_S",
        type=_rate,
        help="open loop: this many calls per second on a fixed schedule, latency measured "
        "from each call's due time (default: closed loop)",
    )
    group.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=30.0,
        help="a call not answered in this long counts as a timeout (default 30); "
        f"no call answered for {SILENCE_TIMEOUTS} times this long stops the run (exit 1)",
    )
    group.add_argument("--seed", type=int, help="seed the mix's draws and {random}")
    group.add_argument("--json", metavar="FILE", type=Path, help="also write the figures here")


def targeting_parser(prog: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """A command line with the target options (``--module``, ``--command``, ``--url``, …)."""
    cli = Parser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_target_options(cli)
    _add_protocol_options(cli)
    return cli


def parser(prog: str = "mcp-actors bench") -> argparse.ArgumentParser:
    """The ``bench`` command line."""
    cli = targeting_parser(prog, _DESCRIPTION, _EPILOG)
    _add_mix_options(cli)
    _add_load_options(cli)
    return cli


def check_target(cli: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse target options given with a target they do not apply to; check the modules."""
    given = {
        "--http": args.http and args.module is None,
        "--in-process": args.in_process and args.module is None,
        "--state": args.state != "memory" and args.module is None,
        "--token": args.token is not None and args.url is None and not args.http,
        "--server-pid": args.server_pid is not None and args.url is None,
    }
    wrong = [option for option, misplaced in given.items() if misplaced]
    if wrong:
        cli.error(f"{', '.join(wrong)}: see --help for the target each applies to")
    if args.command is not None:
        try:
            if not shlex.split(args.command):
                cli.error("--command is empty: name the program that serves MCP on stdio")
        except ValueError as exc:
            cli.error(f"--command: {exc}")
    try:
        handles_of(args)
    except ValueError as exc:
        cli.error(str(exc))
    if args.module is not None:
        from ..server._options import ConfigurationError, ServeOptions

        if os.getcwd() not in sys.path:  # as 'serve' finds a module beside the operator
            sys.path.append(os.getcwd())
        try:
            ServeOptions(modules=tuple(args.module), state=args.state).check()
        except ConfigurationError as exc:
            cli.error(f"--module: {exc}")


def _mix(cli: argparse.ArgumentParser, args: argparse.Namespace) -> Mix:
    if args.arguments is not None and args.tool is None:
        cli.error("--arguments goes with --tool (a mix file has its own)")
    try:
        if args.mix is not None:
            return load_mix(args.mix)
        return one_tool_mix(args.tool, args.arguments or "{}")
    except MixError as exc:
        cli.error(str(exc))


def _plan(cli: argparse.ArgumentParser, args: argparse.Namespace) -> LoadPlan:
    duration = None if args.calls is not None else args.duration or _DEFAULT_SECONDS
    try:
        return LoadPlan(
            mix=_mix(cli, args),
            sessions=args.sessions,
            callers=args.sessions if args.callers is None else args.callers,
            duration=duration,
            calls=args.calls,
            warmup=args.warmup,
            rate=args.rate,
            timeout=args.timeout,
            seed=args.seed,
            check_tools=not args.allow_unlisted_tools,
            handles=handles_of(args),
        )
    except ValueError as exc:
        cli.error(str(exc))


def _describe(args: argparse.Namespace) -> str:
    era = f"{version_of(args.era)} era" + (", handles" if handles_of(args) is not None else "")
    if args.url is not None:
        return f"{args.url} ({era})"
    if args.command is not None:
        return f"{args.command} (stdio, a process per session, {era})"
    how = (
        "Streamable HTTP"
        if args.http
        else "in this process"
        if args.in_process
        else "stdio, a process per session"
    )
    return f"actors serve {' '.join(args.module)} ({how}, {era})"


async def run_until_signalled(
    work: Callable[[], Awaitable[ResultT]], ours: tuple[type[Exception], ...] = ()
) -> ResultT | None:
    """What `work` returns; None if Ctrl-C, SIGTERM or SIGHUP ended it (its servers stopped).

    A `MixError`, `TargetError` or one of `ours` that `work` raises is raised as itself,
    not in the group a nursery wraps it in.
    """
    result = None
    # A signal cancels the run like any cancellation, so every server is stopped on the way
    # out; trio's own Ctrl-C handling would raise KeyboardInterrupt wherever the run was.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        try:
            async with trio.open_nursery() as nursery:

                async def stop_on_signal() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()

                nursery.start_soon(stop_on_signal)
                result = await work()
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            first = first_of_ours(group, ours)
            if first is None:
                raise
            raise first from None
    return result


@asynccontextmanager
async def open_target(args: argparse.Namespace) -> AsyncIterator[Target]:
    """The target the options name, its server running meanwhile if bench starts one."""
    opening, era = args.open_timeout, args.era
    # A module served here mints handles when the calls are to carry them.
    serving = ["--handles"] if handles_of(args) is not None else []
    if args.url is not None:
        yield HttpTarget(args.url, args.token, args.server_pid, opening, era)
    elif args.command is not None:
        yield StdioTarget(tuple(shlex.split(args.command)), opening, era)
    elif args.http:
        async with serve_module_http(
            args.module, args.state, args.token, opening, era=era, serve_options=serving
        ) as served:
            yield served
    elif args.in_process:
        async with serve_module_in_process(
            args.module, args.state, era=era, handles=bool(serving)
        ) as in_process:
            yield in_process
    else:
        yield StdioTarget(tuple(serve_command(args.module, args.state, *serving)), opening, era)


async def _measure(args: argparse.Namespace, plan: LoadPlan, prog: str) -> LoadResult:
    def progress(line: str) -> None:
        print(f"{prog}: {line}", file=sys.stderr, flush=True)

    async with open_target(args) as target:
        return await run_load(target, plan, describe=_describe(args), progress=progress)


def main(argv: Sequence[str] | None = None, prog: str = "mcp-actors bench") -> int:
    """Run ``bench`` with `argv`; the exit code: 0 measured, 1 the server failed (it did not
    start, or stopped answering), 2 bad usage, 130 a signal ended it."""
    cli = parser(prog)
    args = cli.parse_args(sys.argv[1:] if argv is None else list(argv))
    check_target(cli, args)
    quiet_sdk_garbage_logs()
    if args.json is not None and not args.json.parent.is_dir():
        cli.error(f"--json: the folder {args.json.parent} does not exist")
    plan = _plan(cli, args)
    try:
        result = trio.run(run_until_signalled, functools.partial(_measure, args, plan, prog))
    except MixError as exc:
        cli.error(str(exc))
    except TargetError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    if result is None:  # the servers were stopped on the way out
        print(f"{prog}: interrupted: nothing measured", file=sys.stderr)
        return 130
    print_report(result)
    if result.calls and result.failed == result.calls and handles_of(args) is None:
        hint = era_hint(args.era)
        if hint:
            print(f"{prog}: every call failed{hint}", file=sys.stderr)
    if args.json is not None:
        try:
            write_json(result, args.json)
        except OSError as exc:
            print(f"{prog}: error: cannot write --json {args.json}: {exc}", file=sys.stderr)
            return 1
    return 0
