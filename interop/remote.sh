#!/usr/bin/env bash
# mcp.ts's client commands BY URL against real remote peers, each started here on a free local port and stopped after
# its checks. Prints each command, what it printed, its exit code and time, and exits 1 when any exit code, expected
# output or time limit differs. From the repository root:
#   interop/remote.sh                        all four peers
#   interop/remote.sh sdk-v2 mcp.ts          some of them: everything-http, everything-sse, sdk-v2, mcp.ts
#   MCP_RT="bun" interop/remote.sh           the runtime that runs ./mcp.ts, the client and `serve --http` (default
#   MCP_RT="node" interop/remote.sh          "deno run -A")
# The peers:
#   everything-http  `PORT=N mcp-server-everything streamableHttp`: http://127.0.0.1:N/mcp, 2025-11-25 sessions
#                    (it answers the server/discover probe 400 -32000 "Server not initialized")
#   everything-sse   `PORT=N mcp-server-everything sse`: http://127.0.0.1:N/sse, the 2024-11-05 HTTP+SSE transport
#                    (GET /sse streams `event: endpoint` /message?sessionId=..., POSTs go there; POST /sse is 404)
#   sdk-v2           `node lib/sdk-v2-modern-server.mjs 127.0.0.1:0`: @modelcontextprotocol/server 2.4.0, 2026-07-28
#                    only (initialize gets 400 -32022)
#   mcp.ts           `$MCP_RT ./mcp.ts serve testdata/tools --http 127.0.0.1:0`, and testdata/conformance for
#                    resources and prompts: both eras on one endpoint
# server-everything prints no URL and echoes PORT=0 back as 0, so it gets a port found free just before (retried if
# taken); the others print "mcp: serving URL". Each peer runs in a process group of its own and is stopped after its
# checks (SIGTERM to the group, SIGKILL after 10 s), also on Ctrl-C. A check that runs over REMOTE_CHECK_TIMEOUT s
# (default 30) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEERS=(everything-http everything-sse sdk-v2 mcp.ts)
for peer; do
  if [[ " ${PEERS[*]} " != *" $peer "* ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- "${PEERS[@]}"
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
cd "$here/.."

RT=${MCP_RT:-deno run -A}
read -ra rt <<<"$RT"
LIMIT=${REMOTE_CHECK_TIMEOUT:-30}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
server=
url=
port=
peer=
peer_failed=0
passed=0
failed=()
# shellcheck source-path=SCRIPTDIR source=lib/serve-http.sh
. "$here/lib/serve-http.sh"

now() { local t=${EPOCHREALTIME/,/.}; echo "$t"; }
since() { awk "BEGIN { printf \"%.1f\", $(now) - $1 }"; }

# stop_peer: stops the running peer; shows what it wrote on stderr when one of its checks failed.
stop_peer() {
  [ -n "$server" ] || return 0
  local status=0 began
  began=$(now)
  stop_http_server || status=$?
  echo "remote: stopped $peer in $(since "$began") s (exit $status)"
  if [ "$peer_failed" != 0 ] && [ -s "$work/stderr" ]; then
    echo "remote: $peer's stderr (last 30 lines):"
    tail -n 30 "$work/stderr" | sed 's/^/  /'
  fi
}
trap 'stop_peer; rm -rf "$work"' EXIT
trap 'exit 130' INT # Ctrl-C: the peer is in a process group of its own, so only stop_peer reaches it
trap 'exit 143' TERM

# start_everything MODE PATH: `PORT=N mcp-server-everything MODE` in a process group of its own; port=N and
# url=http://127.0.0.1:N/PATH once it says "... port N" on stderr. A port taken in between makes it exit: then another
# one, three times at most.
start_everything() {
  local mode=$1 path=$2
  for _ in 1 2 3; do
    port=$(free_port)
    : >"$work/stderr"
    set -m
    PORT=$port mcp-server-everything "$mode" >"$work/stdout" 2>"$work/stderr" </dev/null &
    server=$!
    set +m
    for _ in $(seq 300); do
      if grep -q "port $port\$" "$work/stderr"; then
        url=http://127.0.0.1:$port$path
        return 0
      fi
      kill -0 "$server" 2>/dev/null || break
      sleep 0.1
    done
    stop_http_server || true
  done
  echo "remote: PORT=$port mcp-server-everything $mode did not say it listens:" >&2
  cat "$work/stderr" >&2
  return 1
}

# start PEER: starts it, sets url, prints a heading.
start() {
  stop_peer
  peer=$1
  peer_failed=0
  local command
  case $peer in
    everything-http)
      start_everything streamableHttp /mcp
      command="PORT=$port mcp-server-everything streamableHttp"
      ;;
    everything-sse)
      start_everything sse /sse
      command="PORT=$port mcp-server-everything sse"
      ;;
    sdk-v2) command="$(printf %q "$IOP_NODE") interop/lib/sdk-v2-modern-server.mjs 127.0.0.1:0" ;;
    mcp.ts) command="$RT ./mcp.ts serve testdata/tools --http 127.0.0.1:0" ;;
    mcp.ts-conformance) command="$RT ./mcp.ts serve testdata/conformance --http 127.0.0.1:0" ;;
  esac
  case $peer in everything-*) ;; *) start_http_server "$command" remote ;; esac
  echo
  echo "# $peer: $command"
  echo "# $url"
}

