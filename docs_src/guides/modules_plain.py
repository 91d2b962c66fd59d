"""Tools written as in FastMCP: no state parameter, Field bounds, plain returns."""

# --8<-- [start:plain]
from typing import Annotated

import attrs
import trio
from pydantic import Field

from actors import ArgumentsError, TextContent, ToolModule, open_runtime


@attrs.define
class Tally:
    counts: dict[str, int] = attrs.Factory(dict)


tally = ToolModule("tally", Tally)  # the class is the state: Tally() per session


@tally.tool
def add(a: int, b: int) -> int:
    """No state parameter: a stateless tool, every parameter an argument."""
    return a + b


@tally.tool
def count(
    state: Tally,
    word: Annotated[str, Field(min_length=1, max_length=20, description="A word")],
    times: Annotated[int, Field(ge=1, le=10)] = 1,
) -> list[str]:
    """Count `word`; return every word counted so far."""
    state.counts[word] = state.counts.get(word, 0) + times
    return sorted(state.counts)


@tally.tool
def forget(state: Tally) -> None:
    """Forget every count: nothing to return."""
    state.counts.clear()


# --8<-- [end:plain]


async def main() -> None:
    async with open_runtime([tally]) as runtime:
        # --8<-- [start:calls]
        calls: list[tuple[str, dict[str, object]]] = [
            ("tally__add", {"a": 2, "b": 3}),
            ("tally__count", {"word": "tea", "times": 2}),
            ("tally__count", {"word": "tea", "times": 11}),
            ("tally__forget", {}),
        ]
        for name, arguments in calls:
            try:
                call = {**arguments, "__sessionId": "s1"}
                result = await runtime.call_tool(name, call)
            except ArgumentsError as exc:  # over MCP: an isError result with this text
                print(f"{name}: refused: {exc}")
                continue
            texts = [i.text for i in result.content if isinstance(i, TextContent)]
            print(f"{name}: {texts} {result.structured_content}")
        # --8<-- [end:calls]


if __name__ == "__main__":
    trio.run(main)
