#!/usr/bin/env bash
# MCP Tasks against real peers: mcp.ts's client following server-everything's task tool, the SDK v1 client's
# experimental task API against `mcp.ts serve`, and mcp.ts against itself over HTTP. One line per check, "ok: ..." or
# "FAIL: ..." (then what the command printed, indented), a count at the end, exit 1 when a check fails. From the
# repository root:
#   interop/tasks.sh                          all five parts
#   interop/tasks.sh everything sdk           some of them: everything, sdk, modern, legacy, principals
#   MCP_RT="bun" interop/tasks.sh             the runtime that runs ./mcp.ts, client and server (default "deno run -A")
# The parts:
#   everything  server-everything's simulate-research-query (execution.taskSupport "required": a 2025-11-25
#               task-augmented call, polled with tasks/get, ended with tasks/result). Over stdio: the report; the
#               ambiguous query's elicitation answered with --elicit-json; -v's "mcp: task ID: STATUS" lines;
#               --max-time (exit 3, cancelled); Ctrl-C (SIGINT once a "mcp: task" line is out: exit 130, cancelled).
#               Over Streamable HTTP (`PORT=N mcp-server-everything streamableHttp`): the report, --max-time, and
#               call --detach, whose task server-everything keeps in the detaching session's own store (so the id
#               is unknown to the next session: `task URL get ID` is exit 2)
#   sdk         lib/sdk-tasks-client.mjs: the SDK v1 Client (capabilities {tasks, elicitation}) over stdio against
#               `mcp.ts serve testdata/conformance/tools_tasks.ts`: callToolStream (taskCreated, taskStatus, result),
#               getTask, listTasks, confirm_delete's elicitation answered by a request handler, failing_job's isError
#               result, cancelTask; then the same client without the `tasks` capability, whose call mcp.ts runs at
#               once (the contract honours `task` only from a client that declared tasks; the spec is looser)
#   modern      mcp.ts's client against `mcp.ts serve testdata/conformance/tools_tasks.ts --http 127.0.0.1:0`, in
#               2026-07-28 (the io.modelcontextprotocol/tasks extension): call, call --detach then task get, result
#               and cancel, confirm_delete with --elicit-json, failing_job, --max-time, an unknown id
#   legacy      the same server, mcp.ts's client with --protocol legacy (2025-11-25 tasks: it declares `tasks`):
#               call -v, --detach (a warning: the task may be its session's), then task result from another
#               command's session: exit 2 (without a token subject the detaching session is the task's principal)
#   principals  lib/sdk-tasks-principals.mjs: two SDK v1 clients (capabilities {tasks, elicitation}), A and B, each with
#               its own Streamable HTTP session (no token: the session is the principal) against
#               `mcp.ts serve testdata/conformance/tools_tasks.ts --http 127.0.0.1:0`. A's confirm_delete
#               (taskSupport "required") is a task, its question held by A until B has tried the task: B's listTasks
#               does not list it, B's getTask, getTaskResult and cancelTask on its id are errors -32602 (unknown), B is
#               asked nothing; A's listTasks lists it, A's getTask shows it still running, and A gets its result
# Servers run in process groups of their own and are stopped after their part (SIGTERM, SIGKILL after 10 s), also on
# Ctrl-C. A check that runs over TASKS_CHECK_TIMEOUT s (default 60) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(everything sdk modern legacy principals)
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
MCP=("${rt[@]}" ./mcp.ts)
LIMIT=${TASKS_CHECK_TIMEOUT:-60}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
EVERYTHING="mcp-server-everything stdio"
TASKS="testdata/conformance/tools_tasks.ts"
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop-tasks.XXXXXX")
server= # the mcp.ts server's process group (lib/serve-http.sh)
url=
everything= # server-everything's (HTTP) process group
passed=0
failed=0
part=
# shellcheck source-path=SCRIPTDIR source=lib/serve-http.sh
. "$here/lib/serve-http.sh"

SCRIPT=tasks.sh
# shellcheck source=interop/lib/checks.sh
. "$here/lib/checks.sh"

# The command line as shown: "mcp.ts" for the runtime and ./mcp.ts.
shorten() {
  local line=$1
  [[ $line != "${MCP[*]}"* ]] || line="mcp.ts${line#"${MCP[*]}"}"
  printf '%s' "$line"
}

