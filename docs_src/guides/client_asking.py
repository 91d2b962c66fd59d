"""A tool that logs to its client and asks the user, seen from the official SDK client."""

# --8<-- [start:module]
from typing import Annotated

import attrs
import trio
from mcp import types

from actors import Ask, Log, ToolModule
from actors.testing import connect


@attrs.define
class Cart:
    items: list[str] = attrs.field(factory=lambda: ["tea", "rice"])


cart = ToolModule("cart", lambda context: Cart())


@attrs.frozen
class Emptying:
    """The form the user fills in: its fields, flat."""

    confirm: Annotated[bool, "Empty the cart?"]
    reason: str | None = None


@cart.tool(destructive=True)
async def empty(state: Cart, log: Log, ask: Ask) -> str:
    """Empty the cart, once the user confirms."""
    log.info(f"{len(state.items)} item(s) in the cart")
    answer = await ask.user(f"Remove {', '.join(state.items)}?", Emptying)
    if answer.data is None or not answer.data.confirm:  # declined, or said no
        return "The cart is kept."
    state.items.clear()
    log.warning(f"the cart was emptied ({answer.data.reason or 'no reason'})")
    return "The cart is empty."


# --8<-- [end:module]


# --8<-- [start:client]
async def on_log(params: types.LoggingMessageNotificationParams) -> None:
    print(f"log {params.level}: {params.data}")


async def on_question(
    context: object,
    params: types.ElicitRequestParams,
) -> types.ElicitResult:
    print(f"asked: {params.message}")
    assert isinstance(params, types.ElicitRequestFormParams)  # a form, not a URL
    for name, field in params.requested_schema["properties"].items():
        print(f"  {name}: {field}")
    answer = {"confirm": True, "reason": "moved"}
    return types.ElicitResult(action="accept", content=answer)


async def main() -> None:
    async with connect(
        [cart],
        logging_callback=on_log,
        elicitation_callback=on_question,
        log_level="info",
    ) as client:
        result = await client.call_tool("cart__empty", {})
        print("result:", result.content[0].text)


trio.run(main)
# --8<-- [end:client]
