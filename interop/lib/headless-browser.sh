#!/bin/sh
# A stand-in for a web browser, to be $BROWSER in tests: `headless-browser.sh [ARGS...] URL` GETs the URL (its last
# argument) and follows every redirect, as a browser would for an authorization server that needs no login or consent
# and redirects straight back: the conformance suite's mock answers /authorize with a 302 to the client's redirect_uri
# (code, state, iss), so the last hop is the GET that the client's loopback listener on 127.0.0.1 waits for.
# Like xdg-open it returns at once: the fetch runs in the background with none of our stdin, stdout or stderr (so a
# client that waits for $BROWSER to exit, or reads its output to the end, is not held up, and a test harness that
# waits for its client's pipes to close is not held up by the fetch either). curl, else Node ($IOP_NODE or node).
# MCP_HEADLESS_BROWSER_LOG=FILE appends a line per visit to FILE: the URL without its query, then where the redirects
# ended (with its query: code, state, iss) and the last HTTP status, or why the fetch failed. Keep FILE private.
set -u
url=
for url; do :; done
case $url in
  http://* | https://*) ;;
  *)
    echo "headless-browser: usage: headless-browser.sh URL (http or https)" >&2
    exit 2
    ;;
esac
log=${MCP_HEADLESS_BROWSER_LOG:-/dev/null}
(
  if command -v curl >/dev/null 2>&1; then
    # Loopback never through a proxy (a browser does not send 127.0.0.1 to one); the rest as the environment says.
    noproxy=127.0.0.1,localhost,::1${NO_PROXY:+,$NO_PROXY}${no_proxy:+,$no_proxy}
    result=$(curl -sS -L --max-redirs 10 --max-time 60 --noproxy "$noproxy" -o /dev/null \
      -w '%{url_effective} %{http_code}' "$url" 2>&1) || result="failed: $result"
  else
    result=$("${IOP_NODE:-node}" -e '
      fetch(process.argv[1], { redirect: "follow", signal: AbortSignal.timeout(60000) }).then(
        async (response) => { await response.arrayBuffer(); console.log(response.url, response.status); },
        (error) => { console.log("failed:", error.cause?.message ?? error.message); });' "$url" 2>&1)
  fi
  printf '%s -> %s\n' "${url%%\?*}" "$result" >>"$log" # its query is on the client's stderr already
) </dev/null >/dev/null 2>&1 &
exit 0
