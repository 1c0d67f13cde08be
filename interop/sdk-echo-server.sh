#!/usr/bin/env bash
# A stdio MCP server built with the official TypeScript SDK v1's McpServer, serving one tool, `echo` ({text} ->
# text): the benchmark's peer. From the repository root:
#   MCP_BENCH_PEERS="interop/sdk-echo-server.sh" deno task bench
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh" # installs on first use (its output goes to stderr: stdout is the protocol's)
exec "$IOP_NODE" "$here/lib/sdk-echo-server.mjs"
