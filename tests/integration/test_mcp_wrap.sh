#!/usr/bin/env bash
# `tollgate wrap` driven by the official TypeScript SDK client around the
# npm package @modelcontextprotocol/server-everything and around a server of
# our own that fetches URLs: tool lists, hidden and denied tools, the rate
# limit, the audit of every tools/call, malformed lines, stdin EOF, egress.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

AUDIT=$TEST_TMP/audit.db
wrap=("$TOLLGATE" wrap --audit "$AUDIT" --workdir "$MCP_DIR")
# step NAME: that step's JSON line from the client's output in $out.

# ---- CLI misuse ----------------------------------------------------------------
set +e
err=$("$TOLLGATE" wrap --rate fast -- true 2>&1); rc=$?
set -e
expect_eq "--rate fast exits 125" "$rc" 125
expect_match "--rate fast: one line" "$err" '^tollgate: wrap: --rate: .fast. is not N/s'
set +e
err=$("$TOLLGATE" wrap --tools-allow echo 2>&1); rc=$?
set -e
expect_eq "no server command exits 125" "$rc" 125

# ---- the SDK client around server-everything ------------------------------------
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs everything toggle-simulated-logging -- \
	"${wrap[@]}" --tools-allow echo --tools-allow 'get-*' --tools-deny get-env -- \
	"${EVERYTHING[@]}" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "the SDK client session ends cleanly" "$rc" 0
expect_match "handshake names the wrapped server" "$(step initialize)" '"server":"mcp-servers/everything"'
tools=$(jq_py "$(step tools)" '",".join(d["tools"])')
expect_match "tools/list keeps echo and get-*" "$tools" '^echo,get-'
expect_match "tools/list keeps get-sum" "$tools" 'get-sum'
if [[ $tools == *get-env* || $tools == *toggle* || $tools == *trigger* ]]; then
	fail "tools/list still shows hidden tools: $tools"
else
	checks=$((checks + 1)); pass "tools/list hides get-env (denied) and tools outside the allow list"
fi
expect_eq "echo relayed" "$(jq_py "$(step echo)" 'd["text"]')" "Echo: hello through the gate"
expect_eq "get-sum relayed" "$(jq_py "$(step sum)" 'd["text"]')" "The sum of 2 and 3 is 5."
expect_eq "a tool outside the allow list: JSON-RPC -32602" "$(jq_py "$(step hidden)" 'd.get("rpcError")')" "-32602"
expect_eq "ping relayed" "$(jq_py "$(step ping)" 'd["ok"]')" "{}"

set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs everything get-env -- \
	"${wrap[@]}" --tools-deny get-env -- "${EVERYTHING[@]}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "second session ends cleanly" "$rc" 0
expect_eq "a denied tool: JSON-RPC -32602" "$(jq_py "$(step hidden)" 'd.get("rpcError")')" "-32602"
expect_match "the denial names the tool" "$(jq_py "$(step hidden)" 'd.get("message")')" 'Unknown tool: get-env'

# The audit: one row per tools/call, the arguments only as a hash.
rows=$(sqlite3 "$AUDIT" "select decision||'|'||ifnull(reason,'')||'|'||detail from events where kind='mcp.call' order by id")
echo_row=$(grep '"tool":"echo"' <<<"$rows" | head -1)
expect_match "echo audited as allowed, not an error" "$echo_row" '^allow\|\|.*"is_error":false'
expect_match "the audit row has a duration" "$echo_row" '"duration_ms":[0-9.]+'
want_hash=$(python3 -c 'import hashlib,json; print(hashlib.sha256(json.dumps({"message":"hello through the gate"},sort_keys=True,separators=(",",":")).encode()).hexdigest())')
expect_match "the audit has SHA-256 of the canonical arguments" "$echo_row" "\"args_sha256\":\"$want_hash\""
expect_match "the denied call is audited" "$(grep '"tool":"get-env"' <<<"$rows" | head -1)" '^deny\|tool not allowed\|'
expect_match "the hidden call is audited" "$(grep '"tool":"toggle-simulated-logging"' <<<"$rows" | head -1)" '^deny\|'
sqlite3 "$AUDIT" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
if grep -qa "hello through the gate" "$AUDIT"* 2>/dev/null; then
	fail "the arguments of a call reached the audit database"
else
	checks=$((checks + 1)); pass "no argument text in the audit database"
fi

# ---- the rate limit ----------------------------------------------------------------
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs rate -- \
	"${wrap[@]}" --rate 1/m -- "${EVERYTHING[@]}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "rate session ends cleanly" "$rc" 0
expect_eq "first call within the rate" "$(jq_py "$(step first)" 'd["text"]')" "Echo: one"
expect_eq "second call over the rate: isError" "$(jq_py "$(step second)" 'd.get("isError")')" "True"
expect_match "over the rate: says so" "$(jq_py "$(step second)" 'd.get("text")')" 'rate limit'
expect_match "over-rate call audited" "$(sqlite3 "$AUDIT" "select reason from events where kind='mcp.call' and reason='rate limit'")" 'rate limit'

