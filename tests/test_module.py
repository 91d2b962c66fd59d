"""The module API and the registry: naming, resolution, result coercion, clean schemas."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest

from actors import Registry, ToolModule, UnknownToolError, open_runtime
from actors.modules import content_store, planning, playbook_store, workspace
from protocol import CallResult

from ._schemas import schema_property_names

if TYPE_CHECKING:
    from pathlib import Path


def module_with(name: str, *tools: str) -> ToolModule[None]:
    module: ToolModule[None] = ToolModule(name, lambda _context: None)
    for tool in tools:

        def handler(state: None) -> str:
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
            return "again"

        with pytest.raises(ValueError, match=r"^module 'alpha' already has a tool named 'one'$"):
            module.tool(one)

    def test_tool_takes_declarations_as_keywords_and_still_works_bare(self) -> None:
        """`@module.tool`, `@module.tool()`, `@module.tool(heavy=True)` and the call form."""
        module: ToolModule[None] = ToolModule("alpha", lambda _context: None)

        def bare(state: None) -> str:
            return "bare"

        def empty(state: None) -> str:
            return "empty"

        def heavy(state: None) -> str:
            return "heavy"

        def called(state: None) -> str:
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
            return "two"

        heavy.tool(two, heavy=True)
        assert (inline.has_awaited_tools, heavy.has_awaited_tools) == (False, True)

    def test_heavy_is_refused_for_an_async_handler(self) -> None:
        """An async handler yields at every await; heavy=True on it is a mistake, said plainly."""
        module = module_with("alpha", "one")

        async def fetch(state: None) -> str:
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
        assert "returned int; return a str, a mapping, an attrs instance or a CallResult" in (
            result.first_text
        )
