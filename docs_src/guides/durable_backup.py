"""Back up one tenant's state from Python, repair a key in the dump, and restore it."""

import json
import tempfile
from pathlib import Path

import trio

from actors.store import (
    DumpError,
    DumpScope,
    check_dump,
    dump_state,
    open_store,
    restore_state,
)
from protocol import ActorKey, ToolContext


async def fill(url: str) -> None:
    """What a server would have stored: two sessions of tenant acme, one of another."""
    async with open_store(url) as store:
        for session in ("acme/1", "acme/2", "globex/1"):
            key = ActorKey("todos", ToolContext(session))
            blob = b'{"schema":1,"state":{"items":["write docs"]}}'
            await store.save(key, blob, None)


async def main(folder: Path) -> None:
    url = f"sqlite:///{folder / 'state.db'}"
    await fill(url)
    backup = folder / "acme.jsonl"
    # --8<-- [start:backup]
    scope = DumpScope(tenant="acme")  # sessions 'acme' and 'acme/…', nobody else's
    async with open_store(url, create="nothing") as store:
        count = await dump_state(store, backup, scope=scope)  # a new file, owner-only
    print(f"backed up {count} key(s) of {scope.describe()}")
    # --8<-- [end:backup]

    text = backup.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    lines[0]["stored"]["state"]["items"] = ["write better docs"]  # the repair
    edited = "".join(json.dumps(line) + "\n" for line in lines)
    backup.write_text(edited, encoding="utf-8")

    # --8<-- [start:restore]
    dump = check_dump(backup.read_bytes(), scope=scope)  # every line, before any write
    async with open_store(url, create="nothing") as store:
        report = await restore_state(store, dump)  # each key only if unchanged since
    refused = len(report.refused)
    print(f"written {report.written}, unchanged {report.unchanged}, refused {refused}")
    # --8<-- [end:restore]

    # --8<-- [start:refused]
    other = b'{"key":{"module":"todos","session":"globex/1"},"version":1,"stored":{}}\n'
    try:
        check_dump(backup.read_bytes() + other, scope=scope)
    except DumpError as error:
        print(*error.problems, sep="\n")
    # --8<-- [end:refused]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        trio.run(main, Path(folder))
