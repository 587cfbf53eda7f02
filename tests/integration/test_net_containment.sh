#!/usr/bin/env bash
# The network gate seen from inside `tollgate run`: the allowed name is
# reached through the proxy; every other way out a program would try fails,
# and each check names the way it tried. Packets go only to loopback, to the
# host's own addresses, and to the hub and sandboxes this test's runs make.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, veth)"
for tool in curl dig python3 ip; do
	command -v "$tool" >/dev/null || skip "$tool is not installed"
done
"$TOLLGATE" run --help >/dev/null 2>&1 || skip "tollgate run is not built"
python3 -c 'import socket' 2>/dev/null || skip "python3 cannot import socket"

# A bad address pool is tollgate's own failure: one line naming it, 125.
for pool in 127.0.0.0/16 10.77.0.0/31 10.77.0.1/16 not-a-pool; do
	set +e
	err=$("$TOLLGATE" run --pool "$pool" -- true 2>&1 >/dev/null); rc=$?
	set -e
	expect_eq "--pool $pool: exit status" "$rc" 125
	expect_eq "--pool $pool: one line" "$(wc -l <<<"$err")" 1
	expect_match "--pool $pool: names it" "$err" "^tollgate: .*'$pool'"
done

probe_src=$(cat "$TOLLGATE_SRC/tests/integration/net_probe.py")
links_before=$(ls /sys/class/net | wc -l)

# The origin: a real HTTP server on the host's loopback.
start_origin

# The host's own non-loopback IPv4 address (the only "outside" we may aim at),
# with a TCP service and UDP and DNS recorders on it and on loopback.
host_addr=$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); print a[1]; exit}')
recorder=$TEST_TMP/recorder.py
cat >"$recorder" <<'EOF'
# Listens on ADDR PORT (TCP and UDP); appends one line per contact to LOG.
import socket, sys, threading, time
addr, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def note(what):
    with open(log, "a") as f:
        f.write(what + "\n")
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((addr, port)); t.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((addr, port))
def tcp():
    while True:
        c, peer = t.accept(); note("tcp %s" % peer[0]); c.close()
def udp():
    while True:
        d, peer = u.recvfrom(2048); note("udp %s" % peer[0])
threading.Thread(target=tcp, daemon=True).start()
threading.Thread(target=udp, daemon=True).start()
open(log, "a").close()
time.sleep(250)
EOF
svc_port=$(free_port)
: >"$TEST_TMP/contacts"
python3 "$recorder" 127.0.0.1 "$svc_port" "$TEST_TMP/contacts" &
defer "kill $! 2>/dev/null"
if [[ -n $host_addr ]]; then
	python3 "$recorder" "$host_addr" "$svc_port" "$TEST_TMP/contacts" &
	defer "kill $! 2>/dev/null"
fi
# Positive control: from the host, both answer.
wait_for 10 python3 -c "import socket; socket.create_connection(('127.0.0.1', $svc_port), 2)" ||
	skip "the loopback recorder did not start"
if [[ -n $host_addr ]]; then
	wait_for 10 python3 -c "import socket; socket.create_connection(('$host_addr', $svc_port), 2)" ||
		skip "the host-address recorder did not start"
fi
# The recorders log the controls' contacts on their own threads: wait for
# those lines before starting afresh, so that none lands after the reset.
controls=$([[ -n $host_addr ]] && echo 2 || echo 1)
controls_logged() { (($(grep -c '^tcp ' "$TEST_TMP/contacts") >= controls)); }
wait_for 10 controls_logged || skip "the recorders did not log the controls"
: >"$TEST_TMP/contacts"

run_opts=(--allow "origin.test:$port" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.0/8
	--timeout 60)

# ---- the positive path ------------------------------------------------------
set +e
out=$("$TOLLGATE" run "${run_opts[@]}" -- curl -sS -p --max-time 10 \
	"http://origin.test:$port/hello.txt" 2>"$TEST_TMP/err"); rc=$?
set -e
expect_eq "allowed name through the proxy: exit status" "$rc" 0
expect_eq "allowed name through the proxy: the origin's body" "$out" "hello from the origin"

set +e
code=$("$TOLLGATE" run "${run_opts[@]}" -- curl -s -p --max-time 10 -o /dev/null \
	-w '%{http_connect}' "http://refused.test:$port/" 2>/dev/null); rc=$?
