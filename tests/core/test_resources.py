"""Resources, prompts, completions, watchers, Log and Ask: the module API and runtime, in process.

Every test here runs a real runtime (`open_runtime`) and calls it directly —
``read_resource``, ``get_prompt``, ``complete``, ``watch``, ``run`` — with no
MCP transport in between, so what fails is the module API or the runtime.

Proof that the invariant tests can fail:

* the per-key isolation of reads (invariant 2) also runs against a runtime
  whose reads ignore the session (``prepare_read`` monkeypatched to route
  every read to session ``s1``) and must fail there
  (`TestReadingIsPerKey.test_the_isolation_check_catches_reads_that_ignore_the_session`);
* the read-only test of a durable module reads through a handler that
  *changes* the state, so a runtime that wrote after reads would store the
  change; the watcher tests count every notification, so one sent after a
  read or a read-only tool fails them. Checked by hand with two mutants
  loaded as a pytest plugin (no library file edited): the operations behind
  resources, prompts and completions made not read-only (the durable test
  then saw ``state_writes`` 4, not 1, and the watcher test extra changes),
  and every tool made not read-only (the watcher test failed on
  ``count_notes``).

Known library bugs have tests marked ``xfail(strict=True)`` whose reason
says what is wrong.
"""

from __future__ import annotations

import datetime
import enum
import gc
import itertools
import json
import re
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import attrs
import pytest
import trio
import trio.testing

import actors._target
from actors import (
    Answer,
    ArgumentsError,
    Ask,
    CannotAskError,
    Completions,
    Durable,
    HandlerError,
    Log,
    LogMessage,
    Progress,
    PromptArgument,
    ToolError,
    ToolModule,
    UnknownPromptError,
    UnknownResourceError,
    open_runtime,
)
from actors._client import MAX_LOG_TEXT, check_form
from actors._resources import MAX_COMPLETIONS
from actors._uri_template import UriTemplate
from actors.lowlevel import Observer, Registry, StopReason
from actors.store import MemoryStore
from protocol import (
    ActorKey,
    ContextError,
    ImageContent,
    PromptMessage,
    PromptResult,
    ResourceContents,
    ResourceResult,
    Scope,
    TextContent,
    ToolContext,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from actors import Runtime
    from actors._prepare import Route


# ---- states, types and modules of the tests ------------------------------------------
# At module level: handlers' annotations are resolved in their module's globals.


@attrs.define
class Notes:
    """The state of the notes modules: the texts added, in order."""

    texts: list[str] = attrs.Factory(list)


@attrs.frozen
class Point:
    """Some attrs data a resource returns."""

    x: int
    y: int


class Color(enum.Enum):
    """An argument type whose values a completion can list."""

    RED = "red"
    GREEN = "green"
    GREY = "grey"


Shade = Literal["light", "lighter", "dark"]
Many = Literal[tuple(f"v{number:03}" for number in range(150))]  # type: ignore[valid-type]
PLAIN_FORM: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Go ahead?"},
        "count": {"type": "integer"},
    },
    "required": ["confirm"],
}


def notes_module(
    name: str = "notes",
    *,
    scope: Scope = Scope.SESSION,
    durable: bool = False,
    ttl: float | None = None,
    namespaced: bool = True,
) -> ToolModule[Notes]:
    """A module of notes: tools to add and count, a resource, a template, a prompt, a completion."""
    module: ToolModule[Notes] = ToolModule(
        name,
        lambda _context: Notes(),
        scope=scope,
        durable=Durable(Notes) if durable else None,
        ttl=ttl,
        namespaced=namespaced,
    )

    @module.tool
    def add_note(state: Notes, text: str) -> dict[str, int]:
        """Add a note; how many there are."""
        state.texts.append(text)
        return {"count": len(state.texts)}

    @module.tool(read_only=True)
    def count_notes(state: Notes) -> dict[str, int]:
        """How many notes there are."""
        return {"count": len(state.texts)}

    @module.resource(f"{name}://all", mime_type="text/markdown")
    def all_notes(state: Notes) -> str:
        """Every note of this conversation."""
        return "\n".join(f"- {text}" for text in state.texts)

    @module.resource(f"{name}://note/{{number}}")
    def one_note(state: Notes, number: str) -> str:
        """One note, by its number from 1."""
        if not number.isdigit() or not 1 <= int(number) <= len(state.texts):
            raise ToolError(f"there is no note {number!r}; there are {len(state.texts)}")
        return state.texts[int(number) - 1]

    @module.completion(f"{name}://note/{{number}}", "number")
    def note_numbers(state: Notes, typed: str) -> list[str]:
        """The numbers of the notes that start with what was typed."""
        numbers = (str(number) for number in range(1, len(state.texts) + 1))
        return [number for number in numbers if number.startswith(typed)]

    @module.prompt
    def review(state: Notes, focus: Annotated[str, "What to look for."] = "open questions") -> str:
        """Review the notes."""
        return f"Review, looking for {focus}: {', '.join(state.texts) or '(none)'}"

    return module


def bare_module(name: str = "bare", **options: Any) -> ToolModule[None]:
    """A module with no state and nothing declared yet."""
    return ToolModule(name, lambda _context: None, **options)


def meta(session: str, assistant: str | None = None, thread: str | None = None) -> dict[str, str]:
    """The ``_meta`` naming a context."""
    found = {"sessionId": session, "assistantId": assistant, "threadId": thread}
    return {name: value for name, value in found.items() if value is not None}


async def add(runtime: Runtime, text: str, session: str, assistant: str | None = None) -> None:
    """Add a note for the context, through the tool."""
    result = await runtime.call_tool(
        "notes__add_note", {"text": text}, meta=meta(session, assistant)
    )
    assert not result.is_error, result.first_text


async def read_text(runtime: Runtime, uri: str, session: str, assistant: str | None = None) -> str:
    """The text of the one content `uri` holds for the context."""
    result = await runtime.read_resource(uri, meta=meta(session, assistant))
    (contents,) = result.contents
    assert contents.text is not None, contents
    return contents.text


def handler_without_docstring(state: None) -> str:
    return ""


# ---- declarations: URI templates ---------------------------------------------------------


class TestUriTemplates:
    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("notes/{id}", r"must start with a scheme, e\.g\. 'notes://\{id\}'"),
            ("{scheme}://x", r"must start with a scheme"),
            ("notes://{+path}", r"\{\+path\} is not supported; a variable is a lowercase name"),
            ("notes://{?query}", r"\{\?query\} is not supported"),
            ("notes://{a,b}", r"\{a,b\} is not supported"),
            ("notes://{}", r"\{\} is not supported"),
            ("notes://{a}{b}", r"variables 'a' and 'b' must be separated by a literal"),
            ("notes://{a}/{a}", r"names the variable 'a' twice"),
            ("notes://{a", r"has an unbalanced '\{' or '\}'"),
            ("notes://a}", r"has an unbalanced '\{' or '\}'"),
            ("notes://{a}}", r"has an unbalanced '\{' or '\}'"),
            ("notes://{Name}", r"\{Name\} is not supported; a variable is a lowercase name"),
            ("", r"must be a non-empty URI without spaces"),
            ("notes://a b", r"must be a non-empty URI without spaces"),
        ],
    )
    def test_a_template_it_cannot_match_as_meant_is_refused_saying_why(
        self, text: str, problem: str
    ) -> None:
        """Only RFC 6570 level 1 is matched; anything else is refused when declared, not guessed."""
        with pytest.raises(
            ValueError, match=rf"^URI template {re.escape(repr(text))}:? .*{problem}"
        ):
            UriTemplate.parse(text)
        module = bare_module()
        with pytest.raises(ValueError, match=problem):
            module.resource(text)
        assert not module.resources

    def test_variables_are_read_in_order_and_percent_decoded(self) -> None:
        """``{name}`` matches one segment (or part of one), never a '/', decoded."""
        template = UriTemplate.parse("files://{folder}/{stem}.txt")
        assert template.variables == ("folder", "stem")
        assert not template.is_static
        assert template.match("files://my%20docs/a%2Fb.txt") == {
            "folder": "my docs",
            "stem": "a/b",
        }
        assert template.match("files://a/b/c.txt") is None
        assert template.match("files://a/.txt") is None  # a variable is never empty
        assert UriTemplate.parse("files://all").is_static


