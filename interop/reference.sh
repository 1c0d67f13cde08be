#!/usr/bin/env bash
# mcp.ts's client commands against the official reference servers, installed by setup.sh: server-everything over
# stdio and server-filesystem (allowed: testdata/). Prints each command, what it printed and its exit code, and
# exits 1 when any exit code or expected output differs. From the repository root:
#   interop/reference.sh
#   MCP_RT="bun" interop/reference.sh            the runtime that runs ./mcp.ts (default "deno run -A")
#   MCP_RT="node" interop/reference.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
cd "$here/.."

RT=${MCP_RT:-deno run -A}
read -ra rt <<<"$RT"
EVERYTHING="mcp-server-everything stdio"
FILESYSTEM="mcp-server-filesystem $PWD/testdata"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
passed=0
failed=()

# An argument as a shell would need it: as it is when plain, else in single quotes.
shown() {
  local quote="'\\''"
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf ' %s' "$1"; else printf " '%s'" "${1//\'/$quote}"; fi
}

# check EXIT TEXT COMMAND ARGS...: run `mcp.ts COMMAND ARGS...`; it must exit EXIT and print TEXT on stdout (or on
# stderr, for exit codes other than 0).
check() {
  local want=$1 text=$2 out status=0 seen
  shift 2
  printf '\n$ %s ./mcp.ts' "$RT"
  for arg; do shown "$arg"; done
  echo
  out=$("${rt[@]}" ./mcp.ts "$@" 2>"$err") || status=$?
  [ -z "$out" ] || printf '%s\n' "$out"
  [ -s "$err" ] && sed 's/^/stderr: /' "$err"
  seen=$out
  [ "$want" = 0 ] || seen+=$(cat "$err")
  if [ "$status" = "$want" ] && [[ $seen == *"$text"* ]]; then
    echo "-> exit $status: ok"
    passed=$((passed + 1))
  else
    echo "-> exit $status: FAILED (expected exit $want and \"$text\")"
    failed+=("$*")
  fi
}

echo "# server-everything (stdio)"
check 0 "Echo: hi" call "$EVERYTHING" echo message=hi
check 0 "The sum of 2 and 3 is 5" call "$EVERYTHING" get-sum a=2 b=3
check 0 "The sum of 2 and 3 is 5" call "$EVERYTHING" get-sum '{"a":2,"b":3}'
check 0 '"structuredContent"' call "$EVERYTHING" get-structured-content location=Chicago --json
check 1 "expected string" call "$EVERYTHING" echo '{}' # the SDK reports invalid arguments as an isError result
# The SDK answers an unknown tool with an isError result, not a -32602 error; mcp.ts checks the list: exit 2.
check 2 'no tool named "nope"' call "$EVERYTHING" nope
check 0 "get-sum" list "$EVERYTHING"
check 0 "a*  number" list "$EVERYTHING" get-sum
check 0 "mcp-servers/everything" info "$EVERYTHING"
check 0 " ms" ping "$EVERYTHING"
check 0 "demo://resource/dynamic/text/{resourceId}" resources "$EVERYTHING" # resources, then templates
check 0 "Resource 1: This is a plaintext resource" read "$EVERYTHING" demo://resource/dynamic/text/1
check 0 '"blob"' read "$EVERYTHING" demo://resource/dynamic/blob/1 --json
check 0 "args-prompt" prompts "$EVERYTHING"
check 0 "[user] What's weather in Oslo?" prompt "$EVERYTHING" args-prompt city=Oslo
check 2 "simple-prompt" prompt "$EVERYTHING" simple-promt

echo
echo "# server-filesystem (stdio), allowed directory: testdata/"
check 0 "list_directory" list "$FILESYSTEM"
check 0 "[DIR] tools" call "$FILESYSTEM" list_directory path="$PWD/testdata"
check 0 "[FILE] echo.ts" call "$FILESYSTEM" list_directory path="$PWD/testdata/tools"
check 0 "Echo the text back" call "$FILESYSTEM" read_text_file path="$PWD/testdata/tools/echo.ts"
check 1 "Access denied" call "$FILESYSTEM" read_text_file path=/etc/hostname

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "reference: all $passed checks as expected ($RT)"
else
  echo "reference: ${#failed[@]} of $((passed + ${#failed[@]})) checks FAILED ($RT):"
  printf '  mcp.ts %s\n' "${failed[@]}"
  exit 1
fi
