"""``RuntimeConfig.mask_errors``: a handler's unexpected exception reaches the caller as an id.

Masked, the result names the tool and a short error id and nothing of the exception;
the log line with the traceback carries the same id. Unmasked (the default in process),
the result is what it always was. A `ToolError` is the author's message to the caller
and is never masked.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import pytest

from actors import HandlerError, RuntimeConfig, ToolError, ToolModule, open_runtime

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
    # A resource reads a state, so the module has one: nothing.
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
