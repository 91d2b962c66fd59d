"""``python -m actors state``: listing, showing, exporting, importing and deleting stored state.

Every test runs the real command in a subprocess, against a SQLite file (or a
PostgreSQL database, see ``tests/_postgres.py``) that a runtime or the store
itself filled.
"""

from __future__ import annotations

import datetime
import json
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from actors import StateUnreadableError, open_runtime
from actors.modules import planning
from actors.store import Stored, default_state_url, open_store
from protocol import ActorKey, ToolContext, inject_context

from .._postgres import (  # noqa: F401  (fixtures)
    fresh_postgres_url_fixture,
    postgres_server_fixture,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from actors.store import StoredEntry

STATE = (sys.executable, "-m", "actors", "state")
PLAN = b'{"schema":1,"state":{"goals":{"g1":"a goal"},"todos":{}}}'


@attrs.frozen
class Ran:
    code: int
    out: str
    err: str

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines()]


async def state(*args: str, stdin: bytes = b"") -> Ran:
    """Run ``python -m actors state ARGS`` (its $XDG_STATE_HOME is the test's own)."""
    done = await trio.run_process(
        [*STATE, *args], stdin=stdin, capture_stdout=True, capture_stderr=True, check=False
    )
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def key(
    session: str, module: str = "planning", assistant: str | None = None, thread: str | None = None
) -> ActorKey:
    return ActorKey(module, ToolContext(session, assistant, thread))


async def save(url: str, keys: Iterable[ActorKey], blob: bytes = PLAN) -> list[int]:
    """Write `blob` as the first version of each of `keys`; those versions, in order."""
    async with open_store(url) as store:
        return [await store.save(each, blob, None) for each in keys]


def a_first_version(stored: Stored | None) -> Stored:
    """`stored`, checked to be at a first version (random, one to 2**52: `first_version`)."""
    assert stored is not None
    assert 1 <= stored.version <= 2**52, stored.version
    return stored


async def load(url: str, *keys: ActorKey) -> list[Stored | None]:
    async with open_store(url, create="nothing") as store:
        return [await store.load(each) for each in keys]


async def entries(url: str) -> list[StoredEntry]:
    async with open_store(url, create="nothing") as store:
        return await store.entries()


def utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="seconds")


def sessions_in(ran: Ran) -> list[str]:
    return [line["key"]["session"] for line in ran.json_lines()]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("fresh_postgres_url")
        return url
    return sqlite_url


class TestScope:
    @pytest.mark.parametrize("command", ["list", "export"])
    async def test_listing_without_a_scope_is_a_usage_error(
        self, command: str, sqlite_url: str
    ) -> None:
        """No default scope: an operator never sees every tenant by leaving an option out."""
        await save(sqlite_url, [key("s1")])
        ran = await state(command, "--state", sqlite_url)
        assert ran.code == 2
        assert ran.out == ""
        assert "error: one of the arguments --session --tenant --all is required" in ran.err

    async def test_a_tenant_is_its_own_session_and_those_under_it(self, store_url: str) -> None:
        """--tenant alpha: 'alpha' and 'alpha/…', never 'alphabet', 'alph' or 'beta/alpha'."""
        await save(
            store_url, [key(s) for s in ["alpha", "alpha/1", "alphabet", "alph", "beta/alpha"]]
        )
        for command in (("list", "--json"), ("export",)):
            ran = await state(*command, "--state", store_url, "--tenant", "alpha")
            assert ran.code == 0, ran.err
            assert sessions_in(ran) == ["alpha", "alpha/1"]

    async def test_ids_are_data_not_patterns(self, store_url: str) -> None:
        """'%', '_' and quotes match themselves only."""
        sessions = ["a%", "a%/x", "ab", "a_/1", "ab/1", 'it\'s "q"', "a\\"]
        await save(store_url, [key(s) for s in sessions])
        for scope, expected in [
            (("--session", "a%"), ["a%"]),
            (("--tenant", "a%"), ["a%", "a%/x"]),
            (("--tenant", "a_"), ["a_/1"]),
            (("--session", 'it\'s "q"'), ['it\'s "q"']),
            (("--session", "a\\"), ["a\\"]),
        ]:
            ran = await state("list", "--state", store_url, *scope, "--json")
            assert ran.code == 0, ran.err
            assert sessions_in(ran) == expected, scope

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            (("list", "--session", "a\nb"), "argument --session: contains the control character"),
            (("list", "--session", ""), "argument --session: must not be empty"),
            (("list", "--session", "x" * 257), "is 257 characters long; the limit is 256"),
            (("list", "--tenant", "a/b"), "argument --tenant: a tenant has no '/'"),
            (("list", "--all", "--module", "Plan"), "module name 'Plan' must be lowercase"),
            (
                ("show", "--session", "s", "--module", "planning", "--thread", "t\x7f"),
                "argument --thread: contains the control character '\\x7f' at index 1",
            ),
            (("delete", "--session", "s\x1b"), "argument --session: contains the control"),
        ],
    )
    async def test_ids_that_break_the_protocols_rules_are_refused(
        self, arguments: tuple[str, ...], message: str, sqlite_url: str
    ) -> None:
        """The protocol's own words, naming the option; nothing is opened."""
        ran = await state(*arguments, "--state", sqlite_url)
        assert ran.code == 2
        assert message in ran.err
        assert not await trio.Path(sqlite_url.removeprefix("sqlite:///")).exists()


