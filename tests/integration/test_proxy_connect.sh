#!/usr/bin/env bash
# CONNECT through `tollgate proxy` with real clients (curl, openssl) to real
# origins on loopback, every refusal reason of the CONNECT path, and the
# audit rows they leave.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
start_tls_origin
CLOSED_PORT=$(free_port) # nothing listens here

start_proxy main \
	--resolve origin.test:127.0.0.1 --resolve private.test:127.0.0.2 \
	--resolve closed.test:127.0.0.1 \
	--allow "origin.test:$HTTP_PORT" --allow "origin.test:$TLS_PORT" \
	--allow "private.test:$HTTP_PORT" --allow "closed.test:$CLOSED_PORT" \
	--allow nowhere.test:443 --deny "bad.origin.test:*" --allow-cidr 127.0.0.1/32
DB=$TEST_TMP/main.db
P=$PROXY_PORT
MAIN_PID=$PROXY_PID

# --- allowed ---------------------------------------------------------------
out=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$P" "http://origin.test:$HTTP_PORT/hello.txt")
expect_eq "curl -p: plain HTTP through a CONNECT tunnel" "$out" "hello from the origin"

curl -sS --max-time 10 -x "http://127.0.0.1:$P" --cacert "$CERT" \
	-o "$TEST_TMP/tls.out" "https://origin.test:$TLS_PORT/" || true
out=$(head -c 2000 "$TEST_TMP/tls.out")
expect_match "curl -x https: TLS through the tunnel, SNI matches" "$out" "s_server"

out=$($RAW "$P" "CONNECT 127.0.0.1:$HTTP_PORT HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "an IP literal allowed by a CIDR rule" "$out" "200 -"

# --- half-close and bulk both ways ------------------------------------------
# The origin reads until the client's EOF (which only a half-close relays),
# answers with the digest of what it got, then sends 3 MB and closes.
ECHO_PORT=$(free_port)
python3 -c '
import hashlib, socket, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4)
while True:
    c, _ = s.accept()
    h = hashlib.sha256(); n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        h.update(b); n += len(b)
    try:
        c.sendall(("%s %d\n" % (h.hexdigest(), n)).encode() + b"y" * 3000000)
    except OSError:
        pass  # a probe that connected and left
    c.close()
' "$ECHO_PORT" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$ECHO_PORT" || fail "echo origin did not start"
start_proxy bulk --resolve echo.test:127.0.0.1 --allow "echo.test:$ECHO_PORT" \
	--allow-cidr 127.0.0.1/32
