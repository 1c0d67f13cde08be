#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, which speaks only HTTP) against mcp.ts: its
# server on stdio through a bridge (server) or on its own Streamable HTTP (http), and its client by URL (client). Run
# from the repository root:
#
#   interop/conformance.sh server "<stdio server command>" [--scenario S] [--expected-failures F.yml] [suite options]
#       lib/http-to-stdio.mjs serves the command over Streamable HTTP, one child process per HTTP session.
#       Without --scenario, --suite or --requirements: --requirements 2025-11-25, the scenarios that revision of the
#       spec requires (the bridge is the 2025-11-25 transport).
#       e.g. interop/conformance.sh server "deno run -A mcp.ts serve testdata/conformance"
#   interop/conformance.sh http "<server command>" [--requirements 2025-11-25|2026-07-28] [--scenario S] [suite options]
#       No bridge: the suite talks to `<server command> --http 0 --watch` (mcp.ts's own Streamable HTTP; --watch so
#       that the trigger tools can change the lists), started afresh for each requirement set and stopped after it
#       (SIGTERM to its process group, SIGKILL after 10 s). The port is read from its "mcp: serving URL" line.
#       Without --requirements: 2025-11-25, then 2026-07-28 (its tasks-* extension scenarios included, reported but
#       not scored), then the skills extension's server scenarios (sep-2640-*, each with --force), then the totals;
#       it fails if any run fails.
#       --scenario S runs that one scenario at each such revision's wire (the suite's --spec-version); --suite or
#       --spec-version pass through as they are, for one run.
#       e.g. interop/conformance.sh http "deno run -A mcp.ts serve testdata/conformance" --requirements 2026-07-28
#   interop/conformance.sh client "<mcp.ts invocation>" [--requirements 2025-11-25|2026-07-28] [--scenario S]
#                                 [--no-auth | --auth-only] [options]
#       For each scenario the suite serves a mock server over HTTP and runs lib/conformance-client.sh with its URL,
#       which runs the mcp.ts commands a user would type against it (`info URL`, `call URL add_numbers a=2 b=3`,
#       `batch URL` for several calls, `call URL test-tool --login` behind OAuth, ...). Without --scenario: the
#       client scenarios of the revision's requirement set, those without authorization, then the auth/* ones
#       (scored, and the not-scored extension ones: client_credentials, jwt-bearer, token exchange, DPoP), one suite
#       run each (--scenario S --spec-version R --force: one at a time, where the suite's own --requirements runs all
#       at once), a line per scenario (the suite's report when it fails), totals for each revision and part; for
#       2025-11-25, then 2026-07-28 without --requirements; then (unless --auth-only) the skills extension's client
#       scenarios (sep-2640-client-*, in no set: `skills URL`, `skill URL NAME`). --no-auth, --auth-only: one part.
#       It fails when a scored scenario fails.
#       --scenario S: the suite's whole report, at each revision whose set lists S (at R with --requirements R);
#       --suite or --spec-version pass through as they are, for one run. -o DIR: the results under DIR/REVISION.
#       e.g. interop/conformance.sh client "bun ./mcp.ts" --scenario tools_call
#   interop/conformance.sh list [suite options]      all scenarios (--requirements 2025-11-25: the required ones)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
case ${1:-} in
  list) ;;
  server | client | http) [ $# -ge 2 ] || usage ;;
  *) usage ;;
esac
# shellcheck source-path=SCRIPTDIR source=setup.sh
. "$here/setup.sh"

suite() { "$IOP_NODE" "$IOP_CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js" "$@"; }
has() { # has OPTION ARGS...: is one of ARGS the option?
  local option=$1 arg
  shift
  for arg; do [[ $arg == "$option" || $arg == "$option="* ]] && return 0; done
  return 1
}

