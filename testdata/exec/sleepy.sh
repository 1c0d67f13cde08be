#!/bin/sh
# Reports its pid, then sleeps: for cancellation and timeouts. It ignores SIGTERM, so only SIGKILL ends it.
trap '' TERM
echo "@warning pid $$" >&2
while :; do sleep 1; done
