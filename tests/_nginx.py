"""A real nginx for the tests: a reverse proxy in front of a ``serve --http`` server.

The binary is Debian's ``nginx`` package (/usr/sbin/nginx; else ``nginx`` on
the PATH). Each proxy gets a folder of its own and a full nginx.conf: one
process in the foreground (``daemon off``, ``master_process off``), its pid
file, logs and temporary files in the folder, listening on 127.0.0.1 at a
free port. Its ``upstream`` and ``server`` blocks are examples/nginx.conf with
the placeholders filled in (or, in front of two fronts of a cluster,
examples/nginx-fronts.conf), so the configuration users copy is the one the
tests run. The proxy is stopped (SIGTERM, then SIGKILL) and reaped when its
block ends, whatever the test did. Without nginx the tests that need it are
skipped, or fail when the ``CI`` environment variable is set, so that CI
never passes by skipping them.

A test module imports the fixture (pytest finds it by the name ``nginx``)::

    from ._nginx import nginx_fixture  # noqa: F401  (a fixture)

and puts a proxy in front of a server::

    async with http_server(...) as server, nginx.in_front_of(server.url) as proxy:
        ...  # proxy.url, with proxy.host_header

or in front of two fronts, started with ``--session-id-prefix a`` and ``b``::

    async with nginx.in_front_of_fronts(front_a.url, front_b.url) as proxy:
        ...
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn
from urllib.parse import urlsplit

import pytest
import trio

from ._postgres import free_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping

__all__ = [
    "EXAMPLE",
    "FRONTS_EXAMPLE",
    "PUBLIC_NAME",
    "Nginx",
    "NginxError",
    "ReverseProxy",
    "nginx_fixture",
]

EXAMPLE: Final = Path(__file__).resolve().parent.parent / "examples" / "nginx.conf"
FRONTS_EXAMPLE: Final = EXAMPLE.with_name("nginx-fronts.conf")
"""Two fronts of one cluster, their session ids prefixed ``a.`` and ``b.``."""
PUBLIC_NAME: Final = "mcp.example.test"
"""The name clients ask the proxy for (nginx passes it on as ``Host``)."""
_START_ATTEMPTS: Final = 3  # a free port can be taken between choosing it and binding it
_STARTUP_TIMEOUT: Final = 30.0  # nginx retries a taken port for 2.5 s before it gives up
_STOP_GRACE: Final = 10.0

# Everything but the example's blocks: the process, and where it writes.
# "@ROOT@" is the proxy's folder (nginx's own $variables rule out str.format).
_MAIN_CONF: Final = """\
# Written by tests/_nginx.py: one nginx process in the foreground, its files in its folder.
daemon off;
master_process off;
pid "@ROOT@/nginx.pid";
error_log "@ROOT@/error.log" info;

events {
    worker_connections 256;
}

http {
    log_format mcp '$remote_addr "$request" $status host=$host '
                   'last_event_id="$http_last_event_id" upstream=$upstream_status '
                   'session="$http_mcp_session_id" to=$upstream_addr';
    access_log "@ROOT@/access.log" mcp;
    client_body_temp_path "@ROOT@/client_body";
    proxy_temp_path "@ROOT@/proxy";
    fastcgi_temp_path "@ROOT@/fastcgi";
    uwsgi_temp_path "@ROOT@/uwsgi";
    scgi_temp_path "@ROOT@/scgi";

    include "@ROOT@/mcp-actors.conf";
}
"""


class NginxError(RuntimeError):
    """nginx did not start; the message has its logs."""


def _unavailable(reason: str) -> NoReturn:
    """Skip the test, or fail it on CI, where a missing nginx must not pass unnoticed."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so the nginx tests must run", pytrace=False)
    pytest.skip(reason)


def _find_nginx() -> Path | None:
    """Debian's nginx, else the one on the PATH."""
    debian = Path("/usr/sbin/nginx")
    if debian.is_file():
        return debian
    found = shutil.which("nginx")
    return None if found is None else Path(found)


def example_blocks(listen: str, server_name: str, upstream: str) -> str:
    """examples/nginx.conf with its placeholders filled in (its comments left as they are)."""
    values = {"LISTEN": listen, "SERVER_NAME": server_name, "UPSTREAM": upstream}
    return filled(EXAMPLE, values)


def fronts_blocks(listen: str, server_name: str, front_a: str, front_b: str) -> str:
    """examples/nginx-fronts.conf with its placeholders filled in."""
    values = {"LISTEN": listen, "SERVER_NAME": server_name, "FRONT_A": front_a, "FRONT_B": front_b}
    return filled(FRONTS_EXAMPLE, values)


def filled(example: Path, values: Mapping[str, str]) -> str:
    """`example` with each ``${MCP_<NAME>}`` placeholder of its directives set to
    ``values[NAME]``; every one of them must be there, and no other."""
    lines = example.read_text().splitlines(keepends=True)
    directives = [index for index, line in enumerate(lines) if not line.lstrip().startswith("#")]
    for name, value in values.items():
        placeholder = f"${{MCP_{name}}}"
        assert any(placeholder in lines[index] for index in directives), (
            f"{example} lost its {placeholder} placeholder"
        )
        for index in directives:
            lines[index] = lines[index].replace(placeholder, value)
    left = [lines[index] for index in directives if "${MCP_" in lines[index]]
    assert not left, f"{example} has placeholders this fixture does not fill: {left}"
    return "".join(lines)


