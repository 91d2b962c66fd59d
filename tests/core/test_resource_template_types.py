"""Typed URI template variables (issue #37): ``users://{user_id}/profile`` with ``user_id: int``.

A template's variable is text in the URI; its handler's parameter may be an
int, a float, a bool, a Literal or an Enum of those, or any type written as a
string, bounded with ``Annotated`` like a tool's argument. Declarations, the
matching rule (`actors._uri_template`), reads in process (`open_runtime`) and
over MCP (the official SDK's client, `actors.testing.connect`).

Proof that the tests can fail: run on the code before typed variables, every
declaration of an int, float, bool or IntEnum variable is refused, so each test
that declares one fails, and the refusals' message differs.
"""

from __future__ import annotations

import datetime
import enum
import json
import re
import time
import urllib.parse
import uuid
from typing import Annotated, Any, Literal

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from actors import ArgumentsError, Completions, ToolModule, open_runtime
from actors._uri_template import UriTemplate, text_of
from actors.testing import connect
from tests._mcp_helpers import resource_text

# ---- types and modules of the tests ---------------------------------------------------
# At module level: handlers' annotations are resolved in their module's globals.


class Tier(enum.IntEnum):
    """An Enum read by its (integer) value."""

    FREE = 0
    PRO = 1


class Mood(enum.Enum):
    """An Enum read by its (string) value."""

    CALM = "calm"
    ANGRY = "angry"


class Profile(BaseModel):
    """A pydantic model: no segment of a URI writes one."""

    name: str


Bounded = Annotated[int, Field(ge=1, le=1000)]
Slug = Annotated[str, Field(pattern=r"^[a-z]+$")]
SESSION = {"sessionId": "s"}  # what every in-process read names: no default-session log


def users_module() -> ToolModule[None]:
    """Profiles by id (a bounded int) and, declared after, by name (any text)."""
    module: ToolModule[None] = ToolModule("users", lambda _context: None)

    @module.resource("users://{user_id}/profile")
    def by_id(state: None, user_id: Bounded) -> dict[str, Any]:
        """A profile by id."""
        return {"by": "id", "value": user_id, "type": type(user_id).__name__}

    @module.resource("users://{name}/profile")
    def by_name(state: None, name: str) -> dict[str, Any]:
        """A profile by name."""
        return {"by": "name", "value": name, "type": type(name).__name__}

    @module.resource("users://{user_id}/posts")
    def posts(state: None, user_id: int) -> str:
        """A user's posts (no other template reads these URIs)."""
        return f"posts of {user_id}"

    return module


def typed_module() -> ToolModule[None]:
    """One template with a variable of each scalar type, and typed choices to complete."""
    module: ToolModule[None] = ToolModule("typed", lambda _context: None)

    @module.resource("typed://{tier}/{ratio}/{on}/{mood}/{level}")
    def every(
        state: None, tier: Tier, ratio: float, on: bool, mood: Mood, level: Literal[1, 2, 3]
    ) -> str:
        """Show what the handler received."""
        return repr((tier, ratio, on, mood, level))

    @module.resource("typed://day/{day}/{id}/{slug}")
    def day(state: None, day: datetime.date, id: uuid.UUID, slug: Slug) -> str:
        """Types written as strings, beside the typed ones."""
        return repr((day, id, slug))

    return module


EVERY = "typed://{tier}/{ratio}/{on}/{mood}/{level}"


def _declare(annotation: Any) -> ToolModule[None]:
    module: ToolModule[None] = ToolModule("bare", lambda _context: None)

    def handler(state: None, value: int) -> str:
        """Show the value."""
        return repr(value)

    handler.__annotations__["value"] = annotation
    module.resource("bare://{value}")(handler)
    return module


# ---- declarations ---------------------------------------------------------------------


