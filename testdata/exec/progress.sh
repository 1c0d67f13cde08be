#!/bin/sh
# Reports progress and logs at two levels while it works.
cat >/dev/null
echo "@progress 1/2 first half" >&2
echo "plain line" >&2
echo "@error bad news" >&2
echo "@progress 2/2" >&2
echo done
