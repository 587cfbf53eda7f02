#!/usr/bin/env bash
# `tollgate serve --listen`: MCP over Streamable HTTP. The official SDK
# client (StreamableHTTPClientTransport) runs serve's checks (tools with
# schemas, execute_code to a loopback origin allowed and refused, progress,
# an approval answered by elicitation); the official conformance harness
# runs its active server suite (scenarios that do not apply are listed in
# mcp/conformance-baseline.yml); curl shows the refusals (token, Origin,
# Host, session id, body size) and resumption with Last-Event-ID; then the
# same server in one process (TOLLGATE_PRIVSEP=0).
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

AUDIT=$TEST_TMP/audit.db
TOKEN_FILE=$TEST_TMP/token
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }

mcp_origin

# ---- the operator's mistakes, refused before anything listens ------------------------
hport=$(free_port)
set +e
err=$("$TOLLGATE" serve --listen "0.0.0.0:$hport" --token-file "$TOKEN_FILE" --no-network 2>&1 </dev/null); rc=$?
set -e
expect_eq "a non-loopback --listen without --listen-remote exits 125" "$rc" 125
expect_match "and says why" "$err" "not a loopback address; add --listen-remote"
[[ ! -e $TOKEN_FILE ]] && { checks=$((checks + 1)); pass "and makes no token"; } || fail "a refused start made a token"
printf 'loose-token-0123456789\n' >"$TEST_TMP/loose" && chmod 0644 "$TEST_TMP/loose"
set +e
err=$("$TOLLGATE" serve --listen "127.0.0.1:$hport" --token-file "$TEST_TMP/loose" --no-network 2>&1 </dev/null); rc=$?
set -e
expect_eq "a token file others may read exits 125" "$rc" 125
expect_match "and says chmod 600" "$err" "chmod 600"
if grep -q loose-token <<<"$err"; then fail "the refusal printed the token"; else
	checks=$((checks + 1)); pass "the refusal does not print the token"; fi

# ---- the server under the default split (started as root) -----------------------------
"$TOLLGATE" serve --listen "127.0.0.1:$hport" --token-file "$TOKEN_FILE" --audit "$AUDIT" \
	--allow "origin.test:$port" --ask "held.test:$port" --ask-timeout 60s --max-http-sessions 64 \
	--resolve origin.test:127.0.0.1 --resolve denied.test:127.0.0.1 --resolve held.test:127.0.0.1 \
	--allow-cidr 127.0.0.0/8 >"$TEST_TMP/serve.out" 2>"$TEST_TMP/err" </dev/null &
serve_pid=$!
defer "kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null"
URL=http://127.0.0.1:$hport/mcp
wait_for 20 curl -s -o /dev/null "$URL" || fail "serve --listen did not come up: $(tail -3 "$TEST_TMP/err")"
TOKEN=$(cat "$TOKEN_FILE")
expect_eq "the token file was made 0600" "$(stat -c %a "$TOKEN_FILE")" "600"
expect_match "the token is 64 hex digits" "$TOKEN" '^[0-9a-f]{64}$'
expect_match "stderr names the token file" "$(cat "$TEST_TMP/err")" "bearer token for --listen is in $TOKEN_FILE"
if grep -qF "$TOKEN" "$TEST_TMP/err" "$TEST_TMP/serve.out"; then fail "the token reached stderr or stdout"; else
	checks=$((checks + 1)); pass "the token reaches neither stderr nor stdout"; fi
expect_eq "nothing on stdout" "$(wc -c <"$TEST_TMP/serve.out")" "0"
if pgrep -f "serve --listen 127.0.0.1:$hport" | xargs -r ps -o user= -p | grep -qv root; then
	checks=$((checks + 1)); pass "split: the gate that listens runs as its own user"
fi

