"""What tools declare about themselves: titles, MCP annotations and output schemas.

The listings are read through the official SDK client, in process, as a host
would see them. Every built-in tool that returns data is called for real, and
its ``structuredContent`` is checked against the ``outputSchema`` it lists,
twice: by the SDK client itself (it validates each result of a tool it has
listed, and raises on a mismatch) and by ``jsonschema`` directly.
"""

from __future__ import annotations

import enum
import shlex
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, Required, TypedDict

import attrs
import jsonschema
import pytest
import trio
from mcp import Client

from actors import ToolModule, open_runtime
from actors.modules import content_store, planning, playbook_store, workspace
from actors.server import McpAdapter, stdio_caller
from actors.server.mcp._session_ends import END_SESSION
from protocol import CallResult

from ..modules.test_workspace import PYTHON, SEARCH_PATH

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path

    from mcp import types


@asynccontextmanager
async def listed_client(*modules: ToolModule[Any]) -> AsyncIterator[Client]:
    """An in-memory SDK client that has listed the tools, so it validates structured results."""
    caller = stdio_caller("s")  # the session _Checked names: session__end may end it
    async with open_runtime(modules) as runtime:
        adapter = McpAdapter(runtime, identify=lambda _ctx: caller, allow_end_session=True)
        async with Client(adapter.server) as client:
            await client.list_tools()
            yield client


async def tools_of(*modules: ToolModule[Any]) -> dict[str, types.Tool]:
    async with listed_client(*modules) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


def builtins(root: Path) -> list[ToolModule[Any]]:
    return [
        planning,
        playbook_store,
        content_store,
        workspace(root=root, allow={PYTHON}, path=SEARCH_PATH),
    ]


class TestListedAnnotations:
    async def test_the_builtins_tell_hosts_what_they_do(self, tmp_path: Path) -> None:
        """Reads are read-only, the command runner destructive and open, adds not idempotent."""
        tools = await tools_of(*builtins(tmp_path))
        hints = {
            name: (
                tool.annotations.read_only_hint,
                tool.annotations.destructive_hint,
                tool.annotations.idempotent_hint,
                tool.annotations.open_world_hint,
            )
            for name, tool in tools.items()
            if tool.annotations is not None
        }
        assert hints == {
            "planning__create_goal": (None, False, False, False),
            "planning__list_goals": (True, None, None, False),
            "planning__add_todo": (None, False, False, False),
            "planning__mark_todo": (None, False, True, False),
            "planning__get_planning_state": (True, None, None, False),
            "playbook_store__create_playbook": (None, False, False, False),
            "playbook_store__select_playbook": (None, False, True, False),
            "playbook_store__list_playbooks": (True, None, None, False),
            "content_store__create_store": (None, False, True, False),
            "content_store__add_content": (None, False, False, False),
            "content_store__list_contents": (True, None, None, False),
            "content_store__read_content": (True, None, None, False),
            "content_store__search_content": (True, None, None, False),
            "workspace__execute_command": (None, True, False, True),
            "workspace__poll_process": (True, None, None, True),
            END_SESSION: (None, True, True, False),
        }

    async def test_every_builtin_has_a_title_in_both_places(self, tmp_path: Path) -> None:
        """Tool.title for current clients, annotations.title for 2025-03-26 ones."""
        tools = await tools_of(*builtins(tmp_path))
        for tool in tools.values():
            assert tool.title, tool.name
            assert tool.annotations is not None
            assert tool.annotations.title == tool.title
        assert tools["workspace__execute_command"].title == "Run a command"

    async def test_a_module_without_declarations_lists_what_it_did_before(self) -> None:
        """No title, no annotations, no outputSchema: the listing is name, description, input."""
        module: ToolModule[None] = ToolModule("plain", lambda _context: None)

        @module.tool
        def echo(state: None, text: str) -> str:
            """Echo."""
            return text

        @module.tool
        def echo_result(state: None, text: str) -> CallResult:
            """Echo as a result."""
            return CallResult.both(text, {"text": text})

        tools = await tools_of(module)
        for name in ("plain__echo", "plain__echo_result"):
            wire = tools[name].model_dump(by_alias=True, exclude_none=True)
            assert set(wire) == {"name", "description", "inputSchema"}, wire