class TestList:
    async def test_each_key_with_its_parts_version_size_and_time(self, sqlite_url: str) -> None:
        """A runtime's keys, one line each; absent parts are '-', an id named '-' is quoted."""
        contexts = [ToolContext("s1", "a1", "t1"), ToolContext("s1"), ToolContext("s1", "-")]
        first: dict[ToolContext, int] = {}  # each key's version after its first call
        async with open_store(sqlite_url) as store, open_runtime([planning], store=store) as rt:
            for context in [contexts[0], *contexts]:
                result = await rt.call_tool(
                    "planning__create_goal", inject_context({"goal": "ship"}, context)
                )
                assert not result.is_error, result.first_text
                if context not in first:
                    first[context] = a_first_version(
                        await store.load(ActorKey("planning", context))
                    ).version
        await save(sqlite_url, [key("s2")])
        expected = [e for e in await entries(sqlite_url) if e.key.context.session_id == "s1"]

        ran = await state("list", "--state", sqlite_url, "--session", "s1")
        assert ran.code == 0, ran.err
        header, *rows = [line.split() for line in ran.out.splitlines()]
        assert " ".join(header) == "MODULE SESSION ASSISTANT THREAD VERSION BYTES USED (UTC)"
        assert [row[:4] for row in rows] == [
            ["planning", "'s1'", "'-'", "-"],
            ["planning", "'s1'", "'a1'", "'t1'"],
            ["planning", "'s1'", "-", "-"],
        ]
        assert [row[4:] for row in rows] == [
            [str(entry.version), str(entry.size), utc(entry.used_at)] for entry in expected
        ]
        # 's1'/'a1'/'t1' was called twice: one version past its first; the others once.
        assert [row[4] for row in rows] == [
            str(first[contexts[2]]),
            str(first[contexts[0]] + 1),
            str(first[contexts[1]]),
        ]

        ran = await state("list", "--state", sqlite_url, "--session", "s1", "--json")
        assert ran.json_lines() == [
            {
                "key": {"module": "planning", "session": "s1", "assistant": a, "thread": t},
                "version": entry.version,
                "size": entry.size,
                "used_at": utc(entry.used_at),
            }
            for entry, (a, t) in zip(
                expected, [("-", None), ("a1", "t1"), (None, None)], strict=True
            )
        ]

    async def test_module_narrows_the_listing(self, sqlite_url: str) -> None:
        await save(sqlite_url, [key("s1"), key("s1", "content_store"), key("s2", "content_store")])
        ran = await state(
            "list", "--state", sqlite_url, "--all", "--module", "content_store", "--json"
        )
        assert [line["key"]["session"] for line in ran.json_lines()] == ["s1", "s2"]
        assert {line["key"]["module"] for line in ran.json_lines()} == {"content_store"}

    async def test_nothing_stored_is_an_empty_listing_and_a_note(self, sqlite_url: str) -> None:
        await save(sqlite_url, [key("s1")])
        ran = await state("list", "--state", sqlite_url, "--session", "nobody")
        assert (ran.code, ran.out) == (0, "")
        assert "nothing stored for session 'nobody'" in ran.err


