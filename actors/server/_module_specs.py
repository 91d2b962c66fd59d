"""What ``--module`` names: a module object in an importable module, or in a Python file.

A spec is ``package.module:attribute`` (imported as Python imports it), or a
file: ``notes.py``, ``path/to/notes.py:notes``, an absolute path. A file is
loaded as ``python path/to/notes.py`` would run it — its folder first on
``sys.path``, so its own imports of files beside it work — and without an
attribute the spec names the one `ToolModule` the file defines. Which file a
spec loaded is logged, and a file in the current folder that a module of the
same name hides (the standard library's ``calendar``, an installed package) is
named in the error rather than lost in silence.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import re
import sys
from pathlib import Path
from typing import Any, Final

from .._module import ToolModule
from ._configuration import ConfigurationError

__all__ = ["is_file_spec", "load_module"]

logger = logging.getLogger("actors.serve")

_ATTRIBUTE: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
"""What may follow a spec's last ``:``: an attribute path, ``Holder.inner``."""
_EXPECTED: Final = (
    "expected package.module:attribute or path/to/file.py[:attribute], e.g. notes:notes"
)


def is_file_spec(spec: str) -> bool:
    """Whether `spec` names a Python file (``notes.py``, ``a/b.py:notes``) rather than a module."""
    return _names_a_file(_split(spec)[0])


def load_module(spec: str) -> ToolModule[Any]:
    """Import the `ToolModule` that `spec` names: ``package.module:attribute``, or a file.

    A file (``notes.py``, ``path/to/notes.py:notes``) may leave the attribute
    out when it defines exactly one ToolModule. Raises ConfigurationError
    naming the spec and what went wrong: a malformed spec, a file that is not
    there, an import that failed (with its exception), a missing attribute, an
    attribute that is not a ToolModule, or a file with none or several.
    """
    source, attribute = _split(spec)
    if _names_a_file(source):
        module = _import_file(spec, Path(source).expanduser())
    else:
        if not source or attribute is None or ":" in source:
            msg = f"module {spec!r}: {_EXPECTED}"
            raise ConfigurationError(msg)
        module = _import(spec, source)
    found = (
        _only_tool_module(spec, module)
        if attribute is None
        else _attribute(spec, module, attribute)
    )
    logger.info("module %s: %r from %s", spec, found.name, getattr(module, "__file__", "?"))
    return found


def _names_a_file(source: str) -> bool:
    return source.endswith(".py") or "/" in source


def _split(spec: str) -> tuple[str, str | None]:
    """`spec` as (what to import, the attribute after its last ``:`` or None)."""
    head, colon, tail = spec.rpartition(":")
    if colon and _ATTRIBUTE.fullmatch(tail):
        return head, tail
    return spec, None


def _import(spec: str, name: str) -> object:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # the operator's code: any failure is reported, not raised
        msg = f"module {spec!r}: cannot import {name!r}: {type(exc).__name__}: {exc}"
        raise ConfigurationError(msg) from None


def _import_file(spec: str, path: Path) -> object:
    """Run the Python file `path` as a module of its own, its folder first on sys.path."""
    path = path.resolve()
    if path.is_dir() or path.suffix != ".py":
        msg = f"module {spec!r}: {path} is not a Python file; name a .py file, e.g. notes.py:notes"
        raise ConfigurationError(msg)
    if not path.is_file():
        msg = f"module {spec!r}: there is no file {path}"
        raise ConfigurationError(msg)
    name = _module_name(path)
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded  # named twice (``serve`` checks its options, then builds them)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # as ``python path/to/file.py`` has it: its siblings import
    module_spec = importlib.util.spec_from_file_location(name, path)
    # A .py file always has a spec and a loader.
    assert module_spec is not None
    assert module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # before it runs: dataclasses and pickling look it up there
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the operator's code: any failure is reported, not raised
        del sys.modules[name]
        msg = f"module {spec!r}: cannot import {path}: {type(exc).__name__}: {exc}"
        raise ConfigurationError(msg) from None
    return module


def _module_name(path: Path) -> str:
    """The file's name as a module, unless a module of that name exists: then one of its own.

    A file named like a module of the standard library or an installed
    package (``calendar.py``) must neither replace it nor be replaced by it.
    """
    stem = path.stem
    taken = stem in sys.modules or stem in sys.stdlib_module_names
    if stem.isidentifier() and not taken and importlib.util.find_spec(stem) is None:
        return stem
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"_mcp_actors_file_{digest}_{re.sub(r'[^0-9A-Za-z_]', '_', stem)}"


def _attribute(spec: str, module: object, attribute: str) -> ToolModule[Any]:
    found = module
    for name in attribute.split("."):
        try:
            found = getattr(found, name)
        except AttributeError:
            where = getattr(module, "__name__", "?")
            msg = f"module {spec!r}: {where!r} has no attribute {attribute!r}{_hidden(module)}"
            raise ConfigurationError(msg) from None
    if not isinstance(found, ToolModule):
        msg = f"module {spec!r}: {attribute!r} is a {type(found).__name__}, not a ToolModule"
        raise ConfigurationError(msg)
    return found


def _only_tool_module(spec: str, module: object) -> ToolModule[Any]:
    """The one ToolModule a file defines at its top level, or why the spec must name one."""
    found = {
        id(value): (name, value)
        for name, value in vars(module).items()
        if isinstance(value, ToolModule)
    }
    names = ", ".join(name for name, _ in found.values())
    if len(found) == 1:
        return next(iter(found.values()))[1]
    if not found:
        msg = f"module {spec!r}: the file defines no ToolModule at its top level"
    else:
        first = next(iter(found.values()))[0]
        msg = (
            f"module {spec!r}: the file defines {len(found)} ToolModules ({names}); "
            f"name one, e.g. {spec}:{first}"
        )
    raise ConfigurationError(msg)


def _hidden(module: object) -> str:
    """What to add to an error when a file in the current folder lost to another `module`."""
    name = getattr(module, "__name__", "")
    imported = getattr(module, "__file__", None)
    relative = Path(*name.split("."))
    candidates = [Path.cwd() / relative.with_suffix(".py"), Path.cwd() / relative / "__init__.py"]
    mine = next((path for path in candidates if path.is_file()), None)
    if mine is None or imported is None or Path(imported).resolve() == mine.resolve():
        return ""
    return (
        f"; it was imported from {imported}, which hides your {mine} (it comes first on "
        "sys.path): rename your file"
    )
