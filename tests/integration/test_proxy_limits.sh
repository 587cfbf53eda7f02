#!/usr/bin/env bash
# Malformed and hostile request heads over raw sockets (400, 431, smuggling
# shapes, slowloris) and the connection limits (503).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"

start_proxy heads --allow origin.test --head-timeout 1s --max-conns-per-client 3
P=$PROXY_PORT
PID=$PROXY_PID

raw() { # WHAT PAYLOAD WANT [RAW FLAGS]
	local what=$1 payload=$2 want=$3; shift 3
	expect_eq "$what" "$($RAW "$P" "$payload" "$@")" "$want"
}
raw "origin-form request: 400" "GET / HTTP/1.1\r\nHost: x\r\n\r\n" "400 malformed-request"
raw "garbage: 400" "HELLO\r\n\r\n" "400 malformed-request"
raw "bare LF: 400" "CONNECT origin.test:443 HTTP/1.1\nHost: x\n\n" "400 malformed-request"
raw "NUL in head: 400" "CONNECT origin.test:443 HTTP/1.1\r\nX: a\x00b\r\n\r\n" "400 malformed-request"
raw "obs-fold: 400" "GET http://origin.test/ HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n" \
	"400 malformed-request"
raw "CL and TE: 400" \
	"POST http://origin.test/ HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" \
	"400 malformed-request"
raw "differing CLs: 400" \
	"POST http://origin.test/ HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n" \
	"400 malformed-request"
raw "HTTP/2 request line: 400" "CONNECT origin.test:443 HTTP/2.0\r\n\r\n" "400 malformed-request"
raw "head over 16 KiB: 431" "CONNECT origin.test:443 HTTP/1.1\r\nHost: x\r\n\r\n" \
	"431 head-too-large" --repeat-header 200
raw "too many fields: 431" "CONNECT origin.test:443 HTTP/1.1\r\nHost: x\r\n\r\n" \
	"431 head-too-large" --repeat-header 101

# Slowloris: a head that never ends is closed after --head-timeout.
out=$($RAW "$P" "CONNECT origin.test:443 HTTP/1.1\r\nHost: x\r\n" --timeout 8)
expect_eq "unfinished head: closed by the head timeout" "$out" "closed"
grep -q 'head-timeout' "$PROXY_LOG" || true

# Per-client limit: 3 idle connections are held, the 4th gets 503.
python3 -c '
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
for h in held: h.sendall(b"CONN")  # a started head: the proxy keeps them
time.sleep(0.3)
s = socket.create_connection(("127.0.0.1", port), timeout=5)
got = b""
try:
    while b"\r\n\r\n" not in got:
        b = s.recv(4096)
        if not b: break
        got += b
except OSError:
    pass
print(got.split(b"\r\n")[0].decode() if got else "closed")
' "$P" >"$TEST_TMP/limit.out" 2>&1 || true
expect_match "4th connection of one client: 503" "$(cat "$TEST_TMP/limit.out")" '^HTTP/1.1 503 '

# After the held ones went away, the client is served again.
sleep 1.5
raw "under the limit again" "GET / HTTP/1.1\r\nHost: x\r\n\r\n" "400 malformed-request"

start_proxy total --allow origin.test --max-conns 1 --head-timeout 5s
python3 -c '
import socket, sys, time
port = int(sys.argv[1])
held = socket.create_connection(("127.0.0.1", port)); held.sendall(b"C")
time.sleep(0.3)
s = socket.create_connection(("127.0.0.1", port), timeout=5)
got = s.recv(4096)
print(got.split(b"\r\n")[0].decode() if got else "closed")
' "$PROXY_PORT" >"$TEST_TMP/total.out" 2>&1 || true
expect_match "over --max-conns: 503" "$(cat "$TEST_TMP/total.out")" '^HTTP/1.1 503 '

# Idle tunnels are closed after --idle-timeout, and audited so.
mkdir -p "$TEST_TMP/www"
start_http_origin "$TEST_TMP/www"
start_proxy idle --resolve origin.test:127.0.0.1 --allow "origin.test:$HTTP_PORT" \
	--allow-cidr 127.0.0.1/32 --idle-timeout 1s
out=$(python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=15)
s.sendall(b"CONNECT origin.test:%s HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2].encode())
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
t = time.monotonic()
rest = s.recv(4096)  # blocks until the proxy closes the idle tunnel
print("closed" if rest == b"" else "data")
' "$PROXY_PORT" "$HTTP_PORT" 2>&1 || true)
expect_eq "idle tunnel closed by --idle-timeout" "$out" "closed"
stop_proxy "$PROXY_PID"
expect_eq "idle tunnel: audited with reason idle-timeout" \
	"$(audit_count "$TEST_TMP/idle.db" "kind='connection' and reason='idle-timeout'")" 1

# Bad flags: one line, exit 125.
for args in "--listen nonsense" "--listen 127.0.0.1:1 --allow bad_host" \
	"--listen 127.0.0.1:1 --default allow" "--listen 127.0.0.1:1 --head-timeout soon" \
	"--listen 127.0.0.1:1 --max-conns 0" "--allow x.test"; do
	set +e
	# shellcheck disable=SC2086
	err=$(timeout 10 "$TOLLGATE" proxy $args --audit "$TEST_TMP/bad.db" 2>&1 >/dev/null); rc=$?
	set -e
	expect_eq "proxy $args: exit 125" "$rc" 125
	expect_eq "proxy $args: one line" "$(wc -l <<<"$err")" 1
done
kill -0 "$PID" && pass "the proxy survived all of it" || fail "the proxy died"
finish