class TestShow:
    async def test_prints_the_key_its_version_and_its_state(self, sqlite_url: str) -> None:
        [version] = await save(sqlite_url, [key("s1", assistant="a1")])
        ran = await state(
            "show",
            "--state",
            sqlite_url,
            "--session",
            "s1",
            "--module",
            "planning",
            "--assistant",
            "a1",
        )
        assert ran.code == 0, ran.err
        shown = json.loads(ran.out)
        assert shown.pop("used_at").endswith("+00:00")
        assert shown == {
            "key": {"module": "planning", "session": "s1", "assistant": "a1", "thread": None},
            "version": version,
            "size": len(PLAN),
            "stored": json.loads(PLAN),
        }

    @pytest.mark.parametrize(
        ("blob", "field", "value"),
        [
            (b"\x00{not json", "stored_text", "\x00{not json"),
            (b"\xff\xfe", "stored_base64", "//4="),
        ],
    )
    async def test_a_blob_that_is_not_json_is_shown_as_text_or_base64(
        self, sqlite_url: str, blob: bytes, field: str, value: str
    ) -> None:
        await save(sqlite_url, [key("s1")], blob)
        ran = await state("show", "--state", sqlite_url, "--session", "s1", "--module", "planning")
        assert ran.code == 0, ran.err
        assert json.loads(ran.out)[field] == value

    async def test_a_key_with_nothing_stored_is_an_error(self, sqlite_url: str) -> None:
        """An absent assistant is not the assistant 'a1': exact keys only."""
        await save(sqlite_url, [key("s1", assistant="a1")])
        ran = await state("show", "--state", sqlite_url, "--session", "s1", "--module", "planning")
        assert (ran.code, ran.out) == (1, "")
        assert "error: nothing stored for planning(session='s1');" in ran.err


