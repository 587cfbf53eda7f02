#!/usr/bin/env bash
# `tollgate wrap --listen` around the npm package
# @modelcontextprotocol/server-everything (stdio), driven by the official
# TypeScript SDK client over Streamable HTTP: echo and get-sum, the tool
# lists, two sessions at once each with its own sandboxed server process
# (different pids), a DELETE ending its server, the audit of every
# tools/call; curl shows the refusals (no token, a foreign Origin, a
# rebinding Host), the flags' misuse, the session cap and the idle timeout,
# and a server that exits mid-session (its requests get an error).
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"

AUDIT=$TEST_TMP/audit.db
TOKEN_FILE=$TEST_TMP/token
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
hport=$(free_port)
# A word of this run's only in the servers' command lines: their pids are ours.
MARK=tg-wrap-http-$$-$hport
PAT="^node /work/node_modules/.*$MARK" # the servers only (not wrap, not the client)

# ---- misuse -------------------------------------------------------------------------------
set +e
err=$("$TOLLGATE" wrap --listen "0.0.0.0:$hport" --token-file "$TOKEN_FILE" -- true 2>&1); rc=$?
set -e
expect_eq "a non-loopback --listen without --listen-remote exits 125" "$rc" 125
expect_match "and says why" "$err" "not a loopback address; add --listen-remote"
set +e
err=$("$TOLLGATE" wrap --token-file "$TOKEN_FILE" -- true 2>&1); rc=$?
set -e
expect_eq "--token-file without --listen exits 125" "$rc" 125
expect_match "and says it goes with --listen" "$err" "go with --listen"
[[ ! -e $TOKEN_FILE ]] && { checks=$((checks + 1)); pass "a refused start makes no token"; } || fail "a refused start made a token"

# ---- the server ---------------------------------------------------------------------------
"$TOLLGATE" wrap --listen "127.0.0.1:$hport" --token-file "$TOKEN_FILE" --audit "$AUDIT" \
	--workdir "$MCP_DIR" --tools-deny get-env --max-http-sessions 4 -- \
	"${EVERYTHING[@]}" "$MARK" >"$TEST_TMP/wrap.out" 2>"$TEST_TMP/err" </dev/null &
wrap_pid=$!
defer "kill $wrap_pid 2>/dev/null; wait $wrap_pid 2>/dev/null"
URL=http://127.0.0.1:$hport/mcp
wait_for 20 curl -s -o /dev/null "$URL" || fail "wrap --listen did not come up: $(tail -3 "$TEST_TMP/err")"
TOKEN=$(cat "$TOKEN_FILE")
expect_eq "the token file was made 0600" "$(stat -c %a "$TOKEN_FILE")" "600"
if grep -qF "$TOKEN" "$TEST_TMP/err" "$TEST_TMP/wrap.out"; then fail "the token reached stderr or stdout"; else
	checks=$((checks + 1)); pass "the token reaches neither stderr nor stdout"; fi
expect_eq "no server runs before a session" "$(pgrep -f "$PAT" | wc -l)" "0"

# ---- the official SDK client: two sessions ----------------------------------------------
set +e
out=$(cd "$MCP_DIR" && MCP_URL=$URL MCP_TOKEN=$TOKEN timeout 150 node wrap_http.mjs "$PAT" 2>"$TEST_TMP/client.err"); rc=$?
set -e
expect_eq "the SDK client's sessions end cleanly" "$rc" 0
[[ $rc -eq 0 ]] || { tail -20 "$TEST_TMP/client.err"; tail -20 "$TEST_TMP/err"; } >&2
expect_eq "initialize reaches the wrapped server" "$(py "$(step sessions)" 'd["server"]')" "mcp-servers/everything"
expect_match "session a has an Mcp-Session-Id" "$(py "$(step sessions)" 'd["a"]')" '^[0-9a-f]{32}$'
expect_eq "two sessions, two ids" "$(py "$(step sessions)" 'd["a"] != d["b"]')" "True"
expect_eq "no server of ours before the sessions" "$(py "$(step pids)" 'len(d["before"])')" "0"
expect_eq "two sessions: two server processes, different pids" \
	"$(py "$(step pids)" 'len(set(d["both"]))')" "2"
tools=$(py "$(step tools)" '",".join(d["tools"])')
expect_match "tools/list has echo and get-sum" "$tools" 'echo.*get-sum'
if [[ $tools == *get-env* ]]; then fail "tools/list shows a denied tool: $tools"; else
	checks=$((checks + 1)); pass "tools/list hides the denied get-env"; fi
