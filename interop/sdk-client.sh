#!/usr/bin/env bash
# Drives an MCP server with an official TypeScript SDK client and prints what it received: results as JSON on stdout;
# progress, log messages, serverInfo (and, over HTTP or with --v2, the era) on stderr. Run from the repository root.
#
# stdio: the SDK v1 Client + StdioClientTransport (lib/sdk-client.mjs)
#   interop/sdk-client.sh "deno run -A mcp.ts serve testdata/tools" list
#   interop/sdk-client.sh "bun mcp.ts serve testdata/tools" ping
#   interop/sdk-client.sh "node mcp.ts serve testdata/tools" call add '{"a":2,"b":3}'
#   interop/sdk-client.sh "deno run -A mcp.ts serve testdata/tools" call slow '{"steps":3}' --progress
#   interop/sdk-client.sh "deno run -A mcp.ts serve testdata/tools" call slow '{"steps":50}' --cancel-after 300
# The server command is run by sh -c, so it is quoted as in a shell.
#
# stdio, SDK v2: --v2, then as above (lib/sdk-v2-client.mjs): @modelcontextprotocol/client's Client +
# StdioClientTransport with versionNegotiation { mode: "auto" }: server/discover on a short-lived sibling of the server,
# then 2026-07-28 (stateless) when it offers it, else initialize. --wire: one stderr line per JSON-RPC message.
#   interop/sdk-client.sh --v2 "deno run -A mcp.ts serve testdata/tools" call slow '{"steps":3,"ms":100}' --progress
#   interop/sdk-client.sh --v2 "mcp-server-everything stdio" list --wire
#
# Streamable HTTP: --http v1|v2, then a serve command without --http, or the URL of a running server
# (lib/sdk-http-client.mjs). v1: @modelcontextprotocol/sdk, a 2025-11-25 session. v2: @modelcontextprotocol/client
# with versionNegotiation { mode: "auto" }: 2026-07-28 (stateless) when the server offers it, else a session.
#   interop/sdk-client.sh --http v1 "deno run -A mcp.ts serve testdata/tools" list
#   interop/sdk-client.sh --http v2 "bun mcp.ts serve testdata/tools" call slow '{"steps":3,"ms":100}' --progress
#   interop/sdk-client.sh --http v2 "deno run -A mcp.ts serve testdata/tools" call slow '{"steps":50}' --cancel-after 300
#   interop/sdk-client.sh --http v1 http://127.0.0.1:8080/mcp call add '{"a":2,"b":3}' --wire
# With a command it runs `<command> --http 127.0.0.1:0` through sh in a process group of its own, reads the URL from
# its "mcp: serving http://..." line, runs the client, then stops it (SIGTERM to the group, SIGKILL after 10 s) and
# prints what else the server wrote on stderr. --wire: one stderr line per HTTP request and answer.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
if [ "${1:-}" = --v2 ]; then
  shift
  exec "$IOP_NODE" "$here/lib/sdk-v2-client.mjs" "$@"
fi
[ "${1:-}" = --http ] || exec "$IOP_NODE" "$here/lib/sdk-client.mjs" "$@"

usage() {
  echo 'usage: sdk-client.sh --http v1|v2 "<serve command>"|URL list|ping|call TOOL [JSON] [--progress]' \
    '[--cancel-after MS] [--wire]' >&2
  exit 2
}
[ $# -ge 4 ] || usage
sdk=$2
target=$3
shift 3
case $sdk in v1 | v2) ;; *) usage ;; esac
case $target in
  http://* | https://*) exec "$IOP_NODE" "$here/lib/sdk-http-client.mjs" "$sdk" "$target" "$@" ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
server=
# shellcheck source-path=SCRIPTDIR source=lib/serve-http.sh
. "$here/lib/serve-http.sh"
stop_server() {
  [ -n "$server" ] || return 0
  local status=0 began=${EPOCHREALTIME:-} took=
  stop_http_server || status=$?
  # how long it took (bash 5): calls still running delay a SIGTERM'd server by up to 2 s
  [ -z "$began" ] || took=" in $(awk "BEGIN { printf \"%.1f\", ${EPOCHREALTIME/,/.} - ${began/,/.} }") s"
  echo "sdk-client: stopped the server$took (exit $status)" >&2
  if grep -qv '^mcp: serving ' "$work/stderr"; then
    echo "sdk-client: the server's stderr:" >&2
    grep -v '^mcp: serving ' "$work/stderr" | sed 's/^/  /' >&2
  fi
}
trap 'stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT # Ctrl-C: the server is in a process group of its own, so only stop_server reaches it
trap 'exit 143' TERM

start_http_server "$target --http 127.0.0.1:0" sdk-client || exit 1
echo "sdk-client: $target --http 127.0.0.1:0, serving $url" >&2
status=0
"$IOP_NODE" "$here/lib/sdk-http-client.mjs" "$sdk" "$url" "$@" || status=$?
stop_server
exit "$status"
