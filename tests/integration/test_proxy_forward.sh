#!/usr/bin/env bash
# Absolute-form HTTP through `tollgate proxy` (curl -x to a real origin):
# framing by Content-Length, chunked and close; request bodies; keep-alive
# with each request decided on its own; hop-by-hop headers and
# Proxy-Authorization never forwarded.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"

O=$(free_port)
python3 "$TOLLGATE_SRC/tests/integration/proxy_origin.py" "$O" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$O" || { fail "origin did not start"; finish; }

start_proxy fwd --resolve origin.test:127.0.0.1 --resolve other.test:127.0.0.1 \
	--allow "origin.test:$O" --allow-cidr 127.0.0.1/32
P=$PROXY_PORT
FWD_PID=$PROXY_PID
X=(-sS --max-time 20 -x "http://127.0.0.1:$P")
U=http://origin.test:$O

out=$(curl "${X[@]}" -H 'X-End: kept' -H 'Connection: X-Hop' -H 'X-Hop: dropped' \
	-H 'Keep-Alive: timeout=5' --proxy-user alice:pw-secret "$U/headers")
expect_match "GET: the origin answered" "$out" "^GET /headers HTTP/1.1"
expect_match "GET: Host is the URL's authority" "$out" "Host: origin.test:$O"
expect_match "GET: end-to-end headers forwarded" "$out" "X-End: kept"
expect_eq "GET: Proxy-Authorization not forwarded" "$(grep -ci 'proxy-authorization' <<<"$out" || true)" 0
expect_eq "GET: headers named by Connection not forwarded" "$(grep -ci 'x-hop' <<<"$out" || true)" 0
expect_eq "GET: Keep-Alive not forwarded" "$(grep -ci 'keep-alive' <<<"$out" || true)" 0

out=$(curl "${X[@]}" "$U/chunked")
expect_eq "chunked response relayed" "$out" "chunk one, chunk two"
out=$(curl "${X[@]}" "$U/close")
expect_eq "close-delimited response relayed" "$out" "until close"
out=$(curl "${X[@]}" -I "$U/headers" | head -n1 | tr -d '\r')
expect_eq "HEAD: status line" "$out" "HTTP/1.1 200 OK"

out=$(curl "${X[@]}" --data-binary 'posted body' "$U/echo")
expect_eq "POST with Content-Length" "$out" "posted body"
head -c 300000 /dev/urandom | base64 -w0 >"$TEST_TMP/upload"
out=$(curl "${X[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$TEST_TMP/upload" "$U/echo" | sha256sum)
expect_eq "POST with a chunked 400 KB body" "$out" "$(sha256sum <"$TEST_TMP/upload")"

curl "${X[@]}" -o "$TEST_TMP/big" "$U/big?n=5000000"
expect_eq "a 5 MB response arrives whole" "$(stat -c %s "$TEST_TMP/big")" 5000000

# Keep-alive: curl reuses its proxy connection; each request is decided.
curl "${X[@]}" -v "$U/headers" "$U/chunked" "http://other.test:$O/headers" \
	-o /dev/null -o "$TEST_TMP/ka2" -o "$TEST_TMP/ka3" 2>"$TEST_TMP/ka.err" || true
expect_match "keep-alive: the client connection was reused" "$(cat "$TEST_TMP/ka.err")" \
	"(Re-using|Reusing) existing connection"
expect_eq "keep-alive: second request served" "$(cat "$TEST_TMP/ka2")" "chunk one, chunk two"
expect_match "keep-alive: third request (other host) refused on its own" \
	"$(grep -i 'x-tollgate-reason' "$TEST_TMP/ka.err" | tr -d '\r')" "X-Tollgate-Reason: denied"

out=$($RAW "$P" "GET https://origin.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "https:// in absolute-form: 400" "$out" "400 malformed-request"
out=$($RAW "$P" "GET http://other.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "denied host: 403 denied" "$out" "403 denied"
out=$($RAW "$P" "GET http://origin.test:1/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "allowed host, other port: 403 port-not-allowed" "$out" "403 port-not-allowed"

# Two pipelined requests on one connection, HTTP/1.0 style close at the end.
out=$(python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
u = "http://origin.test:%s" % sys.argv[2]
s.sendall(("GET %s/chunked HTTP/1.1\r\nHost: x\r\n\r\nGET %s/headers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (u, u)).encode())
got = b""
while True:
    b = s.recv(65536)
    if not b: break
    got += b
print(got.count(b"HTTP/1.1 200"))
' "$P" "$O")
expect_eq "pipelined requests: both answered, then closed" "$out" 2

# An ask rule holds an absolute-form request until someone approves it.
has_pending() { "$TOLLGATE" pending --control "$TEST_TMP/ask.sock" --json 2>/dev/null | grep -q '"id"'; }
start_proxy ask --resolve ask.test:127.0.0.1 --ask "ask.test:$O" --allow-cidr 127.0.0.1/32
curl -sS --max-time 20 -x "http://127.0.0.1:$PROXY_PORT" -o "$TEST_TMP/ask.out" "http://ask.test:$O/chunked" &
ASK_CURL=$!
defer "kill $ASK_CURL 2>/dev/null"
if wait_for 10 has_pending; then
	id=$("$TOLLGATE" pending --control "$TEST_TMP/ask.sock" --json | head -n1 |
		python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["id"])')
	"$TOLLGATE" approve "$id" --control "$TEST_TMP/ask.sock" >/dev/null
	set +e; wait "$ASK_CURL"; set -e
	expect_eq "ask: approved request forwarded" "$(cat "$TEST_TMP/ask.out")" "chunk one, chunk two"
else
	fail "ask: the request never became pending"
fi
stop_proxy "$PROXY_PID"

stop_proxy "$FWD_PID"
expect_eq "SIGTERM: exit 0" "$STOP_RC" 0
DB=$TEST_TMP/fwd.db
n=$(audit_count "$DB" "kind='connection' and host='origin.test' and json_extract(detail,'$.bytes_down') > 5000000")
expect_eq "audit: the big response's connection row" "$n" 1
n=$(audit_count "$DB" "kind='decision' and host='other.test' and decision='deny'")
expect_match "audit: refused requests have decision rows" "$n" '^[1-9]'
if grep -q 'pw-secret' "$TEST_TMP/fwd.log" || sqlite3 "$DB" .dump | grep -q 'pw-secret'; then
	fail "a proxy password reached the log or the audit"
else
	pass "no proxy password in log or audit"
fi
finish
