"""Part-wise durable state: a write stores the parts a call changed, behind the same fence.

Three layers: the stores' contract for parts (every backend, PostgreSQL on a
real server), the declaration's checks (a part must be immutable, since a
changed part is told by identity), and the runtime's writes (only what
changed, and every durability rule of a whole state: write before reply, a
refused write forgotten, restarts, an older version's whole blob upgraded).
"""

from __future__ import annotations

import enum
import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import cattrs
import pytest
import trio

from actors import Durable, StateUnreadableError, ToolModule, open_runtime
from actors.modules import content_store, planning
from actors.store import MemoryStore, PartChanges, VersionConflict, open_store
from protocol import ActorKey, Scope, ToolContext

from .._calls import call_as
from .._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401  (fixtures)
from .._stores import store_url_fixture  # noqa: F401  (a fixture)
from .test_durable import FaultyStore
from .test_store import key, opened

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from actors import CallResult, Runtime
    from actors.store import StateStore


def changes(*written: tuple[str, bytes], removed: tuple[str, ...] = ()) -> PartChanges:
    return PartChanges(written, removed)


# ---- the stores' contract ------------------------------------------------------------


class TestStoreParts:
    async def test_parts_load_as_written_in_the_order_first_written(self, store_url: str) -> None:
        """A replaced part keeps its place, a removed one goes, a new one comes last."""
        async with opened(store_url) as store:
            first = changes(("a", b"1"), ("b", b"2"), ("c", b"3"))
            version = await store.save(key(), b"h1", None, changes=first)
            second = changes(("b", b"2'"), ("d", b"4"), removed=("a",))
            assert await store.save(key(), b"h2", version, changes=second) == version + 1
            stored = await store.load(key(), parts=True)
            assert stored is not None
            assert (stored.version, stored.blob) == (version + 1, b"h2")
            assert list((stored.parts or {}).items()) == [("b", b"2'"), ("c", b"3"), ("d", b"4")]
            whole = await store.load(key())
            assert whole is not None
            assert (whole.blob, whole.parts) == (b"h2", None)

    async def test_a_moved_part_goes_after_every_other_and_a_new_key_keeps_no_old_part(
        self, store_url: str
    ) -> None:
        async with opened(store_url) as store:
            first = changes(("a", b"1"), ("b", b"2"), ("c", b"3"))
            version = await store.save(key(), b"h", None, changes=first)
            moved = PartChanges((("a", b"1"), ("b", b"2'")), moved=("a", "b"))
            await store.save(key(), b"h", version, changes=moved)
            stored = await store.load(key(), parts=True)
            assert stored is not None
            assert list((stored.parts or {}).items()) == [("c", b"3"), ("a", b"1"), ("b", b"2'")]

    async def test_a_stale_writer_writes_none_of_its_parts(self, store_url: str) -> None:
        """The fence covers the parts: a refused save changes no part, nor adds one."""
        async with opened(store_url) as store:
            version = await store.save(key(), b"h", None, changes=changes(("a", b"1")))
            never_held = version + 6  # a version the key has not had
            for expected in (None, never_held):
                stale = changes(("a", b"stale"), ("z", b"stale"))
                with pytest.raises(VersionConflict):
                    await store.save(key(), b"stale", expected, changes=stale)
            with pytest.raises(VersionConflict):
                await store.save(key(), b"stale", never_held, changes=changes(removed=("a",)))
            stored = await store.load(key(), parts=True)
            assert stored is not None
            assert (stored.version, stored.blob, stored.parts) == (version, b"h", {"a": b"1"})

    async def test_in_one_batch_a_stale_writer_fails_alone_and_the_others_keep_their_parts(
        self, store_url: str
    ) -> None:
        """Saves committed together: one fenced off, the rest land whole, parts and all."""
        async with opened(store_url) as store:
            sessions = [f"s{index}" for index in range(12)]
            firsts = {
                session: await store.save(key(session), b"h", None, changes=changes(("p", b"0")))
                for session in sessions
            }
            outcomes: dict[str, int | str] = {}

            async def save(session: str) -> None:
                first = firsts[session]
                expected = first + 98 if session == "s5" else first  # s5 is a stale writer
                try:
                    outcomes[session] = await store.save(
                        key(session), b"h2", expected, changes=changes(("p", session.encode()))
                    )
                except VersionConflict:
                    outcomes[session] = "conflict"

            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(save, session)
            for session in sessions:
                stored = await store.load(key(session), parts=True)
                assert stored is not None
                first = firsts[session]
                if session == "s5":
                    assert outcomes[session] == "conflict"
                    assert (stored.version, stored.parts) == (first, {"p": b"0"})
                else:
                    assert outcomes[session] == first + 1
                    assert (stored.version, stored.parts) == (first + 1, {"p": session.encode()})

    @pytest.mark.parametrize("how", ["delete_session", "delete", "sweep"])
    async def test_whatever_deletes_a_key_deletes_its_parts(self, store_url: str, how: str) -> None:
        """A key written again after it was deleted starts with no part of its past."""
        async with opened(store_url) as store:
            old = await store.save(key(), b"h", None, changes=changes(("a", b"1"), ("b", b"2")))
            await store.save(key("other"), b"h", None, changes=changes(("a", b"kept")))
            if how == "delete_session":
                assert await store.delete_session("s1") == 1
            elif how == "delete":
                assert await store.delete(key())
            else:  # both keys are older than this retention once the sleep is over
                await trio.sleep(0.01)
                assert await store.sweep(0.001) == 2
            new = await store.save(key(), b"new", None)  # a new life, not the old one's version
            assert new != old
            again = await store.load(key(), parts=True)
            other = await store.load(key("other"), parts=True)
            assert again is not None
            assert (again.version, again.blob, again.parts) == (new, b"new", {})
            if how != "sweep":
                assert other is not None
                assert other.parts == {"a": b"kept"}

    async def test_the_listing_counts_the_parts_in_a_keys_size(self, store_url: str) -> None:
        async with opened(store_url) as store:
            await store.save(key(), b"head", None, changes=changes(("a", b"12345"), ("b", b"67")))
            (entry,) = await store.entries(session="s1")
            assert entry.size == len(b"head") + 5 + 2

    def test_a_part_is_written_once_or_removed_in_a_save_never_both(self) -> None:
        with pytest.raises(ValueError, match="written once or removed"):
            changes(("a", b"1"), ("a", b"2"))
        with pytest.raises(ValueError, match="written once or removed"):
            changes(("a", b"1"), removed=("a",))


