"""A durable module on a store: its state outlives its actors and the runtime."""

# --8<-- [start:module]
import sys

import attrs
import trio

from actors import ToolModule, open_runtime
from actors.store import open_store


@attrs.define
class Todos:
    items: list[str] = attrs.field(factory=list)


todos = ToolModule("todos", Todos, durable=True)


@todos.tool
def add(state: Todos, item: str) -> str:
    """Add an item."""
    state.items.append(item)
    return f"{len(state.items)} items"


@todos.tool(read_only=True)
def show(state: Todos) -> str:
    """The items."""
    return ", ".join(state.items) or "nothing to do"


# --8<-- [end:module]


# --8<-- [start:main]
async def main(url: str) -> None:
    async with open_store(url) as store:
        async with open_runtime([todos], store=store) as runtime:
            added = {"item": "write docs", "__sessionId": "s1"}
            await runtime.call_tool("todos__add", added)
            # A read-only tool: no write follows it.
            await runtime.call_tool("todos__show", {"__sessionId": "s1"})
            print("writes:", runtime.statistics().state_writes)
        # A new runtime on the same store: the actor starts again and loads the state.
        async with open_runtime([todos], store=store) as runtime:
            shown = await runtime.call_tool("todos__show", {"__sessionId": "s1"})
            print(shown.first_text)


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else "sqlite:///state.db")
# --8<-- [end:main]
