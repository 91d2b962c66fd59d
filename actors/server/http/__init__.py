"""Streamable HTTP: our own HTTP/1.1 server, the layers in front of MCP, and the fast path.

A request meets these modules in this order:

* `_server` — the HTTP/1.1 server on trio (httptools parses): connections, limits,
  deadlines, per-address caps. It tries the fast path's answer first, then the ASGI app.
* `_host_rules` — the first ASGI layer: ``Host``, ``Origin`` and forwarded headers.
* `_admission` — the gate before the SDK's Streamable HTTP transport: the bearer
  token (`actors.server.auth`), the body's size and JSON-RPC screening
  (`actors.server.mcp._jsonrpc`), the sessions each principal and tenant may open.
* `_fast_path` — the plain requests of the 2026 era answered without the SDK's
  transport; `_fast_path_sessions` — the same for a plain call inside a 2025-era
  session, on a resumable stream of our own.
* `_event_store` — the SSE events of resumable streams, per session and bounded.
* `_session_prefix` — session ids that name their front, for a load balancer.
* `_responses` — the JSON-RPC errors the HTTP side answers itself, and the refusal log.
* `_operator_routes` — ``/healthz``, ``/readyz`` and ``/metrics``, and serving any
  ASGI app on `_server`.
* `_app` — puts them together for ``serve --http``; `_endpoint` — the same endpoint
  as an ASGI app to mount in FastAPI or Starlette (`McpEndpoint`).

What neither fast path answers (a 2025-era ``initialize``, GET streams, calls that
ask the client) goes to the SDK's ``StreamableHTTPSessionManager``, on this same server.
"""
