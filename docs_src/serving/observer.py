"""An observer of your own beside Prometheus metrics, on one runtime."""

import collections

import trio

from actors import open_runtime
from actors.lowlevel import CallRecord, Observer, Observers
from actors.modules import planning
from actors.telemetry import PrometheusMetrics


class CallCounter(Observer):
    """Counts calls by tool and outcome; other events do nothing (as Observer's do)."""

    def __init__(self) -> None:
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()

    def call_finished(self, record: CallRecord) -> None:
        self.calls[record.tool, record.outcome] += 1  # quick: the runtime waits for it


async def main() -> None:
    counter, metrics = CallCounter(), PrometheusMetrics()
    observer = Observers([counter, metrics])
    async with open_runtime([planning], observer=observer) as runtime:
        s1 = {"sessionId": "s1"}
        await runtime.call_tool("planning__create_goal", {"goal": "Ship"}, meta=s1)
        await runtime.call_tool("planning__mark_todo", {"todo_id": "t9"}, meta=s1)
    print(sorted(counter.calls.items()))
    body, _content_type = metrics.exposition()
    for line in body.decode().splitlines():
        if line.startswith("mcp_actors_calls_total"):
            print(line)


if __name__ == "__main__":
    trio.run(main)
