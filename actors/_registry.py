"""The registry: every accepted spelling of every enabled tool's name, resolved in one lookup.

Accepted: ``module__tool``, ``builtin.module__tool``, and the bare base name
``tool`` when exactly one enabled module has it. An ambiguous base name is an
error that lists the candidates (``docs/design.md``, "Tool names").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from protocol import BUILTIN_PREFIX

from ._errors import UnknownToolError

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from ._module import Tool, ToolModule

__all__ = ["Registry"]

_SHOWN: Final = 20  # how many tool names an "unknown tool" error lists before eliding


@final
class Registry:
    """The enabled modules and their tools, by every name a caller may use."""

    __slots__ = ("_ambiguous", "_by_name", "_modules")

    def __init__(self, modules: Iterable[ToolModule[object]]) -> None:
        self._modules: dict[str, ToolModule[object]] = {}
        self._by_name: dict[str, Tool] = {}
        self._ambiguous: dict[str, list[str]] = {}
        for module in modules:
            self._add(module)
        self._index_base_names()

    def _add(self, module: ToolModule[object]) -> None:
        if module.name in self._modules:
            msg = f"two modules are named {module.name!r}; module names must be unique"
            raise ValueError(msg)
        self._modules[module.name] = module
        for tool in module.tools.values():
            self._by_name[tool.full_name] = tool
            self._by_name[BUILTIN_PREFIX + tool.full_name] = tool

    def _index_base_names(self) -> None:
        owners: dict[str, list[Tool]] = {}
        for module in self._modules.values():
            for tool in module.tools.values():
                owners.setdefault(tool.name, []).append(tool)
        for base, tools in owners.items():
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
        known = sorted(tool.full_name for tool in self.tools())
        listed = ", ".join(known[:_SHOWN]) + (", ..." if len(known) > _SHOWN else "")
        msg = f"unknown tool {name!r}; known tools: {listed or 'none'}"
        raise UnknownToolError(msg)
