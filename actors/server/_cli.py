"""``python -m actors serve``: the command line of the MCP server.

Every default shown here is read from `ServeOptions` and its `RuntimeConfig`,
so the command line and the Python entry point (`actors.server.serve`)
cannot drift apart.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs
import trio

from protocol import DEFAULT_LIFETIME, ContextPolicy

from .._argparse import (
    ENVIRONMENT_PREFIX,
    Parser,
    positive_int,
    positive_seconds,
    seconds_or_zero,
    with_environment,
)
from ..store import StoreError
from ..store._option import StateUrls, state_urls
from ._logs import (
    LOG_FORMATS,
    LibraryLines,
    LogFormat,
    announce,
    capture_stray_output,
    log_handler,
)
from ._options import DEFAULT_MODULES, ConfigurationError, ServeOptions
from ._serve import serve
from .auth._settings import ASYMMETRIC_ALGORITHMS, TENANT_NAME, OAuthSettings
from .http._operator_routes import leaves
from .http._session_prefix import check_session_id_prefix

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Sequence

__all__ = ["MIN_TOKEN_LENGTH", "SESSION_ENVIRONMENT", "configure_logging", "main", "read_tokens"]

_DEFAULTS: Final = ServeOptions()
_RUNTIME: Final = _DEFAULTS.runtime
_DAY: Final = 24 * 3600.0
# A comment starts at a '#' that begins the line or follows white space.
_COMMENT: Final = re.compile(r"(?:^|\s)#.*$")
SESSION_ENVIRONMENT: Final = ENVIRONMENT_PREFIX + "SESSION"
"""The environment variable ``--session`` defaults to (as every option: `with_environment`)."""
MIN_TOKEN_LENGTH: Final = 16
"""The shortest bearer token accepted, in characters."""
_LOG_LEVELS: Final = ("debug", "info", "warning", "error")
# Loggers of the libraries under `serve`: their INFO lines are about the
# libraries' own machinery, so they show only at --log-level debug.
_QUIET_LOGGERS: Final = ("mcp", "httpx", "httpx2", "sse_starlette")

_SERVE_DESCRIPTION: Final = """\
Serve tool modules (the built-in ones, or your own with --module) over the
Model Context Protocol: on stdio by default (for a desktop client that starts
the server itself), or over Streamable HTTP with --http. Logs go to stderr, one
line per event.
"""

_SERVE_EPILOG: Final = """\
context:
  Each call names its context with the arguments __sessionId, __assistantId,
  __threadId, or with the same names without '__' in the request's _meta;
  both at once must agree. Over stdio the parent process is trusted: its
  _meta is taken as given; the arguments, which its model writes, may name
  only the connection's own session (--allow-session-naming lets them name
  any). Over HTTP either may name any session the token reaches (its tenant's,
  for a tenant token). A call that names no session lands in
  its connection's own session, never in one another client reaches:
    stdio: a session made for this connection and ended when it closes, so
           two hosts (or two windows) that each start a server never share
           state; --session NAME (or $MCP_ACTORS_SESSION) names one instead,
           kept across restarts and shared by every server given that name.
    HTTP:  the client's HTTP session (its Mcp-Session-Id), as 'TENANT/<id>'
           for a token bound to a tenant, ended when the HTTP session ends;
           a request without one (the 2026 protocol) gets 'TENANT/default'
           with a tenant token and is refused otherwise.
  With --require-session a stdio call must name its session.
  session__end, which lets a client end its own session and delete what is
  stored for it, is listed only with --allow-end-session.

behind a reverse proxy (HTTP):
  A loopback server checks the Host header (DNS rebinding): a proxy that
  passes the public name on needs --allow-host NAME. X-Forwarded-For and
  X-Forwarded-Proto are believed only from --trusted-proxy addresses.

