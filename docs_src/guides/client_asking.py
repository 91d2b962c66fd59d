"""A tool that logs to its client and asks the user, seen from the official SDK client."""

# --8<-- [start:module]
import attrs
import trio
from mcp import types

from actors import Ask, Log, ToolModule
from actors.testing import connect


@attrs.define
class Cart:
    items: list[str] = attrs.field(factory=lambda: ["tea", "rice"])


cart = ToolModule("cart", lambda context: Cart())

FORM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Empty the cart?"}},
    "required": ["confirm"],
}


@cart.tool(destructive=True)
async def empty(state: Cart, log: Log, ask: Ask) -> str:
    """Empty the cart, once the user confirms."""
    log.info(f"{len(state.items)} item(s) in the cart")
    answer = await ask.user(f"Remove {', '.join(state.items)}?", FORM)
    if not (answer.accepted and answer.content and answer.content["confirm"]):
        return "The cart is kept."
    state.items.clear()
    log.warning("the cart was emptied")
    return "The cart is empty."


# --8<-- [end:module]


# --8<-- [start:client]
async def on_log(params: types.LoggingMessageNotificationParams) -> None:
    print(f"log {params.level}: {params.data}")


async def on_question(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    print(f"asked: {params.message}")
    return types.ElicitResult(action="accept", content={"confirm": True})


async def main() -> None:
    async with connect(
        [cart], logging_callback=on_log, elicitation_callback=on_question, log_level="info"
    ) as client:
        result = await client.call_tool("cart__empty", {})
        print("result:", result.content[0].text)


trio.run(main)
# --8<-- [end:client]