# ---- declarations: resources, prompts, completions, tools ----------------------------------


def _declared_nothing(module: ToolModule[Any]) -> bool:
    return not (module.tools or module.resources or module.prompts or module.completions)


class TestResourceDeclarations:
    def test_the_handlers_arguments_must_be_the_templates_variables(self) -> None:
        """A variable nobody receives, or an argument no URI gives, is refused."""
        module = bare_module()

        def note(state: None, number: str, extra: str) -> str:
            """One note."""
            return number

        with pytest.raises(
            TypeError,
            match=r"^resource 'bare://note/\{number\}' of module 'bare': the handler's "
            r"arguments \(number, extra\) must be the template's variables \(number\)$",
        ):
            module.resource("bare://note/{number}")(note)

        def everything(state: None) -> str:
            """All notes."""
            return ""

        with pytest.raises(TypeError, match=r"arguments \(none\) must be the template's "):
            module.resource("bare://note/{number}")(everything)
        assert _declared_nothing(module)

    async def test_uuid_literal_and_date_variables_are_accepted_and_structured(self) -> None:
        """Types written as strings are parsed from the URI before the handler sees them."""
        module = bare_module()

        @module.resource("bare://{id}/{shade}/{day}")
        def typed(state: None, id: uuid.UUID, shade: Shade, day: datetime.date) -> dict[str, str]:
            """Show what the handler received."""
            return {"id": repr(id), "shade": repr(shade), "day": repr(day)}

        some = uuid.UUID(int=7)
        async with open_runtime([module]) as runtime:
            read = await runtime.read_resource(f"bare://{some}/dark/2024-02-29", meta=meta("s"))
            assert json.loads(read.contents[0].text or "") == {
                "id": repr(some),
                "shade": "'dark'",
                "day": repr(datetime.date(2024, 2, 29)),
            }
            for bad in ("bare://nope/dark/2024-02-29", f"bare://{some}/pink/2024-02-29"):
                with pytest.raises(ArgumentsError, match=r"^invalid arguments: "):
                    await runtime.read_resource(bad, meta=meta("s"))

    def test_a_resource_handler_with_a_context_parameter_takes_no_variable_for_it(self) -> None:
        """A `ToolContext` parameter is injected, so it is no template variable."""
        module = bare_module()

        @module.resource("bare://whoami")
        def whoami(state: None, context: ToolContext) -> str:
            """Who reads."""
            return context.session_id

        assert list(module.resources) == ["whoami"]

    @pytest.mark.parametrize("channel", [Progress, Log, Ask])
    def test_a_resource_prompt_or_completion_cannot_take_progress_log_or_ask(
        self, channel: type[Any]
    ) -> None:
        """Nobody waits on a read to see progress or answer a question: refused when declared."""
        module = bare_module()

        @module.prompt
        def greet(state: None, who: str) -> str:
            """Greet."""
            return who

        def resource_handler(state: None, channel: Any) -> str:
            """Read."""
            return ""

        def prompt_handler(state: None, channel: Any) -> str:
            """Prompt."""
            return ""

        def completion_handler(state: None, typed: str, channel: Any) -> list[str]:
            """Complete."""
            return []

        for handler in (resource_handler, prompt_handler, completion_handler):
            handler.__annotations__["channel"] = channel
        problem = r": only a tool's handler may take Progress, Log or Ask: a host reads"
        with pytest.raises(TypeError, match=r"^resource 'bare://x' of module 'bare'" + problem):
            module.resource("bare://x")(resource_handler)
        with pytest.raises(TypeError, match=r"^prompt 'prompt_handler' of module 'bare'" + problem):
            module.prompt(prompt_handler)
        with pytest.raises(TypeError, match=r"^completion of 'who' of 'greet' in module 'bare'"):
            module.completion("greet", "who")(completion_handler)
        assert (list(module.resources), list(module.prompts), module.completions) == (
            [],
            ["greet"],
            (),
        )

    def test_heavy_is_refused_for_an_async_resource_handler(self) -> None:
        """``heavy=True`` is for sync handlers, for resources as for tools."""
        module = bare_module()

        async def slow(state: None) -> str:
            """Slow."""
            return ""

        with pytest.raises(TypeError, match=r"heavy=True is for sync handlers"):
            module.resource("bare://slow", heavy=True)(slow)
        assert _declared_nothing(module)

    @pytest.mark.parametrize("declare", ["resource", "prompt"])
    def test_a_handler_with_no_docstring_and_no_description_is_refused(self, declare: str) -> None:
        """Hosts show the description to the user and the model: none is a bug."""
        module = bare_module()
        decorator = module.resource("bare://x") if declare == "resource" else module.prompt()
        with pytest.raises(TypeError, match=r": it has no description; add a docstring saying"):
            decorator(handler_without_docstring)
        assert _declared_nothing(module)
        decorator = (
            module.resource("bare://x", description="Nothing.")
            if declare == "resource"
            else module.prompt(description="Nothing.")
        )
        decorator(handler_without_docstring)  # the same handler, described, is fine
        assert not _declared_nothing(module)


class TestPromptDeclarations:
    def test_a_prompt_argument_annotated_int_is_refused(self) -> None:
        """Prompt arguments travel as strings (MCP's ``arguments`` is a map of strings)."""
        module = bare_module()

        def top(state: None, count: int) -> str:
            """Top notes."""
            return str(count)

        with pytest.raises(
            TypeError,
            match=r"^prompt 'top' of module 'bare': parameter 'count' is a prompt argument, "
            r"which is always a string",
        ):
            module.prompt(top)
        assert _declared_nothing(module)

    def test_arguments_are_listed_with_their_description_and_whether_required(self) -> None:
        """A prompt lists its arguments, described by ``Annotated``, required without a default."""
        module = notes_module()
        module.prompt(name="compare")(_compare)
        assert module.prompts["review"].arguments == (
            PromptArgument("focus", "What to look for.", required=False),
        )
        assert module.prompts["compare"].arguments == (
            PromptArgument("first", None, required=True),
            PromptArgument("second", None, required=False),
        )


def _compare(state: Notes, first: str, second: str | None = None) -> str:
    """Compare two notes."""
    return f"{first} {second}"


class TestCompletionDeclarations:
    def test_a_completion_of_an_undeclared_target_or_argument_is_refused(self) -> None:
        """A completion names a declared prompt or template and one of its arguments, once."""
        module = notes_module()

        def suggest(state: Notes, typed: str) -> list[str]:
            """Suggest."""
            return []

        with pytest.raises(
            ValueError,
            match=r"^completion of 'focus' of 'summary' in module 'notes': declare the prompt "
            r"or resource template 'summary' first$",
        ):
            module.completion("summary", "focus")(suggest)
        with pytest.raises(
            ValueError,
            match=r"'review' has no argument 'style' \(it has: focus\)$",
        ):
            module.completion("review", "style")(suggest)
        with pytest.raises(ValueError, match=r"'notes://all' has no argument 'n' \(it has: none\)"):
            module.completion("notes://all", "n")(suggest)
        with pytest.raises(ValueError, match=r"declare the prompt or resource template"):
            module.completion("notes://nope/{n}", "n")(suggest)
        with pytest.raises(ValueError, match=r": it is declared already$"):
            module.completion("notes://note/{number}", "number")(suggest)
        assert [c.argument for c in module.completions] == ["number"]
        module.completion("review", "focus")(suggest)  # the name is still free
        assert [c.argument for c in module.completions] == ["number", "focus"]

    def test_a_completion_handler_takes_one_string_argument(self) -> None:
        """A completion handler receives the text typed so far, and nothing else."""
        module = notes_module()

        def two(state: Notes, typed: str, more: str) -> list[str]:
            """Suggest."""
            return []

        def number(state: Notes, typed: int) -> list[str]:
            """Suggest."""
            return []

        with pytest.raises(TypeError, match=r"the handler takes one argument, the text typed"):
            module.completion("review", "focus")(two)
        with pytest.raises(TypeError, match=r"parameter 'typed' is the text typed so far"):
            module.completion("review", "focus")(number)
        assert len(module.completions) == 1