# ---- raw lines: malformed input, invalid requests, oversize, stdin EOF ---------------
set +e
raw=$(cd "$MCP_DIR" && timeout 120 python3 raw_lines.py "${wrap[@]}" -- "${EVERYTHING[@]}" 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "raw client ran" "$rc" 0
expect_match "initialize answered" "$raw" '"id": 1, "error": null, "has_result": true'
expect_match "a line that is not JSON: -32700" "$raw" '"id": null, "error": -32700'
expect_match "a message without method or result: -32600 with its id" "$raw" '"id": 7, "error": -32600'
expect_match "jsonrpc 1.0: -32600 with its id" "$raw" '"id": 8, "error": -32600'
expect_eq "a batch and a line over 4 MiB: -32600 each" "$(grep -c '"id": null, "error": -32600' <<<"$raw")" 2
expect_match "the session goes on after bad lines (ping)" "$raw" '"id": 10, "error": null, "has_result": true'
expect_match "stdin EOF: tollgate exits 0" "$raw" '\{"exit": 0\}'
if grep -q '"not_json": "' <<<"$raw"; then fail "something that is not JSON reached stdout"; else
	checks=$((checks + 1)); pass "nothing but JSON-RPC on stdout"; fi

# ---- egress of a wrapped server: allowed and refused ---------------------------------
mcp_origin
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs fetch "http://origin.test:$port/" "http://denied.test:$port/" -- \
	"${wrap[@]}" --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
	--resolve denied.test:127.0.0.1 --allow-cidr 127.0.0.0/8 -- node /work/fetch_server.mjs \
	2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "fetch session ends cleanly" "$rc" 0
expect_match "our server lists fetch_url" "$(step tools)" '"fetch_url"'
allowed=$(grep '"step":"fetch"' <<<"$out" | grep origin.test | head -1)
refused=$(grep '"step":"fetch"' <<<"$out" | grep denied.test | head -1)
expect_eq "an allowed fetch succeeds" "$(jq_py "$allowed" 'd["text"]')" "200 hello-origin"
expect_eq "a refused fetch is a tool error" "$(jq_py "$refused" 'd["isError"]')" "True"
expect_match "the refusal is a 403 from the gate" "$(jq_py "$refused" 'd["text"]')" '^403'
expect_match "the refusal is in the audit log" \
	"$(sqlite3 "$AUDIT" "select decision from events where host='denied.test' and decision='deny' limit 1")" '^deny$'
expect_match "the fetch calls are audited" \
	"$(sqlite3 "$AUDIT" "select count(*) from events where kind='mcp.call' and detail like '%\"tool\":\"fetch_url\"%'")" '^2$'

# ---- the wrapped server's approvals asked of the user by MCP elicitation -------------
set +e
out=$(cd "$MCP_DIR" && timeout 120 node client.mjs wrap-elicit "http://origin.test:$port/" -- \
	"${wrap[@]}" --ask "origin.test:$port" --ask-timeout 60s --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.0/8 -- node /work/fetch_server.mjs 2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "wrap elicitation session ends cleanly" "$rc" 0
expect_match "wrap: the held fetch is asked of the user" "$(jq_py "$(step wrap-elicit-once)" 'd["message"]')" "origin.test port $port"
expect_eq "wrap: answered once, the fetch succeeds" "$(jq_py "$(step wrap-elicit-once)" 'd["text"]')" "200 hello-origin"
expect_eq "wrap: asked again for the next connection" "$(jq_py "$(step wrap-elicit-deny)" 'd["asked"]')" "1"
expect_match "wrap: answered deny, the gate refuses it" "$(jq_py "$(step wrap-elicit-deny)" 'd["text"]')" '^403'

# ---- Node's own fetch (ignores proxy variables): the transparent listeners -----------
# They listen on port 80 of the hub, so the origin must be on port 80: an
# address of the loopback range no other test uses.
origin80=127.0.0.77
if python3 -c "import socket,sys; s=socket.socket(); s.bind(('$origin80', 80))" 2>/dev/null; then
	python3 -m http.server 80 --bind "$origin80" --directory "$TEST_TMP/www" >/dev/null 2>&1 &
	origin80_pid=$!
	defer "kill $origin80_pid"
	wait_for 10 curl -sf "http://$origin80/" || fail "the port 80 origin did not start"
	set +e
	out=$(cd "$MCP_DIR" && timeout 120 node client.mjs fetch "http://origin.test/" "http://denied.test/" -- \
		"${wrap[@]}" --env FETCH_MODE=native --allow origin.test --resolve "origin.test:$origin80" \
		--resolve "denied.test:$origin80" --allow-cidr 127.0.0.0/8 -- node /work/fetch_server.mjs \
		2>>"$TEST_TMP/err"); rc=$?
	set -e
	expect_eq "native fetch session ends cleanly" "$rc" 0
	allowed=$(grep '"step":"fetch"' <<<"$out" | grep origin.test | head -1)
	refused=$(grep '"step":"fetch"' <<<"$out" | grep denied.test | head -1)
	expect_eq "Node's fetch to an allowed name succeeds (transparent)" "$(jq_py "$allowed" 'd["text"]')" "200 hello-origin"
	expect_eq "Node's fetch to another name fails" "$(jq_py "$refused" 'd["isError"]')" "True"
	expect_match "the refused name is in the audit log" \
		"$(sqlite3 "$AUDIT" "select count(*) from events where host='denied.test' and decision='deny'")" '^[2-9]'
else
	echo "note: $origin80:80 is taken; Node's native fetch through the transparent listeners not tested"
fi

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)); then echo "--- stderr of the sessions:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
