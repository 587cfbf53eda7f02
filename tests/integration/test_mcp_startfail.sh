#!/usr/bin/env bash
# When `tollgate wrap` or `tollgate serve` cannot start (a bad flag value, a
# bad policy, a server that cannot be executed in its sandbox), the MCP
# client still hears why: the official SDK client's connect fails with an
# initialize error whose message is tollgate's one-line reason, though the
# client hides stderr; the exit status is the one stderr's line goes with.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mcp/setup.sh"

mkdir -p "$TOLLGATE_HOME"
printf '{"version": 1, "default": "deny", "allow": [' >"$TEST_TMP/broken.json"

# client_sees NAME CMD...: what the SDK client's connect ended with, in $seen.
client_sees() {
	local name=$1; shift
	seen=$(cd "$MCP_DIR" && timeout 60 node startfail.mjs -- "$@" 2>"$TEST_TMP/$name.err") ||
		fail "$name: the client did not finish: $(cat "$TEST_TMP/$name.err")"
}
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2]))' "$1" "$2"; }
# raw_status NAME CMD...: the exit status with an initialize request on a
# pipe, and the answer line, in $status and $answer.
raw_status() {
	local name=$1; shift
	set +e
	answer=$( (printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'; sleep 5) |
		timeout 30 "$@" 2>"$TEST_TMP/$name.stderr")
	status=$?
	set -e
}

# --- wrap --------------------------------------------------------------------------
client_sees wrap-flag "$TOLLGATE" wrap --rate fast -- true
expect_eq "wrap, a bad flag value: the client's connect fails with the reason" \
	"$(field "$seen" error)" "MCP error -32603: tollgate: wrap: --rate: 'fast' is not N/s, N/m or N/h above 0"
raw_status wrap-flag "$TOLLGATE" wrap --rate fast -- true
expect_eq "wrap, a bad flag value: exit status 125 as before" "$status" "125"
expect_eq "wrap, a bad flag value: stderr has the same line" "$(cat "$TEST_TMP/wrap-flag.stderr")" \
	"tollgate: wrap: --rate: 'fast' is not N/s, N/m or N/h above 0"
expect_eq "wrap, a bad flag value: the answer is to the initialize (id 1)" \
	"$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["id"], d["error"]["code"])' "$answer")" "1 -32603"

client_sees wrap-policy "$TOLLGATE" wrap --policy "$TEST_TMP/broken.json" -- true
expect_match "wrap, a policy that does not parse: the client sees the reason" \
	"$(field "$seen" error)" "^MCP error -32603: tollgate: wrap: .*broken\.json"

client_sees wrap-exec "$TOLLGATE" wrap --audit "$TEST_TMP/a.db" -- /nonexistent/server
expect_eq "wrap, a server its sandbox cannot execute: the client sees the reason" \
	"$(field "$seen" error)" "MCP error -32603: tollgate: wrap: /nonexistent/server: No such file or directory"
raw_status wrap-exec "$TOLLGATE" wrap --audit "$TEST_TMP/a.db" -- /nonexistent/server
expect_eq "wrap, a server that cannot be executed: exit status 127 as before" "$status" "127"
expect_match "wrap, a server that cannot be executed: answered once" "$(wc -l <<<"$answer")" "^1$"

# --- serve -------------------------------------------------------------------------
client_sees serve-flag "$TOLLGATE" serve --timeout 0
expect_eq "serve, a bad flag value: the client sees the reason" \
	"$(field "$seen" error)" "MCP error -32603: tollgate: serve: --timeout: '0' is not a duration above 0"
raw_status serve-flag "$TOLLGATE" serve --timeout 0
expect_eq "serve, a bad flag value: exit status 125 as before" "$status" "125"

client_sees serve-policy "$TOLLGATE" serve --policy "$TEST_TMP/broken.json"
expect_match "serve, a policy that does not parse: the client sees the reason" \
	"$(field "$seen" error)" "^MCP error -32603: tollgate: serve: .*broken\.json"

# A server that starts is unaffected: the client connects.
client_sees serve-ok "$TOLLGATE" serve --audit "$TEST_TMP/s.db" --no-network
expect_eq "serve that starts: the client connects" "$(field "$seen" ok)" "True"

# Nobody to answer (stdin /dev/null, as under a terminal or a script): the
# failure is immediate, with the line on stderr only.
start=$(date +%s)
set +e; out=$("$TOLLGATE" wrap --rate fast -- true </dev/null 2>/dev/null); rc=$?; set -e
expect_eq "stdin /dev/null: nothing on stdout" "$out" ""
expect_eq "stdin /dev/null: exit 125" "$rc" "125"
[[ $(($(date +%s) - start)) -lt 5 ]] && { checks=$((checks + 1)); pass "stdin /dev/null: no wait"; } ||
	fail "stdin /dev/null: waited for a client"
finish
