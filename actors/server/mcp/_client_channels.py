"""A call's channels to its MCP client: progress, log messages and questions.

* `ProgressRelay` sends the newest progress report, at most ten a second.
* `LogRelay` sends a tool's log messages in order, at the level the client
  asked for, from a bounded queue: a tool logging in a tight loop costs the
  client at most `LOG_QUEUE` messages waiting at a time, and one message
  saying how many were dropped.
* `SessionAsker` sends a tool's questions (form elicitation, sampling) as
  requests related to the call, when the client declared it can answer them.

Everything a call sends goes out before its result: the relays are finished,
and what they hold sent, before the adapter returns.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections import deque
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import pydantic
from mcp import types
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..._client import LOG_LEVELS, Answer, CannotAskError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from ..._client import LogLevel, LogMessage
    from ..._progress import ProgressReport

__all__ = [
    "ASK_TIMEOUT",
    "LOG_LEVEL_STATE",
    "LOG_QUEUE",
    "PROGRESS_INTERVAL",
    "LogQueue",
    "LogRelay",
    "ProgressRelay",
    "SessionAsker",
    "answer_of",
    "client_log_level",
    "elicitation_request",
    "sampled_text",
    "sampling_params",
    "sampling_request",
    "send_logs",
    "validation_problem",
]

logger = logging.getLogger("actors.mcp")

PROGRESS_INTERVAL: Final = 0.1
"""Seconds between two progress notifications of one call, at least (the last is never held)."""
LOG_QUEUE: Final = 100
"""Log messages of one call waiting to be sent, at most; more are dropped, and counted."""
LOG_LEVEL_STATE: Final = "mcp-actors/log-level"
"""Where a connection's state keeps the level its client set with ``logging/setLevel``."""
DEFAULT_LOG_LEVEL: Final[LogLevel] = "info"
"""The level sent at before a client sets one: ``debug`` only on request."""
ASK_TIMEOUT: Final = 600.0
"""Seconds a question waits for the client's answer at most (the call's deadline may end it
sooner): a user takes time to fill in a form, but a client that never answers must not hold
its key's turn forever."""


def client_log_level(ctx: ServerRequestContext[Any, Any]) -> LogLevel:
    """The least severe level the request's client wants to hear.

    From 2026-07-28, a request names its level in its ``_meta`` and the SDK
    drops what is below it: every level is handed on here.
    """
    connection = ctx.session._connection
    if connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return "debug"
    level = connection.state.get(LOG_LEVEL_STATE, DEFAULT_LOG_LEVEL)
    return level if level in LOG_LEVELS else DEFAULT_LOG_LEVEL


