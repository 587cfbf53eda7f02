#!/usr/bin/env bash
# The event bus end to end: `tollgate events` subscribed to a real `tollgate
# proxy` (CONNECT, forward and DNS decisions of real curl and dig on loopback,
# an approval decided with `tollgate approve`), and `tollgate run` publishing
# resource.exceeded (an audit row) and artifact.signed (through run's control
# socket).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v dig >/dev/null || skip "dig is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"

mkdir -p "$TEST_TMP/www" "$TEST_TMP/run"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
start_http_origin "$TEST_TMP/www"
export TOLLGATE_CONTROL_DIR=$TEST_TMP/run

# py CODE LINE...: evaluates CODE with l the list of parsed JSON lines.
lines_eval() {
	python3 -c '
import json,sys
l=[json.loads(x) for x in open(sys.argv[2]) if x.strip()]
print(eval(sys.argv[1]))' "$1" "$2"
}
# events_bg NAME ARGS...: `tollgate events` in the background, waits until it
# has subscribed; NAME.out gets its lines, NAME.err its stderr. Sets EV_PID.
events_bg() {
	local name=$1; shift
	"$TOLLGATE" events "$@" >"$TEST_TMP/$name.out" 2>"$TEST_TMP/$name.err" &
	EV_PID=$!
	defer "kill $EV_PID 2>/dev/null"
	if ! wait_for 10 grep -q "subscribed to gateway" "$TEST_TMP/$name.err"; then
		cat "$TEST_TMP/$name.err" >&2
		fail "$name: tollgate events did not subscribe"
	fi
}
# events_wait: waits (bounded) for EV_PID to exit; sets EV_RC.
events_wait() {
	for _ in $(seq 1 150); do kill -0 "$EV_PID" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$EV_PID" 2>/dev/null && kill "$EV_PID"
	set +e; wait "$EV_PID"; EV_RC=$?; set -e
}

# ---- errors ------------------------------------------------------------------
set +e
err=$("$TOLLGATE" events 2>&1 >/dev/null); rc=$?
set -e
expect_eq "no gateway: exit 1" "$rc" 1
expect_match "no gateway: one line saying so" "$err" '^tollgate: events: no running gateway'
set +e
err=$("$TOLLGATE" events --type egress.nonsense --socket /nonexistent 2>&1 >/dev/null); rc=$?
set -e
expect_eq "unknown type: exit 125" "$rc" 125
expect_match "unknown type: named" "$err" "^tollgate: events: --type egress.nonsense: unknown event type"
set +e
"$TOLLGATE" events --count 0 >/dev/null 2>&1; rc=$?
set -e
expect_eq "--count 0: exit 125" "$rc" 125

DNS_PORT=$(free_port)
start_proxy main --allow "a.test:$HTTP_PORT" --allow a.test --resolve a.test:127.0.0.1 \
	--ask "c.test:$HTTP_PORT" --resolve c.test:127.0.0.1 \
	--allow-cidr 127.0.0.0/8 --dns-listen "127.0.0.1:$DNS_PORT"
P=$PROXY_PORT
SOCK=$TEST_TMP/main.sock

set +e
err=$("$TOLLGATE" events --pid 999999999 2>&1 >/dev/null); rc=$?
set -e
expect_eq "--pid of no gateway: exit 1" "$rc" 1
expect_match "--pid of no gateway: says so" "$err" '^tollgate: events: no running gateway with pid 999999999'

# The control socket refuses an unknown name itself (a client other than ours).
ans=$(python3 - "$SOCK" <<'EOF'
import socket,sys
s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
s.sendall(b'{"op":"subscribe","events":["egress.denied","nope.never"]}\n')
print(s.makefile().readline().strip())
EOF
)
expect_eq "subscribe with an unknown type: an error answer" "$ans" \
	"{\"ok\":false,\"error\":\"subscribe: unknown event type 'nope.never'\"}"
