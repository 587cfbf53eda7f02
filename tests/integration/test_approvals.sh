#!/usr/bin/env bash
# Approvals end to end: `tollgate proxy --ask` holds real curl requests to a
# real origin on loopback until `tollgate pending / approve / deny` decide
# them through the control socket; timeouts, clients leaving, scopes, the
# socket's mode, and finding gateways without --control.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
# Sockets found without --control live here, apart from any other gateway.
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run

ASK=(--ask "*.test:*" --resolve a.test:127.0.0.1 --resolve b.test:127.0.0.1
	--allow-cidr 127.0.0.0/8)
start_proxy main "${ASK[@]}"
P=$PROXY_PORT
SOCK=$TEST_TMP/main.sock
MAIN_PID=$PROXY_PID

# pending_json [FLAGS]: the JSON lines of `tollgate pending --json`.
pending_json() { "$TOLLGATE" pending --json "$@"; }
# count_pending SOCK: how many approvals are pending.
count_pending() { pending_json --control "$1" | grep -c '"id"' || true; }
# field LINE KEY: one key of a JSON object.
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# curl_bg NAME URL: curl -p through the proxy in the background; sets CURL_PID.
# NAME.code gets "CONNECT-STATUS HTTP-STATUS" (000 when there was none).
curl_bg() {
	curl -sS --max-time 30 -p -x "http://127.0.0.1:$P" -o "$TEST_TMP/$1.body" \
		-w '%{http_connect} %{http_code}' "$2" >"$TEST_TMP/$1.code" 2>/dev/null &
	CURL_PID=$!
	defer "kill $CURL_PID 2>/dev/null"
}
# raw_bg NAME HOST: a raw CONNECT in the background (prints "STATUS REASON").
raw_bg() {
	$RAW "$P" "CONNECT $2:$HTTP_PORT HTTP/1.1\r\nHost: $2\r\n\r\n" --timeout 120 \
		>"$TEST_TMP/$1.raw" 2>&1 &
	RAW_PID=$!
	defer "kill $RAW_PID 2>/dev/null"
}
has_pending() { [[ $(count_pending "$1") -ge ${2:-1} ]]; }
no_pending() { [[ $(count_pending "$1") -eq 0 ]]; }

# --- the socket --------------------------------------------------------------
expect_eq "control socket is mode 0600" "$(stat -c %a "$SOCK")" "600"
expect_eq "control socket belongs to the gateway's user" "$(stat -c %u "$SOCK")" "$(id -u)"

out=$("$TOLLGATE" pending --control "$SOCK")
expect_eq "nothing pending at first" "$out" "no pending approvals"

# --- approve: the held request goes through ------------------------------------
curl_bg approve "http://a.test:$HTTP_PORT/hello.txt"
wait_for 10 has_pending "$SOCK" || fail "curl's CONNECT never became pending"
line=$(pending_json --control "$SOCK" | head -n 1)
expect_eq "pending --json: host" "$(field "$line" host)" "a.test"
expect_eq "pending --json: port" "$(field "$line" port)" "$HTTP_PORT"
expect_eq "pending --json: client" "$(field "$line" client)" "127.0.0.1"
expect_match "pending --json: age in seconds" "$(field "$line" age)" '^[0-9]+(\.[0-9]+)?$'
id=$(field "$line" id)
expect_match "pending --json: a numeric id" "$id" '^[0-9]+$'
expect_eq "the request is held (curl still waits)" "$(kill -0 "$CURL_PID" 2>/dev/null && echo held)" "held"
table=$("$TOLLGATE" pending --control "$SOCK")
expect_match "pending: a table with the host" "$table" "ID +CLIENT +HOST.*"$'\n'"$id +127\.0\.0\.1 +a\.test +$HTTP_PORT "
out=$("$TOLLGATE" approve "$id" --control "$SOCK")
expect_eq "approve prints what it did" "$out" "approved $id (scope once)"
set +e; wait "$CURL_PID"; set -e
expect_eq "approved: CONNECT 200, then the origin's 200" "$(cat "$TEST_TMP/approve.code")" "200 200"
expect_eq "approved: curl gets the origin's body" "$(cat "$TEST_TMP/approve.body")" \
	"hello from the origin"
expect_eq "approved: nothing pending any more" "$(count_pending "$SOCK")" "0"
approval_rows() { [[ $(audit_count "$TEST_TMP/main.db" "kind='approval' and decision='$1' and host='a.test'") -ge 1 ]]; }
if command -v sqlite3 >/dev/null; then
	if wait_for 10 approval_rows allow; then pass "the approval is an audit row (kind approval)"
	else fail "no audit row of kind approval"; fi
fi

# --- scope once: the next request is asked again -----------------------------------
raw_bg once-again a.test
if wait_for 10 has_pending "$SOCK"; then pass "scope once: the next request is asked again"
else fail "scope once: the next request was not asked"; fi
id=$(field "$(pending_json --control "$SOCK" | head -n 1)" id)

# --- deny ------------------------------------------------------------------------
"$TOLLGATE" deny "$id" --control "$SOCK" >/dev/null
set +e; wait "$RAW_PID"; set -e
expect_eq "denied: 403 approval-denied" "$(cat "$TEST_TMP/once-again.raw")" "403 approval-denied"

