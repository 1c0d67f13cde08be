#!/bin/sh
# The client command that interop/conformance.sh gives the conformance suite. For each client scenario the suite
# starts a mock MCP server on Streamable HTTP, then runs `<this script> <url>` through sh with MCP_CONFORMANCE_SCENARIO
# set (and MCP_CONFORMANCE_CONTEXT, JSON, for scenarios that hand the client data), and judges the client by what
# its mock saw. Here each scenario becomes the mcp.ts commands a user would type against that URL, run by the
# mcp.ts invocation in MCP_INTEROP_CLIENT (e.g. "deno run -A ./mcp.ts"). mcp.ts picks the protocol era itself
# (--protocol auto, its default): MCP_CONFORMANCE_PROTOCOL_VERSION is the mock's, and a user would not know it.
# Every command runs even when one before it failed; the exit status is the highest of theirs.
# Authorization (auth/*): every run gets a credentials store of its own, fresh and removed at the end
# (MCP_TS_CREDENTIALS, so nothing leaks between scenarios and the user's own tokens are never read), and
# lib/headless-browser.sh as $BROWSER: it follows the mock authorization server's redirect back to mcp.ts's loopback
# listener as a browser would. The browser flows run because the commands say --login (stdin is no terminal here).
set -u
url=$1
: "${MCP_INTEROP_CLIENT:?the mcp.ts invocation, e.g. deno run -A ./mcp.ts}"
node=${IOP_NODE:-node} # to turn JSON into the NDJSON lines `batch` reads, and to read MCP_CONFORMANCE_CONTEXT
here=$(cd "$(dirname "$0")" && pwd)
status=0
child=

state=$(mktemp -d "${TMPDIR:-/tmp}/mcp-conformance-client.XXXXXX") || exit 1 # mode 0700
export MCP_TS_CREDENTIALS="$state/credentials.json"
export MCP_HEADLESS_BROWSER_LOG="$state/browser.log"
unset MCP_TS_TOKEN MCP_TS_CLIENT_SECRET
# The suite's timeout sends SIGTERM to the `sh -c` that runs this script, not to it, and then waits for our stdout
# and stderr to close: a command left running (an authorization flow waits minutes for its redirect) would hold the
# suite that long. So a watchdog TERMs this script when its parent is gone, and the trap passes the signal on to the
# command running (see run).
(
  while kill -0 "$PPID" 2>/dev/null; do sleep 1; done
  kill -TERM $$ 2>/dev/null
) </dev/null >/dev/null 2>&1 &
watchdog=$!
# shellcheck disable=SC2317 # the traps' functions
finish() {
  kill "$watchdog" 2>/dev/null
  if [ -s "$state/browser.log" ]; then sed 's/^/conformance-client: browser: /' "$state/browser.log" >&2; fi
  rm -rf "$state"
}
# shellcheck disable=SC2317
stop() { if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi; }
trap finish EXIT
trap 'stop; exit 143' TERM
trap 'stop; exit 130' INT
trap 'stop; exit 129' HUP