ans=$(python3 - "$SOCK" <<'EOF'
import socket,sys,json
s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
s.sendall(b'{"op":"subscribe","events":["*"]}\n')
a=json.loads(s.makefile().readline())
print(a["ok"], a["subscribed"], len(a["events"]))
EOF
)
expect_eq "subscribe to *: every type listed" "$ans" "True True 13"

# ---- proxy decisions: CONNECT allowed, CONNECT refused, forward, DNS ------------
events_bg dec --socket "$SOCK" --count 5 --type egress.approved --type egress.denied
set +e
body=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$P" "http://a.test:$HTTP_PORT/hello.txt")
code=$(curl -s --max-time 10 -p -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_connect}' \
	"http://refused.test:$HTTP_PORT/")
fwd=$(curl -s --max-time 10 -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_code}' \
	"http://a.test:$HTTP_PORT/hello.txt")
set -e
expect_eq "allowed CONNECT: the origin's body" "$body" "hello from the origin"
expect_eq "refused CONNECT: 403" "$code" 403
expect_eq "allowed forward: 200" "$fwd" 200
dig +short +time=3 +tries=1 -p "$DNS_PORT" @127.0.0.1 a.test A >/dev/null 2>&1 || true
dig +short +time=3 +tries=1 -p "$DNS_PORT" @127.0.0.1 refused.test A >/dev/null 2>&1 || true
events_wait
expect_eq "decisions: events exits 0 after --count 5" "$EV_RC" 0
F=$TEST_TMP/dec.out
expect_eq "decisions: 5 lines" "$(lines_eval 'len(l)' "$F")" 5
expect_eq "decisions: the line's members" \
	"$(lines_eval 'sorted(l[0].keys())' "$F")" "['payload', 'sandbox', 'seq', 'ts_ms', 'type']"
expect_eq "allowed CONNECT: egress.approved with host, port, via" \
	"$(lines_eval '[(e["type"], e["payload"]["host"], e["payload"]["port"], e["payload"]["decision"], e["payload"]["via"], e["sandbox"]) for e in l][0]' "$F")" \
	"('egress.approved', 'a.test', $HTTP_PORT, 'allow', 'connect', '127.0.0.1')"
expect_eq "refused CONNECT: egress.denied with the reason" \
	"$(lines_eval '[(e["type"], e["payload"]["host"], e["payload"]["decision"], e["payload"]["reason"], e["payload"]["via"]) for e in l][1]' "$F")" \
	"('egress.denied', 'refused.test', 'deny', 'denied', 'connect')"
expect_eq "forward: egress.approved via forward" \
	"$(lines_eval '[(e["type"], e["payload"]["host"], e["payload"]["via"]) for e in l][2]' "$F")" \
	"('egress.approved', 'a.test', 'forward')"
expect_eq "DNS: an allowed and a refused query" \
	"$(lines_eval '[(e["type"], e["payload"]["host"], e["payload"]["via"], e["payload"]["type"]) for e in l[3:]]' "$F")" \
	"[('egress.approved', 'a.test', 'dns', 'A'), ('egress.denied', 'refused.test', 'dns', 'A')]"
expect_eq "sequence numbers increase" \
	"$(lines_eval 'all(a["seq"] < b["seq"] for a, b in zip(l, l[1:]))' "$F")" "True"
# Egress decisions are audited as rows of their own, never twice through the bus.
expect_eq "no egress.* rows in the audit log" \
	"$(audit_count "$TEST_TMP/main.db" "kind like 'egress.%'")" 0

# ---- an approval: egress.requested, then egress.approved ---------------------
events_bg ask --socket "$SOCK" --count 2 --type egress.requested --type egress.approved
curl -s --max-time 30 -p -x "http://127.0.0.1:$P" -o /dev/null -w '%{http_connect}' \
	"http://c.test:$HTTP_PORT/hello.txt" >"$TEST_TMP/ask.code" 2>/dev/null &
