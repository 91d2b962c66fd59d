"""``python -m actors cluster``: the MCP Streamable HTTP endpoint in front of shards on Ray.

It is ``actors serve --http`` with a cluster as its backend: the same
options, tokens, tenants, Origin rules, limits, operator endpoints and
shutdown, but each call runs on its session's shard. The command starts a
local Ray instance, or joins one with ``--address``, starts the shards (named
``<name>/shard-N`` in Ray's ``mcp-actors`` namespace) and stops them when it
stops.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import logging
import os
import re
import secrets
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from .._argparse import with_environment
from ..server._addresses import is_loopback
from ..server._cli import checked_options, configure_logging, run_server
from ..server._cli import parser as serve_parser
from ..server._serve import serve
from ..store import check_store_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from .._observe import Observer
    from ..server._options import ServeOptions
    from ..store import StateStore
    from ..telemetry import PrometheusMetrics
    from ._cluster import Cluster

__all__ = ["main", "module_specs"]

logger = logging.getLogger("actors.cluster")

_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_EPILOG: Final = """environment:
  Every option that takes a value can also come from MCP_ACTORS_<OPTION>
  (MCP_ACTORS_STATE for --state); the command line wins.

examples:
  mcp-actors cluster --shards 2 --http 127.0.0.1:8765 --state postgresql://mcp@db/mcp
  mcp-actors cluster --address auto --shards 8 --http 0.0.0.0:8765 \\
      --tokens-file tokens.txt --state postgresql://mcp@db/mcp
"""


def parser(prog: str = "mcp-actors cluster") -> argparse.ArgumentParser:
    """The options ``serve --http`` and the cluster share, and the cluster's own."""
    cli = serve_parser(prog, cluster=True)
    cli.description = (
        "Serve tool modules over MCP Streamable HTTP from shards on Ray: each session's calls "
        "run on one shard, its durable state in the store every shard shares."
    )
    cli.epilog = _EPILOG
    group = cli.add_argument_group("cluster")
    group.add_argument(
        "--shards", metavar="N", type=_shard_count, default=2, help="shards to start (default 2)"
    )
    group.add_argument(
        "--address",
        metavar="ADDRESS",
        help="join this Ray cluster (as ray.init takes it: auto, HOST:PORT or ray://HOST:PORT); "
        "default: start a local Ray instance",
    )
    group.add_argument(
        "--num-cpus",
        metavar="N",
        type=_shard_count,
        help="CPUs of the local Ray instance (default: all); not with --address",
    )
    group.add_argument(
        "--name",
        default="mcp-actors",
        type=_cluster_name,
        help="the cluster's name, in its Ray actors' names (default %(default)s)",
    )
    group.add_argument(
        "--join",
        action="store_true",
        help="start no shards: serve one more front for the running cluster --name, on the "
        "Ray cluster --address names (its modules and settings are the cluster's)",
    )
    return with_environment(cli)


def _shard_count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 1024:
        msg = f"expected a whole number from 1 to 1024, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def _cluster_name(text: str) -> str:
    if not _NAME.fullmatch(text):
        msg = f"expected 1 to 64 letters, digits, '.', '_' or '-', got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return text


def module_specs(options: ServeOptions) -> tuple[str, ...]:
    """The ``package.module:attribute`` spec of each module `options` enable.

    Shards import modules by spec. Raises ValueError for the workspace: it
    runs programs on whichever host its session's shard is on, and a
    handover would leave them behind.
    """
    specs = []
    for entry in options.enabled:
        if not isinstance(entry, str):
            msg = f"a cluster imports its modules by spec; got the object {entry!r}"
            raise ValueError(msg)
        if entry == "workspace":
            msg = "--allow-exec: the workspace module is not served by a cluster"
            raise ValueError(msg)
        specs.append(entry if ":" in entry else f"actors.modules:{entry}")
    return tuple(specs)


