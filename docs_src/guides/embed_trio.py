"""The runtime inside a trio program."""

import trio

from actors import RuntimeConfig, open_runtime
from actors.modules import planning


async def main() -> None:
    config = RuntimeConfig(ttl=600, max_actors=10_000, call_timeout=30)
    async with open_runtime([planning], config) as runtime:  # every actor lives in here
        await runtime.call_tool(
            "planning__create_goal", {"goal": "Learn Rust", "__sessionId": "s1"}
        )
        await runtime.call(  # the same call, shaped as an MCP tools/call request
            {
                "name": "planning__create_goal",
                "arguments": {"goal": "Bake bread"},
                "_meta": {"sessionId": "s2"},
            }
        )
        s1 = {"sessionId": "s1"}
        result = await runtime.call_tool("planning__list_goals", meta=s1)
        print(result.first_text)
        print(runtime.statistics().live_actors, "live actors")


if __name__ == "__main__":
    trio.run(main)
