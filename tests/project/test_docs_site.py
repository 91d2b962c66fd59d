"""The documentation site: it builds strictly, and every public name is documented in it.

The public names of a package are its ``__all__`` where it has one, else the names its
``__init__.py`` re-exports (``from ._runtime import Runtime as Runtime``, under
``TYPE_CHECKING`` too) or defines without a leading underscore. Docstrings are read as
the reference generator reads them (griffe, statically), so a module constant or an attrs
field documented by the string under it counts. The site is built once per session; the
tests skip without the ``docs`` extra, except on CI, where they fail.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]

# Each documented package and its reference page in the built site.
PAGES = {
    "actors": "reference/actors/index.html",
    "actors.lowlevel": "reference/lowlevel/index.html",
    "actors.server": "reference/server/index.html",
    "actors.store": "reference/store/index.html",
    "actors.cluster": "reference/cluster/index.html",
    "actors.telemetry": "reference/telemetry/index.html",
    "actors.testing": "reference/testing/index.html",
    "actors.harness": "reference/harness/index.html",
    "protocol": "reference/protocol/index.html",
}

# What the build imports: MkDocs, its theme and plugins, and the griffe extension.
DOCS_MODULES = (
    "mkdocs",
    "material",
    "mkdocstrings",
    "mkdocstrings_handlers.python",
    "mkdocs_gen_files",
    "griffe",
    "griffe_public_redundant_aliases",
)

BUILD_TIMEOUT = 600  # seconds; a build takes about ten on 2 cores


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def require_docs_tools() -> None:
    """Skip without the ``docs`` extra, but fail on CI, where it must be installed."""
    missing = [name for name in DOCS_MODULES if not _installed(name)]
    if not missing:
        return
    message = f"the docs extra is not installed ({', '.join(missing)}): pip install -e '.[docs]'"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _init_tree(package: str) -> ast.Module:
    spec = importlib.util.find_spec(package)
    assert spec is not None, package
    assert spec.origin is not None, package
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def public_names(package: str) -> list[str]:
    """``__all__`` where the package defines it, else its re-exports and definitions."""
    tree = _init_tree(package)
    names: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(statement.name)
        elif isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    # A computed one (``sorted(_WHERE)``) is read from the package itself.
                    exported = importlib.import_module(package).__all__
                    # A dunder (``__version__``) is a fact of the package, not a page entry.
                    return sorted(name for name in exported if not name.startswith("__"))
                if isinstance(target, ast.Name):
                    names.append(target.id)
    for node in ast.walk(tree):  # under ``if TYPE_CHECKING:`` too
        if isinstance(node, ast.ImportFrom):
            names += [alias.name for alias in node.names if alias.asname == alias.name]
    return sorted({name for name in names if not name.startswith("_")})


PUBLIC = [(package, name) for package in PAGES for name in public_names(package)]


def _ids(pairs: list[tuple[str, str]]) -> list[str]:
    return [f"{package}.{name}" for package, name in pairs]


@pytest.fixture(scope="module")
def griffe_objects() -> Any:
    """The packages as the reference generator sees them (griffe, static analysis)."""
    require_docs_tools()
    import griffe

    loader = griffe.GriffeLoader(search_paths=[str(ROOT)])
    for package in ("actors", "protocol"):
        loader.load(package)
    loader.resolve_aliases(implicit=False, external=False)
    return loader.modules_collection


def _docstring(obj: Any) -> str:
    return obj.docstring.value.strip() if obj.docstring is not None else ""


def _undocumented(path: str, obj: Any) -> Iterator[str]:
    """``path`` itself, and a class's own public methods and properties, without a docstring."""
    if not _docstring(obj):
        yield path
    if not obj.is_class:
        return
    for name, member in obj.members.items():
        if name.startswith("_") or member.is_alias:
            continue
        if (member.is_function or "property" in member.labels) and not _docstring(member):
            yield f"{path}.{name}"


class TestDocstrings:
    @pytest.mark.parametrize(("package", "name"), PUBLIC, ids=_ids(PUBLIC))
    def test_public_name_and_its_methods_have_docstrings(
        self, griffe_objects: Any, package: str, name: str
    ) -> None:
        """A public name, and each public method or property of a public class, says what it is."""
        path = f"{package}.{name}"
        obj = griffe_objects[path]
        obj = obj.final_target if obj.is_alias else obj
        missing = list(_undocumented(path, obj))
        assert not missing, f"no docstring: {', '.join(missing)}"


# ---- the built site ----------------------------------------------------------------------


class _Page(HTMLParser):
    """The ids of a page's elements and its text, as a reader sees it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.text: list[str] = []

    @functools.cached_property
    def words(self) -> str:
        return _words("".join(self.text))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for key, value in attrs if key == "id" and value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text))


class Site:
    def __init__(self, directory: Path, build: subprocess.CompletedProcess[str]) -> None:
        self.directory = directory
        self.build = build
        self._pages: dict[str, _Page] = {}

    def page(self, relative: str) -> _Page:
        if relative not in self._pages:
            path = self.directory / relative
            if not path.exists():
                pytest.fail(f"the build wrote no {relative}: see test_site_builds_strictly")
            parsed = _Page()
            parsed.feed(path.read_text(encoding="utf-8"))
            self._pages[relative] = parsed
        return self._pages[relative]


def build_site(directory: Path) -> Site:
    """The site, built into ``directory`` with ``mkdocs build --strict``; the build may fail."""
    require_docs_tools()
    env = {
        **os.environ,
        # MkDocs plugins print notices about MkDocs' future at every build: not ours to act on.
        "NO_MKDOCS_2_WARNING": "1",
        "DISABLE_MKDOCS_2_WARNING": "true",
    }
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(directory)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    return Site(directory, build)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site, built once for this module."""
    return build_site(tmp_path_factory.mktemp("site"))


@pytest.mark.timeout(BUILD_TIMEOUT + 60)
def test_site_builds_strictly(site: Site) -> None:
    """``mkdocs build --strict`` passes: no broken link or anchor, no missing page or reference."""
    problems = [
        line for line in site.build.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))
    ]
    if site.build.returncode != 0:
        pytest.fail("mkdocs build --strict failed:\n" + ("\n".join(problems) or site.build.stderr))


def _summary_words(docstring: str) -> str:
    """The words of a docstring's first paragraph, as they read once rendered."""
    import markdown

    first = docstring.split("\n\n", 1)[0]
    rendered = _Page()
    rendered.feed(markdown.markdown(first))
    return " ".join(_words("".join(rendered.text)).split()[:12])


@pytest.mark.timeout(BUILD_TIMEOUT + 60)
@pytest.mark.parametrize(("package", "name"), PUBLIC, ids=_ids(PUBLIC))
def test_public_name_is_in_the_reference(
    site: Site, griffe_objects: Any, package: str, name: str
) -> None:
    """The reference page of a name's package has its anchor, and its docstring's first words."""
    path = f"{package}.{name}"
    page = site.page(PAGES[package])
    assert path in page.ids, f"{path} has no entry in {PAGES[package]}"
    obj = griffe_objects[path]
    summary = _summary_words(_docstring(obj.final_target if obj.is_alias else obj))
    if summary:  # a missing docstring is the other test's failure
        assert summary in page.words, f"{path}: {summary!r} not on its page"