# ---- a part-wise module for the runtime tests ------------------------------------------


@attrs.frozen
class Note:
    text: str
    tags: tuple[str, ...] = ()


@attrs.define
class Notebook:
    title: str = "untitled"
    notes: dict[str, Note] = attrs.field(factory=dict)


def notebook_module(*, partwise: bool = True) -> ToolModule[Notebook]:
    """Notes kept per session; `partwise=False` is the same state stored whole."""
    durable = Durable(Notebook, parts=("notes",) if partwise else ())
    module: ToolModule[Notebook] = ToolModule(
        "notebook", lambda _context: Notebook(), scope=Scope.SESSION, durable=durable
    )

    @module.tool()
    def put(state: Notebook, note_id: str, text: str) -> str:
        """Make or replace a note."""
        state.notes[note_id] = Note(text)
        return note_id

    @module.tool()
    def drop(state: Notebook, note_id: str) -> str:
        """Remove a note."""
        del state.notes[note_id]
        return note_id

    @module.tool()
    def retitle(state: Notebook, title: str) -> str:
        """Change the title (the header)."""
        state.title = title
        return title

    @module.tool()
    def touch_nothing(state: Notebook) -> str:
        """A call that may change the state, and does not."""
        return state.title

    @module.tool(read_only=True)
    def show(state: Notebook) -> str:
        """The title and the notes, in order."""
        return json.dumps([state.title, [[k, n.text] for k, n in state.notes.items()]])

    return module


