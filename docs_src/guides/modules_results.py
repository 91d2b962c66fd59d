"""What a handler returns, and what a caller gets."""

# --8<-- [start:results]
import attrs
import trio

from actors import CallResult, ToolError, ToolModule, open_runtime


@attrs.define
class Pantry:
    items: dict[str, int] = attrs.field(factory=lambda: {"flour": 2, "salt": 1})


pantry = ToolModule("pantry", lambda context: Pantry())


@attrs.frozen
class Stock:
    item: str
    count: int


@pantry.tool(read_only=True)
def hello(state: Pantry) -> str:
    """A text result."""
    return "The pantry is open."


@pantry.tool(read_only=True)
def stock(state: Pantry, item: str) -> Stock:
    """A data result: the data, and its JSON as text."""
    return Stock(item, state.items.get(item, 0))


@pantry.tool(read_only=True, structured=Stock)
def check(state: Pantry, item: str) -> CallResult:
    """A summary for the model, then the data."""
    count = state.items.get(item, 0)
    return CallResult.both(f"{count} {item} left", {"item": item, "count": count})


@pantry.tool
def take(state: Pantry, item: str) -> str:
    """A refusal the model can read."""
    if state.items.get(item, 0) == 0:
        message = f"no {item} left"
        raise ToolError(message)
    state.items[item] -= 1
    return f"took one {item}"


# --8<-- [end:results]


async def main() -> None:
    async with open_runtime([pantry]) as runtime:
        # --8<-- [start:calls]
        for name, arguments in [
            ("pantry__hello", {}),
            ("pantry__stock", {"item": "flour"}),
            ("pantry__check", {"item": "salt"}),
            ("pantry__take", {"item": "sugar"}),
        ]:
            result = await runtime.call_tool(name, {**arguments, "__sessionId": "s1"})
            texts = [item.text for item in result.content]
            print(f"{name}: is_error={result.is_error}")
            print(f"  content: {texts}")
            print(f"  structured_content: {result.structured_content}")
        # --8<-- [end:calls]


if __name__ == "__main__":
    trio.run(main)
