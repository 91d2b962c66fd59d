"""A real PostgreSQL server for the tests: one per test session, a fresh database per test.

The server comes from the system's PostgreSQL (Debian's ``postgresql``
package, binaries under /usr/lib/postgresql/<version>/bin; else ``pg_ctl`` on
the PATH). It lives in a new temporary folder, listens on 127.0.0.1 at a free
port and on a socket in that folder, trusts local connections, and keeps
``fsync`` on, since the store's tests are about durability. PostgreSQL
refuses to run as root, so under root its commands run as the ``postgres``
system user (``runuser``), which owns the folder.

``initdb`` runs once per session; each test that wants isolation gets its
own database (``fresh_postgres_url``), dropped after it. The server is
stopped and its folder removed at the end of the session, whatever the tests
did. Without PostgreSQL the tests that need it are skipped, or fail when the
``CI`` environment variable is set, so that CI never passes by skipping them.

A test module imports the fixtures it uses (pytest finds them by the names
given in ``@pytest.fixture(name=...)``: ``postgres_server``, ``postgres_url``,
``fresh_postgres_url``, ``fresh_postgres_urls``); the functions have other names so that a test's
parameter does not shadow the import::

    from ._postgres import fresh_postgres_url_fixture  # noqa: F401  (a fixture)
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

import psycopg
import pytest
from psycopg import sql

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "PostgresServer",
    "ServerCommandError",
    "free_port",
    "fresh_postgres_url_fixture",
    "fresh_postgres_urls_fixture",
    "postgres_server_fixture",
    "postgres_url_fixture",
]

SUPERUSER: Final = "postgres"
_SERVER_USER: Final = "postgres"  # the system user Debian's package creates
_START_ATTEMPTS: Final = 3  # a free port can be taken between choosing it and binding it
_PG_CTL_TIMEOUT: Final = "60"  # seconds pg_ctl waits for a start or a stop


class ServerCommandError(RuntimeError):
    """initdb or pg_ctl failed; the message has its output and the end of the server's log."""