# ---- the official SDK client over Streamable HTTP ----------------------------------
set +e
out=$(cd "$MCP_DIR" && MCP_URL=$URL MCP_TOKEN=$TOKEN timeout 120 node client.mjs http-elicit \
	"http://origin.test:$port/" "http://denied.test:$port/" "origin.test:$port" "http://held.test:$port/" -- \
	2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "SDK client over HTTP: the session ends cleanly" "$rc" 0
expect_eq "initialize: serverInfo.name" "$(py "$(step initialize)" 'd["server"]')" "tollgate"
expect_match "an Mcp-Session-Id was issued" "$(py "$(step session)" 'd["id"]')" '^[0-9a-f]{32}$'
expect_eq "the negotiated revision" "$(py "$(step session)" 'd["version"]')" "2025-11-25"
expect_match "tools/list has execute_code" "$(py "$(step tools)" 'd["tools"]')" "'execute_code'"
expect_eq "every tool has an object input schema" "$(py "$(step tools)" 'd["schemas"]')" "True"
expect_eq "allowed domain: the fetch succeeds" "$(py "$(step allowed)" 'd["structured"]["stdout"].strip()')" "200"
expect_eq "other domain: the gate answers 403" "$(py "$(step refused)" 'd["structured"]["stdout"].strip()')" "403"
expect_eq "other domain: reported as refused egress" "$(py "$(step refused)" 'd["structured"]["refused_egress"][0]["host"]')" "denied.test"
expect_eq "unknown tool: -32602" "$(py "$(step unknown)" 'd["rpcError"]')" "-32602"
expect_eq "a long call finishes" "$(py "$(step progress)" 'd["text"].strip()')" "done"
expect_match "a long call sends progress notifications (on its POST stream)" "$(py "$(step progress)" 'd["progress"]')" '^[1-9]'
expect_eq "elicitation over HTTP: asked once" "$(py "$(step elicit-once)" 'd["asked"]')" "1"
expect_match "elicitation: the message names the host and port" "$(py "$(step elicit-once)" 'd["message"]')" "held.test port $port"
expect_eq "elicitation answered once: the request goes through" "$(py "$(step elicit-once)" 'd["stdout"]')" "200"
expect_eq "progress while the approval waits" "$(py "$(step elicit-once)" 'd["waitingProgress"]')" "True"
expect_eq "elicitation answered deny: the gate refuses it" "$(py "$(step elicit-deny)" 'd["stdout"]')" "403"
expect_match "the event bus reaches the client as notifications/message" "$(py "$(step bus-logs)" 'd["logs"]')" '^[1-9]'
sid=$(py "$(step session)" 'd["id"]')
expect_eq "the client's DELETE ended the session" "$(py "$(step terminated)" 'd["id"]')" "None"
if command -v sqlite3 >/dev/null; then
	expect_eq "the approval rows name the MCP client that decided" \
		"$(sqlite3 "$AUDIT" "select group_concat(json_extract(detail, '\$.by') || ' ' || json_extract(detail, '\$.client') || ' ' || decision, ',') from events where kind = 'approval' and host = 'held.test' and json_extract(detail, '\$.by') is not null")" \
		'mcp tollgate-test allow,mcp tollgate-test deny'
fi

# ---- refusals, with curl -------------------------------------------------------------
J=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
A=(-H "Authorization: Bearer $TOKEN")
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
PING='{"jsonrpc":"2.0","id":2,"method":"ping"}'
code() { curl -s -o "$TEST_TMP/body" -w '%{http_code}' "$@"; }
expect_eq "no token: 401" "$(code -X POST "$URL" "${J[@]}" -d "$INIT")" "401"
expect_eq "a wrong token: 401" "$(code -X POST "$URL" "${J[@]}" -H "Authorization: Bearer ${TOKEN%?}0x" -d "$INIT")" "401"
expect_eq "the token under another scheme: 401" "$(code -X POST "$URL" "${J[@]}" -H "Authorization: Basic $TOKEN" -d "$INIT")" "401"
expect_eq "a foreign Origin: 403" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H 'Origin: http://evil.example' -d "$INIT")" "403"
expect_eq "Origin null: 403" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H 'Origin: null' -d "$INIT")" "403"
expect_eq "a rebinding Host: 403" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H "Host: evil.example:$hport" -d "$INIT")" "403"
expect_eq "the Host on another port: 403" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H "Host: localhost:1" -d "$INIT")" "403"
expect_eq "the server's own Origin (localhost): accepted" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H "Origin: http://localhost:$hport" -d "$INIT")" "200"
expect_eq "no session id: 400" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -d "$PING")" "400"
expect_eq "an unknown session id: 404" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H "Mcp-Session-Id: 0123456789abcdef0123456789abcdef" -d "$PING")" "404"
expect_eq "the ended session's id: 404" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H "Mcp-Session-Id: $sid" -d "$PING")" "404"
expect_eq "a GET without a session: 400" "$(code "$URL" "${A[@]}" -H 'Accept: text/event-stream')" "400"
expect_eq "a DELETE of an unknown session: 404" "$(code -X DELETE "$URL" "${A[@]}" -H "Mcp-Session-Id: 0123456789abcdef0123456789abcdef")" "404"
head -c $((4 * 1024 * 1024 + 16)) /dev/zero | tr '\0' ' ' >"$TEST_TMP/big.json"
expect_eq "a body over 4 MiB: 413" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" --data-binary @"$TEST_TMP/big.json")" "413"
expect_eq "not JSON: 400" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -d '{nope')" "400"
expect_eq "a batch: 400" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -d "[$INIT]")" "400"
expect_eq "Accept without text/event-stream: 406" "$(code -X POST "$URL" -H 'Content-Type: application/json' -H 'Accept: application/json' "${A[@]}" -d "$INIT")" "406"
expect_eq "an unsupported MCP-Protocol-Version: 400" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H 'MCP-Protocol-Version: 1999-01-01' -d "$INIT")" "400"
expect_eq "PUT: 405" "$(code -X PUT "$URL" "${A[@]}" -d x)" "405"
expect_eq "another path: 404" "$(code -X POST "http://127.0.0.1:$hport/other" "${J[@]}" "${A[@]}" -d "$INIT")" "404"

