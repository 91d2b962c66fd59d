"""State that changes shape: a durable module reads the blobs its older versions stored.

Two versions of one module, as an operator deploys them one after the other
on one store: version 1 stores notes as strings; version 2 keeps a list of
tags with each note and reads version 1's blobs through a migration. Version
3 renames a field, with a second migration. What cannot be read is kept as it
is and named, never dropped.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from actors import Durable, StateUnreadableError, ToolModule, open_runtime
from actors.store import MemoryStore
from protocol import ActorKey, ToolContext

from .._calls import ModuleCalls

KEY = ActorKey("notes", ToolContext("s1"))
NOTES = ModuleCalls("notes")


@attrs.define
class NotesV1:
    notes: list[str] = attrs.Factory(list)


@attrs.define
class Note:
    text: str
    tags: list[str] = attrs.Factory(list)


@attrs.define
class NotesV2:
    notes: list[Note] = attrs.Factory(list)


@attrs.define
class Entry:
    body: str
    tags: list[str] = attrs.Factory(list)


@attrs.define
class NotesV3:
    notes: list[Entry] = attrs.Factory(list)


def tagged(old: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 → 2: every note becomes an object with no tags."""
    return {"notes": [{"text": text, "tags": []} for text in old["notes"]]}


def renamed(old: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 → 3: a note's ``text`` is its ``body`` now."""
    return {"notes": [{"body": note["text"], "tags": note["tags"]} for note in old["notes"]]}


def version_1() -> ToolModule[NotesV1]:
    module: ToolModule[NotesV1] = ToolModule(
        "notes", lambda _c: NotesV1(), durable=Durable(NotesV1)
    )

    @module.tool
    def add(state: NotesV1, text: str) -> str:
        """Add a note."""
        state.notes.append(text)
        return f"{len(state.notes)} notes"

    return module


def version_2(**durable: Any) -> ToolModule[NotesV2]:
    declared = Durable(NotesV2, schema=2, migrations={1: tagged}, **durable)
    module: ToolModule[NotesV2] = ToolModule("notes", lambda _c: NotesV2(), durable=declared)

    @module.tool(read_only=True)
    def read(state: NotesV2) -> str:
        """Every note with its tags."""
        return "; ".join(f"{note.text} {note.tags}" for note in state.notes)

    @module.tool
    def tag(state: NotesV2, index: int, tag: str) -> str:
        """Tag one note."""
        state.notes[index].tags.append(tag)
        return "tagged"

    return module


def version_3(migrations: dict[int, Any]) -> ToolModule[NotesV3]:
    declared = Durable(NotesV3, schema=3, migrations=migrations)
    module: ToolModule[NotesV3] = ToolModule("notes", lambda _c: NotesV3(), durable=declared)

    @module.tool(read_only=True)
    def read(state: NotesV3) -> str:
        """Every note's body."""
        return "; ".join(note.body for note in state.notes)

    return module


async def call(module: ToolModule[Any], store: MemoryStore, tool: str, **arguments: Any) -> str:
    """One call of `tool` on a runtime serving `module` over `store`."""
    async with open_runtime([module], store=store) as runtime:
        return await NOTES.text(runtime, tool, "s1", **arguments)


async def stored(store: MemoryStore) -> dict[str, Any]:
    found = await store.load(KEY)
    assert found is not None
    envelope: dict[str, Any] = json.loads(found.blob)
    return envelope


class TestAcrossVersions:
    async def test_version_2_reads_what_version_1_stored(self) -> None:
        """Read through the migration; a read-only call leaves the old blob as it was."""
        store = MemoryStore()
        await call(version_1(), store, "add", text="milk")
        await call(version_1(), store, "add", text="bread")
        assert await call(version_2(), store, "read") == "milk []; bread []"
        assert (await stored(store))["schema"] == 1

    async def test_the_first_changing_call_writes_the_new_schema(self) -> None:
        store = MemoryStore()
        await call(version_1(), store, "add", text="milk")
        await call(version_2(), store, "tag", index=0, tag="shop")
        assert await stored(store) == {
            "schema": 2,
            "state": {"notes": [{"text": "milk", "tags": ["shop"]}]},
        }
        assert await call(version_2(), store, "read") == "milk ['shop']"

    async def test_migrations_chain_from_any_older_schema(self) -> None:
        """A schema-1 blob goes through 1 → 2 → 3; a schema-2 one through 2 → 3 only."""
        old, newer = MemoryStore(), MemoryStore()
        await call(version_1(), old, "add", text="milk")
        await call(version_1(), newer, "add", text="eggs")
        await call(version_2(), newer, "tag", index=0, tag="shop")
        latest = version_3({1: tagged, 2: renamed})
        assert await call(latest, old, "read") == "milk"
        assert await call(latest, newer, "read") == "eggs"


class TestWhatCannotBeRead:
    async def _refused(self, module: ToolModule[Any], store: MemoryStore) -> str:
        before = await store.load(KEY)
        async with open_runtime([module], store=store) as runtime:
            for _ in range(2):  # the key keeps failing, the same way
                with pytest.raises(StateUnreadableError) as refused:
                    await runtime.call_tool("notes__read", {"__sessionId": "s1"})
            other = await runtime.call_tool("notes__read", {"__sessionId": "s2"})
        assert not other.is_error  # other keys are served
        assert await store.load(KEY) == before  # kept as it is
        return str(refused.value)

    async def test_a_schema_without_a_migration_is_named(self) -> None:
        store = MemoryStore()
        await call(version_1(), store, "add", text="milk")
        message = await self._refused(version_3({2: renamed}), store)
        assert message.startswith(
            "the stored state of notes(session='s1') has schema 1, but notes reads schema 3 "
            "and has no migration from schema 1. It is kept as it is, and the calls of "
            "notes(session='s1') fail until that changes: run a version of the module that "
            "reads it, give the module a migration (Durable(migrations=...))"
        )

    async def test_a_blob_of_a_newer_version_is_refused_by_an_older_one(self) -> None:
        """Version 2 rolled back after it wrote schema 2: version 1 does not misread it."""
        store = MemoryStore()
        await call(version_1(), store, "add", text="milk")
        await call(version_2(), store, "tag", index=0, tag="shop")
        async with open_runtime([version_1()], store=store) as runtime:
            with pytest.raises(
                StateUnreadableError, match=r"has schema 2, newer than the schema 1"
            ):
                await runtime.call_tool("notes__add", {"text": "x", "__sessionId": "s1"})

    async def test_a_migration_that_raises_is_named_with_its_step(self) -> None:
        def broken(old: dict[str, Any]) -> dict[str, Any]:
            raise KeyError("title")

        store = MemoryStore()
        await call(version_1(), store, "add", text="milk")
        message = await self._refused(version_3({1: broken, 2: renamed}), store)
        assert "could not be migrated from schema 1 to 2: KeyError: 'title'" in message

    async def test_a_migration_whose_result_does_not_fit_is_named_with_the_field(self) -> None:
        store = MemoryStore()
        await call(version_1(), store, "add", text="milk")
        message = await self._refused(version_3({1: tagged, 2: lambda old: old}), store)
        assert "does not fit NotesV3" in message
        assert "notes[0].body is missing" in message


class TestDeclaration:
    @pytest.mark.parametrize(
        ("schema", "migrations", "problem"),
        [
            (2, {2: tagged}, r"^migrations has a step from schema 2, which leads nowhere"),
            (2, {0: tagged}, r"^migrations has a step from schema 0, but schemas start at 1"),
            (1, {1: tagged}, r"^migrations has a step from schema 1, which leads nowhere"),
            (0, {}, r"^schema must be a whole number of at least 1, got 0"),
        ],
    )
    def test_migrations_that_cannot_apply_are_refused(
        self, schema: int, migrations: dict[int, Any], problem: str
    ) -> None:
        with pytest.raises(ValueError, match=problem):
            Durable(NotesV2, schema=schema, migrations=migrations)
