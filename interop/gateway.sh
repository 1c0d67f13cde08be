#!/usr/bin/env bash
# `mcp.ts gateway` against real peers: server-everything, server-memory and `mcp.ts serve testdata/tools` behind it
# (named everything, memory and tools), the official SDK clients and mcp.ts's own client in front. Prints each check,
# what it printed, its exit code and time, ok or FAILED, and exits 1 when any check fails. From the repository root:
#   interop/gateway.sh                        all seven parts
#   interop/gateway.sh http restart           some of them: stdio, http, principals, task-principals, restart, stop,
#                                             timing
#   MCP_RT="bun" interop/gateway.sh           the runtime that runs ./mcp.ts (the gateway, its tools upstream, the
#   MCP_RT="node" interop/gateway.sh          client and the latency driver; default "deno run -A")
# The parts:
#   stdio    lib/sdk-gateway-session.mjs with SDK v1 and SDK v2 over stdio: tools/list (every upstream's tools, as
#            <upstream>__<name>), a call to each upstream (everything__echo, everything__get-sum,
#            memory__create_entities, memory__read_graph, tools__add), everything__trigger-long-running-operation
#            {duration: 1, steps: 2} with onprogress, prompts/list, resources/list and templates (compared with the
#            upstreams' own, read directly: unchanged), resources/read, prompts/get everything__args-prompt, and
#            server-everything's questions passed to the SDK client (get-roots-list, trigger-sampling-request,
#            trigger-elicitation-request: its roots/list, sampling and elicitation handlers answer); then no upstream
#            process may be left (SDK v1: its close; SDK v2: its server/discover probe's process reaped too). Then
#            `mcp.ts list|call "<gateway>"` (what upstream processes they leave is shown, not counted: it is a race)
#   http     the same session with SDK v1 (and v2) over Streamable HTTP against `gateway ... --http 127.0.0.1:0` (its
#            URL read from "mcp: serving http://... (a gateway)"), but without roots: the gateway offers none to the
#            upstreams its clients share, so everything__get-roots-list must not be listed (nor answer) and no client
#            be asked roots/list; and mcp.ts's client by URL: list (whole names, no get-roots-list),
#            call tools__add, everything__get-sum, memory__read_graph, prompt, read
#   principals two SDK v1 clients, A and B, of one `gateway --http 127.0.0.1:0 --token TOKEN` (the same bearer token, a
#            session each; lib/sdk-two-principals.mjs) in front of server-everything over stdio (everything) and over
#            Streamable HTTP (web: `PORT=<free port> mcp-server-everything streamableHttp`, stopped at the end), each
#            answering elicitations with values of its own. The contract: an upstream's question goes only to the
#            client whose call caused it, or is refused with an error when the gateway cannot tell. 1: both call
#            everything__trigger-elicitation-request at once: neither result shows the other's values, each is its
#            own answer or a refusal ("cannot tell": which is shown), each handler asked at most once, only about
#            its own call; 2: the same one after the other: each its own answer, each asked once; 3: both call
#            web__trigger-elicitation-request at once: each exactly its own answer, each asked once; 4: client A's
#            everything__get-roots-list is not listed or fails, and no client is asked roots/list (no roots are
#            offered to upstreams shared behind --http). Then the HTTP server must be gone, no process of it left
#   task-principals  a task id is its caller's: testdata/fake_auth_server.ts (the AS; "listening http://..."), an
#            upstream `mcp.ts serve testdata/conformance/tools_tasks.ts --http 127.0.0.1:0` (jobs) and
#            `gateway jobs=<its URL> --protocol auto --auth-issuer <AS> --http 127.0.0.1:0`; two tokens minted at the
#            AS's /_mint, {aud: <gateway URL>, sub: alice} and {sub: bob} (never printed). mcp.ts's client, each with
#            -H "Authorization: Bearer <token>": alice's `call jobs__slow_compute seconds=30 --detach` prints the
#            gateway's id (jobs__<upstream id>); bob's `task get|result|cancel ID` are exit 2 ("does not know task");
#            alice's `task get ID` is working, her `task cancel ID` exit 0, and her `task get ID` then cancelled
#   restart  SIGKILL server-everything under an HTTP gateway (the gateway's child, found with pgrep -P): the next call
#            to it is an isError naming it ("is down ... tried again in N s"), tools and memory still answer, and
#            within GATEWAY_RESTART_WAIT s (10) it answers again, a new process
#   stop     stdin EOF (stdio) stops the gateway and every upstream process, also with a SIGTERM 1 s after it (while
#            the gateway waits for them); so does SIGTERM (HTTP), also while an upstream is still starting (a
#            `sh -c "sleep 3; exec mcp-server-memory"`)
#   timing   spawn to the first tools/list answer (lib/gateway-startup.mjs, GATEWAY_RUNS runs, 5: the median) of
#            `serve testdata/tools` alone, a gateway in front of it, and a gateway in front of 10 of them; and the time
#            per sequential tools/call (echo), directly and through `gateway --prefix collisions "t=<serve>"`
#            (lib/proxy-latency.mjs, GATEWAY_CALLS calls, 1000)
# Every gateway the script starts runs in a process group of its own (its upstreams each in their own: the gateway
# starts them so) and is stopped after its part (SIGTERM, SIGKILL after 10 s), also on Ctrl-C; an upstream process
# still running at the end (found by a variable in its environment) is killed by its pid. server-memory keeps its graph
# in a file of the run's temporary folder. A check that runs over GATEWAY_CHECK_TIMEOUT s (default 60) is killed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(stdio http principals task-principals restart stop timing)
for part; do
  if [[ " ${PARTS[*]} " != *" $part "* ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- "${PARTS[@]}"
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
cd "$here/.."

RT=${MCP_RT:-deno run -A}
read -ra rt <<<"$RT"
RUNS=${GATEWAY_RUNS:-5}
CALLS=${GATEWAY_CALLS:-1000}
RESTART_WAIT=${GATEWAY_RESTART_WAIT:-10}
LIMIT=${GATEWAY_CHECK_TIMEOUT:-60}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
# Every process this run starts inherits it (a gateway passes its environment on): what finds a left-over upstream.
export MCP_INTEROP_GATEWAY_RUN=$work
export MEMORY_FILE_PATH=$work/memory.jsonl
EVERYTHING="mcp-server-everything stdio"
MEMORY="mcp-server-memory"
TOOLS="$RT ./mcp.ts serve testdata/tools"
UPSTREAMS=("everything=$EVERYTHING" "memory=$MEMORY" "tools=$TOOLS")
SESSION=("$IOP_NODE" interop/lib/sdk-gateway-session.mjs)
DIRECT=(--direct "everything=$EVERYTHING" --direct "memory=$MEMORY" --direct "tools=$TOOLS")
UPSTREAM_PATTERN='mcp-server-everything|mcp-server-memory|mcp\.ts (serve|gateway)|sleep 3; exec'
peers=() # "pgid name" of the gateways running now
url=
pgid=
passed=0
failed=()
part=

now() { local t=${EPOCHREALTIME/,/.}; echo "$t"; }
since() { awk "BEGIN { printf \"%.1f\", $(now) - $1 }"; }

# An argument as a shell would need it: as it is when plain, else in single quotes.
shown() {
  local quote="'\\''"
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf ' %s' "$1"; else printf " '%s'" "${1//\'/$quote}"; fi
}
# A command as it would be typed, each secret (an access token) shown as <its name>.
secrets=() # "NAME VALUE"
command_line() {
  local line secret
  line=$(for arg; do shown "$arg"; done)
  for secret in "${secrets[@]}"; do line=${line//"${secret#* }"/<${secret%% *}>}; done
  printf '%s' "${line# }"
}
GATEWAY="$RT ./mcp.ts gateway $(command_line "${UPSTREAMS[@]}")"

# alive PID: it runs (a zombie does not count).
alive() {
  local stat
  stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $stat != Z* ]]
}

# printed PATTERN FILE PID: waits up to 30 s for an extended regex in FILE while PID runs; 0 when it came.
printed() {
  for _ in $(seq 300); do
    grep -qE "$1" "$2" && return 0
    alive "$3" || break
    sleep 0.1
  done
  grep -qE "$1" "$2"
}

# descendants PID: the pids of its children, their children, ...
descendants() {
  local child
  for child in $(pgrep -P "$1" || true); do
    echo "$child"
    descendants "$child"
  done
}

# leftovers: "pid command" of each upstream process of this run still running (this run's variable in its
# environment, a command line like an upstream's, not a zombie).
leftovers() {
  local pid
  for pid in $(pgrep -f -- "$UPSTREAM_PATTERN" || true); do
    if [ "$pid" = $$ ] || ! alive "$pid"; then continue; fi
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "MCP_INTEROP_GATEWAY_RUN=$work" || continue
    echo "$pid $(ps -o args= -p "$pid" | cut -c1-150)"
  done
}

# stop_peers: SIGTERM to each gateway's group, SIGKILL after 10 s; prints how each one ended.
stop_peers() {
  local entry group name status
  for entry in "${peers[@]}"; do
    group=${entry%% *}
    name=${entry#* }
    status=0
    kill -TERM -- "-$group" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 -- "-$group" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$group" 2>/dev/null || true
    wait "$group" 2>/dev/null || status=$?
    echo "gateway: stopped $name (exit $status)"
  done
  peers=()
}
# cleanup: the gateways, then any upstream left running (by its pid).
cleanup() {
  stop_peers
  local pid rest
  while read -r pid rest; do
    [ -n "$pid" ] || continue
    echo "gateway: killing a left-over upstream: $pid $rest"
    kill -KILL "$pid" 2>/dev/null || true
  done < <(leftovers)
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT # Ctrl-C: the gateways are in process groups of their own, so only stop_peers reaches them
trap 'exit 143' TERM

# start_gateway NAME ARGS...: `$RT ./mcp.ts gateway ARGS... --http 127.0.0.1:0` through sh in a process group of its
# own (stderr in $work/NAME.err); pgid its pid, url from its "mcp: serving URL (a gateway)" line (60 s at most).
start_gateway() {
  local name=$1
  shift
  start_peer "$name" err 'mcp: serving \(http://[^ ]*\) (a gateway)' \
    "$RT ./mcp.ts gateway $(command_line "$@") --http 127.0.0.1:0"
}

# start_peer NAME out|err READY COMMAND: COMMAND (a command line) through sh in a process group of its own, stopped by
# stop_peers (stdout in $work/NAME.out, stderr in $work/NAME.err); pgid its pid, url the \1 of READY (a sed regex, a
# whole line) in the file named, once it is there (60 s at most).
start_peer() {
  local name=$1 stream=$2 ready=$3 command=$4
  : >"$work/$name.out"
  : >"$work/$name.err"
  set -m
  sh -c "exec $command" >"$work/$name.out" 2>"$work/$name.err" </dev/null &
  pgid=$!
  set +m
  peers+=("$pgid $name")
  url=
  for _ in $(seq 600); do
    url=$(sed -n "s|^$ready\$|\\1|p" "$work/$name.$stream" | head -n1)
    [ -n "$url" ] && break
    kill -0 "$pgid" 2>/dev/null || break
    sleep 0.1
  done
  echo
  echo "# $name: $command"
  [ "$stream" = err ] || sed 's/^/  stdout: /' "$work/$name.out"
  sed 's/^/  stderr: /' "$work/$name.err"
  if [ -z "$url" ]; then
    echo "gateway: $name did not start"
    return 1
  fi
  echo "# $url (pid $pgid)"
}

# verdict OK NAME [WHY]: counts and prints the outcome of a check.
verdict() {
  if [ "$1" = yes ]; then
    echo "-> ok"
    passed=$((passed + 1))
  else
    echo "-> FAILED${3:+ ($3)}"
    failed+=("[$part] $2")
  fi
}

# run NAME COMMAND...: runs it (stdin: nothing) with its stdout in $work/NAME.out, stderr in $work/NAME.err; prints
# the command line, and sets status and took.
run() {
  local name=$1 began
  shift
  echo
  echo "\$ $(command_line "$@")"
  status=0
  began=$(now)
  "${guard[@]}" "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null || status=$?
  took=$(since "$began")
  # Ctrl-C reaches the command too, which exits 130: bash then takes the SIGINT as handled and runs no trap
  [ "$status" != 130 ] || exit 130
}

# check EXIT TEXT COMMAND ARGS...: `mcp.ts COMMAND ARGS...` must exit EXIT and print TEXT (stdout or stderr; "": any).
check() {
  local want=$1 text=$2
  shift 2
  run check "${rt[@]}" ./mcp.ts "$@"
  sed 's/^/  /' "$work/check.out"
  sed 's/^/  stderr: /' "$work/check.err"
  echo "  -> exit $status in $took s"
  local ok=yes
  [ "$status" = "$want" ] && { [ -z "$text" ] || grep -qF -- "$text" "$work/check.out" "$work/check.err"; } || ok=no
  verdict $ok "$(command_line "$@")" "expected exit $want${text:+ and \"$text\"}"
}

# session NAME SDK TARGET [ARGS...]: one lib/sdk-gateway-session.mjs run, with a server-memory graph of its own; it
# must exit 0 (every step as expected).
session() {
  local name=$1 sdk=$2 target=$3
  shift 3
  MEMORY_FILE_PATH=$work/$name.jsonl run "$name" "${SESSION[@]}" "$sdk" "$target" "$@"
  sed 's/^/  /' "$work/$name.out"
  grep -v '^wire ' "$work/$name.err" | sed 's/^/  stderr: /' || true
  echo "  -> exit $status in $took s"
  local ok=yes
  [ "$status" = 0 ] && grep -q '^all steps as expected' "$work/$name.out" || ok=no
  verdict $ok "SDK $sdk session: $target" "a step failed, or the SDK raised"
}

# [note=yes] no_leftovers NAME [WAIT]: no upstream process of this run is running, WAIT seconds (default 1) after the
# command that ran last; any found is killed (by its pid), so that the next check starts clean. With note, only shown:
# not counted as a check.
no_leftovers() {
  local name=$1 wait=${2:-1} found pid rest
  sleep "$wait"
  echo
  echo "# $name: upstream processes of this run still running ${wait} s later"
  found=$(leftovers)
  if [ -n "$found" ]; then
    printf '%s\n' "$found" | sed 's/^/  /'
    while read -r pid rest; do kill -KILL "$pid" 2>/dev/null || true; done <<<"$found"
    echo "  (killed)"
  else
    echo "  none"
  fi
  if [ -n "${note:-}" ]; then
    echo "-> (not a check: it depends on timing)"
  elif [ -z "$found" ]; then
    verdict yes "$name"
  else
    verdict no "$name: upstream processes left" "$(printf '%s\n' "$found" | wc -l) left"
  fi
}

# --- stdio ---

part_stdio() {
  part=stdio
  echo
  echo "## stdio: SDK clients in front of the gateway over stdio"
  echo "# the gateway: $GATEWAY"
  session stdio-v1 v1 "$GATEWAY" "${DIRECT[@]}"
  no_leftovers "after the SDK v1 session"
  session stdio-v2 v2 "$GATEWAY" "${DIRECT[@]}"
  # SDK v2 reaps its server/discover probe's process with stdin closed and SIGTERM at once, SIGKILL 1 s later; it
  # closes the session's as SDK v1 does (stdin, SIGTERM 2 s later, SIGKILL 2 s after that)
  no_leftovers "after the SDK v2 session (two gateways: the probe's and the session's)"
  # mcp.ts's client closes the gateway's stdin, waits 2 s, then SIGTERMs it. Whether the gateway has stopped its
  # upstreams by then depends on server-everything: closed within ~350 ms of its initialize it stays, waiting for the
  # answer to the roots/list it sends then, so the gateway waits its 2 s for it (see the stop part)
  check 0 "tools__add" list "$GATEWAY"
  note=yes no_leftovers "after mcp.ts list \"<gateway>\""
  check 0 "3" call "$GATEWAY" tools__add a=1 b=2
  note=yes no_leftovers "after mcp.ts call \"<gateway>\""
}

# --- http ---

part_http() {
  part=http
  echo
  echo "## http: SDK clients and mcp.ts in front of the gateway over Streamable HTTP"
  start_gateway gateway-http "${UPSTREAMS[@]}"
  local gateway=$url
  session http-v1 v1 "$gateway" "${DIRECT[@]}"
  session http-v2 v2 "$gateway" "${DIRECT[@]}"
  check 0 "tools__add" list "$gateway"
  # Piped, the table keeps whole names (only a terminal's is cut). No roots are offered to upstreams shared behind
  # --http, so server-everything does not list get-roots-list.
  local name ok=yes roots="not listed"
  for name in everything__echo everything__get-sum everything__trigger-long-running-operation \
    memory__create_entities memory__read_graph tools__add tools__slow; do
    grep -q "^$name " "$work/check.out" || ok=no
  done
  if grep -q "^everything__get-roots-list " "$work/check.out"; then
    ok=no
    roots=listed
  fi
  echo
  echo "# the names listed: $(cut -d' ' -f1 "$work/check.out" | cut -d_ -f1 | sort | uniq -c | xargs);" \
    "everything__get-roots-list $roots"
  verdict $ok "list $gateway: names" \
    "expected everything__echo, memory__read_graph, tools__add, ..., whole, and no everything__get-roots-list"
  check 0 "3" call "$gateway" tools__add a=1 b=2
  check 0 "The sum of 2 and 3 is 5" call "$gateway" everything__get-sum a=2 b=3
  check 0 '"entities"' call "$gateway" memory__read_graph
  check 0 "What's weather in Oslo?" prompt "$gateway" everything__args-prompt city=Oslo
  check 0 "Resource 1: This is a plaintext resource" read "$gateway" demo://resource/dynamic/text/1
  stop_peers
}

# --- principals ---

part_principals() {
  part=principals
  echo
  echo "## principals: two SDK clients of one HTTP gateway, each asked only about its own calls"
  local token="interop-$$-$RANDOM" line ok port web web_status=0 web_url
  # server-everything over Streamable HTTP, in a process group of its own: its port from $PORT (3001 by default)
  port=$(free_port)
  web_url="http://127.0.0.1:$port/mcp"
  echo
  echo "\$ PORT=$port mcp-server-everything streamableHttp &"
  : >"$work/web.err"
  set -m
  PORT=$port mcp-server-everything streamableHttp >"$work/web.out" 2>"$work/web.err" </dev/null &
  web=$!
  set +m
  ok=no
  printed "listening on port $port" "$work/web.err" "$web" && ok=yes
  sed 's/^/  stderr: /' "$work/web.err"
  echo "# $web_url (pid $web)"
  verdict $ok "mcp-server-everything streamableHttp: start" "no \"listening on port $port\" line"
  if ! start_gateway gateway-principals --token "$token" "everything=$EVERYTHING" "web=$web_url"; then
    verdict no "gateway --http --token: start" "no \"mcp: serving http://... (a gateway)\" line"
  else
    # serving does not wait for every upstream: both must be up before the clients call them (30 s at most)
    for _ in $(seq 300); do
      [ "$(grep -cE 'upstream "(everything|web)" is up' "$work/gateway-principals.err")" -ge 2 ] && break
      sleep 0.1
    done
    echo "# upstreams: $(grep -E 'upstream "(everything|web)"' "$work/gateway-principals.err" | sed 's/^mcp: //' |
      paste -sd ';' -)"
    run principals "$IOP_NODE" interop/lib/sdk-two-principals.mjs "$url" "$token"
    sed 's/^/  stderr: /' "$work/principals.err"
    echo "  -> exit $status in $took s"
    # one check per step it printed: "ok   STEP: what came" or "FAIL STEP: what came (expected ...)"
    while IFS= read -r line; do
      echo "  $line"
      if [[ $line =~ ^(ok|FAIL)\ +([^:]+): ]]; then
        ok=no
        [ "${BASH_REMATCH[1]}" != ok ] || ok=yes
        verdict $ok "${BASH_REMATCH[2]}"
      fi
    done <"$work/principals.out"
    if [ "$status" != 0 ] && ! grep -q '^FAIL ' "$work/principals.out"; then
      verdict no "lib/sdk-two-principals.mjs" "it exited $status without a failed step"
    fi
    echo
    echo "# the gateway's stderr"
    sed 's/^/  /' "$work/gateway-principals.err"
  fi
  stop_peers
  # then the HTTP server: SIGTERM to its group, SIGKILL after 10 s; none of its processes may be left
  echo
  echo "\$ kill -TERM -- -$web   # mcp-server-everything streamableHttp"
  kill -TERM -- "-$web" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 -- "-$web" 2>/dev/null || break
    sleep 0.1
  done
  ok=yes
  if kill -0 -- "-$web" 2>/dev/null; then
    echo "  still running after 10 s: SIGKILL"
    kill -KILL -- "-$web" 2>/dev/null || true
    ok=no
  fi
  wait "$web" 2>/dev/null || web_status=$?
  sleep 0.2
  line=$(pgrep -g "$web" -a || true)
  echo "  exit $web_status; its processes now: ${line:-none}"
  [ -z "$line" ] || ok=no
  verdict $ok "mcp-server-everything streamableHttp: stopped, no process left" "expected it gone on SIGTERM"
}

# --- task-principals ---

# mint NAME CLAIMS: an access token with those claims (JSON) from the AS at $issuer (POST /_mint), kept as the secret
# NAME (shown as <NAME>) and set in MINTED; a check: it must come.
mint() {
  local name=$1 claims=$2 token ok=yes
  echo
  echo "\$ curl -sS $issuer/_mint -d '$claims'   # -> <$name>"
  token=$(curl -sS -H "content-type: application/json" "$issuer/_mint" -d "$claims" |
    sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p') || true
  if [ -n "$token" ]; then echo "  -> a token of ${#token} characters"; else echo "  -> no access_token" && ok=no; fi
  verdict $ok "/_mint $claims" "expected {access_token}"
  secrets+=("$name $token")
  MINTED=$token
}

part_task_principals() {
  part=task-principals
  echo
  echo "## task-principals: a task passed through the gateway is its caller's alone (OAuth subjects alice and bob)"
  local issuer upstream gateway alice bob id ok
  issuer=
  if start_peer auth-server out 'listening \(http://[^ ]*\)' "$RT testdata/fake_auth_server.ts"; then
    issuer=$url
    start_peer jobs err 'mcp: serving \(http://[^ ]*\)' \
      "$RT ./mcp.ts serve testdata/conformance/tools_tasks.ts --http 127.0.0.1:0" && upstream=$url
  fi
  if [ -z "$issuer" ] || [ -z "${upstream:-}" ] ||
    ! start_gateway gateway-tasks "jobs=$upstream" --protocol auto --auth-issuer "$issuer"; then
    verdict no "the AS, the jobs upstream and the gateway: start" "a ready line missing (above)"
    stop_peers
    return
  fi
  gateway=$url
  # serving does not wait for the upstream: it must be up before the first call (30 s at most)
  for _ in $(seq 300); do
    grep -q 'upstream "jobs" is up' "$work/gateway-tasks.err" && break
    sleep 0.1
  done
  mint alice "{\"aud\":\"$gateway\",\"sub\":\"alice\"}"
  alice=$MINTED
  mint bob "{\"aud\":\"$gateway\",\"sub\":\"bob\"}"
  bob=$MINTED
  local as_alice=(-H "Authorization: Bearer $alice") as_bob=(-H "Authorization: Bearer $bob")
  check 0 "jobs__" call "$gateway" jobs__slow_compute seconds=30 --detach "${as_alice[@]}"
  id=$(head -n1 "$work/check.out")
  ok=no
  [[ $id =~ ^jobs__[A-Za-z0-9._-]+$ ]] && ok=yes
  echo
  echo "# the id printed: ${id:-none}"
  verdict $ok "call --detach prints one id, jobs__<upstream id>" "expected one line jobs__ID on stdout"
  if [ $ok = no ]; then
    stop_peers
    return
  fi
  check 2 "does not know task $id" task "$gateway" get "$id" "${as_bob[@]}"
  check 2 "does not know task $id" task "$gateway" result "$id" "${as_bob[@]}" --max-time 5000
  check 2 "does not know task $id" task "$gateway" cancel "$id" "${as_bob[@]}"
  # still working: bob's cancel did not reach it
  check 0 'working: ' task "$gateway" get "$id" "${as_alice[@]}"
  check 0 "" task "$gateway" cancel "$id" "${as_alice[@]}"
  check 0 "cancelled" task "$gateway" get "$id" "${as_alice[@]}"
  echo
  echo "# the gateway's stderr"
  sed 's/^/  /' "$work/gateway-tasks.err"
  stop_peers
}

# --- restart ---

part_restart() {
  part=restart
  echo
  echo "## restart: an upstream killed under the gateway comes back by itself"
  start_gateway gateway-restart "${UPSTREAMS[@]}"
  local gateway=$url gw=$pgid before after began attempts=0 ok
  check 0 "The sum of 1 and 2 is 3" call "$gateway" everything__get-sum a=1 b=2
  before=$(pgrep -P "$gw" -f "$EVERYTHING" || true)
  echo
  echo "# server-everything under the gateway (pid $gw): $(pgrep -P "$gw" -a -f "$EVERYTHING" || echo none)"
  if [ -z "$before" ]; then
    verdict no "server-everything under the gateway" "pgrep -P $gw found none"
    stop_peers
    return
  fi
  echo "\$ kill -KILL $before"
  kill -KILL "$before"
  began=$(now)
  check 1 "upstream \"everything\" is down" call "$gateway" everything__get-sum a=1 b=2
  ok=yes
  echo
  echo "# that isError says why and when it is tried again"
  grep -hoE 'is down \(.*\); it is tried again in [0-9]+ s' "$work/check.out" "$work/check.err" | sed 's/^/  /' || ok=no
  verdict $ok "the isError says when it is tried again" 'expected "is down (...); it is tried again in N s"'
  check 0 "3" call "$gateway" tools__add a=1 b=2
  check 0 '"entities"' call "$gateway" memory__read_graph
  echo
  echo "# everything__get-sum until it answers again (at most $RESTART_WAIT s after the kill)"
  ok=no
  while awk "BEGIN { exit !($(now) - $began < $RESTART_WAIT) }"; do
    attempts=$((attempts + 1))
    status=0
    "${guard[@]}" "${rt[@]}" ./mcp.ts call "$gateway" everything__get-sum a=1 b=2 >"$work/poll.out" 2>"$work/poll.err" \
      </dev/null || status=$?
    [ "$status" != 130 ] || exit 130
    echo "  $(since "$began") s: exit $status: $(cat "$work/poll.out" "$work/poll.err" | head -n1 | cut -c1-150)"
    if [ "$status" = 0 ] && grep -q "The sum of 1 and 2 is 3" "$work/poll.out"; then
      ok=yes
      break
    fi
    sleep 0.25
  done
  after=$(pgrep -P "$gw" -f "$EVERYTHING" || true)
  echo "  back after $(since "$began") s ($attempts calls); server-everything now: pid ${after:-none} (was $before)"
  [ -n "$after" ] && [ "$after" != "$before" ] || ok=no
  verdict $ok "everything__get-sum answers again" "expected an answer within $RESTART_WAIT s, from a new process"
  echo
  echo "# the gateway's stderr"
  sed 's/^/  /' "$work/gateway-restart.err"
  ok=yes
  grep -q 'upstream "everything" is gone: .*; trying again in 1 s' "$work/gateway-restart.err" || ok=no
  [ "$(grep -c 'upstream "everything" is up' "$work/gateway-restart.err")" = 2 ] || ok=no
  verdict $ok "the gateway's stderr: gone, then up again" \
    'expected "upstream \"everything\" is gone: ...; trying again in 1 s", then "is up" a second time'
  stop_peers
}

# --- stop ---

# stopped NAME PID BEGAN UPSTREAMS: the gateway PID (our child) must exit 0 within 10 s of BEGAN, and none of the
# pids UPSTREAMS (its processes before) may run after it, nor any other upstream process of this run.
stopped() {
  local name=$1 pid=$2 began=$3 upstreams=$4 status=0 ok=yes left=() p
  for _ in $(seq 100); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    echo "  the gateway still runs after $(since "$began") s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    ok=no
  fi
  wait "$pid" 2>/dev/null || status=$?
  echo "  the gateway exited $status in $(since "$began") s"
  [ "$status" = 0 ] || ok=no
  sleep 0.5
  for p in $upstreams; do alive "$p" && left+=("$p $(ps -o args= -p "$p" | cut -c1-120)"); done
  if [ ${#left[@]} -gt 0 ]; then
    printf '  still running: %s\n' "${left[@]}"
    ok=no
  else
    echo "  none of its $(wc -w <<<"$upstreams") processes runs"
  fi
  local found
  found=$(leftovers)
  if [ -n "$found" ]; then
    printf '%s\n' "$found" | sed 's/^/  left over: /'
    ok=no
  fi
  if [ $ok = no ]; then
    for p in $upstreams $(cut -d' ' -f1 <<<"$found"); do kill -KILL "$p" 2>/dev/null || true; done
    echo "  (the gateway's processes killed)"
  fi
  verdict $ok "$name" "expected exit 0 within 10 s and no upstream process left"
}

# shown_processes PIDS: each pid with its command line, on one line.
shown_processes() {
  local p
  for p in $1; do printf '%s (%s) ' "$p" "$(ps -o args= -p "$p" | cut -c1-60)"; done
}

# start_stdio_gateway NAME: $GATEWAY with its stdin a FIFO this shell holds open on fd 3, in a process group of its
# own; initialize, notifications/initialized and tools/list written to it, its answer awaited (30 s at most). Sets gw
# (its pid) and upstreams (the pids of its processes).
start_stdio_gateway() {
  local name=$1 listed=no
  echo "\$ $GATEWAY <FIFO"
  rm -f "$work/in"
  mkfifo "$work/in"
  set -m
  sh -c "exec $GATEWAY" <"$work/in" >"$work/$name.out" 2>"$work/$name.err" &
  gw=$!
  set +m
  peers+=("$gw $name")
  exec 3>"$work/in"
  printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"gateway.sh","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' >&3
  printed '"id":2,"result"' "$work/$name.out" "$gw" && listed=yes
  sed 's/^/  stderr: /' "$work/$name.err"
  echo "  tools/list answered: $listed ($(grep -o '"name":"[a-z]*__' "$work/$name.out" | cut -d'"' -f4 | sort | uniq -c |
    xargs))"
  upstreams=$(descendants "$gw")
  echo "  its processes: $(shown_processes "$upstreams")"
  [ "$listed" = yes ] || verdict no "$name: tools/list" "no answer to tools/list"
}

part_stop() {
  part=stop
  echo
  echo "## stop: the gateway stops every upstream"
  local gw began upstreams

  echo
  echo "# stdio: stdin closed just after a tools/list"
  start_stdio_gateway gateway-eof
  echo "\$ exec 3>&-   # stdin EOF"
  began=$(now)
  exec 3>&-
  stopped "stdin EOF stops the gateway and its upstreams" "$gw" "$began" "$upstreams"
  peers=()

  echo
  echo "# stdio: stdin closed just after a tools/list, SIGTERM 1 s later, while the gateway waits for its upstreams"
  echo "# (mcp.ts's client and the SDK v1 send it 2 s after closing stdin, the SDK v2 with it, for its probe)"
  start_stdio_gateway gateway-eof-term
  echo "\$ exec 3>&-; sleep 1; kill -TERM $gw"
  began=$(now)
  exec 3>&-
  sleep 1
  kill -TERM "$gw" 2>/dev/null || echo "  (the gateway had already stopped)"
  stopped "stdin EOF, then SIGTERM, stop the gateway and its upstreams" "$gw" "$began" "$upstreams"
  peers=()

  echo
  echo "# HTTP: SIGTERM to the gateway's process (not its group)"
  start_gateway gateway-stop "${UPSTREAMS[@]}"
  gw=$pgid
  check 0 "3" call "$url" tools__add a=1 b=2
  upstreams=$(descendants "$gw")
  echo "  its processes: $(shown_processes "$upstreams")"
  echo "\$ kill -TERM $gw"
  began=$(now)
  kill -TERM "$gw"
  stopped "SIGTERM stops the HTTP gateway and its upstreams" "$gw" "$began" "$upstreams"
  sed 's/^/  stderr: /' "$work/gateway-stop.err"
  peers=()

  echo
  echo "# SIGTERM while an upstream is still starting (sleep 3 first): the gateway is waiting for it"
  local slow='slow=sh -c "sleep 3; exec mcp-server-memory"' command
  command="$RT ./mcp.ts gateway $(command_line "everything=$EVERYTHING" "$slow") --http 127.0.0.1:0"
  echo "\$ $command &"
  set -m
  sh -c "exec $command" >"$work/stop-early.out" 2>"$work/stop-early.err" </dev/null &
  gw=$!
  set +m
  peers+=("$gw gateway-early")
  for _ in $(seq 100); do
    grep -q 'upstream "everything" is up' "$work/stop-early.err" && break
    sleep 0.1
  done
  upstreams=$(descendants "$gw")
  echo "  its processes: $(shown_processes "$upstreams")"
  echo "\$ kill -TERM $gw"
  began=$(now)
  kill -TERM "$gw"
  stopped "SIGTERM during start-up stops the gateway and its upstreams" "$gw" "$began" "$upstreams"
  sed 's/^/  stderr: /' "$work/stop-early.err"
  peers=()
}

# --- timing ---

part_timing() {
  part=timing
  echo
  echo "## timing: start-up and per-call overhead, $RT"
  local ten=() i target tools
  for i in $(seq 10); do ten+=("t$i=$TOOLS"); done
  for target in "7|$TOOLS" "7|$RT ./mcp.ts gateway $(command_line "t=$TOOLS")" \
    "70|$RT ./mcp.ts gateway $(command_line "${ten[@]}")"; do
    tools=${target%%|*}
    run startup "$IOP_NODE" interop/lib/gateway-startup.mjs "$RUNS" "$tools" "${target#*|}"
    sed 's/^/  /' "$work/startup.out"
    sed 's/^/  stderr: /' "$work/startup.err"
    echo "  -> exit $status in $took s"
    local ok=yes
    [ "$status" = 0 ] && grep -q '^median of' "$work/startup.out" || ok=no
    verdict $ok "start-up: ${target#*|}" "expected $RUNS runs listing $tools tools"
  done
  run latency "${rt[@]}" interop/lib/proxy-latency.mjs "$CALLS" echo '{"text":"hi"}' "$TOOLS" \
    "$RT ./mcp.ts gateway --prefix collisions $(command_line "t=$TOOLS")" gateway
  sed 's/^/  /' "$work/latency.out"
  sed 's/^/  stderr: /' "$work/latency.err"
  echo "  -> exit $status in $took s"
  local ok=yes
  [ "$status" = 0 ] && grep -q '^added by the gateway' "$work/latency.out" || ok=no
  verdict $ok "latency: $TOOLS, directly and through the gateway" "expected the two medians"
}

for target; do
  case $target in
    stdio) part_stdio ;;
    http) part_http ;;
    principals) part_principals ;;
    task-principals) part_task_principals ;;
    restart) part_restart ;;
    stop) part_stop ;;
    timing) part_timing ;;
  esac
done
stop_peers

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "gateway: all $passed checks as expected ($RT)"
else
  echo "gateway: ${#failed[@]} of $((passed + ${#failed[@]})) checks FAILED ($RT):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
