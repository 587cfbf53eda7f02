#!/usr/bin/env bash
# Running out of fds does not take the gate down: a `tollgate proxy` whose
# RLIMIT_NOFILE is lowered (prlimit) is flooded with idle TCP connections on
# its proxy and DNS ports until accept() fails with EMFILE. Its listeners
# pause instead of spinning (a few warnings, not thousands), and once the
# flood ends it serves an HTTP request and a DNS question over TCP again.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"

command -v prlimit >/dev/null || skip "prlimit (util-linux)"
command -v dig >/dev/null || skip "dig (bind9-dnsutils)"

mkdir -p "$TEST_TMP/www"
echo "hello-origin" >"$TEST_TMP/www/index.html"
start_http_origin "$TEST_TMP/www"
D=$(free_port)
start_proxy flood --dns-listen "127.0.0.1:$D" --resolve origin.test:127.0.0.1 \
	--allow "origin.test:$HTTP_PORT" --allow-cidr 127.0.0.1/32
P=$PROXY_PORT
X=(-sS --max-time 20 -x "http://127.0.0.1:$P")
U=http://origin.test:$HTTP_PORT/

expect_eq "before the flood: served" "$(curl "${X[@]}" "$U")" "hello-origin"

# Room for a few more fds than the proxy holds now: the flood exhausts it.
open_fds=$(ls "/proc/$PROXY_PID/fd" | wc -l)
prlimit --pid "$PROXY_PID" --nofile=$((open_fds + 8)):$((open_fds + 8)) ||
	skip "prlimit cannot lower another process's RLIMIT_NOFILE here"

# The flood: 100 idle connections to each port, held until $TEST_TMP/stop
# appears (at most 30 s). The kernel completes the handshakes from the
# backlog whether or not the proxy can accept them.
python3 - "$P" "$D" "$TEST_TMP/stop" <<'EOF' &
import os, socket, sys, time
held = []
for port in (int(sys.argv[1]), int(sys.argv[2])):
    for _ in range(100):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            held.append(s)
        except OSError:
            s.close()
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
    time.sleep(0.05)
for s in held:
    s.close()
EOF
FLOOD=$!
defer "kill $FLOOD 2>/dev/null"

wait_for 15 grep -q 'accept.*Too many open files' "$PROXY_LOG" ||
	fail "the flood did not exhaust the proxy's fds"
# Let a spinning loop show itself: it would write a warning per turn.
sleep 2
warnings=$(grep -c 'accept.*Too many open files' "$PROXY_LOG" || true)
kill -0 "$PROXY_PID" 2>/dev/null && alive=yes || alive=no
expect_eq "out of fds: the proxy is still running" "$alive" yes
if ((warnings >= 1 && warnings <= 6)); then
	checks=$((checks + 1)); pass "out of fds: $warnings warning(s), at most one a second"
else
	fail "out of fds: $warnings warnings (want 1 to 6: the listeners pause, warnings are rate-limited)"
fi
touch "$TEST_TMP/stop"
wait "$FLOOD" || true

# The idle connections it accepted go with the flood: served again. The
# paused listeners resume after 100 ms, and curl retries nothing, so wait
# for the first success (bounded), then check each answer.
wait_for 10 curl -sf "${X[@]}" -o /dev/null "$U" || true
expect_eq "after the flood: an HTTP request is served" "$(curl "${X[@]}" "$U")" "hello-origin"
expect_match "after the flood: a DNS question over TCP is answered" \
	"$(dig @127.0.0.1 -p "$D" +tcp +tries=1 +time=5 denied.example.com)" 'status: NXDOMAIN'

stop_proxy "$PROXY_PID"
expect_eq "the proxy exits cleanly after it all" "$STOP_RC" 0
if grep -q 'Sanitizer' "$PROXY_LOG"; then fail "a sanitizer reported an error"; fi
if ((failures > 0)); then echo "--- proxy log:" >&2; tail -30 "$PROXY_LOG" >&2; fi
finish
