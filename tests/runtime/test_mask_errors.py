"""``RuntimeConfig.mask_errors``: a handler's unexpected exception reaches the caller as an id.

Masked, the result names the tool and a short error id and nothing of the exception;
the log line with the traceback carries the same id. Unmasked (the default in process),
the result is what it always was. A `ToolError` is the author's message to the caller
and is never masked.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from actors import (
    ActorCrashedError,
    HandlerError,
    RuntimeConfig,
    StateUnreadableError,
    ToolError,
    ToolModule,
    open_runtime,
)
from actors.store import MemoryStore
from protocol import ActorKey, ToolContext

from ..store.test_durable import FaultyStore

if TYPE_CHECKING:
    from protocol import CallResult

SECRET = "postgresql://admin:hunter2@db.internal/prod"
MASKED = re.compile(
    r"tool 'vault__(\w+)' failed with an unexpected error \(error id ([0-9a-f]{12})\); "
    r"the server's log has the details"
)
LOGGED = re.compile(r"tool vault__(\w+) failed \(error id ([0-9a-f]{12})\)")


def vault() -> ToolModule[None]:
    """A module whose every kind of handler fails with the secret in its text."""
    module: ToolModule[None] = ToolModule("vault", lambda _context: None)

    @module.tool
    def inline(_state: None) -> str:
        """A sync handler, run on the loop."""
        raise KeyError(SECRET)

    @module.tool
    async def awaited(_state: None) -> str:
        """An async handler."""
        raise ValueError(SECRET)

    @module.tool(heavy=True)
    def threaded(_state: None) -> str:
        """A heavy handler, run in a worker thread."""
        raise OSError(SECRET)

    @module.tool
    def refuse(_state: None) -> str:
        """The author's own message to the caller."""
        raise ToolError(f"not allowed: {SECRET}")

    @module.resource("vault://keys")
    def keys(_state: None) -> str:
        """A resource whose handler fails."""
        raise RuntimeError(SECRET)

    return module


async def call(tool: str, **config: Any) -> CallResult:
    """The result of `tool` of the vault, on a runtime of `config`."""
    async with open_runtime([vault()], RuntimeConfig(**config)) as runtime:
        return await runtime.call_tool(f"vault__{tool}", {"__sessionId": "s"})