curl_bg deny "http://a.test:$HTTP_PORT/hello.txt"
wait_for 10 has_pending "$SOCK" || fail "second curl never became pending"
id=$(field "$(pending_json --control "$SOCK" | head -n 1)" id)
"$TOLLGATE" deny "$id" --control "$SOCK" >/dev/null
set +e; wait "$CURL_PID"; set -e
expect_eq "denied: curl's CONNECT gets 403" "$(cat "$TEST_TMP/deny.code")" "403 000"

# --- unknown ids and usage ----------------------------------------------------
set +e
err=$("$TOLLGATE" approve 999999 --control "$SOCK" 2>&1 >/dev/null); rc=$?
set -e
expect_eq "unknown id exits 1" "$rc" 1
expect_eq "unknown id: one line on stderr" "$(wc -l <<<"$err")" 1
expect_match "unknown id: says so" "$err" "^tollgate: approve: no pending approval 999999"
set +e
"$TOLLGATE" deny 999999 --control "$SOCK" >/dev/null 2>&1; rc=$?
"$TOLLGATE" approve --control "$SOCK" >/dev/null 2>&1; rc2=$?
"$TOLLGATE" approve abc --control "$SOCK" >/dev/null 2>&1; rc3=$?
"$TOLLGATE" approve 1 --scope forever --control "$SOCK" >/dev/null 2>&1; rc4=$?
"$TOLLGATE" pending extra >/dev/null 2>&1; rc5=$?
"$TOLLGATE" deny 1 2 >/dev/null 2>&1; rc6=$?
set -e
expect_eq "deny of an unknown id exits 1" "$rc" 1
expect_eq "approve without an id exits 125" "$rc2" 125
expect_eq "approve with a bad id exits 125" "$rc3" 125
expect_eq "approve with a bad scope exits 125" "$rc4" 125
expect_eq "pending with an operand exits 125" "$rc5" 125
expect_eq "deny with two ids exits 125" "$rc6" 125

# --- the client leaves: its approval goes with it ---------------------------------
curl_bg gone "http://a.test:$HTTP_PORT/hello.txt"
wait_for 10 has_pending "$SOCK" || fail "third curl never became pending"
kill "$CURL_PID"
set +e; wait "$CURL_PID" 2>/dev/null; set -e
if wait_for 10 no_pending "$SOCK"; then pass "curl killed while waiting: its approval is gone"
else fail "curl killed while waiting: the approval stayed pending"; fi

# --- scope client: the same client is not asked again ---------------------------
curl_bg client1 "http://b.test:$HTTP_PORT/hello.txt"
wait_for 10 has_pending "$SOCK" || fail "b.test never became pending"
id=$(field "$(pending_json --control "$SOCK" | head -n 1)" id)
out=$("$TOLLGATE" approve "$id" --scope client --control "$SOCK")
expect_eq "approve --scope client" "$out" "approved $id (scope client)"
set +e; wait "$CURL_PID"; set -e
expect_eq "scope client: first request 200" "$(cat "$TEST_TMP/client1.code")" "200 200"
code=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_code}' \
	"http://b.test:$HTTP_PORT/hello.txt" 2>/dev/null || true)
expect_eq "scope client: a second request passes without asking" "$code" "200"
expect_eq "scope client: nothing was asked" "$(count_pending "$SOCK")" "0"

# --- timeout -----------------------------------------------------------------------
start_proxy short "${ASK[@]}" --ask-timeout 1
P=$PROXY_PORT
raw_bg timeout a.test
set +e; wait "$RAW_PID"; set -e
expect_eq "nobody decides: 403 approval-timeout" "$(cat "$TEST_TMP/timeout.raw")" \
	"403 approval-timeout"
expect_eq "timed out: nothing pending" "$(count_pending "$TEST_TMP/short.sock")" "0"
stop_proxy "$PROXY_PID"
expect_eq "SIGTERM: the proxy exits 0" "$STOP_RC" "0"
if [[ -e $TEST_TMP/short.sock ]]; then fail "the control socket stayed after a clean exit"
else pass "the control socket is removed on a clean exit"; fi

# --- scope always: written to the policy file --------------------------------------
printf '{\n  "version": 1,\n  "allow": ["example.org"]\n}\n' >"$TEST_TMP/policy.json"
start_proxy always "${ASK[@]}" --policy "$TEST_TMP/policy.json"
P=$PROXY_PORT
raw_bg always a.test
wait_for 10 has_pending "$TEST_TMP/always.sock" || fail "always: never pending"
id=$(field "$(pending_json --control "$TEST_TMP/always.sock" | head -n 1)" id)
"$TOLLGATE" approve "$id" --scope always --control "$TEST_TMP/always.sock" >/dev/null
set +e; wait "$RAW_PID"; set -e
expect_eq "scope always: the request passes" "$(cat "$TEST_TMP/always.raw")" "200 -"
# The rule is written and reloaded off the loop, after the request it let
# through: a bounded wait for the log line that says both happened.
always_written() { grep -q "wrote 'allow a\.test:$HTTP_PORT' to .* and reloaded it" "$TEST_TMP/always.log"; }
wait_for 10 always_written || true
expect_match "scope always: the rule is in the policy file" "$(cat "$TEST_TMP/policy.json")" \
	"\"a\.test:$HTTP_PORT\""