# An argument as a shell would need it: as it is when plain, else in single quotes.
shown() {
  local quote="'\\''"
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf ' %s' "$1"; else printf " '%s'" "${1//\'/$quote}"; fi
}

# [also=TEXT] [within=S] [input=LINES] check EXIT TEXT COMMAND ARGS...: run `mcp.ts COMMAND ARGS...` (stdin: input,
# else nothing); it must exit EXIT and print TEXT on stdout (or on stdout or stderr, for exit codes other than 0); with
# also, TEXT on stdout or stderr as well; with within, take at most S seconds.
check() {
  local want=$1 text=$2 out status=0 seen all began took ok=yes
  shift 2
  printf '\n$ %s ./mcp.ts' "$RT"
  for arg; do shown "$arg"; done
  [ -z "${input:-}" ] || printf ' <<<%s' "$(shown "$input")"
  echo
  began=$(now)
  out=$("${guard[@]}" "${rt[@]}" ./mcp.ts "$@" 2>"$work/err" <<<"${input:-}") || status=$?
  took=$(since "$began")
  # Ctrl-C reaches mcp.ts too, which exits 130: bash then takes the SIGINT as handled and runs no trap
  [ "$status" != 130 ] || exit 130
  [ -z "$out" ] || printf '%s\n' "$out"
  [ -s "$work/err" ] && sed 's/^/stderr: /' "$work/err"
  all=$out$'\n'$(cat "$work/err")
  seen=$out
  [ "$want" = 0 ] || seen=$all
  [ "$status" = "$want" ] && [[ $seen == *"$text"* ]] || ok=no
  [ -z "${also:-}" ] || [[ $all == *"$also"* ]] || ok=no
  [ -z "${within:-}" ] || awk "BEGIN { exit !($took <= $within) }" || ok=no
  if [ $ok = yes ]; then
    echo "-> exit $status in $took s: ok"
    passed=$((passed + 1))
  else
    local expected="exit $want and \"$text\""
    [ -z "${also:-}" ] || expected+=" and \"$also\""
    [ -z "${within:-}" ] || expected+=" within $within s"
    [ "$status" != 124 ] || [ ${#guard[@]} = 0 ] || expected+="; killed after $LIMIT s"
    echo "-> exit $status in $took s: FAILED (expected $expected)"
    failed+=("[$peer] $*")
    peer_failed=1
  fi
}

# The checks every peer passes whatever it serves: unknown tool, --timeout, a path that is not the endpoint, and
# a refused connection.
common_checks() {
  local slow=("$@") # a call that sends nothing for at least 5 s
  check 2 'no tool named "nope"' call "$url" nope
  within=4 check 3 "timed out" call "$url" "${slow[@]}" --timeout 500
  check 3 "404" info "${url%/*}/nope"
}

for target; do
  case $target in
    everything-http)
      start everything-http
      E=$url
      check 0 "mcp-servers/everything" info "$E"
      also=2025-11-25 check 0 "mcp-servers/everything" info "$E" --protocol legacy
      check 3 "server/discover" info "$E" --protocol 2026-07-28 # pinned: no fallback to initialize
      check 0 "trigger-long-running-operation" list "$E"
      check 0 "a*  number" list "$E" get-sum
      check 0 "Echo: hi" call "$E" echo message=hi
      check 0 "Echo: hi" call "$E" echo message=hi --protocol legacy
      check 0 "The sum of 2 and 3 is 5" call "$E" get-sum a=2 b=3
      check 0 '"structuredContent"' call "$E" get-structured-content location=Chicago --json
      check 1 "expected string" call "$E" echo '{}'
      check 0 " ms" ping "$E"
      check 0 "demo://resource/dynamic/text/{resourceId}" resources "$E"
      check 0 "Resource 1: This is a plaintext resource" read "$E" demo://resource/dynamic/text/1
      check 0 "args-prompt" prompts "$E"
      check 0 "[user] What's weather in Oslo?" prompt "$E" args-prompt city=Oslo
      also="progress 3/3" check 0 "Long running operation completed" \
        call "$E" trigger-long-running-operation duration=0.3 steps=3 -v
      input=$'{"tool":"echo","arguments":{"message":"a"}}\n{"tool":"get-sum","arguments":{"a":1,"b":2}}' \
        also="The sum of 1 and 2 is 3" check 0 "Echo: a" batch "$E"
      common_checks trigger-long-running-operation duration=10 steps=2
      ;;

    everything-sse)
      start everything-sse
      S=$url
      check 0 "mcp-servers/everything" info "$S"
      also=2025-11-25 check 0 "mcp-servers/everything" info "$S" --protocol legacy
      check 0 "trigger-long-running-operation" list "$S"
      check 0 "Echo: hi" call "$S" echo message=hi
      check 0 "Echo: hi" call "$S" echo message=hi --protocol legacy
      check 0 "The sum of 2 and 3 is 5" call "$S" get-sum a=2 b=3
      check 0 " ms" ping "$S"
      check 0 "demo://resource/dynamic/text/{resourceId}" resources "$S"
      check 0 "Resource 1: This is a plaintext resource" read "$S" demo://resource/dynamic/text/1
      check 0 "args-prompt" prompts "$S"
      check 0 "[user] What's weather in Oslo?" prompt "$S" args-prompt city=Oslo
      also="progress 3/3" check 0 "Long running operation completed" \
        call "$S" trigger-long-running-operation duration=0.3 steps=3 -v
      common_checks trigger-long-running-operation duration=10 steps=2
      ;;

    sdk-v2)
      start sdk-v2
      V=$url
      also=2026-07-28 check 0 "mcp-interop-sdk-v2-modern" info "$V"
      also=2026-07-28 check 0 "mcp-interop-sdk-v2-modern" info "$V" --protocol 2026-07-28
      check 3 "it speaks 2026-07-28" info "$V" --protocol legacy # initialize: 400 -32022, data.supported ["2026-07-28"]
      check 0 "confirm" list "$V"
      check 0 "hi" call "$V" echo text=hi
      check 0 "5" call "$V" add a=2 b=3
      # x-mcp-header: the SDK refuses (400 -32020) a call whose Mcp-Param-Region/-Priority do not mirror the body
      check 0 "region=eu-west priority=7" call "$V" where region=eu-west priority=7
      check 0 "Mcp-Param-Region=" call "$V" where region=' spaced ünïcode ' # sent as =?base64?...?=
      also="> POST /mcp" check 0 "hi" call "$V" echo text=hi --trace
      check 0 " ms" ping "$V" # no ping in 2026-07-28: whatever mcp.ts times instead
      also="demo://item/{id}" check 0 "demo://greeting" resources "$V"
      check 0 "Hello from the SDK v2 modern server." read "$V" demo://greeting
      check 0 '"name":"item 7"' read "$V" demo://item/7
      check 0 "greet" prompts "$V"
      check 0 "Please greet Ada." prompt "$V" greet name=Ada
      also="progress 3/3" check 0 "waited 3 x 100 ms" call "$V" slow steps=3 ms=100 -v
      # MRTR: an input_required result asking for an elicitation form {confirm: boolean}
      check 0 "confirmed: deploy" call "$V" confirm action=deploy --elicit accept
      check 1 "not confirmed (decline)" call "$V" confirm action=deploy --elicit decline
      check 3 "elicitation" call "$V" confirm action=deploy # nothing to answer with: 400 -32021 or input_required
      common_checks slow steps=3 ms=5000
      ;;

    mcp.ts)
      start mcp.ts
      M=$url
      also=2026-07-28 check 0 "mcp.ts" info "$M"
      also=2025-11-25 check 0 "mcp.ts" info "$M" --protocol legacy
      check 0 "slow" list "$M"
      check 0 "hi" call "$M" echo text=hi
      check 0 "hi" call "$M" echo text=hi --protocol legacy
      check 0 "5" call "$M" add a=2 b=3
      check 0 "5" call "$M" add a=2 b=3 --protocol legacy
      check 0 " ms" ping "$M"
      check 0 " ms" ping "$M" --protocol legacy
      also="progress 3/3" check 0 "waited 3 x 100 ms" call "$M" slow steps=3 ms=100 -v
      also="progress 3/3" check 0 "waited 3 x 100 ms" call "$M" slow steps=3 ms=100 -v --protocol legacy
      input=$'{"tool":"echo","arguments":{"text":"a"}}\n{"tool":"add","arguments":{"a":1,"b":2}}' \
        also='"3"' check 0 '"a"' batch "$M"
      common_checks slow steps=3 ms=5000
      within=4 check 3 "timed out" call "$M" slow steps=3 ms=5000 --timeout 500 --protocol legacy

      start mcp.ts-conformance
      C=$url
      also="test://template/{id}/data" check 0 "test://static-text" resources "$C"
      check 0 "This is the content of the static text resource." read "$C" test://static-text
      check 0 "This is the content of the static text resource." read "$C" test://static-text --protocol legacy
      check 0 '"templateTest":true' read "$C" test://template/7/data
      check 0 "test_prompt_with_arguments" prompts "$C"
      check 0 "arg1='x', arg2='y'" prompt "$C" test_prompt_with_arguments arg1=x arg2=y
      check 0 "arg1='x', arg2='y'" prompt "$C" test_prompt_with_arguments arg1=x arg2=y --protocol legacy
      ;;
  esac
done
stop_peer
peer=

echo
echo "# no server"
# A port nothing listens on: the connection is refused. Port 9 is one that fetch refuses to use itself (the Fetch
# standard's "bad ports"), before any connection.
refused=http://127.0.0.1:$(free_port)/mcp
within=5 check 3 "${refused%/mcp}" info "$refused"
within=5 check 3 "${refused%/mcp}" call "$refused" echo text=hi
within=5 check 3 "127.0.0.1:9" info http://127.0.0.1:9/mcp

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "remote: all $passed checks as expected ($RT)"
else
  echo "remote: ${#failed[@]} of $((passed + ${#failed[@]})) checks FAILED ($RT):"
  printf '  mcp.ts %s\n' "${failed[@]}"
  exit 1
fi
