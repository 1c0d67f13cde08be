#!/usr/bin/env bash
# `mcp.ts proxy` and `mcp.ts replay` against real peers: official SDK clients in front, server-everything behind.
# Prints each check, what it printed, its exit code and time, ok or FAILED, and exits 1 when any check fails. From the
# repository root:
#   interop/proxy.sh                          all four parts
#   interop/proxy.sh sdk replay               some of them: sdk, stdio-http, replay, latency
#   MCP_RT="bun" interop/proxy.sh             the runtime that runs ./mcp.ts (client, proxy, replay) and the latency
#   MCP_RT="node" interop/proxy.sh            driver (default "deno run -A")
# The parts:
#   sdk         the SDK clients cannot tell a proxied server from the real one: lib/sdk-session.mjs --wire (list the
#               tools, call echo, get-sum, trigger-long-running-operation with progress, list the resources, read
#               one, list the prompts, get args-prompt) prints every message the client received; they must be equal,
#               byte for byte, directly and through the proxy. SDK v1 and SDK v2 over stdio
#               (`mcp-server-everything stdio` vs `mcp.ts proxy "mcp-server-everything stdio"`); SDK v1 over HTTP
#               (`PORT=N mcp-server-everything streamableHttp` vs `mcp.ts proxy URL --http 127.0.0.1:0`, HTTP to
#               HTTP, and vs `mcp.ts proxy "mcp-server-everything stdio" --http 127.0.0.1:0`, HTTP to stdio)
#   stdio-http  a stdio host reaching an HTTP server: `mcp.ts call "mcp.ts proxy URL" ...` prints what
#               `mcp.ts call URL ...` prints (stdout, stderr, exit code)
#   replay      `mcp.ts <command> "mcp-server-everything stdio" ... --record T`, then the same command against
#               `mcp.ts replay T`: the same stdout, stderr and exit code (call, list, info, resources, prompts, read,
#               prompt, a -v progress call; --strict; an unmatched request); `proxy --record` under the SDK session,
#               replayed to the same session (v1, also --strict; v2, whose server/discover probe runs on a second
#               process); no cassette or --log file holds a -H header value or a URL's query
#   latency     the median time per sequential tools/call, directly and through `mcp.ts proxy` (stdio to stdio),
#               with the mcp.ts library's connect() on $MCP_RT (lib/proxy-latency.mjs); PROXY_CALLS calls (1000)
# Every server and proxy runs in a process group of its own and is stopped after its checks (SIGTERM to the group,
# SIGKILL after 10 s), also on Ctrl-C. A check that runs over PROXY_CHECK_TIMEOUT s (default 60) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(sdk stdio-http replay latency)
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
CALLS=${PROXY_CALLS:-1000}
LIMIT=${PROXY_CHECK_TIMEOUT:-60}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
EVERYTHING="mcp-server-everything stdio"
SESSION=("$IOP_NODE" interop/lib/sdk-session.mjs)
# The sessions wait this long after connecting: what server-everything sends on its own after the handshake
# (notifications/tools/list_changed) then comes before the first request, not racing it (see lib/sdk-session.mjs).
SETTLE=300
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
peers=() # "pgid name" of the servers and proxies running now
url=
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
# A command as it would be typed.
command_line() {
  local line
  line=$(for arg; do shown "$arg"; done)
  printf '%s' "${line# }"
}

