"""Serve over Streamable HTTP from a script, with the options the command line has."""

import sys
from pathlib import Path

from actors.server import ServeOptions, configure_logging, read_tokens, run


def options(tokens_file: Path) -> ServeOptions:
    tokens = dict(read_tokens(tokens_file))  # --tokens-file's: TOKEN or TOKEN=TENANT
    return ServeOptions(
        modules=("planning", "content_store"),
        http=("127.0.0.1", 8765),
        tokens=tokens,
        state="sqlite:///state.db",
        max_sessions_per_token=20,
    )


if __name__ == "__main__":
    configure_logging("info")  # one line per call on stderr, as the command logs
    run(options(Path(sys.argv[1])))  # python serve_from_python.py tokens.txt
