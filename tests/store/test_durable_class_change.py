"""A durable class that changed: refused naming each place, with the migration to write.

As a user meets it: version 1 of a module stores its state in a SQLite file; version 2,
its class changed but its schema not raised, runs in a new runtime on the same file.
Each call of the key fails saying where the stored data does not fit, what is stored
there and what the class declares, and gives the ``Durable(...)`` to write. That code,
written as given, reads the old state. What can be checked without a store is checked
when the module is declared.
"""

from __future__ import annotations

import collections
import datetime
import json
import re
import typing
from typing import Any

import attrs
import cattrs
import pytest

from actors import Durable, StateUnreadableError, ToolModule, open_runtime
from actors.store import open_store
from protocol import ActorKey, ToolContext

from .._calls import ModuleCalls
from .._stores import store_url_fixture  # noqa: F401  (a fixture)

NOTES = ModuleCalls("notes")
KEY = ActorKey("notes", ToolContext("s1"))
SQLITE = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


@attrs.define
class Plain:
    """Version 1: notes as strings, with an owner."""

    notes: list[str] = attrs.Factory(lambda: ["milk", "bread"])
    owner: str = "ann"


@attrs.define
class Note:
    text: str
    tags: list[str]


@attrs.define
class Tagged:
    """Notes as objects, the owner dropped: a changed type and a field gone."""

    notes: list[Note] = attrs.Factory(list)


@attrs.define
class Untagged:
    notes: list[Note] = attrs.Factory(lambda: [Note("milk", ["shop"])])


@attrs.define
class Entry:
    body: str
    tags: list[str]


@attrs.define
class Renamed:
    """A note's ``text`` is its ``body`` now."""

    notes: list[Entry] = attrs.Factory(list)


@attrs.define
class Bare:
    text: str


@attrs.define
class Untagged1:
    """Notes without tags (Note gained a field without a default since)."""

    notes: list[Bare] = attrs.Factory(lambda: [Bare("milk"), Bare("eggs")])


@attrs.frozen
class Card:
    text: str
    tags: tuple[str, ...]


@attrs.define
class Cards:
    cards: dict[str, Card] = attrs.Factory(dict)


@attrs.define
class Texts:
    cards: dict[str, str] = attrs.Factory(lambda: {"a": "milk"})


@attrs.define
class OneTag:
    tags: str = "milk"


@attrs.define
class ManyTags:
    """``tags`` became a list: cattrs alone would read the stored "milk" as its letters."""

    tags: list[str] = attrs.Factory(list)


def module(state: type, durable: Durable[Any]) -> ToolModule[Any]:
    """Module notes of `state`: `save` writes it, `show` reads it."""
    notes: ToolModule[Any] = ToolModule("notes", lambda _context: state(), durable=durable)

    @notes.tool
    def save(state: Any) -> str:
        """Change nothing, but be written."""
        return "saved"

    @notes.tool(read_only=True)
    def show(state: Any) -> str:
        """The state."""
        return repr(state)

    return notes


async def saved(url: str, old: type) -> None:
    """Version 1 stores its default state."""
    async with (
        open_store(url) as store,
        open_runtime([module(old, Durable(old))], store=store) as rt,
    ):
        await NOTES.text(rt, "save", "s1")


async def refusal(url: str, new: type, durable: Durable[Any] | None = None) -> str:
    """What a call of the key says on version 2; the stored blob is kept as it was."""
    async with open_store(url) as store:
        before = await store.load(KEY)
        served = module(new, durable or Durable(new))
        async with open_runtime([served], store=store) as runtime:
            with pytest.raises(StateUnreadableError) as refused:
                await NOTES.call(runtime, "show", "s1")
        assert await store.load(KEY) == before
    return str(refused.value)


async def shown(url: str, new: type, durable: Durable[Any]) -> str:
    async with open_store(url) as store, open_runtime([module(new, durable)], store=store) as rt:
        return await NOTES.text(rt, "show", "s1")


def advised(message: str, new: type) -> Durable[Any]:
    """The ``Durable(...)`` the message says to write, evaluated as written."""
    (code,) = re.findall(r"^    (Durable\(.*\))$", message, re.MULTILINE)
    declared: Durable[Any] = eval(code, {"Durable": Durable, new.__name__: new})
    return declared