class TestDeclarations:
    @pytest.mark.parametrize(
        ("annotation", "reads_as"),
        [
            (int, {"integer"}),
            (float, {"number"}),
            (bool, {"boolean"}),
            (Tier, {"integer"}),
            (Literal[1, 2], {"integer"}),
            (Literal[1, "a", True], {"integer", "string", "boolean"}),
            (Bounded, {"integer"}),
            (int | None, {"integer"}),
            (Mood, {"string"}),
            (uuid.UUID, {"string"}),
            (datetime.datetime, {"string"}),
            (Slug, {"string"}),
        ],
    )
    def test_a_variable_of_a_type_a_segment_writes_is_declared_read_as_its_json_types(
        self, annotation: Any, reads_as: set[str]
    ) -> None:
        """Scalars, their Literals and Enums, and bounded ones are URI variables."""
        (resource,) = _declare(annotation).resources.values()
        assert resource.template.types == (frozenset(reads_as),)

    @pytest.mark.parametrize(
        "annotation",
        [list[int], tuple[str, ...], dict[str, int], Profile, Any, Literal[None, "a"]],
    )
    def test_a_variable_no_segment_can_write_is_refused_naming_it_and_the_types(
        self, annotation: Any
    ) -> None:
        """A list, a mapping, a model (a class), Any or a null: refused, nothing declared."""
        module: ToolModule[None] = ToolModule("bare", lambda _context: None)

        def handler(state: None, value: int) -> str:
            """Show the value."""
            return repr(value)

        handler.__annotations__["value"] = annotation
        with pytest.raises(
            TypeError,
            match=r"^resource 'bare://\{value\}' of module 'bare': parameter 'value' is a URI "
            r"variable, read from the text of one segment; annotate it str, int, float, bool, "
            r"a Literal or an Enum of those, UUID, date, datetime, Decimal or Path",
        ):
            module.resource("bare://{value}")(handler)
        assert not module.resources

    def test_prompt_arguments_are_still_strings_only(self) -> None:
        """MCP's prompt arguments are strings: an int one is refused as before."""
        module: ToolModule[None] = ToolModule("bare", lambda _context: None)

        def count(state: None, many: int) -> str:
            """Count."""
            return str(many)

        with pytest.raises(TypeError, match=r"parameter 'many' is a prompt argument, which is"):
            module.prompt(count)


# ---- the matching rule ----------------------------------------------------------------


def _template(*types: str) -> UriTemplate:
    return UriTemplate.parse("x://{v}").typed({"v": frozenset(types)})


class TestReadingText:
    @pytest.mark.parametrize(
        ("types", "text", "value"),
        [
            (("integer",), "0", 0),
            (("integer",), "-42", -42),
            (("integer",), "%31", 1),  # percent-decoded first
            (("number",), "2.5", 2.5),
            (("number",), "-1e3", -1000.0),
            (("number",), "7", 7.0),
            (("boolean",), "true", True),
            (("boolean",), "false", False),
            (("integer", "string"), "1", 1),  # Literal[1, "a"]: the number first
            (("integer", "string"), "a", "a"),
            (("string",), "007", "007"),
        ],
    )
    def test_a_variables_text_reads_as_its_json_type(
        self, types: tuple[str, ...], text: str, value: object
    ) -> None:
        """JSON's syntax for each type; the value has the type, not only the text."""
        read = _template(*types).match(f"x://{text}")
        assert read == {"v": value}
        assert type(read["v"]) is type(value)

    @pytest.mark.parametrize(
        ("types", "text", "expected"),
        [
            (("integer",), "abc", "an integer"),
            (("integer",), "007", "an integer"),  # one syntax: no leading zero
            (("integer",), "+1", "an integer"),
            (("integer",), "1.0", "an integer"),
            (("number",), "1e999", "a number"),  # infinity, which JSON has not
            (("number",), "nan", "a number"),
            (("number",), ".5", "a number"),
            (("boolean",), "True", "true or false"),
            (("boolean",), "1", "true or false"),
            (("boolean", "integer"), "yes", "true or false or an integer"),
        ],
    )
    def test_text_not_of_the_type_matches_not_and_the_refusal_says_why(
        self, types: tuple[str, ...], text: str, expected: str
    ) -> None:
        """No match, so another template may serve the URI; `refusal` names variable,
        text and type."""
        template = _template(*types)
        assert template.match(f"x://{text}") is None
        assert template.refusal(f"x://{text}") == f"variable 'v' of 'x://{{v}}' is {text!r}, " + (
            f"not {expected}"
        )

    def test_a_refusal_is_none_when_the_uri_matches_or_its_literals_do_not(self) -> None:
        """Only a URI this template would serve but for a type is refused by it."""
        template = _template("integer")
        assert template.refusal("x://3") is None
        assert template.refusal("y://abc") is None
        assert template.refusal("x://a/b") is None

    @pytest.mark.parametrize("value", [0, -3, 2.5, 1e20, True, False, "a b/c"])
    def test_a_value_written_by_text_of_reads_back_as_itself(self, value: object) -> None:
        """What completing a typed variable suggests is a URI that reads as the value."""
        kinds = {"integer", "number", "boolean"} if not isinstance(value, str) else {"string"}
        text = urllib.parse.quote(text_of(value), safe="")
        read = UriTemplate.parse("x://{v}").typed({"v": frozenset(kinds)}).match(f"x://{text}")
        assert read == {"v": value}
        assert type(read["v"]) is type(value)  # True == 1: the type tells them apart

    def test_types_for_a_variable_it_lacks_or_no_text_reads_as_are_refused(self) -> None:
        """A typing that cannot hold is a bug of the caller: said, not ignored."""
        template = UriTemplate.parse("x://{v}")
        with pytest.raises(ValueError, match=r"^URI template 'x://\{v\}' has no variable 'w'$"):
            template.typed({"w": frozenset({"integer"})})
        with pytest.raises(ValueError, match=r"'v' cannot be read as \['array'\]$"):
            template.typed({"v": frozenset({"array"})})
        assert template.types == (frozenset({"string"}),)


