"""``serve --mask-errors``: on by default over HTTP, off over stdio; what a client and the
log each see.

A real ``serve --http`` process serves a tool whose exception holds a secret, to the
official SDK client: the client reads an error id and never the secret; the server's log
has the id, the traceback and the secret, for the operator.
"""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING

import pytest

from actors.server._cli import _options, parser
from actors.server._serve import _masking_decided

from .._mcp_helpers import http_server, text_of

if TYPE_CHECKING:
    from pathlib import Path

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

SECRET = "sk-live-7Qm2ZtV9xR4pL8wN"
VAULT = f'''
    from actors import ToolError, ToolModule

    vault = ToolModule("vault")


    @vault.tool
    def unlock() -> str:
        """Fails unexpectedly, the secret in the exception's text."""
        raise KeyError("api key {SECRET}")


    @vault.tool
    def refuse() -> str:
        """Refuses on purpose, in the author's words."""
        raise ToolError("the vault is closed today")
'''
MASKED = re.compile(
    r"tool 'vault__unlock' failed with an unexpected error \(error id ([0-9a-f]{12})\); "
    r"the server's log has the details"
)


async def test_over_http_a_client_reads_the_error_id_and_the_log_the_secret(
    tmp_path: Path,
) -> None:
    """By default over HTTP: the id and no secret for the client, both in the log."""
    module = tmp_path / "vault.py"
    module.write_text(textwrap.dedent(VAULT))
    async with http_server("--module", str(module), "--state", "memory") as server:
        async with server.session() as client:
            failed = await client.call_tool("vault__unlock", {})
            refused = await client.call_tool("vault__refuse", {})
        log = server.log.text()
    assert failed.is_error
    seen = text_of(failed)
    match = MASKED.fullmatch(seen)
    assert match is not None, seen
    assert SECRET not in failed.model_dump_json()
    assert f"tool vault__unlock failed (error id {match.group(1)})" in log
    assert SECRET in log
    assert refused.is_error
    assert text_of(refused) == "the vault is closed today"


@pytest.mark.parametrize(
    ("arguments", "masked"),
    [
        ((), False),
        (("--http", "127.0.0.1:0"), True),
        (("--http", "127.0.0.1:0", "--no-mask-errors"), False),
        (("--mask-errors",), True),
    ],
    ids=["stdio", "http", "http-off", "stdio-on"],
)
def test_masking_follows_the_transport_unless_told(
    arguments: tuple[str, ...], masked: bool
) -> None:
    """On over HTTP (remote clients), off over stdio (the user's own parent); the flag wins.

    `serve` decides it, so that a server started from Python (`actors.server.serve`) masks
    as the command does."""
    options = _masking_decided(_options(parser().parse_args(list(arguments))))
    assert options.runtime.mask_errors is masked
