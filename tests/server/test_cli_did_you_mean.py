"""A mistyped option, subcommand or choice is a usage error naming what it is likely a typo of.

Each command line is run as a user runs it, a process of its own; the error is still the
one line and the hint of every usage error, the guess at its end, and said once (Python
3.14's argparse can guess at a choice too).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ACTORS = (sys.executable, "-m", "actors")


def usage_error(*arguments: str) -> str:
    """The first line of what ``python -m actors ARGUMENTS`` prints, which must exit 2."""
    done = subprocess.run(
        [*ACTORS, *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 2, done.stderr  # the error, then where to read more
    assert lines[0].count("did you mean") <= 1
    assert "maybe you meant" not in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("arguments", "ending"),
    [
        (  # two options are one letter from it: both, closest first
            ["serve", "--modul", "x"],
            "unrecognized arguments: --modul x; "
            "for '--modul', did you mean '--module' or '--modules'?",
        ),
        (  # the option of `--opt=value`, not the whole word
            ["serve", "--stat=memory"],
            "unrecognized arguments: --stat=memory; for '--stat', did you mean '--state'?",
        ),
        (  # the first near one, wherever it stands among the unrecognized
            ["serve", "--zzz", "--stat", "memory"],
            "unrecognized arguments: --zzz --stat memory; for '--stat', did you mean '--state'?",
        ),
        (  # one dash for two
            ["serve", "-session", "desk"],
            "for '-session', did you mean '--session'?",
        ),
        (  # an option of the subcommand, which the top-level parser reports
            ["demo", "--sesions", "2"],
            "unrecognized arguments: --sesions 2; for '--sesions', did you mean '--sessions'?",
        ),
    ],
)
def test_a_mistyped_option_names_the_options_it_is_near(arguments: list[str], ending: str) -> None:
    assert usage_error(*arguments).endswith(ending)


@pytest.mark.parametrize(
    ("arguments", "listed", "meant"),
    [
        (["serv"], "invalid choice: 'serv' (choose from 'demo', 'serve', ", "serve"),
        (["state", "lst"], "invalid choice: 'lst' (choose from 'list', ", "list"),
        (
            ["serve", "--log-level", "warnng"],
            "invalid choice: 'warnng' (choose from 'debug', ",
            "warning",
        ),
    ],
)
def test_a_mistyped_subcommand_or_choice_names_the_one_it_is_near(
    arguments: list[str], listed: str, meant: str
) -> None:
    """After the choices argparse lists: the one meant."""
    line = usage_error(*arguments)
    assert listed in line
    assert line.endswith(f"); did you mean {meant!r}?")


@pytest.mark.parametrize(
    "arguments",
    [
        ["serve", "--zzz"],
        ["serve", "--http-address", "127.0.0.1:0"],  # near no option of serve
        ["serve", "module"],  # not an option: a positional argument nothing takes
        ["nonsense"],
        ["serve", "--log-level", "loud"],
    ],
)
def test_a_word_near_nothing_known_is_refused_without_a_guess(arguments: list[str]) -> None:
    assert "did you mean" not in usage_error(*arguments)