# stop_everything: SIGTERM to server-everything's group, SIGKILL after 10 s.
stop_everything() {
  [ -n "$everything" ] || return 0
  kill -TERM -- "-$everything" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 -- "-$everything" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$everything" 2>/dev/null || true
  wait "$everything" 2>/dev/null || true
  everything=
}
trap 'stop_http_server || true; stop_everything; rm -rf "$work"' EXIT
trap 'exit 130' INT # Ctrl-C: the servers are in process groups of their own, so only the EXIT trap reaches them
trap 'exit 143' TERM

# start_everything_http: `PORT=N mcp-server-everything streamableHttp` on a free port (it prints no URL, and takes
# PORT=0 literally), url=http://127.0.0.1:N/mcp once it says "... port N"; another port if that one was taken.
start_everything_http() {
  local port
  for _ in 1 2 3; do
    port=$(free_port)
    : >"$work/everything.err"
    set -m
    PORT=$port mcp-server-everything streamableHttp >"$work/everything.out" 2>"$work/everything.err" </dev/null &
    everything=$!
    set +m
    for _ in $(seq 300); do
      if grep -q "listening on port $port\$" "$work/everything.err"; then
        url=http://127.0.0.1:$port/mcp
        echo "# $url: PORT=$port mcp-server-everything streamableHttp"
        return 0
      fi
      kill -0 "$everything" 2>/dev/null || break
      sleep 0.1
    done
    stop_everything
  done
  echo "tasks.sh: server-everything did not start:"
  sed 's/^/  /' "$work/everything.err"
  return 1
}

# The first task id in the last run's stdout or stderr ("mcp: task ID: ..."), or its one stdout line.
task_id() {
  sed -n 's/^mcp: task \([^: ]*\).*/\1/p' "$work/err" | head -n1 | grep . || head -n1 "$work/out"
}

# with_id ID WHAT: true when ID looks like a task id; else WHAT, which needed it, fails without running.
with_id() {
  [[ $1 =~ ^[A-Za-z0-9._:-]+$ ]] && return 0
  echo "FAIL: [$part] $2: not run: the call before printed no task id"
  failed=$((failed + 1))
  return 1
}

# interrupt COMMAND...: runs it in the background with -v, in a process group of its own (as a terminal's
# foreground job), waits for its first "mcp: task" line, then sends SIGINT to the group, as Ctrl-C does.
interrupt() {
  local began pid
  ran="$(command_line "$@") (Ctrl-C once a task line is out)"
  status=0
  began=$(now)
  set -m # a background job of a script would ignore SIGINT; its own group, as a shell's job, takes it
  "$@" >"$work/out" 2>"$work/err" </dev/null &
  pid=$!
  set +m
  for _ in $(seq $((LIMIT * 10))); do
    grep -q '^mcp: task ' "$work/err" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -INT -- "-$pid" 2>/dev/null || true
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" || status=$?
  took=$(since "$began")
}

part_everything() {
  part=everything
  echo
  echo "## everything: server-everything's simulate-research-query (2025-11-25 tasks)"
  local E=$EVERYTHING id
  run "${MCP[@]}" call "$E" simulate-research-query topic=mcp
  expect 0 'out=^# Research Report: mcp$' 'out=Stage 4: Generating report'
  run "${MCP[@]}" call "$E" simulate-research-query topic=mcp ambiguous:=true --elicit accept \
    --elicit-json '{"interpretation":"historical"}'
  expect 0 'out=^# Research Report: mcp \(historical\)$' 'out=\*\*Clarification\*\*: historical' \
    'out=.input_required. → .working. → .completed.'
  run "${MCP[@]}" call "$E" simulate-research-query topic=mcp -v
  expect 0 'out=^# Research Report: mcp$' 'err=^mcp: task [^: ]+: working: Gathering sources' \
    'err=^mcp: task [^: ]+: working: Generating report' 'err=^mcp: task [^: ]+: completed'
  run "${MCP[@]}" call "$E" simulate-research-query topic=mcp --max-time 1500
  expect 3 'err=^mcp: task [^ ]+ timed out after 1500 ms .*cancelled$'
  interrupt "${MCP[@]}" call "$E" simulate-research-query topic=mcp -v
  expect 130 'err=^mcp: task [^: ]+: working' 'err=interrupted; task [^ ]+ cancelled'

  echo
  start_everything_http
  run "${MCP[@]}" call "$url" simulate-research-query topic=mcp -v
  expect 0 'out=^# Research Report: mcp$' 'err=^mcp: task [^: ]+: working: Gathering sources'
  run "${MCP[@]}" call "$url" simulate-research-query topic=mcp --max-time 1500
  expect 3 'err=^mcp: task [^ ]+ timed out after 1500 ms .*cancelled$'
  run "${MCP[@]}" call "$url" simulate-research-query topic=mcp --detach
  expect 0 'out=^[0-9a-f]{32}$'
  id=$(task_id)
  # server-everything keeps a session's tasks in that session's own store, emptied when the session ends (the
  # detaching call's DELETE): no later session can see the task
  if with_id "$id" "task get"; then
    run "${MCP[@]}" task "$url" get "$id"
    expect 2 "err=does not know task $id" -- \
      "$ran: server-everything binds tasks to the session, so a detached task is gone with it"
  fi
  stop_everything
}

