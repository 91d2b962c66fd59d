"""Input and output schemas, derived from a handler's signature."""

# --8<-- [start:schema]
import json
from typing import Annotated, Literal

import attrs
import trio

from actors import ArgumentsError, ToolModule, open_runtime


@attrs.define
class Shelf:
    books: list[str] = attrs.field(factory=list)


library = ToolModule("library", Shelf)


@attrs.frozen
class Found:
    titles: list[str]
    count: int


@library.tool(read_only=True)
def search(
    state: Shelf,
    query: Annotated[str, "Words to look for in titles."],
    limit: int = 5,
    sort: Literal["title", "added"] = "added",
) -> Found:
    """Find books by title."""
    titles = [title for title in state.books if query.lower() in title.lower()][:limit]
    if sort == "title":
        titles.sort()
    return Found(titles, len(titles))


# --8<-- [end:schema]


async def main() -> None:
    # --8<-- [start:print]
    tool = library.tools["search"]
    print(json.dumps(tool.signature.input_schema, indent=2))
    print(json.dumps(tool.output_schema, indent=2))
    # --8<-- [end:print]
    async with open_runtime([library]) as runtime:
        # --8<-- [start:bad]
        try:
            await runtime.call_tool("library__search", {"query": 3, "__sessionId": "s"})
        except ArgumentsError as error:
            print(error)
        # --8<-- [end:bad]


if __name__ == "__main__":
    trio.run(main)
