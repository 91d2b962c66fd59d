"""Write the command-line reference (``cli.md``) from the argument parsers themselves.

mkdocs-gen-files runs this at build time, so the page describes the code being documented
and cannot drift from it: per command, its description, a usage line, and a table of its
options for each of the parser's argument groups, then the notes of its ``--help`` epilog.
Each parser is imported from where the command builds it; one that cannot be imported (an
extra is missing) fails the build instead of leaving a command out.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
PROG = "mcp-actors"
WIDTH = 88  # the longest code line the site shows without clipping it
ENVIRONMENT = "MCP_ACTORS_"  # the prefix of the options' variables (actors._argparse)

INTRO = f"""\
# Command line

Installing the package installs the `{PROG}` command; `python -m actors` is the same command.
Every section below is generated from the command's argument parser when this site is
built, and says what its `--help` says. Each option that takes a value can also come from
the environment variable its row names; the command line wins.
"""

# Words of help text shown as code: options, environment variables, tool and argument names.
_CODE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|\$?[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\w*__\w+)")
# Characters Markdown (and the attr_list and tables extensions) would read as markup.
_MARKUP = re.compile(r"([\\`*_{}\[\]|])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ENV_NOTE = re.compile(r"\s*\[env (\w+)\]$")  # what `with_environment` adds to a help
_LABEL = re.compile(r"^([\w ]{1,24}): ")  # "exit status: ..." starts with its label
_SHORT_TITLE = 40  # an epilog line ending in ':' this short is a section's title
# Actions whose default is not a value the user would otherwise get.
_NO_DEFAULT = (
    argparse._HelpAction,
    argparse._VersionAction,
    argparse._StoreTrueAction,
    argparse._StoreFalseAction,
    argparse._StoreConstAction,
)


@attrs.frozen
class Command:
    """One section of the page: a command's parser and what it is called."""

    prog: str
    parser: argparse.ArgumentParser
    level: int = 2  # the heading's level: a subcommand's is one below its command's
    prose: str = ""  # said before the parser's description


def inline(text: str) -> str:
    """`text` as Markdown prose: option and variable names as code, markup escaped."""
    parts = _CODE.split(text)
    return "".join(f"`{part}`" if index % 2 else _escaped(part) for index, part in enumerate(parts))


def _escaped(text: str) -> str:
    text = "".join(_ENTITIES.get(char, char) for char in text)
    return _MARKUP.sub(r"\\\1", text)


def _paragraphs(text: str) -> str:
    """Hard-wrapped text as Markdown paragraphs (a blank line separates them)."""
    blocks = re.split(r"\n\s*\n", textwrap.dedent(text).strip())
    return "\n\n".join(_paragraph(" ".join(block.split())) for block in blocks)


def _paragraph(text: str) -> str:
    label = _LABEL.match(text)
    if label is None:
        return inline(text)
    return f"**{inline(label[1])}**: {inline(text[label.end() :])}"


def _load(module: str, attribute: str) -> Callable[..., argparse.ArgumentParser]:
    try:
        factory: Callable[..., argparse.ArgumentParser] = getattr(
            importlib.import_module(module), attribute
        )
    except ImportError as exc:
        msg = (
            f"docs/gen_cli.py: cannot import {module}.{attribute} for the command-line "
            f"reference ({exc}); install the docs extra: pip install -e '.[docs]'"
        )
        raise RuntimeError(msg) from exc
    return factory


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    # argparse keeps its subparsers in a private action; it has looked like this since 2.7.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = _subparsers(parser)
    return {} if action is None else dict(action.choices)


def commands() -> Iterator[Command]:
    """Each section of the page, in the order a reader meets the commands."""
    from actors._argparse import with_environment

    top = _load("actors._cli", "_parser")()
    yield Command(PROG, top)
    yield Command(f"{PROG} demo", _subcommands(top)["demo"])
    for command, module in (
        ("serve", "actors.server._cli"),
        ("cluster", "actors.cluster._cli"),
        ("state", "actors.store._cli"),
        ("inspect", "actors.server._inspect"),
        ("bench", "actors.harness._cli"),
        ("check-isolation", "actors.harness._isolation_cli"),
    ):
        prog = f"{PROG} {command}"
        parser = _load(module, "parser")(prog)
        if not _documents_environment(parser):  # its `main` adds the variables
            parser = with_environment(parser, {})
        yield Command(prog, parser)
        for name, subcommand in _subcommands(parser).items():
            yield Command(f"{prog} {name}", subcommand, level=3)
    yield Command(
        "python -m benchmarks",
        _load("benchmarks.__main__", "parser")(),
        prose="The benchmark harness runs from a checkout of the repository (it is not "
        "installed with the package); its optional parts need the `bench` extra.",
    )
    yield Command("python -m benchmarks compare", _load("benchmarks.__main__", "compare_parser")())


def _documents_environment(parser: argparse.ArgumentParser) -> bool:
    return any(_ENV_NOTE.search(action.help or "") for action in parser._actions)


def render() -> str:
    """The page's Markdown."""
    with _as_installed():
        parts = [INTRO]
        for command in commands():
            command.parser.prog = command.prog
            parts.append(section(command))
    return "\n".join(parts)


@contextlib.contextmanager
def _as_installed() -> Iterator[None]:
    """The parsers as a reader's installed command builds them, whoever builds the site."""
    # `benchmarks` is not installed with the package: import it from this checkout.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # The parsers name the command as it was run (`command_name()` reads argv[0]), and
    # take their defaults from the environment: the page shows the installed command and
    # the built-in defaults, not those of the process that builds it.
    argv0, sys.argv[0] = sys.argv[0], PROG
    saved = {
        name: os.environ.pop(name) for name in list(os.environ) if name.startswith(ENVIRONMENT)
    }
    try:
        yield
    finally:
        sys.argv[0] = argv0
        os.environ.update(saved)


