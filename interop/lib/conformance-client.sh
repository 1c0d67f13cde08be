#!/bin/sh
# The client command that interop/conformance.sh gives the conformance suite. For each client scenario the suite
# starts a mock MCP server on Streamable HTTP, then runs `<this script> <url>` through sh with MCP_CONFORMANCE_SCENARIO
# set (and MCP_CONFORMANCE_CONTEXT, JSON, for scenarios that hand the client data), and judges the client by what
# its mock saw. Here each scenario becomes the mcp.ts commands a user would type against that URL, run by the
# mcp.ts invocation in MCP_INTEROP_CLIENT (e.g. "deno run -A ./mcp.ts"). mcp.ts picks the protocol era itself
# (--protocol auto, its default): MCP_CONFORMANCE_PROTOCOL_VERSION is the mock's, and a user would not know it.
# Every command runs even when one before it failed; the exit status is the highest of theirs.
set -u
url=$1
: "${MCP_INTEROP_CLIENT:?the mcp.ts invocation, e.g. deno run -A ./mcp.ts}"
node=${IOP_NODE:-node} # only to turn JSON into the NDJSON lines `batch` reads
status=0

quote() { # the argument as the shell would need it, for the log line
  case $1 in
    '' | *[!A-Za-z0-9_./:=@%+,-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
  esac
}
mcp() { # mcp ARGS...: one mcp.ts command, shown on stderr first
  shown=$MCP_INTEROP_CLIENT
  for arg; do shown="$shown $(quote "$arg")"; done
  echo "conformance-client: $shown" >&2
  eval "$MCP_INTEROP_CLIENT \"\$@\""
}
keep() { if [ "$1" -gt "$status" ]; then status=$1; fi; } # keep STATUS: the highest exit status so far
run() { mcp "$@" </dev/null || keep $?; }                 # a command that reads nothing from stdin

case ${MCP_CONFORMANCE_SCENARIO:-} in
  initialize)
    # Judged: the initialize request (a protocolVersion it knows, clientInfo name and version). info connects and
    # prints what it learnt; the mock answers the server/discover probe with an empty result, so mcp.ts falls back.
    run info "$url"
    ;;
  tools_call)
    # Judged: tools/call add_numbers with numbers a and b. key=value follows the tool's inputSchema: a and b are
    # typed number there, so they go as numbers.
    run call "$url" add_numbers a=2 b=3
    ;;
  elicitation-sep1034-client-defaults)
    # The tool asks for a form of 5 optional fields, each with a default (string, integer, number, enum,
    # boolean); judged: an accept that carries all 5. --elicit accept answers with the schema's defaults.
    run call "$url" test_client_elicitation_defaults --elicit accept
    ;;
  sse-retry)
    # The call's SSE stream ends after a priming event (id, retry: 500) with no answer; judged: a GET no sooner
    # than 450 ms later, with Last-Event-ID (a SHOULD: a warning without it). The answer comes on that GET.
    run call "$url" test_reconnection
    ;;
  request-metadata)
    # Judged on every POST: the MCP-Protocol-Version header, _meta (protocolVersion, clientCapabilities,
    # clientInfo), and a retry with a version from `supported` after the first POST is refused with -32022. In the
    # 2026-07-28 era info is server/discover alone. --root, --elicit and --sample-command declare roots, elicitation
    # and sampling, so that their capability checks run (SKIPPED when a capability is not declared).
    run info "$url" --root "$PWD" --elicit decline --sample-command "echo no model here"
    ;;
  sep-2322-client-request-state)
    # MRTR, judged per tool: echo_state and no_state answer input_required with an elicitation form ({confirmed:
    # boolean}), echo_state with a requestState to echo exactly on the retry (with a new id), no_state without one
    # (the retry must send none); unrelated must carry neither; no_result_type's result has no resultType (complete,
    # never retried). One batch, one client, the four in order.
    printf '%s\n' \
      '{"tool": "test_mrtr_echo_state", "arguments": {}}' \
      '{"tool": "test_mrtr_no_state", "arguments": {}}' \
      '{"tool": "test_mrtr_unrelated", "arguments": {}}' \
      '{"tool": "test_mrtr_no_result_type", "arguments": {}}' |
      mcp batch "$url" --elicit accept --elicit-json '{"confirmed": true}' || keep $?
    ;;
  http-standard-headers)
    # Judged: Mcp-Method on every POST, Mcp-Name on tools/call, resources/read and prompts/get; only the first
    # request of each method counts (a method never sent is SKIPPED). Of the two tools and two resources the mock
    # offers, the one with the harder name or URI (a hyphen; a percent-encoded space) is the one used.
    run list "$url"
    run call "$url" my-hyphenated-tool
    run resources "$url"
    # shellcheck disable=SC2162 # mcp.ts read, not the shell's
    run read "$url" 'file:///path/to/file%20name.txt'
    run prompts "$url"
    run prompt "$url" test_prompt
    ;;
  http-custom-headers)
    # Judged: an Mcp-Param-<Name> header for each argument whose property has x-mcp-header (Base64 for values that
    # are not plain printable ASCII), none for the others or for null values. The two calls and their arguments
    # come from MCP_CONFORMANCE_CONTEXT's toolCalls; batch makes both in one client.
    "$node" -e '
      for (const call of JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT).toolCalls)
        console.log(JSON.stringify({ tool: call.name, arguments: call.arguments }));' |
      mcp batch "$url" || keep $?
    ;;
  http-invalid-tool-headers)
    # tools/list has valid_tool and 11 tools with a malformed x-mcp-header; judged: tools/list, a call to
    # valid_tool, and no call to any other. list shows what mcp.ts kept; the batch asks for each malformed tool,
    # which mcp.ts must refuse without calling it (a failing exit status is allowed here).
    run list "$url"
    run call "$url" valid_tool region=us-west1
    printf '%s\n' \
      '{"tool": "invalid_empty_header", "arguments": {"value": "x"}}' \
      '{"tool": "invalid_object_header", "arguments": {"data": {}}}' \
      '{"tool": "invalid_array_header", "arguments": {"items": ["x"]}}' \
      '{"tool": "invalid_null_header", "arguments": {"nil": null}}' \
      '{"tool": "invalid_number_header", "arguments": {"score": 1.5}}' \
      '{"tool": "invalid_duplicate_same_case", "arguments": {"field1": "x", "field2": "y"}}' \
      '{"tool": "invalid_duplicate_diff_case", "arguments": {"field1": "x", "field2": "y"}}' \
      '{"tool": "invalid_space_in_name", "arguments": {"value": "x"}}' \
      '{"tool": "invalid_colon_in_name", "arguments": {"value": "x"}}' \
      '{"tool": "invalid_non_ascii_name", "arguments": {"value": "x"}}' \
      '{"tool": "invalid_control_char_name", "arguments": {"value": "x"}}' |
      mcp batch "$url" || keep $?
    ;;
  json-schema-ref-no-deref)
    # lookup_user's inputSchema has a same-document $ref and a $ref to a canary URL on the mock; judged: tools/list,
    # and the canary never fetched. Both commands read the schema: the list, and the tool's own page.
    run list "$url"
    run list "$url" lookup_user
    ;;
  json-schema-2020-12-preservation)
    # Judged: json_schema_2020_12_tool's inputSchema, as mcp.ts received it, passed back verbatim as {schema} to
    # json_schema_echo ($schema, $defs, $anchor, allOf/anyOf, if/then/else, additionalProperties). Not scored.
    mcp list "$url" json_schema_2020_12_tool --json </dev/null |
      "$node" -e '
        let text = "";
        process.stdin.on("data", (chunk) => text += chunk);
        process.stdin.on("end", () => console.log(JSON.stringify({ schema: JSON.parse(text).inputSchema })));' |
      mcp call "$url" json_schema_echo - || keep $?
    ;;
  *)
    # Any other scenario (the auth ones among them): connect and say what the server is.
    run info "$url"
    ;;
esac
exit "$status"
