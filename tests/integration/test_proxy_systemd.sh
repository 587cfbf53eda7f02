#!/usr/bin/env bash
# tollgate proxy under systemd, with systemd's own tools and no init: the
# units cmake --install puts in place pass systemd-analyze verify; a real
# NOTIFY_SOCKET hears READY, RELOADING/READY around SIGHUP and STOPPING;
# systemd-socket-activate passes a TCP socket (curl through it) and a UDP
# one (dig).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v dig >/dev/null || skip "dig (bind9-dnsutils) is not installed"
command -v systemd-analyze >/dev/null || skip "systemd-analyze (the systemd package) is not installed"
command -v systemd-socket-activate >/dev/null ||
	skip "systemd-socket-activate (the systemd package) is not installed"
[[ -n ${TOLLGATE_BUILD:-} ]] || skip "TOLLGATE_BUILD (the build directory, set by ctest) is not set"

# --- cmake --install and systemd-analyze verify ---------------------------------
PREFIX=$TEST_TMP/prefix
cmake --install "$TOLLGATE_BUILD" --prefix "$PREFIX" >"$TEST_TMP/install.log" 2>&1 ||
	{ cat "$TEST_TMP/install.log" >&2; fail "cmake --install failed"; finish; }
UNITS=$PREFIX/lib/systemd/system
for u in tollgate-proxy.service tollgate-proxy.socket; do
	test -f "$UNITS/$u" && pass "installed: lib/systemd/system/$u" || fail "not installed: $UNITS/$u"
done
expect_match "the installed service starts the installed binary" \
	"$(grep '^ExecStart=' "$UNITS/tollgate-proxy.service")" \
	"^ExecStart=$PREFIX/bin/tollgate proxy --config /etc/tollgate/proxy.json\$"
# The units' Documentation= names the man page: look for it where the install put it.
man_check=(--man=no)
[[ -f $PREFIX/share/man/man1/tollgate-proxy.1 ]] && man_check=()
if MANPATH=$PREFIX/share/man systemd-analyze verify "${man_check[@]}" \
	"$UNITS/tollgate-proxy.service" "$UNITS/tollgate-proxy.socket" >"$TEST_TMP/verify.log" 2>&1; then
	pass "systemd-analyze verify accepts the units"
else
	cat "$TEST_TMP/verify.log" >&2
	fail "systemd-analyze verify refused the units"
fi
# The same check refuses a unit whose binary is missing: it looks at ExecStart.
sed "s#^ExecStart=[^ ]*#ExecStart=$TEST_TMP/no-such-binary#" "$UNITS/tollgate-proxy.service" \
	>"$TEST_TMP/tollgate-proxy.service"
systemd-analyze verify --man=no "$TEST_TMP/tollgate-proxy.service" >/dev/null 2>&1 &&
	fail "systemd-analyze verify accepted a missing ExecStart binary" ||
	pass "systemd-analyze verify checks ExecStart"

# --- sd_notify through a real NOTIFY_SOCKET -------------------------------------
NOTIFY=$TEST_TMP/listener.sock
NOTES=$TEST_TMP/notifications.txt
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(120)
with open(sys.argv[2], "w") as out:
    while True:
        try:
            msg = s.recv(4096)
        except socket.timeout:
            break
        out.write(msg.decode().replace("\n", " ") + "\n")
        out.flush()
' "$NOTIFY" "$NOTES" &
listener=$!
defer "kill $listener 2>/dev/null"
wait_for 20 test -S "$NOTIFY" || { fail "notify listener did not start"; finish; }

POLICY=$TEST_TMP/policy.json
echo '{"version": 1, "allow": ["a.test"]}' >"$POLICY"
export NOTIFY_SOCKET=$NOTIFY
start_proxy notify --policy "$POLICY"
unset NOTIFY_SOCKET
wait_for 10 grep -q '^READY=1' "$NOTES" || fail "no READY=1"
expect_match "READY=1 first, with a STATUS" "$(head -n 1 "$NOTES")" "^READY=1 STATUS=serving"
kill -HUP "$PROXY_PID"
# (a function: wait_for polls it; a $(grep -c) in its arguments is counted once)
readies_at_least() { (($(grep -c '^READY=1' "$NOTES") >= $1)); }
wait_for 10 readies_at_least 2 || fail "no READY=1 after SIGHUP"
expect_match "SIGHUP: RELOADING=1 (with MONOTONIC_USEC), then READY=1" \
	"$(sed -n 2,3p "$NOTES" | tr '\n' '|')" \
	"^RELOADING=1 MONOTONIC_USEC=[0-9]+\|READY=1 STATUS=serving; policy reloaded\|$"
stop_proxy "$PROXY_PID"
expect_eq "SIGTERM: the proxy exits 0" "$STOP_RC" 0
expect_match "SIGTERM: STOPPING=1" "$(sed -n 4p "$NOTES")" "^STOPPING=1 STATUS=draining"
expect_eq "nothing else was sent" "$(wc -l <"$NOTES")" 4

# --- socket activation: TCP for the proxy --------------------------------------
mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
H=$HTTP_PORT
DEAD_DNS_PORT=$(free_port)
common=(--upstream-dns "127.0.0.1:$DEAD_DNS_PORT" --allow "a.test:$H" --allow-cidr 127.0.0.1/32
	--resolve a.test:127.0.0.1 --resolve b.test:127.0.0.1)

