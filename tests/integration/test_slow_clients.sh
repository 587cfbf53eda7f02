#!/usr/bin/env bash
# Slow and greedy clients cost their own slots, never everyone's:
# - a proxy started under `ulimit -n 200` lowers its caps to what 200 fds
#   allow; one client (127.0.0.2) holding 190 half-sent heads keeps only its
#   quarter of them, the rest get a 503 at once, and another client
#   (127.0.0.1) is served while they are held; the DNS server's TCP side
#   likewise, and a trickled DNS message is closed at its 10 s deadline;
# - 16 connections trickling a byte a second to /metrics do not keep a 17th
#   scrape from its answer, and each trickler is closed at the head deadline
#   (10 s from its connect), not kept as long as it trickles;
# - the review page and serve --listen hold at most a quarter of their
#   waiting connections per client (16 of 64), answer another client
#   meanwhile, and close a trickling request at its 30 s deadline.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v dig >/dev/null || skip "dig (bind9-dnsutils) is not installed"

mkdir -p "$TEST_TMP/www"
echo "hello-origin" >"$TEST_TMP/www/index.html"
start_http_origin "$TEST_TMP/www"

# --- caps under a 200-fd limit ------------------------------------------------
P=$(free_port)
D=$(free_port)
LOG=$TEST_TMP/low.log
# bash sets both limits and execs: $! is the proxy itself. A head timeout
# of 60 s: the other client must be served while the heads are held, not
# after they time out.
bash -c 'ulimit -n 200 && exec "$0" "$@"' "$TOLLGATE" proxy --listen "127.0.0.1:$P" \
	--upstream-dns "127.0.0.1:$(free_port)" --audit "$TEST_TMP/low.db" \
	--control "$TEST_TMP/low.sock" --resolve origin.test:127.0.0.1 --dns-listen "127.0.0.1:$D" \
	--allow "origin.test:$HTTP_PORT" --allow-cidr 127.0.0.1/32 --head-timeout 60s \
	2>"$LOG" &
LOW=$!
defer "kill $LOW 2>/dev/null"
wait_for 10 port_open "$P" || { cat "$LOG" >&2; fail "the proxy did not start under ulimit -n 200"; finish; }
expect_match "the proxy runs with 200 fds" "$(grep '^Max open files' "/proc/$LOW/limits")" \
	'^Max open files +200 +200 '
# 200 fds: a reserve of 50, three quarters of the other 150 at two fds a
# connection is 56 connections, a quarter of them 14 per client.
expect_match "the caps fit the file limit (log)" "$(cat "$LOG")" \
	'at most 56 connections, 14 per client'

# The greedy client: 190 connections from 127.0.0.2, each sending half a
# head, held until $TEST_TMP/stop appears (30 s at most).
python3 - "$P" "$TEST_TMP/stop" "$TEST_TMP/greedy.out" <<'EOF' &
import os, select, socket, sys, time
port, stop, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
conns = []
for _ in range(190):
    s = socket.socket()
    s.settimeout(5)
    s.bind(("127.0.0.2", 0))
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"CONNECT origin.test:80 HTTP/1.1\r\nHost: origin.test")
        conns.append(s)
    except OSError:
        s.close()
# Those over the cap are answered (503) and closed at once; give them 3 s.
answered = {}
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    r, _, _ = select.select([c for c in conns if c not in answered], [], [], 0.2)
    for c in r:
        try:
            answered[c] = c.recv(64).split(b"\r\n")[0].decode()
        except OSError:
            answered[c] = "reset"
held = len(conns) - len(answered)
with open(out + ".tmp", "w") as f:
    f.write("%d %d %s\n" % (len(conns), held, ",".join(sorted(set(answered.values())))))
os.rename(out + ".tmp", out)
deadline = time.monotonic() + 30
while not os.path.exists(stop) and time.monotonic() < deadline:
    time.sleep(0.05)
# Still held at the end: none of them timed out or was closed meanwhile.
r, _, _ = select.select([c for c in conns if c not in answered], [], [], 0)
with open(out + ".end", "w") as f:
    f.write("%d\n" % (held - len(r)))
EOF
GREEDY=$!
defer "kill $GREEDY 2>/dev/null"
wait_for 20 test -e "$TEST_TMP/greedy.out" || fail "the greedy client did not report"
expect_eq "190 half-sent heads from one client: 14 held, the rest 503" \
	"$(cat "$TEST_TMP/greedy.out" 2>/dev/null)" "190 14 HTTP/1.1 503 Service Unavailable"
expect_match "the refusals name the per-client cap (log)" "$(cat "$LOG")" \
	'over the limit of 14 connections per client'
# The other client, while the heads are held.
expect_eq "another client is served meanwhile" \
	"$(curl -sS --max-time 10 -x "http://127.0.0.1:$P" "http://origin.test:$HTTP_PORT/")" \
	"hello-origin"
