"""Backing up and restoring a store from Python: `dump_state`, `check_dump`, `restore_state`.

On a real SQLite file and a real PostgreSQL database (``tests/_postgres.py``); the
command line (``python -m actors state``) runs in a subprocess where it is compared.
"""

from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.store import (
    DumpError,
    DumpScope,
    PartChanges,
    Stored,
    check_dump,
    dump_state,
    open_store,
    restore_state,
)
from protocol import ActorKey, ToolContext

from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_url_fixture,
    postgres_server_fixture,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs_src" / "guides" / "durable_backup.py"
PLAN = b'{"schema":1,"state":{"goals":{"g1":"a goal"}}}'
WHOLE = ActorKey("planning", ToolContext("acme/1"))
IN_PARTS = ActorKey("notebook", ToolContext("acme/1", "a1"))
BYTES = ActorKey("planning", ToolContext("acme/2"))
TEXT = ActorKey("planning", ToolContext("acme", None, "t1"))
OTHERS = ActorKey("planning", ToolContext("globex/1"))
ACME = (WHOLE, IN_PARTS, BYTES, TEXT)
HEADER = b'{"schema":3,"header":{"title":"n"}}'
PARTS = {"notes:n1": b'{"body":"one"}', "notes:n2": b"\xff not text"}


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("fresh_postgres_url")
        return url
    return f"sqlite:///{tmp_path / 'state.db'}"


async def fill(url: str) -> None:
    """A state of every form a dump keeps: JSON, in parts, bytes, text; and another tenant's."""
    async with open_store(url) as store:
        first = await store.save(WHOLE, PLAN, None)
        await store.save(WHOLE, PLAN.replace(b"a goal", b"a goal, twice"), first)  # its second
        await store.save(IN_PARTS, HEADER, None, changes=PartChanges(tuple(PARTS.items())))
        await store.save(BYTES, b"\x00\x9f binary", None)
        await store.save(TEXT, b"plain text, not JSON", None)
        await store.save(OTHERS, PLAN, None)


async def everything(url: str) -> dict[ActorKey, Stored | None]:
    keys = (*ACME, OTHERS)
    async with open_store(url, create="nothing") as store:
        return {key: await store.load(key, parts=True) for key in keys}


def edited(dump: bytes, key: ActorKey, stored: Any) -> bytes:
    """`dump` with the line of `key` storing `stored` instead."""
    lines = [json.loads(line) for line in dump.splitlines()]
    for line in lines:
        if (line["key"]["module"], line["key"]["session"]) == (key.module, key.context.session_id):
            line["stored"] = stored
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def line_of(key: ActorKey, version: int | None, stored: Any = 1) -> str:
    """A hand-written dump line: `key` (no assistant or thread) at `version`, storing `stored`."""
    return json.dumps(
        {
            "key": {"module": key.module, "session": key.context.session_id},
            "version": version,
            "stored": stored,
        }
    )


async def test_a_dump_round_trips_every_byte_and_a_repair_in_it_is_restored(
    store_url: str, tmp_path: Path
) -> None:
    """A tenant's dump holds its keys as stored (parts, bytes and text included) and no one
    else's; restored with one line edited, that key alone is written, and the rest stay."""
    await fill(store_url)
    before = await everything(store_url)
    path = tmp_path / "acme.jsonl"
    scope = DumpScope(tenant="acme")
    async with open_store(store_url, create="nothing") as store:
        assert await dump_state(store, path, scope=scope) == len(ACME)
    dump = check_dump(path.read_bytes(), scope=scope)
    assert {line.key for line in dump.lines} == set(ACME)
    for line in dump.lines:
        stored = before[line.key]
        assert stored is not None
        assert (line.version, line.blob, dict(line.parts)) == (
            stored.version,
            stored.blob,
            dict(stored.parts or {}),
        )
    repair = {"schema": 1, "state": {"goals": {}}}
    async with open_store(store_url, create="nothing") as store:
        report = await restore_state(
            store, check_dump(edited(path.read_bytes(), WHOLE, repair), scope=scope)
        )
    assert (report.written, report.unchanged, report.refused, report.total) == (1, 3, (), 4)
    after = await everything(store_url)
    dumped = before[WHOLE]
    assert dumped is not None
    assert after[WHOLE] == Stored(dumped.version + 1, b'{"schema":1,"state":{"goals":{}}}', {})
    assert {key: after[key] for key in after if key != WHOLE} == {
        key: before[key] for key in before if key != WHOLE
    }