class ReverseProxy:
    """One running nginx in front of one server."""

    def __init__(self, process: trio.Process, root: Path, port: int, server_name: str) -> None:
        self.process = process
        self.root = root
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.host_header = {"Host": server_name}
        """What a client sends to reach the server by its public name."""

    def error_log(self) -> str:
        return _read(self.root / "error.log")

    def access_log(self) -> str:
        """One line per finished request: address, request line, status, Host, Last-Event-ID,
        the session id and the upstream address that served it."""
        return _read(self.root / "access.log")


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


class Nginx:
    """The nginx binary, and a test's folder to run proxies in."""

    def __init__(self, binary: Path, root: Path) -> None:
        self._binary = binary
        self._root = root
        self._serial = itertools.count(1)

    def in_front_of(
        self, upstream_url: str, server_name: str = PUBLIC_NAME
    ) -> AbstractAsyncContextManager[ReverseProxy]:
        """nginx with examples/nginx.conf, passing requests to `upstream_url`."""
        upstream = urlsplit(upstream_url).netloc
        return self._running(
            lambda listen: example_blocks(listen, server_name, upstream), server_name
        )

    def in_front_of_fronts(
        self, front_a_url: str, front_b_url: str, server_name: str = PUBLIC_NAME
    ) -> AbstractAsyncContextManager[ReverseProxy]:
        """nginx with examples/nginx-fronts.conf, in front of the fronts whose session ids
        are prefixed ``a.`` (at `front_a_url`) and ``b.``."""
        front_a, front_b = urlsplit(front_a_url).netloc, urlsplit(front_b_url).netloc
        return self._running(
            lambda listen: fronts_blocks(listen, server_name, front_a, front_b), server_name
        )

    @asynccontextmanager
    async def _running(
        self, blocks: Callable[[str], str], server_name: str
    ) -> AsyncIterator[ReverseProxy]:
        """nginx with the `blocks` made for its ``listen`` address, until the block ends."""
        for attempt in range(1, _START_ATTEMPTS + 1):
            root = self._root / f"nginx-{next(self._serial)}"
            root.mkdir()
            port = free_port()
            listen = f"127.0.0.1:{port}"
            (root / "mcp-actors.conf").write_text(blocks(listen))
            conf = root / "nginx.conf"
            conf.write_text(_MAIN_CONF.replace("@ROOT@", str(root)))
            command = [str(self._binary), "-p", str(root), "-c", str(conf)]
            # -e: the error log from the start, before nginx has read its
            # configuration (else it opens /var/log/nginx/error.log first).
            command += ["-e", str(root / "error.log")]
            with (root / "stderr.log").open("wb") as stderr:
                process = await trio.lowlevel.open_process(
                    command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr
                )
            try:
                started = await _wait_until_ready(process, root, port)
            except BaseException:
                await _stop(process)
                raise
            if started:
                break
            await _stop(process)
            logs = f"{_read(root / 'stderr.log')}{_read(root / 'error.log')}"
            if "Address already in use" not in logs or attempt == _START_ATTEMPTS:
                msg = f"nginx exited with {process.returncode} on start:\n{logs}"
                raise NginxError(msg)
        try:
            yield ReverseProxy(process, root, port, server_name)
        finally:
            await _stop(process)


async def _wait_until_ready(process: trio.Process, root: Path, port: int) -> bool:
    """True once nginx accepts connections on `port`; False if it exited first.

    nginx writes its pid file after it has bound its sockets: until then a
    connection could reach whoever took the port from it.
    """
    pid_file = root / "nginx.pid"
    with trio.move_on_after(_STARTUP_TIMEOUT):
        while process.returncode is None:
            if _read(pid_file).strip() == str(process.pid):
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    pass
                else:
                    await stream.aclose()
                    return True
            # Another process's start: there is no event to wait on, so poll.
            await trio.sleep(0.02)
        return False
    msg = (
        f"nginx did not accept connections on 127.0.0.1:{port} within {_STARTUP_TIMEOUT} s:\n"
        f"{_read(root / 'stderr.log')}{_read(root / 'error.log')}"
    )
    raise NginxError(msg)


async def _stop(process: trio.Process) -> None:
    """SIGTERM (nginx's fast shutdown: open streams are closed), then SIGKILL; reaped."""
    with trio.CancelScope(shield=True):
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(_STOP_GRACE):
                await process.wait()
        if process.returncode is None:
            process.kill()
        await process.wait()


@pytest.fixture(name="nginx")
def nginx_fixture(tmp_path: Path) -> Nginx:
    """nginx, to put in front of the test's servers; skipped (failed on CI) without it."""
    binary = _find_nginx()
    if binary is None:
        _unavailable(
            "nginx is not installed (no /usr/sbin/nginx, no nginx on the PATH): "
            "apt-get install nginx"
        )
    return Nginx(binary, tmp_path)
