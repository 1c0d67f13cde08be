#!/usr/bin/env bash
# mcp.ts HTTP servers as replicas that share their state in Redis, behind a real load balancer: HAProxy, round-robin, no
# affinity, so that consecutive requests of one client land on different replicas. One line per check, "ok: ..." or
# "FAIL: ..." (then what the command printed, indented), "# ..." for what was seen along the way, a count at the end,
# exit 1 when a check fails. From the repository root:
#   interop/replicas.sh                          all six parts
#   interop/replicas.sh sessions outage          some of them: sessions, tasks, kill, outage, gateway, memory
#   MCP_RT="deno run -A" interop/replicas.sh     the runtime that runs ./mcp.ts, servers and client (default "node")
# A redis-server of the run's own (a free port, its files in the scratch folder T: --save '' --appendonly yes
# --appendfsync always) holds the state; r1, r2 and r3 are `mcp.ts serve testdata/conformance/tools_tasks.ts --http
# 127.0.0.1:PORT --instance-id rN --heartbeat-ttl 2000 --log-format json` with --state redis://127.0.0.1:RPORT (r3
# through MCP_TS_STATE instead of the flag), and lb is HAProxy (T/lb.cfg: mode http, balance roundrobin, option
# http-server-close so that every request is balanced, not every client connection; retries with redispatch, no health
# checks). Each replica writes one JSON access line per request on its stderr: what the checks count. The parts:
#   sessions  9 stateless server/discover POSTs (curl) through lb: every replica got some (its access lines). mcp.ts's
#             client through lb (2026-07-28 and --protocol legacy). lib/sdk-replicas-session.mjs: one SDK v1 session
#             (StreamableHTTPClientTransport) lists the tools and calls greet 30 times through lb, every answer right,
#             its requests on all three replicas, then DELETE: each replica then answers 404 for that session. A session
#             by hand (curl): initialize at r1, notifications/initialized at r2, tools/call at r3, DELETE at r2, then
#             404 at r1 and r3
#   tasks     2026-07-28 (mcp.ts's client, each replica by its URL): slow_compute --detach at r1 (id "r1.ID"), task get
#             at r2 (working, with its status message), task cancel at r3, get at r2 (cancelled), result through lb
#             (exit 3); confirm_delete --detach --elicit accept at r2 (a client that can be asked), get at r3
#             (input_required), task result --elicit-json at r1 (its answer, tasks/update, reaches r2: "deleted 'x'"),
#             get at r3 (completed); then calls through lb (slow_compute -v, confirm_delete --elicit-json). 2025-11-25
#             in one session (curl): initialize at r1, the GET stream at r2, confirm_delete as a task at r3 (id
#             "r3.ID"), tasks/list at r1, tasks/get at r2, tasks/result at r1; the elicitation/create reaches the
#             client (on the GET stream or the tasks/result stream), its answer POSTed at r2, tasks/result at r1 ends
#             with "deleted 'x'", tasks/get at r3 completed; slow_compute as a task at r2, tasks/cancel at r1, tasks/get
#             at r3 cancelled. lib/sdk-tasks-client.mjs (the SDK v1 task API) through lb: callToolStream, getTask,
#             listTasks, an elicitation answered, an isError result, cancelTask
#   kill      a 2026-07-28 task (call --detach at r1) and a 2025-11-25 one (a session's task-augmented tools/call at
#             r1); kill -9 of r1's process group; task get at r2, polled: "failed: the server instance running it
#             stopped" within the heartbeat TTL (2 s) + REPLICAS_MARGIN s (3); the session's tasks/get at r3 says the
#             same; task result at r3 fails with it (exit 3). r1 is started again (same port, same id) and answers
#   outage    a session opened through lb before; redis-server stopped (SIGTERM: it writes its append-only file and
#             exits): stateless calls (mcp.ts call, 2026-07-28) through lb and at each replica go on; a --protocol
#             legacy call through lb fails within REPLICAS_OUTAGE s (5) naming the store (or HTTP 503); the session's
#             requests get 503 naming the store at each replica; each replica writes one "the state store ... is lost"
#             line. redis-server started again on its port with its files: the session's record is back in it, each
#             replica writes one "... is back" line, the session answers at each replica, legacy and stateless calls
#             through lb answer, and no replica wrote a second "lost"
#   gateway   g1 and g2, `mcp.ts gateway t="mcp.ts serve testdata/tools" j="mcp.ts serve
#             testdata/conformance/tools_tasks.ts" --protocol auto --http 127.0.0.1:PORT --state
#             redis://127.0.0.1:RPORT/1 --instance-id gN --log-format json` (each with its own stdio upstreams; Redis
#             database 1) behind HAProxy glb: the request spread, the SDK v1 session (t__add 20 times, both gateways,
#             404 after DELETE), a session by hand across g1 and g2; a task (j__slow_compute --detach at g1, an
#             upstream's task passed through) followed at g2: task get (working) and cancel there, get at g1
#             (cancelled), and `call <glb> j__slow_compute seconds=2`, its polls through glb; then the outage as above
#   memory    m1 and m2, `serve testdata/tools --http` without --state, behind HAProxy mlb: stateless calls work and
#             spread; `call <mlb> add a=1 b=2 --protocol legacy` ends within 10 s with exit 3, saying the session is
#             unknown to the server it reached (a load balancer without affinity), not after the 60 s timeout; the SDK
#             v1 session fails
# redis-server and haproxy are Debian's (apt-get install -y redis-server haproxy when missing). Every process the run
# starts runs in a process group of its own (SIGTERM, SIGKILL after 10 s, at the end and on Ctrl-C; a process still
# carrying the run's variable in its environment, a gateway's upstream say, is killed by its pid); the end checks that
# none is left. A command that runs over REPLICAS_CHECK_TIMEOUT s (default 60) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(sessions tasks kill outage gateway memory)
for part; do
  if [[ " ${PARTS[*]} " != *" $part "* ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- "${PARTS[@]}"

# The Debian packages: redis-server (every part but memory) and haproxy.
missing=()
[[ " $* " == " memory " ]] || command -v redis-server >/dev/null || missing+=(redis-server)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
if [ ${#missing[@]} -gt 0 ]; then
  root=()
  [ "$(id -u)" = 0 ] || root=(sudo)
  echo "replicas.sh: installing ${missing[*]} (apt-get)" >&2
  "${root[@]}" apt-get install -y "${missing[@]}" >&2 ||
    { "${root[@]}" apt-get update >&2 && "${root[@]}" apt-get install -y "${missing[@]}" >&2; }
fi
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)

# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
cd "$here/.."

RT=${MCP_RT:-node}
read -ra rt <<<"$RT"
MCP=("${rt[@]}" ./mcp.ts)
LIMIT=${REPLICAS_CHECK_TIMEOUT:-60}
MARGIN=${REPLICAS_MARGIN:-3}
OUTAGE=${REPLICAS_OUTAGE:-5}
TTL=2000 # --heartbeat-ttl, ms
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
TASKS=testdata/conformance/tools_tasks.ts
LEGACY=2025-11-25
ACCESS='"mcp\.method\.name":' # an access line
LOST='"msg":"the state store [^ ]+ is lost'
BACK='"msg":"the state store [^ ]+ is back'
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop-replicas.XXXXXX")
# Every process this run starts inherits it: what finds one left over.
export MCP_INTEROP_REPLICAS_RUN=$work
declare -A group=() port=() url=() marked=()
STATE= # redis://127.0.0.1:PORT once redis-server runs
sid=   # the session the curl requests are in
stdin=/dev/null
passed=0
failed=0
part=

SCRIPT=replicas.sh
# shellcheck source=interop/lib/checks.sh
. "$here/lib/checks.sh"

# The command line as shown: mcp.ts for the runtime and ./mcp.ts, <NAME> for a replica's or balancer's URL, <redis>
# for the state URL, T for the scratch folder.
shorten() {
  local line=$1 name
  line=${line//"${MCP[*]}"/mcp.ts}
  for name in "${!url[@]}"; do line=${line//"${url[$name]}"/<$name>}; done
  [ -z "$STATE" ] || line=${line//"$STATE"/<redis>}
  line=${line//"$IOP_NODE"/node}
  line=${line//"$work"/T}
  printf '%s' "$line"
}

# launch NAME COMMAND...: runs it in the background in a process group of its own (stdin nothing), its stdout and
# stderr appended to T/NAME.out and T/NAME.err.
launch() {
  local name=$1
  shift
  set -m
  "$@" >>"$work/$name.out" 2>>"$work/$name.err" </dev/null &
  group[$name]=$!
  set +m
}

# halt [-SIGNAL] NAME...: SIGNAL (default TERM) to each group, SIGKILL to those still running 10 s later. (Its stderr
# discarded: bash's own "Killed" line about a job it reaps.)
halt() {
  local signal=TERM name pid pids=()
  [[ $1 != -* ]] || { signal=${1#-} && shift; }
  for name; do
    pid=${group[$name]:-}
    [ -n "$pid" ] || continue
    kill "-$signal" -- "-$pid" 2>/dev/null || true
    pids+=("$pid")
    unset "group[$name]"
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do
      kill -0 -- "-$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
} 2>/dev/null

# leftovers: the pid of each process of this run still running (its variable in the environment; not this shell).
leftovers() {
  local pid stat
  for pid in $(pgrep -f -- 'mcp\.ts|redis-server|haproxy|curl' || true); do
    [ "$pid" != $$ ] || continue
    stat=$(ps -o stat= -p "$pid" 2>/dev/null) || continue
    [[ $stat != Z* ]] || continue
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "MCP_INTEROP_REPLICAS_RUN=$work" && echo "$pid"
  done
  return 0
}

none_left() { [ -z "$(leftovers)" ]; }

cleanup() {
  local pid
  [ ${#group[@]} -eq 0 ] || halt "${!group[@]}"
  for pid in $(leftovers); do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT # Ctrl-C: the servers are in process groups of their own, so only the EXIT trap reaches them
trap 'exit 143' TERM

# waitfor SECONDS COMMAND...: true once COMMAND is (polled every 0.1 s).
waitfor() {
  local n=$(($1 * 10))
  shift
  for _ in $(seq "$n"); do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}
alive() { [ -n "${group[$1]:-}" ] && kill -0 "${group[$1]}" 2>/dev/null; }
has() { grep -Eq -- "$2" "$1" 2>/dev/null; }
contains() { [[ $1 == *"$2"* ]]; }
pong() { [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; }
listening() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/health")" != 000 ]; }
# status_is WHERE ID ERE: `task <WHERE> get ID` prints a line matching ERE.
status_is() { "${guard[@]}" "${MCP[@]}" task "${url[$1]}" get "$2" 2>/dev/null </dev/null | grep -Eq -- "$3"; }

# mark NAME...: from now on, lines NAME counts the lines its stderr gets.
mark() {
  local name
  for name; do
    touch "$work/$name.err"
    marked[$name]=$(wc -l <"$work/$name.err")
  done
}
# lines NAME ERE: how many lines of NAME's stderr since its mark match ERE; wrote NAME ERE: some.
lines() { tail -n +"$((${marked[$1]:-0} + 1))" "$work/$1.err" | grep -Ec -- "$2" || true; }
wrote() { [ "$(lines "$1" "$2")" -gt 0 ]; }

# said NAME ERE: the message of NAME's last stderr line matching ERE, as a "# NAME: ..." line.
said() {
  local line
  line=$(grep -E -- "$2" "$work/$1.err" | tail -n1) || true
  line=${line#*\"msg\":\"}
  [ -z "$line" ] || echo "# $1: ${line%%\"*}"
}

# redis_up: redis-server on its port (a free one the first time), its files in T/redis; STATE its URL.
redis_up() {
  alive redis && return 0
  [ -n "${port[redis]:-}" ] || port[redis]=$(free_port)
  mkdir -p "$work/redis"
  launch redis redis-server --port "${port[redis]}" --bind 127.0.0.1 --dir "$work/redis" --save '' \
    --appendonly yes --appendfsync always
  STATE=redis://127.0.0.1:${port[redis]}
  if waitfor 10 pong "${port[redis]}"; then
    echo "# redis-server $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') on port ${port[redis]}"
    return 0
  fi
  fail "redis-server did not answer PING on port ${port[redis]} within 10 s" "$work/redis.out"
  halt redis
  return 1
}

# replica NAME: starts NAME (again: on its port): r1-r3 serve TASKS with the state (r3 through MCP_TS_STATE), g1-g2
# gateways in front of their own `serve testdata/tools` with database 1, m1-m2 serve testdata/tools without state;
# ready at its "serving http://..." line.
replica() {
  local name=$1 cmd=() before http
  [ -n "${port[$name]:-}" ] || port[$name]=$(free_port)
  url[$name]=http://127.0.0.1:${port[$name]}/mcp
  http=(--http "127.0.0.1:${port[$name]}" --log-format json)
  case $name in
    r1 | r2) cmd=("${MCP[@]}" serve "$TASKS" "${http[@]}" --state "$STATE" --instance-id "$name" --heartbeat-ttl "$TTL") ;;
    r3) cmd=(env "MCP_TS_STATE=$STATE" "${MCP[@]}" serve "$TASKS" "${http[@]}" --instance-id "$name" --heartbeat-ttl "$TTL") ;;
    g1 | g2)
      cmd=("${MCP[@]}" gateway "t=$RT ./mcp.ts serve testdata/tools" "j=$RT ./mcp.ts serve $TASKS" --protocol auto
        "${http[@]}" --state "$STATE/1" --instance-id "$name")
      ;;
    m1 | m2) cmd=("${MCP[@]}" serve testdata/tools "${http[@]}") ;;
  esac
  touch "$work/$name.err"
  before=$(grep -c '"msg":"serving http' "$work/$name.err" || true)
  echo "# $name: $(command_line "${cmd[@]}")"
  launch "$name" "${cmd[@]}"
  for _ in $(seq 600); do # 60 s: a first run may compile or download
    [ "$(grep -c '"msg":"serving http' "$work/$name.err" || true)" -le "$before" ] || return 0
    alive "$name" || break
    sleep 0.1
  done
  fail "$name did not say \"serving http://...\" (its stderr:)" "$work/$name.err"
  halt "$name"
  return 1
}

# balancer NAME REPLICA...: HAProxy on a free port in front of the replicas (T/NAME.cfg), round-robin per request.
balancer() {
  local name=$1 r
  shift
  port[$name]=$(free_port)
  url[$name]=http://127.0.0.1:${port[$name]}/mcp
  {
    cat <<EOF
global
  maxconn 256
defaults
  mode http
  timeout connect 2s
  timeout client 5m
  timeout server 5m
  # close the server side after each response: every request is balanced, not every client connection
  option http-server-close
  # a connection refused (a replica killed) goes to the next one
  retries 2
  option redispatch 1
frontend $name
  bind 127.0.0.1:${port[$name]}
  default_backend replicas
backend replicas
  balance roundrobin
EOF
    for r; do echo "  server $r 127.0.0.1:${port[$r]}"; done
  } >"$work/$name.cfg"
  if ! "$HAPROXY" -c -q -f "$work/$name.cfg" >"$work/$name.err" 2>&1; then
    fail "haproxy -c -f T/$name.cfg refused it:" "$work/$name.err"
    return 1
  fi
  launch "$name" "$HAPROXY" -db -f "$work/$name.cfg"
  if waitfor 10 listening "${port[$name]}"; then
    echo "# $name: $("$HAPROXY" -v | head -n1 | cut -d' ' -f1-3) on port ${port[$name]}, round-robin over $*"
    return 0
  fi
  fail "haproxy (T/$name.cfg) did not listen on port ${port[$name]} within 10 s" "$work/$name.err"
  halt "$name"
  return 1
}

# cluster BALANCER REPLICA...: redis-server (unless the replicas are m*), each replica not running, then the balancer.
cluster() {
  local lb=$1 r
  shift
  [[ $1 == m* ]] || redis_up || return 1
  for r; do alive "$r" || replica "$r" || return 1; done
  alive "$lb" || balancer "$lb" "$@"
}

# spread BALANCER REPLICA...: 3 stateless server/discover POSTs (curl) per replica through the balancer; each replica
# must have got at least one (its access lines).
spread() {
  local lb=$1 n
  shift
  mark "$@"
  n=$((3 * $#))
  echo "# $n server/discover POSTs (curl) through $lb"
  for _ in $(seq "$n"); do
    curl -sS -o /dev/null -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
      -H 'Mcp-Method: server/discover' -H 'MCP-Protocol-Version: 2026-07-28' --data-binary \
      '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"replicas.sh","version":"1"}}}}' \
      "${url[$lb]}" || true
  done
  sleep 0.2
  each_got "$lb's round-robin: the $n POSTs" "$@"
}

# each_got WHAT REPLICA...: a check that every replica wrote access lines since its mark.
each_got() {
  local what=$1 r counts="" each=yes
  shift
  for r; do
    counts+="${counts:+, }$r $(lines "$r" "$ACCESS")"
    [ "$(lines "$r" "$ACCESS")" -gt 0 ] || each=
  done
  check "$what landed on every replica (access lines: $counts)" test -n "$each"
}

# rpc WHERE JSON: POSTs one JSON-RPC message to WHERE's URL with curl, in session $sid when set (its header and
# MCP-Protocol-Version 2025-11-25), as a run: stdout the messages it answered (an SSE stream's data lines), then
# "HTTP CODE"; the answer's headers in T/headers.
rpc() {
  local where=$1 json=$2 method h=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
  [ -z "$sid" ] || h+=(-H "Mcp-Session-Id: $sid" -H "MCP-Protocol-Version: $LEGACY")
  run curl -sS -D "$work/headers" -w '\nHTTP %{http_code}\n' "${h[@]}" --data-binary "$json" "${url[$where]}"
  method=$(sed -n 's/^{"jsonrpc":"2.0",\("id":[^,]*,\)\{0,1\}"method":"\([^"]*\)".*/\2/p' <<<"$json")
  ran="curl: POST ${method:-(a response)} to <$where>${sid:+ in the session}"
  sed -i -n -e 's/^data: //' -e '/^[[{]/p' -e '/^HTTP /p' "$work/out"
}
# end_session WHERE: DELETE of session $sid at WHERE (a run).
end_session() {
  run curl -sS -X DELETE -w '\nHTTP %{http_code}\n' -H "Mcp-Session-Id: $sid" -H "MCP-Protocol-Version: $LEGACY" \
    "${url[$1]}"
  ran="curl: DELETE <$1> in the session"
}
# open_session WHERE WHERE2 [CAPABILITIES]: initialize at WHERE (checked), notifications/initialized at WHERE2
# (checked); sid the session's id, or empty.
open_session() {
  local capabilities='{}'
  [ -z "${3:-}" ] || capabilities=$3
  sid=
  rpc "$1" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":'"$capabilities"',"clientInfo":{"name":"replicas.sh","version":"1"}}}'
  expect 0 'out=^HTTP 200$' 'out="protocolVersion":"2025-11-25"'
  sid=$(sed -n 's/^mcp-session-id: *//Ip' "$work/headers" | tr -d '\r')
  [ -n "$sid" ] || { fail "initialize at <$1> answered no Mcp-Session-Id" && return 1; }
  rpc "$2" '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  expect 0 'out=^HTTP 202$'
}
# listen NAME WHERE [JSON]: curl in the background in session $sid: the session's GET stream, or a POST of JSON whose
# answer streams; what it receives in T/NAME.out as it comes.
listen() {
  local name=$1 where=$2 json=${3:-} h=(-H "Mcp-Session-Id: $sid" -H "MCP-Protocol-Version: $LEGACY")
  if [ -n "$json" ]; then
    h+=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' --data-binary "$json")
  else
    h+=(-H 'Accept: text/event-stream')
  fi
  : >"$work/$name.out"
  launch "$name" curl -sS -N -m "$LIMIT" "${h[@]}" "${url[$where]}"
}
# pick EXPR FILE...: the first JSON-RPC message in the files (lines, "data: " taken off) for which the JavaScript
# expression of m is true, as JSON; nothing when none.
pick() {
  "$IOP_NODE" -e 'const fs = require("node:fs"); const test = (0, eval)("(m) => " + process.argv[1]);
    for (const file of process.argv.slice(2)) for (const line of fs.readFileSync(file, "utf8").split("\n")) {
      let m; try { m = JSON.parse(line.replace(/^data: /, "")); } catch { continue; }
      if (test(m)) { console.log(JSON.stringify(m)); process.exit(0); }
    }' "$@" 2>/dev/null || true
}
# task_field FIELD: FIELD of the task in the last run's answer (result.task, or result), or nothing.
task_field() {
  pick 'm.result' "$work/out" | "$IOP_NODE" -e 'let t = ""; process.stdin.on("data", (d) => (t += d)).on("end", () => {
    if (!t.trim()) return; const r = JSON.parse(t).result; const v = (r.task ?? r)[process.argv[1]];
    if (v !== undefined) console.log(v); })' "$1"
}
# with_id ID WHAT: true when ID looks like a task id; else WHAT, which needed it, fails without running.
with_id() {
  [[ $1 =~ ^[A-Za-z0-9._:-]+$ ]] && return 0
  fail "$2: not run: no task id before it"
  return 1
}

part_sessions() {
  part=sessions
  echo
  echo "## sessions: three \`serve --state\` replicas behind HAProxy round-robin, one session across them ($RT)"
  cluster lb r1 r2 r3 || return 0
  spread lb r1 r2 r3
  run "${MCP[@]}" call "${url[lb]}" greet name=lb
  expect 0 'out=^Hello, lb!$'
  run "${MCP[@]}" call "${url[lb]}" greet name=lb --protocol legacy
  expect 0 'out=^Hello, lb!$'

  mark r1 r2 r3
  run "$IOP_NODE" interop/lib/sdk-replicas-session.mjs "${url[lb]}" 30 greet '{"name":"replica"}'
  expect 0 'out=^session [^ ]+$' 'out=^rounds 30 ok 30 tools 7 answer "Hello, replica!"$' 'out=^deleted ' \
    '!out=^round [0-9]+ failed'
  each_got "the SDK v1 session's requests" r1 r2 r3
  sid=$(sed -n 's/^session \([^ ]*\)$/\1/p' "$work/out")
  if [ -n "$sid" ]; then
    local r
    for r in r1 r2 r3; do
      rpc "$r" '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}'
      expect 0 'out=^HTTP 404$' -- "$ran, after the SDK's DELETE through lb: 404 (the session ended everywhere)"
    done
  fi

  echo "# a session by hand (curl): each request at another replica"
  open_session r1 r2 || return 0
  rpc r3 '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"r3"}}}'
  expect 0 'out=^HTTP 200$' 'out="text":"Hello, r3!"'
  rpc r1 '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}'
  expect 0 'out=^HTTP 200$' 'out="name":"slow_compute"'
  end_session r2
  expect 0 'out=^HTTP 20[04]$'
  for r in r1 r3; do
    rpc "$r" '{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}'
    expect 0 'out=^HTTP 404$' -- "$ran, after DELETE at <r2>: 404"
  done
  sid=
}

part_tasks() {
  part=tasks
  echo
  echo "## tasks: a task made at one replica, seen, answered and cancelled at the others ($RT)"
  cluster lb r1 r2 r3 || return 0
  local id
  echo "# 2026-07-28: mcp.ts's client, each replica by its URL"
  run "${MCP[@]}" call "${url[r1]}" slow_compute seconds=30 label=long --detach
  expect 0 'out=^r1\.[A-Za-z0-9_-]+$'
  id=$(head -n1 "$work/out")
  if with_id "$id" "task get/cancel at other replicas"; then
    run "${MCP[@]}" task "${url[r2]}" get "$id"
    expect 0 'out=^working: (computing "long"|[0-9]+/30 seconds)$' -- \
      "$ran: working, with the task's status message (ctx.task's, or a progress's)"
    run "${MCP[@]}" task "${url[r3]}" cancel "$id"
    expect 0
    run "${MCP[@]}" task "${url[r2]}" get "$id"
    expect 0 'out=^cancelled'
    run "${MCP[@]}" task "${url[lb]}" result "$id"
    expect 3 'err=task [^ ]+ was cancelled'
  fi
  run "${MCP[@]}" call "${url[r2]}" confirm_delete filename=x --detach --elicit accept
  expect 0 'out=^r2\.[A-Za-z0-9_-]+$'
  id=$(head -n1 "$work/out")
  if with_id "$id" "task get/result at other replicas"; then
    waitfor 5 status_is r3 "$id" ^input_required || true
    run "${MCP[@]}" task "${url[r3]}" get "$id"
    expect 0 'out=^input_required'
    run "${MCP[@]}" task "${url[r1]}" result "$id" --elicit accept --elicit-json '{"confirm":true}'
    expect 0 "out=^deleted 'x'\$"
    run "${MCP[@]}" task "${url[r3]}" get "$id"
    expect 0 'out=^completed'
  fi
  mark r1 r2 r3
  run "${MCP[@]}" call "${url[lb]}" slow_compute seconds=2 -v
  expect 0 'out=^Computation "job" completed after 2 seconds. Result: 42.$' 'err=^mcp: task r[123]\.[^: ]+: completed'
  echo "# its requests per replica: r1 $(lines r1 "$ACCESS"), r2 $(lines r2 "$ACCESS"), r3 $(lines r3 "$ACCESS")"
  run "${MCP[@]}" call "${url[lb]}" confirm_delete filename=y --elicit accept --elicit-json '{"confirm":true}' -v
  expect 0 "out=^deleted 'y'\$" 'err=^mcp: task r[123]\.[^: ]+: input_required'

  echo "# 2025-11-25: one session (curl), each request at another replica"
  open_session r1 r3 '{"tasks":{},"elicitation":{}}' || return 0
  listen get r2
  rpc r3 '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"confirm_delete","arguments":{"filename":"x"},"task":{"ttl":60000}}}'
  expect 0 'out=^HTTP 200$' 'out="taskId":"r3\.'
  id=$(task_field taskId)
  if with_id "$id" "the session's tasks/list, get, result at other replicas"; then
    rpc r1 '{"jsonrpc":"2.0","id":3,"method":"tasks/list","params":{}}'
    expect 0 'out=^HTTP 200$' "out=\"taskId\":\"$id\",\"status\":\"(working|input_required)\""
    rpc r2 '{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"'"$id"'"}}'
    expect 0 'out=^HTTP 200$' 'out="status":"(working|input_required)"'
    listen result r1 '{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"'"$id"'"}}'
    local ask answer where
    waitfor 10 has "$work/get.out" 'elicitation/create' || waitfor 0 has "$work/result.out" 'elicitation/create' || true
    ask=$(pick 'm.method === "elicitation/create"' "$work/get.out" "$work/result.out")
    where=$(has "$work/get.out" 'elicitation/create' && echo "the GET stream at <r2>" || echo "tasks/result's stream at <r1>")
    check "the task's elicitation/create reached the client (on $where): ${ask:0:160}" contains "$ask" "Delete 'x'"
    if [ -n "$ask" ]; then
      answer=$("$IOP_NODE" -e 'console.log(JSON.stringify({ jsonrpc: "2.0", id: JSON.parse(process.argv[1]).id,
        result: { action: "accept", content: { confirm: true } } }))' "$ask")
      rpc r2 "$answer"
      expect 0 'out=^HTTP 202$' -- "curl: POST the elicitation's answer to <r2> in the session: 202"
      waitfor 10 has "$work/result.out" "deleted 'x'" || true
      check "tasks/result at <r1> ends with the task's result, \"deleted 'x'\"" has "$work/result.out" \
        "\"id\":5,\"result\":.*\"text\":\"deleted 'x'\""
      rpc r3 '{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"'"$id"'"}}'
      expect 0 'out=^HTTP 200$' 'out="status":"completed"'
    fi
  fi
  halt get result
  rpc r2 '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":30},"task":{"ttl":60000}}}'
  expect 0 'out=^HTTP 200$' 'out="taskId":"r2\.'
  id=$(task_field taskId)
  if with_id "$id" "the session's tasks/cancel at another replica"; then
    rpc r1 '{"jsonrpc":"2.0","id":8,"method":"tasks/cancel","params":{"taskId":"'"$id"'"}}'
    expect 0 'out=^HTTP 200$' 'out="status":"cancelled"'
    rpc r3 '{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"'"$id"'"}}'
    expect 0 'out=^HTTP 200$' 'out="status":"cancelled"'
  fi
  end_session r3
  expect 0 'out=^HTTP 20[04]$'
  sid=

  echo "# the SDK v1 task API through lb"
  run "$IOP_NODE" interop/lib/sdk-tasks-client.mjs "${url[lb]}"
  local what="node lib/sdk-tasks-client.mjs <lb>"
  expect 0 'out=^slow_compute taskCreated r[123]\.[^ ]+ working' 'out=^slow_compute taskStatus completed' \
    'out=^slow_compute result isError=false Computation "job" completed after 1 seconds. Result: 42.$' \
    'out=^slow_compute getTask completed' 'out=^slow_compute listTasks has it' -- \
    "$what: slow_compute {seconds: 1}: taskCreated (an id rN.ID), taskStatus, result, getTask, listTasks"
  expect 0 "out=^confirm_delete elicitation \"Delete 'x'\\?\" related-task=r[123]\\." \
    "out=^confirm_delete result isError=false deleted 'x'\$" -- \
    "$what: confirm_delete: elicitation/create answered (accept, {confirm: true}), its result"
  expect 0 'out=^failing_job result isError=true simulated failure: job crashed$' -- "$what: failing_job: isError"
  expect 0 'out=^cancel cancelTask cancelled' 'out=^cancel getTask cancelled' -- "$what: cancelTask"
}

part_kill() {
  part="kill"
  echo
  echo "## kill: kill -9 of the replica running a task; another says it failed within the heartbeat TTL ($RT)"
  cluster lb r1 r2 r3 || return 0
  local id legacy="" began seen="" limit
  run "${MCP[@]}" call "${url[r1]}" slow_compute seconds=60 label=doomed --detach
  expect 0 'out=^r1\.[A-Za-z0-9_-]+$'
  id=$(head -n1 "$work/out")
  with_id "$id" "kill -9 of r1 running a task" || return 0
  if open_session r2 r2 '{"tasks":{}}'; then
    rpc r1 '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":60,"label":"doomed"},"task":{"ttl":60000}}}'
    expect 0 'out=^HTTP 200$' 'out="taskId":"r1\.'
    legacy=$(task_field taskId)
  fi
  run "${MCP[@]}" task "${url[r2]}" get "$id"
  expect 0 'out=^working'

  echo "# kill -9 r1 (pid ${group[r1]})"
  halt -KILL r1
  began=$(now)
  limit=$(awk "BEGIN { print $TTL / 1000 + $MARGIN }")
  while :; do
    run "${MCP[@]}" task "${url[r2]}" get "$id"
    if has "$work/out" '^failed'; then
      seen=$(since "$began")
      break
    fi
    awk "BEGIN { exit !($(since "$began") > $limit + 5) }" && break
    sleep 0.2
  done
  expect 0 'out=^failed: the server instance running it stopped$'
  check "r1's task is failed within the TTL + ${MARGIN} s ($limit s) of the kill (seen after ${seen:-never} s)" \
    awk "BEGIN { exit !(${seen:-999} <= $limit) }"
  if [ -n "$legacy" ]; then
    rpc r3 '{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"'"$legacy"'"}}'
    expect 0 'out=^HTTP 200$' 'out="status":"failed"' 'out="statusMessage":"the server instance running it stopped"'
    end_session r3
    sid=
  fi
  run "${MCP[@]}" task "${url[r3]}" result "$id"
  expect 3 'err=task [^ ]+ failed: the server instance running it stopped'

  echo "# r1 again, on its port"
  replica r1 || return 0
  run "${MCP[@]}" call "${url[r1]}" greet name=again
  expect 0 'out=^Hello, again!$'
}

# outage BALANCER TOOL "ARG..." ANSWER REPLICA...: redis-server stopped and started again under the replicas.
outage() {
  local lb=$1 tool=$2 answer=$4 args r keep n key db=0
  read -ra args <<<"$3"
  shift 4
  open_session "$lb" "$lb" || return 0
  keep=$sid
  rpc "$lb" '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}'
  expect 0 'out=^HTTP 200$' 'out="tools":'
  sid=
  mark "$@"
  echo "# redis-server stopped (SIGTERM)"
  halt redis
  for r in "$lb" "$@"; do
    run "${MCP[@]}" call "${url[$r]}" "$tool" "${args[@]}"
    expect 0 "out=^$answer\$" -- "$ran, redis-server stopped: a stateless call answers"
  done
  run "${MCP[@]}" call "${url[$lb]}" "$tool" "${args[@]}" --protocol legacy
  expect 3 'err=503|state store' -- "$ran, redis-server stopped: fails, naming the store (or HTTP 503)"
  check "... within $OUTAGE s (took $took s)" awk "BEGIN { exit !($took <= $OUTAGE) }"
  sid=$keep
  for r in "$@"; do
    rpc "$r" '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}'
    expect 0 'out=^HTTP 503$' 'out="message":"[^"]*state store' -- "$ran, redis-server stopped: 503, naming the store"
  done
  sid=
  for r; do
    waitfor "$OUTAGE" wrote "$r" "$LOST" || true
    check "$r wrote one \"... store ... lost\" line ($(lines "$r" "$LOST"))" test "$(lines "$r" "$LOST")" = 1
  done
  said "$1" "$LOST"

  echo "# redis-server started again on port ${port[redis]} (its append-only file in T/redis)"
  redis_up || return 0
  [[ $1 != g* ]] || db=1
  key=$(redis-cli -p "${port[redis]}" -n "$db" --scan --pattern "*$keep*" 2>/dev/null | head -n1)
  check "the session's record is in redis-server again, read from its append-only file (db $db: ${key:-no key})" \
    test -n "$key"
  for r; do
    waitfor 15 wrote "$r" "$BACK" || true
    check "$r wrote one \"... back\" line ($(lines "$r" "$BACK"))" test "$(lines "$r" "$BACK")" = 1
  done
  said "$1" "$BACK"
  sid=$keep
  for r; do
    rpc "$r" '{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}'
    expect 0 'out=^HTTP 200$' 'out="tools":' -- "$ran, redis-server back: the session opened before answers"
  done
  end_session "$lb"
  expect 0 'out=^HTTP 20[04]$'
  sid=
  run "${MCP[@]}" call "${url[$lb]}" "$tool" "${args[@]}" --protocol legacy
  expect 0 "out=^$answer\$"
  run "${MCP[@]}" call "${url[$lb]}" "$tool" "${args[@]}"
  expect 0 "out=^$answer\$"
  for r; do
    n="$(lines "$r" "$LOST") lost, $(lines "$r" "$BACK") back"
    check "$r: one outage, one \"lost\" and one \"back\" line ($n)" test "$n" = "1 lost, 1 back"
  done
}

part_outage() {
  part=outage
  echo
  echo "## outage: redis-server stopped under the replicas, then started again ($RT)"
  cluster lb r1 r2 r3 || return 0
  outage lb greet name=x 'Hello, x!' r1 r2 r3
}

part_gateway() {
  part=gateway
  echo
  echo "## gateway: two \`gateway --http --state\` replicas behind HAProxy ($RT)"
  cluster glb g1 g2 || return 0
  spread glb g1 g2
  mark g1 g2
  run "$IOP_NODE" interop/lib/sdk-replicas-session.mjs "${url[glb]}" 20 t__add '{"a":1,"b":2}'
  expect 0 'out=^session [^ ]+$' 'out=^rounds 20 ok 20 tools [0-9]+ answer "3"$' 'out=^deleted ' \
    '!out=^round [0-9]+ failed'
  each_got "the SDK v1 session's requests" g1 g2
  sid=$(sed -n 's/^session \([^ ]*\)$/\1/p' "$work/out")
  local g
  if [ -n "$sid" ]; then
    for g in g1 g2; do
      rpc "$g" '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}'
      expect 0 'out=^HTTP 404$' -- "$ran, after the SDK's DELETE through glb: 404"
    done
  fi
  echo "# a session by hand (curl) across g1 and g2"
  if open_session g1 g2; then
    rpc g1 '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t__add","arguments":{"a":1,"b":2}}}'
    expect 0 'out=^HTTP 200$' 'out="text":"3"'
    rpc g2 '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t__add","arguments":{"a":2,"b":2}}}'
    expect 0 'out=^HTTP 200$' 'out="text":"4"'
    end_session g2
    expect 0 'out=^HTTP 20[04]$'
    rpc g1 '{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}'
    expect 0 'out=^HTTP 404$' -- "$ran, after DELETE at <g2>: 404"
  fi
  sid=
  echo "# a task through g1 (upstream j's, passed through in 2026-07-28), followed at g2"
  run "${MCP[@]}" call "${url[g1]}" j__slow_compute seconds=30 label=long --detach
  expect 0 'out=^j__[A-Za-z0-9._-]+$'
  local id
  id=$(head -n1 "$work/out")
  if with_id "$id" "task get/cancel at g2"; then
    run "${MCP[@]}" task "${url[g2]}" get "$id"
    expect 0 'out=^working'
    run "${MCP[@]}" task "${url[g2]}" cancel "$id"
    expect 0
    run "${MCP[@]}" task "${url[g1]}" get "$id"
    expect 0 'out=^cancelled'
  fi
  run "${MCP[@]}" call "${url[glb]}" j__slow_compute seconds=2
  expect 0 'out=^Computation "job" completed after 2 seconds. Result: 42.$' -- "$ran: its polls through glb"
  outage glb t__add 'a=1 b=2' 3 g1 g2
}

part_memory() {
  part=memory
  echo
  echo "## memory: two replicas without --state behind HAProxy, no affinity ($RT)"
  cluster mlb m1 m2 || return 0
  spread mlb m1 m2
  run "${MCP[@]}" call "${url[mlb]}" add a=1 b=2
  expect 0 'out=^3$'
  run "${MCP[@]}" call "${url[mlb]}" add a=1 b=2 --protocol legacy
  expect 3 'err=[Ss]ession' 'err=load balancer|affinity'
  sed 's/^/# /' "$work/err"
  check "... within 10 s, not after a timeout (took $took s)" awk "BEGIN { exit !($took <= 10) }"
  run "$IOP_NODE" interop/lib/sdk-replicas-session.mjs "${url[mlb]}" 3 add '{"a":1,"b":2}'
  expect 1 'out=failed' -- "$ran: the SDK v1 session fails too (no shared state, no affinity)"
  sed 's/^/# /' "$work/out"
}

began=$(now)
for part; do "part_$part"; done

part=end
echo
echo "## end: everything this run started is stopped"
[ ${#group[@]} -eq 0 ] || halt "${!group[@]}"
waitfor 2 none_left || true
left=$(leftovers)
check "no process of this run is left (pgrep: ${left:-none})" test -z "$left"
echo
echo "replicas.sh: $passed passed, $failed failed ($RT, $(since "$began") s)"
[ "$failed" = 0 ]