class TestOutputSchemas:
    async def test_every_listed_output_schema_is_an_object_schema(self, tmp_path: Path) -> None:
        """MCP requires type object at the root; each schema is valid JSON Schema."""
        tools = await tools_of(*builtins(tmp_path))
        with_schema = {name for name, tool in tools.items() if tool.output_schema is not None}
        assert with_schema == {
            "playbook_store__create_playbook",
            "playbook_store__select_playbook",
            "playbook_store__list_playbooks",
            "content_store__create_store",
            "content_store__add_content",
            "content_store__list_contents",
            "content_store__read_content",
            "content_store__search_content",
            "workspace__execute_command",
            "workspace__poll_process",
            END_SESSION,
        }
        for name in with_schema:
            schema = tools[name].output_schema
            assert schema is not None
            assert schema["type"] == "object"
            jsonschema.Draft202012Validator.check_schema(schema)


class _Checked:
    """Calls through a listed SDK client, checking each structured result against its schema."""

    def __init__(self, client: Client, tools: Mapping[str, types.Tool]) -> None:
        self.client = client
        self.tools = tools
        self.checked: set[str] = set()

    async def data(self, tool: str, /, **arguments: Any) -> dict[str, Any]:
        # The SDK client raises RuntimeError here if the content breaks the schema.
        result = await self.client.call_tool(tool, {"__sessionId": "s", **arguments})
        assert not result.is_error, result.content
        assert result.structured_content is not None
        schema = self.tools[tool].output_schema
        assert schema is not None
        jsonschema.validate(result.structured_content, schema)
        self.checked.add(tool)
        return result.structured_content


