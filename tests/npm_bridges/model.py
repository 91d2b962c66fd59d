"""A scripted model: what an agent does with a conversation handle, in any MCP client.

A model that talks to ``mcp-actors serve --handles`` (the default over HTTP) opens a
conversation with ``conversation__start``, keeps the handle it gets (a model keeps it in
its context) and passes it as the ``conversation`` argument of every later call. The
handle names the conversation on its own, so nothing the bridges do to sessions on the
way — one HTTP session for many conversations, a new one for every call — reaches it.
The integration tests drive these functions through each bridge; the docs include them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp import Client
    from mcp.types import RequestParamsMeta


@attrs.frozen
class Answer:
    """What a tool call gave the model: its text, and whether the tool refused it."""

    text: str
    """The result's text items, joined by newlines."""
    refused: bool
    """The result's ``isError``: the tool said no (the text says why)."""


async def ask(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> Answer:
    """Call `tool` with `arguments` (and `meta`, if any, as the request's ``_meta``)."""
    # The SDK types _meta as a TypedDict open to any key, which mypy does not read yet.
    request_meta = cast("RequestParamsMeta | None", meta)
    result = await client.call_tool(tool, arguments, meta=request_meta)
    text = "\n".join(item.text for item in result.content if item.type == "text")
    return Answer(text, refused=bool(result.is_error))


# --8<-- [start:model]
async def start_conversation(client: Client) -> str:
    """Open a conversation: the handle to pass as ``conversation`` from now on."""
    started = await client.call_tool("conversation__start", {})
    assert not started.is_error, started
    assert started.structured_content is not None, started
    handle: str = started.structured_content["conversation"]
    return handle


async def create_goal(client: Client, conversation: str, goal: str) -> Answer:
    """``planning__create_goal`` in the conversation `conversation` names."""
    arguments = {"conversation": conversation, "goal": goal}
    return await ask(client, "planning__create_goal", arguments)


async def list_goals(client: Client, conversation: str) -> Answer:
    """``planning__list_goals`` in the conversation `conversation` names."""
    return await ask(client, "planning__list_goals", {"conversation": conversation})


# --8<-- [end:model]


def goals(*names: str) -> str:
    """What ``planning__list_goals`` answers for a plan of goals `names`, in order."""
    if not names:
        return "No goals yet."
    lines = [f"- g{number}: {name}" for number, name in enumerate(names, 1)]
    return f"Goals ({len(names)}):\n" + "\n".join(lines)


async def at_once(*steps: Callable[[], Awaitable[Answer]]) -> list[Answer]:
    """Run model `steps` at the same time, their calls interleaved on the way; their
    answers, in the order of `steps`."""
    answers: dict[int, Answer] = {}

    async def run(index: int, step: Callable[[], Awaitable[Answer]]) -> None:
        answers[index] = await step()

    async with trio.open_nursery() as nursery:
        for index, step in enumerate(steps):
            nursery.start_soon(run, index, step)
    return [answers[index] for index in range(len(steps))]
