#!/usr/bin/env bash
# An "always" approval while another process holds the policy file's lock
# (util-linux flock, as an editor or a second gateway would): the gateway
# keeps serving, the rule lands once the lock is let go, and a gateway
# stopped while the lock is still held exits without waiting for it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
command -v flock >/dev/null || skip "flock (util-linux) is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"

FILE=$TEST_TMP/policy.json
printf '{\n  "version": 1,\n  "allow": ["ok.test:*"]\n}\n' >"$FILE"
FLAGS=(--policy "$FILE" --ask "*.ask.test:*" --resolve ok.test:127.0.0.1
	--resolve a.ask.test:127.0.0.1 --resolve b.ask.test:127.0.0.1 --allow-cidr 127.0.0.0/8)

# field LINE KEY: one key of a JSON object.
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
has_pending() { "$TOLLGATE" pending --json --control "$1" | grep -q '"id"'; }
# through NAME URL: curl -p through the proxy; NAME.code gets "CONNECT-STATUS HTTP-STATUS".
through() {
	curl -sS --max-time 20 -p -x "http://127.0.0.1:$PROXY_PORT" -o "$TEST_TMP/$1.body" \
		-w '%{http_connect} %{http_code}' "$2" >"$TEST_TMP/$1.code" 2>/dev/null || true
}
# hold_lock NAME: flock(1) takes FILE's lock and keeps it until NAME.release
# exists (at most 60 s); NAME.locked once it holds it, NAME.released as it
# lets go. Sets HOLDER_PID.
hold_lock() {
	local m=$TEST_TMP/$1
	flock "$FILE" bash -c "touch '$m.locked'
		for ((i = 0; i < 600; i++)); do [[ -e '$m.release' ]] && break; sleep 0.1; done
		touch '$m.released'" &
	HOLDER_PID=$!
	defer "touch '$m.release'; kill $HOLDER_PID 2>/dev/null"
	wait_for 10 test -e "$m.locked" || { fail "flock never took the lock"; finish; }
}
# held: the lock has not been let go yet (the ordering every check below rests on).
held() { [[ ! -e $TEST_TMP/$1.released ]]; }

# --- approve "always" while the lock is held --------------------------------------
start_proxy lock "${FLAGS[@]}"
SOCK=$TEST_TMP/lock.sock
through before "http://ok.test:$HTTP_PORT/hello.txt"
expect_eq "an allowed request passes before the lock is taken" "$(cat "$TEST_TMP/before.code")" \
	"200 200"

hold_lock one
ORIGINAL=$(cat "$FILE")
through asked "http://a.ask.test:$HTTP_PORT/hello.txt" &
ASKED_PID=$!
defer "kill $ASKED_PID 2>/dev/null"
wait_for 10 has_pending "$SOCK" || fail "the request to a.ask.test never became pending"
id=$(field "$("$TOLLGATE" pending --json --control "$SOCK" | head -n 1)" id)
set +e
"$TOLLGATE" approve "$id" --scope always --control "$SOCK" >/dev/null 2>"$TEST_TMP/approve.err"
rc=$?
set -e
held one && was_held=yes || was_held=no
expect_eq "approve --scope always answers while the lock is held" "$rc/$was_held" "0/yes"

# Bounded by curl's --max-time; the lock is let go only by the test, later.
wait "$ASKED_PID" || true
held one && was_held=yes || was_held=no
expect_eq "the approved request passes while the lock is held" \
	"$(cat "$TEST_TMP/asked.code")/$was_held" "200 200/yes"

through during "http://ok.test:$HTTP_PORT/hello.txt"
held one && was_held=yes || was_held=no
expect_eq "another allowed request passes while the lock is held" \
	"$(cat "$TEST_TMP/during.code")/$was_held" "200 200/yes"
expect_eq "the gateway answers the control socket while the lock is held" \
	"$("$TOLLGATE" pending --control "$SOCK" 2>&1)/$(held one && echo yes)" \
	"no pending approvals/yes"
expect_eq "the file is not written while another process holds its lock" "$(cat "$FILE")" \
	"$ORIGINAL"

touch "$TEST_TMP/one.release"
wait "$HOLDER_PID" || true
rule_written() { grep -q "\"a.ask.test:$HTTP_PORT\"" "$FILE"; }
if wait_for 20 rule_written; then pass "after the lock is let go, the rule is in the file"
else fail "after the lock is let go, the rule never reached the file: $(cat "$FILE")"; fi
reloaded() { grep -q "wrote 'allow a.ask.test:$HTTP_PORT' to .* and reloaded it" "$PROXY_LOG"; }
wait_for 10 reloaded && pass "the gateway reloaded the file after writing it" ||
	fail "no reload after the write: $(cat "$PROXY_LOG")"
expect_match "the file keeps its other rule" "$(cat "$FILE")" '"ok\.test:\*"'
"$TOLLGATE" policy check "$FILE" >/dev/null && pass "the rewritten file is valid" ||
	fail "the rewritten file is not valid"
through after "http://a.ask.test:$HTTP_PORT/hello.txt"
expect_eq "the approved host is allowed afterwards without asking" \
	"$(cat "$TEST_TMP/after.code")" "200 200"
stop_proxy "$PROXY_PID"
expect_eq "the proxy exits 0" "$STOP_RC" "0"
if command -v sqlite3 >/dev/null; then
	expect_eq "an audit row says the rule was written" \
		"$(audit_count "$TEST_TMP/lock.db" "kind='policy.write' and reason='written' and decision='allow' and detail like '%a.ask.test:$HTTP_PORT%'")" 1
fi

# --- SIGTERM while the lock is still held ----------------------------------------
start_proxy stop "${FLAGS[@]}"
SOCK=$TEST_TMP/stop.sock
hold_lock two
ORIGINAL=$(cat "$FILE")
through asked2 "http://b.ask.test:$HTTP_PORT/hello.txt" &
ASKED_PID=$!
defer "kill $ASKED_PID 2>/dev/null"
wait_for 10 has_pending "$SOCK" || fail "the request to b.ask.test never became pending"
id=$(field "$("$TOLLGATE" pending --json --control "$SOCK" | head -n 1)" id)
"$TOLLGATE" approve "$id" --scope always --control "$SOCK" >/dev/null ||
	fail "approve b.ask.test failed"
wait "$ASKED_PID" || true
expect_eq "the second approved request passes" "$(cat "$TEST_TMP/asked2.code")" "200 200"
stop_proxy "$PROXY_PID"
held two && was_held=yes || was_held=no
expect_eq "SIGTERM: the proxy exits 0 without waiting for the lock" "$STOP_RC/$was_held" "0/yes"
expect_match "SIGTERM: the log says the rule was not written" "$(cat "$PROXY_LOG")" \
	"cannot add 'allow b\.ask\.test:$HTTP_PORT' to .*still locked by another process when the gateway stopped"
expect_eq "SIGTERM: the file is unchanged" "$(cat "$FILE")" "$ORIGINAL"
if command -v sqlite3 >/dev/null; then
	expect_eq "SIGTERM: an audit row says the write was given up" \
		"$(audit_count "$TEST_TMP/stop.db" "kind='policy.write' and reason='stopped' and detail like '%b.ask.test%'")" 1
fi
touch "$TEST_TMP/two.release"
wait "$HOLDER_PID" || true

finish
