#!/usr/bin/env bash
# Drives a stdio MCP server with the official TypeScript SDK v1 Client + StdioClientTransport (lib/sdk-client.mjs)
# and prints what it received: results as JSON on stdout; progress, log messages and serverInfo on stderr.
# Run from the repository root:
#   interop/sdk-client.sh "deno run -A mcp.ts serve testdata/tools" list
#   interop/sdk-client.sh "bun mcp.ts serve testdata/tools" ping
#   interop/sdk-client.sh "node mcp.ts serve testdata/tools" call add '{"a":2,"b":3}'
#   interop/sdk-client.sh "deno run -A mcp.ts serve testdata/tools" call slow '{"steps":3}' --progress
#   interop/sdk-client.sh "deno run -A mcp.ts serve testdata/tools" call slow '{"steps":50}' --cancel-after 300
# The server command is run by sh -c, so it is quoted as in a shell.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
exec "$IOP_NODE" "$here/lib/sdk-client.mjs" "$@"