# The passed socket is bound to the --listen address: it serves it, no second bind.
SP=$(free_port)
systemd-socket-activate -l "127.0.0.1:$SP" "$TOLLGATE" proxy --listen "127.0.0.1:$SP" \
	--audit "$TEST_TMP/sa.db" --control "$TEST_TMP/sa.sock" "${common[@]}" \
	2>"$TEST_TMP/sa.log" &
SA_PID=$!
defer "kill $SA_PID 2>/dev/null"
wait_for 10 port_open "$SP" || fail "systemd-socket-activate did not listen"
# systemd-socket-activate starts the proxy at the first connection, which waits in the backlog.
expect_eq "passed socket: an allowed origin is reached" \
	"$(curl -s --max-time 20 -x "127.0.0.1:$SP" "http://a.test:$H/hello.txt")" "hello from the origin"
expect_eq "passed socket: another host is refused" \
	"$(curl -s --max-time 20 -o /dev/null -w '%{http_code}' -x "127.0.0.1:$SP" "http://b.test:$H/hello.txt")" \
	"403"
expect_match "the log names the passed socket" "$(cat "$TEST_TMP/sa.log")" \
	"proxy on 127\.0\.0\.1:$SP/tcp \(passed by systemd\)"
grep -q "listening on 127.0.0.1:$SP" "$TEST_TMP/sa.log" &&
	fail "the --listen address was bound again" || pass "the --listen address was not bound again"
stop_proxy "$SA_PID"
expect_eq "socket-activated proxy exits 0 on SIGTERM" "$STOP_RC" 0

# A socket named "proxy" (FileDescriptorName=) with no --listen at all.
SP=$(free_port)
systemd-socket-activate -l "127.0.0.1:$SP" --fdname=proxy "$TOLLGATE" proxy \
	--audit "$TEST_TMP/named.db" --control "$TEST_TMP/named.sock" "${common[@]}" \
	2>"$TEST_TMP/named.log" &
NAMED_PID=$!
defer "kill $NAMED_PID 2>/dev/null"
wait_for 10 port_open "$SP" || fail "systemd-socket-activate did not listen"
expect_eq "named socket, no --listen: an allowed origin is reached" \
	"$(curl -s --max-time 20 -x "127.0.0.1:$SP" "http://a.test:$H/hello.txt")" "hello from the origin"
stop_proxy "$NAMED_PID"
expect_eq "named socket: exits 0 on SIGTERM" "$STOP_RC" 0

# Two named sockets: the proxy and the metrics endpoint.
MP=$(free_port)
systemd-socket-activate -l "127.0.0.1:$SP" -l "127.0.0.1:$MP" --fdname=proxy:metrics \
	"$TOLLGATE" proxy --audit "$TEST_TMP/met.db" --control "$TEST_TMP/met.sock" "${common[@]}" \
	2>"$TEST_TMP/met.log" &
MET_PID=$!
defer "kill $MET_PID 2>/dev/null"
wait_for 10 port_open "$MP" || fail "systemd-socket-activate did not listen for metrics"
expect_eq "named sockets: an allowed origin is reached through the proxy one" \
	"$(curl -s --max-time 20 -x "127.0.0.1:$SP" "http://a.test:$H/hello.txt")" "hello from the origin"
expect_match "named sockets: the metrics one serves /metrics" \
	"$(curl -s --max-time 20 "http://127.0.0.1:$MP/metrics")" 'tollgate_proxy_requests_total\{decision="allow"'
stop_proxy "$MET_PID"
expect_eq "metrics socket: exits 0 on SIGTERM" "$STOP_RC" 0

# A datagram socket named "proxy" is refused with a clear line.
bad_out=$(python3 -c '
import os, socket, subprocess, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
os.dup2(s.fileno(), 3)
r = subprocess.run(["bash", "-c", "LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=proxy exec \"$@\"", "-"]
                   + sys.argv[1:], pass_fds=(3,), capture_output=True, timeout=60)
print(r.returncode, r.stderr.decode().strip())
' "$TOLLGATE" proxy --audit "$TEST_TMP/bad.db" --control "$TEST_TMP/bad.sock")
expect_match "a datagram socket named proxy is refused" "$bad_out" \
	"^125 tollgate: proxy: socket activation: passed socket 'proxy' is a datagram socket"

# --- socket activation: UDP for the DNS server ---------------------------------
DP=$(free_port)
PP=$(free_port)
systemd-socket-activate --datagram -l "127.0.0.1:$DP" --fdname=dns "$TOLLGATE" proxy \
	--listen "127.0.0.1:$PP" --audit "$TEST_TMP/dns.db" --control "$TEST_TMP/dns.sock" \
	"${common[@]}" 2>"$TEST_TMP/dns.log" &
DNS_PID=$!
defer "kill $DNS_PID 2>/dev/null"
wait_for 10 grep -q "Listening on 127.0.0.1:$DP" "$TEST_TMP/dns.log" ||
	fail "systemd-socket-activate did not listen on UDP"
expect_eq "passed UDP socket: dig gets an allowed name" \
	"$(dig @127.0.0.1 -p "$DP" +short +tries=3 +time=5 a.test A)" "127.0.0.1"
expect_match "passed UDP socket: a name not allowed is refused" \
	"$(dig @127.0.0.1 -p "$DP" +tries=3 +time=5 c.test A)" "status: NXDOMAIN"
expect_match "the log names the passed DNS socket" "$(cat "$TEST_TMP/dns.log")" \
	"dns on 127\.0\.0\.1:$DP/udp \(passed by systemd\)"
stop_proxy "$DNS_PID"
expect_eq "DNS socket-activated proxy exits 0 on SIGTERM" "$STOP_RC" 0

finish
