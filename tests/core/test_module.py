"""The module API and the registry: naming, resolution, result coercion, clean schemas."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest

from actors import ToolModule, UnknownToolError, open_runtime
from actors.lowlevel import Registry
from actors.modules import content_store, planning, playbook_store, workspace
from protocol import CallResult

from .._schemas import schema_property_names
from .test_tool_metadata import tools_of

if TYPE_CHECKING:
    from pathlib import Path


def module_with(name: str, *tools: str) -> ToolModule[None]:
    module: ToolModule[None] = ToolModule(name, lambda _context: None)
    for tool in tools:

        def handler(state: None) -> str:
            """Say ok."""
            return "ok"

        handler.__name__ = tool
        module.tool(handler)
    return module


def leak(state: None, __sessionId: str) -> str:
    """A handler that would list a context field (defined here: a class body would mangle it)."""
    return __sessionId


class TestResolution:
    def test_full_builtin_and_unique_base_names_resolve(self) -> None:
        """`m__t`, `builtin.m__t` and `t` (when unique) all name the same tool."""
        registry = Registry(
            [module_with("alpha", "shared", "only_here"), module_with("beta", "shared")]
        )
        tool = registry.resolve("alpha__only_here")
        assert registry.resolve("builtin.alpha__only_here") is tool
        assert registry.resolve("only_here") is tool

    def test_an_ambiguous_base_name_lists_the_candidates(self) -> None:
        """A base name two modules share is refused with both full names."""
        registry = Registry([module_with("alpha", "shared"), module_with("beta", "shared")])
        with pytest.raises(
            UnknownToolError,
            match=r"^tool name 'shared' is ambiguous; use one of alpha__shared, beta__shared$",
        ):
            registry.resolve("shared")

    def test_an_unknown_name_lists_the_known_tools(self) -> None:
        """An unknown name says which names exist."""
        registry = Registry([module_with("alpha", "one")])
        with pytest.raises(
            UnknownToolError, match=r"^unknown tool 'two'; known tools: alpha__one$"
        ):
            registry.resolve("two")

    def test_module_names_must_be_unique(self) -> None:
        """Two modules of one name would shadow each other's tools."""
        with pytest.raises(ValueError, match=r"^two modules are named 'alpha'"):
            Registry([module_with("alpha"), module_with("alpha")])


