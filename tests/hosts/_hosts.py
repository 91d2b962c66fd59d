"""The hosts the behaviour suite runs against, and how the suite meets each one.

`HOSTS` lists the async hosts (each an `actors.CallTarget`), with the event
loop it runs on and how to open it over the suite's modules (module specs,
`_modules.SPECS`, so that a host in other processes imports the same ones).
Each is met two ways (`faces`): directly, through its own API, and over MCP,
served by `McpAdapter` to the official SDK client in memory
(`actors.testing.connect`: resources, prompts, completion, elicitation
answered by the client's callback, logging, progress, subscriptions).
`BlockingRuntime` is met directly, each of its calls made from a worker thread.

A new host is one more `HostCase` appended to `HOSTS` (at the end of this
file); both faces then come with it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import queue
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import anyio
import anyio.to_thread
import attrs
from mcp import types
from mcp.shared.exceptions import MCPError

from actors import (
    Answer,
    ArgumentsError,
    HandlerError,
    ToolModule,
    UnknownResourceError,
    UnknownToolError,
    open_asyncio_runtime,
    open_blocking_runtime,
    open_runtime,
)
from actors.lowlevel import BlockingTarget, CallTarget, prepare_read
from actors.testing import connect

from ._modules import SPECS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
    from contextlib import AbstractAsyncContextManager

    from mcp import Client

    from actors import LogMessage, ProgressReport
    from actors._prepare import Route
    from protocol import CallResult

Backend = Literal["trio", "asyncio"]
"""The event loop a host runs on (`anyio.run`'s backend)."""
WAIT: Final = 60.0
"""Seconds a notice may take to come, at most: generous, for a loaded machine."""
FORM_ANSWER: Final = {"confirm": True, "count": 2}
"""What the user fills in, in every session, for every form."""


@attrs.frozen
class HostCase:
    """An async host: its name, its event loop, and how to open it serving module specs."""

    name: str
    backend: Backend
    open: Callable[[Sequence[str]], AbstractAsyncContextManager[CallTarget]]


def _load(spec: str) -> ToolModule[Any]:
    path, _, attribute = spec.partition(":")
    module: ToolModule[Any] = getattr(importlib.import_module(path), attribute)
    return module


def local(
    opener: Callable[[Iterable[ToolModule[Any]]], AbstractAsyncContextManager[CallTarget]],
) -> Callable[[Sequence[str]], AbstractAsyncContextManager[CallTarget]]:
    """A host of this process, opened on the modules the specs name."""

    @asynccontextmanager
    async def opened(specs: Sequence[str]) -> AsyncIterator[CallTarget]:
        async with opener([_load(spec) for spec in specs]) as host:
            yield host

    return opened


# ---- what the suite sees --------------------------------------------------------------


@attrs.frozen
class Outcome:
    """A tool call's result as the suite reads it."""

    is_error: bool
    text: str
    data: Mapping[str, Any] | None = None


class Refused(Exception):
    """A request refused before any handler ran (an unknown name), or a handler that failed."""


@attrs.define
class Heard:
    """What a session's client was told and asked, in order."""

    asked: list[str] = attrs.Factory(list)  # each form's message
    logs: list[tuple[str, str]] = attrs.Factory(list)  # (level, text)
    progress: list[tuple[float, float | None, str | None]] = attrs.Factory(list)


class Notices(Protocol):
    """The changes one watched resource's key is told of."""

    async def next(self) -> object:
        """Wait for the next notice (a change, or the session's end); fail after `WAIT`."""
        ...


class Session(Protocol):
    """One session of a host, as a client of it; `heard` is what reached the client."""

    heard: Heard

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        """Call `tool`; raises Refused for an unknown tool."""
        ...

    async def call_listening(self, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        """`call`, with the client's channels open (questions, log, progress) into `heard`."""
        ...

    async def read(self, uri: str) -> str:
        """The text of resource `uri`; raises Refused for an unknown one or a failed read."""
        ...

    async def prompt(self, name: str, arguments: Mapping[str, str]) -> str:
        """The text of prompt `name`'s first message."""
        ...

    async def complete(self, template: str, argument: str, value: str) -> list[str]:
        """The values suggested for `argument` of the resource template `template`."""
        ...

    def watching(self, uri: str) -> AbstractAsyncContextManager[Notices]:
        """Be told of the changes of the key `uri` names in this session, for the block."""
        ...

    async def end(self) -> None:
        """End this session: its state is gone."""
        ...


class Driver(Protocol):
    """A host as the suite meets it: new sessions of it."""

    def session(self) -> AbstractAsyncContextManager[Session]:
        """A new session, of its own, for the block."""
        ...


@attrs.frozen
class Face:
    """One way to meet one host: its test id, its event loop, and its driver."""

    id: str
    backend: Backend
    open: Callable[[], AbstractAsyncContextManager[Driver]]

    def run(self, behaviour: Callable[[Driver], Awaitable[None]]) -> None:
        """Run `behaviour` against a driver of the host, in a run of the host's event loop."""

        async def main() -> None:
            async with self.open() as driver:
                await behaviour(driver)

        anyio.run(main, backend=self.backend)


# ---- the direct face: the host's own API ------------------------------------------------


async def _awaited(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    result = method(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


async def _in_thread(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await anyio.to_thread.run_sync(functools.partial(method, *args, **kwargs))


@attrs.frozen
class _Inbox:
    """Notices put from any thread (a blocking host tells from its trio thread), awaited here."""

    queue: queue.SimpleQueue[object] = attrs.Factory(queue.SimpleQueue)

    def put(self, notice: object) -> None:
        self.queue.put(notice)

    async def next(self) -> object:
        take = functools.partial(self.queue.get, timeout=WAIT)
        try:
            return await anyio.to_thread.run_sync(take, abandon_on_cancel=True)
        except queue.Empty:
            msg = f"no notice came within {WAIT:g} s"
            raise AssertionError(msg) from None


@attrs.frozen
class _KeyWatcher:
    """A `Watcher` noting the changes of one key (`route`) and the end of its session."""

    route: Route
    inbox: _Inbox

    def key_changed(self, route: Route) -> None:
        if route == self.route:
            self.inbox.put(("changed", route))

    def session_ended(self, session_id: str) -> None:
        if session_id == self.route[1]:
            self.inbox.put(("ended", session_id))


@attrs.frozen
class _AsyncAsker:
    """An `Asker` on the host's loop: every form answered with `FORM_ANSWER`."""

    heard: Heard

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        del schema
        self.heard.asked.append(message)
        await anyio.lowlevel.checkpoint()
        return Answer("accept", FORM_ANSWER)

    async def sample(self, messages: Sequence[Mapping[str, Any]], **_options: Any) -> str:
        raise NotImplementedError  # the suite asks only forms


@attrs.frozen
class _BlockingAsker:
    """`_AsyncAsker` for a blocking host (`actors.BlockingAsker`)."""

    heard: Heard

    def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        del schema
        self.heard.asked.append(message)
        return Answer("accept", FORM_ANSWER)

    def sample(self, messages: Sequence[Mapping[str, Any]], **_options: Any) -> str:
        raise NotImplementedError


def _outcome(result: CallResult) -> Outcome:
    return Outcome(result.is_error, result.first_text, result.structured_content)


@attrs.define
class DirectSession:
    """A session of a host met through its API: ``_meta.sessionId`` names it."""

    host: CallTarget | BlockingTarget
    invoke: Callable[..., Awaitable[Any]]  # `_awaited` (async hosts) or `_in_thread` (blocking)
    session_id: str
    blocking: bool
    heard: Heard = attrs.Factory(Heard)

    @property
    def meta(self) -> dict[str, str]:
        return {"sessionId": self.session_id}

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        try:
            result = await self.invoke(self.host.call_tool, tool, arguments, meta=self.meta)
        except UnknownToolError as error:
            raise Refused(str(error)) from None
        except ArgumentsError as error:  # over MCP, an isError result the model reads
            return Outcome(is_error=True, text=str(error))
        return _outcome(result)

    async def call_listening(self, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        params = {"name": tool, "arguments": arguments, "_meta": self.meta}
        prepared = await self.invoke(self.host.prepare, params)
        asker = _BlockingAsker(self.heard) if self.blocking else _AsyncAsker(self.heard)
        result = await self.invoke(
            self.host.run, prepared, progress=self._progress, log=self._log, ask=asker
        )
        return _outcome(result)

    def _progress(self, report: ProgressReport) -> None:
        self.heard.progress.append((report.progress, report.total, report.message))

    def _log(self, message: LogMessage) -> None:
        self.heard.logs.append((message.level, message.text))

    async def read(self, uri: str) -> str:
        try:
            result = await self.invoke(self.host.read_resource, uri, meta=self.meta)
        except (UnknownResourceError, HandlerError) as error:
            raise Refused(str(error)) from None
        text: str = result.contents[0].text
        return text

    async def prompt(self, name: str, arguments: Mapping[str, str]) -> str:
        result = await self.invoke(self.host.get_prompt, name, arguments, meta=self.meta)
        text: str = result.messages[0].content.text
        return text

    async def complete(self, template: str, argument: str, value: str) -> list[str]:
        found = await self.invoke(self.host.complete, template, argument, value, meta=self.meta)
        return list(found.values)

    @asynccontextmanager
    async def watching(self, uri: str) -> AsyncIterator[Notices]:
        route = prepare_read(self.host.registry, uri, self.meta, self.host.config.policy).route
        inbox = _Inbox()
        unwatch = await self.invoke(self.host.watch, _KeyWatcher(route, inbox))
        try:
            yield inbox
        finally:
            await self.invoke(unwatch)

    async def end(self) -> None:
        await self.invoke(self.host.end_session, self.session_id)


@attrs.define
class DirectDriver:
    """Sessions of a host met through its API, each named afresh."""

    host: CallTarget | BlockingTarget
    invoke: Callable[..., Awaitable[Any]]
    blocking: bool = False
    opened: int = 0

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        self.opened += 1
        yield DirectSession(self.host, self.invoke, f"suite-{self.opened}", self.blocking)


# ---- the MCP face: McpAdapter and the SDK's client ----------------------------------------


def _text_of(content: Sequence[Any]) -> str:
    first = content[0]
    assert first.type == "text", first
    return str(first.text)


@attrs.frozen
class _Stream:
    """A ``subscriptions/listen`` stream's updates."""

    stream: Any

    async def next(self) -> object:
        with anyio.fail_after(WAIT):
            update: object = await anext(self.stream)
        return update


@attrs.define
class McpSession:
    """A session of a host served over MCP: one client connection, its own session."""

    client: Client
    heard: Heard

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        try:
            result = await self.client.call_tool(tool, dict(arguments))
        except MCPError as error:
            raise Refused(error.error.message) from None
        return Outcome(result.is_error, _text_of(result.content), result.structured_content)

    async def call_listening(self, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        try:
            result = await self.client.call_tool(
                tool, dict(arguments), progress_callback=self._progress
            )
        except MCPError as error:
            raise Refused(error.error.message) from None
        return Outcome(result.is_error, _text_of(result.content), result.structured_content)

    async def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.heard.progress.append((progress, total, message))

    async def read(self, uri: str) -> str:
        try:
            result = await self.client.read_resource(uri)
        except MCPError as error:
            raise Refused(error.error.message) from None
        contents = result.contents[0]
        assert isinstance(contents, types.TextResourceContents), contents
        return contents.text

    async def prompt(self, name: str, arguments: Mapping[str, str]) -> str:
        result = await self.client.get_prompt(name, dict(arguments))
        return _text_of([result.messages[0].content])

    async def complete(self, template: str, argument: str, value: str) -> list[str]:
        reference = types.ResourceTemplateReference(type="ref/resource", uri=template)
        result = await self.client.complete(reference, {"name": argument, "value": value})
        return list(result.completion.values)

    @asynccontextmanager
    async def watching(self, uri: str) -> AsyncIterator[Notices]:
        async with self.client.listen(resource_subscriptions=[uri]) as stream:
            assert stream.honored.resource_subscriptions == [uri], stream.honored
            yield _Stream(stream)

    async def end(self) -> None:
        result = await self.client.call_tool("session__end", {})
        assert not result.is_error, result


@attrs.frozen
class McpDriver:
    """Sessions of a host served by `McpAdapter`: each a client connection of its own."""

    host: CallTarget

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        heard = Heard()

        async def elicit(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            heard.asked.append(params.message)
            return types.ElicitResult(action="accept", content=FORM_ANSWER)

        async def logged(params: types.LoggingMessageNotificationParams) -> None:
            heard.logs.append((params.level, str(params.data)))

        async with connect(
            self.host,
            allow_end_session=True,
            elicitation_callback=elicit,
            logging_callback=logged,
            log_level="debug",
            read_timeout_seconds=WAIT,
        ) as client:
            yield McpSession(client, heard)


# ---- the hosts, and the faces the suite runs on ------------------------------------------


HOSTS: Final[list[HostCase]] = [
    HostCase("runtime", "trio", local(open_runtime)),
    HostCase("asyncio", "asyncio", local(open_asyncio_runtime)),
]
"""The async hosts, each met directly and over MCP (see the module docstring)."""


def _direct(case: HostCase) -> Callable[[], AbstractAsyncContextManager[Driver]]:
    @asynccontextmanager
    async def opened() -> AsyncIterator[Driver]:
        async with case.open(SPECS) as host:
            yield DirectDriver(host, _awaited)

    return opened


def _over_mcp(case: HostCase) -> Callable[[], AbstractAsyncContextManager[Driver]]:
    @asynccontextmanager
    async def opened() -> AsyncIterator[Driver]:
        async with case.open(SPECS) as host:
            yield McpDriver(host)

    return opened


@asynccontextmanager
async def _blocking() -> AsyncIterator[Driver]:
    modules = [_load(spec) for spec in SPECS]
    opening = open_blocking_runtime(modules)
    # Entered and left in a worker thread: the block starts and joins a thread of its own.
    host = await anyio.to_thread.run_sync(opening.__enter__)
    try:
        yield DirectDriver(host, _in_thread, blocking=True)
    finally:
        await anyio.to_thread.run_sync(opening.__exit__, None, None, None)


def faces() -> list[Face]:
    """Every host met every way it can be: direct and over MCP, and the blocking host."""
    direct = [Face(f"{case.name}-direct", case.backend, _direct(case)) for case in HOSTS]
    served = [Face(f"{case.name}-mcp", case.backend, _over_mcp(case)) for case in HOSTS]
    return [*direct, Face("blocking-direct", "trio", _blocking), *served]


@asynccontextmanager
async def _on_ray(specs: Sequence[str]) -> AsyncIterator[CallTarget]:
    """A cluster front over two shards on a local Ray (started once for the process)."""
    import ray

    from actors.cluster import open_cluster

    # Seconds to start: once for the module (test_behaviour stops it when the module is done).
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    opening = open_cluster(list(specs), shards=2, state="memory")
    cluster = await anyio.to_thread.run_sync(opening.__enter__)  # it waits for its shards
    try:
        yield cluster
    finally:
        await anyio.to_thread.run_sync(opening.__exit__, None, None, None)


def _has_ray() -> bool:
    from importlib.util import find_spec

    return find_spec("ray") is not None  # the ``cluster`` extra


if _has_ray():
    HOSTS.append(HostCase("cluster", "trio", _on_ray))