@final
class ProgressRelay:
    """Sends one call's progress to its client: the newest report, at most ten a second.

    `hear` keeps only the newest report, and a notification is sent at most
    every `PROGRESS_INTERVAL`, so a tool that reports in a tight loop costs
    the client a bounded number of notifications (a call of a minute: about
    600) and the server one report's memory. The last report is sent as soon
    as the call ends, before its result. The SDK sends nothing when the
    request carried no ``progressToken``. A notification that cannot be sent
    (the client left) ends the relaying, never the call.
    """

    def __init__(self, session: ServerSession) -> None:
        self._session = session
        self._latest: ProgressReport | None = None
        self._wake = anyio.Event()
        self._finished = anyio.Event()
        self._broken = False

    def hear(self, report: ProgressReport) -> None:
        """Keep `report` as the next one to send (called on the runtime's loop)."""
        self._latest = report
        self._wake.set()

    def finish(self) -> None:
        """No more reports will come: send what is left, then stop."""
        self._finished.set()
        self._wake.set()

    async def send_until_finished(self) -> None:
        """Send the newest report at most every interval, until `finish` and the last is sent."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self._send_latest()
            if self._finished.is_set() and self._latest is None:
                return
            # Reports heard meanwhile only replace the newest; the call's end cuts this short.
            with anyio.move_on_after(PROGRESS_INTERVAL):
                await self._finished.wait()

    async def _send_latest(self) -> None:
        report, self._latest = self._latest, None
        if report is None or self._broken:
            return
        try:
            await self._session.report_progress(report.progress, report.total, report.message)
        except Exception:
            self._broken = True
            logger.debug("progress could not be sent; no more for this call", exc_info=True)


@final
class LogQueue:
    """One call's log messages waiting to be sent: in order, bounded, the dropped ones counted.

    Messages below the client's level are dropped as they come. The queue
    holds `LOG_QUEUE` messages; beyond, messages are dropped and counted, and
    the count goes out (at ``warning``) after the messages that were kept.
    """

    def __init__(self, level: str) -> None:
        self._least = LOG_LEVELS.index(level) if level in LOG_LEVELS else 0
        self._queue: deque[LogMessage] = deque()
        self._dropped = 0
        self.wake = anyio.Event()
        """Set when a message is queued."""

    def hear(self, message: LogMessage) -> None:
        """Queue `message` if the client wants its level and there is room (runtime's loop)."""
        if LOG_LEVELS.index(message.level) < self._least:
            return
        if len(self._queue) >= LOG_QUEUE:
            self._dropped += 1
            return
        self._queue.append(message)
        self.wake.set()

    def take(self) -> list[tuple[LogLevel, str, str | None]]:
        """Every queued message as (level, text, logger), then how many were dropped, if any."""
        taken: list[tuple[LogLevel, str, str | None]] = [
            (message.level, message.text, message.logger) for message in self._queue
        ]
        self._queue.clear()
        if self._dropped:
            taken.append(("warning", f"{self._dropped} log message(s) dropped", None))
            self._dropped = 0
        return taken


async def send_logs(
    queue: LogQueue, session: ServerSession, request_id: types.RequestId | None
) -> bool:
    """Send what `queue` holds, on the stream of request `request_id`; False if it failed."""
    try:
        with warnings.catch_warnings():
            # Deprecated for the 2026-07-28 era, where the SDK scopes it to the request.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            for level, text, name in queue.take():
                await session.send_log_message(
                    level, text, logger=name, related_request_id=request_id
                )
    except Exception:
        logger.debug("a log message could not be sent; no more for this call", exc_info=True)
        return False
    return True


@final
class LogRelay:
    """Sends one call's log messages to its client as they come (see `LogQueue`).

    A message that cannot be sent (the client left) ends the relaying, never
    the call. `drain` sends what is queued at once: a question the tool asks
    goes out after the messages it logged before.
    """

    def __init__(self, session: ServerSession, request_id: types.RequestId | None, level: str):
        self.queue: Final = LogQueue(level)
        self._session = session
        self._request_id = request_id
        self._sending = anyio.Lock()
        self._finished = False
        self._broken = False

    def hear(self, message: LogMessage) -> None:
        """Queue `message` (called on the runtime's loop)."""
        self.queue.hear(message)

    def finish(self) -> None:
        """No more messages will come: send what is queued, then stop."""
        self._finished = True
        self.queue.wake.set()

    async def send_until_finished(self) -> None:
        """Send queued messages in order until `finish` and the queue is empty."""
        while True:
            await self.queue.wake.wait()
            self.queue.wake = anyio.Event()
            await self.drain()
            if self._finished:
                return

    async def drain(self) -> None:
        """Send what is queued now, in order."""
        async with self._sending:
            if not self._broken:
                self._broken = not await send_logs(self.queue, self._session, self._request_id)


@final
class SessionAsker:
    """Sends a tool's questions to the client of its call, as requests related to the call."""

    def __init__(
        self,
        session: ServerSession,
        request_id: types.RequestId | None,
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Questions on `session`, related to request `request_id`; `before` runs before each
        (the call's log relay sends what the tool logged before it asked)."""
        self._session = session
        self._request_id = request_id
        self._before = before

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """Ask the user to fill in a form; raises CannotAskError when the client cannot."""
        request = elicitation_request(self._session.client_capabilities, message, schema)
        with _refusal("ask the user"):
            result = await self._requested(request, types.ElicitResult)
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
            self._session.client_capabilities, messages, max_tokens, system_prompt, temperature
        )
        with _refusal("ask the client's model"):
            result = await self._requested(request, types.CreateMessageResult)
        return sampled_text(result)

    async def _requested(self, request: Any, result_type: Any) -> Any:
        if self._before is not None:
            await self._before()
        return await self._session.send_request(
            request,
            result_type,
            request_read_timeout_seconds=ASK_TIMEOUT,
            metadata=ServerMessageMetadata(related_request_id=self._request_id),
        )


@contextmanager
def _refusal(doing: str) -> Iterator[None]:
    """Turn what the client's side raises into a CannotAskError that says what happened."""
    try:
        yield
    except NoBackChannelError:
        msg = (
            f"cannot {doing}: this client's protocol (2026-07-28 and later) carries no request "
            "from the server during a call"
        )
        raise CannotAskError(msg) from None
    except MCPError as error:
        msg = f"cannot {doing}: the client answered with an error: {error!s:.{_SHOWN}}"
        raise CannotAskError(msg) from None
    except pydantic.ValidationError as error:
        msg = f"cannot {doing}: the client's answer is malformed: {validation_problem(error)}"
        raise CannotAskError(msg) from None


_SHOWN: Final = 200
"""How many characters of what a client wrote a tool's error shows: the client chooses them."""


def validation_problem(error: pydantic.ValidationError) -> str:
    """What is wrong with what a client sent: where, the first error, and how many more.

    One wrong value fails each member of a union (five errors for one value),
    so the place shown is the one all the errors share, without the members'
    names.
    """
    errors = error.errors(include_url=False, include_input=False)
    places = zip(*(error["loc"] for error in errors), strict=False)
    shared = itertools.takewhile(lambda parts: len(set(parts)) == 1, places)
    place = ".".join(str(parts[0]) for parts in shared) or "the message"
    more = len(errors) - 1
    shown = f"{place}: {errors[0]['msg']}"[:_SHOWN]
    return shown + (f" (and {more} more error(s))" if more else "")


def elicitation_request(
    capabilities: types.ClientCapabilities | None, message: str, schema: Mapping[str, Any]
) -> types.ElicitRequest:
    """The form to send a client with `capabilities`; CannotAskError if it cannot show one."""
    if capabilities is None or capabilities.elicitation is None:
        msg = "cannot ask the user: the client did not declare elicitation"
        raise CannotAskError(msg)
    params = types.ElicitRequestFormParams(message=message, requested_schema=dict(schema))
    return types.ElicitRequest(params=params)


def answer_of(result: types.ElicitResult) -> Answer:
    """The user's answer to a form, its values only when accepted."""
    content = None if result.action != "accept" else dict(result.content or {})
    return Answer(result.action, content)


def sampling_request(
    capabilities: types.ClientCapabilities | None,
    messages: Sequence[Mapping[str, Any]],
    max_tokens: int,
    system_prompt: str | None,
    temperature: float | None,
) -> types.CreateMessageRequest:
    """What to send a client with `capabilities` for its model; CannotAskError if it cannot."""
    if capabilities is None or capabilities.sampling is None:
        msg = "cannot ask the client's model: the client did not declare sampling"
        raise CannotAskError(msg)
    params = sampling_params(messages, max_tokens, system_prompt, temperature)
    return types.CreateMessageRequest(params=params)


def sampled_text(result: types.CreateMessageResult) -> str:
    """The text the client's model answered; CannotAskError for anything but text."""
    if isinstance(result.content, types.TextContent):
        return result.content.text
    msg = f"the client's model answered with {type(result.content).__name__}, not text"
    raise CannotAskError(msg)


def sampling_params(
    messages: Sequence[Mapping[str, Any]],
    max_tokens: int,
    system_prompt: str | None,
    temperature: float | None,
) -> types.CreateMessageRequestParams:
    """The params of a ``sampling/createMessage`` request; ValueError for malformed messages."""
    try:
        return types.CreateMessageRequestParams.model_validate(
            {
                "messages": list(messages),
                "maxTokens": max_tokens,
                "systemPrompt": system_prompt,
                "temperature": temperature,
            }
        )
    except ValueError as exc:
        msg = f"the sampling messages are not MCP sampling messages: {exc}"
        raise ValueError(msg) from None
