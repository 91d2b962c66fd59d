"""openai-agents keeping two conversations apart through handles, strict schemas on.

Run it with the Python that has ``openai-agents``: with no argument it starts
``mcp-actors serve --handles`` itself (`MCPServerStdio`; other arguments: the command to
start instead); given a URL, it connects to a server started with ``mcp-actors serve
--http HOST:PORT`` (`MCPServerStreamableHttp`; handles are on by default there).
``tests/integrations/test_openai_agents.py`` runs it both ways; the docs page
``docs/integrations/openai-agents.md`` shows it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    Runner,
    Usage,
    set_tracing_disabled,
)
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agents import (
        AgentOutputSchemaBase,
        Handoff,
        ModelSettings,
        ModelTracing,
        Tool,
        TResponseInputItem,
    )
    from agents.items import TResponseStreamEvent

# --8<-- [start:model]
HANDLE = re.compile(r"conv_[A-Za-z0-9_-]{56}")
CALL_IDS = itertools.count(1)
START = "conversation__start"
CALL, ANSWER = "function_call", "function_call_output"  # the input items' types


def strict(tool: FunctionTool) -> bool:
    """Whether `tool`'s schema became strict: marked so, and every property required."""
    if not tool.strict_json_schema:
        return False
    schema = tool.params_json_schema
    return set(schema["required"]) == set(schema["properties"])


def check_strict(tools: list[Tool]) -> None:
    """Refuse tools whose schemas did not become strict, as OpenAI's API would."""
    for tool in tools:
        if isinstance(tool, FunctionTool) and not strict(tool):
            schema = json.dumps(tool.params_json_schema)
            raise ValueError(f"{tool.name}'s schema is not strict: {schema}")


def call(name: str, **arguments: str) -> ModelResponse:
    """A response calling tool `name` with `arguments`."""
    item = ResponseFunctionToolCall(
        type="function_call",
        call_id=f"call_{next(CALL_IDS)}",
        name=name,
        arguments=json.dumps(arguments),
    )
    return ModelResponse(output=[item], usage=Usage(), response_id=None)


def say(text: str) -> ModelResponse:
    """A response that ends the turn with `text`."""
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    message = ResponseOutputMessage(
        type="message",
        id="msg",
        role="assistant",
        status="completed",
        content=[content],
    )
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


def output_text(item: dict[str, Any]) -> str:
    """A function_call_output item's output as text (one text block, or several)."""
    output = item["output"]
    if isinstance(output, str):
        return output
    return "\n".join(block.get("text", "") for block in output)


class Scripted(Model):
    """A stand-in for a real model: it opens a conversation, then passes its handle.

    "My goal: X" adds the goal X; anything else lists the goals. A tool's answer (or its
    error) is repeated as the reply. The handle is found where a model finds it: in what
    conversation__start returned earlier in this conversation's input. A server without
    handles lists no conversation__start: then the tools are called without one.
    """

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        **kwargs: Any,  # previous_response_id, conversation_id, prompt: unused here
    ) -> ModelResponse:
        """The next step of the script, from the conversation so far."""
        check_strict(tools)
        text_only = isinstance(input, str)  # a prompt alone, not yet a list of items
        items: list[Any] = [{"role": "user", "content": input}] if text_only else input
        tool_calls = [item for item in items if item.get("type") == CALL]
        calls = {item["call_id"]: item["name"] for item in tool_calls}
        answers = [
            (calls[item["call_id"]], output_text(item))
            for item in items
            if item.get("type") == ANSWER
        ]
        if items[-1].get("type") == ANSWER and answers[-1][0] != START:
            return say(answers[-1][1])  # the tool's answer, or its error
        arguments = {}
        if any(tool.name == START for tool in tools):
            started = "\n".join(text for name, text in answers if name == START)
            found = HANDLE.search(started)
            if found is None:
                return call(START)
            arguments["conversation"] = found.group()
        user_turns = (item for item in reversed(items) if item.get("role") == "user")
        prompt = next(user_turns)["content"]
        if prompt.startswith("My goal: "):
            goal = prompt.removeprefix("My goal: ")
            return call("planning__create_goal", goal=goal, **arguments)
        return call("planning__list_goals", **arguments)

    def stream_response(
        self,
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Not used: the example runs without streaming."""
        raise NotImplementedError


# --8<-- [end:model]


# --8<-- [start:main]
async def main(server: MCPServer) -> None:
    """Two conversations at once on one server connection, each over two runs."""
    async with server:
        agent = Agent(
            name="Planner",
            model=Scripted(),
            mcp_servers=[server],
            mcp_config={"convert_schemas_to_strict": True},
        )
        alice, bob = await asyncio.gather(
            Runner.run(agent, "My goal: learn Rust"),
            Runner.run(agent, "My goal: water the plants"),
        )
        question = {"role": "user", "content": "What are my goals?"}
        alice, bob = await asyncio.gather(
            Runner.run(agent, [*alice.to_input_list(), question]),
            Runner.run(agent, [*bob.to_input_list(), question]),
        )
    print(f"Alice: {alice.final_output}")
    print(f"Bob: {bob.final_output}")


if __name__ == "__main__":
    set_tracing_disabled(True)  # a scripted model: no OpenAI account to send traces to
    # The URL of `mcp-actors serve --http 127.0.0.1:8000`, or the command openai-agents
    # starts to serve over stdio (by default with handles turned on).
    where = sys.argv[1:] or ["mcp-actors", "serve", "--handles"]
    server: MCPServer
    if where[0].startswith("http"):
        server = MCPServerStreamableHttp(name="mcp-actors", params={"url": where[0]})
    else:
        params = {"command": where[0], "args": where[1:]}
        server = MCPServerStdio(name="mcp-actors", params=params)
    asyncio.run(main(server))
# --8<-- [end:main]