# stop_peers: SIGTERM to each peer's group, SIGKILL after 10 s; prints how each one ended.
stop_peers() {
  local entry pgid name status
  for entry in "${peers[@]}"; do
    pgid=${entry%% *}
    name=${entry#* }
    status=0
    kill -TERM -- "-$pgid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 -- "-$pgid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pgid" 2>/dev/null || true
    wait "$pgid" 2>/dev/null || status=$?
    echo "proxy: stopped $name (exit $status)"
  done
  peers=()
}
trap 'stop_peers; rm -rf "$work"' EXIT
trap 'exit 130' INT # Ctrl-C: the peers are in process groups of their own, so only stop_peers reaches them
trap 'exit 143' TERM

# start_peer NAME "COMMAND LINE" SED: runs the command line through sh in a process group of its own (stderr in
# $work/NAME.err) and sets url to what SED prints from its stderr, waiting up to 60 s.
start_peer() {
  local name=$1 command=$2 pattern=$3 pgid
  : >"$work/$name.err"
  set -m
  sh -c "exec $command" >"$work/$name.out" 2>"$work/$name.err" </dev/null &
  pgid=$!
  set +m
  peers+=("$pgid $name")
  url=
  for _ in $(seq 600); do
    url=$(sed -n "$pattern" "$work/$name.err" | head -n1)
    [ -n "$url" ] && break
    kill -0 "$pgid" 2>/dev/null || break
    sleep 0.1
  done
  echo "# $name: $command"
  if [ -z "$url" ]; then
    echo "proxy: $name did not start:"
    sed 's/^/  /' "$work/$name.err"
    return 1
  fi
  echo "# $url"
}

# start_everything_http: `PORT=N mcp-server-everything streamableHttp` on a free port (it prints no URL, and takes
# PORT=0 literally), url=http://127.0.0.1:N/mcp once it says "... port N"; another port if that one was taken.
start_everything_http() {
  local port
  for _ in 1 2 3; do
    port=$(free_port)
    if start_peer everything-http "env PORT=$port mcp-server-everything streamableHttp" \
      "s|.*listening on port $port\$|http://127.0.0.1:$port/mcp|p"; then
      return 0
    fi
    stop_peers
  done
  return 1
}

# start_proxy NAME ARGS...: `$RT ./mcp.ts proxy ARGS... --http 127.0.0.1:0`; url from its "mcp: serving URL (proxying ...)".
start_proxy() {
  local name=$1
  shift
  start_peer "$name" "$RT ./mcp.ts proxy $(command_line "$@") --http 127.0.0.1:0" \
    's|^mcp: serving \(http://[^ ]*\) (proxying .*)$|\1|p'
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

# --- sdk: the SDK clients, directly and through the proxy ---

# session NAME SDK TARGET: one lib/sdk-session.mjs run; prints its summary (and, on failure, its wire log).
session() {
  local name=$1 sdk=$2 target=$3
  run "$name" "${SESSION[@]}" "$sdk" "$target" --wire --settle "$SETTLE"
  sed -n 's/^session: /  /p' "$work/$name.err"
  echo "  ($(wc -l <"$work/$name.out") messages received; exit $status in $took s)"
  echo "$status" >"$work/$name.status"
  if [ "$status" != 0 ]; then
    echo "  its wire log (last 30 lines):"
    grep '^wire ' "$work/$name.err" | tail -n 30 | cut -c1-300 | sed 's/^/    /'
  fi
}

# shapes FILE: each received message of a session in short: "session < tools/list#1", "session < #1 result".
shapes() {
  # shellcheck disable=SC2016 # JavaScript, not shell
  "$IOP_NODE" -e 'for (const line of require("node:fs").readFileSync(process.argv[1], "utf8").split("\n")) {
    const at = line.indexOf(" < ");
    if (at < 0) continue;
    const m = JSON.parse(line.slice(at + 3));
    const id = m.id === undefined ? "" : `#${m.id}`;
    console.log(`${line.slice(0, at)} < ${m.method ? m.method + id : `${id} ${m.error ? "error" : "result"}`}`);
  }' "$1"
}

# same_session NAME A B: what the SDK client received in session A and in session B must be identical.
same_session() {
  local name=$1 a=$2 b=$3 ok=yes
  echo
  echo "# $name: the messages received in \"$a\" and in \"$b\""
  [ "$(cat "$work/$a.status")" = 0 ] && [ "$(cat "$work/$b.status")" = 0 ] && [ -s "$work/$a.out" ] || ok=no
  if cmp -s "$work/$a.out" "$work/$b.out"; then
    cut -c1-160 "$work/$b.out" | sed 's/^/  /'
    echo "  (identical: $(wc -l <"$work/$b.out") messages, $(wc -c <"$work/$b.out") bytes)"
  else
    ok=no
    echo "  they differ; in short (a method, or a response's id), $a on the left, $b on the right:"
    diff -y -t -W 100 <(shapes "$work/$a.out") <(shapes "$work/$b.out") | sed 's/^/  /' || true
    echo "  in full (lines cut at 400 characters):"
    diff "$work/$a.out" "$work/$b.out" | cut -c1-400 | sed 's/^/  /' || true
  fi
  verdict $ok "$name" "not the same messages, or a session failed"
}

part_sdk() {
  part=sdk
  echo
  echo "## sdk: SDK clients directly and through mcp.ts proxy"
  local proxied="$RT ./mcp.ts proxy '$EVERYTHING'"
  session v1-direct v1 "$EVERYTHING"
  session v1-proxied v1 "$proxied"
  same_session "SDK v1, stdio" v1-direct v1-proxied
  session v2-direct v2 "$EVERYTHING"
  session v2-proxied v2 "$proxied"
  same_session "SDK v2, stdio (server/discover probe, then initialize)" v2-direct v2-proxied

  echo
  start_everything_http
  local everything=$url
  session http-direct v1 "$everything"
  # a proxy serves one client's session: a fresh one for each
  echo
  start_proxy proxy-http-http "$everything"
  session http-http v1 "$url"
  same_session "SDK v1, HTTP -> proxy -> HTTP" http-direct http-http
  echo
  start_proxy proxy-http-stdio "$EVERYTHING"
  session http-stdio v1 "$url"
  same_session "SDK v1, HTTP -> proxy -> stdio" http-direct http-stdio
  stop_peers
}

# --- mcp.ts commands: same output ---

# [record=FILE] [drop=LINE] same_output "SERVER A" "SERVER B" COMMAND ARGS...: `mcp.ts COMMAND SERVER ARGS...` with
# A (and --record FILE) then with B must print the same stdout and stderr, byte for byte, and exit alike (0 unless
# want=N). drop: a line A's stderr may have that B's cannot (the live server's own stderr, shown by -v).
same_output() {
  local a=$1 b=$2 command=$3 ok=yes extra=()
  shift 3
  [ -z "${record:-}" ] || extra=(--record "$record")
  run out-a "${rt[@]}" ./mcp.ts "$command" "$a" "$@" "${extra[@]}"
  local status_a=$status took_a=$took
  sed 's/^/  /' "$work/out-a.out"
  sed 's/^/  stderr: /' "$work/out-a.err"
  echo "  -> exit $status_a in $took_a s"
  run out-b "${rt[@]}" ./mcp.ts "$command" "$b" "$@"
  echo "  -> exit $status in $took s"
  if [ -n "${drop:-}" ]; then
    grep -vxF -- "$drop" "$work/out-a.err" >"$work/out-a.kept" || true
    mv "$work/out-a.kept" "$work/out-a.err"
    echo "  (not compared: \"$drop\" on the live server's stderr)"
  fi
  [ "$status_a" = "${want:-0}" ] && [ "$status" = "$status_a" ] || ok=no
  if cmp -s "$work/out-a.out" "$work/out-b.out" && cmp -s "$work/out-a.err" "$work/out-b.err"; then
    echo "  the same stdout ($(wc -c <"$work/out-b.out") bytes) and stderr ($(wc -c <"$work/out-b.err") bytes)"
  else
    ok=no
    echo "  stdout or stderr differs:"
    diff <(sed 's/^/stdout: /' "$work/out-a.out"; sed 's/^/stderr: /' "$work/out-a.err") \
      <(sed 's/^/stdout: /' "$work/out-b.out"; sed 's/^/stderr: /' "$work/out-b.err") | cut -c1-400 | sed 's/^/  /' ||
      true
  fi
  verdict $ok "$command $(command_line "$@"): $a vs $b" "expected exit ${want:-0} from both, the same output"
}

part_stdio_http() {
  part=stdio-http
  echo
  echo "## stdio-http: a stdio host reaching an HTTP server through mcp.ts proxy"
  start_everything_http
  local everything=$url proxied
  proxied="$RT ./mcp.ts proxy $everything"
  same_output "$everything" "$proxied" call echo message=hi
  same_output "$everything" "$proxied" call get-sum a=2 b=3
  same_output "$everything" "$proxied" list
  same_output "$everything" "$proxied" call trigger-long-running-operation duration=1 steps=2 -v
  same_output "$everything" "$proxied" prompt args-prompt city=Oslo
  want=1 same_output "$everything" "$proxied" call echo '{}'
  stop_peers
}

# --- replay ---

# check EXIT TEXT COMMAND ARGS...: `mcp.ts COMMAND ARGS...` must exit EXIT and print TEXT (stdout or stderr).
check() {
  local want=$1 text=$2
  shift 2
  run check "${rt[@]}" ./mcp.ts "$@"
  sed 's/^/  /' "$work/check.out"
  sed 's/^/  stderr: /' "$work/check.err"
  echo "  -> exit $status in $took s"
  local ok=yes
  [ "$status" = "$want" ] && grep -qF -- "$text" "$work/check.out" "$work/check.err" || ok=no
  verdict $ok "$(command_line "$@")" "expected exit $want and \"$text\""
}

# no_secrets FILE...: none of the files holds a secret given on the command line; each holds a message.
no_secrets() {
  local ok=yes file
  echo
  echo "# no -H value, token or URL query in: ${*#"$work/"}"
  for file; do
    if [ ! -s "$file" ]; then
      echo "  ${file#"$work/"}: missing or empty"
      ok=no
    elif grep -n -e 's3cret-xyz' -e 'k3y-abc123' -e 'q5ecret' "$file" | cut -c1-300 | sed "s|^|  ${file#"$work/"}:|"; then
      ok=no
    else
      echo "  ${file#"$work/"}: $(wc -l <"$file") lines, no secret"
    fi
  done
  for file; do grep -q 'Echo: hi' "$file" || ok=no; done
  verdict $ok "secrets in ${*#"$work/"}" "a secret was written, or nothing was"
}

part_replay() {
  part=replay
  echo
  echo "## replay: record against server-everything, replay the cassette"
  local t=$work/t.ndjson
  local replayed="$RT ./mcp.ts replay $t" started="Starting default (STDIO) server..."
  record=$t same_output "$EVERYTHING" "$replayed" call get-sum a=2 b=3
  record=$t same_output "$EVERYTHING" "$RT ./mcp.ts replay $t --strict" call get-sum a=2 b=3
  check 3 "replay: no recorded request matches tools/call" call "$replayed" get-sum a=2 b=4
  record=$t same_output "$EVERYTHING" "$replayed" list
  record=$t same_output "$EVERYTHING" "$replayed" list get-sum
  record=$t same_output "$EVERYTHING" "$replayed" info
  record=$t same_output "$EVERYTHING" "$replayed" resources
  record=$t same_output "$EVERYTHING" "$replayed" read demo://resource/dynamic/text/1
  record=$t same_output "$EVERYTHING" "$replayed" prompts
  record=$t same_output "$EVERYTHING" "$replayed" prompt args-prompt city=Oslo
  record=$t drop=$started same_output "$EVERYTHING" "$replayed" call trigger-long-running-operation duration=1 steps=2 -v
  want=1 record=$t same_output "$EVERYTHING" "$replayed" call echo '{}'

  echo
  echo "# the SDK session recorded through proxy --record (and --log), then replayed"
  local cassette=$work/sdk.ndjson
  session rec-v1 v1 "$RT ./mcp.ts proxy '$EVERYTHING' --record $cassette --log $work/sdk.log"
  session replay-v1 v1 "$RT ./mcp.ts replay $cassette"
  same_session "SDK v1: recorded, then replayed" rec-v1 replay-v1
  session replay-v1-strict v1 "$RT ./mcp.ts replay $cassette --strict"
  same_session "SDK v1: recorded, then replayed --strict" rec-v1 replay-v1-strict
  # SDK v2 probes with server/discover on a second process from the same command: each proxy records to a file of
  # its own ($$: its pid), and the cassette is the probe's, then the session's without its header.
  mkdir -p "$work/v2"
  session rec-v2 v2 "$RT ./mcp.ts proxy '$EVERYTHING' --record $work/v2/\$\$.ndjson"
  local probe session_file
  probe=$(grep -l server/discover "$work"/v2/*.ndjson | head -n1)
  session_file=$(grep -L server/discover "$work"/v2/*.ndjson | head -n1)
  if [ -n "$probe" ] && [ -n "$session_file" ]; then
    { cat "$probe"; tail -n +2 "$session_file"; } >"$work/sdk-v2.ndjson"
  fi
  echo "  (cassettes: ${probe#"$work/"} (the probe's) and ${session_file#"$work/"} -> sdk-v2.ndjson)"
  session replay-v2 v2 "$RT ./mcp.ts replay $work/sdk-v2.ndjson"
  same_session "SDK v2: recorded, then replayed (the probe too)" rec-v2 replay-v2

  echo
  echo "# headers and tokens: -H to the HTTP server, a query in its URL; proxy --record and --log, call --record"
  start_everything_http
  local everything=$url
  local auth="Authorization: Bearer s3cret-xyz" key="X-Api-Key: k3y-abc123"
  check 0 "Echo: hi" call "$everything?access_token=q5ecret" echo message=hi -H "$auth" -H "$key" \
    --record "$work/h-call.ndjson"
  local proxied="$RT ./mcp.ts proxy '$everything?access_token=q5ecret' -H '$auth' -H '$key'"
  check 0 "Echo: hi" call "$proxied --record $work/h-proxy.ndjson --log $work/h-proxy.log" echo message=hi
  no_secrets "$work/h-call.ndjson" "$work/h-proxy.ndjson" "$work/h-proxy.log"
  stop_peers
}

# --- latency ---

part_latency() {
  part=latency
  echo
  echo "## latency: sequential tools/call, directly and through mcp.ts proxy (stdio to stdio), $RT"
  local server cmd tool json
  for server in "$EVERYTHING|echo|{\"message\":\"hi\"}" "$RT ./mcp.ts serve testdata/tools|echo|{\"text\":\"hi\"}"; do
    IFS='|' read -r cmd tool json <<<"$server"
    run latency "${rt[@]}" interop/lib/proxy-latency.mjs "$CALLS" "$tool" "$json" "$cmd" \
      "$RT ./mcp.ts proxy $(command_line "$cmd")"
    sed 's/^/  /' "$work/latency.out"
    sed 's/^/  stderr: /' "$work/latency.err"
    echo "  -> exit $status in $took s"
    local ok=yes
    [ "$status" = 0 ] && grep -q '^added by the proxy' "$work/latency.out" || ok=no
    verdict $ok "latency: $cmd" "expected the two medians"
  done
}

for target; do
  case $target in
    sdk) part_sdk ;;
    stdio-http) part_stdio_http ;;
    replay) part_replay ;;
    latency) part_latency ;;
  esac
done
stop_peers

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "proxy: all $passed checks as expected ($RT)"
else
  echo "proxy: ${#failed[@]} of $((passed + ${#failed[@]})) checks FAILED ($RT):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
