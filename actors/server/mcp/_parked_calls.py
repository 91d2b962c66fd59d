"""Questions from a tool to a 2026-era client: the call waits, parked, across requests.

Up to 2025-11-25 a server asks its client something (a form, a completion of
its model) with a request of its own while the call's request is open. From
2026-07-28 it cannot: the call's request is answered with an
``InputRequiredResult`` holding the questions and an opaque
``requestState``, and the client sends the call again with the answers and
that state ("multi round-trip requests").

A handler here asks with ``await ask.user(...)`` in both eras, and its key's
turn is held while it waits: that is what serializes a conversation. So on a
2026-era connection, a call of a tool that may ask runs in a task of the
server's own (not the request's), *parked*: when the handler asks, the
request is answered with the question and a random ``requestState`` naming
the parked call; the retry carrying the answers wakes the handler where it
waited, and waits in turn for its result or its next question.

What bounds it: a question waits `ASK_TIMEOUT` for its answer at most (the
call's deadline may end it sooner), after which the handler gets
CannotAskError; a result nobody comes back for is kept `KEPT` seconds; at
most `MAX_PARKED` calls are parked at once, `MAX_PARKED_PER_CALLER` per
caller, and a tenant's share of them (`actors.server._fair_shares`: many tokens of
one tenant do not take every place, invariant 10) — beyond, the handler's
questions get CannotAskError at once. The state is a random 32-byte token,
valid only for the caller (token and tenant) that started the call: a client
cannot resume, or read the result of, another's call.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any, Final, final

import anyio
from mcp import types

from ..._client import Answer, CannotAskError
from .._fair_shares import FairShares, Full, Principal
from ._client_channels import (
    ASK_TIMEOUT,
    answer_of,
    elicitation_request,
    sampled_text,
    sampling_request,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from protocol import Caller, ToolContext

    from ._client_channels import LogQueue

__all__ = ["KEPT", "MAX_PARKED", "MAX_PARKED_PER_CALLER", "ParkedCall", "ParkedCalls"]

MAX_PARKED: Final = 1000
"""Calls parked at once, over all clients."""
MAX_PARKED_PER_CALLER: Final = 100
"""Calls parked at once for one caller (one token, or every anonymous client together)."""
KEPT: Final = 60.0
"""Seconds a parked call's result waits for its client to come back for it."""


@final
class ParkedCall:
    """One call running in the server's task: its pending question, and its result once it has it.

    Each step of it a request waits for (`next_step`) is its next question,
    or its result: whichever comes first.
    """

    def __init__(self, token: str, owner: Principal, tool: str, context: ToolContext) -> None:
        self.token: Final = token
        self.owner: Final = owner
        """Who may resume it: the caller (token and tenant) that started it."""
        self.tool: Final = tool
        """The tool's full name: a retry must name the same tool."""
        self.context: Final = context
        """Whom the call is for."""
        self._asked = 0
        self._question: tuple[str, types.InputRequest] | None = None
        self._answered = anyio.Event()
        self._answer: Any = None
        self._result: Any = None
        self._abandoned = False
        self._changed = anyio.Event()
        self.collected = anyio.Event()
        """Set once a request took the result."""
        self.logs: LogQueue | None = None
        """What the tool logged and no response carried yet (for a tool that takes a Log)."""

    # ---- the handler's side ---------------------------------------------------

    async def ask(self, request: types.InputRequest) -> Any:
        """Post `request` as the call's question; the client's answer, or CannotAskError."""
        self._asked += 1
        key = f"question-{self._asked}"
        self._question = (key, request)
        self._answered = anyio.Event()
        self._changed.set()
        with anyio.move_on_after(ASK_TIMEOUT) as waited:
            await self._answered.wait()
        self._question = None
        if waited.cancelled_caught:
            msg = f"the client did not answer within {ASK_TIMEOUT:g} s"
            raise CannotAskError(msg)
        if self._abandoned:
            msg = "the server stopped serving the client before it answered"
            raise CannotAskError(msg)
        return self._answer

    def abandon(self) -> None:
        """Nobody can answer any more (the server stops serving): questions fail at once."""
        self._abandoned = True
        self._answered.set()

    def finish(self, result: Any) -> None:
        """The call is over: `result` is what the next request waiting for it gets."""
        self._result = result
        self._changed.set()

    # ---- the requests' side ---------------------------------------------------

    def answer(self, responses: Mapping[str, Any] | None) -> None:
        """Hand the handler the answer to its question, if `responses` holds it."""
        if self._question is None or not responses:
            return
        key, _ = self._question
        if key in responses and not self._answered.is_set():
            self._answer = responses[key]
            self._answered.set()

    async def next_step(self) -> types.InputRequiredResult | Any:
        """Wait for the call's next question (not yet answered) or its result; return it."""
        while True:
            if self._result is not None:
                self.collected.set()
                return self._result
            question = self._question
            if question is not None and not self._answered.is_set():
                key, request = question
                return types.InputRequiredResult(
                    input_requests={key: request}, request_state=self.token
                )
            await self._changed.wait()
            self._changed = anyio.Event()


