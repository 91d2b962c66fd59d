"""The serve command line: tokens files, token rules, and options refused as unsafe."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

import pytest
import trio

from actors.server import DEFAULT_RUNTIME, ConfigurationError, ServeOptions, read_tokens
from actors.server._cli import _options, _token, parser
from actors.server._options import describe_tokens

from .._mcp_helpers import SERVE, http_server

if TYPE_CHECKING:
    from pathlib import Path

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

LONG = "Zq9#xK2pLw7Vn4Rt"  # 16 characters, with a '#' inside


def tokens_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens.txt"
    path.write_text(text, encoding="utf-8")
    return path


class TestTokensFile:
    def test_a_hash_inside_a_token_is_part_of_it(self, tmp_path: Path) -> None:
        """``Zq9#xK2p…=tenantA`` is one token bound to tenantA, never the gateway ``Zq9``."""
        path = tokens_file(tmp_path, f"{LONG}=tenantA\n")
        assert read_tokens(path) == [(LONG, "tenantA")]

    def test_comments_are_whole_lines_or_follow_white_space(self, tmp_path: Path) -> None:
        """``# …`` lines, blank lines and `` # …`` tails are comments."""
        text = f"# operators\n\n   # indented comment\n{LONG}=alpha  # alpha's\n{LONG}x\t#gw\n"
        assert read_tokens(tokens_file(tmp_path, text)) == [(LONG, "alpha"), (LONG + "x", None)]

    @pytest.mark.parametrize(
        ("line", "problem"),
        [
            ("short=alpha", r"a token of 5 characters is too short to be secret"),
            (f"{LONG}=bad tenant!", r"expected one TOKEN or TOKEN=TENANT, found several words"),
            (f"{LONG}=t?", r"tenant 't\?' must be 1-64 letters"),
            (f"{LONG} {LONG}", r"expected one TOKEN or TOKEN=TENANT, found several words"),
            ("Zq9 #xK2pLw7Vn4Rt=tenantA", r"a token of 3 characters is too short"),
            (f"{LONG}\x07=alpha", r"a token must be printable text without spaces"),
        ],
    )
    def test_a_malformed_line_is_an_error_naming_its_number(
        self, tmp_path: Path, line: str, problem: str
    ) -> None:
        """The error names the file and line; the token itself is never repeated."""
        path = tokens_file(tmp_path, f"# first\n{LONG}=ok\n{line}\n")
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:3: {problem}") as caught:
            read_tokens(path)
        assert "Zq9" not in str(caught.value)

    async def test_a_malformed_file_stops_the_server_from_starting(self, tmp_path: Path) -> None:
        """Exit code 2 and the line number, before anything listens."""
        path = tokens_file(tmp_path, f"{LONG}=alpha\nshort\n")
        result = await trio.run_process(
            [*SERVE, "--http", "127.0.0.1:0", "--tokens-file", str(path)],
            capture_stderr=True,
            check=False,
            stdin=b"",
        )
        assert result.returncode == 2
        assert f"{path}:2: a token of 5 characters is too short".encode() in result.stderr
        assert b"listening on" not in result.stderr

    async def test_the_startup_log_counts_tokens_but_never_shows_them(self, tmp_path: Path) -> None:
        """One line: gateways and tokens per tenant."""
        secret_a, secret_b, gateway = "a" * 20, "b" * 20, "g" * 20
        path = tokens_file(tmp_path, f"{secret_a}=alpha\n{secret_b}=alpha\n{gateway}\n")
        async with http_server("--tokens-file", str(path)) as server:
            await server.log.wait_for(re.compile(r"tokens: .*"), server.process)
            log = server.log.text()
        assert "tokens: 1 gateway(s), tenant 'alpha': 2" in log
        assert all(secret not in log for secret in (secret_a, secret_b, gateway))

    def test_describe_tokens_without_tokens_says_everyone_is_trusted(self) -> None:
        """No tokens at all is spelled out, since it means every client is trusted."""
        assert describe_tokens({}).startswith("none (every client")


def test_a_tenant_with_a_trailing_newline_is_refused() -> None:
    """A tenant is 1-64 letters, digits, '.', '_' or '-': a newline is none of them."""
    with pytest.raises(argparse.ArgumentTypeError, match=r"^tenant 'alpha\\n' must be"):
        _token("Zq9xK2pLw7Vn4Rt3sYbT0uQ=alpha\n")


class TestExecNextToTenants:
    def test_exec_with_tenant_tokens_is_refused(self) -> None:
        """A program the workspace runs could read the tokens and reach every tenant."""
        options = ServeOptions(
            allow_exec=True, http=("127.0.0.1", 0), tokens={"a" * 16: "alpha", "g" * 16: None}
        )
        with pytest.raises(
            ConfigurationError, match=r"^refusing --allow-exec next to tenant tokens \(alpha\)"
        ):
            options.check()

    def test_exec_over_http_without_tokens_is_refused(self) -> None:
        """Without tokens any local user could run programs as the server's user."""
        options = ServeOptions(allow_exec=True, http=("127.0.0.1", 0))
        with pytest.raises(ConfigurationError, match=r"^refusing --allow-exec over HTTP without"):
            options.check()

    @pytest.mark.parametrize(
        "options",
        [
            ServeOptions(allow_exec=True),  # stdio: the parent is the only client
            ServeOptions(allow_exec=True, http=("127.0.0.1", 0), tokens={"g" * 16: None}),
            ServeOptions(
                allow_exec=True,
                http=("127.0.0.1", 0),
                tokens={"a" * 16: "alpha"},
                unsafe_shared_exec=True,
            ),
        ],
        ids=["stdio", "gateways-only", "unsafe-flag"],
    )
    def test_exec_is_allowed_where_every_client_is_trusted_or_the_risk_is_accepted(
        self, options: ServeOptions
    ) -> None:
        """Stdio, gateway tokens only, or the loudly named flag."""
        options.check()

    async def test_the_command_line_refuses_it_with_exit_2(self) -> None:
        """The same rule from the command line, before anything listens."""
        result = await trio.run_process(
            [*SERVE, "--http", "127.0.0.1:0", "--allow-exec", "--token", "a" * 16 + "=alpha"],
            capture_stderr=True,
            check=False,
            stdin=b"",
        )
        assert result.returncode == 2
        assert b"refusing --allow-exec next to tenant tokens" in result.stderr


class TestDefaults:
    def test_the_command_lines_defaults_are_serve_options_defaults(self) -> None:
        """Nothing is typed twice: `serve` with no flags describes exactly `ServeOptions()`."""
        args = parser().parse_args([])
        assert _options(args) == ServeOptions()
        assert _options(args).runtime == DEFAULT_RUNTIME

    def test_own_modules_replace_the_default_built_ins(self) -> None:
        args = parser().parse_args(["--module", "examples.notes:notes"])
        assert _options(args).modules == ("examples.notes:notes",)
        args = parser().parse_args(["--modules", "planning", "--module", "examples.notes:notes"])
        assert _options(args).modules == ("planning", "examples.notes:notes")