class TestToolDeclarations:
    def test_ask_in_a_sync_tool_is_refused_for_its_answer_must_be_awaited(self) -> None:
        """Only an async tool can wait for the answer of an `Ask`."""
        module = bare_module()

        def confirm(state: None, ask: Ask) -> str:
            """Confirm."""
            return ""

        with pytest.raises(
            TypeError,
            match=r"^tool 'confirm' of module 'bare': parameter 'ask' takes an Ask, whose "
            r"questions are awaited; make the handler async$",
        ):
            module.tool(confirm)
        with pytest.raises(TypeError, match=r"takes an Ask"):
            module.tool(confirm, heavy=True)
        assert _declared_nothing(module)

    def test_a_declared_input_schema_must_name_the_handlers_arguments(self) -> None:
        """``input_schema=`` is JSON naming the handler's arguments, kept as a copy."""
        module = bare_module()

        def find(state: None, title: str) -> str:
            """Find a book."""
            return title

        with pytest.raises(
            ValueError,
            match=r"^tool 'find' of module 'bare': input_schema= lists the arguments "
            r"\['name'\], but the handler takes \['title'\]; they must agree",
        ):
            module.tool(
                find, input_schema={"type": "object", "properties": {"name": {"type": "string"}}}
            )
        with pytest.raises(ValueError, match=r"input_schema= must be a JSON Schema object"):
            module.tool(find, input_schema={"type": "array"})
        with pytest.raises(TypeError, match=r"^tool 'find' of module 'bare': input_schema= must "):
            module.tool(
                find,
                input_schema={"type": "object", "properties": {"title": {"default": object()}}},
            )
        assert _declared_nothing(module)
        schema = {"type": "object", "properties": {"title": {"type": "string", "minLength": 1}}}
        module.tool(find, input_schema=schema)
        assert module.tools["find"].input_schema == schema
        assert module.tools["find"].input_schema is not schema  # a copy: later edits do not leak


# ---- names: one namespace per module, nothing half-registered --------------------------------

_KINDS = ("tool", "resource", "prompt", "completion")


def _declare(module: ToolModule[Any], kind: str, name: str) -> None:
    """Declare a `kind` named `name` on `module` (which has the prompt ``greet``)."""
    if kind == "tool":
        module.tool(handler_without_docstring, name=name, description="A tool.")
    elif kind == "resource":
        module.resource(f"bare://{name}", name=name, description="A resource.")(
            handler_without_docstring
        )
    elif kind == "prompt":
        module.prompt(name=name, description="A prompt.")(handler_without_docstring)
    else:

        def suggest(state: None, typed: str) -> list[str]:
            return []

        suggest.__name__ = name
        module.completion("greet", "who")(suggest)


def _greeting_module() -> ToolModule[None]:
    module = bare_module()

    @module.prompt
    def greet(state: None, who: str) -> str:
        """Greet."""
        return who

    return module


class TestNames:
    @pytest.mark.parametrize(("first", "second"), list(itertools.product(_KINDS, _KINDS)))
    def test_a_name_names_one_thing_in_a_module_and_the_error_says_what(
        self, first: str, second: str
    ) -> None:
        """Tools, resources, prompts and completions of a module share one namespace."""
        module = _greeting_module()
        _declare(module, first, "taken")
        before = (dict(module.tools), dict(module.resources), dict(module.prompts))
        completions = module.completions
        expected = rf"^module 'bare' already has a {first} named 'taken'"
        if first != second:
            expected += rf"; a module's tools, resources, prompts share names: rename the {second}$"
        if second == "completion" and first == "completion":
            # The same target and argument twice is refused before the name is looked at.
            expected = r": it is declared already$"
        with pytest.raises(ValueError, match=expected):
            _declare(module, second, "taken")
        assert (dict(module.tools), dict(module.resources), dict(module.prompts)) == before
        assert module.completions == completions

    def test_a_refused_declaration_leaves_the_module_as_it_was_and_the_name_free(self) -> None:
        """Whatever is wrong, nothing is registered: the next try with a good handler works."""
        module = _greeting_module()

        def note(state: None, number: list[int]) -> str:
            """Bad: the variable is a list."""
            return ""

        refusals = [
            lambda: module.resource("bare://{number}", name="note")(note),
            lambda: module.resource("bare://x/{other}", name="note")(handler_without_docstring),
            lambda: module.prompt(name="note")(note),
            lambda: module.tool(note, name="note", input_schema={"type": "array"}),
            lambda: module.resource("bare://y", name="note")(handler_without_docstring),
        ]
        for refusal in refusals:
            with pytest.raises((TypeError, ValueError)):
                refusal()
            assert (list(module.tools), list(module.resources), list(module.prompts)) == (
                [],
                [],
                ["greet"],
            )
        _declare(module, "resource", "note")
        assert list(module.resources) == ["note"]


# ---- the registry across modules --------------------------------------------------------------


def _note(state: None, n: str) -> str:
    return n


def _with_tool(module: ToolModule[Any], name: str) -> ToolModule[Any]:
    module.tool(handler_without_docstring, name=name, description="A tool.")
    return module