class TestDefinition:
    @pytest.mark.parametrize("name", ["Planning", "my__module", "_x", "x-y", ""])
    def test_module_names_are_snake_case_without_double_underscores(self, name: str) -> None:
        """`__` separates module and tool in full names, so it cannot appear in either."""
        with pytest.raises(ValueError, match=r"must be lowercase snake_case"):
            ToolModule(name, lambda _context: None)

    def test_a_tool_name_is_registered_once(self) -> None:
        """Registering two handlers under one name is refused."""
        module = module_with("alpha", "one")

        def one(state: None) -> str:
            """Say again."""
            return "again"

        with pytest.raises(ValueError, match=r"^module 'alpha' already has a tool named 'one'$"):
            module.tool(one)

    def test_tool_takes_declarations_as_keywords_and_still_works_bare(self) -> None:
        """`@module.tool`, `@module.tool()`, `@module.tool(heavy=True)` and the call form."""
        module: ToolModule[None] = ToolModule("alpha", lambda _context: None)

        def bare(state: None) -> str:
            """Say bare."""
            return "bare"

        def empty(state: None) -> str:
            """Say empty."""
            return "empty"

        def heavy(state: None) -> str:
            """Say heavy."""
            return "heavy"

        def called(state: None) -> str:
            """Say called."""
            return "called"

        assert module.tool(bare) is bare
        assert module.tool()(empty) is empty
        assert module.tool(heavy=True)(heavy) is heavy
        assert module.tool(called, heavy=True) is called
        assert {name: tool.heavy for name, tool in module.tools.items()} == {
            "bare": False,
            "empty": False,
            "heavy": True,
            "called": True,
        }

    def test_a_deadline_applies_to_modules_with_heavy_or_async_tools_only(self) -> None:
        """has_awaited_tools: only what the actor awaits can be ended by a deadline."""
        inline, heavy = module_with("alpha", "one"), module_with("beta", "one")

        def two(state: None) -> str:
            """Say two."""
            return "two"

        heavy.tool(two, heavy=True)
        assert (inline.has_awaited_tools, heavy.has_awaited_tools) == (False, True)

    def test_heavy_is_refused_for_an_async_handler(self) -> None:
        """An async handler yields at every await; heavy=True on it is a mistake, said plainly."""
        module = module_with("alpha", "one")

        async def fetch(state: None) -> str:
            """Fetch."""
            return "fetched"

        with pytest.raises(
            TypeError,
            match=r"^tool 'fetch' of module 'alpha': heavy=True is for sync handlers \(they "
            r"then run in a worker thread\), but this one is async; drop heavy=True, and move "
            r"its CPU-heavy part into `await trio.to_thread.run_sync\(...\)`$",
        ):
            module.tool(heavy=True)(fetch)
        assert list(module.tools) == ["one"]  # nothing was registered

    def test_module_ttl_must_be_positive(self) -> None:
        """A zero TTL would stop every actor immediately."""
        with pytest.raises(ValueError, match=r"^module 'alpha': ttl must be positive seconds"):
            ToolModule("alpha", lambda _context: None, ttl=0)

    def test_the_docstring_describes_the_tool(self) -> None:
        """What the model reads about a tool comes from its handler's docstring."""
        assert planning.tools["create_goal"].description == (
            "Create a goal in the current plan and return its id."
        )

    def test_no_built_in_schema_lists_a_context_field(self, tmp_path: Path) -> None:
        """Invariant 6: schemas never list `__` fields, at any depth."""
        registry = Registry([planning, playbook_store, content_store, workspace(root=tmp_path)])
        tools = list(registry.tools())
        assert len(tools) == 15  # 5 planning, 3 playbook, 5 content store, 2 workspace
        for tool in tools:
            names = schema_property_names(tool.signature.input_schema)
            assert not [n for n in names if n.startswith("__")], tool.full_name

    def test_the_schema_walk_would_see_a_nested_context_field(self) -> None:
        """The walk above is not vacuous: it finds a `__` name nested in items."""
        schema = {"properties": {"a": {"type": "array", "items": {"properties": {"__x": {}}}}}}
        assert "__x" in schema_property_names(schema)

    def test_registration_refuses_a_schema_with_a_context_field(self) -> None:
        """A handler parameter named like a context field is refused at registration."""
        module: ToolModule[None] = ToolModule("sneaky", lambda _context: None)
        with pytest.raises(
            TypeError,
            match=r"^cannot serve leak as a tool: parameter '__sessionId': names starting "
            r"with '__' are reserved for context fields",
        ):
            module.tool(leak)


@attrs.frozen
class Point:
    x: int
    y: int


class TestResults:
    @pytest.mark.parametrize(
        ("returned", "text", "data"),
        [
            ("plain", "plain", None),
            ({"n": 1}, '{\n  "n": 1\n}', {"n": 1}),
            (Point(1, 2), '{\n  "x": 1,\n  "y": 2\n}', {"x": 1, "y": 2}),
            (CallResult.both("summary", {"k": "v"}), "summary", {"k": "v"}),
        ],
    )
    async def test_handler_return_values_become_results(
        self, returned: object, text: str, data: dict[str, Any] | None
    ) -> None:
        """str → text; mapping or attrs → data plus its JSON; CallResult as it is."""
        module: ToolModule[None] = ToolModule("echo", lambda _context: None)

        @module.tool
        async def give(state: None) -> object:
            """Return the value under test."""
            return returned

        async with open_runtime([module]) as runtime:
            result = await runtime.call_tool("echo__give", {"__sessionId": "s"})
        assert (result.first_text, result.structured_content, result.is_error) == (
            text,
            data,
            False,
        )

    async def test_an_unsupported_return_value_is_an_error_result(self) -> None:
        """A handler returning e.g. an int gets an error naming what to return instead."""
        module: ToolModule[None] = ToolModule("echo", lambda _context: None)

        @module.tool
        def give(state: None) -> object:
            """Return something unsupported."""
            return 42

        async with open_runtime([module]) as runtime:
            result = await runtime.call_tool("echo__give", {"__sessionId": "s"})
        assert result.is_error
        assert (
            "returned int; return a str, None, a content item, a mapping, an attrs instance, "
            "a dataclass, a pydantic model or a CallResult, or annotate the return type "
            "(-> int, -> list[str]) to return other data" in result.first_text
        )


