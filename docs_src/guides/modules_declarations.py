"""A tool's name and description, declared instead of taken from the function."""

# --8<-- [start:declare]
import trio
from mcp import Client

from actors import ToolModule, open_runtime
from actors.server import McpAdapter

weather = ToolModule("weather")  # no state: its tools take none


@weather.tool(name="forecast", description="The weather in a city for the next 3 days.")
def forecast_from_provider_v2(city: str) -> str:
    """Asks the v2 provider; for maintainers, not for the model."""
    return f"{city}: sun, sun, rain"


# --8<-- [end:declare]


async def main() -> None:
    # --8<-- [start:list]
    async with (
        open_runtime([weather]) as runtime,
        Client(McpAdapter(runtime).server) as client,
    ):
        for tool in (await client.list_tools()).tools:
            print(f"{tool.name}: {tool.description}")
        result = await client.call_tool("weather__forecast", {"city": "Oslo"})
        print(result.content[0].text)
    # --8<-- [end:list]

    # --8<-- [start:undescribed]
    def alerts(city: str) -> str:
        return f"{city}: no alerts"

    try:
        weather.tool(alerts)
    except TypeError as error:
        print(error)
    # --8<-- [end:undescribed]


if __name__ == "__main__":
    trio.run(main)
