"""Scopes: which parts of a call's context key a module's state."""

# --8<-- [start:drafts]
import attrs
import trio

from actors import Scope, ToolContext, ToolError, ToolModule, open_runtime


@attrs.define
class Draft:
    text: str = ""


# Each assistant of a session has its own draft.
drafts = ToolModule("drafts", Draft, scope=Scope.SESSION_ASSISTANT)


@drafts.tool
def write(state: Draft, text: str) -> str:
    """Replace the draft."""
    state.text = text
    return "saved"


@drafts.tool(read_only=True)
def read(state: Draft) -> str:
    """The draft."""
    return state.text or "(empty)"


# --8<-- [end:drafts]


# --8<-- [start:board]
@attrs.define
class Board:
    # task -> the assistant that added it
    owners: dict[str, str | None] = attrs.field(factory=dict)


# One board per session, shared by its assistants; each task belongs to its author.
board = ToolModule("board", Board, scope=Scope.SESSION)


@board.tool
def add_task(state: Board, context: ToolContext, task: str) -> str:
    """Add a task, owned by the calling assistant."""
    state.owners[task] = context.assistant_id
    return f"added {task!r}"


@board.tool
def close_task(state: Board, context: ToolContext, task: str) -> str:
    """Close a task of your own."""
    if state.owners.get(task, context.assistant_id) != context.assistant_id:
        message = f"Permission denied: {task!r} belongs to another assistant"
        raise ToolError(message)
    state.owners.pop(task, None)
    return f"closed {task!r}"


# --8<-- [end:board]


async def main() -> None:
    async with open_runtime([drafts, board]) as runtime:
        # --8<-- [start:calls]
        a1 = {"sessionId": "s1", "assistantId": "a1"}
        a2 = {"sessionId": "s1", "assistantId": "a2"}
        await runtime.call_tool("drafts__write", {"text": "Dear Ann,"}, meta=a1)
        print((await runtime.call_tool("drafts__read", meta=a1)).first_text)
        print((await runtime.call_tool("drafts__read", meta=a2)).first_text)

        ship = {"task": "ship"}
        await runtime.call_tool("board__add_task", ship, meta=a1)
        refused = await runtime.call_tool("board__close_task", ship, meta=a2)
        print(refused.is_error, refused.first_text)
        print((await runtime.call_tool("board__close_task", ship, meta=a1)).first_text)
        # --8<-- [end:calls]


if __name__ == "__main__":
    trio.run(main)