tokens and tenants (HTTP):
  --token TOKEN          a trusted gateway: may address any session.
  --token TOKEN=TENANT   may address only the sessions 'TENANT' and
                         'TENANT/...'; naming any other session is refused
                         with an error result. Its calls that name no session
                         land in 'TENANT/<Mcp-Session-Id>' or 'TENANT/default'.
  TOKEN=TENANT splits at the last '='; a token has at least 16 characters; a
  tenant is 1-64 characters of letters, digits, '.', '_' and '-'.
  --tokens-file reads the same forms, one per line, and keeps tokens out of
  the process list; '#' starts a comment at the start of a line or after a
  space (a token may contain '#'), and any other malformed line stops the
  server from starting. The log says how many tokens each tenant has and how
  many are gateways, never the tokens.
  With tokens configured, a request without a valid 'Authorization: Bearer'
  header gets HTTP 401. Without tokens every local client is trusted, so a
  non-loopback --http address needs tokens (or OAuth), or --insecure on a
  trusted network.

OAuth (HTTP, the oauth extra):
  --oauth-issuer URL and --oauth-resource URL accept access tokens (signed
  JWTs) the issuer made for this server, besides any --token: a token that is
  none of the static ones is checked against the issuer's keys (from
  --oauth-jwks-url, or the jwks_uri of its metadata), its iss, aud (the
  resource URL, or --oauth-audience), exp and nbf. --oauth-tenant-claim CLAIM
  binds each token to the tenant its claim names, as TOKEN=TENANT does; a
  token without the claim is refused (403), unless it carries
  --oauth-gateway-scope SCOPE, which makes it a trusted gateway. The metadata
  clients discover the issuer with is served at
  /.well-known/oauth-protected-resource (and .../mcp), and every 401 names it
  in WWW-Authenticate.

environment:
  Every option that takes a value can also come from a variable named after it,
  MCP_ACTORS_ and the option in capitals with '_' for '-': MCP_ACTORS_STATE for
  --state, MCP_ACTORS_SESSION for --session. A repeatable option's variable
  holds several values separated by spaces, to which the command line adds its
  own; for any other option the command line wins.

examples:
  mcp-actors serve
  mcp-actors serve --module notes:notes --session desktop
  mcp-actors serve --http 127.0.0.1:8765 --tokens-file tokens.txt
  mcp-actors serve --http 127.0.0.1:8765 --oauth-issuer https://auth.example.com \\
      --oauth-resource https://mcp.example.com/mcp --oauth-tenant-claim tenant
  mcp-actors serve --allow-exec --exec-allow python3 --exec-allow ls
