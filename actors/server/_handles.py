"""Conversation handles, served: the keys, the start tool, and what lists carry a handle.

With handles on (``serve --handles``; the default over HTTP), a model starts a
conversation with ``conversation__start`` and passes the handle it gets as the
``conversation`` argument of every later call (`protocol.HandleKeys` mints and reads
them; `protocol.Caller.handles` applies them to a call). Here:

* the keys: the operator's file (``--handle-key-file``: one per line, the first mints,
  all verify), else a key kept beside a SQLite state file, made once (``<file>.handle-key``,
  0600), so that handles outlive a restart as the state does; else (memory or PostgreSQL
  state) a key of this process, said at startup;
* the start tool and its result;
* the listings: every stateful tool's input schema, every prompt and every resource
  (as a template with ``{?conversation}``) gain the handle.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mcp import types

from protocol import (
    HANDLE_ARGUMENT,
    HANDLE_TOOL,
    BackendType,
    CallResult,
    HandleKeys,
    ServiceInfo,
)

from ._options import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .._module import Tool
    from .._registry import Registry
    from ._options import ServeOptions

__all__ = [
    "KEY_FILE_SUFFIX",
    "PROCESS_KEY",
    "START_SERVICE",
    "START_TOOL",
    "check_handle_names",
    "read_key_file",
    "serving_keys",
    "started",
    "with_handle",
    "with_handle_argument",
    "with_handle_query",
]

logger = logging.getLogger("actors.serve")

PROCESS_KEY: Final = (
    "this process's own: its handles end with it and no other front or worker reads them "
    "(--handle-key-file for keys that last and are shared)"
)
"""Where the keys come from when neither a key file nor a SQLite state file gives them."""
KEY_FILE_SUFFIX: Final = ".handle-key"
"""What the key kept beside a SQLite state file is named after: ``state.db.handle-key``."""
START_SERVICE: Final = ServiceInfo("conversation", "start", BackendType.BUILTIN)
_DESCRIBED: Final = (
    "The handle of this conversation, from conversation__start. Pass the same handle in "
    "every call of one conversation, and never one conversation's handle in another."
)
_PROPERTY: Final = {"type": "string", "description": _DESCRIBED}
START_TOOL: Final = types.Tool(
    name=HANDLE_TOOL,
    title="Start a conversation",
    description=(
        "Start a new conversation and get its handle. Call it once, before the other tools; "
        f"then pass the handle as {HANDLE_ARGUMENT!r} in every tool call of this "
        "conversation: their state (goals, playbooks, documents…) is kept per conversation. "
        "Start another conversation only for a separate task."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={
        "type": "object",
        "properties": {HANDLE_ARGUMENT: {"type": "string"}},
        "required": [HANDLE_ARGUMENT],
        "additionalProperties": False,
    },
    # Changes no state; each call starts another conversation.
    annotations=types.ToolAnnotations(
        title="Start a conversation", read_only_hint=True, open_world_hint=False
    ),
)
"""The tool a model calls to start a conversation, listed where handles are on."""


def started(handle: str) -> CallResult:
    """The result of ``conversation__start``: the handle, for the model and for programs."""
    text = (
        f"Started a new conversation; its handle is {handle}. Pass it as {HANDLE_ARGUMENT!r} "
        "in every tool call of this conversation."
    )
    return CallResult.both(text, {HANDLE_ARGUMENT: handle}).stamped(START_SERVICE)


# ---- the keys ------------------------------------------------------------------------


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


# ---- what the lists carry --------------------------------------------------------------


def check_handle_names(registry: Registry) -> None:
    """Refuse modules that would collide with handles: a tool named ``conversation__start``,
    or a tool or prompt with an argument of the handle's name."""
    if HANDLE_TOOL in {tool.full_name for tool in registry.tools()}:
        msg = f"a module's tool is named {HANDLE_TOOL!r}, which conversation handles need"
        raise ConfigurationError(msg)
    operations = [tool.signature for tool in registry.tools()]
    operations += [prompt.operation.signature for prompt in registry.prompts()]
    operations += [resource.operation.signature for resource in registry.templates()]
    for signature in operations:
        if HANDLE_ARGUMENT in signature.input_schema.get("properties", {}):
            msg = (
                f"an argument of a tool or prompt, or a variable of a resource template, is "
                f"named {HANDLE_ARGUMENT!r}, which conversation handles take for themselves: "
                "rename it, or serve --no-handles"
            )
            raise ConfigurationError(msg)


def with_handle(tool: Tool) -> dict[str, Any]:
    """`tool`'s input schema with the required handle argument, unless the tool is stateless."""
    schema = tool.input_schema
    if tool.stateless:
        return dict(schema)
    properties = {**schema.get("properties", {}), HANDLE_ARGUMENT: dict(_PROPERTY)}
    required = [*schema.get("required", ()), HANDLE_ARGUMENT]
    return {**schema, "properties": properties, "required": required}


def with_handle_argument(arguments: Iterable[types.PromptArgument]) -> list[types.PromptArgument]:
    """A prompt's arguments with the handle's, required."""
    handle = types.PromptArgument(name=HANDLE_ARGUMENT, description=_DESCRIBED, required=True)
    return [*arguments, handle]


def with_handle_query(template: str) -> str:
    """The URI template that reads `template` (a URI or a template) for a conversation."""
    return template + ("{&" if "?" in template else "{?") + HANDLE_ARGUMENT + "}"
