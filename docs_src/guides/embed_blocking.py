"""The runtime from synchronous code: trio runs in a thread of its own."""

from concurrent.futures import ThreadPoolExecutor

from actors import open_blocking_runtime
from actors.modules import planning

with open_blocking_runtime([planning], state="memory") as runtime:
    goal = {"goal": "Bake bread", "__sessionId": "s2"}
    runtime.call_tool("planning__create_goal", goal)
    print(runtime.call_tool("planning__list_goals", {"__sessionId": "s2"}).first_text)

    def goals_of(session: str) -> str:
        result = runtime.call_tool("planning__list_goals", {"__sessionId": session})
        return result.first_text

    with ThreadPoolExecutor(4) as pool:  # any number of threads may call at once
        print(list(pool.map(goals_of, ["s1", "s2"])))
