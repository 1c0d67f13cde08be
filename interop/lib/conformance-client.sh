#!/bin/sh
# The client command that interop/conformance.sh gives the conformance suite. The suite appends the URL of the HTTP
# server it runs for the scenario (and sets MCP_CONFORMANCE_SCENARIO); this wraps that URL in a stdio server
# (stdio-to-http.mjs) and runs the mcp.ts invocation in MCP_INTEROP_CLIENT against it.
set -eu
url=$1
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
server="$(quote "$IOP_NODE") $(quote "$(dirname "$0")/stdio-to-http.mjs") $(quote "$url")"
case ${MCP_CONFORMANCE_SCENARIO:-} in
  tools_call) set -- call "$server" add_numbers '{"a":2,"b":3}' ;;
  *) set -- info "$server" ;;
esac
shown=$MCP_INTEROP_CLIENT
for arg; do shown="$shown $(quote "$arg")"; done
echo "conformance-client: $shown" >&2
eval "exec $MCP_INTEROP_CLIENT \"\$@\""
