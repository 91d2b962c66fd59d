"""An isolation check for any MCP server: do interleaved sessions ever see each other's state?

`check_isolation` opens sessions with a session factory (each call one initialized
official-SDK `ClientSession`), makes each session write watermarks that only it could
know through the tool the user names as "write", and scans the text of every call of
the "read" tool for watermarks: another session's watermark is a leak; a watermark the
session wrote, that was acknowledged before the read was sent and is missing from it,
is a lost write. Hypothesis's stateful testing picks the sequences (open, write, read,
a concurrent batch, close) and shrinks the first failing one to the shortest sequence
that still fails; `_isolation_machine` holds the machine, imported when a check runs,
so that this module needs Hypothesis only then. Its terms (`ToolCall`, `Budget`, the
reports) are in ``_isolation``, which both import.

Against a server of the handle pattern (`Handles`), each session's opening mints a
handle, and every later call of the session carries it: the handle is then all that
tells the sessions apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._isolation import MARK, SETUP, Budget, IsolationCheckError, Timeouts

if TYPE_CHECKING:
    from ._handles import Handles
    from ._isolation import IsolationReport, SessionFactory, ToolCall

__all__ = ["check_isolation", "check_templates"]


def check_templates(
    write: ToolCall, read: ToolCall, setup: ToolCall | None, handles: Handles | None = None
) -> None:
    """Raise ValueError, naming the problem, for templates `check_isolation` cannot run."""
    if not write.uses(MARK):
        msg = f"the write call {write.name} must put {MARK} in one of its arguments"
        raise ValueError(msg)
    for role, call in (("read", read), ("setup", setup)):
        if call is not None and call.uses(MARK):
            msg = f"the {role} call {call.name} cannot hold {MARK}: only the write call writes"
            raise ValueError(msg)
    for role, call in (("write", write), ("read", read), ("setup", setup)):
        if call is not None and setup is None and call.uses(SETUP):
            msg = f"the {role} call {call.name} uses {SETUP}, but no setup call is given"
            raise ValueError(msg)
    if setup is not None and setup.uses(SETUP):
        msg = f"the setup call {setup.name} cannot use its own result {SETUP}"
        raise ValueError(msg)
    if handles is not None:
        named = (("write", write), ("read", read), ("setup", setup))
        calls = [(f"the {role} call {c.name}", c.arguments) for role, c in named if c is not None]
        handles.check_unset(calls)


async def check_isolation(
    factory: SessionFactory,
    *,
    write: ToolCall,
    read: ToolCall,
    setup: ToolCall | None = None,
    handles: Handles | None = None,
    budget: Budget | None = None,
    all_writes_visible: bool = True,
    timeouts: Timeouts | None = None,
) -> IsolationReport:
    """Check that no session of a server ever sees another's state; shrink what fails.

    `factory` opens one initialized official-SDK `ClientSession` per call, entered and
    left in one task of this trio run: a new connection per session (each its own MCP
    session), or the same connection for all, when the server keys state by an argument
    (`SESSION` or `SETUP` in the templates, or `handles`). `write` must hold `MARK`;
    with `handles`, a session's opening first calls their tool, and every later call of
    the session carries the handle it minted; `setup`, if given, runs once when a session
    opens, and the text it returns (stripped) fills `SETUP`.
    With `all_writes_visible` (the default), a read must show every watermark its session
    wrote and had acknowledged before the read was sent; turn it off for a server that
    shows only recent history. Every call must succeed: an error result or a JSON-RPC
    error answer raises `IsolationCheckError` at once, with the sequence that led to it;
    a call unanswered within `timeouts` (`Timeouts()` by default), a connection that
    closed, or an answer that is not MCP raises `NoVerdict` at once; neither is shrunk.
    """
    check_templates(write, read, setup, handles)
    try:
        from . import _isolation_machine
    except ImportError as exc:  # Hypothesis is the harness extra's, not the runtime's
        msg = f"the isolation check needs Hypothesis ({exc}): pip install 'mcp-actors[harness]'"
        raise IsolationCheckError(msg) from None
    plan = _isolation_machine.Plan(
        write, read, setup, budget or Budget(), all_writes_visible, timeouts or Timeouts(), handles
    )
    return await _isolation_machine.run(factory, plan)