CURL_PID=$!
defer "kill $CURL_PID 2>/dev/null"
has_pending() { "$TOLLGATE" pending --json --control "$SOCK" | grep -q '"id"'; }
wait_for 10 has_pending || fail "c.test never became pending"
id=$("$TOLLGATE" pending --json --control "$SOCK" | head -n 1 |
	python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["id"])')
"$TOLLGATE" approve "$id" --control "$SOCK" >/dev/null
set +e; wait "$CURL_PID"; set -e
expect_eq "approved request: CONNECT 200" "$(cat "$TEST_TMP/ask.code")" 200
events_wait
F=$TEST_TMP/ask.out
expect_eq "approval: exit 0 after 2 events" "$EV_RC" 0
expect_eq "approval: requested, then approved by the person" \
	"$(lines_eval '[(e["type"], e["payload"]["host"], e["payload"]["port"], e["payload"]["id"], e["payload"]["via"], e["payload"]["reason"]) for e in l]' "$F")" \
	"[('egress.requested', 'c.test', $HTTP_PORT, $id, 'approval', 'approval-pending'), ('egress.approved', 'c.test', $HTTP_PORT, $id, 'approval', 'approved')]"
expect_eq "approval: the scope of the answer" "$(lines_eval 'l[1]["payload"]["scope"]' "$F")" once

# The gateway going away ends `tollgate events` (1: fewer than --count).
events_bg gone --socket "$SOCK" --count 3
stop_proxy "$PROXY_PID"
events_wait
expect_eq "the proxy exits 0 on SIGTERM (its bus and subscribers freed)" "$STOP_RC" 0
expect_eq "gateway gone: events exits 1 before --count" "$EV_RC" 1
expect_match "gateway gone: says so" "$(cat "$TEST_TMP/gone.err")" "the gateway went away after 0 of 3 events"

# ---- finding the gateway: --pid, and the only one running ----------------------
P2=$(free_port)
"$TOLLGATE" proxy --listen "127.0.0.1:$P2" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
	--audit "$TEST_TMP/second.db" --allow "a.test:$HTTP_PORT" --resolve a.test:127.0.0.1 \
	--allow-cidr 127.0.0.0/8 2>"$TEST_TMP/second.log" &
SECOND=$!
defer "kill $SECOND 2>/dev/null"
wait_for 10 port_open "$P2" || fail "second proxy did not start"
# The main proxy's socket is elsewhere (--control): this one is the only one found.
events_bg bypid --pid "$SECOND" --count 1
BYPID=$EV_PID
events_bg found --count 1 --type egress.approved
curl -s --max-time 10 -p -x "http://127.0.0.1:$P2" -o /dev/null "http://a.test:$HTTP_PORT/hello.txt" || true
events_wait
expect_eq "the only gateway found: exit 0" "$EV_RC" 0
expect_eq "the only gateway found: its event" \
	"$(lines_eval '[(e["type"], e["payload"]["host"]) for e in l]' "$TEST_TMP/found.out")" "[('egress.approved', 'a.test')]"
expect_match "the only gateway found: named on stderr" "$(cat "$TEST_TMP/found.err")" "subscribed to gateway $SECOND "
EV_PID=$BYPID
events_wait
expect_eq "--pid: exit 0" "$EV_RC" 0
expect_eq "--pid: the gateway's event" "$(lines_eval '[e["type"] for e in l]' "$TEST_TMP/bypid.out")" "['egress.approved']"
stop_proxy "$SECOND"
expect_eq "second proxy exits 0" "$STOP_RC" 0

# ---- tollgate run: resource.exceeded and artifact.signed ----------------------
if [[ $(id -u) -ne 0 ]]; then
	finish
	exit
fi
[[ -x /usr/bin/python3 ]] || { finish; exit; }

set +e
timeout 60 "$TOLLGATE" run --no-network --audit "$TEST_TMP/run.db" --cpu 1 -- \
	python3 -c 'while True: pass' >/dev/null 2>&1