def _unavailable(reason: str) -> NoReturn:
    """Skip the test, or fail it on CI, where a missing server must not pass unnoticed."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so the PostgreSQL tests must run", pytrace=False)
    pytest.skip(reason)


def _find_bindir() -> Path | None:
    """The newest Debian-packaged PostgreSQL's binaries, else the folder of pg_ctl on the PATH."""
    debian = sorted(
        (Path(path) for path in glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else -1,
    )
    for bindir in reversed(debian):
        if (bindir / "pg_ctl").is_file():
            return bindir
    pg_ctl = shutil.which("pg_ctl")
    return None if pg_ctl is None else Path(pg_ctl).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresServer:
    """One PostgreSQL server in a folder of its own. Use `launch`, then `destroy`."""

    def __init__(self, bindir: Path, root: Path) -> None:
        self._bindir = bindir
        self._root = root
        self._data = root / "data"
        self._log = root / "server.log"
        self._port = 0
        self._options = ""  # the server's command-line options, for pg_ctl -o
        # Under root, every server command runs as the server user.
        self._as_server_user = ["runuser", "-u", _SERVER_USER, "--"] if os.geteuid() == 0 else []

    @classmethod
    def launch(cls, bindir: Path) -> PostgresServer:
        """initdb in a new temporary folder and start the server; the folder goes on failure."""
        root = Path(tempfile.mkdtemp(prefix="mcp-actors-postgres-"))
        server = cls(bindir, root)
        try:
            server._initdb()
            server._start_on_a_free_port()
        except BaseException:
            server.destroy()
            raise
        return server

    def url(self, database: str) -> str:
        """A libpq URL of `database` on this server, as the superuser."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self._port}/{database}"

    def create_database(self) -> str:
        """A new, empty database; its name."""
        name = f"test_{uuid.uuid4().hex}"
        self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return name

    def drop_database(self, name: str) -> None:
        """Drop `name`. Fails if a connection is still open on it after a few seconds."""
        self._admin(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))

    def restart(self) -> None:
        """Restart the server: every open connection to it breaks."""
        self._pg_ctl("restart", "-m", "fast")

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """The server is down inside the block and up again after it, even if the block fails."""
        self._pg_ctl("stop", "-m", "fast")
        try:
            yield
        finally:
            self._pg_ctl("start")

    def destroy(self) -> None:
        """Stop the server (fast, else immediate) and remove its folder."""
        if (self._data / "postmaster.pid").exists():
            try:
                self._pg_ctl("stop", "-m", "fast")
            except ServerCommandError:
                self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self._root, ignore_errors=True)

    def _initdb(self) -> None:
        if self._as_server_user:
            try:
                user = pwd.getpwnam(_SERVER_USER)
            except KeyError:
                _unavailable(
                    f"PostgreSQL refuses to run as root and there is no {_SERVER_USER!r} "
                    "system user to run it as"
                )
            os.chown(self._root, user.pw_uid, user.pw_gid)
        self._run(
            "initdb",
            "--pgdata",
            str(self._data),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-instructions",
            # initdb's own final flush only guards the new cluster against a power
            # cut, which a throwaway one does not need; the server's commits keep fsync.
            "--no-sync",
        )

    def _start_on_a_free_port(self) -> None:
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._port = free_port()
            self._options = shlex.join(
                [
                    *("-c", "listen_addresses=127.0.0.1"),
                    *("-p", str(self._port)),
                    *("-k", str(self._root)),
                    *("-c", "fsync=on"),
                ]
            )
            try:
                self._pg_ctl("start")
                return
            except ServerCommandError:
                if attempt == _START_ATTEMPTS:
                    raise

    def _pg_ctl(self, action: str, *options: str) -> None:
        if action in ("start", "restart"):
            options = (*options, "-o", self._options)
        self._run(
            "pg_ctl",
            action,
            "--pgdata",
            str(self._data),
            "--log",
            str(self._log),
            "--wait",
            "--timeout",
            _PG_CTL_TIMEOUT,
            *options,
        )

    def _run(self, program: str, *arguments: str) -> None:
        command = [*self._as_server_user, str(self._bindir / program), *arguments]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self._log.read_text(errors="replace")[-4000:] if self._log.exists() else ""
            msg = (
                f"{shlex.join(command)} exited with {done.returncode}:\n"
                f"{done.stdout}{done.stderr}\nend of the server log:\n{log}"
            )
            raise ServerCommandError(msg)

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(statement)


@pytest.fixture(scope="session", name="postgres_server")
def postgres_server_fixture() -> Iterator[PostgresServer]:
    """The test session's PostgreSQL server, stopped and removed at the end."""
    bindir = _find_bindir()
    if bindir is None:
        _unavailable(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin, no pg_ctl on the "
            "PATH): apt-get install postgresql"
        )
    server = PostgresServer.launch(bindir)
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="session", name="postgres_url")
def postgres_url_fixture(postgres_server: PostgresServer) -> str:
    """A database of this test session's own, shared by the tests that ask for it."""
    return postgres_server.url(postgres_server.create_database())


@pytest.fixture(name="fresh_postgres_url")
def fresh_postgres_url_fixture(postgres_server: PostgresServer) -> Iterator[str]:
    """A new, empty database for one test, dropped after it."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


@pytest.fixture(name="fresh_postgres_urls")
def fresh_postgres_urls_fixture(
    postgres_server: PostgresServer,
) -> Iterator[Callable[[int], list[str]]]:
    """Makes new, empty databases for one test (``make(n)``: the URLs of n more), dropped
    after it."""
    names: list[str] = []

    def make(count: int) -> list[str]:
        made = [postgres_server.create_database() for _ in range(count)]
        names.extend(made)
        return [postgres_server.url(name) for name in made]

    yield make
    for name in names:
        postgres_server.drop_database(name)
