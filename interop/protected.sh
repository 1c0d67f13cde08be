#!/usr/bin/env bash
# mcp.ts's `serve --http --auth-issuer` (an OAuth protected resource) against real peers: the official SDK clients,
# mcp.ts's own client and curl, with testdata/fake_auth_server.ts as the authorization server. Prints each command,
# what it printed, its exit code and time, and exits 1 when any exit code or expected output differs. From the
# repository root:
#   interop/protected.sh
#   MCP_RT="bun" interop/protected.sh        the runtime that runs ./mcp.ts (server and client) and the fake AS
#   MCP_RT="node" interop/protected.sh       (default "deno run -A")
# It starts, each in a process group of its own (stopped at the end, also on Ctrl-C: SIGTERM, SIGKILL after 10 s):
#   the AS       FAKE_AUTH_CLIENT_ID=interop-ci FAKE_AUTH_CLIENT_SECRET=<random> $MCP_RT testdata/fake_auth_server.ts
#                (a pre-registered confidential client; it prints "listening http://127.0.0.1:PORT", the issuer)
#   the server   $MCP_RT ./mcp.ts serve testdata/auth --http 127.0.0.1:0 --auth-issuer AS --auth-scopes mcp:read
#                (one tool, whoami: {sub, scopes, clientId} from ctx.auth)
# The checks:
#   curl      both Protected Resource Metadata URLs; a 401's WWW-Authenticate; tokens minted at the AS's /_mint that
#             the server must refuse: signed with a key not in the JWKS, for another audience (also with a Host header
#             naming that audience's authority), expired, for the server's URL with a trailing slash (aud exact), typ
#             dpop+jwt (not an access token's), nbf a string, nbf an hour ahead, alg with a line break (401, not
#             500), without mcp:read (403 insufficient_scope); and one it must take: typ JWT (200)
#   SDKs      lib/sdk-auth-client.mjs, SDK v2 (@modelcontextprotocol/client) and v1 (@modelcontextprotocol/sdk):
#             without a token (the SDK reports the 401; v2 with an authProvider that has no token: an
#             UnauthorizedError); with a client_credentials token from the AS's /token as an
#             `Authorization: Bearer` header (requestInit); with the SDK's own ClientCredentialsProvider (discovery
#             through the 401 and the metadata; v1's asks for no scope unless given one: 403); each lists the
#             tools and calls whoami
#   mcp.ts    with a fresh MCP_TS_CREDENTIALS: a script without a token (exit 4), `call --grant client_credentials`,
#             then `list` with the stored token (the store 0600), `login --grant client_credentials`, tokens the server
#             refuses given with `-H "Authorization: Bearer ..."` (exit 4; the server's reason shown whole), `logout`
#   leaks     no token, and not the client secret, in anything mcp.ts or the SDK clients printed, nor in the server's
#             stderr
# Tokens and the secret are shown as $NAME in what the script prints. A check that runs over
# PROTECTED_CHECK_TIMEOUT s (default 30) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# = 0 ] || {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
cd "$here/.."

RT=${MCP_RT:-deno run -A}
read -ra rt <<<"$RT"
LIMIT=${PROTECTED_CHECK_TIMEOUT:-30}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
server=
url=
as=
issuer=
passed=0
failed=()
secret_names=()
secret_values=()
# shellcheck source-path=SCRIPTDIR source=lib/serve-http.sh
. "$here/lib/serve-http.sh"

now() { local t=${EPOCHREALTIME/,/.}; echo "$t"; }
since() { awk "BEGIN { printf \"%.1f\", $(now) - $1 }"; }

# stop_as: the AS's group stopped (stop_group); returns its exit status.
stop_as() {
  [ -n "$as" ] || return 0
  local status=0
  stop_group "$as" || status=$?
  as=
  return "$status"
}