class TestNameAndDescription:
    async def test_declared_ones_replace_the_functions(self) -> None:
        """name= and description= are what the registry, the runtime and MCP clients see."""
        module: ToolModule[None] = ToolModule("shelf", lambda _context: None)

        @module.tool(name="find", description="Find a book by its title.")
        def find_a_book_by_title(state: None, title: str) -> str:
            """Internal: what the developer reads."""
            return f"found {title}"

        assert list(module.tools) == ["find"]
        tool = module.tools["find"]
        assert (tool.full_name, tool.description) == ("shelf__find", "Find a book by its title.")
        assert tool.handler is find_a_book_by_title
        async with open_runtime([module]) as runtime:
            result = await runtime.call_tool("shelf__find", {"title": "Dune", "__sessionId": "s"})
        assert result.first_text == "found Dune"
        assert result.content[0].service is not None
        assert result.content[0].service.tool_name == "find"
        listed = await tools_of(module)
        assert [name for name in listed if name.startswith("shelf__")] == ["shelf__find"]
        assert listed["shelf__find"].description == "Find a book by its title."

    def test_a_declared_description_is_cleaned_like_a_docstring(self) -> None:
        module: ToolModule[None] = ToolModule("shelf", lambda _context: None)

        def count(state: None) -> str:
            return "0"

        module.tool(count, description="\n    Count the books.\n\n    Every shelf.\n    ")
        assert module.tools["count"].description == "Count the books.\n\nEvery shelf."

    def test_a_callable_without_a_name_is_served_by_its_declared_name(self) -> None:
        module: ToolModule[None] = ToolModule("shelf", lambda _context: None)
        module.tool(lambda state: "0", name="count", description="Count the books.")
        assert module.tools["count"].description == "Count the books."

    @pytest.mark.parametrize("name", ["Find", "find__it", "_find", "find-it", ""])
    def test_a_declared_name_follows_the_rule_of_function_names(self, name: str) -> None:
        """`__` separates module and tool, so a declared name is snake_case too."""
        module: ToolModule[None] = ToolModule("shelf", lambda _context: None)

        def find(state: None) -> str:
            """Find."""
            return ""

        with pytest.raises(
            ValueError, match=rf"^tool name {name!r} must be lowercase snake_case \("
        ):
            module.tool(find, name=name)
        assert not module.tools

    def test_a_declared_name_is_registered_once(self) -> None:
        module = module_with("shelf", "find")

        def search(state: None) -> str:
            """Search."""
            return ""

        with pytest.raises(ValueError, match=r"^module 'shelf' already has a tool named 'find'$"):
            module.tool(search, name="find")

    @pytest.mark.parametrize("docstring", [None, "", "  \n  "])
    def test_a_handler_that_describes_nothing_is_refused(self, docstring: str | None) -> None:
        """Hosts show the description to the model, which picks tools by it: none is a bug."""
        module: ToolModule[None] = ToolModule("shelf", lambda _context: None)

        def find(state: None) -> str:
            return ""

        find.__doc__ = docstring
        with pytest.raises(
            TypeError,
            match=r"^tool 'find' of module 'shelf': it has no description; add a docstring "
            r"saying what the tool does, or pass description= \(MCP hosts show it to the "
            r"model, which picks tools by it\)$",
        ):
            module.tool(find)
        assert not module.tools
        module.tool(find, description="Find a book.")
        assert module.tools["find"].description == "Find a book."

    @pytest.mark.parametrize("description", ["", " \n "])
    def test_a_blank_declared_description_is_refused(self, description: str) -> None:
        module: ToolModule[None] = ToolModule("shelf", lambda _context: None)

        def find(state: None) -> str:
            """Find a book."""
            return ""

        with pytest.raises(
            ValueError,
            match=r"^tool 'find' of module 'shelf': description must not be blank; say what "
            r"the tool does$",
        ):
            module.tool(find, description=description)
        assert not module.tools

    def test_every_builtin_tool_is_described(self, tmp_path: Path) -> None:
        """Registration refuses an empty description, so no built-in lists one."""
        registry = Registry([planning, playbook_store, content_store, workspace(root=tmp_path)])
        assert all(tool.description.strip() for tool in registry.tools())
