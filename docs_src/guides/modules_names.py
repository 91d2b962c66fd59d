"""How a call names a tool."""

# --8<-- [start:names]
import trio

from actors import ToolModule, UnknownToolError, open_runtime

inbox = ToolModule("inbox")  # modules without state: their tools take none
outbox = ToolModule("outbox")


@inbox.tool(read_only=True)
def count() -> str:
    """Messages received."""
    return "inbox: 0"


@inbox.tool(read_only=True)
def latest() -> str:
    """The newest message."""
    return "nothing yet"


@outbox.tool(read_only=True)
def count() -> str:  # noqa: F811 -- a tool is named after its function
    """Messages waiting to be sent."""
    return "outbox: 0"


# --8<-- [end:names]


async def main() -> None:
    async with open_runtime([inbox, outbox]) as runtime:
        # --8<-- [start:calls]
        for name in ["inbox__count", "builtin.outbox__count", "latest", "count"]:
            try:
                result = await runtime.call_tool(name, {"__sessionId": "s1"})
                print(f"{name}: {result.first_text}")
            except UnknownToolError as error:
                print(f"{name}: {error}")
        # --8<-- [end:calls]


if __name__ == "__main__":
    trio.run(main)