# ---- reads, in process --------------------------------------------------------------------


def _data(text: str | None) -> Any:
    return json.loads(text or "")


class TestReads:
    async def test_the_handler_gets_each_variable_as_its_type(self) -> None:
        """An IntEnum by value, a float from an integer's text, a bool, an Enum, a Literal."""
        async with open_runtime([typed_module()]) as runtime:
            read = await runtime.read_resource("typed://1/2/true/calm/3", meta=SESSION)
            day = await runtime.read_resource(
                f"typed://day/2024-02-29/{uuid.UUID(int=7)}/abc", meta=SESSION
            )
        assert read.contents[0].text == repr((Tier.PRO, 2.0, True, Mood.CALM, 3))
        assert day.contents[0].text == repr((datetime.date(2024, 2, 29), uuid.UUID(int=7), "abc"))

    async def test_a_uri_another_template_reads_reaches_it(self) -> None:
        """``users://abc/profile`` is no URI of the int template: the str one, declared
        after it, serves it; ``users://3/profile`` is the int one's."""
        async with open_runtime([users_module()]) as runtime:
            by_id = await runtime.read_resource("users://3/profile", meta=SESSION)
            by_name = await runtime.read_resource("users://abc/profile", meta=SESSION)
            padded = await runtime.read_resource("users://007/profile", meta=SESSION)
        assert _data(by_id.contents[0].text) == {"by": "id", "value": 3, "type": "int"}
        assert _data(by_name.contents[0].text) == {"by": "name", "value": "abc", "type": "str"}
        assert _data(padded.contents[0].text) == {"by": "name", "value": "007", "type": "str"}

    @pytest.mark.parametrize(
        ("uri", "problem"),
        [
            ("users://0/profile", r"\$\.user_id: must be at least 1, got 0"),
            ("users://1001/profile", r"\$\.user_id: must be at most 1000, got 1001"),
            ("typed://7/2/true/calm/3", r"\$\.tier: expected one of 0, 1, got 7"),
            ("typed://1/2/true/sad/3", r"\$\.mood: expected one of 'calm', 'angry', got 'sad'"),
            ("typed://1/2/true/calm/4", r"\$\.level: expected one of 1, 2, 3, got 4"),
            ("typed://day/2024-02-30/00000000-0000-0000-0000-000000000007/a", r"\$\.day: "),
            ("typed://day/2024-02-29/00000000-0000-0000-0000-000000000007/A1", r"\$\.slug: "),
        ],
    )
    async def test_a_value_of_its_type_but_out_of_bounds_is_refused_by_its_template(
        self, uri: str, problem: str
    ) -> None:
        """Bounds, patterns and choices are checked on the template matched, like a tool's
        arguments: the error names the variable and the value, and no other template is
        tried (``users://0/profile`` does not become a name)."""
        async with open_runtime([users_module(), typed_module()]) as runtime:
            with pytest.raises(ArgumentsError, match=rf"^invalid arguments: {problem}"):
                await runtime.read_resource(uri, meta=SESSION)
            assert runtime.statistics().calls == 0  # refused before any actor

    async def test_text_no_template_reads_is_refused_naming_variable_text_and_type(self) -> None:
        """``users://abc/posts``: only ``user_id``'s type keeps it from a template."""
        async with open_runtime([users_module()]) as runtime:
            with pytest.raises(
                ArgumentsError,
                match=r"^invalid arguments: variable 'user_id' of 'users://\{user_id\}/posts' "
                r"is 'abc', not an integer$",
            ):
                await runtime.read_resource("users://abc/posts", meta=SESSION)

    async def test_a_declared_completion_of_a_typed_variable_gets_the_text_typed(self) -> None:
        """A completion handler takes the text so far whatever the variable's type."""
        module = users_module()

        @module.completion("users://{user_id}/posts", "user_id")
        def known_ids(state: None, typed: str) -> list[str]:
            """Ids starting with what was typed."""
            return [text for text in ("1", "12", "2") if text.startswith(typed)]

        async with open_runtime([module]) as runtime:
            found = await runtime.complete("users://{user_id}/posts", "user_id", "1", meta=SESSION)
        assert found == Completions(("1", "12"))

    async def test_a_string_choice_of_a_typed_template_completes_from_its_values(self) -> None:
        """An Enum of strings beside typed variables completes as it always did."""
        async with open_runtime([typed_module()]) as runtime:
            found = await runtime.complete(EVERY, "mood", "c", meta=SESSION)
        assert found == Completions(("calm",))

    async def test_integer_choices_complete_as_the_text_a_uri_writes(self) -> None:
        """An IntEnum and an int Literal complete from their values, as text."""
        async with open_runtime([typed_module()]) as runtime:
            tiers = await runtime.complete(EVERY, "tier", "")
            levels = await runtime.complete(EVERY, "level", "2")
        assert (tiers, levels) == (Completions(("0", "1")), Completions(("2",)))


