"""What a tool declares about itself, as an MCP client sees it."""

# --8<-- [start:declare]
import attrs
import trio
from mcp import Client

from actors import ToolModule, open_runtime
from actors.server import McpAdapter


@attrs.define
class Files:
    names: list[str] = attrs.field(factory=list)


files = ToolModule("files", Files)


@files.tool(title="List files", read_only=True)
def list_files(state: Files) -> str:
    """The files of this session."""
    return "\n".join(state.names)


@files.tool(title="Delete a file", destructive=True, idempotent=True)
def delete_file(state: Files, name: str) -> str:
    """Delete a file; deleting it again changes nothing."""
    if name in state.names:
        state.names.remove(name)
    return f"deleted {name}"


@files.tool(title="Fetch a URL", destructive=False, open_world=True)
def fetch(state: Files, url: str) -> str:
    """Download a file into the session (adds, never overwrites)."""
    state.names.append(url.rsplit("/", 1)[-1])
    return "fetched"


# --8<-- [end:declare]


async def main() -> None:
    # --8<-- [start:list]
    async with (
        open_runtime([files]) as runtime,
        Client(McpAdapter(runtime).server) as client,
    ):
        listed = await client.list_tools()
        for tool in listed.tools:
            assert tool.annotations is not None
            hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
            print(tool.name, hints)
    # --8<-- [end:list]


if __name__ == "__main__":
    trio.run(main)