class TestExport:
    async def test_writes_one_json_line_per_key(self, store_url: str) -> None:
        planning_s1, content_s1, _s2 = await save(
            store_url, [key("s1"), key("s1", "content_store"), key("s2")]
        )
        ran = await state("export", "--state", store_url, "--session", "s1")
        assert ran.code == 0, ran.err
        assert ran.json_lines() == [
            {
                "key": {"module": module, "session": "s1", "assistant": None, "thread": None},
                "version": version,
                "stored": json.loads(PLAN),
            }
            for module, version in (("content_store", content_s1), ("planning", planning_s1))
        ]
        assert "exported 2 key(s) of session 's1'" in ran.err

    async def test_to_a_new_file_readable_by_the_owner_only(
        self, store_url: str, tmp_path: Path
    ) -> None:
        await save(store_url, [key("s1"), key("s2")])
        output = tmp_path / "export.jsonl"
        ran = await state("export", "--state", store_url, "--all", "--output", str(output))
        assert (ran.code, ran.out) == (0, ""), ran.err
        assert stat.S_IMODE(output.stat().st_mode) == 0o600
        assert [json.loads(line)["key"]["session"] for line in output.read_text().splitlines()] == [
            "s1",
            "s2",
        ]

    async def test_an_existing_file_is_never_overwritten(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        await save(sqlite_url, [key("s1")])
        output = tmp_path / "export.jsonl"
        output.write_text("precious\n")
        ran = await state("export", "--state", sqlite_url, "--all", "--output", str(output))
        assert ran.code == 1
        assert f"error: cannot write the export to {output}" in ran.err
        assert output.read_text() == "precious\n"


PLANNING = '"module": "planning"'
S1 = '"session": "s1"'
S2 = f'{PLANNING}, "session": "s2"'


def raw(key: str = S2, rest: str = '"version": 1, "stored": 1') -> str:
    """An import line as text: ``{"key": {KEY}, REST}``."""
    return f'{{"key": {{{key}}}, {rest}}}'


def export_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, lines: Iterable[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


class TestImport:
    async def test_export_edit_import_repairs_a_state_that_does_not_load(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        """A plan with a field the module does not know fails every call until it is repaired."""
        broken = json.dumps({"schema": 1, "state": {**json.loads(PLAN)["state"], "owner": "x"}})
        await save(sqlite_url, [key("s1")], broken.encode())
        async with open_store(sqlite_url) as store, open_runtime([planning], store=store) as rt:
            with pytest.raises(StateUnreadableError, match="owner"):
                await rt.call_tool("planning__list_goals", {"__sessionId": "s1"})

        exported = tmp_path / "s1.jsonl"
        ran = await state(
            "export", "--state", sqlite_url, "--session", "s1", "--output", str(exported)
        )
        assert ran.code == 0, ran.err
        [line] = export_lines(exported)
        del line["stored"]["state"]["owner"]
        write_lines(exported, [line])
        ran = await state("import", "--state", sqlite_url, "--session", "s1", str(exported))
        assert (ran.code, ran.out) == (
            0,
            f"written 1, unchanged 0, refused 0 (of 1 key(s) in {exported})\n",
        ), ran.err

        async with open_store(sqlite_url) as store, open_runtime([planning], store=store) as rt:
            result = await rt.call_tool("planning__list_goals", {"__sessionId": "s1"})
            assert result.first_text == "Goals (1):\n- g1: a goal"

    async def test_a_state_stored_in_parts_exports_its_parts_and_imports_them_edited(
        self, store_url: str, tmp_path: Path
    ) -> None:
        """Export, edit one part, drop another: the key has exactly the line's parts."""
        async with open_store(store_url) as store, open_runtime([planning], store=store) as rt:
            for goal in ("first", "second"):
                await rt.call_tool("planning__create_goal", {"goal": goal, "__sessionId": "s1"})
        exported = tmp_path / "s1.jsonl"
        ran = await state(
            "export", "--state", store_url, "--session", "s1", "--output", str(exported)
        )
        assert ran.code == 0, ran.err
        [line] = export_lines(exported)
        assert line["stored"] == {"schema": 1, "header": {}}
        assert line["parts"] == {"goals:g1": {"stored": "first"}, "goals:g2": {"stored": "second"}}
        line["parts"] = {"goals:g2": {"stored": "second, edited"}}
        write_lines(exported, [line])
        ran = await state("import", "--state", store_url, "--session", "s1", str(exported))
        assert ran.code == 0, ran.err
        async with open_store(store_url) as store, open_runtime([planning], store=store) as rt:
            result = await rt.call_tool("planning__list_goals", {"__sessionId": "s1"})
            assert result.first_text == "Goals (1):\n- g2: second, edited"
        ran = await state("import", "--state", store_url, "--session", "s1", str(exported))
        assert "written 0, unchanged 0, refused 1" in ran.out  # the version moved on

    async def test_a_key_changed_since_the_export_is_refused_and_the_others_written(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        """The version fence: an import never overwrites what was written after the export."""
        first, second = key("s1"), key("s2")
        first_version, second_version = await save(sqlite_url, [first, second])
        exported = tmp_path / "all.jsonl"
        await state("export", "--state", sqlite_url, "--all", "--output", str(exported))
        lines = export_lines(exported)
        for line in lines:
            line["stored"]["state"]["goals"]["g2"] = "from the import"
        write_lines(exported, lines)
        async with open_store(sqlite_url) as store:
            await store.save(first, b"written after the export", first_version)

        ran = await state("import", "--state", sqlite_url, "--all", str(exported))
        assert ran.code == 1
        assert ran.out == f"written 1, unchanged 0, refused 1 (of 2 key(s) in {exported})\n"
        assert (
            f"error: {exported}: line 1: planning(session='s1'): the stored state changed since "
            "the export; not written"
        ) in ran.err
        assert "version" not in ran.err  # what is stored now is not told
        now_first, now_second = await load(sqlite_url, first, second)
        assert now_first == Stored(first_version + 1, b"written after the export")
        assert now_second is not None
        assert now_second.version == second_version + 1
        assert json.loads(now_second.blob)["state"]["goals"]["g2"] == "from the import"

    async def test_version_null_writes_a_key_only_where_none_is_stored(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        [version] = await save(sqlite_url, [key("s1")])
        new = {
            "key": {"module": "planning", "session": "s9"},
            "version": None,
            "stored": {"schema": 1},
        }
        taken = {**new, "key": {"module": "planning", "session": "s1"}}
        path = tmp_path / "new.jsonl"
        write_lines(path, [new, taken])
        ran = await state("import", "--state", sqlite_url, "--all", str(path))
        assert ran.code == 1
        assert "line 2: planning(session='s1'): the stored state changed since" in ran.err
        written, kept = await load(sqlite_url, key("s9"), key("s1"))
        assert a_first_version(written).blob == b'{"schema":1}'
        assert kept == Stored(version, PLAN)

    async def test_an_unchanged_export_writes_nothing(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        versions = await save(sqlite_url, [key("s1"), key("s2")])
        path = tmp_path / "all.jsonl"
        await state("export", "--state", sqlite_url, "--all", "--output", str(path))
        ran = await state("import", "--state", sqlite_url, "--all", str(path))
        assert (ran.code, ran.out) == (
            0,
            f"written 0, unchanged 2, refused 0 (of 2 key(s) in {path})\n",
        )
        assert await load(sqlite_url, key("s1"), key("s2")) == [
            Stored(version, PLAN) for version in versions
        ]

    async def test_blobs_that_are_not_json_come_back_byte_for_byte(
        self, store_url: str, tmp_path: Path
    ) -> None:
        """Exported as text or base64, imported into an empty place: the same bytes, at a
        first version that none of the deleted keys' versions repeats."""
        blobs = {key("s1"): b"\x00{not json \xc3\xa9", key("s2"): b"\xff\xfe\x00"}
        earlier: list[int] = []  # the versions of the keys' first lives
        for each, blob in blobs.items():
            earlier += await save(store_url, [each], blob)
        path = tmp_path / "all.jsonl"
        ran = await state("export", "--state", store_url, "--all", "--output", str(path))
        assert ran.code == 0, ran.err
        lines = export_lines(path)
        assert [sorted(line) for line in lines] == [
            ["key", "stored_text", "version"],
            ["key", "stored_base64", "version"],
        ]
        for line in lines:
            line["version"] = None
        write_lines(path, lines)
        for session in ("s1", "s2"):
            assert (await state("delete", "--state", store_url, "--session", session)).code == 0
        ran = await state("import", "--state", store_url, "--all", "-", stdin=path.read_bytes())
        assert ran.code == 0, ran.err
        again = [a_first_version(stored) for stored in await load(store_url, *blobs)]
        assert again == [
            Stored(stored.version, blob) for stored, blob in zip(again, blobs.values(), strict=True)
        ]
        assert not {stored.version for stored in again} & set(earlier)

    @pytest.mark.parametrize(
        ("line", "problem"),
        [
            ("{not json", "is not JSON"),
            ("[1, 2]", "must be a JSON object"),
            (raw(rest='"stored": 1'), "version: missing"),
            (
                raw(rest='"version": "1", "stored": 1'),
                "version: must be a whole number of at least",
            ),
            (raw(rest='"version": true, "stored": 1'), "version: must be a whole number"),
            (raw(rest='"version": 0, "stored": 1'), "version: must be a whole number"),
            (raw(key='"module": "planning"'), "key.session: missing"),
            (raw(key='"session": "s2"'), "key.module: missing"),
            (raw(key=f'{PLANNING}, "session": "a\\nb"'), "key.session: contains the control"),
            (raw(key=f'{PLANNING}, "session": "s\\ud800"'), "key.session: contains the lone"),
            (raw(key=f'{PLANNING}, "session": ""'), "key.session: must not be empty"),
            (raw(key=f'{PLANNING}, "session": null'), "key.session: must be a string, got null"),
            (raw(key=f'{S2}, "assistant": 5'), "key.assistant: must be a string, got int"),
            (raw(key=f'{S2}, "thread": "t\\u0085"'), "key.thread: contains the control"),
            (raw(key='"module": "Bad-Name", "session": "s2"'), "key.module: module name 'Bad-Name"),
            (raw(key=f'{S2}, "user": "u"'), "key: unknown field(s) 'user'"),
            ('{"key": "s2", "version": 1, "stored": 1}', "key: must be an object with module"),
            (raw(rest='"version": 1, "stord": 1'), "unknown field(s) 'stord'"),
            (raw(rest='"version": 1'), "needs exactly one of stored, stored_text, stored_base64"),
            (
                raw(rest='"version": 1, "stored": 1, "stored_text": "1"'),
                "needs exactly one of stored, stored_text, stored_base64, "
                "found stored, stored_text",
            ),
            (raw(rest='"version": 1, "stored_text": 1'), "stored_text: must be a string, got int"),
            (raw(rest='"version": 1, "stored_base64": "!!"'), "stored_base64: is not base64"),
            (raw(key=f"{PLANNING}, {S1}"), "key: planning(session='s1') is on line 1 too"),
            (raw(rest='"version": 1, "stored": 1, "parts": []'), "parts: must be an object"),
            (
                raw(rest='"version": 1, "stored": 1, "parts": {"goals": {"stored": 1}}'),
                "parts.goals: a part's name is FIELD:ID",
            ),
            (
                raw(rest='"version": 1, "stored": 1, "parts": {"goals:g1": {"stord": 1}}'),
                "parts.goals:g1: must be an object with one of stored",
            ),
        ],
    )
    async def test_a_bad_file_changes_nothing_and_names_the_line_and_field(
        self, sqlite_url: str, tmp_path: Path, line: str, problem: str
    ) -> None:
        """Every line is checked before anything is written; the good first line (at the
        version stored: an import would write it) is not."""
        [version] = await save(sqlite_url, [key("s1")])
        good = raw(
            key=f"{PLANNING}, {S1}", rest=f'"version": {version}, "stored": {{"changed": true}}'
        )
        path = tmp_path / "bad.jsonl"
        path.write_text(f"{good}\n{line}\n")
        ran = await state("import", "--state", sqlite_url, "--all", str(path))
        assert (ran.code, ran.out) == (1, "")
        assert f"error: {path}: line 2: {problem}" in ran.err
        assert f"error: {path}: nothing was imported" in ran.err
        assert await load(sqlite_url, key("s1")) == [Stored(version, PLAN)]


def nested(depth: int, inner: str = "1") -> str:
    """JSON text: `inner` inside `depth` arrays."""
    return "[" * depth + inner + "]" * depth


class TestImportScope:
    """An import writes only the keys of the scope it is given, and tells nothing of others."""

    async def test_an_import_without_a_scope_is_a_usage_error(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        """No default scope: a whole-store backup says --all."""
        [version] = await save(sqlite_url, [key("s1")])
        path = tmp_path / "s1.jsonl"
        path.write_text(
            raw(key=f"{PLANNING}, {S1}", rest=f'"version": {version}, "stored": 2') + "\n"
        )
        ran = await state("import", "--state", sqlite_url, str(path))
        assert (ran.code, ran.out) == (2, "")
        assert "error: one of the arguments --session --tenant --all is required" in ran.err
        assert await load(sqlite_url, key("s1")) == [Stored(version, PLAN)]

    @pytest.mark.parametrize(
        ("scope", "outside", "named"),
        [
            (("--tenant", "alpha"), key("beta/1"), "tenant 'alpha'"),
            (("--tenant", "alpha"), key("alphabet"), "tenant 'alpha'"),
            (("--tenant", "alpha"), key("beta/alpha"), "tenant 'alpha'"),
            (("--session", "alpha/1"), key("alpha/2"), "session 'alpha/1'"),
            (("--session", "alpha/1"), key("alpha"), "session 'alpha/1'"),
            (
                ("--tenant", "alpha", "--module", "planning"),
                key("alpha/1", "content_store"),
                "module 'planning' of tenant 'alpha'",
            ),
        ],
    )
    async def test_a_key_outside_the_scope_writes_nothing_on_any_try(
        self,
        store_url: str,
        tmp_path: Path,
        scope: tuple[str, ...],
        outside: ActorKey,
        named: str,
    ) -> None:
        """A file exported for one tenant, edited to name another's key, is refused as a
        whole, however often it is tried and whatever version it gives: the other tenant's
        key and the file's own keys stay as they were."""
        mine = key("alpha/1")
        mine_first, outside_first = await save(store_url, [mine, outside])
        async with open_store(store_url) as store:  # the other key has moved on, by four
            for at in range(outside_first, outside_first + 4):
                await store.save(outside, PLAN, at)
        path = tmp_path / "edited.jsonl"
        for version in [outside_first, outside_first + 4, None]:  # as was, as is, as none
            other = {"key": {**_key_dict(outside)}, "version": version, "stored": {"x": 1}}
            own = {"key": _key_dict(mine), "version": mine_first, "stored": {"mine": 1}}
            write_lines(path, [own, other])
            ran = await state("import", "--state", store_url, *scope, str(path))
            assert (ran.code, ran.out) == (1, ""), ran.err
            assert (
                f"error: {path}: line 2: key: {outside} is outside the import's scope ({named})"
            ) in ran.err
            assert f"error: {path}: nothing was imported" in ran.err
            assert await load(store_url, mine, outside) == [
                Stored(mine_first, PLAN),
                Stored(outside_first + 4, PLAN),
            ]

    async def test_every_key_in_scope_is_written(self, store_url: str, tmp_path: Path) -> None:
        """The tenant's own session and those under it; --all takes any."""
        keys = [key("alpha"), key("alpha/1"), key("alpha/1", "content_store")]
        versions = await save(store_url, keys)
        path = tmp_path / "alpha.jsonl"
        write_lines(
            path,
            [
                {"key": _key_dict(k), "version": v, "stored": {"n": 2}}
                for k, v in zip(keys, versions, strict=True)
            ],
        )
        ran = await state("import", "--state", store_url, "--tenant", "alpha", str(path))
        assert ran.code == 0, ran.err
        assert ran.out == f"written 3, unchanged 0, refused 0 (of 3 key(s) in {path})\n"
        assert await load(store_url, *keys) == [Stored(v + 1, b'{"n":2}') for v in versions]
        ran = await state("import", "--state", store_url, "--all", str(path))
        assert ran.code == 1  # the versions moved on: refused, not out of scope
        assert "refused 3" in ran.out

    async def test_a_refusal_does_not_tell_the_stored_version(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        """The refusal says the state changed, not what version it is at now: a version
        learnt from it was all an edited file needed to overwrite the key on a second try."""
        [first] = await save(sqlite_url, [key("s1")])
        async with open_store(sqlite_url) as store:
            for at in range(first, first + 6):
                await store.save(key("s1"), PLAN, at)
        path = tmp_path / "old.jsonl"
        for version in [first, None]:
            write_lines(
                path, [{"key": _key_dict(key("s1")), "version": version, "stored": {"x": 1}}]
            )
            ran = await state("import", "--state", sqlite_url, "--session", "s1", str(path))
            assert ran.code == 1
            told = ran.err.replace(str(path), "FILE")
            assert told == (
                "python -m actors state: error: FILE: line 1: planning(session='s1'): the stored "
                "state changed since the export; not written: export it again and redo the "
                "change\n"
            )
        assert await load(sqlite_url, key("s1")) == [Stored(first + 6, PLAN)]


def _key_dict(each: ActorKey) -> dict[str, str | None]:
    context = each.context
    return {
        "module": each.module,
        "session": context.session_id,
        "assistant": context.assistant_id,
        "thread": context.thread_id,
    }


class TestImportNesting:
    """Nesting is bounded before a line is parsed: a clear refusal, never a traceback."""

    @pytest.mark.parametrize("depth", [257, 100_000])
    async def test_a_line_nested_too_deep_is_refused_by_line_and_limit(
        self, sqlite_url: str, tmp_path: Path, depth: int
    ) -> None:
        [version] = await save(sqlite_url, [key("s1")])
        good = raw(key=f"{PLANNING}, {S1}", rest=f'"version": {version}, "stored": 2')
        # The line's own object is one level: the stored value nests depth - 1 deep.
        deep = raw(key=f"{PLANNING}, {S1}", rest=f'"version": 1, "stored": {nested(depth - 1)}')
        path = tmp_path / "deep.jsonl"
        path.write_text(f"{good}\n\n{deep.replace(S1, S2.split(', ')[1])}\n")
        ran = await state("import", "--state", sqlite_url, "--all", str(path))
        assert (ran.code, ran.out) == (1, "")
        assert "Traceback" not in ran.err
        assert "RecursionError" not in ran.err
        assert (
            f"error: {path}: line 3: nests arrays and objects deeper than 256 levels (at character"
        ) in ran.err
        assert "the limit is 256" in ran.err
        assert await load(sqlite_url, key("s1")) == [Stored(version, PLAN)]

    async def test_a_line_at_the_limit_is_written_and_brackets_in_strings_do_not_count(
        self, store_url: str, tmp_path: Path
    ) -> None:
        """256 levels, the line's own object among them; a string of brackets is text."""
        value = nested(255)
        text = '"' + "[{" * 10_000 + '\\"]}"'  # an escaped quote does not end the string
        await save(store_url, [key("s3")])
        path = tmp_path / "edge.jsonl"
        write_lines(
            path,
            [
                {"key": _key_dict(key("s1")), "version": None, "stored": json.loads(value)},
                {"key": _key_dict(key("s2")), "version": None, "stored": json.loads(text)},
            ],
        )
        ran = await state("import", "--state", store_url, "--all", str(path))
        assert ran.code == 0, ran.err
        s1, s2 = await load(store_url, key("s1"), key("s2"))
        assert a_first_version(s1).blob == value.encode()
        assert (
            a_first_version(s2).blob == json.dumps(json.loads(text), separators=(",", ":")).encode()
        )

    async def test_a_stored_state_nested_too_deep_exports_as_text_and_imports_back(
        self, sqlite_url: str, tmp_path: Path
    ) -> None:
        """Written by other means, a state too deep to parse safely is shown and exported as
        ``stored_text``: no RecursionError, and its export imports (unchanged)."""
        deep = nested(100_000).encode()
        await save(sqlite_url, [key("s1")], deep)
        ran = await state("show", "--state", sqlite_url, "--session", "s1", "--module", "planning")
        assert ran.code == 0, ran.err
        assert json.loads(ran.out)["stored_text"] == deep.decode()
        path = tmp_path / "s1.jsonl"
        ran = await state("export", "--state", sqlite_url, "--all", "--output", str(path))
        assert ran.code == 0, ran.err
        ran = await state("import", "--state", sqlite_url, "--session", "s1", str(path))
        assert (ran.code, ran.out) == (
            0,
            f"written 0, unchanged 1, refused 0 (of 1 key(s) in {path})\n",
        ), ran.err


class TestDelete:
    async def test_one_key_by_its_exact_name(self, store_url: str) -> None:
        keys = [key("s1"), key("s1", assistant="a1"), key("s1", "content_store")]
        planning_s1, _a1, content_s1 = await save(store_url, keys)
        ran = await state(
            "delete",
            "--state",
            store_url,
            "--session",
            "s1",
            "--module",
            "planning",
            "--assistant",
            "a1",
        )
        assert (ran.code, ran.out) == (0, "deleted planning(session='s1', assistant='a1')\n"), (
            ran.err
        )
        assert await load(store_url, *keys) == [
            Stored(planning_s1, PLAN),
            None,
            Stored(content_s1, PLAN),
        ]

    async def test_a_whole_session_and_no_other(self, store_url: str) -> None:
        """'alpha' is one session: its tenant's other sessions and look-alikes stay."""
        await save(
            store_url,
            [key("alpha"), key("alpha", "content_store"), key("alpha/1"), key("alphabet")],
        )
        ran = await state("delete", "--state", store_url, "--session", "alpha")
        assert (ran.code, ran.out) == (0, "deleted 2 key(s) of session 'alpha'\n"), ran.err
        assert [entry.key.context.session_id for entry in await entries(store_url)] == [
            "alpha/1",
            "alphabet",
        ]

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            (
                ("--session", "s1", "--module", "planning", "--thread", "t1"),
                "nothing stored for planning(session='s1', thread='t1')",
            ),
            (("--session", "s2"), "nothing stored for session 's2'"),
        ],
    )
    async def test_deleting_what_is_not_stored_is_an_error(
        self, sqlite_url: str, arguments: tuple[str, ...], message: str
    ) -> None:
        [version] = await save(sqlite_url, [key("s1")])
        ran = await state("delete", "--state", sqlite_url, *arguments)
        assert (ran.code, ran.out) == (1, "")
        assert f"error: {message}" in ran.err
        assert await load(sqlite_url, key("s1")) == [Stored(version, PLAN)]

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            (
                ("--session", "s1", "--assistant", "a1"),
                "--assistant and --thread name a key within a module: add --module",
            ),
            (("--session", "s1", "--tenant", "s1"), "unrecognized arguments: --tenant s1"),
            (("--module", "planning"), "the following arguments are required: --session"),
        ],
    )
    async def test_only_exact_names(
        self, sqlite_url: str, arguments: tuple[str, ...], message: str
    ) -> None:
        """No tenant-wide delete, no key without its session."""
        [version] = await save(sqlite_url, [key("s1")])
        ran = await state("delete", "--state", sqlite_url, *arguments)
        assert ran.code == 2
        assert message in ran.err
        assert await load(sqlite_url, key("s1")) == [Stored(version, PLAN)]


class TestStore:
    async def test_a_missing_file_is_an_error_and_is_not_made(self, tmp_path: Path) -> None:
        path = tmp_path / "typo.db"
        ran = await state("list", "--state", f"sqlite:///{path}", "--all")
        assert (ran.code, ran.out) == (1, "")
        assert f"there is no state store at {path}" in ran.err
        assert not path.exists()

    async def test_the_default_is_the_file_serve_uses(self) -> None:
        default = Path(default_state_url().removeprefix("sqlite:///"))
        ran = await state("list", "--all")
        assert ran.code == 1
        assert "(the default store: name the one the server uses with --state URL)" in ran.err
        assert not await trio.Path(default).exists()
        async with open_store(default_state_url(), create="folders") as store:
            await store.save(key("s1"), PLAN, None)
        ran = await state("list", "--all", "--json")
        assert (ran.code, sessions_in(ran)) == (0, ["s1"])

    async def test_state_may_come_before_or_after_the_command(self, sqlite_url: str) -> None:
        await save(sqlite_url, [key("s1")])
        for arguments in (("--state", sqlite_url, "list"), ("list", "--state", sqlite_url)):
            ran = await state(*arguments, "--all", "--json")
            assert (ran.code, sessions_in(ran)) == (0, ["s1"]), ran.err

    @pytest.mark.parametrize(
        ("url", "message"),
        [
            ("memory", "--state memory names a store that lives and dies inside one process"),
            ("redis://localhost", "--state: unknown state store URL 'redis://localhost'"),
        ],
    )
    async def test_a_store_that_makes_no_sense_here_is_a_usage_error(
        self, url: str, message: str
    ) -> None:
        ran = await state("list", "--state", url, "--all")
        assert (ran.code, ran.out) == (2, "")
        assert message in ran.err
