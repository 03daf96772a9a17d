#!/usr/bin/env bash
# Installs the peers the bench measures beside wasmgate, from their registries, into
# target/peers (nothing is installed by the bench itself, nor by the tests):
#   mcp-proxy (crates.io, joshrotenberg/mcp-proxy): a Rust MCP reverse proxy, HTTP front,
#   stdio backends.
# Then `bash scripts/bench.sh --only http` measures it beside the gateway's HTTP front
# (`mcp-proxy` in the results and the plot). Takes some minutes: it compiles from source.
set -euo pipefail
cd "$(dirname "$0")/.."
mcp_proxy_version=0.6.0
cargo install --quiet --locked --root target/peers mcp-proxy --version "$mcp_proxy_version"
echo "installed: $(target/peers/bin/mcp-proxy --version 2>/dev/null || echo "mcp-proxy $mcp_proxy_version")" >&2