expect_eq "echo answers through wrap" "$(py "$(step echo)" 'd["text"]')" "Echo: hello over http"
expect_match "get-sum answers in the other session" "$(py "$(step sum)" 'd["text"]')" '42'
expect_eq "a denied tool: -32602 from tollgate" "$(py "$(step hidden)" 'd["rpcError"]')" "-32602"
expect_eq "DELETE of session a ends its server; b's runs on" "$(py "$(step deleted)" 'len(d["after"])')" "1"
left=$(py "$(step deleted)" 'd["after"][0] if d["after"] else ""')
expect_eq "... the one left was running before" "$(py "$(step pids)" "'$left' in d['both']")" "True"
expect_eq "session b still answers" "$(py "$(step echo-b)" 'd["text"]')" "Echo: b still here"
wait_for 20 sh -c "! pgrep -f '$PAT' >/dev/null" || true
expect_eq "both sessions ended: no server left" "$(pgrep -f "$PAT" | wc -l)" "0"

# Every tools/call audited as wrap's stdio relay does, each in its session's sandbox.
rows=$(sqlite3 "$AUDIT" "select decision||'|'||ifnull(reason,'')||'|'||json_extract(detail,'$.tool')||'|'||ifnull(sandbox,'') from events where kind='mcp.call' order by id")
expect_match "the audit has echo, allowed" "$rows" 'allow\|\|echo\|sb-'
expect_match "the audit has get-sum, allowed" "$rows" 'allow\|\|get-sum\|sb-'
expect_match "the audit has the denied get-env" "$rows" 'deny\|tool not allowed\|get-env'
expect_eq "the two calls ran in two sandboxes" \
	"$(grep -E '\|(echo|get-sum)\|' <<<"$rows" | cut -d'|' -f4 | sort -u | wc -l)" "2"

# ---- refusals before any server starts --------------------------------------------------
J=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
A=(-H "Authorization: Bearer $TOKEN")
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
code() { curl -s -m 30 -o "$TEST_TMP/body" -w '%{http_code}' "$@"; }
expect_eq "no token: 401" "$(code -X POST "$URL" "${J[@]}" -d "$INIT")" "401"
expect_eq "a wrong token: 401" "$(code -X POST "$URL" "${J[@]}" -H "Authorization: Bearer ${TOKEN%?}0x" -d "$INIT")" "401"
expect_eq "a foreign Origin (with the token): 403" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H 'Origin: http://evil.example' -d "$INIT")" "403"
expect_eq "a rebinding Host (with the token): 403" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" -H "Host: evil.example:$hport" -d "$INIT")" "403"
expect_eq "a foreign Origin without the token: 403 (checked first)" "$(code -X POST "$URL" "${J[@]}" -H 'Origin: http://evil.example' -d "$INIT")" "403"
head -c $((4 * 1024 * 1024 + 16)) /dev/zero | tr '\0' ' ' >"$TEST_TMP/big.json"
expect_eq "a body over 4 MiB: 413" "$(code -X POST "$URL" "${J[@]}" "${A[@]}" --data-binary @"$TEST_TMP/big.json")" "413"
expect_eq "no refused request started a server" "$(pgrep -f "$PAT" | wc -l)" "0"

# ---- the session cap and the idle timeout --------------------------------------------------
# One session at most: a second initialize ends the first (idle) one and its
# server; with --http-idle 1s an idle session ends by itself (checked every 10 s).
hport2=$(free_port)
MARK2=tg-wrap-idle-$$-$hport2
PAT2="^node /work/node_modules/.*$MARK2"
"$TOLLGATE" wrap --listen "127.0.0.1:$hport2" --token-file "$TOKEN_FILE" --audit "$AUDIT" \
	--workdir "$MCP_DIR" --max-http-sessions 1 --http-idle 1s -- \
	"${EVERYTHING[@]}" "$MARK2" >/dev/null 2>"$TEST_TMP/err2" </dev/null &
