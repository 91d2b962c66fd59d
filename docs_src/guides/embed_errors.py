"""A refused call as the result the MCP server would send, for a host's own model."""

from typing import Any

import trio

from actors import Runtime, RuntimeCallError, UnknownToolError, open_runtime
from actors.lowlevel import error_result
from actors.modules import planning
from protocol import CallResult, ProtocolError


async def answer(runtime: Runtime, call: dict[str, Any]) -> CallResult:
    try:
        result = await runtime.call(call)
    except UnknownToolError as error:
        result = error_result(error)  # no tool, so no ServiceInfo to stamp it with
    except (ProtocolError, RuntimeCallError) as error:
        result = error_result(error, runtime.registry.resolve(call["name"]).service)
    return result


async def main() -> None:
    async with open_runtime([planning]) as runtime:
        for name, arguments in [
            ("planning__create_goal", {"goal": 42, "__sessionId": "s1"}),
            ("planning__create_goal", {"goal": "x", "__sesionId": "s1"}),
            ("planning__delete_everything", {"__sessionId": "s1"}),
        ]:
            call = {"name": name, "arguments": arguments}
            result = await answer(runtime, call)
            print(result.is_error, result.first_text)


if __name__ == "__main__":
    trio.run(main)
