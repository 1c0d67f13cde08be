#!/bin/sh
# Fault injection: starts a grandchild that ignores SIGTERM and does not hold our
# stdout/stderr, reports its pid, then waits to be cancelled.
sh -c 'trap "" TERM; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
echo "@info grandchild=$!" >&2
wait