quote() { # the argument as the shell would need it, for the log line
  case $1 in
    '' | *[!A-Za-z0-9_./:=@%+,-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
  esac
}
show() { # show ARGS...: the mcp.ts command on stderr
  shown=$MCP_INTEROP_CLIENT
  for arg; do shown="$shown $(quote "$arg")"; done
  echo "conformance-client: $shown" >&2
}
mcp() { # mcp ARGS...: one mcp.ts command (in a pipeline), shown on stderr first
  show "$@"
  eval "$MCP_INTEROP_CLIENT \"\$@\""
}
keep() { if [ "$1" -gt "$status" ]; then status=$1; fi; } # keep STATUS: the highest exit status so far
run() { # run ARGS...: a command that reads nothing from stdin; in the background (exec'd, so that $! is mcp.ts
  # itself) and waited for, so that a signal to this script reaches it (see stop)
  show "$@"
  eval "exec env $MCP_INTEROP_CLIENT \"\$@\"" </dev/null &
  child=$!
  wait "$child" || keep $?
  child=
}
# mcp.ts splits $BROWSER as a shell would (a command line, the URL appended): quoted, should the path need it
BROWSER=$(quote "$here/headless-browser.sh") && export BROWSER
context() { # context KEY: that string of MCP_CONFORMANCE_CONTEXT (the suite's data for the scenario)
  "$node" -e '
    const value = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}")[process.argv[1]];
    if (typeof value !== "string") {
      console.error("conformance-client: MCP_CONFORMANCE_CONTEXT has no " + process.argv[1]);
      process.exit(2);
    }
    process.stdout.write(value);' "$1"
}

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
  # Authorization. Every auth/* mock serves one tool, test-tool ({} arguments, answers "test"), behind OAuth; its
  # authorization server's /authorize redirects straight back with code, state and iss, which the headless browser
  # follows. What is judged is the flow: discovery, registration, the authorization and token requests.
  auth/metadata-default | auth/metadata-var1 | auth/metadata-var2 | auth/metadata-var3)
    # Discovery of the resource's metadata (named in WWW-Authenticate or not; path form, root form, elsewhere) and of
    # its authorization server's (RFC 8414 or OpenID, with or without a path), then DCR and the code flow. As a user
    # does: log in once, then use the server; list has no --login, so it must find the token stored (else exit 4).
    run login "$url"
    run list "$url"
    ;;
  auth/basic-cimd)
    # The server supports Client ID Metadata Documents: the client_id must be the document's URL (the mock never
    # fetches it), not a DCR registration.
    run call "$url" test-tool --login --client-metadata-url https://conformance-test.local/client-metadata.json
    ;;
  auth/pre-registration)
    # No registration endpoint: the client the context names, with its secret, by client_secret_basic.
    client_id=$(context client_id) || exit 2
    client_secret=$(context client_secret) || exit 2
    run call "$url" test-tool --login --client-id "$client_id" --client-secret "$client_secret"
    ;;
  auth/scope-step-up)
    # 401 asks for mcp:basic; tools/call then gets 403 insufficient_scope for mcp:write: a second flow, for both.
    run call "$url" test-tool --login
    ;;
  auth/authorization-server-migration)
    # The resource names a new authorization server once the first token has been used (a later request with it gets
    # 401): mcp.ts must discover and register anew there, never showing it the old server's client_id. A login, then a
    # command later on, which meets the move with its stored token.
    run login "$url"
    run call "$url" test-tool --login
    ;;
  auth/client-credentials-basic)
    # SEP-1046 (extension): client_credentials with client_secret_basic, no browser; client from the context.
    client_id=$(context client_id) || exit 2
    client_secret=$(context client_secret) || exit 2
    run call "$url" test-tool --grant client_credentials --client-id "$client_id" --client-secret "$client_secret"
    ;;
  auth/client-credentials-jwt)
    # SEP-1046 (extension): client_credentials with private_key_jwt (RFC 7523, ES256); the context's PEM key in a
    # file of mode 0600 (in our 0700 folder).
    client_id=$(context client_id) || exit 2
    (umask 077 && context private_key_pem >"$state/client-key.pem") || exit 2
    run call "$url" test-tool --grant client_credentials --client-id "$client_id" --client-key "$state/client-key.pem"
    ;;
  auth/wif-jwt-bearer)
    # SEP-1933 (extension): workload identity federation. No browser and no registration: RFC 7523's jwt-bearer grant
    # with the platform's JWT (the context's valid_jwt) as the assertion, for the client the context names. The JWT in
    # a file of mode 0600 (in our 0700 folder), never on argv; mcp.ts reads it again at every token request, as a
    # platform's rotating token file needs. Judged: the grant type and the assertion (signature, aud the AS, exp); a
    # refusal neither retried nor answered with another grant.
    client_id=$(context client_id) || exit 2
    (umask 077 && context valid_jwt >"$state/assertion.jwt") || exit 2
    run call "$url" test-tool --grant jwt-bearer --assertion "@$state/assertion.jwt" --client-id "$client_id"
    ;;
  auth/enterprise-managed-authorization)
    # SEP-990 (extension): the IdP's ID token (the context's idp_id_token) exchanged at the IdP's token endpoint
    # (RFC 8693: subject_token_type id_token, requested_token_type id-jag, audience the AS's issuer, resource the MCP
    # server) for an ID-JAG, then jwt-bearer with the ID-JAG at the AS, client_secret_basic. The ID token in a 0600
    # file, the client's secret in MCP_TS_CLIENT_SECRET: neither on argv. Judged: both token requests.
    client_id=$(context client_id) || exit 2
    idp_client_id=$(context idp_client_id) || exit 2
    idp_token_endpoint=$(context idp_token_endpoint) || exit 2
    (umask 077 && context idp_id_token >"$state/id-token.jwt") || exit 2
    MCP_TS_CLIENT_SECRET=$(context client_secret) || exit 2
    export MCP_TS_CLIENT_SECRET
    run call "$url" test-tool --grant token-exchange --id-token "@$state/id-token.jwt" \
      --idp-token-endpoint "$idp_token_endpoint" --idp-client-id "$idp_client_id" --client-id "$client_id"
    ;;
  auth/dpop | auth/dpop-nonce)
    # SEP-1932 (extension): the AS lists dpop_signing_alg_values_supported ES256; DCR and the code flow, the token
    # request with a DPoP proof (a DPoP-bound token), then every MCP request with `Authorization: DPoP` and a fresh
    # proof (jti, ath). dpop-nonce: the AS (400 use_dpop_nonce) and the server (401 use_dpop_nonce) each demand a
    # nonce first; judged also: one retry with it at each. --dpop: DPoP or no token (mcp.ts would use it unasked,
    # the metadata listing it).
    run call "$url" test-tool --login --dpop
    ;;
  sep-2640-client-no-prefetch)
    # Skills (SEP-2640): judged, listing reads no skill file (and exits 0).
    run skills "$url"
    ;;
  sep-2640-client-verify-digest | sep-2640-client-verify-size | sep-2640-client-verify-frontmatter)
    # The mock serves a SKILL.md that fails one check (its digest, its size, or its frontmatter against the
    # entry's); judged: SKILL.md read, and references/FORMS.md never (the skill refused). Exit 3 is allowed.
    run skill "$url" pdf-processing
    ;;
  auth/*)
    # The rest: one command that must authorize, with the browser flow allowed. Judged, by scenario:
    # scope-from-www-authenticate, scope-from-scopes-supported, scope-omitted-when-undefined: the scope requested;
    # token-endpoint-auth-basic|post|none: the token endpoint authentication the registration returned;
    # offline-access-scope|not-supported: offline_access only when the server lists it, refresh_token in DCR;
    # iss-supported, iss-not-advertised: the flow completes. Refused, mcp.ts exiting 4 (allowed there):
    # scope-retry-limit (403 for ever: at most 3 flows), resource-mismatch (the metadata's resource is another
    # server's: no authorization request), iss-supported-missing, iss-wrong-issuer, iss-unexpected, iss-normalized
    # (the redirect's iss is missing or differs, even by a trailing slash: no token request),
    # metadata-issuer-mismatch (the server's metadata names another issuer: none of its endpoints used).
    run call "$url" test-tool --login
    ;;
  *)
    # Any other scenario: connect and say what the server is.
    run info "$url"
    ;;
esac
exit "$status"