@attrs.define(eq=False)
class RecordingStore(MemoryStore):
    """A memory store that records what each save wrote: blob and part changes."""

    saves: list[tuple[bytes, PartChanges | None]] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        super().__init__()

    async def save(
        self,
        key: ActorKey,
        blob: bytes,
        expected: int | None,
        *,
        changes: PartChanges | None = None,
    ) -> int:
        version = await super().save(key, blob, expected, changes=changes)
        self.saves.append((blob, changes))
        return version


@asynccontextmanager
async def serving(store: StateStore, *modules: ToolModule[Any]) -> AsyncIterator[Runtime]:
    async with open_runtime(list(modules) or [notebook_module()], store=store) as runtime:
        yield runtime


async def ok(runtime: Runtime, tool: str, session: str = "s1", **arguments: Any) -> CallResult:
    result = await call_as(runtime, f"notebook__{tool}", session, **arguments)
    assert not result.is_error, result.first_text
    return result


async def shown(runtime: Runtime, session: str = "s1") -> Any:
    return json.loads((await ok(runtime, "show", session)).first_text)


def written(change: PartChanges | None) -> tuple[list[str], list[str]]:
    assert change is not None
    return [name for name, _blob in change.written], list(change.removed)


class TestWrites:
    async def test_a_call_writes_the_parts_it_changed_and_nothing_else(self) -> None:
        store = RecordingStore()
        async with serving(store) as runtime:
            for note_id in ("n1", "n2", "n3"):
                await ok(runtime, "put", note_id=note_id, text=f"text {note_id}")
            await ok(runtime, "put", note_id="n2", text="edited")
            await ok(runtime, "drop", note_id="n1")
            await ok(runtime, "retitle", title="mine")
            await ok(runtime, "touch_nothing")
            await ok(runtime, "show")
            assert [written(change) for _blob, change in store.saves] == [
                (["notes:n1"], []),
                (["notes:n2"], []),
                (["notes:n3"], []),
                (["notes:n2"], []),
                ([], ["notes:n1"]),
                ([], []),  # the header alone changed
            ]
            headers = [json.loads(blob) for blob, _change in store.saves]
            assert headers[-1] == {"schema": 1, "header": {"title": "mine"}}
            assert await shown(runtime) == ["mine", [["n2", "edited"], ["n3", "text n3"]]]

    async def test_what_was_acknowledged_is_there_after_a_restart_in_its_order(
        self, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        async with open_store(url) as store, serving(store) as runtime:
            for note_id in ("b", "a", "c"):
                await ok(runtime, "put", note_id=note_id, text=note_id * 3)
            await ok(runtime, "put", note_id="b", text="B")
            await ok(runtime, "drop", note_id="a")
            await ok(runtime, "put", note_id="a", text="again")
            before = await shown(runtime)
        async with open_store(url) as store, serving(store) as runtime:
            assert (
                await shown(runtime)
                == before
                == ["untitled", [["b", "B"], ["c", "ccc"], ["a", "again"]]]
            )

    async def test_a_refused_write_is_forgotten_and_the_next_one_writes_what_the_store_lacks(
        self,
    ) -> None:
        """The failed call's part is not acknowledged; the state reloads from the store, so the
        next call writes its own part and the store holds exactly the acknowledged notes."""
        store = FaultyStore()
        async with serving(store) as runtime:
            await ok(runtime, "put", note_id="n1", text="kept")
            store.fault = "refuse"
            failed = await call_as(runtime, "notebook__put", "s1", note_id="n2", text="lost")
            assert failed.is_error
            store.fault = None
            await ok(runtime, "put", note_id="n3", text="kept too")
            assert await shown(runtime) == ["untitled", [["n1", "kept"], ["n3", "kept too"]]]
        stored = await store.inner.load(ActorKey("notebook", ToolContext("s1")), parts=True)
        assert stored is not None
        assert sorted(stored.parts or {}) == ["notes:n1", "notes:n3"]

    async def test_a_write_reported_failed_that_landed_is_reloaded_with_its_parts(self) -> None:
        store = FaultyStore()
        async with serving(store) as runtime:
            await ok(runtime, "put", note_id="n1", text="a")
            store.fault = "lose_reply"
            assert (await call_as(runtime, "notebook__put", "s1", note_id="n2", text="b")).is_error
            store.fault = None
            await ok(runtime, "put", note_id="n3", text="c")
            assert await shown(runtime) == ["untitled", [["n1", "a"], ["n2", "b"], ["n3", "c"]]]

    async def test_two_runtimes_on_one_store_lose_no_acknowledged_note(
        self, tmp_path: Path
    ) -> None:
        """Both write one key part-wise at once: the fence makes the loser reload and redo."""
        url = f"sqlite:///{tmp_path / 'state.db'}"
        acknowledged: list[str] = []

        async def put(runtime: Runtime, note_id: str) -> None:
            result = await call_as(runtime, "notebook__put", "s1", note_id=note_id, text=note_id)
            if not result.is_error:
                acknowledged.append(note_id)

        async with open_store(url) as store:
            async with serving(store) as first, serving(store) as second:
                async with trio.open_nursery() as nursery:
                    for index in range(15):
                        for name, runtime in (("first", first), ("second", second)):
                            nursery.start_soon(put, runtime, f"{name}{index}")
                conflicts = first.statistics().write_conflicts + second.statistics().write_conflicts
            async with serving(store) as third:
                kept = {note_id for note_id, _text in (await shown(third))[1]}
        assert set(acknowledged) <= kept
        assert len(acknowledged) >= 15
        assert conflicts > 0, "the two runtimes never met at the fence"


class TestStoredWholeBefore:
    async def test_a_state_stored_whole_is_read_and_its_first_change_stores_it_in_parts(
        self,
    ) -> None:
        store = RecordingStore()
        async with serving(store, notebook_module(partwise=False)) as runtime:
            await ok(runtime, "put", note_id="old", text="from before")
        async with serving(store) as runtime:
            assert await shown(runtime) == ["untitled", [["old", "from before"]]]
            await ok(runtime, "put", note_id="new", text="now")
        _blob, change = store.saves[-1]
        assert written(change) == (["notes:old", "notes:new"], [])
        async with serving(store) as runtime:
            assert await shown(runtime) == ["untitled", [["old", "from before"], ["new", "now"]]]

    async def test_a_version_that_stores_whole_refuses_a_state_stored_in_parts(self) -> None:
        """Never read as an empty state (and then written over): an error naming why."""
        store = MemoryStore()
        async with serving(store) as runtime:
            await ok(runtime, "put", note_id="n1", text="kept")
        async with serving(store, notebook_module(partwise=False)) as runtime:
            with pytest.raises(StateUnreadableError, match="is stored in parts, which notebook"):
                await call_as(runtime, "notebook__show", "s1")
        async with serving(store) as runtime:
            assert await shown(runtime) == ["untitled", [["n1", "kept"]]]


class TestBuiltins:
    async def test_an_add_to_a_large_content_store_writes_about_the_added_item(self) -> None:
        """The cost follows the change: 1 KiB into a 256 KiB store writes ~1 KiB."""
        store = RecordingStore()
        async with serving(store, content_store) as runtime:
            for index in range(8):
                text = f"document {index} " + "word " * 6_500  # ~32 KiB each
                await call_as(
                    runtime,
                    "content_store__add_content",
                    "s1",
                    filename=f"{index}.md",
                    content=text,
                )
            store.saves.clear()
            result = await call_as(
                runtime, "content_store__add_content", "s1", filename="small.md", content="x " * 512
            )
            assert not result.is_error, result.first_text
        ((blob, change),) = store.saves
        assert change is not None
        assert [name for name, _part in change.written] == ["items:c9"]
        assert len(blob) + change.size < 2 * 1024

    async def test_marking_a_todo_done_writes_that_todo(self) -> None:
        store = RecordingStore()
        async with serving(store, planning) as runtime:
            await call_as(runtime, "planning__create_goal", "s1", goal="ship")
            await call_as(runtime, "planning__add_todo", "s1", name="write", goal_id="g1")
            await call_as(runtime, "planning__add_todo", "s1", name="test", goal_id="g1")
            store.saves.clear()
            result = await call_as(runtime, "planning__mark_todo", "s1", todo_id="t2")
            assert not result.is_error, result.first_text
        ((_blob, change),) = store.saves
        assert written(change) == (["todos:t2"], [])


# ---- the declaration ------------------------------------------------------------------


@attrs.define
class MutableNote:
    text: str


@attrs.frozen
class ListNote:
    lines: list[str]


class Colour(enum.Enum):
    RED = "red"


@attrs.frozen
class Fine:
    text: str
    tags: frozenset[str]
    colour: Colour | None
    inner: Note


@attrs.frozen
class Tree:
    """A recursive part type: the check ends."""

    label: str
    children: tuple[Tree, ...] = ()


@attrs.frozen
class Dangling:
    other: NoSuchType  # type: ignore[name-defined]  # noqa: F821


def _state(part_type: Any) -> type:
    """A state class with `notes`, a dict of `part_type`, and `other`, a list."""
    fields = {
        "notes": attrs.field(type=dict[str, part_type], factory=dict),
        "other": attrs.field(type=list[str], factory=list),
    }
    return attrs.make_class("State", fields)


class TestDeclaration:
    @pytest.mark.parametrize(
        ("part_type", "problem"),
        [
            (MutableNote, "MutableNote is not a frozen attrs class"),
            (ListNote, r"ListNote.lines: list\[str\] is not immutable"),
            (tuple[str, list[int]], r"list\[int\] is not immutable"),
            (bytearray, "bytearray"),
        ],
    )
    def test_a_part_that_could_change_in_place_is_refused(
        self, part_type: Any, problem: str
    ) -> None:
        with pytest.raises(TypeError, match=f"could change in place \\({problem}"):
            Durable(_state(part_type), parts=("notes",))

    def test_immutable_parts_are_accepted(self) -> None:
        for part_type in (Fine, str, tuple[int, ...], Note | None, Tree):
            assert Durable(_state(part_type), parts=("notes",)).partwise

    def test_a_part_type_whose_annotations_name_nothing_is_a_type_error(self) -> None:
        with pytest.raises(TypeError, match="cannot be resolved"):
            Durable(_state(Dangling), parts=("notes",))

    @pytest.mark.parametrize(
        ("parts", "problem"),
        [
            (("missing",), "not a field"),
            (("other",), r"a parts field is a dict\[str, P\]"),
            ("notes", "a tuple of field names"),
            (("notes", "notes"), "names a field twice"),
        ],
    )
    def test_parts_must_name_dict_fields(self, parts: Any, problem: str) -> None:
        with pytest.raises(TypeError, match=problem):
            Durable(_state(Note), parts=parts)

    def test_a_converter_that_does_not_keep_the_parts_field_as_a_dict_is_a_clear_error(
        self,
    ) -> None:
        converter = cattrs.Converter()
        state_type = _state(Note)
        converter.register_unstructure_hook(state_type, lambda state: [state.other])
        durable = Durable(state_type, parts=("notes",), converter=converter)
        with pytest.raises(TypeError, match="without the fields notes as top-level dicts"):
            durable.dump_header(state_type())

    async def test_an_unstorable_part_fails_the_call_and_changes_nothing(self) -> None:
        store = MemoryStore()
        async with serving(store) as runtime:
            await ok(runtime, "put", note_id="n1", text="kept")
            failed = await call_as(runtime, "notebook__put", "s1", note_id="n2", text="bad \ud800")
            assert failed.is_error
            assert "cannot be stored" in failed.first_text
            assert await shown(runtime) == ["untitled", [["n1", "kept"]]]
