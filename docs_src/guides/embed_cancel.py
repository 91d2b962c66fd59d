"""What cancelling a caller does: a call that started runs to completion."""

import attrs
import trio

from actors import ToolModule, open_runtime


@attrs.define
class Counter:
    value: int = 0


counter = ToolModule("counter", Counter)


@counter.tool
async def slow_increment(state: Counter) -> str:
    """Wait a little, then add one."""
    await trio.sleep(0.2)
    state.value += 1
    return str(state.value)


@counter.tool(read_only=True)
def read(state: Counter) -> str:
    """The value."""
    return str(state.value)


async def main() -> None:
    async with open_runtime([counter]) as runtime:
        with trio.move_on_after(0.05) as scope:
            await runtime.call_tool("counter__slow_increment", {"__sessionId": "s1"})
        print("caller gave up:", scope.cancelled_caught)
        # The handler was already running: it finishes, and the next call waits for it.
        result = await runtime.call_tool("counter__read", {"__sessionId": "s1"})
        print("value:", result.first_text)


if __name__ == "__main__":
    trio.run(main)