out=$(python3 -c '
import hashlib, os, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"CONNECT echo.test:%s HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2].encode())
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
assert got.startswith(b"HTTP/1.1 200"), got
data = os.urandom(5000000)
s.sendall(data)
s.shutdown(socket.SHUT_WR)
back = b""
while True:
    b = s.recv(1 << 20)
    if not b: break
    back += b
line, _, rest = back.partition(b"\n")
ok = line.decode() == "%s %d" % (hashlib.sha256(data).hexdigest(), len(data))
print("ok" if ok and rest == b"y" * 3000000 else "bad: %r %d" % (line[:80], len(rest)))
' "$PROXY_PORT" "$ECHO_PORT" 2>&1 || true)
expect_eq "half-close: 5 MB up, EOF relayed, digest and 3 MB back" "$out" "ok"
stop_proxy "$PROXY_PID"
up=$(sqlite3 "$TEST_TMP/bulk.db" "select json_extract(detail,'$.bytes_up') || ' ' || json_extract(detail,'$.bytes_down') from events where kind='connection'")
expect_match "audit: bytes each way of the bulk tunnel" "$up" "^5000000 30000(6[5-9]|[7-9][0-9])$"

# --- refusals ----------------------------------------------------------------
refusal() { # WHAT TARGET WANT
	local got
	got=$($RAW "$P" "CONNECT $2 HTTP/1.1\r\nHost: $2\r\n\r\n")
	expect_eq "$1" "$got" "$3"
}
refusal "no rule: 403 denied" "other.test:443" "403 denied"
refusal "deny rule: 403 denied" "bad.origin.test:$HTTP_PORT" "403 denied"
refusal "allowed host, other port: 403 port-not-allowed" "origin.test:25" "403 port-not-allowed"
refusal "bad host name: 403 malformed-host" "exa_mple.test:443" "403 malformed-host"
refusal "no port: 403 malformed-host" "origin.test" "403 malformed-host"
refusal "port 0: 403 malformed-host" "origin.test:0" "403 malformed-host"
refusal "name to a loopback address: 403 non-public-address" "private.test:$HTTP_PORT" \
	"403 non-public-address"
refusal "IP literal without a CIDR rule: 403" "127.0.0.2:$HTTP_PORT" "403 non-public-address"
refusal "metadata address: 403" "169.254.169.254:80" "403 non-public-address"
refusal "nothing listening: 502 upstream-unreachable" "closed.test:$CLOSED_PORT" \
	"502 upstream-unreachable"
refusal "name that does not resolve: 502 resolve-failed" "nowhere.test:443" "502 resolve-failed"

out=$($RAW "$P" "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test\r\n\r\n" --body)
expect_match "refusal has a one-line body naming the rule and the flag" "$out" \
	"^403 denied tollgate: refused other.test:443 \\(default deny\\); allow with --allow other.test$"

out=$(curl -sS -o /dev/null -w '%{http_connect}' --max-time 10 -p -x "http://127.0.0.1:$P" \
	"http://other.test:$HTTP_PORT/" 2>/dev/null || true)
expect_eq "curl sees the 403 of a refused CONNECT" "$out" "403"

# --- 504: an origin that never answers the SYN ------------------------------
# A listener with a full accept queue drops further SYNs: the connect hangs.
BLACKHOLE_PORT=$(free_port)
python3 -c '
import socket, sys, time
port = int(sys.argv[1])
s = socket.socket(); s.bind(("127.0.0.1", port)); s.listen(0)
fill = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False)
    c.connect_ex(("127.0.0.1", port))
    fill.append(c)
time.sleep(0.5)
open(sys.argv[2], "w").close()
time.sleep(60)
' "$BLACKHOLE_PORT" "$TEST_TMP/blackhole.ready" &
defer "kill $! 2>/dev/null"
wait_for 10 test -e "$TEST_TMP/blackhole.ready" || fail "blackhole origin did not start"
start_proxy slow --resolve slow.test:127.0.0.1 --allow "slow.test:$BLACKHOLE_PORT" \
	--allow-cidr 127.0.0.1/32 --connect-timeout 1s
out=$($RAW "$PROXY_PORT" "CONNECT slow.test:$BLACKHOLE_PORT HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "an origin that never answers: 504" "$out" "504 upstream-timeout"

# --- audit -------------------------------------------------------------------
stop_proxy "$MAIN_PID"; rc=$STOP_RC
expect_eq "SIGTERM: exit 0" "$rc" "0"
n=$(audit_count "$DB" "kind='decision' and host='origin.test' and decision='allow'")
expect_match "audit: allow decisions recorded" "$n" '^[1-9][0-9]*$'
n=$(audit_count "$DB" "kind='decision' and host='other.test' and decision='deny' and reason='denied' and detail like '%default deny%'")
expect_match "audit: deny decision with reason and rule" "$n" '^[1-9][0-9]*$'
n=$(audit_count "$DB" "kind='connection' and host='origin.test' and port=$HTTP_PORT and detail like '%\"bytes_up\":%' and detail like '%\"upstream\":\"127.0.0.1:$HTTP_PORT\"%'")
expect_match "audit: connection row with bytes and upstream" "$n" '^[1-9][0-9]*$'
down=$(sqlite3 "$DB" "select json_extract(detail,'$.bytes_down') from events where kind='connection' and port=$HTTP_PORT limit 1")
expect_match "audit: bytes down counted" "$down" '^[1-9][0-9]+$'
n=$(audit_count "$DB" "reason='non-public-address'")
expect_match "audit: non-public-address refusal" "$n" '^[1-9][0-9]*$'
finish
