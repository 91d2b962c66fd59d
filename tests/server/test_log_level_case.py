"""``--log-level`` takes a level in any case: ``INFO``, as other tools spell it, is ``info``.

The choices shown in ``--help`` stay lowercase; the value is lowercased before they are
checked, on the command line and from ``MCP_ACTORS_LOG_LEVEL`` alike.
"""

from __future__ import annotations

import subprocess

import pytest

from actors._argparse import with_environment
from actors.server._cli import parser

from .._mcp_helpers import SERVE

STOPPED = 60.0  # seconds a stdio server may take to start and stop on a loaded machine


@pytest.mark.parametrize("given", ["INFO", "Info", "info"])
def test_the_command_line_takes_a_level_in_any_case(given: str) -> None:
    assert parser().parse_args(["--log-level", given]).log_level == "info"


def test_the_environment_variable_takes_a_level_in_any_case() -> None:
    cli = with_environment(parser(), {"MCP_ACTORS_LOG_LEVEL": "DEBUG"})
    assert cli.parse_args([]).log_level == "debug"


def test_a_level_that_is_none_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["--log-level", "LOUD"])
    assert exited.value.code == 2
    assert "--log-level: invalid choice" in capsys.readouterr().err


def test_a_server_given_an_uppercase_level_serves_at_that_level() -> None:
    """A real stdio server, its input closed at once: it starts, stops, exits 0, and at
    WARNING writes none of the INFO lines it writes by default (``stopped``)."""
    quiet = subprocess.run(
        [*SERVE, "--log-level", "WARNING"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STOPPED,
        check=False,
    )
    assert quiet.returncode == 0, quiet.stderr
    assert "stopped" not in quiet.stderr, quiet.stderr