# ---- over MCP, with the official SDK's client ---------------------------------------------


def _error(raised: pytest.ExceptionInfo[MCPError]) -> types.ErrorData:
    return raised.value.error


class TestOverMcp:
    async def test_typed_templates_are_listed_as_declared(self) -> None:
        """``resources/templates/list`` stays valid MCP (the SDK parses it): the URI template
        as written, types being no part of it."""
        async with connect([users_module(), typed_module()]) as client:
            listed = (await client.list_resource_templates()).resource_templates
        assert [template.uri_template for template in listed] == [
            "users://{user_id}/profile",
            "users://{name}/profile",
            "users://{user_id}/posts",
            EVERY,
            "typed://day/{day}/{id}/{slug}",
        ]

    async def test_a_read_is_served_by_the_template_that_reads_its_text(self) -> None:
        """The int template for digits, the str one for a name, over the wire."""
        async with connect(users_module()) as client:
            by_id = resource_text(await client.read_resource("users://42/profile"))
            by_name = resource_text(await client.read_resource("users://ann/profile"))
        assert _data(by_id) == {"by": "id", "value": 42, "type": "int"}
        assert _data(by_name) == {"by": "name", "value": "ann", "type": "str"}

    async def test_a_value_out_of_bounds_is_invalid_params_naming_it(self) -> None:
        """-32602 with the converter's message, as for a tool's argument."""
        async with connect(users_module()) as client:
            with pytest.raises(MCPError) as raised:
                await client.read_resource("users://0/profile")
        assert _error(raised).code == types.INVALID_PARAMS
        assert _error(raised).message == "invalid arguments: $.user_id: must be at least 1, got 0"

    async def test_text_of_the_wrong_type_is_invalid_params_naming_variable_and_type(
        self,
    ) -> None:
        """-32602 saying which variable, what text and what type it should be."""
        async with connect(users_module()) as client:
            with pytest.raises(MCPError) as raised:
                await client.read_resource("users://abc/posts")
        assert _error(raised).code == types.INVALID_PARAMS
        assert re.fullmatch(
            r"invalid arguments: variable 'user_id' of 'users://\{user_id\}/posts' is 'abc', "
            r"not an integer",
            _error(raised).message,
        )

    async def test_an_int_enum_variable_completes_over_mcp(self) -> None:
        """``completion/complete`` of an IntEnum variable suggests its values' text."""
        async with connect(typed_module()) as client:
            result = await client.complete(
                types.ResourceTemplateReference(type="ref/resource", uri=EVERY),
                {"name": "tier", "value": ""},
            )
        assert result.completion.values == ["0", "1"]


class TestMatchingCutsOnce:
    """Each variable keeps the shortest text the literal after it follows: a URI is cut
    between the variables once, never every way (see `_pattern_of`)."""

    def test_each_variable_takes_the_shortest_text_the_next_literal_follows(self) -> None:
        template = UriTemplate.parse("x://{a}-{b}-{c}.json")
        assert template.match("x://p-q-r-s.json") == {"a": "p", "b": "q", "c": "r-s"}
        assert UriTemplate.parse("f://{name}.txt").match("f://report.final.txt") == {
            "name": "report.final"
        }

    def test_a_near_miss_costs_one_cut_not_every_cut(self) -> None:
        """A hostile URI that nearly matches is refused at once: with every cut tried, each
        of these took seconds of CPU on the loop every call shares (cubic in its length)."""
        template = UriTemplate.parse("x://{a}-{b}-{c}.json")
        hostile = [f"x://{'-' * 1000}{tail}" for tail in ("", ".jso", "/x.json", "-")]
        started = time.process_time()
        for _ in range(25):
            assert all(template.match(uri) is None for uri in hostile)
        # A bound on work, not on speed: one cut is microseconds, every cut ~2 s per URI.
        assert time.process_time() - started < 5.0
