#!/usr/bin/env bash
# The proxy's life cycle: SIGHUP reloads the policy file (a bad file keeps
# the old policy), SIGTERM lets an open tunnel finish within the grace period
# and flushes the audit log; client sections with Proxy-Authorization (407).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
H=$HTTP_PORT
POLICY=$TEST_TMP/policy.json
pins=(--resolve a.test:127.0.0.1 --resolve b.test:127.0.0.1 --resolve c.test:127.0.0.1)

status() { $RAW "$1" "CONNECT $2 HTTP/1.1\r\nHost: $2\r\n\r\n"; }

# --- SIGHUP --------------------------------------------------------------------
cat >"$POLICY" <<JSON
{"version": 1, "allow": ["a.test:$H"], "allow_cidr": ["127.0.0.1/32"]}
JSON
start_proxy reload --policy "$POLICY" "${pins[@]}"
P=$PROXY_PORT
expect_eq "before reload: a.test allowed" "$(status "$P" "a.test:$H")" "200 -"
expect_eq "before reload: b.test denied" "$(status "$P" "b.test:$H")" "403 denied"

cat >"$POLICY" <<JSON
{"version": 1, "allow": ["b.test:$H"], "allow_cidr": ["127.0.0.1/32"]}
JSON
kill -HUP "$PROXY_PID"
wait_for 10 grep -q 'reloaded' "$PROXY_LOG" || fail "no reload logged"
expect_eq "after reload: b.test allowed" "$(status "$P" "b.test:$H")" "200 -"
expect_eq "after reload: a.test denied" "$(status "$P" "a.test:$H")" "403 denied"

echo '{"version": 1, "allow": [' >"$POLICY"
kill -HUP "$PROXY_PID"
wait_for 10 grep -q 'reload failed' "$PROXY_LOG" || fail "no reload failure logged"
expect_match "bad file: the log names file and position" \
	"$(grep 'reload failed' "$PROXY_LOG")" "policy.json:[0-9]+:[0-9]+"
expect_eq "bad file: the old policy stays (b.test allowed)" "$(status "$P" "b.test:$H")" "200 -"
kill -0 "$PROXY_PID" && pass "bad file: the proxy keeps running"

# --- SIGTERM with a tunnel open -------------------------------------------------
cat >"$POLICY" <<JSON
{"version": 1, "allow": ["a.test:$H"], "allow_cidr": ["127.0.0.1/32"]}
JSON
start_proxy term --policy "$POLICY" "${pins[@]}" --grace 20s
TP=$PROXY_PORT
TPID=$PROXY_PID
# The client opens a tunnel, waits for the signal, then uses the tunnel.
python3 -c '
import socket, sys, time, os
port, ready, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(b"CONNECT a.test:%s HTTP/1.1\r\nHost: a.test\r\n\r\n" % sys.argv[4].encode())
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
open(ready, "w").close()
for _ in range(200):
    if os.path.exists(go): break
    time.sleep(0.05)
s.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: a.test\r\n\r\n")
body = b""
while True:
    b = s.recv(65536)
    if not b: break
    body += b
print(body.split(b"\r\n\r\n", 1)[1].decode().strip())
' "$TP" "$TEST_TMP/tunnel.ready" "$TEST_TMP/tunnel.go" "$H" >"$TEST_TMP/tunnel.out" 2>&1 &
CLIENT=$!
wait_for 10 test -e "$TEST_TMP/tunnel.ready" || fail "tunnel did not open"
kill -TERM "$TPID"
wait_for 10 grep -q 'no new connections' "$PROXY_LOG" || fail "SIGTERM not logged"
port_open "$TP" && fail "SIGTERM: still accepting" || pass "SIGTERM: the listener is closed"
kill -0 "$TPID" && pass "SIGTERM: waits for the open tunnel" || fail "SIGTERM: exited with a tunnel open"
touch "$TEST_TMP/tunnel.go"
set +e; wait "$CLIENT"; set -e
expect_eq "the tunnel works during the grace period" "$(cat "$TEST_TMP/tunnel.out")" \
	"hello from the origin"
wait_for 10 bash -c "! kill -0 $TPID 2>/dev/null" || fail "SIGTERM: still running after the tunnel ended"
stop_proxy "$TPID"
expect_eq "SIGTERM: exit 0 once the tunnel ended" "$STOP_RC" 0
n=$(audit_count "$TEST_TMP/term.db" "kind='connection' and host='a.test' and json_extract(detail,'$.bytes_down') > 0")
expect_eq "SIGTERM: the tunnel's connection row was flushed" "$n" 1

# The grace period is bounded: an idle tunnel is closed when it ends.
start_proxy grace --policy "$POLICY" "${pins[@]}" --grace 1s
python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"CONNECT a.test:%s HTTP/1.1\r\nHost: a.test\r\n\r\n" % sys.argv[2].encode())
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
open(sys.argv[3], "w").close()
time.sleep(30)
' "$PROXY_PORT" "$H" "$TEST_TMP/idle.ready" &
defer "kill $! 2>/dev/null"
wait_for 10 test -e "$TEST_TMP/idle.ready" || fail "idle tunnel did not open"
stop_proxy "$PROXY_PID"
expect_eq "grace over: exit 0 with a tunnel still open" "$STOP_RC" 0
n=$(audit_count "$TEST_TMP/grace.db" "kind='connection' and reason='shutdown'")
expect_eq "grace over: the cut tunnel is audited" "$n" 1

# --- client sections and 407 ------------------------------------------------------
hash=$(printf '%s' 's3cret-pw' | sha256sum | cut -d' ' -f1)
cat >"$POLICY" <<JSON
{"version": 1, "allow_cidr": ["127.0.0.1/32"],
 "clients": [{"name": "team", "user": "alice", "password_sha256": "$hash",
              "allow": ["c.test:$H"]}]}
JSON
start_proxy auth --policy "$POLICY" "${pins[@]}"
out=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$PROXY_PORT" --proxy-user alice:s3cret-pw \
	"http://c.test:$H/hello.txt")
expect_eq "--proxy-user: the client section allows c.test" "$out" "hello from the origin"
out=$(curl -s -o /dev/null -w '%{http_connect}' --max-time 10 -p \
	-x "http://127.0.0.1:$PROXY_PORT" --proxy-user alice:wrong "http://c.test:$H/" || true)
expect_eq "wrong password: 407" "$out" "407"
out=$($RAW "$PROXY_PORT" "CONNECT c.test:$H HTTP/1.1\r\nHost: c.test\r\nProxy-Authorization: Basic YWxpY2U6d3Jvbmc=\r\n\r\n")
expect_eq "wrong password: X-Tollgate-Reason" "$out" "407 proxy-auth-required"
out=$($RAW "$PROXY_PORT" "CONNECT c.test:$H HTTP/1.1\r\nHost: c.test\r\n\r\n")
expect_eq "no credentials: top-level policy (c.test not allowed)" "$out" "403 denied"
stop_proxy "$PROXY_PID"
n=$(audit_count "$TEST_TMP/auth.db" "sandbox='team' and kind='decision' and decision='allow'")
expect_eq "audit names the client section" "$n" 1
if grep -q 's3cret-pw' "$TEST_TMP/auth.log" || sqlite3 "$TEST_TMP/auth.db" .dump | grep -q 's3cret-pw'; then
	fail "the password reached the log or the audit database"
else
	pass "the password is in neither log nor audit"
fi
finish
