#!/usr/bin/env bash
# Sessions in mcp.ts's per-user daemon against real peers: the official SDK clients through `mcp.ts attach`, 2025-11-25
# tasks detached into a session, and the warm-call latency of the two other tools that keep sessions. One line per
# check, "ok: ..." or "FAIL: ..." (then what the command printed, indented), "note: ..." for findings that do not
# fail, a count at the end, exit 1 when a check fails. From the repository root:
#   interop/sessions.sh                       all three parts
#   interop/sessions.sh attach tasks          some of them: attach, tasks, peers
#   MCP_RT="deno run -A" interop/sessions.sh  the runtime that runs ./mcp.ts (default "node")
# Every part uses one session, `mcp.ts connect ev "mcp-server-everything stdio"`, in a daemon of this run alone
# (MCP_TS_STATE_DIR, a fresh 0700 directory under the scratch folder T). The parts:
#   attach  the SDK v1 and v2 clients (sdk-client.sh) list and call echo through `mcp.ts attach ev`; then four at once,
#           each through its own attach process: v1 calls simulate-research-query (a 2025-11-25 task the session
#           follows for it), v2 lists, v1 and v2 call echo with their own messages: each gets its own answer, the three
#           quick ones before the report; `batch @ev --concurrency 3`; `sessions --json` counts the 8 calls and, once
#           the clients are gone, no connection. A note when `call @ev echo message=x --json` prints another result
#           than the same call without the session
#   tasks   `call @ev simulate-research-query topic=x --detach` prints an id, `task @ev get ID` its status,
#           `task @ev result ID` waits for the report, `task @ev get ID` then says completed; an unknown id is exit 2;
#           without a session `call "mcp-server-everything stdio" ... --detach` is refused (exit 2)
#   peers   SESSIONS_CALLS (20) sequential calls of echo, timed (median and min wall ms, after one untimed call) by
#           lib/sessions-time.mjs: `mcp.ts call @ev` (MCP_RT, and `deno run -A` when deno is on PATH), mcporter's
#           keep-alive daemon (`mcporter --config T/peers.json daemon start`, then `call ev.echo message=x`), mcpc's
#           bridge (`mcpc connect T/peers.json:ev @ev`, then `@ev tools-call echo message:=x`), `mcp.ts call
#           "mcp-server-everything stdio"` without a session, and `mcp.ts --version`, the floor; a table. The one
#           check of time: the session call is faster than the same runtime's call without one
# Then `disconnect ev`, after which the daemon ends by itself. mcporter and @apify/mcpc are installed once into
# $IOP_CACHE/sessions, pinned below, and run with their state under T (XDG_*_HOME, MCPC_HOME_DIR; no imports of other
# clients' configs). On exit, also on Ctrl-C: `mcp.ts daemon stop`, `mcporter daemon stop`, `mcpc @ev close`. A
# command that runs over SESSIONS_CHECK_TIMEOUT s (default 60) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(attach tasks peers)
for part; do
  if [[ " ${PARTS[*]} " != *" $part "* ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- "${PARTS[@]}"
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
PEERS=(mcporter@0.12.3 @apify/mcpc@0.2.6)
[[ " $* " != *" peers "* ]] || iop_install "$IOP_CACHE/sessions" "${PEERS[@]}"
cd "$here/.."

RT=${MCP_RT:-node}
read -ra rt <<<"$RT"
MCP=("${rt[@]}" ./mcp.ts)
CALLS=${SESSIONS_CALLS:-20}
LIMIT=${SESSIONS_CHECK_TIMEOUT:-60}
guard=()
long=()
if command -v timeout >/dev/null; then
  guard=(timeout --foreground -k 5 "$LIMIT")
  long=(timeout --foreground -k 5 "$((LIMIT * 5))")
fi
EVERYTHING="mcp-server-everything stdio"
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop-sessions.XXXXXX")
MCP_TS_STATE_DIR=$(mktemp -d "$work/state.XXXXXX")
export MCP_TS_STATE_DIR
BIN=$IOP_CACHE/sessions/node_modules/.bin
MCPORTER=(env XDG_CONFIG_HOME="$work/xdg/config" XDG_STATE_HOME="$work/xdg/state" XDG_CACHE_HOME="$work/xdg/cache"
  XDG_DATA_HOME="$work/xdg/data" "$BIN/mcporter" --config "$work/peers.json")
MCPC=(env MCPC_HOME_DIR="$work/mcpc" "$BIN/mcpc")
connected=      # yes once session ev is open
mcporter_up=    # yes once mcporter's daemon was started
mcpc_up=        # yes once mcpc's session @ev was made
stdin=/dev/null # what run gives the command on stdin
passed=0
failed=0
part=

cleanup() {
  [ -z "$mcpc_up" ] || "${guard[@]}" "${MCPC[@]}" @ev close >/dev/null 2>&1 || true
  [ -z "$mcporter_up" ] || "${guard[@]}" "${MCPORTER[@]}" daemon stop >/dev/null 2>&1 || true
  "${guard[@]}" "${MCP[@]}" daemon stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SCRIPT=sessions.sh
# shellcheck source=interop/lib/checks.sh
. "$here/lib/checks.sh"

# The command line as shown: mcp.ts for the runtime and ./mcp.ts, mcporter and mcpc without their environment and
# folder, T for the scratch folder.
shorten() {
  local line=$1
  line=${line//"${MCPORTER[*]}"/mcporter --config "$work/peers.json"}
  line=${line//"${MCPC[*]}"/mcpc}
  line=${line//"${MCP[*]}"/mcp.ts}
  line=${line//"$IOP_NODE"/node}
  line=${line//"$work"/T}
  printf '%s' "$line"
}


# spawn NAME COMMAND...: runs it in the background (stdin: nothing), its stdout and stderr in $work/NAME.out and .err,
# its exit code and end time in $work/NAME.done; collect NAME then makes it the last run.
spawn() {
  local name=$1
  shift
  command_line "$@" >"$work/$name.ran"
  now >"$work/$name.began"
  (
    code=0
    "${guard[@]}" "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null || code=$?
    echo "$code $(now)" >"$work/$name.done"
  ) &
}
collect() {
  local ended
  ran=$(cat "$work/$1.ran")
  read -r status ended <"$work/$1.done"
  took=$(awk "BEGIN { printf \"%.1f\", $ended - $(cat "$work/$1.began") }")
  cp "$work/$1.out" "$work/out"
  cp "$work/$1.err" "$work/err"
}
# ended NAME: when the background command NAME ended (seconds).
ended() { cut -d' ' -f2 "$work/$1.done"; }


# gone PID: no process PID (and PID is one).
gone() { [ -n "$1" ] && ! kill -0 "$1" 2>/dev/null; }

# session FIELD: session ev's FIELD in `mcp.ts sessions --json` (calls, connections, lastError), or "none".
session() {
  "${guard[@]}" "${MCP[@]}" sessions --json 2>/dev/null </dev/null | "$IOP_NODE" -e '
    let text = ""; process.stdin.on("data", (d) => (text += d)).on("end", () => {
      const s = text.trim() ? JSON.parse(text).sessions.find((s) => s.name === "ev") : undefined;
      console.log(s ? JSON.stringify(s[process.argv[1]]) : "none");
    });' "$1"
}

# connect_ev: opens session ev to server-everything (a check), once; false when it could not.
connect_ev() {
  [ -z "$connected" ] || return 0
  run "${MCP[@]}" connect ev "$EVERYTHING"
  expect 0 'out=^session "@ev" is open: mcp-server-everything stdio'
  [ "$status" = 0 ] || return 1
  connected=yes
  echo "# $(cat "$work/out")"
}

part_attach() {
  part=attach
  echo
  echo "## attach: the SDK clients through \`mcp.ts attach ev\`, a session to server-everything ($RT)"
  connect_ev || return 0
  local attach="$RT ./mcp.ts attach ev" before after a_end
  before=$(session calls)
  run interop/sdk-client.sh "$attach" list
  expect 0 'out="name": "echo"' 'out="name": "simulate-research-query"' 'err=^server .*"mcp-servers/everything"'
  run interop/sdk-client.sh "$attach" call echo '{"message":"hi"}'
  expect 0 'out="text": "Echo: hi"'
  run interop/sdk-client.sh --v2 "$attach" list
  expect 0 'out="name": "echo"' 'out="name": "simulate-research-query"' 'err=^era '
  echo "# SDK v2: $(grep '^era ' "$work/err")"
  run interop/sdk-client.sh --v2 "$attach" call echo '{"message":"hi"}'
  expect 0 'out="text": "Echo: hi"'

  echo
  echo "# four SDK clients at once, each through its own attach process"
  spawn a interop/sdk-client.sh "$attach" call simulate-research-query '{"topic":"from-a"}'
  spawn b interop/sdk-client.sh --v2 "$attach" list
  spawn c interop/sdk-client.sh "$attach" call echo '{"message":"from-c"}'
  spawn d interop/sdk-client.sh --v2 "$attach" call echo '{"message":"from-d"}'
  wait
  collect a
  expect 0 'out=# Research Report: from-a' '!out=from-c|from-d|"tools"'
  collect b
  expect 0 'out="name": "simulate-research-query"' '!out=Research Report|from-c|from-d'
  collect c
  expect 0 'out="text": "Echo: from-c"' '!out=Research Report|from-d|"tools"'
  collect d
  expect 0 'out="text": "Echo: from-d"' '!out=Research Report|from-c|"tools"'
  a_end=$(ended a)
  check "the list and both echoes answered before the research report (none waited behind it)" \
    awk "BEGIN { exit !($(ended b) < $a_end && $(ended c) < $a_end && $(ended d) < $a_end) }"

  printf '{"tool":"echo","arguments":{"message":"batch-%s"}}\n' 1 2 3 >"$work/batch.in"
  stdin=$work/batch.in
  run "${MCP[@]}" batch @ev --concurrency 3
  stdin=/dev/null
  expect 0 'out=^\{"content":\[\{"type":"text","text":"Echo: batch-1"\}\]' 'out="Echo: batch-2"' 'out="Echo: batch-3"'
  [ "$(wc -l <"$work/out")" = 3 ] || echo "note: batch @ev printed $(wc -l <"$work/out") lines for 3 calls"

  after=$(session calls)
  check "sessions --json counts the 8 calls through attach and batch (calls $before -> $after)" \
    test "$before" != none -a "$after" = "$((before + 8))"
  for _ in $(seq 20); do
    [ "$(session connections)" != 0 ] || break
    sleep 0.1
  done
  local state
  state="$(session connections)|$(session lastError)"
  check "sessions --json: no connection once the clients are gone, no error (connections|lastError: $state)" \
    test "$state" = "0|null"

  # What a command prints through the session, against the same command without one (a note: not checked)
  run "${MCP[@]}" call @ev echo message=x --json
  cp "$work/out" "$work/session.json"
  run "${MCP[@]}" call "$EVERYTHING" echo message=x --json
  if ! cmp -s "$work/out" "$work/session.json"; then
    echo "note: \`call @ev echo message=x --json\` prints another result than \`call \"$EVERYTHING\" ...\`:"
    sed 's/^/  @ev:    /' "$work/session.json"
    sed 's/^/  direct: /' "$work/out"
  fi
}

part_tasks() {
  part=tasks
  echo
  echo "## tasks: simulate-research-query detached into session ev ($RT)"
  connect_ev || return 0
  local id
  run "${MCP[@]}" call @ev simulate-research-query topic=x --detach
  expect 0 'out=^[A-Za-z0-9._:-]+$' '!err=.'
  id=$(head -n1 "$work/out")
  if [[ $id =~ ^[A-Za-z0-9._:-]+$ ]]; then
    echo "# task id: $id"
    run "${MCP[@]}" task @ev get "$id"
    expect 0 'out=^(working|completed)'
    run "${MCP[@]}" task @ev result "$id"
    expect 0 'out=^# Research Report: x$' 'out=Stage 4: Generating report'
    run "${MCP[@]}" task @ev get "$id"
    expect 0 'out=^completed'
  else
    echo "FAIL: [$part] task get/result: not run: call --detach printed no task id"
    failed=$((failed + 1))
  fi
  run "${MCP[@]}" task @ev get no-such-task
  expect 2 'err=does not know task no-such-task'
  run "${MCP[@]}" call "$EVERYTHING" simulate-research-query topic=x --detach
  expect 2 'err=--detach needs an HTTP server .* or a session' '!out=.'
}

# timed LABEL ERE COMMAND...: times CALLS runs of COMMAND (lib/sessions-time.mjs), each exiting 0 with a line of
# stdout matching ERE (a check); its median and min in median[LABEL], min[LABEL], the row's order in rows.
declare -A median=() min=()
rows=()
timed() {
  local label=$1 ere=$2 began
  shift 2
  status=0
  began=$(now)
  "${long[@]}" "$IOP_NODE" interop/lib/sessions-time.mjs "$CALLS" "$ere" "$@" >"$work/out" 2>"$work/err" || status=$?
  took=$(since "$began")
  [ "$status" != 130 ] || exit 130
  expect 0 'out=^median ' -- "$CALLS runs of $label: each exit 0, stdout ~ /$ere/"
  [ "$status" = 0 ] || return 0
  local m n
  read -r _ m _ n _ <"$work/out"
  median[$label]=$m
  min[$label]=$n
  rows+=("$label")
}

part_peers() {
  part=peers
  echo
  echo "## peers: $CALLS sequential calls of echo, warm sessions and cold starts ($RT)"
  connect_ev || return 0
  local runtimes=("$RT") r label base
  [[ $RT == deno* ]] || ! command -v deno >/dev/null || runtimes+=("deno run -A")
  echo "# mcporter $("$BIN/mcporter" --version 2>/dev/null | head -n1), mcpc $("${MCPC[@]}" --version 2>/dev/null |
    head -n1)"
  cat >"$work/peers.json" <<EOF
{ "mcpServers": { "ev": { "command": "$IOP_CACHE/node_modules/.bin/mcp-server-everything", "args": ["stdio"],
  "lifecycle": "keep-alive" } }, "imports": [] }
EOF
  mkdir -p "$work/xdg" "$work/mcpc"

  mcporter_up=yes
  run "${MCPORTER[@]}" daemon start
  expect 0 'out=Daemon started'
  run "${MCPORTER[@]}" call ev.echo message=x
  expect 0 'out=^Echo: x$'
  run "${MCPORTER[@]}" daemon status
  expect 0 'out=ev: connected' -- "mcporter daemon status: ev is kept connected by its daemon"
  mcpc_up=yes
  run "${MCPC[@]}" connect "$work/peers.json:ev" @ev
  expect 0 'out=Session @ev created'
  ! grep -q 'keychain unavailable' "$work/err" || echo "note: mcpc: no OS keychain here, so its file store (under T)"
  run "${MCPC[@]}" @ev tools-call echo message:=x
  expect 0 'out=^Echo: x$'

  for r in "${runtimes[@]}"; do
    read -ra rt <<<"$r"
    timed "mcp.ts --version ($r)" '^mcp\.ts ' "${rt[@]}" ./mcp.ts --version
    timed "mcp.ts call @ev echo ($r)" '^Echo: x$' "${rt[@]}" ./mcp.ts call @ev echo message=x
    timed "mcp.ts call \"<stdio>\" echo, no session ($r)" '^Echo: x$' "${rt[@]}" ./mcp.ts call "$EVERYTHING" echo message=x
  done
  read -ra rt <<<"$RT"
  timed "mcporter call ev.echo (keep-alive daemon)" '^Echo: x$' "${MCPORTER[@]}" call ev.echo message=x
  timed "mcpc @ev tools-call echo (bridge)" '^Echo: x$' "${MCPC[@]}" @ev tools-call echo message:=x

  echo
  base="mcp.ts call @ev echo ($RT)"
  printf '  %-52s %9s %8s %9s\n' "$CALLS calls each, wall ms per call" median min "÷ @ev"
  for label in "${rows[@]}"; do
    printf '  %-52s %9s %8s %9s\n' "$label" "${median[$label]}" "${min[$label]}" \
      "$([ -z "${median[$base]:-}" ] || awk "BEGIN { printf \"%.2f\", ${median[$label]} / ${median[$base]} }")"
  done
  echo
  for r in "${runtimes[@]}"; do
    label="mcp.ts call @ev echo ($r)"
    base="mcp.ts call \"<stdio>\" echo, no session ($r)"
    if [ -z "${median[$label]:-}" ] || [ -z "${median[$base]:-}" ]; then
      echo "FAIL: [$part] $r: the session call is faster than the call without one: not timed"
      failed=$((failed + 1))
      continue
    fi
    check "$r: the session call is faster than the call without one (median ${median[$label]} < ${median[$base]} ms)" \
      awk "BEGIN { exit !(${median[$label]} < ${median[$base]}) }"
  done
}

began=$(now)
for part; do "part_$part"; done

if [ -n "$connected" ]; then
  part=end
  echo
  echo "## end: disconnect ev; the daemon, sessionless, ends by itself"
  pid=$("${guard[@]}" "${MCP[@]}" daemon status --json 2>/dev/null </dev/null |
    "$IOP_NODE" -e 'let t = ""; process.stdin.on("data", (d) => (t += d)).on("end", () => console.log(JSON.parse(t).pid))' ||
    true)
  run "${MCP[@]}" disconnect ev
  expect 0 'err=disconnected @ev'
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  check "the daemon (pid ${pid:-unknown}) has ended within 5 s" gone "$pid"
  run "${MCP[@]}" sessions --json
  expect 0 '!out="ev"'
fi
echo
echo "sessions.sh: $passed passed, $failed failed ($RT, $(since "$began") s)"
[ "$failed" = 0 ]