def logged_failures(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    """(tool, error id, traceback) of every handler failure logged."""
    found = []
    for record in caplog.records:
        match = LOGGED.fullmatch(record.getMessage())
        if match is not None:
            assert record.exc_info is not None, f"logged without its traceback: {record}"
            traceback = logging.Formatter().formatException(record.exc_info)
            found.append((match.group(1), match.group(2), traceback))
    return found


@pytest.mark.parametrize("tool", ["inline", "awaited", "threaded"])
async def test_a_masked_failure_gives_the_caller_only_the_id_the_log_has(
    tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Whichever way the handler runs: no secret in the result, the same id in both."""
    result = await call(tool, mask_errors=True)
    assert result.is_error
    match = MASKED.fullmatch(result.first_text)
    assert match is not None, result.first_text
    assert match.group(1) == tool
    assert SECRET not in repr(result)
    [(logged_tool, error_id, traceback)] = logged_failures(caplog)
    assert (logged_tool, error_id) == (tool, match.group(2))
    assert SECRET in traceback


@pytest.mark.parametrize("config", [{}, {"mask_errors": False}], ids=["default", "off"])
async def test_unmasked_the_result_is_as_before_and_the_log_has_an_id(
    config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Off (the default in process) the caller reads the exception; the log gains an id."""
    result = await call("inline", **config)
    assert result.first_text == f"tool 'vault__inline' failed: KeyError: {SECRET!r}"
    [(tool, _error_id, traceback)] = logged_failures(caplog)
    assert tool == "inline"
    assert SECRET in traceback


async def test_a_tool_error_is_never_masked() -> None:
    """The author wrote a ToolError's text for the caller: it comes back exactly."""
    result = await call("refuse", mask_errors=True)
    assert result.is_error
    assert result.first_text == f"not allowed: {SECRET}"


async def test_a_failing_resource_is_masked_too(caplog: pytest.LogCaptureFixture) -> None:
    """A resource runs as a hidden tool: its reader gets the id, not the exception."""
    async with open_runtime([vault()], RuntimeConfig(mask_errors=True)) as runtime:
        with pytest.raises(HandlerError) as raised:
            await runtime.read_resource("vault://keys", meta={"sessionId": "s"})
    assert SECRET not in str(raised.value)
    [(_tool, error_id, traceback)] = logged_failures(caplog)
    assert f"(error id {error_id})" in str(raised.value)
    assert SECRET in traceback


async def test_each_failure_has_an_id_of_its_own(caplog: pytest.LogCaptureFixture) -> None:
    """An id finds one failure in the log, not every failure of the tool."""
    async with open_runtime([vault()], RuntimeConfig(mask_errors=True)) as runtime:
        results = [await runtime.call_tool("vault__inline", {"__sessionId": "s"}) for _ in "ab"]
    ids = [match.group(2) for r in results if (match := MASKED.fullmatch(r.first_text))]
    assert len(set(ids)) == 2
    assert [error_id for _tool, error_id, _ in logged_failures(caplog)] == ids


def test_a_mask_that_is_not_a_bool_is_refused() -> None:
    """A string such as "no" would be truthy: refused, naming the field."""
    with pytest.raises(TypeError, match="'mask_errors' must be"):
        RuntimeConfig(mask_errors="no")  # type: ignore[arg-type]


# ---- beyond handlers: a crashed actor, a stored state that cannot be read, a failed write


@attrs.define
class Shelf:
    """A durable state whose field a stored blob can misfit."""

    items: list[str] = attrs.Factory(list)


def exploding(_context: object) -> None:
    """A state factory that fails with the secret in its text."""
    raise ConnectionError(SECRET)


def crashing() -> ToolModule[None]:
    module: ToolModule[None] = ToolModule("crashy", exploding)

    @module.tool
    def ping(_state: None) -> str:
        """Never reached: the state cannot be made."""
        return "pong"

    return module


def shelf() -> ToolModule[Shelf]:
    module = ToolModule("shelf", Shelf, durable=True)

    @module.tool
    def put(state: Shelf, item: str) -> str:
        """Put `item` on the shelf."""
        state.items.append(item)
        return "ok"

    return module


def logged_with_id(caplog: pytest.LogCaptureFixture, error_id: str) -> str:
    """The log line (and its traceback, if any) that carries `error_id`."""
    for record in caplog.records:
        if error_id in record.getMessage():
            trace = (
                ""
                if record.exc_info is None
                else logging.Formatter().formatException(record.exc_info)
            )
            return record.getMessage() + trace
    raise AssertionError(f"no log line has the error id {error_id}")


def told_id(text: str) -> str:
    """The error id a caller was told."""
    found = re.search(r"\(error id ([0-9a-f]{12}); the server's log has the details\)", text)
    assert found is not None, text
    return found.group(1)


@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
async def test_a_crashed_actor_tells_the_caller_the_cause_only_unmasked(
    masked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_runtime([crashing()], RuntimeConfig(mask_errors=masked)) as runtime:
        with pytest.raises(ActorCrashedError) as raised:
            await runtime.call_tool("crashy__ping", {"__sessionId": "s"})
    told = str(raised.value)
    if masked:
        assert SECRET not in told
        assert SECRET in logged_with_id(caplog, told_id(told))
    else:
        assert f"ConnectionError: {SECRET}" in told


@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
async def test_an_unreadable_state_tells_the_caller_why_only_unmasked(
    masked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    key = ActorKey("shelf", ToolContext("s"))
    await store.save(key, json.dumps({"schema": 1, "state": {"items": SECRET}}).encode(), None)
    config = RuntimeConfig(mask_errors=masked)
    async with open_runtime([shelf()], config, store=store) as runtime:
        with pytest.raises(StateUnreadableError) as raised:
            await runtime.call_tool("shelf__put", {"item": "x", "__sessionId": "s"})
    told = str(raised.value)
    assert ("postgresql://" in told) is not masked
    if masked:
        assert SECRET[:30] in logged_with_id(caplog, told_id(told))


@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
async def test_a_failed_write_tells_the_caller_the_stores_words_only_unmasked(
    masked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = FaultyStore(fault="refuse")
    async with open_runtime([shelf()], RuntimeConfig(mask_errors=masked), store=store) as rt:
        failed = await rt.call_tool("shelf__put", {"item": "x", "__sessionId": "s"})
    assert failed.first_text.startswith("the change was not saved, so it did not happen")
    assert ("the disk is full" in failed.first_text) is not masked
    if masked:
        assert "the disk is full" in logged_with_id(caplog, told_id(failed.first_text))