def _check(cli: argparse.ArgumentParser, args: argparse.Namespace, options: ServeOptions) -> None:
    """The cluster's own usage errors (exit 2), before anything starts."""
    if options.http is None:
        cli.error("--http HOST:PORT is required: a cluster serves MCP over Streamable HTTP")
    if args.state is None or check_store_url(options.state_url) == "memory":
        cli.error(
            "--state: a cluster needs a store every shard shares, postgresql://… "
            "(or sqlite:///path, with every shard on this machine)"
        )
    if args.address is not None and args.num_cpus is not None:
        cli.error("--num-cpus sizes a local Ray instance: not with --address")
    if args.join and args.address is None:
        cli.error("--join serves a cluster that runs already: give its Ray's --address")


def main(argv: Sequence[str] | None = None, prog: str = "mcp-actors cluster") -> int:
    """Run ``cluster`` with the arguments `argv`; returns the process exit code."""
    cli = parser(prog)
    args = cli.parse_args(argv)
    options = checked_options(cli, args)
    _check(cli, args, options)
    try:
        specs = module_specs(options)
    except ValueError as exc:
        cli.error(str(exc))
    configure_logging(args.log_level, args.log_format)
    try:
        _secure_ray(args, options)
    except ValueError as exc:
        cli.exit(2, f"{cli.prog}: error: {exc}\n")
    import ray  # only now: it reads the environment `_secure_ray` set as it is imported

    from ._cluster import NAMESPACE

    if args.address is None:
        logger.info("starting a local Ray instance")
    else:  # Ray waits a while for an address that does not answer: say what it waits for
        logger.info("joining the Ray cluster at %s", args.address)
    try:
        # Ray's workers log to its session folder; the front's stderr stays the server's log.
        ray.init(
            address=args.address,
            num_cpus=args.num_cpus,
            namespace=NAMESPACE,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env=_local_modules(args),
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        cli.exit(1, f"{cli.prog}: error: cannot start or join Ray: {exc}\n")
    try:
        if args.join != _running(args.name):
            state = "no cluster" if args.join else "a cluster"
            cli.exit(2, f"{cli.prog}: error: --name: {state} {args.name!r} runs there\n")
        backend = (
            functools.partial(_front, args.name)
            if args.join
            else functools.partial(_shards, specs, args.shards, args.name)
        )
        return run_server(cli, args, functools.partial(serve, options, backend=backend))
    finally:
        ray.shutdown()


_AUTH_MODE: Final = "RAY_AUTH_MODE"
# Ray's own switch for a machine that runs no cluster: every Ray port binds 127.0.0.1.
_LOCAL_ONLY: Final = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_TOKEN_PATH: Final = "RAY_AUTH_TOKEN_PATH"
_TOKEN_AUTH_SINCE: Final = (2, 52)


def _secure_ray(args: argparse.Namespace, options: ServeOptions) -> None:
    """Make the Ray this command starts or joins take only clients that hold its token.

    Ray's ports run code for whoever reaches them, so: token authentication is
    required (Ray 2.52 and later; ``RAY_AUTH_MODE=disabled`` is refused), the
    token file is readable by this user only (Ray writes it world-readable),
    and a local Ray behind a loopback front binds every port to loopback.
    Raises ValueError saying what to change. Sets the variables in this
    process's environment, which Ray's processes inherit.
    """
    version = importlib.metadata.version("ray")
    if _release(version) < _TOKEN_AUTH_SINCE:
        msg = (
            f"Ray {version} has no token authentication, so anyone who reaches its ports could "
            "run code as this user: install ray 2.52 or later"
        )
        raise ValueError(msg)
    mode = os.environ.get(_AUTH_MODE, "token")
    if mode.lower() != "token":
        msg = (
            f"{_AUTH_MODE}={mode} turns off Ray's token authentication: anyone who reaches Ray's "
            f"ports could run code as this user; unset it (the cluster sets {_AUTH_MODE}=token)"
        )
        raise ValueError(msg)
    os.environ[_AUTH_MODE] = "token"
    if args.address is not None:
        # A Ray someone else runs: its token and its binds are theirs. One on
        # loopback (a loopback cluster's, joined) is reached as a local-only node.
        host = args.address.removeprefix("ray://").rpartition(":")[0]
        if host and is_loopback(host):
            os.environ[_LOCAL_ONLY] = "0"
        return
    if _TOKEN_PATH not in os.environ and "RAY_AUTH_TOKEN" not in os.environ:
        _private_token(Path.home() / ".ray" / "auth_token")
    assert options.http is not None
    if is_loopback(options.http[0]):
        os.environ[_LOCAL_ONLY] = "0"
        logger.info("Ray binds to loopback only, as the front does")


def _release(version: str) -> tuple[int, ...]:
    """``2.60.0rc1`` → ``(2, 60, 0)``: the numbers a release starts with."""
    numbers = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


def _private_token(path: Path) -> None:
    """Ray's default token file, made if missing, readable by this user only either way."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            logger.warning("Ray's token %s was readable by others: made private", path)
            path.chmod(0o600)
        return
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(32))  # as Ray makes its own: 256 bits


def _local_modules(args: argparse.Namespace) -> dict[str, Any] | None:
    """For a local Ray and ``--module``: shards search the current directory first, as serve does.

    On a Ray cluster joined with ``--address`` a module must be installed on
    every machine (or shipped with Ray's own ``working_dir``).
    """
    if not args.module or args.address is not None:
        return None
    path = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(path)}}


def _running(name: str) -> bool:
    import ray

    from ._cluster import NAMESPACE

    try:
        ray.get_actor(f"{name}/directory", namespace=NAMESPACE)
    except ValueError:
        return False
    return True


@asynccontextmanager
async def _shards(
    specs: Sequence[str],
    shards: int,
    name: str,
    options: ServeOptions,
    store: StateStore,
    observer: Observer | None,
    metrics: PrometheusMetrics | None,
) -> AsyncIterator[Cluster]:
    """The serve backend: `shards` shards for the life of the server.

    The front's store serves its readiness probe; its observer sees the calls
    it refuses. With ``--metrics`` every shard keeps metrics of its runtime,
    and the front's exposition includes them (`_announce`).
    """
    from ._cluster import open_cluster

    del store, observer
    opening = open_cluster(
        specs,
        shards=shards,
        state=options.state_url,
        config=options.runtime,
        name=name,
        metrics=metrics is not None,
    )
    # Starting and stopping shards blocks on Ray: in a thread, off the event loop.
    cluster: Any = await trio.to_thread.run_sync(opening.__enter__)
    _announce(cluster, metrics)
    try:
        yield cluster
    finally:
        # Shielded: the shards are stopped in order even when shutdown is hurried.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(opening.__exit__, None, None, None)


@asynccontextmanager
async def _front(
    name: str,
    options: ServeOptions,
    store: StateStore,
    observer: Observer | None,
    metrics: PrometheusMetrics | None,
) -> AsyncIterator[Cluster]:
    """The serve backend of ``--join``: the running cluster `name`, whose shards stay up."""
    del options, store, observer
    from ._cluster import connect_cluster

    cluster = await trio.to_thread.run_sync(connect_cluster, name)
    _announce(cluster, metrics)
    yield cluster


def _announce(cluster: Cluster, metrics: PrometheusMetrics | None) -> None:
    """Log where the cluster runs (``--join`` fronts are pointed at it); scrape its shards."""
    import ray

    address = ray.get_runtime_context().gcs_address
    shards = ", ".join(cluster.shards)
    logger.info("cluster %r on Ray at %s: %s", cluster.name, address, shards)
    if metrics is not None:
        # Gathered when /metrics is scraped, awaited without blocking the event loop
        # (a shard that does not answer is left out after a few seconds).
        metrics.include("shard", cluster.gathered_metric_families)