"""


def parser(prog: str = "mcp-actors serve", *, cluster: bool = False) -> argparse.ArgumentParser:
    """The ``serve`` command line; with `cluster`, the options ``cluster`` shares with it.

    The cluster serves HTTP only and no workspace: its parser leaves out what
    only stdio or the workspace take, and says that ``--http`` and ``--state``
    are required. Call `with_environment` once the parser is complete.
    """
    serve = Parser(
        prog=prog,
        description=_SERVE_DESCRIPTION,
        epilog=_SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_transport_options(serve, cluster=cluster)
    _add_oauth_options(serve)
    _add_module_options(serve, cluster=cluster)
    _add_runtime_options(serve, cluster=cluster)
    if cluster:  # what `_options` reads of the options a cluster does not take
        serve.set_defaults(
            max_in_flight=_DEFAULTS.max_in_flight,
            allow_exec=False,
            exec_allow=None,
            unsafe_shared_exec=False,
            workspace_root=None,
            exec_max_processes=_DEFAULTS.exec_max_processes,
            exec_file_cap=_DEFAULTS.exec_file_cap,
            session=None,
            allow_session_naming=False,
        )
    return serve


# ---- argument types ----------------------------------------------------------------


def _address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets: ``[::1]:8765``) → ``(host, port)``."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        msg = f"expected HOST:PORT such as 127.0.0.1:8765 (port 0 picks a free one), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return host, int(port)


_ON_THE_HTTP_LISTENER: Final = "on the HTTP listener"


def _metrics_address(text: str) -> tuple[str, int] | str:
    return text if text == _ON_THE_HTTP_LISTENER else _address(text)


def _token(text: str) -> tuple[str, str | None]:
    """``TOKEN`` or ``TOKEN=TENANT`` (split at the last ``=``) → ``(token, tenant)``."""
    token, equals, tenant = text.rpartition("=")
    if not equals or not tenant:
        token, tenant = text, ""  # no tenant (a trailing '=' is base64 padding)
    if any(character.isspace() or not character.isprintable() for character in token):
        msg = "a token must be printable text without spaces"
        raise argparse.ArgumentTypeError(msg)
    if len(token) < MIN_TOKEN_LENGTH:
        # The message never repeats the token: it may be a real secret, cut short.
        msg = (
            f"a token of {len(token)} characters is too short to be secret; use at least "
            f"{MIN_TOKEN_LENGTH}, e.g. from: python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'"
        )
        raise argparse.ArgumentTypeError(msg)
    if tenant and not TENANT_NAME.fullmatch(tenant):  # not match with $: it allows a final \n
        msg = f"tenant {tenant!r} must be 1-64 letters, digits, '.', '_' or '-'"
        raise argparse.ArgumentTypeError(msg)
    return token, tenant or None


def _session_id_prefix(text: str) -> str:
    try:
        check_session_id_prefix(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _module_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        msg = "expected a comma-separated list of modules, e.g. planning,content_store"
        raise argparse.ArgumentTypeError(msg)
    return names


def _origin(text: str) -> str:
    # Browsers send origins lowercase and without a trailing slash.
    return text.strip().rstrip("/").lower()


# ---- the serve options ---------------------------------------------------------


def _add_transport_options(serve: argparse.ArgumentParser, *, cluster: bool) -> None:
    group = serve.add_argument_group("transport")
    group.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=_address,
        help=("(required) serve" if cluster else "serve")
        + " Streamable HTTP at http://HOST:PORT/mcp"
        + ("" if cluster else " instead of stdio")
        + "; port 0 picks a free port, and the address is printed to stderr as "
        "'listening on URL'",
    )
    group.add_argument(
        "--token",
        metavar="TOKEN[=TENANT]",
        type=_token,
        action="append",
        default=[],
        help="accept this bearer token (repeatable); bound to TENANT it may address only the "
        "sessions TENANT and TENANT/... (see below)",
    )
    group.add_argument(
        "--tokens-file", metavar="PATH", type=Path, help="read more tokens, one per line"
    )
    group.add_argument(
        "--allow-origin",
        metavar="ORIGIN",
        type=_origin,
        action="append",
        default=[],
        help="also accept requests from this browser Origin, e.g. https://app.example "
        "(repeatable); loopback origins are always accepted, any other gets HTTP 403",
    )
    group.add_argument(
        "--allow-host",
        metavar="NAME",
        type=_origin,
        action="append",
        default=[],
        help="also accept this Host header on a loopback bind, e.g. mcp.example.com, the name "
        "a reverse proxy in front passes on (repeatable); any other gets HTTP 421",
    )
    group.add_argument(
        "--trusted-proxy",
        metavar="ADDRESS",
        action="append",
        default=[],
        help="believe X-Forwarded-For and X-Forwarded-Proto from this address or network, e.g. "
        "127.0.0.1 for a proxy on this host (repeatable); from others they are ignored",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --http address without tokens (prints a warning)",
    )
    group.add_argument(
        "--max-request-bytes",
        metavar="N",
        type=positive_int,
        default=_DEFAULTS.max_request_bytes,
        help="largest JSON-RPC message accepted, a stdio line or an HTTP body; larger ones get "
        "an error and the server keeps serving (default %(default)s)",
    )
    group.add_argument(
        "--max-connections-per-address",
        metavar="N",
        type=positive_int,
        default=_DEFAULTS.max_connections_per_address,
        help="HTTP connections one client address (IPv6: its /64) may hold that have not sent a "
        "whole request yet; one more gets HTTP 503 and Retry-After. Served connections do not "
        "count: raise it only for a proxy that opens many at once (default %(default)s)",
    )
    group.add_argument(
        "--max-sessions-per-token",
        metavar="N",
        type=positive_int,
        default=_DEFAULTS.max_sessions_per_token,
        help="open HTTP sessions one token may hold (all anonymous clients count as one); one "
        "more gets HTTP 429 (default %(default)s)",
    )
    group.add_argument(
        "--session-idle-timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=_DEFAULTS.session_idle_timeout,
        help="an HTTP session with no request for this long is closed (default %(default)g)",
    )
    group.add_argument(
        "--max-stored-event-bytes",
        metavar="N",
        type=positive_int,
        default=_DEFAULTS.max_stored_event_bytes,
        help="bytes of SSE events kept, all sessions together, so that a client whose HTTP "
        "stream drops can resume it; the largest holder's oldest go first (default %(default)s)",
    )
    group.add_argument(
        "--session-id-prefix",
        metavar="PREFIX",
        type=_session_id_prefix,
        help="show HTTP session ids as PREFIX.<id>, PREFIX (1-32 letters, digits, '-') naming "
        "this front, so that a load balancer in front of several routes each session to the "
        "front that opened it; an id without it gets HTTP 404 (default: the ids as they are)",
    )
    if cluster:
        return
    group.add_argument(
        "--max-in-flight",
        metavar="N",
        type=positive_int,
        default=_DEFAULTS.max_in_flight,
        help="stdio requests read ahead of their replies; a client that stops reading stops "
        "the server reading (default %(default)s)",
    )


def _algorithm(text: str) -> str:
    if text not in ASYMMETRIC_ALGORITHMS:
        msg = (
            f"{text!r} is not accepted; choose among {', '.join(ASYMMETRIC_ALGORITHMS)} "
            "(public-key algorithms: never 'none' or an HMAC)"
        )
        raise argparse.ArgumentTypeError(msg)
    return text


def _add_oauth_options(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("OAuth (HTTP; needs the oauth extra)")
    group.add_argument(
        "--oauth-issuer",
        metavar="URL",
        help="accept access tokens (signed JWTs) of this issuer, exactly as their iss claim "
        "has it; https, or http on loopback",
    )
    group.add_argument(
        "--oauth-resource",
        metavar="URL",
        help="(required with --oauth-issuer) this server's MCP endpoint as clients reach it, "
        "e.g. https://mcp.example.com/mcp: the resource its metadata names, and the audience "
        "tokens must carry unless --oauth-audience says otherwise",
    )
    group.add_argument(
        "--oauth-audience",
        metavar="AUD",
        help="the aud claim tokens must carry (default: the --oauth-resource URL)",
    )
    group.add_argument(
        "--oauth-jwks-url",
        metavar="URL",
        help="the issuer's JWK set (default: the jwks_uri of its metadata at "
        "/.well-known/oauth-authorization-server or openid-configuration)",
    )
    group.add_argument(
        "--oauth-tenant-claim",
        metavar="CLAIM",
        help="bind each token to the tenant this claim names, as TOKEN=TENANT does; a token "
        "without it is refused unless it has --oauth-gateway-scope",
    )
    group.add_argument(
        "--oauth-gateway-scope",
        metavar="SCOPE",
        help="a token with this scope and no tenant claim is a trusted gateway: it may "
        "address any session (default: no OAuth gateways)",
    )
    group.add_argument(
        "--oauth-required-scope",
        metavar="SCOPE",
        action="append",
        default=[],
        help="a scope every token must carry, or HTTP 403 (repeatable)",
    )
    group.add_argument(
        "--oauth-algorithm",
        metavar="ALG",
        type=_algorithm,
        action="append",
        default=[],
        help="accept tokens signed with this algorithm only (repeatable; default: "
        f"{', '.join(ASYMMETRIC_ALGORITHMS)})",
    )


def _add_module_options(serve: argparse.ArgumentParser, *, cluster: bool) -> None:
    group = serve.add_argument_group("modules")
    group.add_argument(
        "--modules",
        metavar="LIST",
        type=_module_list,
        help="comma-separated built-in modules to enable (default "
        f"{','.join(DEFAULT_MODULES)}, or none when --module is given)",
    )
    group.add_argument(
        "--module",
        metavar="SPEC",
        action="append",
        default=[],
        help="also serve your own ToolModule (repeatable): PACKAGE.MODULE:ATTRIBUTE, imported "
        "(the current directory is searched after the installed packages; under python -m, "
        "first), or a file, path/to/notes.py[:ATTRIBUTE] (the attribute may be left out when "
        "the file defines one ToolModule)" + ("; every shard imports it" if cluster else ""),
    )
    if cluster:
        return  # no workspace: it would run programs wherever its session's shard is
    group.add_argument(
        "--allow-exec",
        action="store_true",
        help="also enable 'workspace', which runs programs on this host in a per-session "
        "directory; it is no sandbox",
    )
    group.add_argument(
        "--exec-allow",
        metavar="PROGRAM",
        action="append",
        help="a program name the workspace may start, like python3 (repeatable); without it, "
        "any program may run",
    )
    group.add_argument(
        "--unsafe-shared-exec",
        action="store_true",
        help="allow --allow-exec over HTTP next to tenant tokens or without tokens; a program "
        "the workspace runs can then read the server's tokens and act for every tenant",
    )
    group.add_argument(
        "--workspace-root",
        metavar="DIR",
        type=Path,
        help="the directory in which the workspace makes its private root of session "
        "directories (default: the system's temporary directory)",
    )
    group.add_argument(
        "--exec-max-processes",
        metavar="N",
        type=positive_int,
        default=_DEFAULTS.exec_max_processes,
        help="commands running at once across all sessions; each session runs at most 16 "
        "(default %(default)s)",
    )
    group.add_argument(
        "--exec-file-cap",
        metavar="BYTES",
        type=positive_int,
        default=_DEFAULTS.exec_file_cap,
        help="the largest file a command may write, its output included (default %(default)s)",
    )


def _add_runtime_options(serve: argparse.ArgumentParser, *, cluster: bool) -> None:
    group = serve.add_argument_group("runtime")
    group.add_argument(
        "--ttl",
        metavar="SECONDS",
        type=positive_seconds,
        default=_RUNTIME.ttl,
        help="idle time after which a context's state is released (default %(default)g)",
    )
    group.add_argument(
        "--mailbox-size",
        metavar="N",
        type=positive_int,
        default=_RUNTIME.mailbox_size,
        help="calls queued per context before callers wait (default %(default)s)",
    )
    group.add_argument(
        "--max-actors",
        metavar="N",
        type=positive_int,
        default=_RUNTIME.max_actors,
        help="cap on live contexts; at it, an idle one is evicted, fairly among tenants "
        "(default %(default)s)",
    )
    group.add_argument(
        "--max-actors-per-tenant",
        metavar="N",
        type=positive_int,
        help="cap on one tenant's live contexts (sessions 'T' and 'T/...'); at it, the "
        "tenant's own least recently used idle one is evicted (default: none)",
    )
    group.add_argument(
        "--call-timeout",
        metavar="SECONDS",
        type=seconds_or_zero,
        default=_RUNTIME.call_timeout or 0.0,
        help="deadline for one tool call; 0 for none (default %(default)g)",
    )
    group.add_argument(
        "--heavy-threads",
        metavar="N",
        type=positive_int,
        default=_RUNTIME.heavy_threads,
        help="heavy tool calls (a search over large documents) running at once, each in a "
        "worker thread; more wait (default %(default)s)",
    )
    group.add_argument(
        "--shutdown-grace",
        metavar="SECONDS",
        type=seconds_or_zero,
        default=_RUNTIME.shutdown_grace,
        help="on SIGINT/SIGTERM, how long calls in flight may finish (default %(default)g)",
    )
    group.add_argument(
        "--state",
        metavar="URL",
        action=StateUrls,
        type=state_urls,
        help=(
            "(required) the store every shard shares: postgresql://USER@HOST/DB (repeated, "
            "a store split by session over those databases), or sqlite:///PATH with every "
            "shard on this machine"
            if cluster
            else "where durable state (planning, playbooks, content) is kept: sqlite:///PATH, "
            "postgresql://USER@HOST/DB, or memory (lost on exit); repeated with PostgreSQL "
            "URLs, a store split by session over those databases; default: "
            "$XDG_STATE_HOME/mcp-actors/state.db (~/.local/state/...) over stdio, "
            "http-state.db beside it over HTTP, printed at startup"
        ),
    )
    group.add_argument(
        "--state-retention",
        metavar="DAYS",
        type=seconds_or_zero,
        default=(_RUNTIME.state_retention or 0.0) / _DAY,
        help="stored state not written for this many days is deleted; 0 keeps it "
        "(default %(default)g)",
    )
    group.add_argument(
        "--shared-store",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="other processes write the same store: before each call of a durable module, "
        "ask the key's stored version and load the state again if another process changed "
        "it, so that no read is stale (default: "
        + (
            "off: placement gives each session one shard"
            if cluster
            else "on for PostgreSQL, off for SQLite"
        )
        + ")",
    )
    if not cluster:
        group.add_argument(
            "--session",
            metavar="NAME",
            help="over stdio, the session calls that name none land in, kept across restarts "
            "and shared by every server given it (default: a session private to the "
            "connection, ended when it closes)",
        )
        group.add_argument(
            "--allow-session-naming",
            action="store_true",
            help="over stdio, let a call's arguments (__sessionId, which the model writes) name "
            "a session other than the connection's own (default: refused; the host names "
            "other sessions in _meta.sessionId)",
        )
    group.add_argument(
        "--require-session",
        action="store_true",
        help="strict context policy: refuse a stdio call that names no session",
    )
    group.add_argument(
        "--handles",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="conversation handles: list conversation__start, whose handle a model passes as "
        "the 'conversation' argument of every stateful call, so that clients that name no "
        "session (the 2026 protocol, a connection per call) keep one conversation's state "
        "(default: on over HTTP, off over stdio, where each connection has a session)",
    )
    group.add_argument(
        "--handle-key-file",
        metavar="PATH",
        type=Path,
        help="the keys handles are signed with, one per line (at least 32 characters): the "
        "first signs, all verify, so a key is rotated by putting a new one first; every "
        "front or worker given the file reads every handle (default: a key kept beside a "
        "SQLite state file, else one of this process)",
    )
    group.add_argument(
        "--handle-lifetime",
        metavar="DAYS",
        type=seconds_or_zero,
        default=DEFAULT_LIFETIME / _DAY,
        help="how long a handle is valid after it is minted (default %(default)g)",
    )
    group.add_argument(
        "--allow-end-session",
        action="store_true",
        help="list the session__end tool, with which a client ends its own session and "
        "deletes what is stored for it (off: only the operator ends sessions)",
    )
    group.add_argument(
        "--mask-errors",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="give a client only an error id, not the text, of a tool's unexpected exception "
        "(any but a ToolError), which the log keeps with its traceback under that id "
        "(default: on over HTTP, off over stdio)",
    )
    group.add_argument(
        "--log-level",
        # Lowercased before the choices are checked, so INFO (as other tools spell it) works.
        type=str.lower,
        choices=_LOG_LEVELS,
        default="info",
        help="what to log to stderr (default info: one line per call)",
    )
    group.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text lines (the default), or one JSON object per line with the call's fields",
    )
    group.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        nargs="?",
        const=_ON_THE_HTTP_LISTENER,
        type=_metrics_address,
        help="serve Prometheus metrics (needs the metrics extra): alone, at /metrics on the "
        "--http listener, behind its tokens; with HOST:PORT, on a listener of its own without "
        "tokens, with /healthz and /readyz (the only way for a stdio server)",
    )


def read_tokens(path: Path) -> list[tuple[str, str | None]]:
    """The tokens in `path`: ``TOKEN`` or ``TOKEN=TENANT`` per line.

    A ``#`` starts a comment only at the start of a line or after white space,
    so a token may contain ``#`` (cutting ``Zq9#xK2p…=T`` at ``#`` would have
    made ``Zq9`` a gateway token). A line that is not one token is an error
    naming its number; nothing is read past it.
    """
    tokens = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = _COMMENT.sub("", line).strip()
        if not text:
            continue
        if any(character.isspace() for character in text):
            msg = f"{path}:{number}: expected one TOKEN or TOKEN=TENANT, found several words"
            raise ValueError(msg)
        try:
            tokens.append(_token(text))
        except argparse.ArgumentTypeError as exc:
            msg = f"{path}:{number}: {exc}"
            raise ValueError(msg) from None
    return tokens


def _token_table(pairs: Iterable[tuple[str, str | None]]) -> dict[str, str | None]:
    table: dict[str, str | None] = {}
    for token, tenant in pairs:
        if token in table and table[token] != tenant:
            msg = "one token is given twice with different tenants"
            raise ValueError(msg)
        table[token] = tenant
    return table


_OAUTH_DETAILS: Final = (
    ("--oauth-resource", "oauth_resource"),
    ("--oauth-audience", "oauth_audience"),
    ("--oauth-jwks-url", "oauth_jwks_url"),
    ("--oauth-tenant-claim", "oauth_tenant_claim"),
    ("--oauth-gateway-scope", "oauth_gateway_scope"),
    ("--oauth-required-scope", "oauth_required_scope"),
    ("--oauth-algorithm", "oauth_algorithm"),
)


def _oauth(args: argparse.Namespace) -> OAuthSettings | None:
    """The OAuth settings the command line describes (not yet checked); None without
    --oauth-issuer, which the other --oauth options need."""
    if args.oauth_issuer is None:
        given = [flag for flag, name in _OAUTH_DETAILS if getattr(args, name)]
        if given:
            msg = f"{', '.join(given)} need(s) --oauth-issuer"
            raise ConfigurationError(msg)
        return None
    if args.oauth_resource is None:
        msg = (
            "--oauth-issuer needs --oauth-resource URL: this server's MCP endpoint as clients "
            "reach it, e.g. https://mcp.example.com/mcp"
        )
        raise ConfigurationError(msg)
    return OAuthSettings(
        issuer=args.oauth_issuer,
        resource=args.oauth_resource,
        audience=args.oauth_audience,
        jwks_url=args.oauth_jwks_url,
        tenant_claim=args.oauth_tenant_claim,
        gateway_scope=args.oauth_gateway_scope,
        required_scopes=tuple(args.oauth_required_scope),
        algorithms=tuple(dict.fromkeys(args.oauth_algorithm)) or ASYMMETRIC_ALGORITHMS,
    )


def configure_logging(level: str, log_format: LogFormat = "text") -> None:
    """Log to stderr at `level` as ``serve`` does: one line per event, libraries kept quiet
    (and, below debug, bounded: `LibraryLines`), written together while ``serve`` runs
    (`LineBuffer`). Under ``json``, Python's warnings and the traceback of an uncaught
    exception are records too (`capture_stray_output`)."""
    handler = log_handler(log_format)
    logging.basicConfig(level=level.upper(), handlers=[handler])
    # Neither format names a thread, a process or an asyncio task: a record (one per call)
    # need not ask for them (`os.getpid`, `threading.current_thread`, `multiprocessing`'s
    # process; from 3.12, `asyncio.current_task`, which under trio raises for each record).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    if sys.version_info >= (3, 12):
        logging.logAsyncioTasks = False
    if log_format == "json":
        capture_stray_output()
    if level != "debug":
        handler.addFilter(LibraryLines(_QUIET_LOGGERS))
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def _options(args: argparse.Namespace) -> ServeOptions:
    """The options the parsed command line describes (not yet checked)."""
    tokens = list(args.token)
    if args.tokens_file is not None:
        tokens += read_tokens(args.tokens_file)
    if args.module and os.getcwd() not in sys.path:
        # Modules beside the operator are found, after the installed packages: a
        # protocol.py or mcp.py there must not hide the packages the server runs on.
        sys.path.append(os.getcwd())
    builtins = args.modules if args.modules is not None else () if args.module else DEFAULT_MODULES
    runtime = attrs.evolve(
        _RUNTIME,
        ttl=args.ttl,
        mailbox_size=args.mailbox_size,
        max_actors=args.max_actors,
        max_actors_per_tenant=args.max_actors_per_tenant,
        call_timeout=args.call_timeout or None,
        shutdown_grace=args.shutdown_grace,
        heavy_threads=args.heavy_threads,
        state_retention=args.state_retention * _DAY or None,
        policy=ContextPolicy(require_session=args.require_session),
        mask_errors=args.mask_errors,
        shared_store=args.shared_store,
    )
    return ServeOptions(
        modules=(*builtins, *args.module),
        allow_exec=args.allow_exec,
        exec_allow=None if args.exec_allow is None else tuple(args.exec_allow),
        workspace_root=args.workspace_root,
        exec_max_processes=args.exec_max_processes,
        exec_file_cap=args.exec_file_cap,
        runtime=runtime,
        http=args.http,
        tokens=_token_table(tokens),
        oauth=_oauth(args),
        allow_origins=tuple(args.allow_origin),
        allow_hosts=tuple(args.allow_host),
        trusted_proxies=tuple(args.trusted_proxy),
        session=args.session,
        allow_session_naming=args.allow_session_naming,
        allow_end_session=args.allow_end_session,
        handles=args.handles,
        handle_key_file=args.handle_key_file,
        handle_lifetime=args.handle_lifetime * _DAY,
        insecure=args.insecure,
        unsafe_shared_exec=args.unsafe_shared_exec,
        max_sessions_per_token=args.max_sessions_per_token,
        session_idle_timeout=args.session_idle_timeout,
        max_stored_event_bytes=args.max_stored_event_bytes,
        session_id_prefix=args.session_id_prefix,
        max_in_flight=args.max_in_flight,
        state=args.state,
        max_request_bytes=args.max_request_bytes,
        max_connections_per_address=args.max_connections_per_address,
        metrics=args.metrics is not None,
        metrics_address=None if args.metrics in (None, _ON_THE_HTTP_LISTENER) else args.metrics,
    )


def main(argv: Sequence[str] | None = None, prog: str = "mcp-actors serve") -> int:
    """Run ``serve`` with the arguments `argv`; returns the process exit code."""
    cli = with_environment(parser(prog))
    args = cli.parse_args(argv)
    options = checked_options(cli, args)
    return run_server(cli, args, functools.partial(serve, options))


def checked_options(cli: argparse.ArgumentParser, args: argparse.Namespace) -> ServeOptions:
    """The options `args` describe, checked; a usage error (exit 2) naming the problem if bad.

    Logging is set up first, as `args` ask: the check imports the modules, and what they
    log or warn comes in that format (under ``json``, the usage error too).
    """
    configure_logging(args.log_level, args.log_format)
    try:
        options = _options(args)
        options.check()
    except (ConfigurationError, ValueError, OSError) as exc:
        if args.log_format == "json":  # a record, like every other line on stderr
            announce(f"error: {exc}", level=logging.ERROR, prefix=cli.prog)
            cli.exit(2)
        cli.error(str(exc))
    return options


def run_server(
    cli: argparse.ArgumentParser,
    args: argparse.Namespace,
    serving: Callable[[], Awaitable[None]],
) -> int:
    """Log as `args` ask and run `serving` under trio; exit 1 with the reason if it cannot."""
    configure_logging(args.log_level, args.log_format)
    failures: list[str] = []
    try:
        trio.run(serving)
    except* (OSError, StoreError) as group:  # the address is taken, the store unusable, ...
        failures = [str(error) for error in leaves(group)]
    if failures:
        # A JSON record under --log-format json, like every other line on stderr.
        announce(
            f"error: cannot serve: {'; '.join(failures)}", level=logging.ERROR, prefix=cli.prog
        )
        cli.exit(1)
    return 0