mode=$1
shift
case $mode in
  list) suite list "$@" ;;

  server)
    command=$1
    shift
    if ! has --scenario "$@" && ! has --suite "$@" && ! has --requirements "$@"; then
      set -- --requirements 2025-11-25 "$@"
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
    "$IOP_NODE" "$here/lib/http-to-stdio.mjs" "$command" >"$work/url" 2>"$work/stderr" &
    bridge=$!
    trap 'kill "$bridge" 2>/dev/null; wait "$bridge" 2>/dev/null; rm -rf "$work"' EXIT
    for _ in $(seq 100); do
      [ -s "$work/url" ] && break
      kill -0 "$bridge" 2>/dev/null || break
      sleep 0.1
    done
    url=$(head -n1 "$work/url")
    if [ -z "$url" ]; then
      echo "conformance: the HTTP bridge did not start:" >&2
      cat "$work/stderr" >&2
      exit 1
    fi
    echo "conformance: $command, served at $url by lib/http-to-stdio.mjs" >&2
    status=0
    suite server --url "$url" "$@" || status=$?
    if [ -s "$work/stderr" ]; then
      echo "conformance: the servers' stderr (last 20 lines of $(wc -l <"$work/stderr")):" >&2
      tail -n 20 "$work/stderr" >&2
    fi
    exit "$status"
    ;;

  http)
    command=$1
    shift
    revisions=() # --requirements, taken out of the arguments: one run (and one server) per revision
    args=()
    while [ $# -gt 0 ]; do
      case $1 in
        --requirements)
          [ $# -ge 2 ] || usage
          revisions+=("$2")
          shift 2
          ;;
        --requirements=*)
          revisions+=("${1#*=}")
          shift
          ;;
        *)
          args+=("$1")
          shift
          ;;
      esac
    done
    if has --suite "${args[@]}" || has --spec-version "${args[@]}"; then
      if [ ${#revisions[@]} -gt 0 ]; then
        echo "conformance: --requirements fixes the scenarios and the wire; it takes no --suite or --spec-version" >&2
        exit 2
      fi
      revisions=("") # as given
    elif [ ${#revisions[@]} -eq 0 ]; then
      revisions=(2025-11-25 2026-07-28)
      full=1 # then the extensions' scenarios that no set lists
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
    server=
    # shellcheck source-path=SCRIPTDIR source=lib/serve-http.sh
    . "$here/lib/serve-http.sh"
    stop_server() {
      stop_http_server || true
      # The suite's list-change triggers toggle generated plugin files in the fixtures folder.
      rm -f testdata/conformance/zz_generated_*.ts
    }
    trap 'stop_server; rm -rf "$work"' EXIT
    trap 'exit 130' INT # Ctrl-C: the server is in a process group of its own, so only stop_server reaches it
    trap 'exit 143' TERM
    status=0
    totals=()
    for revision in "${revisions[@]}"; do
      start_http_server "$command --http 0 --watch" conformance || exit 1
      run=("${args[@]}")
      if [ -n "$revision" ]; then
        if has --scenario "${args[@]}"; then run+=(--spec-version "$revision"); else run+=(--requirements "$revision"); fi
      fi
      echo "conformance: $command --http 0 --watch, serving $url${revision:+ (requirements $revision)}" >&2
      result=0
      suite server --url "$url" "${run[@]}" | tee "$work/out" || result=$?
      case $result in 130 | 143) exit "$result" ;; esac # the suite was interrupted (bash may not see the signal)
      [ "$result" -eq 0 ] || status=$result
      stop_server
      if [ -s "$work/stderr" ]; then
        echo "conformance: the server's stderr (last 20 lines of $(wc -l <"$work/stderr")):" >&2
        tail -n 20 "$work/stderr" >&2
      fi
      total=$(grep -E '^(Total: |Passed: )' "$work/out" | tail -n1 || true)
      totals+=("${revision:-${args[*]}}: ${total:-no total (exit $result)}")
    done
    # The skills extension's server scenarios are in no requirement set (the suite's "pending" ones): on a full
    # run, each once more with --force, at the 2026-07-28 wire, against a server of its own.
    if [ -n "${full:-}" ] && ! has --scenario "${args[@]}"; then
      for extension in sep-2640-skills-enumeration sep-2640-skills-directory sep-2640-skills-manifest; do
        start_http_server "$command --http 0 --watch" conformance || exit 1
        result=0
        suite server --url "$url" --scenario "$extension" --force | tee "$work/out" || result=$?
        case $result in 130 | 143) exit "$result" ;; esac
        [ "$result" -eq 0 ] || status=$result
        stop_server
        total=$(grep -E '^(Total: |Passed: )' "$work/out" | tail -n1 || true)
        totals+=("$extension: ${total:-no total (exit $result)}")
      done
    fi
    if [ ${#totals[@]} -gt 1 ]; then
      echo
      echo "conformance: $command --http 0 --watch"
      printf '  %s\n' "${totals[@]}"
    fi
    exit "$status"
    ;;

  client)
    export MCP_INTEROP_CLIENT=$1
    shift
    wrapper=$(printf '%q' "$here/lib/conformance-client.sh") # the suite splits --command on spaces, runs it in sh
    revisions=() # --requirements, taken out of the arguments: one loop per revision
    scenario=
    output= # -o DIR: DIR/REVISION for each revision (the suite's result folders do not name it)
    parts=(plain auth) # the scenarios without authorization, then the auth/* ones (--no-auth, --auth-only)
    args=()
    while [ $# -gt 0 ]; do
      case $1 in
        --no-auth | --auth-only)
          if [ "$1" = --no-auth ]; then parts=(plain); else parts=(auth); fi
          shift
          ;;
        --requirements | --scenario | -o | --output-dir)
          [ $# -ge 2 ] || usage
          case $1 in --scenario) scenario=$2 ;; --requirements) revisions+=("$2") ;; *) output=$2 ;; esac
          shift 2
          ;;
        --requirements=*)
          revisions+=("${1#*=}")
          shift
          ;;
        --scenario=*)
          scenario=${1#*=}
          shift
          ;;
        --output-dir=*)
          output=${1#*=}
          shift
          ;;
        *)
          args+=("$1")
          shift
          ;;
      esac
    done
    if has --suite "${args[@]}" || has --spec-version "${args[@]}"; then
      if [ ${#revisions[@]} -gt 0 ]; then
        echo "conformance: --requirements fixes the scenarios and the wire; it takes no --suite or --spec-version" >&2
        exit 2
      fi
      suite client --command "$wrapper" ${scenario:+--scenario "$scenario"} ${output:+-o "$output"} "${args[@]}"
      exit
    fi
    # The suite's own --requirements R runs R's client scenarios in parallel, the authorization ones included (most
    # of them). So: one suite run per scenario, at R's wire, over the names R's requirement set lists.
    sets="$IOP_CACHE/node_modules/@modelcontextprotocol/conformance/requirements"
    listed() { # listed R: "NAME scored" or "NAME not-scored", a line per client scenario of requirement set R
      [ -f "$sets/$1.yaml" ] || {
        echo "conformance: no requirement set $1 (there are: $(cd "$sets" && echo *.yaml | sed 's/\.yaml//g'))" >&2
        return 2
      }
      awk '/^[^ #]/ { section = $1 }
        section == "client:" && $1 == "-" { print $2, "scored" }
        section == "not_scored:" && $1 == "-" && $2 == "scenario:" { name = $3 }
        section == "not_scored:" && $1 == "leg:" && $2 == "client" { print name, "not-scored" }' "$sets/$1.yaml"
    }

    if [ -n "$scenario" ]; then # one scenario, the suite's whole report, at each revision that lists it
      if [ ${#revisions[@]} -eq 0 ]; then
        for revision in 2025-11-25 2026-07-28; do
          if listed "$revision" | awk -v s="$scenario" '$1 == s { found = 1 } END { exit !found }'; then
            revisions+=("$revision")
          fi
        done
        [ ${#revisions[@]} -gt 0 ] || revisions=("") # in neither set: at the wire the suite picks for it
      fi
      status=0
      for revision in "${revisions[@]}"; do
        echo "conformance: client $MCP_INTEROP_CLIENT, scenario $scenario${revision:+ at $revision}" >&2
        suite client --command "$wrapper" --scenario "$scenario" ${revision:+--spec-version "$revision" --force} \
          ${output:+-o "$output${revision:+/$revision}"} "${args[@]}" || status=1
      done
      exit "$status"
    fi

    [ ${#revisions[@]} -gt 0 ] || revisions=(2025-11-25 2026-07-28)
    # Of the not-scored (extension) authorization scenarios, those mcp.ts implements: the client_credentials grant
    # (SEP-1046), workload identity federation's jwt-bearer grant (SEP-1933), enterprise-managed authorization's token
    # exchange then jwt-bearer (SEP-990), and DPoP (SEP-1932), without and with server nonces. That is all of them.
    auth_extensions=" auth/client-credentials-basic auth/client-credentials-jwt auth/wif-jwt-bearer"
    auth_extensions+=" auth/enterprise-managed-authorization auth/dpop auth/dpop-nonce "
    work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-interop.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    status=0
    totals=()
    for revision in "${revisions[@]}"; do
      lines=$(listed "$revision") || exit 2
      for part in "${parts[@]}"; do
        if [ "$part" = auth ]; then title=authorization; else title="without authorization"; fi
        echo "conformance: client $MCP_INTEROP_CLIENT, requirements $revision, $title" >&2
        ran=0 ok=0 passed=0 failed=0 warnings=0 unscored=() skipped=()
        while read -r name scoring; do
          if [[ $name == auth/* ]]; then [ "$part" = auth ] || continue; else [ "$part" = plain ] || continue; fi
          if [ "$part" = auth ] && [ "$scoring" != scored ] && [[ $auth_extensions != *" $name "* ]]; then
            skipped+=("$name")
            continue
          fi
          result=0
          # --force: the suite skips an extension scenario at a --spec-version unless forced (its --requirements does)
          suite client --command "$wrapper" --scenario "$name" --spec-version "$revision" --force \
            ${output:+-o "$output/$revision"} "${args[@]}" >"$work/out" 2>&1 </dev/null || result=$?
          case $result in 130 | 143) exit "$result" ;; esac # the suite was interrupted
          # "Passed: 3/4, 1 failed, 0 warnings": SUCCESS/(SUCCESS+FAILURE), then FAILURE and WARNING checks
          read -r p f w < <(sed -n 's|^Passed: \([0-9]*\)/[0-9]*, \([0-9]*\) failed, \([0-9]*\) warnings$|\1 \2 \3|p' \
            "$work/out" | tail -n1) || true # none when the suite itself failed
          ran=$((ran + 1)) passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0})) warnings=$((warnings + ${w:-0}))
          why=$(grep -oE 'CLIENT TIMED OUT|CLIENT EXITED WITH ERROR \(code -?[0-9]+\)' "$work/out" | head -n1 || true)
          [ "${p:-0}${f:-0}" != 00 ] || why="${why:+$why, }no check judged" # what the scenario checks never came
          note=${p:+: $p passed, $f failed, $w warnings}${why:+, $why}
          [ "$scoring" = scored ] || { note="$note (not scored)" && unscored+=("$name"); }
          if [ "$result" -eq 0 ]; then
            ok=$((ok + 1))
            echo "  ✓ $name$note"
          else
            echo "  ✗ $name${note:- (exit $result)}"
            sed 's/^/      /' "$work/out"
            [ "$scoring" != scored ] || status=1
          fi
        done <<<"$lines"
        [ ${#skipped[@]} -eq 0 ] || echo "  - not run (extensions mcp.ts does not implement): ${skipped[*]}"
        total="$ok/$ran scenarios passed${unscored[0]:+ (${#unscored[@]} not scored)}"
        totals+=("$revision $title: $total, checks: $passed passed, $failed failed, $warnings warnings")
        echo "  ${totals[-1]}"
      done
    done
    # The skills extension's client scenarios are in no requirement set: each once, at the 2026-07-28 wire.
    if [[ " ${parts[*]} " == *" plain "* ]]; then
      echo "conformance: client $MCP_INTEROP_CLIENT, the skills extension (sep-2640, not scored)" >&2
      ran=0 ok=0
      for name in sep-2640-client-no-prefetch sep-2640-client-verify-digest sep-2640-client-verify-size \
        sep-2640-client-verify-frontmatter; do
        result=0
        suite client --command "$wrapper" --scenario "$name" --spec-version 2026-07-28 --force "${args[@]}" \
          >"$work/out" 2>&1 </dev/null || result=$?
        case $result in 130 | 143) exit "$result" ;; esac
        ran=$((ran + 1))
        summary=$(grep -E '^Passed: ' "$work/out" | tail -n1 || true)
        if [ "$result" -eq 0 ]; then
          ok=$((ok + 1))
          echo "  ✓ $name: ${summary:-no summary}"
        else
          echo "  ✗ $name: ${summary:-exit $result}"
          sed 's/^/      /' "$work/out"
        fi
      done
      totals+=("skills extension: $ok/$ran scenarios passed (not scored)")
      echo "  ${totals[-1]}"
    fi
    if [ ${#totals[@]} -gt 1 ]; then
      echo
      echo "conformance: client $MCP_INTEROP_CLIENT"
      printf '  %s\n' "${totals[@]}"
    fi
    exit "$status"
    ;;
esac