touch "$TEST_TMP/stop"
wait "$GREEDY" || true
expect_eq "the greedy client's heads were held throughout" "$(cat "$TEST_TMP/greedy.out.end" 2>/dev/null)" 14
if grep -q 'accept.*Too many open files' "$LOG"; then
	fail "accept ran out of fds: a cap did not hold"
else
	checks=$((checks + 1)); pass "accept never ran out of fds"
fi
# The DNS server's TCP side under the same limit: a tenth of the 150 fds is
# 15 connections, 3 per client; a message must be whole within 10 s of its
# first byte however it trickles.
out=$(timeout 40 python3 - "$D" <<'EOF'
import select, socket, sys, time
port = int(sys.argv[1])
def gone(s):
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(4096) == b""
    except OSError:
        return True
idle = []
for _ in range(10):
    s = socket.socket()
    s.settimeout(5)
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", port))
    idle.append(s)
t = socket.create_connection(("127.0.0.1", port), timeout=5)
t.setblocking(False)
msg = b"\x00\x40" + b"\x12\x34" * 32
start, sent, closed = time.monotonic(), 0, None
while time.monotonic() - start < 25 and closed is None:
    if gone(t):
        closed = time.monotonic() - start
    elif time.monotonic() - start >= sent and sent < len(msg):
        t.send(msg[sent:sent + 1])
        sent += 1
    time.sleep(0.05)
    if sent == 3:
        held = sum(1 for s in idle if not gone(s))
print(held, "%.0f" % (closed if closed is not None else -1))
EOF
)
read -r held closed <<<"$out"
expect_eq "DNS over TCP: 10 connections from one client, 3 held" "$held" 3
if [[ -n $closed ]] && ((closed >= 9 && closed <= 14)); then
	checks=$((checks + 1)); pass "DNS over TCP: a trickled message is closed at its 10 s deadline (${closed} s)"
else
	fail "DNS over TCP: a trickled message closed at '${closed}' s (want about 10)"
fi
expect_match "DNS over TCP: another client is answered" \
	"$(dig @127.0.0.1 -p "$D" +tcp +tries=1 +time=5 denied.example.com)" 'status: NXDOMAIN'
stop_proxy "$LOW"
expect_eq "the proxy under 200 fds exits cleanly" "$STOP_RC" 0

# --- a stated cap per client: a quarter of --max-conns --------------------------
start_proxy caps --max-conns 20 --max-conns-per-client 100
expect_match "--max-conns-per-client 100 of 20: lowered to 5 (log)" "$(cat "$PROXY_LOG")" \
	'at most 20 connections, 5 per client'
out=$(timeout 30 python3 - "$PROXY_PORT" <<'EOF'
import select, socket, sys, time
port = int(sys.argv[1])
conns = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
answered = set()
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    r, _, _ = select.select([c for c in conns if c not in answered], [], [], 0.2)
    answered.update(r)
print(len(conns) - len(answered))
EOF
)
expect_eq "8 connections from one client: 5 held" "$out" 5
stop_proxy "$PROXY_PID"

# --- 16 tricklers and a 17th scrape --------------------------------------------
MP=$(free_port)
start_proxy metrics --metrics-listen "127.0.0.1:$MP"
wait_for 10 port_open "$MP" || fail "metrics did not start"
out=$(timeout 60 python3 - "$MP" <<'EOF'
import select, socket, sys, time
port = int(sys.argv[1])
head = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 100
start = time.monotonic()
tricklers = []
for _ in range(16):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    tricklers.append({"s": s, "at": time.monotonic(), "sent": 0, "closed": None})
def tick():
    now = time.monotonic()
    for t in tricklers:
        if t["closed"] is not None:
            continue
        r, _, _ = select.select([t["s"]], [], [], 0)
        gone = False
        if r:
            try:
                gone = t["s"].recv(4096) == b""
            except OSError:
                gone = True
        if not gone and now - t["at"] >= t["sent"]:
            try:
                t["s"].send(head[t["sent"]:t["sent"] + 1])
                t["sent"] += 1
            except OSError:
                gone = True
        if gone:
            t["closed"] = now - t["at"]
# 3 s of trickling, then a whole scrape.
while time.monotonic() - start < 3:
    tick()
    time.sleep(0.05)
c = socket.create_connection(("127.0.0.1", port), timeout=5)
c.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
status = c.recv(64).split(b"\r\n")[0].decode()
c.close()
# Trickle on (a byte a second) for 25 s at most, until all are closed.
while time.monotonic() - start < 28 and any(t["closed"] is None for t in tricklers):
    tick()
    time.sleep(0.05)
closed = sorted(t["closed"] for t in tricklers if t["closed"] is not None)
at_deadline = sum(1 for x in closed if 8.5 <= x <= 14)
print(status)
print(len(closed), at_deadline, "%.1f" % (max(closed) if closed else -1))
EOF
)
expect_eq "16 tricklers: a 17th scrape is answered" "$(sed -n 1p <<<"$out")" "HTTP/1.1 200 OK"
read -r nclosed at_deadline longest <<<"$(sed -n 2p <<<"$out")"
expect_eq "every trickler is closed (none lasts as long as it trickles)" "$nclosed" 16
# One gave way to the 17th scrape at once; the others met the deadline.
if ((at_deadline >= 15)); then
	checks=$((checks + 1)); pass "$at_deadline tricklers closed at the 10 s head deadline (longest ${longest} s)"
