"""Heavy tools run in a worker thread; any tool may report progress."""

# --8<-- [start:heavy]
import attrs
import trio

from actors import Progress, ToolModule, open_runtime


@attrs.define
class Index:
    documents: list[str] = attrs.Factory(lambda: ["red fox", "lazy dog", "red dog"])
    words: dict[str, int] = attrs.field(factory=dict)


index = ToolModule("index", Index)


@index.tool(heavy=True)
def rebuild(state: Index, progress: Progress) -> str:
    """Count the words of every document again (CPU-bound: run in a worker thread)."""
    state.words.clear()
    for done, document in enumerate(state.documents, 1):
        for word in document.split():
            state.words[word] = state.words.get(word, 0) + 1
        progress.report(done, total=len(state.documents), message=document)
    return f"indexed {len(state.words)} words"


@index.tool
async def wait(state: Index, seconds: float) -> str:
    """An async handler: it awaits I/O, and its key's next call waits for it."""
    await trio.sleep(seconds)
    return f"waited {seconds} s"


# --8<-- [end:heavy]


async def main() -> None:
    async with open_runtime([index]) as runtime:
        # --8<-- [start:progress]
        call = runtime.prepare(
            {"name": "index__rebuild", "arguments": {}, "_meta": {"sessionId": "s1"}}
        )
        result = await runtime.run(call, progress=print)
        print(result.first_text)
        # --8<-- [end:progress]
        pause = {"seconds": 0.1, "__sessionId": "s1"}
        waited = await runtime.call_tool("index__wait", pause)
        print(waited.first_text)


if __name__ == "__main__":
    trio.run(main)