@final
class ParkedCalls:
    """The parked calls by their state token, and how many each caller and tenant holds."""

    def __init__(self) -> None:
        self._calls: dict[str, ParkedCall] = {}
        self._shares = FairShares(MAX_PARKED, MAX_PARKED_PER_CALLER)

    def park(self, caller: Caller, tool: str, context: ToolContext) -> ParkedCall | Full:
        """A new parked call of `caller`'s; or why the bounds allow no more."""
        owner = Principal.of(caller)
        full = self._shares.take(owner)
        if full is not None:
            return full
        parked = ParkedCall(secrets.token_urlsafe(32), owner, tool, context)
        self._calls[parked.token] = parked
        return parked

    def find(self, token: str, caller: Caller, tool: str) -> ParkedCall | None:
        """The call `token` names, if `caller` started it and it is of `tool`; else None."""
        parked = self._calls.get(token)
        if parked is None or parked.owner != Principal.of(caller) or parked.tool != tool:
            return None
        return parked

    def abandon_all(self) -> None:
        """The server stops serving: every parked call's question fails at once."""
        for parked in self._calls.values():
            parked.abandon()

    async def run(self, parked: ParkedCall, call: Callable[[], Awaitable[Any]]) -> None:
        """Run `call` for `parked`, keep its result for its client a while, then forget it."""
        try:
            parked.finish(await call())
            with anyio.move_on_after(KEPT):
                await parked.collected.wait()
        finally:
            del self._calls[parked.token]
            self._shares.give_back(parked.owner)


@final
class ParkedAsker:
    """A tool's questions, posted on its parked call for the next request to carry."""

    def __init__(self, parked: ParkedCall | Full, capabilities: types.ClientCapabilities | None):
        self._parked = parked
        self._capabilities = capabilities

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """Ask the user to fill in a form; raises CannotAskError when the client cannot."""
        request = elicitation_request(self._capabilities, message, schema)
        result = await self._asked(request, "ask the user")
        if not isinstance(result, types.ElicitResult):
            msg = f"cannot ask the user: the client answered with {type(result).__name__}"
            raise CannotAskError(msg)
        return answer_of(result)

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
    ) -> str:
        """Ask the client's model; its text. Raises CannotAskError when the client cannot."""
        request = sampling_request(
            self._capabilities, messages, max_tokens, system_prompt, temperature
        )
        result = await self._asked(request, "ask the model")
        if not isinstance(result, types.CreateMessageResult):
            msg = f"cannot ask the client's model: it answered with {type(result).__name__}"
            raise CannotAskError(msg)
        return sampled_text(result)

    async def _asked(self, request: types.InputRequest, doing: str) -> Any:
        if isinstance(self._parked, Full):
            reason = self._parked.says("calls", "wait for answers")
            msg = f"cannot {doing}: {reason}; retry once some are answered"
            raise CannotAskError(msg)
        return await self._parked.ask(request)