def section(command: Command) -> str:
    """A command's heading, description, usage line, option tables and notes."""
    parser = command.parser
    parts = [f"{'#' * command.level} `{command.prog}`\n"]
    if command.prose:
        parts.append(f"{command.prose}\n")
    if parser.description:
        parts.append(f"{_paragraphs(parser.description)}\n")
    parts.append(f"```text\n{usage(command.prog, parser)}\n```\n")
    subparsers = _subparsers(parser)
    if subparsers is not None:
        parts.append(_commands_table(command.prog, subparsers))
    for group in parser._action_groups:
        actions = [action for action in group._group_actions if _shown(action)]
        if actions:
            parts.append(f"**{inline(_title(group))}**\n\n{options_table(parser, actions)}")
    if parser.epilog:
        parts.extend(epilog(parser.epilog))
    return "\n".join(parts)


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(action, argparse._SubParsersAction)


def _title(group: argparse._ArgumentGroup) -> str:
    return "arguments" if group.title == "positional arguments" else str(group.title)


def usage(prog: str, parser: argparse.ArgumentParser) -> str:
    """A usage line: what must be given, spelled out, and ``[options]`` for the rest."""
    words = [prog]
    grouped = set()
    for group in parser._mutually_exclusive_groups:
        grouped.update(group._group_actions)
        if group.required:
            words.append(f"({' | '.join(map(_spelled, group._group_actions))})")
    optionals = [action for action in parser._actions if action.option_strings]
    words.extend(
        _spelled(action) for action in optionals if action.required and action not in grouped
    )
    if any(not action.required for action in optionals):
        words.append("[options]")
    words.extend(_argument(action) for action in parser._actions if not action.option_strings)
    return "\n".join(
        textwrap.wrap(
            " ".join(words),
            WIDTH,
            subsequent_indent=" " * (len(prog) + 1),
            break_long_words=False,
            break_on_hyphens=False,
        )
    )


def _spelled(action: argparse.Action) -> str:
    argument = _argument(action)
    return f"{action.option_strings[0]} {argument}".strip()


def _argument(action: argparse.Action) -> str:
    """What follows the option (``HOST:PORT``, ``[HOST:PORT]``, ``{text,json}``), as --help."""
    if isinstance(action, argparse._SubParsersAction):
        return "COMMAND ..."
    if action.nargs == 0:
        return ""
    metavar = action.dest.upper() if action.option_strings else action.dest
    formatter = argparse.HelpFormatter(PROG)
    return formatter._format_args(action, metavar)


def _commands_table(prog: str, subparsers: argparse._SubParsersAction) -> str:
    rows = ["| command | what it does |", "| --- | --- |"]
    for choice in subparsers._choices_actions:
        anchor = f"{prog} {choice.dest}".replace(" ", "-")
        rows.append(f"| [`{choice.dest}`](#{anchor}) | {inline(choice.help or '')} |")
    return "\n".join(rows) + "\n"


def options_table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> str:
    """| option | argument | default | what it does |, one row per action."""
    rows = ["| option | argument | default | what it does |", "| --- | --- | --- | --- |"]
    formatter = parser._get_formatter()
    for action in actions:
        names = ", ".join(f"`{name}`" for name in action.option_strings) or "(positional)"
        argument, default = _argument(action), _default(action)
        help_text = formatter._expand_help(action) if action.help else ""
        if default:  # the column says it: not again in the help
            help_text = help_text.replace(f" (default {default})", "")
        cells = [
            names,
            f"`{argument}`" if argument else "",
            f"`{default}`" if default else "",
            _what_it_does(help_text),
        ]
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows) + "\n"


def _default(action: argparse.Action) -> str:
    value = action.default
    if isinstance(action, _NO_DEFAULT) or value in (None, argparse.SUPPRESS, []):
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 10, as the help's `%(default)g` says, not 10.0
    return str(value)


def _what_it_does(help_text: str) -> str:
    """The help, its variable (``[env NAME]`` at its end) said as a sentence of its own."""
    variable = _ENV_NOTE.search(help_text)
    if variable is None:
        return inline(help_text)
    said = inline(help_text[: variable.start()])
    return f"{said}. Environment: `{variable[1]}`." if said else f"Environment: `{variable[1]}`."


def epilog(text: str) -> Iterator[str]:
    """The notes after the options: a titled, indented block keeps its layout.

    ``title:`` followed by indented lines is the title and a block as ``--help`` shows it
    (``examples`` as shell commands); any other paragraph is prose.
    """
    for block in re.split(r"\n\s*\n", text.strip("\n")):
        head, *rest = block.splitlines()
        if not (head.endswith(":") and rest and all(line.startswith(" ") for line in rest)):
            yield _paragraphs(block) + "\n"
            continue
        title = head.removesuffix(":")
        language = "sh" if title == "examples" else "text"
        said = f"**{inline(title)}**" if len(head) <= _SHORT_TITLE else inline(head)
        yield f"{said}\n\n```{language}\n{textwrap.dedent(chr(10).join(rest))}\n```\n"


def main() -> None:
    """Write ``cli.md`` into the site being built."""
    import mkdocs_gen_files  # the docs extra's: only a build needs it

    text = render()
    with mkdocs_gen_files.open("cli.md", "w") as page:
        page.write(text)


if __name__ == "<run_path>":  # as mkdocs-gen-files runs it (runpy.run_path)
    main()