async def test_a_key_changed_since_the_dump_is_refused_and_kept(
    store_url: str, tmp_path: Path
) -> None:
    """The same dump restored twice: the second time its edited key has moved on."""
    await fill(store_url)
    path = tmp_path / "acme.jsonl"
    scope = DumpScope(tenant="acme", module="planning")
    async with open_store(store_url, create="nothing") as store:
        dumped = await store.load(WHOLE)
        assert dumped is not None
        await dump_state(store, path, scope=scope)
        dump = check_dump(edited(path.read_bytes(), WHOLE, {"edit": 1}), scope=scope)
        assert (await restore_state(store, dump)).written == 1
        report = await restore_state(store, dump)
        assert [line.key for line in report.refused] == [WHOLE]
        assert (report.written, report.unchanged) == (0, 2)
        assert await store.load(WHOLE) == Stored(dumped.version + 1, b'{"edit":1}')


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("{not json", "line 2: is not JSON"),
        (
            OTHERS,  # at the version stored: refused for its scope alone
            "line 2: key: planning(session='globex/1') is outside the import's scope (tenant",
        ),
        (WHOLE, "line 2: key: planning(session='acme/1') is on line 1 too"),  # the good line
        (
            json.dumps(
                {"key": {"module": "Planning", "session": "acme/1"}, "version": 1, "stored": 1}
            ),
            "line 2: key.module: module name 'Planning' must be lowercase",
        ),
        ("[" * 300 + "]" * 300, "line 2: nests arrays and objects deeper than 256 levels"),
    ],
    ids=["not-json", "outside-the-scope", "a-key-twice", "a-bad-module-name", "too-deep"],
)
async def test_a_bad_dump_is_refused_whole_and_changes_nothing(
    store_url: str, bad: str | ActorKey, problem: str
) -> None:
    """Every line is checked before the store is touched: the good first line is not written
    either (no `Dump` comes of it, and `restore_state` takes nothing else). The good line, and
    a bad one given as a key, carry the version stored: a restore would write them."""
    await fill(store_url)
    before = await everything(store_url)
    versions = {key: stored.version for key, stored in before.items() if stored is not None}
    good = line_of(WHOLE, versions[WHOLE])
    if isinstance(bad, ActorKey):
        bad = line_of(bad, versions[bad])
    with pytest.raises(DumpError) as refused:
        check_dump(f"{good}\n{bad}\n".encode(), scope=DumpScope(tenant="acme"))
    assert len(refused.value.problems) == 1
    assert refused.value.problems[0].startswith(problem)
    assert problem in str(refused.value)
    assert await everything(store_url) == before


async def test_the_command_line_and_the_api_write_the_same_bytes(
    store_url: str, tmp_path: Path
) -> None:
    """``state export`` to a file and to stdout is byte for byte what `dump_state` writes."""
    await fill(store_url)
    by_cli = tmp_path / "cli.jsonl"
    by_api = tmp_path / "api.jsonl"
    options = ("--state", store_url, "--all")
    command = (sys.executable, "-m", "actors", "state", "export", *options)
    await trio.run_process([*command, "--output", str(by_cli)], capture_stderr=True)
    printed = await trio.run_process(command, capture_stdout=True, capture_stderr=True)
    written: list[str] = []

    class Collected:
        async def write(self, text: str) -> None:
            written.append(text)

    async with open_store(store_url, create="nothing") as store:
        await dump_state(store, by_api, scope=DumpScope(whole_store=True))
        await dump_state(store, Collected(), scope=DumpScope(whole_store=True))
    assert by_api.read_bytes() == by_cli.read_bytes()
    assert printed.stdout == "".join(written).encode() == by_cli.read_bytes()
    assert len(by_cli.read_bytes().splitlines()) == len(ACME) + 1
    for path in (by_cli, by_api):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_dump_never_writes_over_a_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    await fill(url)
    path = tmp_path / "kept.jsonl"
    path.write_bytes(b"what was here")
    async with open_store(url, create="nothing") as store:
        with pytest.raises(FileExistsError):
            await dump_state(store, path, scope=DumpScope(whole_store=True))
    assert path.read_bytes() == b"what was here"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "exactly one of session=, tenant= or whole_store=True (got 0)"),
        ({"session": "s1", "tenant": "acme"}, "(got 2)"),
        ({"tenant": "acme", "whole_store": True}, "(got 2)"),
        ({"tenant": "acme/1"}, "tenant: a tenant has no '/'"),
        ({"session": "s\n1"}, "session: contains the control character"),
        ({"whole_store": True, "module": "Plan"}, "module: module name 'Plan' must be lowercase"),
    ],
)
def test_a_scope_names_one_of_three_and_no_default(given: dict[str, Any], message: str) -> None:
    """No scope is a default one: leaving it out is an error, never every tenant."""
    with pytest.raises(ValueError, match=re.escape(message)):
        DumpScope(**given)


async def test_the_guides_example_prints_what_the_page_shows() -> None:
    """docs/guides/durable-state.md includes docs_src/guides/durable_backup.py and its output."""
    ran = await trio.run_process(
        [sys.executable, str(EXAMPLE)], capture_stdout=True, capture_stderr=True
    )
    assert ran.stdout.decode() == EXAMPLE.with_suffix(".txt").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "guides" / "durable-state.md").read_text(encoding="utf-8")
    for region in ("backup", "restore", "refused"):
        assert f'--8<-- "docs_src/guides/durable_backup.py:{region}"' in page
    assert '--8<-- "docs_src/guides/durable_backup.txt"' in page