rc=$?
set -e
expect_eq "--cpu hog: killed by SIGXCPU" "$rc" $((128 + 24))
expect_eq "resource.exceeded: one audit row, limit cpu" \
	"$(sqlite3 "$TEST_TMP/run.db" "select count(*), json_extract(detail, '\$.limit'), json_extract(detail, '\$.value') from events where kind = 'resource.exceeded'")" \
	"1|cpu|1"
expect_eq "resource.exceeded: the sandbox named" \
	"$(sqlite3 "$TEST_TMP/run.db" "select count(*) from events e where kind = 'resource.exceeded' and sandbox = (select sandbox from events where kind = 'sandbox.start')")" 1
set +e
timeout 60 "$TOLLGATE" run --no-network --audit "$TEST_TMP/run.db" --cpu 5 -- true
set -e
# --ram: the OOM killer ends a writer to /tmp (memory too) inside the cgroup.
if grep -qE '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup ||
	grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	set +e
	timeout 60 "$TOLLGATE" run --no-network --audit "$TEST_TMP/mem.db" --ram 64 -- \
		sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=128 2>/dev/null' >/dev/null 2>&1
	rc=$?
	set -e
	expect_eq "--ram: the writer is OOM-killed" "$rc" 137
	expect_eq "resource.exceeded: limit memory" \
		"$(sqlite3 "$TEST_TMP/mem.db" "select json_extract(detail, '\$.limit'), json_extract(detail, '\$.value') from events where kind = 'resource.exceeded'")" \
		"memory|64"
else
	echo "note: no memory cgroup controller; the memory resource.exceeded check did not run"
fi
expect_eq "a command within its limits: no new resource.exceeded row" \
	"$(audit_count "$TEST_TMP/run.db" "kind = 'resource.exceeded'")" 1

# artifact.signed reaches a subscriber of run's control socket; it is not audited
# as a bus row (the "artifact" row is the record). The sandbox waits for a file
# the test makes once `tollgate events` listens, so nothing is timed.
OUT=$TEST_TMP/out
RSOCK=$TEST_TMP/run.sock
timeout 60 "$TOLLGATE" run --audit "$TEST_TMP/run2.db" --control "$RSOCK" --out "$OUT" -- \
	sh -c 'i=0; while [ ! -e /out/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	printf hello >/out/a.txt' >"$TEST_TMP/run2.log" 2>&1 &
RUN_PID=$!
defer "kill $RUN_PID 2>/dev/null"
if wait_for 20 test -S "$RSOCK"; then
	events_bg signed --socket "$RSOCK" --count 1 --type artifact.signed
	touch "$OUT/go"
	set +e; wait "$RUN_PID"; rrc=$?; set -e
	events_wait
	expect_eq "run --out: exit 0" "$rrc" 0
	expect_eq "artifact.signed: events exits 0" "$EV_RC" 0
	expect_eq "artifact.signed: files and names" \
		"$(lines_eval '[(e["type"], e["payload"]["files"], e["payload"]["names"], e["sandbox"] is not None) for e in l]' "$TEST_TMP/signed.out")" \
		"[('artifact.signed', 2, ['a.txt', 'go'], True)]"
	expect_eq "artifact.signed is not an audit row of its own" \
		"$(audit_count "$TEST_TMP/run2.db" "kind = 'artifact.signed'") $(audit_count "$TEST_TMP/run2.db" "kind = 'artifact'")" \
		"0 1"
else
	cat "$TEST_TMP/run2.log" >&2
	fail "run --control: no control socket"
fi

# Under the sanitizers, a leak or bad access shows up in these logs.
expect_eq "no sanitizer report in any log" \
	"$(cat "$TEST_TMP"/*.log "$TEST_TMP"/*.err 2>/dev/null | grep -c Sanitizer || true)" 0

finish
