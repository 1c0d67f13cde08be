#!/usr/bin/env bash
# DPoP (RFC 9449) at mcp.ts's resource server, `serve --http --auth-issuer … --auth-dpop`, judged with proofs that an
# independent library makes: jose (pinned below, installed once into $IOP_CACHE/dpop), through lib/dpop-proofs.mjs.
# One line per check, "ok: ..." or "FAIL: ..." (then what was answered, indented), "# ..." for what runs, a count at
# the end, exit 1 when a check fails. From the repository root:
#   interop/dpop.sh                        all three parts
#   interop/dpop.sh required nonce         some of them: required, nonce, allowed
#   MCP_RT="deno run -A" interop/dpop.sh   the runtime that runs ./mcp.ts and the fake AS (default "node")
# The AS is testdata/fake_auth_server.ts; lib/dpop-proofs.mjs (on node) makes an ES256 key pair with jose, its JWK
# thumbprint (jose.calculateJwkThumbprint), has the AS's /_mint make an access token for the server with scope mcp:read
# bound to that key (cnf.jkt), and an unbound one, and POSTs 2026-07-28 stateless tools/call requests of whoami
# (testdata/auth: the token's sub, scopes and client), each with a proof by jose's SignJWT ({jti, htm, htu, iat, ath},
# header {alg: ES256, typ: dpop+jwt, jwk}). Each part starts its own server, `mcp.ts serve testdata/auth --http
# 127.0.0.1:0 --auth-issuer AS` with:
#   required  --auth-dpop required. Its Protected Resource Metadata says dpop_bound_access_tokens_required: true
#             (curl). A valid proof: 200 and whoami's answer; a second proof (new jti): 200; tokens bound to an RS256
#             and to an Ed25519 key, with their proofs: 200; iat 4 minutes old: 200. Refused with 401 and a
#             `WWW-Authenticate: DPoP` challenge with error="invalid_dpop_proof": the first proof replayed, htu another
#             URL, htm GET, iat 10 minutes old, iat 10 minutes ahead, signed by another key (thumbprint not cnf.jkt),
#             no ath, a wrong ath, typ JWT, the private key in the jwk header, HS256 (an oct jwk). A proof for another
#             server's URL with that server's authority in Host: 4xx. A POST to URL?probe=1 with htu URL: 200.
#             Refused with 401 and a DPoP challenge: the bound token as Bearer (with and without a proof), as DPoP
#             without a proof, no token, an unbound token as Bearer or as DPoP with a valid proof
#   nonce     --auth-dpop required --auth-dpop-nonce. The PRM as above. A proof without nonce: 401, error=
#             "use_dpop_nonce" and a DPoP-Nonce header; a new proof with that nonce: 200 and whoami's answer; a nonce
#             the server never gave: 401 use_dpop_nonce
#   allowed   --auth-dpop allowed. The PRM does not say dpop_bound_access_tokens_required: true. An unbound token as
#             Bearer: 200; the bound token as DPoP with a valid proof: 200; the bound token as Bearer: 401, DPoP
# Each part ends with one more check: no token or proof that lib/dpop-proofs.mjs sent is in the server's stderr. The
# AS and each server run in a process group of their own (stopped with SIGTERM, SIGKILL after 10 s, at the end of a
# part and on Ctrl-C). A command that runs over DPOP_CHECK_TIMEOUT s (default 60) is killed and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PARTS=(required nonce allowed)
for part; do
  if [[ " ${PARTS[*]} " != *" $part "* ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- "${PARTS[@]}"
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"
PEERS=(jose@6.2.18)
iop_install "$IOP_CACHE/dpop" "${PEERS[@]}"
cd "$here/.."

RT=${MCP_RT:-node}
read -ra rt <<<"$RT"
MCP=("${rt[@]}" ./mcp.ts)
LIMIT=${DPOP_CHECK_TIMEOUT:-60}
guard=()
command -v timeout >/dev/null && guard=(timeout --foreground -k 5 "$LIMIT")
work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop-dpop.XXXXXX")
export DPOP_SECRETS_FILE=$work/secrets # lib/dpop-proofs.mjs appends every token and proof it sends
server=
url=
as=
issuer=
stdin=/dev/null
passed=0
failed=0
part=

SCRIPT=dpop.sh
# shellcheck source=interop/lib/checks.sh
. "$here/lib/checks.sh"
# shellcheck source-path=SCRIPTDIR source=lib/serve-http.sh
. "$here/lib/serve-http.sh"

# The command line as shown: mcp.ts for the runtime and ./mcp.ts, <AS> and <URL> for the AS and the server, T for the
# scratch folder.
shorten() {
  local line=$1
  line=${line//"${MCP[*]}"/mcp.ts}
  [ -z "$url" ] || line=${line//"$url"/<URL>}
  [ -z "$issuer" ] || line=${line//"$issuer"/<AS>}
  line=${line//"$IOP_NODE"/node}
  line=${line//"$work"/T}
  printf '%s' "$line"
}

# stop_as: the AS's group stopped (stop_group).
stop_as() {
  [ -n "$as" ] || return 0
  stop_group "$as" || true
  as=
}

cleanup() {
  stop_http_server || true
  stop_as
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT # Ctrl-C: the AS and the server are in process groups of their own, so only cleanup reaches them
trap 'exit 143' TERM

# --- the authorization server ---

set -m # a process group of its own
"${rt[@]}" testdata/fake_auth_server.ts >"$work/as.out" 2>"$work/as.err" </dev/null &
as=$!
set +m
for _ in $(seq 600); do # 60 s: a first run may compile or download
  issuer=$(sed -n 's|^listening \(http://[^ ]*\)$|\1|p' "$work/as.out" | head -n1)
  [ -n "$issuer" ] && break
  kill -0 "$as" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$issuer" ]; then
  echo "dpop.sh: $RT testdata/fake_auth_server.ts did not print \"listening http://...\":" >&2
  cat "$work/as.out" "$work/as.err" >&2
  exit 1
fi
echo "# the AS: $RT testdata/fake_auth_server.ts, $issuer; jose $(
  "$IOP_NODE" -p 'require(process.argv[1] + "/dpop/node_modules/jose/package.json").version' "$IOP_CACHE"
)"

# --- the parts, each against a server of its own ---

for part; do
  case $part in
    required) flags=(--auth-dpop required) ;;
    nonce) flags=(--auth-dpop required --auth-dpop-nonce) ;;
    allowed) flags=(--auth-dpop allowed) ;;
  esac
  echo
  serve="${MCP[*]} serve testdata/auth --http 127.0.0.1:0 --auth-issuer $issuer ${flags[*]}"
  url=
  if ! start_http_server "$serve" dpop.sh 2>"$work/start.err"; then
    fail "$(shorten "$serve") did not start" "$work/start.err"
    stop_http_server || true
    continue
  fi
  echo "# [$part] $(shorten "$serve"): $url"
  : >"$DPOP_SECRETS_FILE"

  run curl -sS "${url%/mcp}/.well-known/oauth-protected-resource/mcp"
  if [ "$part" = allowed ]; then
    expect 0 "out=\"resource\": ?\"$url\"" '!out="dpop_bound_access_tokens_required": ?true'
  else
    expect 0 "out=\"resource\": ?\"$url\"" 'out="dpop_bound_access_tokens_required": ?true'
  fi

  run "$IOP_NODE" interop/lib/dpop-proofs.mjs "$part" "$issuer" "$url"
  grep -E '^(ok|FAIL): |^  ' "$work/out" || true
  ok=$(grep -c '^ok: ' "$work/out" || true)
  bad=$(grep -c '^FAIL: ' "$work/out" || true)
  passed=$((passed + ok))
  failed=$((failed + bad))
  if [ "$bad" = 0 ] && { [ "$status" != 0 ] || [ "$ok" = 0 ]; }; then
    fail "$ran: exit $status, $ok checks ($took s)" "$work/err"
  fi

  # Neither the tokens nor the proofs are written by the server.
  if [ -s "$DPOP_SECRETS_FILE" ] && grep -qF -f "$DPOP_SECRETS_FILE" "$work/stderr"; then
    fail "a token or proof in the server's stderr" "$work/stderr"
  else
    check "no token or proof in the server's stderr ($(wc -l <"$work/stderr" | tr -d ' ') lines)" true
  fi
  stop_http_server || true
done

echo
echo "dpop.sh: $passed passed, $failed failed ($RT)"
[ "$failed" = 0 ]
