"""One call's path: checked and given its actor key (prepare), then run on its actor."""

import trio

from actors import ArgumentsError, UnknownToolError, open_runtime
from actors.modules import content_store, planning
from protocol import ContextError

CONTEXT = {"sessionId": "s1", "assistantId": "a1"}


async def main() -> None:
    async with open_runtime([planning, content_store]) as runtime:
        goal = {"goal": "Ship"}
        call = {"name": "planning__create_goal", "arguments": goal, "_meta": CONTEXT}
        prepared = runtime.prepare(call)  # every check; nothing is sent yet
        print(prepared.tool.full_name, prepared.arguments, prepared.route)
        result = await runtime.run(prepared)  # the key's actor runs it and replies once
        print(result.first_text, result.content[0].service)

        listing = {"name": "content_store__list_contents", "_meta": CONTEXT}
        print(runtime.prepare(listing).route)  # content_store: by the session alone

        create = "planning__create_goal"
        refused = [
            {"name": "planning__create_gaol", "_meta": CONTEXT},
            {"name": create, "arguments": {"goal": 3}, "_meta": CONTEXT},
            {"name": create, "arguments": {"goal": "x", "__sessionid": "s1"}},
        ]
        for bad in refused:  # refused before anything reaches an actor
            try:
                runtime.prepare(bad)
            except (UnknownToolError, ArgumentsError, ContextError) as error:
                print(f"{type(error).__name__}: {error}")


if __name__ == "__main__":
    trio.run(main)