part_sdk() {
  part=sdk
  echo
  echo "## sdk: the SDK v1 client's experimental task API against mcp.ts serve $TASKS"
  run "$IOP_NODE" interop/lib/sdk-tasks-client.mjs "$RT ./mcp.ts serve $TASKS"
  local what="node lib/sdk-tasks-client.mjs \"mcp.ts serve $TASKS\""
  expect 0 'out=^connect capabilities.tasks \{"list":\{\},"cancel":\{\},"requests":\{"tools":\{"call":\{\}\}\}\}$' \
    'out=^tools/list .*slow_compute=optional .*confirm_delete=required' -- \
    "$what: initialize's capabilities.tasks, tools/list's execution.taskSupport"
  expect 0 'out=^slow_compute taskCreated [^ ]+ working' 'out=^slow_compute taskStatus working' \
    'out=^slow_compute taskStatus completed' \
    'out=^slow_compute result isError=false Computation "job" completed after 1 seconds. Result: 42.$' -- \
    "$what: slow_compute {seconds: 1}: taskCreated, taskStatus working, completed, result"
  expect 0 'out=^slow_compute getTask completed' 'out=^slow_compute listTasks has it' \
    'out=^notification tasks/status [^ ]+ completed$' -- "$what: getTask, listTasks, notifications/tasks/status"
  expect 0 "out=^confirm_delete elicitation \"Delete 'x'\\?\" related-task=[^n]" 'out=^confirm_delete taskCreated' \
    "out=^confirm_delete result isError=false deleted 'x'\$" -- \
    "$what: confirm_delete {filename: x}: elicitation/create (related-task) answered accept {confirm: true}"
  expect 0 'out=^failing_job taskCreated' 'out=^failing_job result isError=true simulated failure: job crashed$' -- \
    "$what: failing_job: a completed task with an isError result"
  expect 0 'out=^cancel cancelTask cancelled' 'out=^cancel error .*was cancelled' 'out=^cancel getTask cancelled' -- \
    "$what: slow_compute {seconds: 30}: cancelTask, the stream ends cancelled"

  run "$IOP_NODE" interop/lib/sdk-tasks-client.mjs --no-tasks-capability "$RT ./mcp.ts serve $TASKS"
  what="node lib/sdk-tasks-client.mjs --no-tasks-capability \"mcp.ts serve $TASKS\""
  expect 0 'out=^slow_compute error .*"task"' -- \
    "$what: a client that did not declare tasks gets the call run at once (the contract: only a declaring client's task parameter is honoured), which callToolStream, waiting for a task, reports"
}

part_modern() {
  part=modern
  echo
  echo "## modern: mcp.ts's client against mcp.ts serve $TASKS --http (2026-07-28)"
  local id
  start_http_server "$RT ./mcp.ts serve $TASKS --http 127.0.0.1:0" modern
  echo "# $url: mcp.ts serve $TASKS --http 127.0.0.1:0"
  run "${MCP[@]}" info "$url"
  expect 0 'out=^protocol: +2026-07-28'
  run "${MCP[@]}" call "$url" slow_compute seconds=1 -v
  expect 0 'out=^Computation "job" completed after 1 seconds. Result: 42.$' \
    'err=^mcp: task [^: ]+: working: computing "job"' 'err=^mcp: task [^: ]+: completed'
  run "${MCP[@]}" call "$url" slow_compute seconds=2 --detach
  expect 0 'out=^[A-Za-z0-9._-]+$'
  id=$(task_id)
  if with_id "$id" "task get, result, get"; then
    run "${MCP[@]}" task "$url" get "$id"
    expect 0 'out=^working: computing "job"$'
    run "${MCP[@]}" task "$url" result "$id"
    expect 0 'out=^Computation "job" completed after 2 seconds. Result: 42.$'
    run "${MCP[@]}" task "$url" get "$id"
    expect 0 'out=^completed'
  fi
  run "${MCP[@]}" call "$url" slow_compute seconds=30 label=long --detach
  expect 0 'out=^[A-Za-z0-9._-]+$'
  id=$(task_id)
  if with_id "$id" "task cancel, get, result"; then
    run "${MCP[@]}" task "$url" cancel "$id"
    expect 0
    run "${MCP[@]}" task "$url" get "$id"
    expect 0 'out=^cancelled'
    run "${MCP[@]}" task "$url" result "$id"
    expect 3 'err=task [^ ]+ was cancelled'
  fi
  run "${MCP[@]}" call "$url" confirm_delete filename=x --elicit accept --elicit-json '{"confirm":true}' -v
  expect 0 "out=^deleted 'x'\$" 'err=^mcp: task [^: ]+: input_required'
  run "${MCP[@]}" call "$url" failing_job
  expect 1 'err=^simulated failure: job crashed$'
  run "${MCP[@]}" call "$url" slow_compute seconds=30 --max-time 1500
  expect 3 'err=^mcp: task [^ ]+ timed out after 1500 ms .*cancelled$'
  run "${MCP[@]}" task "$url" get no-such-task
  expect 2 'err=does not know task no-such-task'
  stop_http_server || true
}

