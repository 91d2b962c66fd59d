# The command lines the bridges' pages show; tests/test_mcp_remote.py and
# tests/test_supergateway.py run each one (on a free port).

# --8<-- [start:serve-http]
mcp-actors serve --http 127.0.0.1:8000 --modules planning
# --8<-- [end:serve-http]

# --8<-- [start:stateless]
npx -y supergateway@4.0.0 --stdio "mcp-actors serve --handles --modules planning" \
    --outputTransport streamableHttp --port 8000
# --8<-- [end:stateless]

# --8<-- [start:stateful]
npx -y supergateway@4.0.0 --stdio "mcp-actors serve --handles --modules planning" \
    --outputTransport streamableHttp --stateful --port 8000
# --8<-- [end:stateful]
