#!/usr/bin/env bash
# Installs the real MCP peers that the interop scripts check mcp.ts against, once, into a cache outside
# the checkout: $MCP_INTEROP_CACHE, default ~/.cache/mcp-interop. Needs only Node (any version) and npm.
#
#   interop/setup.sh            install (a no-op once done; the stamp is keyed by the package list)
#   . interop/setup.sh          install, then export IOP_CACHE and IOP_NODE, set PATH and define free_port (from bash):
#       - the cache's node_modules/.bin first: mcp-server-everything, mcp-server-filesystem, conformance, ...
#       - deno and bun: yours when they are on PATH, else pinned ones installed into the cache (PATH's end)
#       - node: yours when it is >= 22.18, else a pinned Node 22 installed into the cache (PATH's front)

IOP_CACHE=${MCP_INTEROP_CACHE:-$HOME/.cache/mcp-interop}
IOP_PEERS=(
  @modelcontextprotocol/sdk@1.32.2
  @modelcontextprotocol/client@2.4.0
  @modelcontextprotocol/server@2.4.0
  @modelcontextprotocol/server-everything@2026.8.31
  @modelcontextprotocol/server-filesystem@2026.8.31
  @modelcontextprotocol/server-memory@2026.8.31
  @modelcontextprotocol/conformance@0.2.0-alpha.12
)
IOP_DENO=deno@2.9.6
IOP_BUN=bun@1.4.4
IOP_NODE22=node@22.23.3

# npm install PACKAGES into DIR unless DIR's stamp for exactly that list exists.
iop_install() (
  set -euo pipefail
  dir=$1
  shift
  stamp="$dir/.installed-$(printf '%s\n' "$@" | cksum | cut -d' ' -f1)"
  [ -f "$stamp" ] && exit 0
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || printf '{ "name": "mcp-interop-cache", "private": true }\n' >"$dir/package.json"
  echo "interop: installing $* into $dir" >&2
  cd "$dir"
  npm install --no-audit --no-fund --loglevel=error "$@" >&2
  printf '%s\n' "$@" >"$stamp"
)

# Is a node >= 22.18 first on PATH?
iop_node_ok() {
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 18) ? 0 : 1)' \
    2>/dev/null
}

iop_setup() {
  local runtimes=() bin="$IOP_CACHE/node_modules/.bin" rt="$IOP_CACHE/runtimes" path node_ok=yes
  # Look for runtimes on PATH as it was before an earlier `. setup.sh` added the cache to it.
  path=":$PATH:"
  path=${path//":$bin:"/:}
  path=${path//":$rt/node_modules/node/bin:"/:}
  path=${path//":$rt/node_modules/.bin:"/:}
  path=${path#:}
  path=${path%:}
  PATH=$path command -v deno >/dev/null || runtimes+=("$IOP_DENO")
  PATH=$path command -v bun >/dev/null || runtimes+=("$IOP_BUN")
  PATH=$path iop_node_ok || node_ok=no
  [ $node_ok = yes ] || runtimes+=("$IOP_NODE22")

  iop_install "$IOP_CACHE" "${IOP_PEERS[@]}" || return 1
  if [ ${#runtimes[@]} -gt 0 ]; then iop_install "$rt" "${runtimes[@]}" || return 1; fi

  PATH="$bin:$path:$rt/node_modules/.bin"
  [ $node_ok = yes ] || PATH="$rt/node_modules/node/bin:$PATH"
  IOP_NODE=$(command -v node)
  export IOP_CACHE IOP_NODE PATH
}

# free_port: a TCP port free on 127.0.0.1 just now (for servers that cannot be given port 0).
free_port() {
  "$IOP_NODE" -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => {
    console.log(s.address().port); s.close(); })'
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  iop_setup
  echo "interop: peers in $IOP_CACHE; node $("$IOP_NODE" --version), deno $(deno --version | head -n1 | cut -d' ' -f2)," \
    "bun $(bun --version)" >&2
else
  iop_setup
fi