class TestStructuredContentMatchesItsSchema:
    async def test_every_builtin_result_validates(self, tmp_path: Path) -> None:
        """Real calls of every tool with an outputSchema, in their different outcomes."""
        async with listed_client(*builtins(tmp_path)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            calls = _Checked(client, tools)
            await self._playbooks(calls)
            await self._contents(calls)
            await self._workspace(calls)
            await calls.data(END_SESSION)
        assert calls.checked == {n for n, t in tools.items() if t.output_schema is not None}

    async def _playbooks(self, calls: _Checked) -> None:
        await calls.data("playbook_store__create_playbook", name="host's")  # owner null
        mine = await calls.data("playbook_store__create_playbook", name="mine", __assistantId="a1")
        assert mine["owner"] == "a1"
        await calls.data("playbook_store__select_playbook", id=mine["id"], __assistantId="a1")
        listed = await calls.data("playbook_store__list_playbooks")
        assert listed["count"] == 2

    async def _contents(self, calls: _Checked) -> None:
        await calls.data("content_store__list_contents")  # empty
        await calls.data("content_store__create_store")
        added = await calls.data("content_store__add_content", filename="a.md", content="x\ny")
        await calls.data("content_store__add_content", filename="empty.md", content="")
        await calls.data("content_store__list_contents")
        await calls.data("content_store__read_content", id=added["id"])
        await calls.data("content_store__read_content", filename="a.md", from_line=2, to_line=9)
        await calls.data("content_store__read_content", filename="empty.md")
        hits = await calls.data("content_store__search_content", query="x")
        assert hits["count"] == 1
        await calls.data("content_store__search_content", query="absent")

    async def _workspace(self, calls: _Checked) -> None:
        command = shlex.join([PYTHON, "-c", "import sys; print('out'); sys.exit(3)"])
        started = await calls.data("workspace__execute_command", command=command)
        polled = await calls.data("workspace__poll_process", processId=started["processId"])
        while polled["status"] == "running":
            await trio.sleep(0.01)
            polled = await calls.data("workspace__poll_process", processId=started["processId"])
        assert polled["exitCode"] == 3

    async def test_the_client_refuses_data_that_breaks_the_schema(self) -> None:
        """The check above has teeth: the SDK client raises on content the schema forbids."""
        module: ToolModule[None] = ToolModule("liar", lambda _context: None)

        class Shape(TypedDict):
            count: int

        @module.tool(structured=Shape)
        def lie(state: None) -> CallResult:
            """Say the count is text."""
            return CallResult.both("three", {"count": "three"})

        async with listed_client(module) as client:
            with pytest.raises(RuntimeError, match=r"Invalid structured content.*liar__lie"):
                await client.call_tool("liar__lie", {"__sessionId": "s"})


# ---- declarations, refused and derived ----------------------------------------------


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Point:
    x: int
    y: int = 0


@attrs.frozen
class Shape:
    colour: Colour
    points: list[Point]
    label: str | None = None
    area: float = attrs.field(init=False, default=0.0)


# Functional syntax: in a class body, "__private" would be mangled.
Page = TypedDict("Page", {"items": list[str], "next": NotRequired[str], "__private": int})


class Cursor(TypedDict):
    """Class syntax, so under this module's string annotations."""

    size: int
    next: NotRequired[str]


class Loose(TypedDict, total=False):
    hint: str
    size: Required[int]


class Node(TypedDict):
    children: list[Node]


def shapes() -> ToolModule[None]:
    """A module whose handlers declare their data by their return annotations."""
    module: ToolModule[None] = ToolModule("shapes", lambda _context: None)

    @module.tool
    def shape(state: None) -> Shape:
        """An attrs instance."""
        return Shape(Colour.BLUE, [Point(1), Point(2, 3)])

    @module.tool
    def page(state: None, more: bool) -> Page:
        """A TypedDict, with its optional key or without."""
        if more:
            return {"items": ["a"], "next": "p2", "__private": 1}
        return {"items": [], "__private": 0}

    @module.tool
    def counts(state: None) -> dict[str, int]:
        """A mapping of known shape."""
        return {"a": 1}

    @module.tool
    def described(state: None) -> Annotated[Point, "A point."]:
        """An annotated attrs class."""
        return Point(5)

    return module


class TestDerivedOutputSchemas:
    def test_an_attrs_class_lists_every_field_as_required(self) -> None:
        """Unstructuring writes every field __init__ sets, those with defaults too."""
        schema = shapes().tools["shape"].output_schema
        assert schema is not None
        assert schema["required"] == ["colour", "points", "label"]
        assert "area" not in schema["properties"]  # init=False: cattrs leaves it out
        assert schema["properties"]["colour"] == {"enum": ["red", "blue"], "type": "string"}
        assert schema["properties"]["points"]["items"]["required"] == ["x", "y"]
        assert "default" not in schema["properties"]["points"]["items"]["properties"]["y"]
        assert schema["additionalProperties"] is False

    def test_a_typeddict_keeps_its_optional_keys_optional(self) -> None:
        """NotRequired keys are properties but not required; '__' keys are allowed in data."""
        schema = shapes().tools["page"].output_schema
        assert schema == {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "string"}},
                "next": {"type": "string"},
                "__private": {"type": "integer"},
            },
            "required": ["items", "__private"],
            "additionalProperties": False,
        }

    @pytest.mark.parametrize("shape", [Cursor, Loose])
    def test_required_and_not_required_hold_under_string_annotations(
        self, shape: type[Any]
    ) -> None:
        """Python 3.11's __required_keys__ misses them there; the schema does not."""
        module: ToolModule[None] = ToolModule("keys", lambda _context: None)

        def result(state: None) -> CallResult:
            """A result."""
            return CallResult.text("")

        module.tool(result, structured=shape)
        schema = module.tools["result"].output_schema
        assert schema is not None
        assert schema["required"] == ["size"]

    def test_mappings_and_annotated_classes_have_schemas(self) -> None:
        module = shapes()
        assert module.tools["counts"].output_schema == {
            "type": "object",
            "additionalProperties": {"type": "integer"},
        }
        described = module.tools["described"].output_schema
        assert described is not None
        assert described["description"] == "A point."

    async def test_derived_schemas_fit_the_data_the_runtime_sends(self) -> None:
        """Through the SDK client, which validates each result against the listed schema."""
        async with listed_client(shapes()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            calls = _Checked(client, tools)
            shape = await calls.data("shapes__shape")
            await calls.data("shapes__page", more=True)
            await calls.data("shapes__page", more=False)
            await calls.data("shapes__counts")
            await calls.data("shapes__described")
        assert shape["colour"] == "blue"

    @pytest.mark.parametrize("returned", ["str", "CallResult", None, "Any", "str | None"])
    def test_text_results_and_unannotated_returns_have_no_schema(
        self, returned: str | None
    ) -> None:
        module: ToolModule[None] = ToolModule("texts", lambda _context: None)

        def tool(state: None) -> Any:
            """A tool."""
            return ""

        tool.__annotations__ = {} if returned is None else {"return": returned}
        module.tool(tool)
        assert module.tools["tool"].output_schema is None

    def test_a_recursive_typeddict_is_refused(self) -> None:
        module: ToolModule[None] = ToolModule("trees", lambda _context: None)

        def tree(state: None) -> Node:
            """A tree."""
            return {"children": []}

        with pytest.raises(TypeError, match=r"Node contains itself, and recursive data"):
            module.tool(tree)
        assert not module.tools

    def test_a_typeddict_argument_is_still_refused(self) -> None:
        """Output-only types stay out of input schemas, whose binding cannot structure them."""
        module: ToolModule[None] = ToolModule("inputs", lambda _context: None)

        def take(state: None, page: Page) -> str:
            """Take a page."""
            return ""

        with pytest.raises(TypeError, match=r"parameter 'page': unsupported annotation Page"):
            module.tool(take)


class TestRefusedDeclarations:
    @pytest.mark.parametrize(
        ("hint", "value"),
        [
            ("destructive", True),
            ("destructive", False),
            ("idempotent", True),
            ("idempotent", False),
        ],
    )
    def test_read_only_refuses_hints_about_changes(self, hint: str, value: bool) -> None:
        """A read-only tool changes nothing, so how it changes things is a contradiction."""
        module: ToolModule[None] = ToolModule("reads", lambda _context: None)

        def look(state: None) -> str:
            """Look."""
            return ""

        expected = (
            rf"^tool 'look' of module 'reads': read_only=True says it changes nothing, but "
            rf"{hint}={value} describes its changes; drop {hint}= or read_only=True$"
        )
        with pytest.raises(TypeError, match=expected):
            module.tool(look, read_only=True, **{hint: value})
        assert not module.tools

    @pytest.mark.parametrize("title", ["", "   "])
    def test_a_blank_title_is_refused(self, title: str) -> None:
        module: ToolModule[None] = ToolModule("titles", lambda _context: None)

        def look(state: None) -> str:
            """Look."""
            return ""

        with pytest.raises(ValueError, match=r"^tool 'look' of module 'titles': title must"):
            module.tool(look, title=title)
        assert not module.tools

    def test_structured_is_for_handlers_returning_a_call_result(self) -> None:
        module: ToolModule[None] = ToolModule("mixed", lambda _context: None)

        def point(state: None) -> Point:
            """A point."""
            return Point(1)

        with pytest.raises(TypeError, match=r"structured= declares the data of a returned Call"):
            module.tool(point, structured=Point)
        assert not module.tools

    @pytest.mark.parametrize("structured", [int, list[str], str | None, Any])
    def test_structured_data_must_be_a_json_object(self, structured: Any) -> None:
        """MCP requires an output schema of type object."""
        module: ToolModule[None] = ToolModule("scalars", lambda _context: None)

        def result(state: None) -> CallResult:
            """A result."""
            return CallResult.text("")

        with pytest.raises(TypeError, match=r"MCP requires an output schema of type object"):
            module.tool(result, structured=structured)
        assert not module.tools

    def test_an_unsupported_field_names_where_it_is(self) -> None:
        module: ToolModule[None] = ToolModule("odd", lambda _context: None)

        class Odd(TypedDict):
            when: Literal[b"bytes"]

        def result(state: None) -> CallResult:
            """A result."""
            return CallResult.text("")

        with pytest.raises(TypeError, match=r"structured=: field .*Odd.when: .*Literal"):
            module.tool(result, structured=Odd)