class TestRegistry:
    @pytest.mark.parametrize("uri", ["shared://all", "shared://note/{n}"])
    def test_two_modules_may_not_declare_the_same_uri_or_template(self, uri: str) -> None:
        """A URI has one owner: otherwise which key's state it shows would depend on order."""
        modules = [bare_module("alpha"), bare_module("beta")]
        for module in modules:
            handler = _note if "{n}" in uri else handler_without_docstring
            module.resource(uri, name="shared", description="Shared.")(handler)
        with pytest.raises(
            ValueError,
            match=rf"^modules 'alpha' and 'beta' both declare the resource "
            rf"{re.escape(repr(uri))}; a URI must have one owner$",
        ):
            Registry(modules)

    def test_two_modules_not_namespaced_may_not_list_the_same_tool_or_prompt(self) -> None:
        """Bare names listed by two modules would be ambiguous to every client: refused."""
        first = _with_tool(bare_module("alpha", namespaced=False), "find")
        second = _with_tool(bare_module("beta", namespaced=False), "find")
        with pytest.raises(
            ValueError,
            match=r"^modules 'alpha' and 'beta' both list a tool named 'find'; rename one, or "
            r"namespace the modules$",
        ):
            Registry([first, second])
        first, second = (
            bare_module("alpha", namespaced=False),
            bare_module("beta", namespaced=False),
        )
        for module in (first, second):
            module.prompt(name="greet", description="Greet.")(handler_without_docstring)
        with pytest.raises(ValueError, match=r"both list a prompt named 'greet'"):
            Registry([first, second])

    def test_a_tool_not_namespaced_may_not_shadow_another_modules_base_name(self) -> None:
        """`find` would stop meaning the unique base name of ``beta__find``."""
        for order in ((0, 1), (1, 0)):
            modules = [
                _with_tool(bare_module("alpha", namespaced=False), "find"),
                _with_tool(bare_module("beta"), "find"),
            ]
            with pytest.raises(
                ValueError,
                match=r"^module 'alpha' is not namespaced, so its tool 'find' is listed by that "
                r"bare name, which would shadow beta__find; rename one$",
            ):
                Registry([modules[index] for index in order])

    def test_names_not_namespaced_are_listed_bare(self) -> None:
        """A module declared ``namespaced=False`` lists tools and prompts by their bare names."""
        registry = Registry([notes_module(namespaced=False), _with_tool(bare_module(), "x")])
        assert registry.resolve("add_note").full_name == "add_note"
        assert registry.prompt("review").name == "review"
        assert [resource.name for resource in registry.resources()] == ["all_notes"]
        assert registry.resolve("bare__x").full_name == "bare__x"

    def test_an_operation_name_is_never_shared_by_two_modules(self) -> None:
        """A tool of one module and a resource of another, neither namespaced, may not share a
        name: a shard finds what it runs by that name, and would run the wrong one."""
        tools = _with_tool(bare_module("alpha", namespaced=False), "notes")
        readers = bare_module("beta", namespaced=False)
        readers.resource("beta://notes", name="notes", description="Notes.")(
            handler_without_docstring
        )
        with pytest.raises(
            ValueError, match=r"^modules 'alpha' and 'beta' both have an operation named 'notes'"
        ):
            Registry([tools, readers])
        namespaced = bare_module("beta")
        namespaced.resource("beta://notes", name="notes", description="Notes.")(
            handler_without_docstring
        )
        registry = Registry([tools, namespaced])
        tool = registry.resolve("notes")
        (resource,) = registry.resources()
        assert registry.operation(tool.full_name) is tool
        assert registry.operation(resource.operation.full_name) is resource.operation

    def test_a_module_declaring_one_uri_twice_is_refused_by_the_registry(self) -> None:
        """Two resources of one module with one URI are refused too (when the registry is made)."""
        module = bare_module()
        for name in ("first", "second"):
            module.resource("bare://x", name=name, description="X.")(handler_without_docstring)
        with pytest.raises(ValueError, match=r"both declare the resource 'bare://x'"):
            Registry([module])

    async def test_an_unknown_uri_or_prompt_is_refused_naming_what_exists(self) -> None:
        """Unknown URIs, prompts and completion targets are refused before anything is sent."""
        async with open_runtime([notes_module(), _with_tool(bare_module(), "x")]) as runtime:
            with pytest.raises(
                UnknownResourceError,
                match=r"^no resource has the URI 'notes://none'; resources/list and "
                r"resources/templates/list$",
            ) as unknown:
                await runtime.read_resource("notes://none", meta=meta("s"))
            assert unknown.value.uri == "notes://none"
            with pytest.raises(UnknownResourceError):  # one segment per variable
                await runtime.read_resource("notes://note/1/2", meta=meta("s"))
            with pytest.raises(
                UnknownPromptError,
                match=r"^unknown prompt 'notes__none'; known prompts: notes__review$",
            ):
                await runtime.get_prompt("notes__none", meta=meta("s"))
            with pytest.raises(UnknownPromptError):
                await runtime.complete("notes__none", "focus", "", meta=meta("s"))
            with pytest.raises(UnknownResourceError, match=r"no resource template is 'x://\{y\}'"):
                await runtime.complete("x://{y}", "y", "", meta=meta("s"))
            assert runtime.statistics().calls == 0  # refused before anything was sent


# ---- reading -----------------------------------------------------------------------------------


async def assert_reads_are_per_session(runtime: Runtime) -> None:
    """Invariant 2 for reads: each session's read shows its own notes and only them."""
    await add(runtime, "secret of s1", "s1")
    await add(runtime, "note of s2", "s2")
    for session, own, other in (("s1", "secret of s1", "note of s2"), ("s2", "note of s2", "")):
        for uri in ("notes://all", "notes://note/1"):
            text = await read_text(runtime, uri, session)
            assert own in text, f"invariant 2 (no leakage): {session} read {uri} as {text!r}"
            assert not other or other not in text, f"invariant 2: {session} read {text!r}"
    assert await read_text(runtime, "notes://all", "s3") == "", "invariant 2: s3 has no notes"


