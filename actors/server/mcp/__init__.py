"""The MCP side of the server, whatever the transport: the SDK's ``Server`` in front of a host.

* `_adapter` — `McpAdapter`: lists the tools, hands each call to its host
  (`actors.CallTarget`), and tells the host who the caller is.
* `_catalog` — the resources, templates and prompts the modules declare, as MCP lists them.
* `_conversations` — conversation handles served: the start tool and what the lists carry.
* `_client_channels` — a call's progress, log messages and questions to its client.
* `_parked_calls` — a 2026-era call that asked its client, parked across requests.
* `_subscriptions` — resource subscriptions per key, and who hears an update.
* `_session_ends` — ending the sessions of connections that closed.
* `_plain` — plain requests and their answers, as every transport's lean path serves them.
* `_jsonrpc` — what the transports answer themselves: JSON-RPC messages the SDK
  cannot take, and batches.
"""
