"""Conversation handles' keys: where a server finds the keys it mints and reads them with.

The operator's file (``--handle-key-file``: one per line, the first mints, all verify),
else a key kept beside a SQLite state file, made once (``<file>.handle-key``, 0600), so
that handles outlive a restart as the state does; else (memory or PostgreSQL state) a key
of this process, said at startup.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from protocol import HandleKeys

from ._configuration import ConfigurationError

if TYPE_CHECKING:
    from ._options import ServeOptions

__all__ = ["KEY_FILE_SUFFIX", "PROCESS_KEY", "read_key_file", "serving_keys"]

logger = logging.getLogger("actors.serve")

PROCESS_KEY: Final = (
    "this process's own: its handles end with it and no other front or worker reads them "
    "(--handle-key-file for keys that last and are shared)"
)
"""Where the keys come from when neither a key file nor a SQLite state file gives them."""
KEY_FILE_SUFFIX: Final = ".handle-key"
"""What the key kept beside a SQLite state file is named after: ``state.db.handle-key``."""


def read_key_file(path: Path) -> tuple[bytes, ...]:
    """The keys in `path`, one per line (blank lines and ``#`` comments skipped), in order.

    Warns when others than its owner may read it (a mounted secret often is 0644).
    """
    mode, text = _read_regular(path, follow=True)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning(
            "the handle key file %s may be read by others (mode %s): anyone who reads it "
            "can forge handles",
            path,
            stat.filemode(mode),
        )
    return _keys_in(path, text)


def _read_regular(path: Path, *, follow: bool) -> tuple[int, str]:
    """(mode, text) of the regular file `path`, opened once; ConfigurationError otherwise."""
    flags = os.O_RDONLY | (0 if follow else os.O_NOFOLLOW) | os.O_NONBLOCK
    try:
        descriptor = os.open(path, flags)
        with os.fdopen(descriptor, "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                msg = f"the handle key file {str(path)!r} is not a regular file"
                raise ConfigurationError(msg)
            if not follow and status.st_uid != os.geteuid():
                msg = f"the handle key file {str(path)!r} belongs to another user"
                raise ConfigurationError(msg)
            return status.st_mode, file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read the handle key file {str(path)!r}: {exc}"
        raise ConfigurationError(msg) from None


def _keys_in(path: Path, text: str) -> tuple[bytes, ...]:
    lines = (line.strip() for line in text.splitlines())
    keys = tuple(line.encode() for line in lines if line and not line.startswith("#"))
    if not keys:
        msg = f"the handle key file {str(path)!r} holds no key (one per line, the first mints)"
        raise ConfigurationError(msg)
    return keys


def serving_keys(
    options: ServeOptions, store_url: str | None = None
) -> tuple[HandleKeys | None, str]:
    """The keys a server with `options` on the store at `store_url` (None: not known)
    mints and reads handles with, and where they came from, for the startup log; None
    when handles are off."""
    if not options.handles_on:
        return None, "off"
    if options.handle_key_file is not None:
        keys, where = read_key_file(options.handle_key_file), str(options.handle_key_file)
    elif store_url is not None and store_url.startswith("sqlite:///"):
        # A store's URL spells its file as it is (no percent-encoding).
        path = Path(store_url.removeprefix("sqlite:///") + KEY_FILE_SUFFIX)
        keys, where = (_kept_key(path),), f"{path} (made once, beside the state)"
    else:
        keys = (secrets.token_urlsafe(32).encode(),)
        where = PROCESS_KEY
    try:
        return HandleKeys(keys, time.time, options.handle_lifetime), where
    except ValueError as exc:
        msg = f"{where}: {exc}"
        raise ConfigurationError(msg) from None


def _kept_key(path: Path) -> bytes:
    """The key in `path`, made there first if it is not (by one of several processes).

    Written whole to a file of its own, then linked into place: a process starting at
    the same moment finds either no file or the whole key, never an empty file.
    """
    if os.path.lexists(path):  # a link too: `_private_key` refuses it
        return _private_key(path)
    key = secrets.token_urlsafe(32).encode()
    fresh = path.with_name(f"{path.name}.{secrets.token_hex(8)}")
    try:
        descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(key + b"\n")
        os.link(fresh, path)
    except FileExistsError:
        return _private_key(path)  # another process made it first
    except OSError as exc:
        msg = f"cannot make the handle key file {str(path)!r}: {exc}"
        raise ConfigurationError(msg) from None
    finally:
        fresh.unlink(missing_ok=True)
    return key


def _private_key(path: Path) -> bytes:
    """The first key of the kept key file: this user's own regular file, not a link, that
    nobody else may read; ConfigurationError otherwise."""
    mode, text = _read_regular(path, follow=False)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        msg = (
            f"the handle key file {str(path)!r} may be read by others (mode "
            f"{stat.filemode(mode)}); anyone with it can forge handles: chmod 600 it"
        )
        raise ConfigurationError(msg)
    return _keys_in(path, text)[0]