# stop_all: the server, then the AS; their stderr when a check failed (or, for the server, when it wrote more than
# its ready line).
stop_all() {
  local status=0
  if [ -n "$server" ]; then
    stop_http_server || status=$?
    echo "protected: stopped the server (exit $status)"
    if [ ${#failed[@]} -gt 0 ] || grep -qv '^mcp: serving ' "$work/stderr"; then
      echo "protected: the server's stderr (last 30 lines):"
      tail -n 30 "$work/stderr" | masked "  "
    fi
  fi
  if [ -n "$as" ]; then
    status=0
    stop_as || status=$?
    echo "protected: stopped the AS (exit $status)"
    if [ ${#failed[@]} -gt 0 ]; then
      echo "protected: the AS's stderr (last 30 lines):"
      tail -n 30 "$work/as.err" | masked "  "
    fi
  fi
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT # Ctrl-C: the AS and the server are in process groups of their own, so only stop_all reaches them
trap 'exit 143' TERM

# secret NAME VALUE: VALUE is shown as $NAME from now on, and must not appear in what the peers print.
secret() {
  secret_names+=("$1")
  secret_values+=("$2")
}

# mask TEXT: TEXT with every secret replaced by its $NAME.
mask() {
  local text=$1 i
  for i in "${!secret_values[@]}"; do text=${text//"${secret_values[$i]}"/\$${secret_names[$i]}}; done
  printf '%s' "$text"
}

# masked PREFIX: stdin's lines, masked, after PREFIX.
masked() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do printf '%s%s\n' "$1" "$(mask "$line")"; done
}

# An argument as a shell would need it: as it is when plain, else in single quotes; secrets as $NAME.
shown() {
  local quote="'\\''" arg
  arg=$(mask "$1")
  if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf ' %s' "$arg"; else printf " '%s'" "${arg//\'/$quote}"; fi
}

# [also=TEXT] [absent=TEXT] [grab=NAME] check EXIT TEXT COMMAND ARGS...: run COMMAND ARGS (`mcp.ts` stands for
# `$MCP_RT ./mcp.ts`); it must exit EXIT and print TEXT (stdout or stderr); with also, TEXT as well; with absent, not
# that. grab=NAME: stdout is JSON with an access_token: it goes into the variable NAME and is a secret (and this output
# is no peer's: it is not searched for leaks).
check() {
  local want=$1 text=$2 out status=0 all began took ok=yes command
  shift 2
  command=("$@")
  [ "$1" != mcp.ts ] || command=("${rt[@]}" ./mcp.ts "${@:2}")
  if [ "$1" = mcp.ts ]; then printf '\n$ %s ./mcp.ts' "$RT"; else printf '\n$'; fi
  for arg in "${@:$([ "$1" = mcp.ts ] && echo 2 || echo 1)}"; do shown "$arg"; done
  echo
  began=$(now)
  out=$("${guard[@]}" "${command[@]}" 2>"$work/err" </dev/null) || status=$?
  took=$(since "$began")
  [ "$status" != 130 ] || exit 130 # Ctrl-C reached the command too: bash takes the SIGINT as handled
  all=$out$'\n'$(cat "$work/err")
  if [ -n "${grab:-}" ]; then
    local token
    token=$(printf '%s' "$out" | "$IOP_NODE" -e \
      'let s = ""; process.stdin.on("data", (d) => s += d).on("end", () => {
         try { console.log(JSON.parse(s).access_token ?? ""); } catch { console.log(""); } })')
    printf -v "$grab" '%s' "$token"
    [ -z "$token" ] || secret "$grab" "$token"
    [ -n "$token" ] || ok=no
  else
    printf '%s\n' "$all" >>"$work/printed"
  fi
  [ -z "$out" ] || printf '%s\n' "$(mask "$out")"
  [ -s "$work/err" ] && masked "stderr: " <"$work/err"
  [ "$status" = "$want" ] && [[ $all == *"$text"* ]] || ok=no
  [ -z "${also:-}" ] || [[ $all == *"$also"* ]] || ok=no
  [ -z "${absent:-}" ] || [[ $all != *"$absent"* ]] || ok=no
  if [ $ok = yes ]; then
    echo "-> exit $status in $took s: ok"
    passed=$((passed + 1))
  else
    local expected="exit $want and \"$text\""
    [ -z "${also:-}" ] || expected+=" and \"$also\""
    [ -z "${absent:-}" ] || expected+=" and no \"$absent\""
    [ -z "${grab:-}" ] || expected+=" and an access_token"
    [ "$status" != 124 ] || [ ${#guard[@]} = 0 ] || expected+="; killed after $LIMIT s"
    echo "-> exit $status in $took s: FAILED (expected $expected)"
    failed+=("$(for arg; do shown "$arg"; done)")
  fi
}

# --- the authorization server and the protected server ---

CLIENT_ID=interop-ci
CLIENT_SECRET=$("$IOP_NODE" -e 'console.log(require("node:crypto").randomBytes(18).toString("base64url"))')
secret CLIENT_SECRET "$CLIENT_SECRET"
set -m # a process group of its own
FAKE_AUTH_CLIENT_ID=$CLIENT_ID FAKE_AUTH_CLIENT_SECRET=$CLIENT_SECRET "${rt[@]}" testdata/fake_auth_server.ts \
  >"$work/as.out" 2>"$work/as.err" </dev/null &
as=$!
set +m
for _ in $(seq 600); do # 60 s: a first run may compile or download
  issuer=$(sed -n 's|^listening \(http://[^ ]*\)$|\1|p' "$work/as.out" | head -n1)
  [ -n "$issuer" ] && break
  kill -0 "$as" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$issuer" ]; then
  echo "protected: $RT testdata/fake_auth_server.ts did not print \"listening http://...\":" >&2
  cat "$work/as.out" "$work/as.err" >&2
  exit 1
fi
echo "# the AS: FAKE_AUTH_CLIENT_ID=$CLIENT_ID FAKE_AUTH_CLIENT_SECRET=\$CLIENT_SECRET $RT testdata/fake_auth_server.ts"
echo "# $issuer"

serve="$RT ./mcp.ts serve testdata/auth --http 127.0.0.1:0 --auth-issuer $issuer --auth-scopes mcp:read"
start_http_server "$serve" protected
origin=${url%/mcp}
prm=$origin/.well-known/oauth-protected-resource
echo "# the server: $serve"
echo "# $url"

# --- curl: the resource server's metadata and refusals ---

echo
echo "# curl"
initialize='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},'
initialize+='"clientInfo":{"name":"curl","version":"1"}}}'
post=(curl -sS -i -X POST -H "content-type: application/json" -H "accept: application/json, text/event-stream"
  -d "$initialize")
also="\"authorization_servers\":[\"$issuer\"]" check 0 "\"resource\":\"$url\"" curl -sS -i "$prm"
also="\"authorization_servers\":[\"$issuer\"]" check 0 "\"resource\":\"$url\"" curl -sS -i "$prm/mcp"
also="resource_metadata=\"$prm/mcp\", scope=\"mcp:read\"" absent=error= check 0 " 401" "${post[@]}" "$url"
mint=(curl -sS -H "content-type: application/json" "$issuer/_mint" -d)
grab=FORGED_TOKEN check 0 access_token "${mint[@]}" \
  "{\"aud\":\"$url\",\"scope\":\"mcp:read\",\"sign_with\":\"foreign\"}"
also="not signed by a key of its issuer" check 0 " 401" "${post[@]}" -H "Authorization: Bearer $FORGED_TOKEN" "$url"
grab=OTHER_AUDIENCE_TOKEN check 0 access_token "${mint[@]}" '{"aud":"http://127.0.0.1:1/mcp","scope":"mcp:read"}'
also="not for this server (aud)" check 0 " 401" "${post[@]}" -H "Authorization: Bearer $OTHER_AUDIENCE_TOKEN" "$url"
# The same token with `Host: 127.0.0.1:1`, the authority it was issued for: the server must still refuse it (its
# audience is the URL it serves, not whatever Host a request names; a Host not its own may also be refused outright)
absent='"result"' check 0 "HTTP/1.1 40" "${post[@]}" -H "Host: 127.0.0.1:1" \
  -H "Authorization: Bearer $OTHER_AUDIENCE_TOKEN" "$url"
grab=EXPIRED_TOKEN check 0 access_token "${mint[@]}" "{\"aud\":\"$url\",\"scope\":\"mcp:read\",\"exp_in\":-3600}"
also="has expired" check 0 " 401" "${post[@]}" -H "Authorization: Bearer $EXPIRED_TOKEN" "$url"
# The token rules, strict: aud compared exactly (a trailing slash is another resource), typ an access token's
# (at+jwt, application/at+jwt, or JWT from issuers that predate RFC 9068; nothing else), nbf and iat numbers
grab=SLASH_AUDIENCE_TOKEN check 0 access_token "${mint[@]}" "{\"aud\":\"$url/\",\"scope\":\"mcp:read\"}"
also="not for this server (aud)" check 0 " 401" "${post[@]}" -H "Authorization: Bearer $SLASH_AUDIENCE_TOKEN" "$url"
grab=JWT_TYP_TOKEN check 0 access_token "${mint[@]}" "{\"aud\":\"$url\",\"scope\":\"mcp:read\",\"typ\":\"JWT\"}"
also='"result"' check 0 "HTTP/1.1 200" "${post[@]}" -H "Authorization: Bearer $JWT_TYP_TOKEN" "$url"
grab=DPOP_TYP_TOKEN check 0 access_token "${mint[@]}" "{\"aud\":\"$url\",\"scope\":\"mcp:read\",\"typ\":\"dpop+jwt\"}"
also="is not an access token" check 0 " 401" "${post[@]}" -H "Authorization: Bearer $DPOP_TYP_TOKEN" "$url"
grab=TEXT_NBF_TOKEN check 0 access_token "${mint[@]}" \
  "{\"aud\":\"$url\",\"scope\":\"mcp:read\",\"claims\":{\"nbf\":\"0\"}}"
also="nbf is not a number" check 0 " 401" "${post[@]}" -H "Authorization: Bearer $TEXT_NBF_TOKEN" "$url"
grab=FUTURE_NBF_TOKEN check 0 access_token "${mint[@]}" "{\"aud\":\"$url\",\"scope\":\"mcp:read\",\"nbf_in\":3600}"
also="not valid yet" check 0 " 401" "${post[@]}" -H "Authorization: Bearer $FUTURE_NBF_TOKEN" "$url"
# The header's alg and typ are the caller's, read before the signature is checked: a line break in one must still be
# a 401 (not a 500, nor an error page), and the challenge a well-formed header
grab=LINE_BREAK_ALG_TOKEN check 0 access_token "${mint[@]}" \
  "{\"aud\":\"$url\",\"scope\":\"mcp:read\",\"alg\":\"RS256\\nX\"}"
also='error="invalid_token"' check 0 " 401" "${post[@]}" -H "Authorization: Bearer $LINE_BREAK_ALG_TOKEN" "$url"
grab=WRITE_ONLY_TOKEN check 0 access_token "${mint[@]}" "{\"aud\":\"$url\",\"scope\":\"mcp:write\"}"
also='error="insufficient_scope"' check 0 " 403" "${post[@]}" -H "Authorization: Bearer $WRITE_ONLY_TOKEN" "$url"

# --- the official SDK clients ---

echo
echo "# the official SDK clients (lib/sdk-auth-client.mjs)"
grab=TOKEN check 0 access_token curl -sS -u "$CLIENT_ID:$CLIENT_SECRET" -d grant_type=client_credentials \
  -d scope=mcp:read --data-urlencode "resource=$url" "$issuer/token"
sdk=("$IOP_NODE" interop/lib/sdk-auth-client.mjs)
bearer=(env "IOP_BEARER_TOKEN=$TOKEN" "${sdk[@]}")
provider=(env "IOP_CLIENT_ID=$CLIENT_ID" "IOP_CLIENT_SECRET=$CLIENT_SECRET" "IOP_ISSUER=$issuer" "${sdk[@]}")
whoami="whoami: {\"sub\":\"$CLIENT_ID\",\"scopes\":[\"mcp:read\"],\"clientId\":\"$CLIENT_ID\"}"
# v2: no authProvider, so no UnauthorizedError: an SdkHttpError CLIENT_HTTP_AUTHENTICATION from the discover probe
check 1 "401" "${sdk[@]}" v2 "$url" none
# an authProvider without a token (nor onUnauthorized): the SDK's UnauthorizedError
also="unauthorized-error yes" check 1 "UnauthorizedError" "${sdk[@]}" v2 "$url" empty-provider
also="era modern 2026-07-28" check 0 "$whoami" "${bearer[@]}" v2 "$url" bearer
also="era legacy 2025-11-25" check 0 "$whoami" "${bearer[@]}" v2 "$url" bearer --legacy
also="grant_type=client_credentials scope=mcp:read resource=$url" check 0 "$whoami" "${provider[@]}" v2 "$url" \
  client-credentials
check 1 "401" "${sdk[@]}" v1 "$url" none
also="era legacy 2025-11-25" check 0 "$whoami" "${bearer[@]}" v1 "$url" bearer
# SDK v1 1.32.2: fetchToken asks for the provider's own scope only, not the 401's scope="mcp:read" nor the metadata's
# scopes_supported (which auth() resolves for the authorization-code flow): a token without mcp:read, 403
# insufficient_scope, the same again on its upscoping retry. With the scope given to the provider, it works.
also="403 after trying upscoping" check 1 "insufficient_scope" "${provider[@]}" v1 "$url" client-credentials
also="scope=mcp:read resource=$url" check 0 "$whoami" env IOP_SCOPE=mcp:read "${provider[@]:1}" v1 "$url" \
  client-credentials

# --- mcp.ts's own client ---

echo
echo "# mcp.ts's client, MCP_TS_CREDENTIALS=\$work/credentials.json (fresh)"
export MCP_TS_CREDENTIALS=$work/credentials.json
check 4 "run: mcp.ts login $url" mcp.ts list "$url"
check 0 "{\"sub\":\"$CLIENT_ID\",\"scopes\":[\"mcp:read\"],\"clientId\":\"$CLIENT_ID\"}" \
  mcp.ts call "$url" whoami --grant client_credentials --client-id "$CLIENT_ID" --client-secret "$CLIENT_SECRET"
stored=$("$IOP_NODE" -e 'const { tokens = {} } = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
  console.log(Object.values(tokens)[0]?.access_token ?? "")' "$MCP_TS_CREDENTIALS" 2>/dev/null || true)
[ -z "$stored" ] || secret STORED_TOKEN "$stored"
check 0 "-rw------- " ls -l "$MCP_TS_CREDENTIALS"
check 0 "whoami" mcp.ts list "$url"
also="< 200" check 0 "\"sub\":\"$CLIENT_ID\"" mcp.ts call "$url" whoami --trace -v
check 0 "logged in to $url" mcp.ts login "$url" --grant client_credentials \
  --client-id "$CLIENT_ID" --client-secret "$CLIENT_SECRET"
# -H "Authorization: ..." replaces the stored token (mcp.ts then runs no OAuth of its own): refused, exit 4
check 4 "HTTP 401" mcp.ts call "$url" whoami -H "Authorization: Bearer $OTHER_AUDIENCE_TOKEN"
check 4 "HTTP 401" mcp.ts list "$url" -H "Authorization: Bearer $OTHER_AUDIENCE_TOKEN" --trace
check 4 '"exitCode":4' mcp.ts list "$url" -H "Authorization: Bearer $OTHER_AUDIENCE_TOKEN" --json
check 4 "HTTP 401" mcp.ts call "$url" whoami -H "Authorization: Bearer $FORGED_TOKEN"
# the challenge's error_description, whole: it quotes the typ ("dpop+jwt"), which must not end the quoted string
check 4 'typ "dpop+jwt" is not an access token' mcp.ts list "$url" -H "Authorization: Bearer $DPOP_TYP_TOKEN"
check 4 "HTTP 403 insufficient_scope" mcp.ts call "$url" whoami -H "Authorization: Bearer $WRITE_ONLY_TOKEN"
check 0 "forgot 1 token" mcp.ts logout "$url"
check 4 "run: mcp.ts login $url" mcp.ts list "$url"

# --- no token in anything printed ---

echo
stop_all
echo
echo "# no secret in what the peers printed: mcp.ts's and the SDK clients' output, the server's stderr"
leaks=()
for i in "${!secret_values[@]}"; do
  for file in printed stderr; do
    if grep -qF -- "${secret_values[$i]}" "$work/$file"; then
      leaks+=("\$${secret_names[$i]} in $([ $file = printed ] && echo "the output" || echo "the server's stderr")")
    fi
  done
done
echo "searched $(cat "$work/printed" "$work/stderr" | wc -l | tr -d ' ') lines for ${secret_names[*]/#/\$}"
if [ ${#leaks[@]} -eq 0 ]; then
  echo "-> none found: ok"
  passed=$((passed + 1))
else
  echo "-> FAILED: found $(printf '%s, ' "${leaks[@]}" | sed 's/, $//')"
  failed+=("leaks: ${leaks[*]}")
fi

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "protected: all $passed checks as expected ($RT)"
else
  echo "protected: ${#failed[@]} of $((passed + ${#failed[@]})) checks FAILED ($RT):"
  printf ' %s\n' "${failed[@]}"
  exit 1
fi
