#!/usr/bin/env bash
# The official MCP conformance harness (@modelcontextprotocol/conformance,
# pinned in mcp/package.json) runs its active server suite twice: against
# the reference server-everything serving Streamable HTTP itself, and
# against `tollgate wrap --listen` around the same server on stdio. Every
# scenario that passes directly must pass through wrap, and
# dns-rebinding-protection must pass fully through wrap (the reference
# server alone fails half of it). serve's run of the harness, with its
# baseline, is in test_serve_http.sh.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

CONF=(node node_modules/@modelcontextprotocol/conformance/dist/index.js server)
# scenario NAME OUTPUT: that scenario's line ("✓ NAME: 1 passed, 0 failed").
scenario() { grep -E "^. $1: " <<<"$2" | head -1; }
passed_all() { grep -E '^. [a-z0-9-]+: [1-9][0-9]* passed, 0 failed' <<<"$1" | sed -E 's/^. ([a-z0-9-]+):.*/\1/'; }

# ---- the reference server on its own ----------------------------------------------------
dport=$(free_port)
(cd "$MCP_DIR" && PORT=$dport exec node node_modules/@modelcontextprotocol/server-everything/dist/index.js streamableHttp) \
	>"$TEST_TMP/direct.log" 2>&1 &
defer "kill $! 2>/dev/null"
wait_for 20 curl -s -o /dev/null "http://127.0.0.1:$dport/mcp" ||
	fail "server-everything (HTTP) did not start: $(tail -3 "$TEST_TMP/direct.log")"
set +e
direct=$(cd "$MCP_DIR" && timeout 200 "${CONF[@]}" --url "http://localhost:$dport/mcp" 2>&1)
set -e
direct_ok=$(passed_all "$direct")
expect_match "the harness ran against the reference server" "$(scenario server-initialize "$direct")" 'passed'
expect_match "directly: dns-rebinding-protection fails in part (the reference server alone)" \
	"$(scenario dns-rebinding-protection "$direct")" '[1-9][0-9]* failed'

# ---- through wrap --listen ------------------------------------------------------------------
TOKEN_FILE=$TEST_TMP/token
hport=$(free_port)
"$TOLLGATE" wrap --listen "127.0.0.1:$hport" --token-file "$TOKEN_FILE" --audit "$TEST_TMP/audit.db" \
	--workdir "$MCP_DIR" -- "${EVERYTHING[@]}" >"$TEST_TMP/wrap.out" 2>"$TEST_TMP/wrap.err" </dev/null &
wrap_pid=$!
defer "kill $wrap_pid 2>/dev/null; wait $wrap_pid 2>/dev/null"
wait_for 20 curl -s -o /dev/null "http://127.0.0.1:$hport/mcp" || fail "wrap --listen did not come up: $(tail -3 "$TEST_TMP/wrap.err")"
# The harness sends no token: a loopback relay adds it (as for serve).
pport=$(free_port)
node "$MCP_DIR/bearer_proxy.mjs" "$pport" "$hport" "$TOKEN_FILE" >"$TEST_TMP/proxy.out" 2>&1 &
defer "kill $! 2>/dev/null"
wait_for 10 grep -q ready "$TEST_TMP/proxy.out" || fail "the token relay did not start"
set +e
wrapped=$(cd "$MCP_DIR" && timeout 240 "${CONF[@]}" --url "http://localhost:$pport/mcp" 2>&1)
set -e
for sc in $direct_ok; do
	expect_match "through wrap: $sc passes as it does directly" "$(scenario "$sc" "$wrapped")" '[1-9][0-9]* passed, 0 failed'
done
expect_match "through wrap: dns-rebinding-protection passes fully" \
	"$(scenario dns-rebinding-protection "$wrapped")" '[1-9][0-9]* passed, 0 failed'
n=$(wc -w <<<"$direct_ok")
checks=$((checks + 1))
if ((n >= 8)); then pass "the direct run passed $n scenarios (at least 8)"; else fail "the direct run passed only $n scenarios"; fi
echo "conformance: $n scenarios pass directly; through wrap: $(passed_all "$wrapped" | wc -w)"
((failures == 0)) || { echo "--- direct:"; grep -E '^. ' <<<"$direct"; echo "--- through wrap:"; grep -E '^. ' <<<"$wrapped"; tail -20 "$TEST_TMP/wrap.err"; } >&2

if grep -q Sanitizer "$TEST_TMP/wrap.err" 2>/dev/null; then fail "a sanitizer reported an error"; fi
finish