# Version 1, version 2, what the refusal says, and what version 2 then reads.
CHANGES = {
    "a type changed, a field dropped": (
        Plain,
        Tagged,
        [
            "notes[0] (and 1 more like it) is stored as a string 'milk', declared Note",
            "the state stores fields Tagged does not declare: 'owner'",
        ],
        "Tagged(notes=[Note(text='milk', tags=[]), Note(text='bread', tags=[])])",
    ),
    "a field added without a default": (
        Untagged1,
        Untagged,
        [
            "notes[0].tags (and 1 more like it) is missing (notes[0] is stored as an object "
            "with keys 'text'), declared list[str]"
        ],
        "Untagged(notes=[Note(text='milk', tags=[]), Note(text='eggs', tags=[])])",
    ),
    "a text became a list": (
        OneTag,
        ManyTags,
        ["tags is stored as a string 'milk', declared list[str]"],
        "ManyTags(tags=['milk'])",
    ),
    "a dict's values changed type": (
        Texts,
        Cards,
        ["cards['a'] is stored as a string 'milk', declared Card"],
        "Cards(cards={'a': Card(text='milk', tags=())})",
    ),
}


@SQLITE
class TestAClassChangedWithoutItsSchema:
    @pytest.mark.parametrize("change", CHANGES.keys())
    async def test_the_refusal_names_the_places_and_its_step_reads_the_old_state(
        self, store_url: str, change: str
    ) -> None:
        old, new, places, read = CHANGES[change]
        await saved(store_url, old)
        message = await refusal(store_url, new)
        assert message.startswith(f"the stored state of {KEY} does not fit {new.__name__}: ")
        for place in places:
            assert place in message
        assert (
            f"If {new.__name__} changed on purpose, raise its schema and add a step from "
            "schema 1 that makes the stored data fit:\n    Durable("
        ) in message
        assert "unknown error" not in message
        assert await shown(store_url, new, advised(message, new)) == read

    async def test_the_step_is_written_out_in_full(self, store_url: str) -> None:
        """The issue's case: notes that were strings are objects now."""
        await saved(store_url, Plain)
        message = await refusal(store_url, Tagged)
        assert (
            "    Durable(Tagged, schema=2, migrations={1: lambda old: {**{k: v for k, v in "
            "old.items() if k != 'owner'}, 'notes': [{'text': note, 'tags': []} for note in "
            "old['notes']]}})\n"
        ) in message

    async def test_a_renamed_field_takes_the_old_ones_value(self, store_url: str) -> None:
        @attrs.define
        class Titled:
            notes: list[Note] = attrs.Factory(lambda: [Note("milk", ["shop"])])

        await saved(store_url, Titled)
        message = await refusal(store_url, Renamed)
        assert "notes[0].body is missing" in message
        assert "notes[0] stores fields Entry does not declare: 'text'" in message
        assert "'body': note['text']" in message
        read = await shown(store_url, Renamed, advised(message, Renamed))
        assert read == "Renamed(notes=[Entry(body='milk', tags=['shop'])])"

    async def test_a_state_in_parts_keeps_its_parts_in_the_step(self, store_url: str) -> None:
        await saved(store_url, Texts)
        message = await refusal(store_url, Cards, Durable(Cards, parts=("cards",)))
        assert "Durable(Cards, schema=2, parts=('cards',), migrations={1: " in message
        durable = advised(message, Cards)
        assert durable.parts == ("cards",)
        assert await shown(store_url, Cards, durable) == CHANGES["a dict's values changed type"][3]

    async def test_the_earlier_steps_are_kept_in_the_step(self, store_url: str) -> None:
        def tags_added(old: dict[str, Any]) -> dict[str, Any]:
            return old

        await saved(store_url, Untagged1)
        async with open_store(store_url) as store:
            stored = await store.load(KEY)
            assert stored is not None
            blob = json.loads(stored.blob)
            blob["schema"] = 2
            await store.save(KEY, json.dumps(blob).encode(), stored.version)
        durable = Durable(Untagged, schema=2, migrations={1: tags_added})
        message = await refusal(store_url, Untagged, durable)
        assert "add a step from schema 2 " in message
        assert "Durable(Untagged, schema=3, migrations={1: tags_added, 2: lambda old: " in message

    async def test_a_huge_hostile_blob_makes_a_short_message(self, store_url: str) -> None:
        state = {
            "notes": ["x" * 10_000] * 100 + [{"k" * 10_000: 1}],
            **{f"field {n} " * 100: n for n in range(1_000)},
        }
        async with open_store(store_url) as store:
            await store.save(KEY, json.dumps({"schema": 1, "state": state}).encode(), None)
        message = await refusal(store_url, Tagged)
        assert len(message) < 2_500
        assert "notes[0] (and 99 more like it) is stored as a string 'xxxx" in message
        assert "… of 10000 characters, declared Note" in message
        assert "notes[100].tags is missing" in message
        assert "k in {'notes'}" in message  # too many names to list: keep the declared ones


