"""The runtime in an asyncio program: trio runs in guest mode on the asyncio loop."""

import asyncio

from actors import open_asyncio_runtime
from actors.modules import planning


async def main() -> None:
    async with open_asyncio_runtime([planning], state="memory") as runtime:
        await runtime.call_tool(
            "planning__create_goal", {"goal": "Learn Rust", "__sessionId": "s1"}
        )
        results = await asyncio.gather(  # many tasks may call at once
            runtime.call_tool("planning__list_goals", {"__sessionId": "s1"}),
            runtime.call_tool("planning__list_goals", {"__sessionId": "s2"}),
        )
        for result in results:
            print(result.first_text)


if __name__ == "__main__":
    asyncio.run(main())
