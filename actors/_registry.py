"""The registry: every enabled name (tools, resources, prompts, completions) in one lookup.

Tool names accepted: ``module__tool``, ``builtin.module__tool``, and the
bare base name ``tool`` when exactly one enabled module has it. An ambiguous
base name is an error that lists the candidates (``docs/design.md``, "Tool
names"). A module declared ``namespaced=False`` lists its tools and prompts
under their bare names; such a name must then be nobody else's.

Prompts are named like tools. Resources are found by URI: a resource's own,
else the first resource template (in module order) that matches it, its
variables' text read as their types (`actors._uri_template`); two
modules may not declare the same URI or template. Every operation the
runtime runs — tools, and the hidden ones behind resources, prompts and
completions — is also found by its full name (`operation`), as a cluster's
shards receive them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, final

from protocol import BUILTIN_PREFIX

from ._errors import ArgumentsError, UnknownPromptError, UnknownResourceError, UnknownToolError
from ._names import did_you_mean

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from ._module import Completion, Prompt, Resource, Tool, ToolModule

__all__ = ["Registry"]

_SHOWN: Final = 20  # how many names an "unknown" error lists before eliding


@final
class Registry:
    """The enabled modules; their tools, resources and prompts by every name a caller may use."""

    __slots__ = (
        "_ambiguous",
        "_by_name",
        "_completions",
        "_modules",
        "_operations",
        "_prompts",
        "_static",
        "_templates",
    )

    def __init__(self, modules: Iterable[ToolModule[object]]) -> None:
        self._modules: dict[str, ToolModule[object]] = {}
        self._by_name: dict[str, Tool] = {}
        self._ambiguous: dict[str, list[str]] = {}
        self._operations: dict[str, Tool] = {}
        self._static: dict[str, Resource] = {}
        self._templates: list[Resource] = []
        self._prompts: dict[str, Prompt] = {}
        self._completions: dict[tuple[str, str, str], Completion] = {}
        for module in modules:
            self._add(module)
        self._index_base_names()

    def _add(self, module: ToolModule[object]) -> None:
        if module.name in self._modules:
            msg = f"two modules are named {module.name!r}; module names must be unique"
            raise ValueError(msg)
        self._modules[module.name] = module
        for tool in module.tools.values():
            self._claim(self._by_name, "tool", tool.full_name, module)
            self._by_name[tool.full_name] = tool
            self._by_name[BUILTIN_PREFIX + tool.full_name] = tool
            self._add_operation(tool)
        for resource in module.resources.values():
            self._add_resource(resource)
        for prompt in module.prompts.values():
            self._claim(self._prompts, "prompt", prompt.name, module)
            self._prompts[prompt.name] = prompt
            self._add_operation(prompt.operation)
        for completion in module.completions:
            kind = "ref/resource" if "://" in completion.target else "ref/prompt"
            target = completion.target
            if kind == "ref/prompt":
                target = module.prompts[completion.target].name
            self._completions[kind, target, completion.argument] = completion
            self._add_operation(completion.operation)

    @staticmethod
    def _claim(listed: dict[str, Any], kind: str, name: str, module: ToolModule[object]) -> None:
        """Refuse a listed name that another module already lists (two modules not namespaced)."""
        if name in listed:
            msg = (
                f"modules {listed[name].module.name!r} and {module.name!r} both list a {kind} "
                f"named {name!r}; rename one, or namespace the modules"
            )
            raise ValueError(msg)

    def _add_resource(self, resource: Resource) -> None:
        template = resource.template
        others = [*self._static.values(), *self._templates]
        for other in others:
            if other.template.text == template.text:
                msg = (
                    f"modules {other.module.name!r} and {resource.module.name!r} both declare "
                    "the resource "
                    f"{template.text!r}; a URI must have one owner"
                )
                raise ValueError(msg)
        if template.is_static:
            self._static[template.text] = resource
        else:
            self._templates.append(resource)
        self._add_operation(resource.operation)

    def _add_operation(self, operation: Tool) -> None:
        """Index what a shard may be sent by name: one name, one operation.

        A module's names never clash (it refuses them), but two modules that
        are not namespaced may name a tool of one and a resource, prompt or
        completion of the other alike; a shard would then run the wrong one.
        """
        other = self._operations.get(operation.full_name)
        if other is not None:
            msg = (
                f"modules {other.module.name!r} and {operation.module.name!r} both have "
                f"an operation named {operation.full_name!r} (a tool, or what a resource, "
                "prompt or completion runs as); rename one, or namespace the modules"
            )
            raise ValueError(msg)
        self._operations[operation.full_name] = operation

    def _index_base_names(self) -> None:
        owners: dict[str, list[Tool]] = {}
        for module in self._modules.values():
            for tool in module.tools.values():
                owners.setdefault(tool.name, []).append(tool)
        for base, tools in owners.items():
            bare = [tool for tool in tools if tool.full_name == base]
            if bare and len(tools) > 1:
                others = ", ".join(sorted(t.full_name for t in tools if t is not bare[0]))
                msg = (
                    f"module {bare[0].module.name!r} is not namespaced, so its tool {base!r} "
                    f"is listed by that bare name, which would shadow {others}; rename one"
                )
                raise ValueError(msg)
            if len(tools) == 1:
                self._by_name.setdefault(base, tools[0])
            else:
                self._ambiguous[base] = sorted(tool.full_name for tool in tools)

    @property
    def modules(self) -> dict[str, ToolModule[object]]:
        """The enabled modules by name."""
        return dict(self._modules)

    def tools(self) -> Iterator[Tool]:
        """Every enabled tool, module by module, in registration order."""
        for module in self._modules.values():
            yield from module.tools.values()

    def resolve(self, name: str) -> Tool:
        """The tool `name` designates; raises UnknownToolError naming the problem."""
        tool = self._by_name.get(name)
        if tool is not None:
            return tool
        candidates = self._ambiguous.get(name)
        if candidates is not None:
            msg = f"tool name {name!r} is ambiguous; use one of {', '.join(candidates)}"
            raise UnknownToolError(msg)
        known = _listing(tool.full_name for tool in self.tools())
        # Each tool is suggested once, in its spelling nearest the caller's (bare,
        # namespaced or ``builtin.``): ``planing__create_goal`` is near all three of one tool's.
        guess = did_you_mean(name, self._by_name, lambda match: self._by_name[match].full_name)
        msg = f"unknown tool {name!r}; {guess}known tools: {known}"
        raise UnknownToolError(msg)

    def operation(self, full_name: str) -> Tool:
        """The tool or hidden operation (of a resource, prompt, completion) named `full_name`."""
        operation = self._operations.get(full_name)
        if operation is None:
            msg = f"no tool or operation is named {full_name!r}"
            raise UnknownToolError(msg)
        return operation

    # ---- resources, prompts, completions ---------------------------------------

    def resources(self) -> Iterator[Resource]:
        """Every resource with a fixed URI, module by module."""
        yield from self._static.values()

    def templates(self) -> Iterator[Resource]:
        """Every resource template, module by module."""
        yield from self._templates

    def prompts(self) -> Iterator[Prompt]:
        """Every prompt, module by module."""
        yield from self._prompts.values()

    def resource(self, uri: str) -> tuple[Resource, dict[str, Any]]:
        """The resource serving `uri`, and its template's variables, read as their types.

        Raises ArgumentsError when only a variable's type keeps `uri` from a
        template (``users://abc/profile`` for an int ``user_id``), saying so;
        else UnknownResourceError.
        """
        static = self._static.get(uri)
        if static is not None:
            return static, {}
        refusal: str | None = None
        for template in self._templates:
            read = template.template.read(uri)
            if isinstance(read, dict):
                return template, read
            # Kept, not raised: a later template that reads the text (a str) serves the URI.
            refusal = refusal or read
        if refusal is not None:
            msg = f"invalid arguments: {refusal}"
            raise ArgumentsError(msg)
        guess = did_you_mean(uri, self._static)
        msg = (
            f"no resource has the URI {uri!r:.300}; {guess}"
            "resources/list and resources/templates/list"
        )
        raise UnknownResourceError(msg, uri)

    def prompt(self, name: str) -> Prompt:
        """The prompt listed as `name`; raises UnknownPromptError naming the known ones."""
        prompt = self._prompts.get(name)
        if prompt is not None:
            return prompt
        known = _listing(self._prompts)
        guess = did_you_mean(name, self._prompts)
        msg = f"unknown prompt {name!r:.200}; {guess}known prompts: {known}"
        raise UnknownPromptError(msg)

    def completion(self, kind: str, target: str, argument: str) -> Completion | None:
        """The completion of `argument` of the prompt or template `target`, if one is declared.

        `kind` is ``ref/prompt`` (`target` a listed prompt name) or
        ``ref/resource`` (`target` a URI template as listed).
        """
        return self._completions.get((kind, target, argument))


def _listing(names: Iterable[str]) -> str:
    known = sorted(names)
    listed = ", ".join(known[:_SHOWN]) + (", ..." if len(known) > _SHOWN else "")
    return listed or "none"