@SQLITE
async def test_a_migration_whose_result_does_not_fit_is_told_what_to_add(store_url: str) -> None:
    await saved(store_url, Untagged1)
    durable = Durable(Untagged, schema=2, migrations={1: lambda old: old})
    message = await refusal(store_url, Untagged, durable)
    assert (
        "It was migrated from schema 1 to 2, and the data the step from schema 1 returns does "
        "not fit; that step should also do this to the data it returns:\n"
        "    lambda old: {**old, 'notes': [{**note, 'tags': []} for note in old['notes']]}\n"
    ) in message


class TestMigrationsThatLeadNowhere:
    def test_a_step_from_the_schema_itself_says_to_raise_it(self) -> None:
        with pytest.raises(ValueError, match="leads nowhere") as refused:
            Durable(Tagged, schema=1, migrations={1: lambda old: old})
        message = str(refused.value)
        assert "a migration from schema n upgrades blobs of schema n to n + 1" in message
        assert "so with schema=1 there is nothing to upgrade to" in message
        assert message.endswith("to use this step, set schema=2")

    def test_the_newest_step_sets_the_schema_to_raise_to(self) -> None:
        with pytest.raises(ValueError, match=r"from schema 3, .*set schema=4$"):
            Durable(Tagged, schema=2, migrations={1: str, 3: str})

    @pytest.mark.parametrize(
        ("migrations", "problem"),
        [
            ({0: str}, "a step from schema 0, but schemas start at 1"),
            ({"1": str}, "keyed by the schema each upgrades from, a whole number, got '1'"),
            ({True: str}, "got True"),
        ],
    )
    def test_a_key_that_is_no_schema_is_named(
        self, migrations: dict[Any, Any], problem: str
    ) -> None:
        with pytest.raises(ValueError, match=re.escape(problem)):
            Durable(Tagged, schema=2, migrations=migrations)

    def test_a_step_that_is_no_function_is_named(self) -> None:
        with pytest.raises(TypeError, match=r"^migrations\[1\] is 'tagged', not a function"):
            Durable(Tagged, schema=2, migrations={1: "tagged"})  # type: ignore[dict-item]


@attrs.define
class Stamped:
    when: datetime.datetime = attrs.Factory(lambda: datetime.datetime(2026, 1, 1))


@attrs.define
class Labelled:
    labels: set[str] = attrs.Factory(lambda: {"a"})


@attrs.define
class Required:
    when: str


class TestWhatIsCheckedWhenDeclared:
    def test_a_class_the_converter_cannot_read_is_refused(self) -> None:
        with pytest.raises(TypeError, match=r"^Stamped cannot be read back from the store \("):
            Durable(Stamped)

    def test_a_default_state_that_is_not_json_is_refused(self) -> None:
        with pytest.raises(TypeError, match=r"^Labelled\(\) cannot be stored \(TypeError: "):
            Durable(Labelled)

    def test_a_class_with_hooks_for_it_is_accepted(self) -> None:
        durable = Durable(Labelled, converter=_with_set_hooks())
        assert durable.load(durable.dump(Labelled()), KEY) == Labelled()

    def test_a_class_without_a_default_instance_is_accepted(self) -> None:
        assert Durable(Required).state_class is Required


def _with_set_hooks() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_unstructure_hook_func(lambda kind: typing.get_origin(kind) is set, sorted)
    return converter


class TestADeclarationWithoutItsClass:
    def test_a_module_gives_it_its_state_class(self) -> None:
        def tagged(old: Any) -> Any:
            return old

        unbound = Durable(schema=2, migrations={1: tagged})
        bound = unbound.for_module("notes", Tagged)
        assert (bound.state_class, bound.schema, dict(bound.migrations)) == (Tagged, 2, {1: tagged})
        assert bound.load(bound.dump(Tagged()), KEY) == Tagged()

    def test_no_class_anywhere_is_refused_naming_the_module(self) -> None:
        with pytest.raises(TypeError, match=r"^module 'notes': Durable\(schema=2, \.\.\.\) stores"):
            Durable(schema=2, migrations={1: str}).for_module("notes", None)

    def test_used_unbound_it_says_it_names_no_class(self) -> None:
        with pytest.raises(TypeError, match=r"^Durable\(schema=1, \.\.\.\) names no state class"):
            Durable().dump(Tagged())

    def test_its_migrations_are_checked_at_once(self) -> None:
        with pytest.raises(ValueError, match="set schema=2"):
            Durable(migrations={1: str})

    def test_the_class_a_module_gives_it_is_checked(self) -> None:
        with pytest.raises(TypeError, match=r"^Labelled\(\) cannot be stored"):
            Durable(schema=2, migrations={1: str}).for_module("notes", Labelled)

    def test_a_bound_one_refuses_another_class(self) -> None:
        with pytest.raises(TypeError, match=r"its state is Renamed, but durable= stores Tagged"):
            Durable(Tagged).for_module("notes", Renamed)


