#!/bin/sh
# Fails: its stderr is the error text.
echo "disk full" >&2
exit 3
