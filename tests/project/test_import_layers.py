"""Nothing in ``actors/`` imports in a circle (``docs/design.md``: a module that two others
need lives below both).

Every import of one ``actors`` module by another counts: at the top, inside a function
(deferred, to load an extra only when used), and under ``TYPE_CHECKING`` — a type checker
follows those, and a circle there is a circle of meaning, put off. A package's
``__init__`` re-exporting its own modules is no circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "actors"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imported(module: str, node: ast.ImportFrom | ast.Import) -> set[str]:
    """The ``actors`` modules `node`, in `module`, imports."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in MODULES}
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    found = {f"{base}.{alias.name}" for alias in node.names} | {base}
    return found & MODULES.keys()


def _imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    nodes = (node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))
    return {name for node in nodes for name in _imported(module, node)} - {module}


def _is_own_package(importer: str, imported: str) -> bool:
    """Whether one is the other's package: ``actors.store`` and ``actors.store._sqlite``."""
    return importer.startswith(f"{imported}.") or imported.startswith(f"{importer}.")


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph`, each as the modules along it, its first last again."""
    circles: list[list[str]] = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module], _ = "open", path.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                circles.append([*path[path.index(imported) :], imported])
            elif imported not in state:
                visit(imported)
        state[module], _ = "done", path.pop()

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return circles


def test_no_module_of_actors_imports_in_a_circle() -> None:
    graph = {
        module: {name for name in _imports(module) if not _is_own_package(module, name)}
        for module in MODULES
    }
    assert not _circles(graph)


def test_a_circle_is_found() -> None:
    """The check itself: a two-module and a three-module circle are each reported."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(map(tuple, _circles(graph))) == [("a", "b", "a"), ("c", "d", "e", "c")]