part_legacy() {
  part=legacy
  echo
  echo "## legacy: mcp.ts's client with --protocol legacy against mcp.ts serve $TASKS --http (2025-11-25 tasks)"
  local id
  start_http_server "$RT ./mcp.ts serve $TASKS --http 127.0.0.1:0" legacy
  echo "# $url: mcp.ts serve $TASKS --http 127.0.0.1:0"
  # An optional tool is a task only detached; a required one always (its question on the way, as a request).
  run "${MCP[@]}" call "$url" slow_compute seconds=1 -v --protocol legacy
  expect 0 'out=^Computation "job" completed after 1 seconds. Result: 42.$' '!err=^mcp: task '
  run "${MCP[@]}" call "$url" confirm_delete filename=x --elicit accept --elicit-json '{"confirm":true}' -v \
    --protocol legacy
  expect 0 "out=^deleted 'x'\$" 'err=^mcp: task [^: ]+: working' 'err=^mcp: task [^: ]+: completed'
  run "${MCP[@]}" call "$url" slow_compute seconds=2 --detach --protocol legacy
  expect 0 'out=^[A-Za-z0-9._-]+$' '!err=no task to detach' 'err=warning: a 2025-11-25 task may be its session'
  id=$(task_id)
  # Without a token subject the detaching session is the task's principal (the contract): a later command's
  # session does not find it, and says so with exit 2.
  if with_id "$id" "task result --protocol legacy"; then
    run "${MCP[@]}" task "$url" result "$id" --protocol legacy
    expect 2 'err=does not know task .*not yours'
  fi
  stop_http_server || true
}

part_principals() {
  part=principals
  echo
  echo "## principals: two SDK v1 clients, a session each, against mcp.ts serve $TASKS --http: a task is its session's"
  start_http_server "$RT ./mcp.ts serve $TASKS --http 127.0.0.1:0" principals
  echo "# $url: mcp.ts serve $TASKS --http 127.0.0.1:0"
  run "$IOP_NODE" interop/lib/sdk-tasks-principals.mjs "$url"
  local what="node lib/sdk-tasks-principals.mjs URL"
  expect 0 'out=^sessions A=[^ ]+ B=[^ ]+ distinct$' 'out=^A taskCreated [^ ]+ working' -- \
    "$what: two sessions; A's confirm_delete {filename: a-file} is a task"
  expect 0 'out=^B listTasks lacks it' -- "$what: B's listTasks does not list A's task"
  local probe
  for probe in getTask getTaskResult cancelTask; do
    expect 0 "out=^B $probe error code=-32602 " -- "$what: B's $probe on A's task id: error -32602"
  done
  expect 0 'out=^A listTasks has it' 'out=^A getTask (working|input_required)' -- \
    "$what: A's listTasks lists it, A's getTask shows it still running (B's cancelTask did nothing)"
  expect 0 "out=^A elicitation \"Delete 'a-file'\\?\" related-task=[^n]" "out=^A result isError=false deleted 'a-file'\$" \
    'out=^A getTask completed' '!out=^B elicitation ' 'out=^B elicitations 0$' -- \
    "$what: A answers its task's question and gets its result; B is asked nothing"
  stop_http_server || true
}

for part; do "part_$part"; done
echo
echo "tasks.sh: $passed passed, $failed failed ($RT)"
[ "$failed" = 0 ]
