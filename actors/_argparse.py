"""What every command line of the package shares: short usage errors, ``--version``, and
options from ``MCP_ACTORS_…`` environment variables.

* A usage error prints the one line that says what is wrong and where to read
  more, not the whole usage block (argparse's default buries the error under
  it).
* A mistyped option, subcommand or choice is named with the ones it is likely a
  typo of: ``unrecognized arguments: --modul x; for '--modul', did you mean
  '--module'?``.
* The argument types the commands share (`positive_int`, `positive_seconds`,
  `seconds_or_zero`) refuse a bad value with one line that says what it must be.
* Every option that takes a value can come from the environment, as
  container deployments expect: ``--max-actors`` from ``MCP_ACTORS_MAX_ACTORS``
  (a repeatable option takes several values separated by spaces). The command
  line wins over the environment, and a variable's value is checked as the
  option's is, the error naming the variable. ``--help`` says so, per option.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar, overload

from ._names import did_you_mean

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "ENVIRONMENT_PREFIX",
    "Parser",
    "command_name",
    "package_version",
    "positive_int",
    "positive_seconds",
    "seconds_or_zero",
    "with_environment",
]

ENVIRONMENT_PREFIX: Final = "MCP_ACTORS_"
"""What the environment variable of an option starts with."""


def package_version() -> str:
    """This package's version, as installed (``0+unknown`` from a bare source tree)."""
    try:
        return version("mcp-actors")
    except PackageNotFoundError:
        return "0+unknown"


def command_name() -> str:
    """How the user ran us: ``mcp-actors`` (the console script) or ``python -m actors``."""
    return "mcp-actors" if os.path.basename(sys.argv[0]) == "mcp-actors" else "python -m actors"


_N = TypeVar("_N")  # the namespace a caller parses into


class Parser(argparse.ArgumentParser):
    """argparse's parser with a short usage error, ``--version`` and "did you mean"."""

    def __init__(self, *args: object, with_version: bool = True, **kwargs: object) -> None:
        """argparse's arguments; `with_version` adds ``--version`` (not to a parent parser)."""
        # No abbreviations: `--session` must never be read as `--session-idle-timeout`.
        kwargs.setdefault("allow_abbrev", False)
        if sys.version_info >= (3, 14):
            # Its own guess at a mistyped choice would come on top of ours (`_check_value`).
            kwargs["suggest_on_error"] = False
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]  # argparse's own keywords
        if with_version:
            self.add_argument(
                "--version",
                action="version",
                version=f"%(prog)s {package_version()}",
                help="print the version and exit",
            )

    def error(self, message: str) -> NoReturn:
        """Print what is wrong and where to read more (not the usage block); exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n(see '{self.prog} --help')\n")

    @overload
    def parse_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> argparse.Namespace: ...
    @overload
    def parse_args(self, args: Iterable[str] | None, namespace: _N) -> _N: ...
    @overload
    def parse_args(self, *, namespace: _N) -> _N: ...
    def parse_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> Any:
        """argparse's, an unrecognized option named with the known ones it is near."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # argparse's own words; it has no hook to add to them.
            message = f"unrecognized arguments: {' '.join(extras)}"
            self.error(message + self._chosen(parsed)._guess_option(extras))
        return parsed

    def _chosen(self, parsed: object) -> Parser:
        """The parser of the subcommand `parsed` ran (of its subcommand, …), else this one."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, ""))
                if isinstance(chosen, Parser):
                    return chosen._chosen(parsed)
        return self

    def _guess_option(self, extras: Sequence[str]) -> str:
        """``; for '--modul', did you mean '--module'?`` for the first of `extras` that
        is near an option of this parser; ``""`` if none is."""
        for extra in extras:
            typed = extra.partition("=")[0]  # `--modul=x` is the option `--modul`
            if not typed.startswith(tuple(self.prefix_chars)):
                continue  # a value, or a positional argument nothing takes
            guess = did_you_mean(typed, self._option_string_actions)
            if guess:
                return f"; for {typed!r}, {guess.rstrip()}"
        return ""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check that `value` is one of the choices, naming the ones it is near."""
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            choices = list(action.choices or ())
            words = isinstance(value, str) and all(isinstance(c, str) for c in choices)
            guess = did_you_mean(value, choices) if words else ""  # difflib compares text
            if not guess:
                raise
            raise argparse.ArgumentError(action, f"{exc.message}; {guess.rstrip()}") from None


def positive_int(text: str) -> int:
    """An argument type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"must be a whole number of at least 1, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def positive_seconds(text: str) -> float:
    """An argument type: a finite number of seconds above zero."""
    value = _finite_seconds(text)
    if not value > 0:
        msg = f"must be a positive number of seconds, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def seconds_or_zero(text: str) -> float:
    """An argument type: zero (what turns the thing off), or a finite number of seconds."""
    value = _finite_seconds(text)
    if not value >= 0:
        msg = f"must be zero or a positive number of seconds, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _finite_seconds(text: str) -> float:
    """`text` as a number; NaN (refused by every comparison) for text that is none, or infinity."""
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return math.nan if value == math.inf else value


def with_environment(
    parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """Let every option of `parser` that takes a value default to its environment variable.

    Call it once the parser is complete; it also documents each variable in
    the option's help. A value that the option's type refuses is a usage
    error naming the variable.
    """
    environment = os.environ if environ is None else environ
    for action in parser._actions:
        long = next((o for o in action.option_strings if o.startswith("--")), None)
        if long is None or action.nargs == 0 or long in ("--help", "--version"):
            continue
        name = ENVIRONMENT_PREFIX + long[2:].upper().replace("-", "_")
        action.help = f"{action.help or ''} [env {name}]".strip()
        given = environment.get(name)
        if given is None or not given.strip():
            continue
        action.default = _converted(parser, action, name, given)
    return parser


def _converted(
    parser: argparse.ArgumentParser, action: argparse.Action, name: str, given: str
) -> object:
    """`given` as the option's default: each value through the option's type."""
    values = given.split() if isinstance(action, argparse._AppendAction) else [given]
    converted = []
    for value in values:
        try:
            converted.append(action.type(value) if callable(action.type) else value)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            parser.error(f"environment variable {name}: {exc}")
        if action.choices is not None and converted[-1] not in action.choices:
            choices = ", ".join(map(str, action.choices))
            parser.error(f"environment variable {name}: {value!r} is not one of {choices}")
    return converted if isinstance(action, argparse._AppendAction) else converted[0]