wrap2=$!
defer "kill $wrap2 2>/dev/null; wait $wrap2 2>/dev/null"
URL2=http://127.0.0.1:$hport2/mcp
wait_for 20 curl -s -o /dev/null "$URL2" || fail "the second wrap --listen did not come up"
# init NAME: initialize a session; its id on stdout (the answer's head).
init() {
	curl -s -m 60 -D "$TEST_TMP/$1.head" -o "$TEST_TMP/$1.body" -X POST "$URL2" "${J[@]}" "${A[@]}" -d "$INIT"
	grep -i '^mcp-session-id:' "$TEST_TMP/$1.head" | cut -d' ' -f2 | tr -d '\r'
}
sid1=$(init first)
expect_match "cap: the first session starts" "$sid1" '^[0-9a-f]{32}$'
expect_match "cap: its server answered initialize" "$(cat "$TEST_TMP/first.body")" 'mcp-servers/everything'
pid1=$(pgrep -f "$PAT2" || true)
expect_eq "cap: one server" "$(wc -w <<<"$pid1")" "1"
sid2=$(init second)
expect_match "cap: a second session starts (the idle first gives way)" "$sid2" '^[0-9a-f]{32}$'
wait_for 20 sh -c "! kill -0 $pid1 2>/dev/null" || true
if kill -0 "$pid1" 2>/dev/null; then fail "cap: the first session's server still runs"; else
	checks=$((checks + 1)); pass "cap: the first session's server was ended"; fi
expect_eq "cap: the first session's id is unknown now: 404" \
	"$(code -X POST "$URL2" "${J[@]}" "${A[@]}" -H "Mcp-Session-Id: $sid1" -d '{"jsonrpc":"2.0","id":2,"method":"ping"}')" "404"
expect_eq "cap: one server still" "$(pgrep -f "$PAT2" | wc -l)" "1"
wait_for 40 sh -c "! pgrep -f '$PAT2' >/dev/null" || true
expect_eq "--http-idle 1s: the idle session's server ended" "$(pgrep -f "$PAT2" | wc -l)" "0"
expect_eq "--http-idle: its id is unknown now: 404" \
	"$(code -X POST "$URL2" "${J[@]}" "${A[@]}" -H "Mcp-Session-Id: $sid2" -d '{"jsonrpc":"2.0","id":2,"method":"ping"}')" "404"
expect_match "wrap says why the sessions ended" "$(cat "$TEST_TMP/err2")" "ended: idle"

# ---- a server that exits: its session's requests get an error, not a wait ------------------
mkdir -p "$TEST_TMP/quitter"
cat >"$TEST_TMP/quitter/server.py" <<'PY'
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "quitter", "version": "1"}}}), flush=True)
    elif msg.get("method") == "tools/list":
        sys.exit(3)  # without an answer
PY
hport3=$(free_port)
"$TOLLGATE" wrap --listen "127.0.0.1:$hport3" --token-file "$TOKEN_FILE" --audit "$AUDIT" \
	--workdir "$TEST_TMP/quitter" -- python3 /work/server.py >/dev/null 2>"$TEST_TMP/err3" </dev/null &
defer "kill $! 2>/dev/null; wait $! 2>/dev/null"
URL3=http://127.0.0.1:$hport3/mcp
wait_for 20 curl -s -o /dev/null "$URL3" || fail "the third wrap --listen did not come up"
curl -s -m 60 -D "$TEST_TMP/q.head" -o "$TEST_TMP/q.body" -X POST "$URL3" "${J[@]}" "${A[@]}" -d "$INIT"
qsid=$(grep -i '^mcp-session-id:' "$TEST_TMP/q.head" | cut -d' ' -f2 | tr -d '\r')
expect_match "a server that will exit: initialize answered" "$(cat "$TEST_TMP/q.body")" '"quitter"'
Q=(-H "Mcp-Session-Id: $qsid" -H 'MCP-Protocol-Version: 2025-11-25')
list=$(curl -s -m 60 -X POST "$URL3" "${J[@]}" "${A[@]}" "${Q[@]}" -d '{"jsonrpc":"2.0","id":5,"method":"tools/list"}')
expect_match "the request it left unanswered gets an error when it exits" "$list" '"id":5.*the wrapped server has exited|the wrapped server has exited.*"id":5'
ping=$(curl -s -m 60 -X POST "$URL3" "${J[@]}" "${A[@]}" "${Q[@]}" -d '{"jsonrpc":"2.0","id":6,"method":"ping"}')
expect_match "a later request gets the same error at once" "$ping" '"id":6.*has exited|has exited.*"id":6'

# ---- the end ------------------------------------------------------------------------------
expect_match "wrap says it listens" "$(cat "$TEST_TMP/err")" "MCP over HTTP at http://127.0.0.1:$hport/mcp"
kill "$wrap_pid"
set +e
wait "$wrap_pid" 2>/dev/null; rc=$?
set -e
expect_eq "SIGTERM: wrap --listen exits 0" "$rc" 0

if grep -q 'Sanitizer' "$TEST_TMP/err"; then fail "a sanitizer reported an error (see below)"; fi
if ((failures > 0)); then echo "--- stderr of wrap:" >&2; tail -30 "$TEST_TMP/err" >&2; fi
finish