@SQLITE
async def test_a_module_s_state_class_is_what_durable_stores(store_url: str) -> None:
    """``ToolModule("notes", Tagged, durable=Durable(schema=2, ...))``: no class named twice."""
    await saved(store_url, Plain)

    def tagged(old: dict[str, Any]) -> dict[str, Any]:
        return {"notes": [{"text": text, "tags": []} for text in old["notes"]]}

    notes = ToolModule("notes", Tagged, durable=Durable(schema=2, migrations={1: tagged}))

    @notes.tool(read_only=True)
    def show(state: Tagged) -> str:
        """The state."""
        return repr(state)

    assert notes.durable is not None
    assert notes.durable.state_class is Tagged
    async with open_store(store_url) as store, open_runtime([notes], store=store) as runtime:
        read = await NOTES.text(runtime, "show", "s1")
    assert read == "Tagged(notes=[Note(text='milk', tags=[]), Note(text='bread', tags=[])])"
    with pytest.raises(TypeError, match=r"^module 'notes': Durable\(schema=2, \.\.\.\) stores"):
        ToolModule(
            "notes", lambda _context: Tagged(), durable=Durable(schema=2, migrations={1: tagged})
        )


@attrs.define
class Text:
    text: str = ""


@attrs.define
class Flagged:
    """``flag`` added without a default, of a type whose placeholder is no JSON word."""

    text: str
    flag: typing.Literal[True]


@attrs.define
class Counts:
    """``ints`` and ``keys`` were texts: the step converts them, its loop names its own."""

    ints: list[int] = attrs.Factory(list)
    keys: dict[str, list[int]] = attrs.Factory(dict)


async def stored(url: str, state: dict[str, Any]) -> None:
    """Store `state` as the plain data of schema 1 of key `KEY`."""
    async with open_store(url) as store:
        await store.save(KEY, json.dumps({"schema": 1, "state": state}).encode(), None)


@SQLITE
class TestStoredNamesAndOddTypes:
    """What a stored blob names reaches the message quoted and the code as a literal, and
    the code written for any declared type runs."""

    @pytest.mark.parametrize(
        "name",
        ['a"\n    Durable(Text, schema=2, migrations={1: evil})\n#', "\x1b[31mred", "😀"],
        ids=["forged-line", "terminal-escape", "astral"],
    )
    async def test_a_stored_name_is_quoted_and_its_step_removes_it(
        self, store_url: str, name: str
    ) -> None:
        await stored(store_url, {"text": "milk", name: 1})
        message = await refusal(store_url, Text)
        assert f"does not declare: {repr(name)[:20]}" in message  # quoted, maybe clipped
        assert "\x1b" not in message
        assert len(re.findall(r"^    Durable\(", message, re.MULTILINE)) == 1
        assert await shown(store_url, Text, advised(message, Text)) == "Text(text='milk')"

    async def test_a_literal_field_gets_a_python_placeholder(self, store_url: str) -> None:
        await stored(store_url, {"text": "milk"})
        message = await refusal(store_url, Flagged)
        assert "'flag': True" in message
        read = await shown(store_url, Flagged, advised(message, Flagged))
        assert read == "Flagged(text='milk', flag=True)"

    async def test_the_steps_loop_names_shadow_neither_builtins_nor_its_own(
        self, store_url: str
    ) -> None:
        await stored(store_url, {"ints": "7", "keys": {"a": 1, "b": 2}})
        message = await refusal(store_url, Counts)
        read = await shown(store_url, Counts, advised(message, Counts))
        assert read == "Counts(ints=[7], keys={'a': [1], 'b': [2]})"


def test_collections_read_back_as_their_declared_types() -> None:
    """The array-only check keeps cattrs' own reading: a deque, a Sequence's tuple."""

    @attrs.frozen
    class Shelf:
        queue: collections.deque[int] = attrs.Factory(collections.deque)
        names: typing.Sequence[str] = ()
        pair: tuple[int, str] = (0, "")

    durable = Durable(Shelf)
    shelf = Shelf(collections.deque([1]), ("a",), (2, "b"))
    back = durable.load(durable.dump(shelf), KEY)
    assert back == shelf
    assert (type(back.queue), type(back.names)) == (collections.deque, tuple)
