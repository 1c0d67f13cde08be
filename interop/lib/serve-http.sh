# shellcheck shell=bash disable=SC2154 # work is the caller's; server and url are set for the caller
# Sourced by the scripts that run `mcp.ts serve … --http`: start one in a process group of its own and read its URL
# from the ready line, and stop it (SIGTERM to the group, SIGKILL after 10 s). Sets `server` (the group's pid) and
# `url`; the caller's `$work` holds the server's stderr in "$work/stderr".

# start_http_server "<command line with --http …>" NAME: NAME prefixes the message when no URL appears in 60 s.
start_http_server() {
  : >"$work/stderr"
  set -m # its own process group, so that stop_http_server reaches everything it started
  sh -c "exec $1" 2>"$work/stderr" </dev/null &
  server=$!
  set +m
  url=
  for _ in $(seq 600); do # 60 s: a first run may compile or download
    url=$(sed -n 's|^mcp: serving \(http://[^ ]*\)$|\1|p' "$work/stderr" | head -n1)
    [ -n "$url" ] && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  echo "$2: $1 did not print \"mcp: serving http://...\":" >&2
  cat "$work/stderr" >&2
  return 1
}

# stop_group PID: SIGTERM to the process group PID leads, SIGKILL after 10 s; returns PID's exit status.
stop_group() {
  local status=0
  kill -TERM -- "-$1" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 -- "-$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || status=$?
  return "$status"
}

# stop_http_server: returns the server's exit status (0 when none is running).
stop_http_server() {
  [ -n "$server" ] || return 0
  local status=0
  stop_group "$server" || status=$?
  server=
  return "$status"
}