else
	fail "$at_deadline tricklers closed between 8.5 and 14 s (want 15; longest ${longest} s)"
fi
stop_proxy "$PROXY_PID"

# --- the review page and serve --listen: caps per client, request deadline ------
export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl
mkdir -p "$TOLLGATE_CONTROL_DIR"
UIP=$(free_port)
"$TOLLGATE" ui --listen "127.0.0.1:$UIP" --audit "$TEST_TMP/ui.db" >"$TEST_TMP/ui.out" \
	2>"$TEST_TMP/ui.log" &
UI_PID=$!
defer "kill $UI_PID 2>/dev/null"
SVP=$(free_port)
"$TOLLGATE" serve --listen "127.0.0.1:$SVP" --token-file "$TEST_TMP/token" --no-network \
	--audit "$TEST_TMP/serve.db" </dev/null >"$TEST_TMP/serve.out" 2>"$TEST_TMP/serve.log" &
SERVE_PID=$!
defer "kill $SERVE_PID 2>/dev/null"
wait_for 15 port_open "$UIP" || { cat "$TEST_TMP/ui.log" >&2; fail "the review page did not start"; }
wait_for 15 port_open "$SVP" || { cat "$TEST_TMP/serve.log" >&2; fail "serve --listen did not start"; }
out=$(timeout 90 python3 - "$UIP" "$SVP" <<'EOF'
import select, socket, sys, time
ports = {"ui": int(sys.argv[1]), "serve": int(sys.argv[2])}
start = time.monotonic()
def gone(s):
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(4096) == b""
    except OSError:
        return True
res = {}
tricklers, idle = {}, {}
for name, port in ports.items():
    t = socket.create_connection(("127.0.0.1", port), timeout=5)
    t.setblocking(False)
    tricklers[name] = {"s": t, "sent": 0, "closed": None}
    idle[name] = []
    for _ in range(20):
        s = socket.socket()
        s.settimeout(5)
        s.bind(("127.0.0.3", 0))
        s.connect(("127.0.0.1", port))
        idle[name].append(s)
head = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100
def tick():
    now = time.monotonic()
    for name, t in tricklers.items():
        if t["closed"] is not None:
            continue
        if gone(t["s"]):
            t["closed"] = now - start
            continue
        if now - start >= t["sent"]:
            try:
                t["s"].send(head[t["sent"]:t["sent"] + 1])
                t["sent"] += 1
            except OSError:
                t["closed"] = now - start
while time.monotonic() - start < 3:
    tick()
    time.sleep(0.05)
for name, port in ports.items():
    held = sum(1 for s in idle[name] if not gone(s))
    # Another client meanwhile: a whole request gets an answer.
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
    line = c.recv(64).split(b"\r\n")[0].decode()
    c.close()
    res[name] = [held, line.startswith("HTTP/1.1 ")]
while time.monotonic() - start < 45 and any(t["closed"] is None for t in tricklers.values()):
    tick()
    time.sleep(0.05)
for name in ports:
    left = sum(1 for s in idle[name] if not gone(s))
    closed = tricklers[name]["closed"]
    print(name, res[name][0], "answered" if res[name][1] else "unanswered",
          "%.0f" % (closed if closed is not None else -1), left)
EOF
)
for name in ui serve; do
	read -r _ held answered closed left <<<"$(grep "^$name " <<<"$out")"
	expect_eq "$name: 20 waiting connections from one client: 16 held" "$held" 16
	expect_eq "$name: another client is answered meanwhile" "$answered" answered
	if [[ -n $closed ]] && ((closed >= 27 && closed <= 36)); then
		checks=$((checks + 1)); pass "$name: a trickling request is closed at its 30 s deadline (${closed} s)"
	else
		fail "$name: a trickling request closed at '${closed}' s (want about 30)"
	fi
	expect_eq "$name: the waiting connections are closed at the deadline too" "$left" 0
done
stop_proxy "$UI_PID"
stop_proxy "$SERVE_PID"
# A sanitizer build's report, had any of them one.
if grep -l 'Sanitizer' "$TEST_TMP"/*.log; then fail "a sanitizer reported an error"; fi
finish
