#!/bin/sh
# Runs its arguments as a child and waits for it, as npx does, so that a signal to this shell alone leaves the
# child running: for the test that a stdio server is stopped with its whole process group. The child keeps our
# stdin (an asynchronous command would get /dev/null).
exec 3<&0
"$@" <&3 3<&- &
wait $!