expect_match "scope always: the gateway reloaded the file" "$(cat "$TEST_TMP/always.log")" \
	"wrote 'allow a\.test:$HTTP_PORT' to .* and reloaded it"
code=$($RAW "$P" "CONNECT a.test:$HTTP_PORT HTTP/1.1\r\nHost: a.test\r\n\r\n" --timeout 10)
expect_eq "scope always: the next request is not asked" "$code" "200 -"
stop_proxy "$PROXY_PID"
expect_eq "scope always: the proxy exits 0 after a reload" "$STOP_RC" "0"
stop_proxy "$MAIN_PID"
expect_eq "the main proxy exits 0" "$STOP_RC" "0"

# --- finding gateways without --control ------------------------------------------
set +e
err=$("$TOLLGATE" pending 2>&1 >/dev/null); rc=$?
set -e
expect_eq "no gateway running: exit 1" "$rc" 1
expect_match "no gateway running: a clear error" "$err" "^tollgate: pending: no running gateway"

# started_default NAME: a proxy with the default control socket; sets G_PID, G_PORT.
start_default() {
	G_PORT=$(free_port)
	"$TOLLGATE" proxy --listen "127.0.0.1:$G_PORT" --upstream-dns "127.0.0.1:$(free_port)" \
		--audit "$TEST_TMP/$1.db" "${ASK[@]}" 2>"$TEST_TMP/$1.log" &
	G_PID=$!
	defer "kill -9 $G_PID 2>/dev/null"
	wait_for 10 port_open "$G_PORT" || { cat "$TEST_TMP/$1.log" >&2; fail "$1 did not start"; }
}
start_default g1
G1_PID=$G_PID G1_PORT=$G_PORT
expect_eq "default socket: <dir>/<pid>.sock, mode 0600" \
	"$(stat -c %a "$TOLLGATE_CONTROL_DIR/$G1_PID.sock" 2>/dev/null)" "600"
expect_eq "default directory is 0700" "$(stat -c %a "$TOLLGATE_CONTROL_DIR")" "700"
# A socket left by a dead process is ignored.
python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
	"$TOLLGATE_CONTROL_DIR/2147483646.sock"

P=$G1_PORT
raw_bg g1 a.test
wait_for 10 has_pending "$TOLLGATE_CONTROL_DIR/$G1_PID.sock" || fail "g1: never pending"
line=$(pending_json)
expect_eq "found without --control: one approval" "$(grep -c '"id"' <<<"$line")" 1
expect_eq "one gateway: the ref is the bare id" "$(field "$line" ref)" "$(field "$line" id)"
expect_eq "pending --json names the gateway" "$(field "$line" gateway)" "$G1_PID"

start_default g2
G2_PID=$G_PID
P=$G_PORT
raw_bg g2 a.test
wait_for 10 has_pending "$TOLLGATE_CONTROL_DIR/$G2_PID.sock" || fail "g2: never pending"
lines=$(pending_json)
expect_eq "two gateways: both approvals listed" "$(grep -c '"id"' <<<"$lines")" 2
g2line=$(grep "\"gateway\":$G2_PID" <<<"$lines")
g2id=$(field "$g2line" id)
expect_eq "two gateways: ids qualified as PID:ID" "$(field "$g2line" ref)" "$G2_PID:$g2id"
table=$("$TOLLGATE" pending)
expect_match "two gateways: the table shows PID:ID" "$table" "$G2_PID:$g2id +127\.0\.0\.1 +a\.test"
"$TOLLGATE" approve "$G2_PID:$g2id" >/dev/null
set +e; wait "$RAW_PID"; set -e
expect_eq "approve PID:ID reached the right gateway" "$(cat "$TEST_TMP/g2.raw")" "200 -"
expect_eq "the other gateway's approval still waits" \
	"$(count_pending "$TOLLGATE_CONTROL_DIR/$G1_PID.sock")" "1"
set +e
"$TOLLGATE" approve "999999:1" >/dev/null 2>&1; rc=$?
set -e
expect_eq "PID:ID of no running gateway exits 1" "$rc" 1
# An unqualified id pending in only one gateway is found there.
g1id=$(field "$(pending_json --control "$TOLLGATE_CONTROL_DIR/$G1_PID.sock")" id)
"$TOLLGATE" deny "$g1id" >/dev/null
P=$G1_PORT
wait_for 10 test -s "$TEST_TMP/g1.raw" || true
expect_eq "deny ID without --control found its gateway" "$(cat "$TEST_TMP/g1.raw")" \
	"403 approval-denied"

# A gateway killed with -9 leaves its socket: the finder skips it.
kill -9 "$G2_PID"
set +e; wait "$G2_PID" 2>/dev/null; set -e
out=$(pending_json; echo "rc=$?")
expect_eq "a dead gateway's socket is skipped" "$out" "rc=0"
finish
