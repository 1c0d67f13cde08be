#!/usr/bin/env bash
# mcp.ts's observability output against code written elsewhere: its OTLP/HTTP JSON spans and metrics through the
# receiver and decoder that also take the official OpenTelemetry JS SDK's export, and its /metrics pages through a
# Prometheus text-format parser from npm. One line per check, "ok: ..." or "FAIL: ..." (then the evidence, indented),
# a count at the end, exit 1 when a check fails. From the repository root:
#   interop/otel.sh                           all three parts
#   interop/otel.sh otlp prometheus           some of them: sdk, otlp, prometheus
#   MCP_RT="bun" interop/otel.sh              the runtime that runs ./mcp.ts (default "deno run -A"; bun, node)
# The parts:
#   sdk         lib/otel-sdk-export.mjs: the SDK's TracerProvider (@opentelemetry/sdk-trace) with OTLPTraceExporter
#               and a MeterProvider with OTLPMetricExporter (JSON over HTTP) export one CLIENT span with three
#               attributes and one histogram (forceFlush) to lib/otlp-receiver.mjs; both decode (lib/otlp-decode.mjs)
#               to what the SDK says it sent. Then the decoder must refuse malformed variants of those same bodies
#               (base64 ids, enum names, proto field names, int64 past 2^53 as a JSON number, buckets that do not add
#               up, ...)
#   otlp        OTEL_EXPORTER_OTLP_ENDPOINT=<receiver> TRACEPARENT=00-T-S-01 mcp.ts call "mcp.ts serve testdata/tools"
#               add a=1 b=2 (the serve child inherits both): every body decodes, in canonical form; the CLIENT span
#               "tools/call add" is S's child in trace T, the serve child's SERVER span the CLIENT span's child;
#               mcp.method.name, gen_ai.tool.name, service.name; mcp.client/server.operation.duration histograms (unit
#               s, cumulative, the semantic conventions' bounds) and otel.sdk.processor.span.processed, per process.
#               The same through `gateway t="<serve>"` (t__add) and `proxy "<serve>"`: one trace over three processes,
#               CLIENT > SERVER > CLIENT > SERVER. Then with OTEL_EXPORTER_OTLP_ENDPOINT on `serve --http --metrics`
#               and on `call URL` (network.transport tcp): its /metrics shows otel_sdk_processor_span_processed_total,
#               its exports are checked after its SIGTERM
#   prometheus  serve --http --metrics after two add calls and one failing call, gateway --http --metrics and proxy
#               --http --metrics after one call each: GET /metrics (200, text/plain; version=0.0.4) parsed by
#               prom2javascript (no line lost); target_info, every histogram's buckets cumulative at the semantic
#               conventions' bounds up to +Inf = _count, the expected series' counts (error_type="tool_error" on the
#               failing call, none on the others); the parser must refuse broken variants of serve's page
# The SDK and the parser are installed once into $IOP_CACHE/otel (pinned below). The receiver and every server run in
# process groups of their own, stopped after their part (SIGTERM, SIGKILL after 10 s), also on Ctrl-C; a command that
# runs over OTEL_CHECK_TIMEOUT s (default 60) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(sdk otlp prometheus)
for part; do
  if [[ " ${PARTS[*]} " != *" $part "* ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- "${PARTS[@]}"
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
OTEL_PACKAGES=(
  @opentelemetry/api@1.10.0
  @opentelemetry/sdk-trace@3.1.0
  @opentelemetry/resources@3.1.0
  @opentelemetry/sdk-metrics@3.1.0
  @opentelemetry/exporter-trace-otlp-http@0.301.0
  @opentelemetry/exporter-metrics-otlp-http@0.301.0
  @opentelemetry/otlp-transformer@0.301.0
  prom2javascript@0.2.0
)
iop_install "$IOP_CACHE/otel" "${OTEL_PACKAGES[@]}"
cd "$here/.."
# Nothing of the caller's telemetry settings reaches the SDK or mcp.ts: each command gets exactly what it is given.
for name in $(compgen -e); do [[ $name != OTEL_* ]] || unset "$name"; done
unset TRACEPARENT TRACESTATE BAGGAGE

RT=${MCP_RT:-deno run -A}
read -ra rt <<<"$RT"
MCP=("${rt[@]}" ./mcp.ts)
SERVE="$RT ./mcp.ts serve testdata/tools"
LIMIT=${OTEL_CHECK_TIMEOUT:-60}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop-otel.XXXXXX")
groups=() # the process groups running now: the receiver, the servers
receiver=
rurl=
url=
passed=0
failed=0
part=

SCRIPT=otel.sh
# shellcheck source=interop/lib/checks.sh
. "$here/lib/checks.sh"

# The command line as shown: "mcp.ts" for the runtime and ./mcp.ts.
shorten() {
  local line=$1
  line=${line//"${MCP[*]}"/mcp.ts}
  line=${line//"$RT ./mcp.ts"/mcp.ts}
  printf '%s' "$line"
}

# stop_group PGID: SIGTERM to the group, SIGKILL after 10 s.
stop_group() {
  local pgid=$1 kept=() entry
  kill -TERM -- "-$pgid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 -- "-$pgid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pgid" 2>/dev/null || true
  wait "$pgid" 2>/dev/null || true
  for entry in "${groups[@]}"; do [ "$entry" = "$pgid" ] || kept+=("$entry"); done
  groups=("${kept[@]}")
}
stop_all() {
  local pgid
  for pgid in "${groups[@]}"; do stop_group "$pgid"; done
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT # the receiver and servers are in process groups of their own: only the EXIT trap reaches them
trap 'exit 143' TERM

# start_group NAME COMMAND...: runs it in a process group of its own, stdout in $work/NAME.out, stderr in
# $work/NAME.err; sets started (its pid, the group's id).
start_group() {
  local name=$1
  shift
  : >"$work/$name.out"
  : >"$work/$name.err"
  set -m
  "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null &
  started=$!
  set +m
  groups+=("$started")
}

# wait_for NAME FILE SED PID: waits up to 60 s for FILE to have a line SED prints something for; sets found.
wait_for() {
  found=
  for _ in $(seq 600); do # 60 s: a first run may compile or download
    found=$(sed -n "$3" "$2" | head -n1)
    [ -n "$found" ] && return 0
    kill -0 "$4" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: [$part] $1 did not start:"
  sed 's/^/  /' "$work/$1.err" "$work/$1.out"
  failed=$((failed + 1))
  return 1
}

# start_receiver: lib/otlp-receiver.mjs on a free port; sets receiver, rurl and $work/otlp.log.
start_receiver() {
  start_group otlp "$IOP_NODE" interop/lib/otlp-receiver.mjs 127.0.0.1:0
  receiver=$started
  wait_for otlp "$work/otlp.out" 's|^listening \(http://.*\)$|\1|p' "$receiver" || return 1
  rurl=$found
  echo "# OTLP receiver: $rurl (node lib/otlp-receiver.mjs)"
}
stop_receiver() {
  [ -z "$receiver" ] || stop_group "$receiver"
  receiver=
}

# start_server NAME COMMAND...: an mcp.ts server with --http 127.0.0.1:0; url from its "mcp: serving URL ..." line.
server=
start_server() {
  local name=$1
  shift
  start_group "$name" "$@"
  server=$started
  wait_for "$name" "$work/$name.err" 's|^mcp: serving \(http://[^ ]*\).*$|\1|p' "$server" || return 1
  url=$found
  echo "# $url: $(command_line "$@")"
}
stop_server() {
  [ -z "$server" ] || stop_group "$server"
  server=
}

# verify ARGS...: lib/otel-verify.mjs's checks, its lines shown and counted (a crash of it is one failure).
verify() {
  local status=0 out
  out=$("$IOP_NODE" interop/lib/otel-verify.mjs "$@" 2>&1) || status=$?
  [ "$status" != 130 ] || exit 130 # Ctrl-C
  out=$(printf '%s\n' "$out" | sed "s/^FAIL: /FAIL: [$part] /")
  printf '%s\n' "$out"
  passed=$((passed + $(printf '%s\n' "$out" | grep -c '^ok: ' || true)))
  failed=$((failed + $(printf '%s\n' "$out" | grep -c '^FAIL: ' || true)))
  if [ "$status" != 0 ]; then
    echo "FAIL: [$part] lib/otel-verify.mjs $1 exited $status"
    failed=$((failed + 1))
  fi
}

# get_metrics WHAT: GET <url's origin>/metrics into $work/metrics.txt; a check that it answers 200 with the Prometheus
# text format's Content-Type.
get_metrics() {
  local page=${url%/mcp}/metrics
  # shellcheck disable=SC2016 # JavaScript's ${...}
  run "$IOP_NODE" -e '(async () => {
    const response = await fetch(process.argv[1]);
    console.log(`HTTP ${response.status} ${response.headers.get("content-type")}`);
    require("node:fs").writeFileSync(process.argv[2], await response.text());
  })()' "$page" "$work/metrics.txt"
  ran="GET $page"
  expect 0 'out=^HTTP 200 text/plain; version=0\.0\.4' -- "$1: $ran"
}

hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }

part_sdk() {
  part=sdk
  echo
  echo "## sdk: the OpenTelemetry JS SDK's OTLP/HTTP JSON exporters, the receiver, the decoder"
  start_receiver || return 0
  run "$IOP_NODE" interop/lib/otel-sdk-export.mjs "$rurl"
  expect 0 'out=^\{"traceId":"[0-9a-f]{32}"' '!err=.' -- "node lib/otel-sdk-export.mjs $rurl (a span, a histogram)"
  local exported
  exported=$(grep '^{' "$work/out" | head -n1)
  stop_receiver
  if [ -n "$exported" ]; then
    verify sdk "$work/otlp.out" "$exported"
    verify strict "$work/otlp.out"
  fi
}

# traced CHAIN TOOL SERVER: a fresh receiver, then OTEL_EXPORTER_OTLP_ENDPOINT=<it> TRACEPARENT=00-T-S-01
# mcp.ts call SERVER TOOL a=1 b=2 (a stdio SERVER inherits both), and the checks of CHAIN (lib/otel-verify.mjs mcp).
traced() {
  local chain=$1 tool=$2 target=$3 trace span
  start_receiver || return 0
  trace=$(hex 16)
  span=$(hex 8)
  run env OTEL_EXPORTER_OTLP_ENDPOINT="$rurl" TRACEPARENT="00-$trace-$span-01" "${MCP[@]}" call "$target" "$tool" a=1 b=2
  expect 0 'out=^3$' '!err=telemetry'
  verify mcp "$work/otlp.out" "$trace" "$span" pipe "$chain"
  stop_receiver
}

part_otlp() {
  part=otlp
  echo
  echo "## otlp: mcp.ts's spans and metrics (OTLP/HTTP JSON) through the same receiver and decoder"
  traced "call>add>serve" add "$SERVE"
  traced "call>t__add>gateway>add>serve" t__add "$RT ./mcp.ts gateway t='$SERVE'"
  traced "call>add>proxy>add>serve" add "$RT ./mcp.ts proxy '$SERVE'"

  # Over Streamable HTTP: serve --http exports too (and shows the span counter on /metrics), stopped (SIGTERM: its
  # last export) before the checks.
  start_receiver || return 0
  local trace span
  trace=$(hex 16)
  span=$(hex 8)
  if start_server serve-otel env OTEL_EXPORTER_OTLP_ENDPOINT="$rurl" \
    "${MCP[@]}" serve testdata/tools --http 127.0.0.1:0 --metrics; then
    run env OTEL_EXPORTER_OTLP_ENDPOINT="$rurl" TRACEPARENT="00-$trace-$span-01" "${MCP[@]}" call "$url" add a=1 b=2
    expect 0 'out=^3$' '!err=telemetry'
    get_metrics "serve with OTLP on"
    verify prom "$work/metrics.txt" "serve with OTLP on" \
      "mcp_server_operation_duration_seconds{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"add\"}=1" \
      "otel_sdk_processor_span_processed_total{error_type=\"\"}=3"
    stop_server
    verify mcp "$work/otlp.out" "$trace" "$span" tcp "call>add>serve"
  fi
  stop_receiver
}

part_prometheus() {
  part=prometheus
  echo
  echo "## prometheus: GET /metrics of serve, gateway and proxy --http --metrics, parsed by prom2javascript"
  local H=mcp_server_operation_duration_seconds C=mcp_client_operation_duration_seconds
  if start_server serve "${MCP[@]}" serve testdata/tools --http 127.0.0.1:0 --metrics; then
    for _ in 1 2; do
      run "${MCP[@]}" call "$url" add a=1 b=2
      expect 0 'out=^3$'
    done
    run "${MCP[@]}" call "$url" fail '{}'
    expect 1 'err=^something went wrong$'
    get_metrics serve
    verify prom "$work/metrics.txt" serve \
      "$H{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"add\",error_type=\"\"}=2" \
      "$H{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"fail\",error_type=\"tool_error\"}=1"
    verify prom-strict "$work/metrics.txt"
    stop_server
  fi

  if start_server gateway "${MCP[@]}" gateway --http 127.0.0.1:0 --metrics "t=$SERVE"; then
    run "${MCP[@]}" call "$url" t__add a=1 b=2
    expect 0 'out=^3$'
    get_metrics gateway
    verify prom "$work/metrics.txt" gateway "$H{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"t__add\"}=1"
    stop_server
  fi

  if start_server proxy "${MCP[@]}" proxy "$SERVE" --http 127.0.0.1:0 --metrics; then
    run "${MCP[@]}" call "$url" add a=1 b=2
    expect 0 'out=^3$'
    get_metrics proxy
    # proxy --metrics measures each request forwarded as a server (from the client) and as a client (upstream)
    verify prom "$work/metrics.txt" proxy "$H{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"add\"}=1" \
      "$C{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"add\"}=1"
    stop_server
  fi
}

began=$(now)
for part; do "part_$part"; done
echo
echo "otel.sh: $passed passed, $failed failed ($RT, $(since "$began") s)"
[ "$failed" = 0 ]
