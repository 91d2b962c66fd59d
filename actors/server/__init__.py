"""The MCP server: serve any tool modules over stdio or Streamable HTTP.

Needs the ``server`` extra (the ``mcp`` SDK and httptools); ``import actors``
never imports it. From Python:

```python
from actors.server import ServeOptions, run
run(ServeOptions(modules=(notes,), http=("127.0.0.1", 8765)))
```

or ``await serve(options)`` inside trio; from a shell, ``mcp-actors serve``
(`main`) with the same options. Over HTTP, clients bring static bearer tokens
(`ServeOptions.tokens`) or an OAuth issuer's access tokens (`OAuthSettings`,
the ``oauth`` extra).

The package, from the door in:

* `_cli` (the command line), `_inspect` (``mcp-actors inspect``), `_options`
  (`ServeOptions`, checked before anything starts), `_serve` (serving one of the
  transports until shutdown), `_logs` (``--log-format``), `_configuration`.
* `_stdio` — the stdio transport; `http/` — the Streamable HTTP transport on our
  own HTTP/1.1 server (its map is its ``__init__``); `auth/` — tokens, OAuth, JWT.
* `mcp/` — the MCP adapter and its parts, shared by both transports.
* Beneath them: `_fair_shares` (caps shared per token and per tenant),
  `_handle_keys` (where conversation-handle keys are kept), `_addresses` (loopback).

Imports point down this list; no module imports one above it.
"""

from .._target import CallTarget as CallTarget
from ._cli import MIN_TOKEN_LENGTH as MIN_TOKEN_LENGTH
from ._cli import configure_logging as configure_logging
from ._cli import main as main
from ._cli import read_tokens as read_tokens
from ._configuration import ConfigurationError as ConfigurationError
from ._module_specs import load_module as load_module
from ._options import DEFAULT_MODULES as DEFAULT_MODULES
from ._options import DEFAULT_RUNTIME as DEFAULT_RUNTIME
from ._options import KNOWN_MODULES as KNOWN_MODULES
from ._options import ServeOptions as ServeOptions
from ._serve import Backend as Backend
from ._serve import local_runtime as local_runtime
from ._serve import run as run
from ._serve import serve as serve
from .auth._settings import ASYMMETRIC_ALGORITHMS as ASYMMETRIC_ALGORITHMS
from .auth._settings import OAuthSettings as OAuthSettings
from .http._app import MCP_PATH as MCP_PATH
from .http._app import http_app as http_app
from .http._endpoint import McpEndpoint as McpEndpoint
from .mcp._adapter import McpAdapter as McpAdapter
from .mcp._adapter import connection_session as connection_session
from .mcp._adapter import stdio_caller as stdio_caller

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "DEFAULT_MODULES",
    "DEFAULT_RUNTIME",
    "KNOWN_MODULES",
    "MCP_PATH",
    "MIN_TOKEN_LENGTH",
    "Backend",
    "CallTarget",
    "ConfigurationError",
    "McpAdapter",
    "McpEndpoint",
    "OAuthSettings",
    "ServeOptions",
    "configure_logging",
    "connection_session",
    "http_app",
    "load_module",
    "local_runtime",
    "main",
    "read_tokens",
    "run",
    "serve",
    "stdio_caller",
]
