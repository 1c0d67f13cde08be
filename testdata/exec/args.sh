#!/bin/sh
# Echoes how it was called: no words on its command line, the arguments on stdin, DIR as its cwd.
printf 'argc=%s cwd=%s stdin=%s\n' "$#" "$(basename "$PWD")" "$(cat)"
