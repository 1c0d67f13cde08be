#!/usr/bin/env bash
# mcp.ts's packaging against code written elsewhere: the MCP Bundles `pack` makes through the official mcpb CLI and
# under old Nodes, and the TOML subset reader and table editor (Codex's config.toml) against a full TOML parser. One
# line per check, "ok: ..." or "FAIL: ..." (then the evidence, indented), a count at the end, exit 1 when a check
# fails. From the repository root:
#   interop/packages.sh                       both parts
#   interop/packages.sh toml                  some of them: mcpb, toml
#   MCP_RT="deno run -A" interop/packages.sh  the runtime that runs ./mcp.ts (default "node"; not bun: it cannot pack)
# The parts:
#   mcpb   mcp.ts pack testdata/tools -o T/tools.mcpb --name tools --author interop; `mcpb unpack` and `mcpb validate`
#          (@anthropic-ai/mcpb) take it; wc.sh and shout.py are executable again, server/mcp.mjs is there; the
#          manifest's mcp_config (node ${__dirname}/server/mcp.mjs serve ${__dirname}/tools) run with Node 20 and
#          Node 18 for `node` lists wc and shout (mcp.ts list -v; the .ts plugins skipped: "cannot load TypeScript")
#          and answers wc; with Node 22 every tool, add too; the SDK v1 client (sdk-client.sh) lists wc under Node 20.
#          Then a folder holding only twice.mjs: packed, validated, compatibility node >=18.0.0, and under Node 18
#          `call ... twice n=21` prints 42
#   toml   lib/packages-toml.mjs: parseTomlText against smol-toml on Codex configs and random documents, invalid
#          documents refused, editTomlTable's add/replace/remove of mcp_servers.X read back by smol-toml (see there);
#          PACKAGES_TOML_SEED (default 1) and PACKAGES_TOML_COUNT (default 300 random objects) vary it
# @anthropic-ai/mcpb and smol-toml are installed once into $IOP_CACHE/packages, Node 20 and 18 into $IOP_CACHE/node20
# and $IOP_CACHE/node18 (one npm folder holds one "node"), pinned below. A command that runs over
# PACKAGES_CHECK_TIMEOUT s (default 60) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(mcpb toml)
for part; do
  if [[ " ${PARTS[*]} " != *" $part "* ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- "${PARTS[@]}"
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
PACKAGES=(@anthropic-ai/mcpb@2.1.2 smol-toml@1.9.1)
NODE20=node@20.20.2
NODE18=node@18.20.8
iop_install "$IOP_CACHE/packages" "${PACKAGES[@]}"
if [[ " $* " == *" mcpb "* ]]; then
  iop_install "$IOP_CACHE/node20" "$NODE20"
  iop_install "$IOP_CACHE/node18" "$NODE18"
fi
cd "$here/.."

RT=${MCP_RT:-node}
read -ra rt <<<"$RT"
MCP=("${rt[@]}" ./mcp.ts)
MCPB=$IOP_CACHE/packages/node_modules/.bin/mcpb
NODE20_BIN=$IOP_CACHE/node20/node_modules/.bin/node
NODE18_BIN=$IOP_CACHE/node18/node_modules/.bin/node
LIMIT=${PACKAGES_CHECK_TIMEOUT:-60}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop-packages.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
part=

SCRIPT=packages.sh
# shellcheck source=interop/lib/checks.sh
. "$here/lib/checks.sh"

# The command line as shown: mcp.ts for the runtime and ./mcp.ts, T for the scratch folder, node18/20 for the old
# Nodes, mcpb for the CLI.
shorten() {
  local line=$1
  line=${line//"${MCP[*]}"/mcp.ts}
  line=${line//"$MCPB"/mcpb}
  line=${line//"$NODE20_BIN"/node20}
  line=${line//"$NODE18_BIN"/node18}
  line=${line//"$IOP_NODE"/node}
  line=${line//"$work"/T}
  printf '%s' "$line"
}



# manifest FILE EXPR: a JavaScript expression of the manifest `m` (JSON.parse of FILE), printed.
manifest() {
  "$IOP_NODE" -e 'const m = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
    const v = (0, eval)("(m) => " + process.argv[2])(m);
    console.log(typeof v === "string" ? v : JSON.stringify(v));' "$1" "$2"
}

# server_command DIR NODE: the manifest's mcp_config as one command line, ${__dirname} = DIR, `node` = NODE.
server_command() {
  local words=() args=() arg
  mapfile -t args < <(manifest "$1/manifest.json" 'm.server.mcp_config.args.join("\n")')
  for arg in "${args[@]}"; do
    # shellcheck disable=SC2016 # the manifest's own ${__dirname}
    words+=("$(printf '%q' "${arg//'${__dirname}'/$1}")")
  done
  [ "$(manifest "$1/manifest.json" m.server.mcp_config.command)" = node ] || echo "packages.sh: mcp_config.command is not node" >&2
  printf '%q %s' "$2" "${words[*]}"
}

# unpacked BUNDLE DIR: mcpb unpack BUNDLE DIR, then mcpb validate DIR/manifest.json, each a check.
unpacked() {
  run "$MCPB" unpack "$1" "$2"
  expect 0 'out=unpacked successfully'
  run "$MCPB" validate "$2/manifest.json"
  expect 0 'out=validation passes'
}

part_mcpb() {
  part=mcpb
  echo
  echo "## mcpb: mcp.ts pack through @anthropic-ai/mcpb $("$MCPB" --version), its server on Node $("$NODE20_BIN" --version)" \
    "and $("$NODE18_BIN" --version)"
  run "${MCP[@]}" pack testdata/tools -o "$work/tools.mcpb" --name tools --author interop
  expect 0 'out=^packed 7 tools of .* into .*tools\.mcpb'
  [ -s "$work/tools.mcpb" ] || return 0
  local dir=$work/unpacked
  unpacked "$work/tools.mcpb" "$dir"
  check "tools/wc.sh and tools/shout.py are executable, server/mcp.mjs is there" \
    test -x "$dir/tools/wc.sh" -a -x "$dir/tools/shout.py" -a -f "$dir/server/mcp.mjs"
  local tools compat
  tools=$(manifest "$dir/manifest.json" 'm.tools.map((t) => t.name).join(" ")')
  compat=$(manifest "$dir/manifest.json" m.compatibility)
  echo "# manifest: tools: $tools"
  echo "# manifest: compatibility: $compat"
  echo "# manifest: mcp_config: $(manifest "$dir/manifest.json" m.server.mcp_config)"
  check "the manifest lists the 7 tools, node >=22.18.0 (TypeScript plugins)" \
    test "$tools|$compat" = 'add echo fail shout slow wc weather|{"runtimes":{"node":">=22.18.0"}}'

  local node server
  for node in "$NODE20_BIN" "$NODE18_BIN"; do
    server=$(server_command "$dir" "$node")
    run "${MCP[@]}" list "$server" -v
    expect 0 'out=^wc ' 'out=^shout ' '!out=^add ' 'err=cannot load TypeScript'
    run "${MCP[@]}" call "$server" wc 'text=one two'
    expect 0 'out=^lines=1 words=2 bytes=7$'
  done
  server=$(server_command "$dir" "$IOP_NODE")
  run "${MCP[@]}" list "$server" -v
  expect 0 'out=^add ' 'out=^echo ' 'out=^fail ' 'out=^shout ' 'out=^slow ' 'out=^wc ' 'out=^weather '
  run interop/sdk-client.sh "$(server_command "$dir" "$NODE20_BIN")" list
  expect 0 'out="name": "wc"' 'out="name": "shout"' '!out="name": "add"'

  # A folder of JavaScript alone: a bundle for Node 18.
  mkdir -p "$work/jskit"
  cat >"$work/jskit/twice.mjs" <<'EOF'
export default { description: "Twice n", inputSchema: {type:"object",properties:{n:{type:"number"}}}, run: ({ n }) => 2 * n };
EOF
  run "${MCP[@]}" pack "$work/jskit" -o "$work/jskit.mcpb" --name jskit --author interop
  expect 0 'out=^packed 1 tools of .* into .*jskit\.mcpb'
  [ -s "$work/jskit.mcpb" ] || return 0
  unpacked "$work/jskit.mcpb" "$work/jskit-unpacked"
  tools=$(manifest "$work/jskit-unpacked/manifest.json" 'm.tools.map((t) => t.name).join(" ")')
  compat=$(manifest "$work/jskit-unpacked/manifest.json" m.compatibility)
  echo "# manifest: tools: $tools"
  echo "# manifest: compatibility: $compat"
  check "the manifest lists twice, node >=18.0.0 (JavaScript alone)" \
    test "$tools|$compat" = 'twice|{"runtimes":{"node":">=18.0.0"}}'
  run "${MCP[@]}" call "$(server_command "$work/jskit-unpacked" "$NODE18_BIN")" twice n=21
  expect 0 'out=^42$'
}

part_toml() {
  part=toml
  echo
  echo "## toml: parseTomlText and editTomlTable against smol-toml $(manifest \
    "$IOP_CACHE/packages/node_modules/smol-toml/package.json" m.version)"
  local status=0 out
  out=$("${guard[@]}" "$IOP_NODE" interop/lib/packages-toml.mjs "${PACKAGES_TOML_SEED:-1}" \
    "${PACKAGES_TOML_COUNT:-300}" 2>&1) || status=$?
  [ "$status" != 130 ] || exit 130 # Ctrl-C
  out=$(printf '%s\n' "$out" | sed "s/^FAIL: /FAIL: [$part] /")
  printf '%s\n' "$out"
  passed=$((passed + $(printf '%s\n' "$out" | grep -c '^ok: ' || true)))
  failed=$((failed + $(printf '%s\n' "$out" | grep -c '^FAIL: ' || true)))
  if [ "$status" != 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL: '; then
    echo "FAIL: [$part] lib/packages-toml.mjs exited $status"
    failed=$((failed + 1))
  fi
}

began=$(now)
for part; do "part_$part"; done
echo
echo "packages.sh: $passed passed, $failed failed ($RT, $(since "$began") s)"
[ "$failed" = 0 ]