set -e
expect_eq "refused name: the proxy answers 403" "$code" 403
expect_match "refused name: curl fails" "$rc" '^[1-9][0-9]*$'

# ---- every other way out, from one sandbox ----------------------------------
# Each line of the script prints "NAME RC DETAIL"; RC 0 means it got through.
inside='
probe() { name=$1; shift; d=$(python3 -c "$NET_PROBE" "$@" 2>&1); echo "$name $? $d"; }
hub=${HTTP_PROXY#http://}; hub=${hub%:*}
probe hub-proxy tcp "$hub" 3128
a=$(dig +short +time=3 +tries=1 @"$hub" origin.test A 2>&1); echo "dns-allowed $? $a" | tr "\n" " "; echo
a=$(dig +tcp +short +time=3 +tries=1 @"$hub" origin.test A 2>&1); echo "dns-tcp-allowed $? $a" | tr "\n" " "; echo
st=$(dig +time=3 +tries=1 @"$hub" refused.test A 2>&1 | sed -n "s/.*status: \([A-Z]*\).*/\1/p")
echo "dns-refused-status ${st:-none} dig"
probe hub-port-22 tcp "$hub" 22
probe hub-port-80 tcp "$hub" 80
probe hub-port-8080 tcp "$hub" 8080
probe hub-svc-port tcp "$hub" "$SVC_PORT"
probe host-loopback-tcp tcp 127.0.0.1 "$SVC_PORT"
probe host-loopback-udp-then-check udp 127.0.0.1 "$SVC_PORT"
probe ipv6-loopback tcp6 ::1 "$SVC_PORT"
if [ -n "$HOST_ADDR" ]; then
	probe host-address-tcp tcp "$HOST_ADDR" "$SVC_PORT"
	probe host-address-udp udp "$HOST_ADDR" "$SVC_PORT"
	dig +time=2 +tries=1 -p "$SVC_PORT" @"$HOST_ADDR" example.test >/dev/null 2>&1
	echo "dns-to-host-address $? dig"
fi
dig +time=2 +tries=1 -p "$SVC_PORT" @127.0.0.1 example.test >/dev/null 2>&1
echo "dns-to-loopback $? dig"
ip addr add 10.77.0.9/30 dev eth0 >/dev/null 2>&1; echo "change-address $? ip addr add"
ip route add 10.99.0.0/24 via "$hub" >/dev/null 2>&1; echo "add-route $? ip route add"
ip route del default >/dev/null 2>&1; echo "delete-default-route $? ip route del"
ip link set eth0 down >/dev/null 2>&1; echo "link-down $? ip link set"
(echo 0 >/proc/sys/net/ipv6/conf/all/disable_ipv6) 2>/dev/null; echo "enable-ipv6 $? sysctl"
echo "ipv6-disabled-reads $(cat /proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null || echo 1) sysctl"
echo "ipv6-addresses $(ip -6 -o addr 2>/dev/null | wc -l) ip -6 addr"
'
set +e
"$TOLLGATE" run "${run_opts[@]}" --env "NET_PROBE=$probe_src" --env "SVC_PORT=$svc_port" \
	--env "HOST_ADDR=$host_addr" -- sh -c "$inside" >"$TEST_TMP/results" 2>"$TEST_TMP/err"
rc=$?
set -e
expect_eq "probe sandbox ran" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2

# result NAME: the RC column of that line ("missing" when it did not run).
result() { awk -v n="$1" '$1 == n { print $2; found = 1 } END { if (!found) print "missing" }' \
	"$TEST_TMP/results"; }
# expect_blocked NAME WHAT: the way out NAME must have failed.
expect_blocked() {
	local got
	got=$(result "$1")
	checks=$((checks + 1))
	if [[ $got == missing ]]; then
		fail "$2: the check did not run"
	elif [[ $got == 0 ]]; then
		fail "$2: got through ($(grep "^$1 " "$TEST_TMP/results"))"
	else
		pass "$2: blocked ($(grep "^$1 " "$TEST_TMP/results" | cut -d' ' -f3-))"
	fi
}

expect_eq "the hub's proxy port answers" "$(result hub-proxy)" 0
# Transparent listeners are on by default: the allowed name resolves to the
# hub address, where the gate's 80/443 listeners decide it again.
expect_match "DNS on the hub answers the allowed name (with the hub address: transparent)" \
	"$(grep '^dns-allowed ' "$TEST_TMP/results" || true)" '^dns-allowed 0 10\.77\.[0-9]+\.[0-9]+ $'
expect_match "DNS over TCP on the hub answers the allowed name" \
	"$(grep '^dns-tcp-allowed ' "$TEST_TMP/results" || true)" '^dns-tcp-allowed 0 10\.77\.[0-9]+\.[0-9]+ $'
expect_match "DNS on the hub refuses the refused name" \
	"$(result dns-refused-status)" '^(NXDOMAIN|REFUSED)$'
expect_blocked hub-port-22 "TCP to the hub on port 22"
expect_eq "TCP to the hub on port 80 reaches the gate's transparent listener (default)" \
	"$(result hub-port-80)" 0
expect_blocked hub-port-8080 "TCP to the hub on port 8080"
expect_blocked hub-svc-port "TCP to the hub on the host service's port"
expect_blocked host-loopback-tcp "TCP to the host's loopback service"
expect_blocked ipv6-loopback "TCP over IPv6 to ::1"
if [[ -n $host_addr ]]; then
	expect_blocked host-address-tcp "TCP to the host's own address $host_addr"
	expect_blocked dns-to-host-address "DNS to a server on the host's address"
else
	echo "note: no global IPv4 address on this host; host-address checks not run"
fi
expect_blocked dns-to-loopback "DNS to a server on loopback"
expect_blocked change-address "adding an address to eth0"
expect_blocked add-route "adding a route"
expect_blocked delete-default-route "deleting the default route"
expect_blocked link-down "taking eth0 down"
expect_blocked enable-ipv6 "turning IPv6 back on"
expect_eq "IPv6 is off in the sandbox" "$(result ipv6-disabled-reads)" 1
expect_eq "no IPv6 address in the sandbox" "$(result ipv6-addresses)" 0
# UDP sendto succeeds locally; what matters is that nothing arrived.
sleep 0.5
expect_eq "nothing reached the host's services (TCP, UDP, DNS)" \
	"$(cat "$TEST_TMP/contacts")" ""

# ---- two sandboxes at once ----------------------------------------------------
# B listens on every address of its sandbox; A, in another gateway with
# another pool, tries B's address and B's hub listeners.
wdir=$TEST_TMP/b-work
mkdir -p "$wdir"
chown "$SANDBOX_OWNER" "$wdir" # the sandbox user (exec/sandbox/exec.h: EXEC_HOST_ID_BASE + 1000; rootless, the user)
"$TOLLGATE" run --pool 10.78.0.0/16 --workdir "$wdir" --timeout 60 \
	--env "NET_PROBE=$probe_src" -- python3 -c "$probe_src" listen 7000 30 /work/ready \
	>/dev/null 2>"$TEST_TMP/b-err" &
b_pid=$!
defer "kill $b_pid 2>/dev/null"
if wait_for 15 grep -q listening "$wdir/ready"; then
	pass "sandbox B listens on 7000 (its own loopback reached it)"
	checks=$((checks + 1))
	inside_a='
probe() { name=$1; shift; d=$(python3 -c "$NET_PROBE" "$@" 2>&1); echo "$name $? $d"; }
probe b-listener tcp 10.78.0.2 7000
probe b-proxy tcp 10.78.0.1 3128
probe b-dns tcp 10.78.0.1 53
'
	set +e
	"$TOLLGATE" run --timeout 60 --env "NET_PROBE=$probe_src" -- sh -c "$inside_a" \
		>"$TEST_TMP/results" 2>"$TEST_TMP/err"
	set -e
	expect_blocked b-listener "A to B's own listener (10.78.0.2:7000)"
	expect_blocked b-proxy "A to B's proxy listener (10.78.0.1:3128)"
	expect_blocked b-dns "A to B's DNS listener (10.78.0.1:53)"
	expect_eq "B accepted nothing from A" "$(grep -c accepted "$wdir/ready" || true)" 0
else
	fail "sandbox B did not start listening: $(head -c 300 "$TEST_TMP/b-err")"
fi
kill -TERM "$b_pid" 2>/dev/null || true
for ((i = 0; i < 100; i++)); do kill -0 "$b_pid" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$b_pid" 2>/dev/null || true
wait "$b_pid" 2>/dev/null || true

# ---- nothing left behind ------------------------------------------------------
expect_eq "no interface left in the host's namespace" "$(ls /sys/class/net | wc -l)" \
	"$links_before"
finish