class TestReadingIsPerKey:
    async def test_a_session_reads_its_own_state_and_nobody_elses(self) -> None:
        """Invariant 2 for resource reads: per-session state, static and template alike."""
        async with open_runtime([notes_module()]) as runtime:
            await assert_reads_are_per_session(runtime)

    async def test_the_isolation_check_catches_reads_that_ignore_the_session(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Proof the check above can fail: reads all routed to s1's actor are caught."""
        real = actors._target.prepare_read

        def session_blind(*args: Any, **kwargs: Any) -> Any:
            call = real(*args, **kwargs)
            module, _session, *rest = call.route
            return attrs.evolve(call, route=(module, "s1", *rest))

        monkeypatch.setattr(actors._target, "prepare_read", session_blind)
        async with open_runtime([notes_module()]) as runtime:
            with pytest.raises(AssertionError, match=r"^invariant 2"):
                await assert_reads_are_per_session(runtime)

    async def test_in_a_session_and_assistant_scope_the_assistant_matters_the_thread_not(
        self,
    ) -> None:
        """A read is projected on the module's scope like a call: assistant in, thread out."""
        async with open_runtime([notes_module(scope=Scope.SESSION_ASSISTANT)]) as runtime:
            await add(runtime, "a1's", "s1", "a1")
            await add(runtime, "nobody's", "s1")
            assert await read_text(runtime, "notes://all", "s1", "a1") == "- a1's"
            assert await read_text(runtime, "notes://all", "s1") == "- nobody's"
            assert await read_text(runtime, "notes://all", "s1", "a2") == ""
            assert await read_text(runtime, "notes://all", "s2", "a1") == ""
            threaded = await runtime.read_resource("notes://all", meta=meta("s1", "a1", "t9"))
            assert threaded.contents[0].text == "- a1's"
            keys = {actor.key for actor in runtime.actors()}
        assert ActorKey("notes", ToolContext("s1", "a1")) in keys
        assert ActorKey("notes", ToolContext("s1", "a1", "t9")) not in keys

    async def test_a_read_sees_exactly_the_calls_accepted_before_it(self) -> None:
        """Invariant 3 for reads: a read queues behind the key's earlier calls, answered or not."""
        replies: list[object] = []
        async with open_runtime([notes_module()]) as runtime:
            for number in range(20):
                params = {"name": "notes__add_note", "arguments": {"text": f"n{number}"}}
                prepared = runtime.prepare({**params, "_meta": meta("s1")})
                assert runtime.submit_nowait(prepared, replies.append) is not None
            assert replies == []  # accepted, none answered yet
            texts = await read_text(runtime, "notes://all", "s1")
        assert texts == "\n".join(f"- n{number}" for number in range(20))
        assert len(replies) == 20


class TestReading:
    async def test_a_static_resource_and_a_template_read_the_same_state(self) -> None:
        """A fixed URI and a template read one state; a ToolError is the reader's error."""
        async with open_runtime([notes_module()]) as runtime:
            for text in ("first", "second / with a slash"):
                await add(runtime, text, "s")
            everything = await runtime.read_resource("notes://all", meta=meta("s"))
            second = await runtime.read_resource("notes://note/2", meta=meta("s"))
            with pytest.raises(HandlerError, match=r"^there is no note '3'; there are 2$"):
                await runtime.read_resource("notes://note/3", meta=meta("s"))
        assert everything == ResourceResult(
            (
                ResourceContents(
                    "notes://all", "text/markdown", text="- first\n- second / with a slash"
                ),
            )
        )
        assert second == ResourceResult(
            (ResourceContents("notes://note/2", "text/plain", text="second / with a slash"),)
        )

    async def test_a_templates_variables_are_percent_decoded(self) -> None:
        """The handler gets the decoded value; the contents keep the URI as it was read."""
        module = bare_module()

        @module.resource("bare://tag/{tag}")
        def tag(state: None, tag: str) -> str:
            """Echo the tag."""
            return tag

        async with open_runtime([module]) as runtime:
            read = await runtime.read_resource("bare://tag/caf%C3%A9%20%2F%20bar", meta=meta("s"))
        assert read.contents == (
            ResourceContents("bare://tag/caf%C3%A9%20%2F%20bar", "text/plain", text="café / bar"),
        )

    @pytest.mark.parametrize(
        ("returned", "mime_type", "contents"),
        [
            ("text", None, [ResourceContents("bare://x", "text/plain", text="text")]),
            ("# md", "text/markdown", [ResourceContents("bare://x", "text/markdown", text="# md")]),
            (
                b"\x00\xff",
                None,
                [ResourceContents("bare://x", "application/octet-stream", blob=b"\x00\xff")],
            ),
            (
                bytearray(b"ab"),
                "image/png",
                [ResourceContents("bare://x", "image/png", blob=b"ab")],
            ),
            (
                {"b": 1, "a": [1, 2]},
                None,
                [
                    ResourceContents(
                        "bare://x",
                        "application/json",
                        text='{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}',
                    )
                ],
            ),
            (
                Point(1, 2),
                None,
                [
                    ResourceContents(
                        "bare://x", "application/json", text='{\n  "x": 1,\n  "y": 2\n}'
                    )
                ],
            ),
            (
                [1, "two"],
                "application/vnd.x+json",
                [
                    ResourceContents(
                        "bare://x", "application/vnd.x+json", text='[\n  1,\n  "two"\n]'
                    )
                ],
            ),
            (
                ResourceContents("other://y", text="as is"),
                "text/markdown",
                [ResourceContents("other://y", text="as is")],
            ),
            (
                [
                    ResourceContents("bare://x#1", text="one"),
                    ResourceContents("bare://x#2", blob=b"2"),
                ],
                None,
                [
                    ResourceContents("bare://x#1", text="one"),
                    ResourceContents("bare://x#2", blob=b"2"),
                ],
            ),
            (
                ResourceResult((ResourceContents("bare://x", "text/csv", text="a,b"),)),
                None,
                [ResourceContents("bare://x", "text/csv", text="a,b")],
            ),
        ],
    )
    async def test_what_a_handler_returns_becomes_the_contents(
        self, returned: object, mime_type: str | None, contents: list[ResourceContents]
    ) -> None:
        """str → text; bytes → blob; data → JSON text; ResourceContents and results as they are."""
        module = bare_module()

        @module.resource("bare://x", mime_type=mime_type)
        def x(state: None) -> object:
            """The value under test."""
            return returned

        async with open_runtime([module]) as runtime:
            read = await runtime.read_resource("bare://x", meta=meta("s"))
        assert read == ResourceResult(tuple(contents))

    async def test_a_bad_return_value_is_a_handler_error_naming_its_type(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Returning what is no contents fails the read, naming the type, not the actor."""
        module = bare_module()

        @module.resource("bare://x")
        def x(state: None) -> object:
            """Return an int: not contents."""
            return 42

        async with open_runtime([module]) as runtime:
            with pytest.raises(
                HandlerError,
                match=r"TypeError: resource 'bare://x' of module 'bare' "
                r"returned int; return str, bytes, a mapping, a list, an attrs instance, "
                r"ResourceContents \(or several\) or a ResourceResult$",
            ):
                await runtime.read_resource("bare://x", meta=meta("s"))
            with pytest.raises(HandlerError):  # the key keeps being served
                await runtime.read_resource("bare://x", meta=meta("s"))
            assert runtime.statistics().crashed == 0
        failures = [record for record in caplog.records if record.exc_info is not None]
        assert failures, "the handler's failure was not logged with its traceback"
        assert all(record.exc_info[0] is TypeError for record in failures if record.exc_info)

    async def test_a_tool_error_is_a_handler_error_with_exactly_its_message(self) -> None:
        """A ToolError raised in a resource handler reaches the reader as its message."""
        module = bare_module()

        @module.resource("bare://x")
        def x(state: None) -> str:
            """Refuse."""
            raise ToolError("Permission denied")

        async with open_runtime([module]) as runtime:
            with pytest.raises(HandlerError, match=r"^Permission denied$"):
                await runtime.read_resource("bare://x", meta=meta("s"))

    async def test_an_async_resource_handler_is_awaited_in_the_actors_turn(self) -> None:
        """An async read holds the key's turn: no call runs on the state across its await."""
        module = notes_module()

        @module.resource("notes://count")
        async def count(state: Notes) -> dict[str, int]:
            """How many notes, after a checkpoint."""
            before = len(state.texts)
            await trio.lowlevel.checkpoint()
            return {"before": before, "after": len(state.texts)}

        seen: list[dict[str, int]] = []

        async def probe(runtime: Runtime) -> None:
            seen.append(json.loads(await read_text(runtime, "notes://count", "s")))

        async with open_runtime([module]) as runtime:
            async with trio.open_nursery() as nursery:
                for number in range(10):
                    nursery.start_soon(add, runtime, f"n{number}", "s")
                    nursery.start_soon(probe, runtime)
            await probe(runtime)
        assert all(read["before"] == read["after"] for read in seen), seen
        assert seen[-1] == {"before": 10, "after": 10}

    async def test_a_heavy_resource_handler_runs_in_a_worker_thread(self) -> None:
        """``heavy=True`` runs a sync read off the event loop, on the key's state."""
        module = notes_module()

        @module.resource("notes://thread", heavy=True)
        def thread(state: Notes) -> dict[str, Any]:
            """Which thread reads, and the notes it sees."""
            return {
                "main": threading.current_thread() is threading.main_thread(),
                "n": len(state.texts),
            }

        async with open_runtime([module]) as runtime:
            await add(runtime, "one", "s")
            read = await runtime.read_resource("notes://thread", meta=meta("s"))
        assert json.loads(read.contents[0].text or "") == {"main": False, "n": 1}

    async def test_a_resource_read_of_a_durable_module_never_writes_the_store(self) -> None:
        """Reads are read-only: even a handler that changes the state does not reach the store."""
        module = notes_module(durable=True)

        @module.resource("notes://scribble")
        def scribble(state: Notes) -> str:
            """Change the state while reading it: the runtime must not store that."""
            state.texts.append("scribbled")
            return "\n".join(state.texts)

        store = MemoryStore()
        key = ActorKey("notes", ToolContext("s"))
        async with open_runtime([module], store=store) as runtime:
            await add(runtime, "kept", "s")
            stored = await store.load(key)
            assert stored is not None
            for _ in range(3):
                await runtime.read_resource("notes://scribble", meta=meta("s"))
                await runtime.read_resource("notes://all", meta=meta("s"))
                await runtime.get_prompt("notes__review", meta=meta("s"))
                await runtime.complete("notes://note/{number}", "number", "", meta=meta("s"))
            assert runtime.statistics().state_writes == 1
            assert await store.load(key) == stored
            await runtime.read_resource("notes://all", meta=meta("fresh"))  # a new key
            assert await store.load(ActorKey("notes", ToolContext("fresh"))) is None
        assert b"kept" in stored.blob
        assert b"scribbled" not in stored.blob

    async def test_a_read_takes_its_context_from_meta_and_refuses_a_bad_one(self) -> None:
        """Any spelling of the context fields; a typo or a bad type is refused, not defaulted."""
        async with open_runtime([notes_module()]) as runtime:
            await add(runtime, "mine", "s1")
            snake = await runtime.read_resource("notes://all", meta={"session_id": "s1"})
            assert snake.contents[0].text == "- mine"
            with pytest.raises(
                ContextError,
                match=r"^unknown context field '_meta\.sessionid'; did you mean 'sessionId'\?",
            ):
                await runtime.read_resource("notes://all", meta={"sessionid": "s1"})
            with pytest.raises(ContextError, match=r"'_meta\.sessionId' must be a string, got int"):
                await runtime.read_resource("notes://all", meta={"sessionId": 1})
            with pytest.raises(ContextError, match=r"^conflicting values for session_id: "):
                await runtime.read_resource(
                    "notes://all", meta={"sessionId": "s1", "session_id": "s2"}
                )
            assert runtime.statistics().calls == 2  # the add and the read: nothing else was sent


# ---- prompts -------------------------------------------------------------------------------------

IMAGE = ImageContent(b"\x89PNG", "image/png")


class TestPrompts:
    @pytest.mark.parametrize(
        ("returned", "messages"),
        [
            ("hello", [PromptMessage("user", TextContent("hello"))]),
            (
                ["look:", IMAGE],
                [PromptMessage("user", TextContent("look:")), PromptMessage("user", IMAGE)],
            ),
            (
                [PromptMessage("assistant", TextContent("I see.")), "and?"],
                [
                    PromptMessage("assistant", TextContent("I see.")),
                    PromptMessage("user", TextContent("and?")),
                ],
            ),
            (
                PromptMessage("assistant", TextContent("alone")),
                [PromptMessage("assistant", TextContent("alone"))],
            ),
        ],
    )
    async def test_what_a_handler_returns_becomes_the_messages(
        self, returned: object, messages: list[PromptMessage]
    ) -> None:
        """str and content items are user messages; PromptMessage objects are kept as they are."""
        module = bare_module()

        @module.prompt
        def speak(state: None) -> object:
            """Speak."""
            return returned

        async with open_runtime([module]) as runtime:
            result = await runtime.get_prompt("bare__speak", meta=meta("s"))
        assert result == PromptResult(tuple(messages), "Speak.")

    async def test_a_whole_prompt_result_is_sent_as_it_is(self) -> None:
        """A PromptResult returned is the result, its own description included."""
        module = bare_module()
        whole = PromptResult((PromptMessage("user", TextContent("x")),), "Its own description.")

        @module.prompt
        def speak(state: None) -> PromptResult:
            """Speak."""
            return whole

        async with open_runtime([module]) as runtime:
            assert await runtime.get_prompt("bare__speak", meta=meta("s")) == whole

    @pytest.mark.parametrize("returned", [[], 42, [b"bytes"]])
    async def test_no_message_or_a_bad_one_is_a_handler_error(self, returned: object) -> None:
        """An empty list or something that is no message fails the prompt, naming it."""
        module = bare_module()

        @module.prompt
        def speak(state: None) -> object:
            """Speak."""
            return returned

        async with open_runtime([module]) as runtime:
            with pytest.raises(HandlerError, match=r"prompt 'speak' of module 'bare' returned"):
                await runtime.get_prompt("bare__speak", meta=meta("s"))

    async def test_arguments_are_checked_and_defaults_apply(self) -> None:
        """Prompt arguments are checked like a tool's; defaults fill in; the state is per key."""
        module = notes_module()
        module.prompt(name="compare")(_compare)
        async with open_runtime([module]) as runtime:
            await add(runtime, "n1", "s")
            default = await runtime.get_prompt("notes__review", meta=meta("s"))
            focused = await runtime.get_prompt("notes__review", {"focus": "typos"}, meta=meta("s"))
            assert default.messages[0].content == TextContent(
                "Review, looking for open questions: n1"
            )
            assert focused.messages[0].content == TextContent("Review, looking for typos: n1")
            with pytest.raises(ArgumentsError, match=r"^invalid arguments: \$\.first is required$"):
                await runtime.get_prompt("notes__compare", {"second": "x"}, meta=meta("s"))
            with pytest.raises(
                ArgumentsError, match=r"unexpected argument 'style'; the tool takes"
            ):
                await runtime.get_prompt("notes__review", {"style": "x"}, meta=meta("s"))
            with pytest.raises(ArgumentsError, match=r"\$\.focus: expected a string, got int"):
                await runtime.get_prompt("notes__review", {"focus": 3}, meta=meta("s"))
            compared = await runtime.get_prompt("notes__compare", {"first": "a"}, meta=meta("s"))
            assert compared.messages[0].content == TextContent("a None")
            other = await runtime.get_prompt("notes__review", meta=meta("s2"))
            assert other.messages[0].content == TextContent(
                "Review, looking for open questions: (none)"
            )

    async def test_a_declared_description_and_name_replace_the_handlers(self) -> None:
        """name=, title=, description= are what is listed and returned; bare, not namespaced."""
        module = bare_module(namespaced=False)

        @module.prompt(name="brief", description="A brief prompt.", title="Brief")
        def some_function(state: None) -> str:
            """Internal."""
            return "be brief"

        registry = Registry([module])
        (prompt,) = registry.prompts()
        assert (prompt.name, prompt.title, prompt.description) == (
            "brief",
            "Brief",
            "A brief prompt.",
        )
        async with open_runtime([module]) as runtime:
            result = await runtime.get_prompt("brief", meta=meta("s"))
            with pytest.raises(UnknownPromptError):
                await runtime.get_prompt("bare__brief", meta=meta("s"))
        assert result.description == "A brief prompt."


# ---- completions ---------------------------------------------------------------------------------


class TestCompletions:
    async def test_a_declared_completion_gets_the_callers_state_and_what_was_typed(self) -> None:
        """A completion runs on the caller's key: each session is offered its own note numbers."""
        async with open_runtime([notes_module()]) as runtime:
            for number in range(12):
                await add(runtime, f"n{number}", "s1")
            await add(runtime, "only", "s2")
            template = "notes://note/{number}"
            ones = await runtime.complete(template, "number", "1", meta=meta("s1"))
            assert ones == Completions(("1", "10", "11", "12"))
            assert await runtime.complete(template, "number", "1", meta=meta("s2")) == Completions(
                ("1",)
            )
            assert await runtime.complete(template, "number", "", meta=meta("s3")) == Completions(
                ()
            )

    @pytest.mark.parametrize(
        ("count", "values", "more"),
        [
            (MAX_COMPLETIONS - 1, MAX_COMPLETIONS - 1, False),
            (MAX_COMPLETIONS, MAX_COMPLETIONS, False),
            (MAX_COMPLETIONS + 1, MAX_COMPLETIONS, True),
            (None, MAX_COMPLETIONS, True),
        ],
    )
    async def test_at_most_a_hundred_values_are_sent_and_has_more_says_there_were_more(
        self, count: int | None, values: int, more: bool
    ) -> None:
        """`None`: an endless generator, read only as far as needed."""
        module = _greeting_module()

        @module.completion("greet", "who")
        def everybody(state: None, typed: str) -> object:
            """Suggest people."""
            numbers = itertools.count() if count is None else range(count)
            return (f"{typed}{number}" for number in numbers)

        async with open_runtime([module]) as runtime:
            found = await runtime.complete("bare__greet", "who", "p", meta=meta("s"))
        assert (len(found.values), found.has_more) == (values, more)
        assert found.values[:2] == ("p0", "p1")

    @pytest.mark.parametrize("returned", ["a string", [1, 2], None])
    async def test_a_completion_returning_anything_but_strings_is_a_handler_error(
        self, returned: object
    ) -> None:
        """Suggestions are strings; anything else fails the completion, naming it."""
        module = _greeting_module()

        @module.completion("greet", "who")
        def people(state: None, typed: str) -> object:
            """Suggest people."""
            return returned

        async with open_runtime([module]) as runtime:
            with pytest.raises(HandlerError, match=r"completion of 'who' of 'greet'"):
                await runtime.complete("bare__greet", "who", "", meta=meta("s"))

    async def test_literal_and_enum_arguments_complete_from_their_values_undeclared(self) -> None:
        """An argument whose type lists its values completes from them, without an actor."""
        module = bare_module()

        @module.prompt
        def paint(state: None, color: Color, shade: Shade = "light", many: Many = "v000") -> str:
            """Paint."""
            return f"{color} {shade} {many}"

        @module.resource("bare://paint/{shade}")
        def paint_shade(state: None, shade: Shade) -> str:
            """A shade."""
            return shade

        async with open_runtime([module]) as runtime:
            assert await runtime.complete("bare__paint", "color", "gr") == Completions(
                ("green", "grey")
            )
            assert await runtime.complete("bare__paint", "shade", "li") == Completions(
                ("light", "lighter")
            )
            assert await runtime.complete("bare://paint/{shade}", "shade", "d") == Completions(
                ("dark",)
            )
            many = await runtime.complete("bare__paint", "many", "v")
            assert (len(many.values), many.has_more) == (MAX_COMPLETIONS, True)
            few = await runtime.complete("bare__paint", "many", "v14")
            assert few == Completions(tuple(f"v{n}" for n in range(140, 150)))
            assert runtime.statistics().calls == 0  # answered without an actor

    async def test_an_optional_literal_argument_completes_from_its_values(self) -> None:
        """An optional Literal argument lists its values as well as a required one."""
        module = bare_module()

        @module.prompt
        def paint(state: None, shade: Shade | None = None) -> str:
            """Paint."""
            return str(shade)

        async with open_runtime([module]) as runtime:
            found = await runtime.complete("bare__paint", "shade", "li")
        assert found == Completions(("light", "lighter"))

    async def test_an_argument_the_target_does_not_have_completes_with_nothing(self) -> None:
        """An unknown or free-text argument without a declared completion gets no values."""
        async with open_runtime([notes_module()]) as runtime:
            assert await runtime.complete("notes__review", "style", "x") == Completions(())
            assert await runtime.complete("notes__review", "focus", "x") == Completions(())
            template = "notes://note/{number}"
            assert await runtime.complete(template, "other", "1") == Completions(())
            assert runtime.statistics().calls == 0


# ---- watching changes ----------------------------------------------------------------------------


@attrs.define
class Recorder:
    """A watcher that records what it is told, and wakes a test waiting for a change."""

    changed: list[Route] = attrs.Factory(list)
    ended: list[str] = attrs.Factory(list)
    event: trio.Event = attrs.Factory(trio.Event)

    def key_changed(self, route: Route) -> None:
        self.changed.append(route)
        self.event.set()

    def session_ended(self, session_id: str) -> None:
        self.ended.append(session_id)
        self.event.set()

    async def next_event(self) -> None:
        await self.event.wait()
        self.event = trio.Event()


class StopSignal(Observer):
    """An observer that wakes a test when an actor stops."""

    def __init__(self) -> None:
        self.event = trio.Event()

    def actor_stopped(self, key: ActorKey, reason: StopReason) -> None:
        self.event.set()


class Failing:
    """A watcher with a bug."""

    def key_changed(self, route: Route) -> None:
        raise RuntimeError("the watcher's bug")

    def session_ended(self, session_id: str) -> None:
        raise RuntimeError("the watcher's bug")


NOTES_S1: Final[Route] = ("notes", "s1", None, None)


class TestWatching:
    async def test_a_changing_tool_call_is_told_and_reads_are_not(self) -> None:
        """key_changed follows a call of a tool that is not read-only, and nothing else."""
        async with open_runtime([notes_module()]) as runtime:
            recorder = Recorder()
            runtime.watch(recorder)
            await add(runtime, "one", "s1")
            assert recorder.changed == [NOTES_S1]  # told before the call returned
            await runtime.call_tool("notes__count_notes", meta=meta("s1"))
            await runtime.read_resource("notes://all", meta=meta("s1"))
            await runtime.read_resource("notes://note/1", meta=meta("s1"))
            await runtime.get_prompt("notes__review", meta=meta("s1"))
            await runtime.complete("notes://note/{number}", "number", "", meta=meta("s1"))
            assert recorder.changed == [NOTES_S1]
            failed = await runtime.call_tool("notes__add_note", {"text": ""}, meta=meta("s2"))
            assert not failed.is_error
            assert recorder.changed == [NOTES_S1, ("notes", "s2", None, None)]

    async def test_the_ttl_expiry_of_an_actor_not_durable_is_told(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Its state is gone, so what a host read of it is out of date."""
        async with open_runtime([notes_module(ttl=10)]) as runtime:
            recorder = Recorder()
            runtime.watch(recorder)
            await add(runtime, "one", "s1")
            await recorder.next_event()  # the call's change
            start = trio.current_time()
            with trio.fail_after(60):
                await recorder.next_event()
            assert trio.current_time() - start >= 10
            assert recorder.changed == [NOTES_S1, NOTES_S1]
            assert runtime.statistics().expired == 1
            assert await read_text(runtime, "notes://all", "s1") == ""

    async def test_the_ttl_expiry_of_a_durable_actor_is_not_told(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Its state stays in the store: nothing a host could read changed."""
        stopped = StopSignal()
        module = notes_module(ttl=10, durable=True)
        async with open_runtime([module], store=MemoryStore(), observer=stopped) as runtime:
            recorder = Recorder()
            runtime.watch(recorder)
            await add(runtime, "one", "s1")
            with trio.fail_after(60):
                await stopped.event.wait()  # the watchers were told (or not) in the same step
            assert runtime.statistics().expired == 1
            assert recorder.changed == [NOTES_S1]
            assert await read_text(runtime, "notes://all", "s1") == "- one"

    async def test_ending_a_session_is_told(self) -> None:
        """end_session tells session_ended, and the key's state going away."""
        async with open_runtime([notes_module()]) as runtime:
            recorder = Recorder()
            runtime.watch(recorder)
            await add(runtime, "one", "s1")
            await runtime.end_session("s1")
            assert recorder.ended == ["s1"]
            assert recorder.changed == [NOTES_S1, NOTES_S1]  # the call; its state gone

    async def test_a_failing_watcher_is_logged_and_the_call_and_others_go_on(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A watcher's bug is logged; the call succeeds and the other watchers are told."""
        async with open_runtime([notes_module()]) as runtime:
            runtime.watch(Failing())
            recorder = Recorder()
            runtime.watch(recorder)
            result = await runtime.call_tool("notes__add_note", {"text": "x"}, meta=meta("s1"))
            assert result.structured_content == {"count": 1}
            assert recorder.changed == [NOTES_S1]
            assert runtime.statistics().crashed == 0
        assert "a watcher failed on a change of ('notes', 's1', None, None)" in caplog.text

    async def test_a_watcher_failing_on_an_ended_session_does_not_fail_the_ending(self) -> None:
        """A watcher's bug in session_ended is logged, as in key_changed; the ending succeeds."""
        async with open_runtime([notes_module()]) as runtime:
            runtime.watch(Failing())
            recorder = Recorder()
            runtime.watch(recorder)
            await add(runtime, "one", "s1")
            try:
                ended = await runtime.end_session("s1")
            except RuntimeError as exc:
                pytest.fail(f"end_session raised the watcher's error: {exc!r}")
            assert ended == 0
            assert recorder.ended == ["s1"]

    async def test_unwatch_stops_the_news_and_leaves_no_reference(self) -> None:
        """With no watcher registered, the runtime holds none: the feature costs nothing off."""
        async with open_runtime([notes_module()]) as runtime:
            recorder = Recorder()
            unwatch = runtime.watch(recorder)
            await add(runtime, "one", "s1")
            unwatch()
            unwatch()  # harmless twice
            await add(runtime, "two", "s1")
            await runtime.end_session("s1")
            assert (recorder.changed, recorder.ended) == ([NOTES_S1], [])
            gone = weakref.ref(recorder)
            del recorder, unwatch
            gc.collect()
            assert gone() is None, gc.get_referrers(gone())


# ---- Log and Ask in process ----------------------------------------------------------------------


@attrs.define
class ScriptedAsker:
    """An Asker for tests: answers every form with `answer`, every sampling with `text`."""

    answer: Answer = attrs.field(factory=lambda: Answer("accept", {"confirm": True}))
    text: str = "the model's answer"
    asked: list[tuple[str, Any]] = attrs.Factory(list)

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> Answer:
        self.asked.append((message, schema))
        await trio.lowlevel.checkpoint()
        return self.answer

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None,
        temperature: float | None,
    ) -> str:
        self.asked.append(("sample", (list(messages), max_tokens, system_prompt, temperature)))
        await trio.lowlevel.checkpoint()
        return self.text


def asking_module(form: Mapping[str, Any] = PLAIN_FORM) -> ToolModule[None]:
    module = bare_module("asking")

    @module.tool
    async def confirm(state: None, ask: Ask) -> dict[str, Any]:
        """Ask the user, and say what they answered."""
        answer = await ask.user("Go ahead?", form)
        return {"action": answer.action, "content": answer.content}

    @module.tool
    async def consult(state: None, ask: Ask) -> str:
        """Ask the client's model."""
        return await ask.model("Say hi.", max_tokens=5, system_prompt="Be brief.")

    @module.tool
    async def chatty(state: None, log: Log, words: list[str]) -> str:
        """Log each word at a level of its own."""
        log.debug(words[0])
        log.info(words[1], logger="chatty")
        await trio.lowlevel.checkpoint()
        log.message("warning", words[2])
        log.error(words[3])
        return "done"

    @module.tool(heavy=True)
    def heavy_chatty(state: None, log: Log, count: int) -> str:
        """Log from a worker thread."""
        for number in range(count):
            log.notice(f"line {number}")
        return "done"

    return module


async def run_with(
    runtime: Runtime,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    **channels: Any,
) -> Any:
    prepared = runtime.prepare({"name": name, "arguments": arguments, "_meta": meta("s")})
    return await runtime.run(prepared, **channels)


class TestLog:
    async def test_a_listener_hears_the_tools_messages_in_order(self) -> None:
        """`run(log=...)` hears every message in order, from async and heavy tools alike."""
        messages: list[LogMessage] = []
        async with open_runtime([asking_module()]) as runtime:
            words = ["one", "two", "three", "four"]
            result = await run_with(
                runtime, "asking__chatty", {"words": words}, log=messages.append
            )
            assert result.first_text == "done"
            assert messages == [
                LogMessage("debug", "one"),
                LogMessage("info", "two", "chatty"),
                LogMessage("warning", "three"),
                LogMessage("error", "four"),
            ]
            heard: list[LogMessage] = []
            await run_with(runtime, "asking__heavy_chatty", {"count": 50}, log=heard.append)
            assert [message.text for message in heard] == [f"line {n}" for n in range(50)]
            # Without a listener (a plain call), logging goes nowhere and costs nothing.
            plain = await runtime.call_tool("asking__chatty", {"words": words}, meta=meta("s"))
            assert plain.first_text == "done"

    async def test_a_huge_message_is_cut_to_max_log_text_and_says_so(self) -> None:
        """A log message is bounded: 1 MB becomes at most MAX_LOG_TEXT characters, marked cut."""
        messages: list[LogMessage] = []
        huge = "x" * 1_000_000
        async with open_runtime([asking_module()]) as runtime:
            await run_with(
                runtime, "asking__chatty", {"words": [huge, "b", "c", "d"]}, log=messages.append
            )
        text = messages[0].text
        assert len(text) <= MAX_LOG_TEXT
        assert text.startswith("xxxx")
        assert text.endswith("… (1000000 characters, cut)")

    async def test_a_level_mcp_does_not_have_is_refused(self) -> None:
        """With a listener or without, before anything is sent."""
        heard: list[LogMessage] = []
        for log in (Log(), Log(heard.append)):
            with pytest.raises(
                ValueError,
                match=r"^log level must be one of debug, info, notice, warning, error, critical, "
                r"alert, emergency; got 'loud'$",
            ):
                log.message("loud", "x")  # type: ignore[arg-type]
        assert not heard


class TestAsk:
    async def test_without_an_asker_the_tools_result_says_it_cannot_ask(self) -> None:
        """In process with no asker, asking is a CannotAskError: the tool's error result says so."""
        async with open_runtime([asking_module()]) as runtime:
            result = await runtime.call_tool("asking__confirm", meta=meta("s"))
            assert result.is_error
            assert result.first_text == (
                "cannot ask the user: this call has no client to ask (it was made in process)"
            )
            model = await runtime.call_tool("asking__consult", meta=meta("s"))
            assert model.first_text.startswith("cannot ask the client's model: ")

    async def test_a_test_asker_answers_and_the_tool_gets_the_answer(self) -> None:
        """An Asker given to `run` receives the form or the sampling request and answers."""
        asker = ScriptedAsker(Answer("accept", {"confirm": True, "count": 3}))
        async with open_runtime([asking_module()]) as runtime:
            result = await run_with(runtime, "asking__confirm", ask=asker)
            assert result.structured_content == {
                "action": "accept",
                "content": {"confirm": True, "count": 3},
            }
            declined = await run_with(
                runtime, "asking__confirm", ask=ScriptedAsker(Answer("decline"))
            )
            assert declined.structured_content == {"action": "decline", "content": None}
            consulted = await run_with(runtime, "asking__consult", ask=asker)
        assert consulted.first_text == "the model's answer"
        assert asker.asked == [
            ("Go ahead?", PLAIN_FORM),
            (
                "sample",
                (
                    [{"role": "user", "content": {"type": "text", "text": "Say hi."}}],
                    5,
                    "Be brief.",
                    None,
                ),
            ),
        ]

    async def test_a_form_with_a_nested_object_is_refused_naming_the_field(self) -> None:
        """Forms are flat: a nested object is refused, naming the field, before asking."""
        nested = {
            "type": "object",
            "properties": {
                "address": {"type": "object", "properties": {"city": {"type": "string"}}}
            },
        }
        problem = (
            r"form field 'address' must have a 'type' among array, boolean, integer, number, "
            r"string \(forms are flat: no objects\)"
        )
        with pytest.raises(ValueError, match=rf"^{problem}$"):
            check_form(nested)
        asker = ScriptedAsker()
        async with open_runtime([asking_module(nested)]) as runtime:
            result = await run_with(runtime, "asking__confirm", ask=asker)
        assert result.is_error
        assert result.first_text.endswith(problem.replace("\\", ""))
        assert asker.asked == []  # refused before anything was sent

    @pytest.mark.parametrize(
        ("content", "problem"),
        [
            ({"confirm": "yes"}, "the client answered 'confirm' with str, not boolean"),
            (
                {"confirm": True, "count": True},
                "the client answered 'count' with bool, not integer",
            ),
            (
                {"confirm": True, "count": 1.5},
                "the client answered 'count' with float, not integer",
            ),
            (
                {"confirm": True, "admin": True},
                "the client answered a field the form does not have: 'admin'",
            ),
        ],
    )
    async def test_an_answer_that_does_not_fit_the_form_is_refused(
        self, content: dict[str, Any], problem: str
    ) -> None:
        """The client is not trusted blindly: CannotAskError, the tool's error result."""
        asker = ScriptedAsker(Answer("accept", content))
        async with open_runtime([asking_module()]) as runtime:
            result = await run_with(runtime, "asking__confirm", ask=asker)
        assert result.is_error
        assert result.first_text == f"cannot ask the user: {problem}"
        assert issubclass(CannotAskError, ToolError)
