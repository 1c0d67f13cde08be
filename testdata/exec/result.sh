#!/bin/sh
# Prints a whole CallToolResult, which is used as it is.
cat >/dev/null
echo '{"content":[{"type":"text","text":"from a result"}],"structuredContent":{"ok":true}}'