# ---- resumption: a POST stream cut by the client, resumed by GET with Last-Event-ID ----
curl -s -D "$TEST_TMP/h" -o /dev/null -X POST "$URL" "${J[@]}" "${A[@]}" -d "$INIT"
rsid=$(grep -i '^mcp-session-id:' "$TEST_TMP/h" | cut -d' ' -f2 | tr -d '\r')
S=(-H "Mcp-Session-Id: $rsid" -H 'MCP-Protocol-Version: 2025-11-25')
curl -s -o /dev/null -X POST "$URL" "${J[@]}" "${A[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
CALL='{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"sh","code":"sleep 1; echo resumed"}}}'
curl -s -m 0.5 -o "$TEST_TMP/first" -X POST "$URL" "${J[@]}" "${A[@]}" "${S[@]}" -d "$CALL" || true
last=$(sed -n 's/^id: //p' "$TEST_TMP/first" | tail -1 | tr -d '\r')
expect_match "the POST stream starts with a priming event id" "$last" '^[0-9]+-0$'
expect_match "and a retry" "$(cat "$TEST_TMP/first")" 'retry: [0-9]+'
sleep 1.5
curl -s -m 10 -o "$TEST_TMP/resumed" "$URL" "${A[@]}" "${S[@]}" -H 'Accept: text/event-stream' -H "Last-Event-ID: $last" || true
expect_match "GET with Last-Event-ID replays the call's result" "$(grep '^data: ' "$TEST_TMP/resumed" | grep '"id":7')" 'resumed'
expect_eq "a Last-Event-ID of no stream of the session: 400" "$(code "$URL" "${A[@]}" "${S[@]}" -H 'Accept: text/event-stream' -H 'Last-Event-ID: 999-1')" "400"
expect_eq "DELETE ends the session: 200" "$(code -X DELETE "$URL" "${A[@]}" "${S[@]}")" "200"
expect_eq "and its id is unknown after: 404" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" "${S[@]}" -d "$PING")" "404"

# ---- the official conformance harness -----------------------------------------------
# It sends no token: a loopback relay adds it (mcp/bearer_proxy.mjs). It runs
# its active server suite; mcp/conformance-baseline.yml lists the scenarios
# that call the harness's own test tools, resources and prompts, which serve
# does not have. Those that apply and must pass: server-initialize,
# logging-set-level, ping, tools-list, resources-list, prompts-list,
# server-sse-multiple-streams, dns-rebinding-protection.
pport=$(free_port)
node "$MCP_DIR/bearer_proxy.mjs" "$pport" "$hport" "$TOKEN_FILE" >"$TEST_TMP/proxy.out" 2>&1 &
defer "kill $! 2>/dev/null"
wait_for 10 grep -q ready "$TEST_TMP/proxy.out" || fail "the token relay did not start"
set +e
conf=$(cd "$MCP_DIR" && timeout 120 node node_modules/@modelcontextprotocol/conformance/dist/index.js server \
	--url "http://localhost:$pport/mcp" --expected-failures conformance-baseline.yml 2>&1); rc=$?
set -e
expect_eq "conformance: the active server suite passes but for the baseline" "$rc" 0
for sc in server-initialize logging-set-level ping tools-list resources-list prompts-list \
	server-sse-multiple-streams dns-rebinding-protection; do
	expect_match "conformance: $sc" "$(grep -F "$sc:" <<<"$conf" | head -1)" '[1-9][0-9]* passed, 0 failed'
done
((failures == 0)) || { echo "--- conformance:"; tail -40 <<<"$conf"; } >&2

kill "$serve_pid" 2>/dev/null || true
wait "$serve_pid" 2>/dev/null || true

# ---- one process (TOLLGATE_PRIVSEP=0): the same door -------------------------------
hport2=$(free_port)
TOLLGATE_PRIVSEP=0 "$TOLLGATE" serve --listen "127.0.0.1:$hport2" --token-file "$TOKEN_FILE" \
	--audit "$AUDIT" --no-network >/dev/null 2>>"$TEST_TMP/err" </dev/null &
one_pid=$!
defer "kill $one_pid 2>/dev/null; wait $one_pid 2>/dev/null"
wait_for 20 curl -s -o /dev/null "http://127.0.0.1:$hport2/mcp" || fail "TOLLGATE_PRIVSEP=0 serve --listen did not come up"
expect_eq "one process: no token: 401" "$(code -X POST "http://127.0.0.1:$hport2/mcp" "${J[@]}" -d "$INIT")" "401"
set +e
out=$(cd "$MCP_DIR" && MCP_URL=http://127.0.0.1:$hport2/mcp MCP_TOKEN=$TOKEN timeout 60 node client.mjs code 'echo one-process' -- \
	2>>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "one process: the SDK client's session ends cleanly" "$rc" 0
expect_eq "one process: execute_code over HTTP" "$(py "$(step code)" 'd["structured"]["stdout"].strip()')" "one-process"
kill "$one_pid" 2>/dev/null || true
wait "$one_pid" 2>/dev/null || true

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)); then echo "--- stderr:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
