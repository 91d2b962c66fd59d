"""What every command line says of itself: its name, its version, its errors, its environment.

Each is run as a user runs it, a process of its own: the console script
``mcp-actors`` where the name matters, ``python -m actors`` elsewhere.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import actors
from actors._argparse import with_environment
from actors.server._cli import _options, parser

CONSOLE_SCRIPT = str(Path(sys.executable).with_name("mcp-actors"))


def run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A command run to its end with nothing on stdin; its output."""
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
        env=None if env is None else {**os.environ, **env},
    )


class TestNameAndVersion:
    def test_the_package_knows_its_version(self) -> None:
        assert re.fullmatch(r"\d+\.\d+\.\d+.*", actors.__version__)

    @pytest.mark.parametrize("command", [[], ["serve"], ["cluster"], ["state"]])
    def test_every_command_prints_its_name_and_version(self, command: list[str]) -> None:
        done = run(CONSOLE_SCRIPT, *command, "--version")
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{' '.join(['mcp-actors', *command])} {actors.__version__}\n"

    def test_help_names_the_command_it_was_run_as(self) -> None:
        script = run(CONSOLE_SCRIPT, "--help")
        module = run(sys.executable, "-m", "actors", "--help")
        assert script.stdout.startswith("usage: mcp-actors ")
        assert module.stdout.startswith("usage: python -m actors ")


class TestUsageErrors:
    @pytest.mark.parametrize(
        ("arguments", "problem"),
        [
            (["serve", "--ttl", "soon"], "argument --ttl: must be a positive number of seconds"),
            (["serve", "--max-actors", "x"], "argument --max-actors: must be a whole number"),
            (["state", "list"], "one of the arguments --session --tenant --all is required"),
            (["nonsense"], "argument command: invalid choice: 'nonsense'"),
        ],
    )
    def test_a_usage_error_is_one_line_and_a_hint(self, arguments: list[str], problem: str) -> None:
        """Not the whole usage block: what is wrong, and where to read more."""
        done = run(CONSOLE_SCRIPT, *arguments)
        lines = done.stderr.splitlines()
        assert done.returncode == 2
        assert len(lines) == 2, done.stderr
        assert problem in lines[0]
        assert re.fullmatch(r"\(see 'mcp-actors.* --help'\)", lines[1])
        assert "usage:" not in done.stderr

    def test_an_address_in_use_names_it_and_its_flag(self) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            done = run(CONSOLE_SCRIPT, "serve", "--state", "memory", "--http", f"127.0.0.1:{port}")
        assert done.returncode == 1
        assert done.stderr.splitlines()[-1] == (
            f"mcp-actors serve: error: cannot serve: 127.0.0.1:{port} is in use already "
            "(--http): stop what listens there, or give another port (0 picks a free one)"
        )


class TestEnvironment:
    def test_every_option_with_a_value_names_its_variable_in_help(self) -> None:
        cli = with_environment(parser(), {})
        helped = [
            action
            for action in cli._actions
            if action.option_strings
            and action.nargs != 0
            and "--help" not in action.option_strings
            and "--version" not in action.option_strings
        ]
        assert helped
        for action in helped:
            name = "MCP_ACTORS_" + action.option_strings[-1][2:].upper().replace("-", "_")
            assert f"[env {name}]" in (action.help or ""), action.option_strings

    def test_an_option_comes_from_its_variable_and_the_command_line_wins(self) -> None:
        environ = {
            "MCP_ACTORS_TTL": "5",
            "MCP_ACTORS_MODULE": "a:b c:d",
            "MCP_ACTORS_STATE": "memory",
        }
        from_environment = with_environment(parser(), environ).parse_args([])
        overridden = with_environment(parser(), environ).parse_args(["--ttl", "7"])
        assert _options(from_environment).runtime.ttl == 5.0
        assert from_environment.module == ["a:b", "c:d"]  # repeatable: values split by spaces
        assert from_environment.state == "memory"
        assert _options(overridden).runtime.ttl == 7.0

    def test_a_bad_value_in_a_variable_is_an_error_naming_the_variable(self) -> None:
        done = run(CONSOLE_SCRIPT, "serve", env={"MCP_ACTORS_SESSION_IDLE_TIMEOUT": "-1"})
        assert done.returncode == 2
        assert done.stderr.splitlines()[0] == (
            "mcp-actors serve: error: environment variable MCP_ACTORS_SESSION_IDLE_TIMEOUT: "
            "must be a positive number of seconds, got '-1'"
        )


class TestClusterHelp:
    def test_it_lists_only_what_a_cluster_takes_and_what_it_requires(self) -> None:
        pytest.importorskip("ray")
        done = run(CONSOLE_SCRIPT, "cluster", "--help")
        assert done.returncode == 0
        for stdio_only in ("--max-in-flight", "--session ", "--allow-exec", "--exec-allow"):
            assert stdio_only not in done.stdout
        http = done.stdout.split("--http HOST:PORT", 2)[2]
        assert http.lstrip().startswith("(required)")
        assert "(required) the store every shard shares" in done.stdout
