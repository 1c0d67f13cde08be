# shellcheck shell=bash disable=SC2154 # work, part, guard, SCRIPT, passed and failed are the sourcing script's
# The checks the interop scripts make (packages, sessions, replicas, dpop, tasks, otel), sourced by each: run a command,
# then expect what it printed (or check a condition, or fail with a file's tail); one line "ok: ..." or "FAIL: [part]
# ..." each, counted in passed and failed. The sourcing script sets work (its scratch folder), part (the part running),
# guard (the command's time bound: a timeout argv, or empty), SCRIPT (its name, for its own mistakes) and stdin (what a
# run reads; default nothing), and defines shorten LINE (the command line as shown, its long paths named).

now() { local t=${EPOCHREALTIME/,/.}; echo "$t"; }
since() { awk "BEGIN { printf \"%.1f\", $(now) - $1 }"; }

# An argument as a shell would need it: as it is when plain, else in single quotes.
shown() {
  local quote="'\\''"
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf ' %s' "$1"; else printf " '%s'" "${1//\'/$quote}"; fi
}

# A command as it would be typed, shorter (the sourcing script's shorten).
command_line() {
  local line
  line=$(for arg; do shown "$arg"; done)
  shorten "${line# }"
}

# run COMMAND...: runs it (stdin: $stdin, else nothing) with its stdout in $work/out and stderr in $work/err; sets
# status, took and ran (the command line).
run() {
  local began
  ran=$(command_line "$@")
  status=0
  began=$(now)
  "${guard[@]}" "$@" >"$work/out" 2>"$work/err" <"${stdin:-/dev/null}" || status=$?
  took=$(since "$began")
  [ "$status" != 130 ] || exit 130
}

# expect EXIT [TEST...] [-- WHAT]: the last run must have exited EXIT and pass each TEST: out=ERE (a line of stdout
# matches), err=ERE (a line of stderr), !out=ERE (no line of stdout), !err=ERE (no line of stderr). WHAT names the
# check (default: the command).
expect() {
  local want=$1 test why=() what=$ran summary="exit $status"
  shift
  for test; do
    shift
    [ "$test" != -- ] || { what=$*; break; }
    case $test in
      out=*) grep -Eq -- "${test#out=}" "$work/out" || why+=("no line of stdout matches /${test#out=}/") ;;
      err=*) grep -Eq -- "${test#err=}" "$work/err" || why+=("no line of stderr matches /${test#err=}/") ;;
      '!out='*) ! grep -Eq -- "${test#!out=}" "$work/out" || why+=("stdout matches /${test#!out=}/") ;;
      '!err='*) ! grep -Eq -- "${test#!err=}" "$work/err" || why+=("stderr matches /${test#!err=}/") ;;
      *) echo "$SCRIPT: bad test $test" >&2 && exit 2 ;;
    esac
    summary+=", ${test%%=*} ~ ${test#*=}"
  done
  [ "$status" = "$want" ] || why=("exit $status, expected $want" "${why[@]}")
  if [ ${#why[@]} -eq 0 ]; then
    echo "ok: $what: $summary ($took s)"
    passed=$((passed + 1))
  else
    local reasons
    reasons=$(printf '%s; ' "${why[@]}")
    echo "FAIL: [$part] $what ($took s): ${reasons%; }"
    [ ! -s "$work/out" ] || head -n 20 "$work/out" | sed 's/^/  stdout: /'
    [ ! -s "$work/err" ] || tail -n 30 "$work/err" | sed 's/^/  stderr: /'
    failed=$((failed + 1))
  fi
}

# check WHAT CONDITION...: a check of no command (the condition run as a test).
check() {
  local what=$1
  shift
  if "$@"; then
    echo "ok: $what"
    passed=$((passed + 1))
  else
    echo "FAIL: [$part] $what"
    failed=$((failed + 1))
  fi
}

# fail WHAT [FILE]: a failed check of no command, with the tail of FILE.
fail() {
  echo "FAIL: [$part] $1"
  [ -z "${2:-}" ] || [ ! -s "$2" ] || tail -n 20 "$2" | sed 's/^/  /'
  failed=$((failed + 1))
}
