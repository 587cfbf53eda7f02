#!/usr/bin/env bash
# The warm pool: `tollgate pool` keeps slots of network plumbing
# ready on a root-only socket and `tollgate run` (split, and one process)
# takes one. Through a warm slot an allowed loopback origin is reached via the
# gate and another name is refused; the sandbox's network is what a run makes
# itself (same links, addresses and routes, no socket); each sandbox had a
# namespace of its own (the one the pool handed out); once the runs ended
# nothing of their slots is left and the pool made new ones; a malformed
# request and a non-root peer are refused and the pool goes on; a socket that
# is not root's 0600 is not used; with the pool stopped, absent or turned off,
# run makes its own network.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, veth)"
[[ -z "${TOLLGATE_TEST_AS:-}" ]] || skip "the warm pool serves root's runs only"
for tool in curl lsns ip setpriv; do
	command -v "$tool" >/dev/null || skip "$tool is not installed"
done
export TOLLGATE_CONTROL_DIR=$TEST_TMP/ctl

start_origin
# Others may reach the socket's directory: the socket's own mode and the
# pool's check of its peer are what keep them out.
chmod 0711 "$TEST_TMP"
sock=$TEST_TMP/pool.sock
log=$TEST_TMP/pool.err
"$TOLLGATE" pool --size 2 --socket "$sock" 2>"$log" &
pool=$!
defer "kill $pool 2>/dev/null; wait $pool 2>/dev/null"
wait_for 20 grep -q 'slots ready' "$log" || { cat "$log" >&2; fail "the pool did not fill"; finish; }
expect_eq "the socket is root's, mode 0600" "$(stat -c '%U %a' "$sock")" "root 600"
nfds() { find "/proc/$pool/fd" -mindepth 1 2>/dev/null | wc -l; }
fds_full=$(nfds)
handed() { grep -c 'handed out' "$log" || true; }

# What a sandbox sees of its network, one line each: its namespace; links;
# IPv4 addresses; IPv6 addresses (a count); routes; sockets (a count); then
# the gate: an allowed origin's body, and the status of a refused name.
probe='readlink /proc/self/ns/net
ip -o link | awk "{print \$2}" | tr "\n" " "; echo
ip -o -4 addr show | awk "{print \$2, \$4}" | tr "\n" " "; echo
ip -o -6 addr | wc -l
ip -4 route | tr "\n" ";"; echo
cat /proc/net/tcp /proc/net/udp /proc/net/raw /proc/net/tcp6 /proc/net/udp6 2>/dev/null | grep -vc local_address
curl -sS -m 20 http://origin.test:'$port'/hello.txt
curl -sS -m 20 -o /dev/null -w "refused %{http_code}\n" http://other.test:'$port'/hello.txt
ip neigh | tr "\n" ";"; echo
ip -o link show eth0'

# sandbox NAME [env...]: one run of the probe, its output in $TEST_TMP/NAME.out.
sandbox() {
	local name=$1 rc=0
	shift
	env "$@" "$TOLLGATE" run --allow "origin.test:$port" --resolve origin.test:127.0.0.1 \
		--allow-cidr 127.0.0.1/32 --timeout 60 -- sh -c "$probe" \
		>"$TEST_TMP/$name.out" 2>"$TEST_TMP/$name.err" </dev/null || rc=$?
	expect_eq "$name: exit status" "$rc" 0
	expect_eq "$name: the allowed origin's body came through the gate" \
		"$(sed -n 7p "$TEST_TMP/$name.out")" "hello from the origin"
	expect_eq "$name: another name is refused by the gate" \
		"$(sed -n 8p "$TEST_TMP/$name.out")" "refused 403"
	# What to look at when the gate was not reached: the kernel's ARP table is
	# shared by every namespace, and when another program fills it ("neighbor
	# table overflow" in the kernel log) a sandbox cannot resolve its hub.
	if [[ $(sed -n 7p "$TEST_TMP/$name.out") != "hello from the origin" ]]; then
		echo "  $name: neighbours: $(sed -n 9p "$TEST_TMP/$name.out")"
		echo "  $name: eth0: $(sed -n 10p "$TEST_TMP/$name.out")"
		tail -n 8 "$log" | sed 's/^/  pool: /'
	fi
	grep -v '^tollgate: refused other.test' "$TEST_TMP/$name.err" | sed 's/^/  stderr: /' || true
}
# The network view without the namespace line.
view() { sed -n 2,6p "$TEST_TMP/$1.out"; }

# ---- a cold run: the reference of a fresh namespace ---------------------------
sandbox cold TOLLGATE_WARM_POOL=off
expect_eq "a cold run: no socket in its namespace" "$(sed -n 6p "$TEST_TMP/cold.out")" 0
expect_eq "the pool handed nothing to a run with TOLLGATE_WARM_POOL=off" "$(handed)" 0

# ---- two runs through warm slots ------------------------------------------------
sandbox split TOLLGATE_WARM_POOL="$sock"
sandbox one TOLLGATE_WARM_POOL="$sock" TOLLGATE_PRIVSEP=0
wait_for 10 test "$(handed)" -ge 2 || true
expect_eq "the pool handed out two slots" "$(handed)" 2
for name in split one; do
	expect_eq "$name: the warm namespace looks as a fresh one (links, addresses, routes, no socket)" \
		"$(view "$name")" "$(view cold)"
done
ns_split=$(sed -n 1p "$TEST_TMP/split.out")
ns_one=$(sed -n 1p "$TEST_TMP/one.out")
expect_match "split: the sandbox's namespace is the slot's" \
	"$(grep 'handed out' "$log" | sed -n 1p)" "sandbox ${ns_split//[\[\]]/.}, "
expect_match "one process: the sandbox's namespace is the slot's" \
	"$(grep 'handed out' "$log" | sed -n 2p)" "sandbox ${ns_one//[\[\]]/.}, "
if [[ -n $ns_split && $ns_split != "$ns_one" ]]; then
	pass "two sandboxes, two network namespaces ($ns_split, $ns_one)"
else
	fail "two sandboxes, one network namespace ($ns_split, $ns_one)"
fi
checks=$((checks + 1))
hubs=$(grep 'handed out' "$log" | sed 's/.*hub \(net:\[[0-9]*\]\).*/\1/' | sort -u | wc -l)
expect_eq "two slots, two hubs" "$hubs" 2

# ---- a used slot is gone, and replaced -------------------------------------------
wait_for 20 test "$(nfds)" -eq "$fds_full" || true
expect_eq "the pool refilled: as many fds as when it was full, none of the handed-out slots'" \
	"$(nfds)" "$fds_full"
expect_match "the pool made new slots" "$(grep -c 'made slot' "$log" || true)" '^[4-9]$'
ns_gone() { ! lsns -n -t net -o NS | grep -qx " *$1"; }
for ns in $ns_split $ns_one $(grep 'handed out' "$log" | sed 's/.*hub \(net:\[[0-9]*\]\).*/\1/'); do
	ino=${ns//[^0-9]/}
	wait_for 10 ns_gone "$ino" || true
	if ns_gone "$ino"; then pass "namespace $ns is gone after its run"; else fail "namespace $ns outlived its run"; fi
	checks=$((checks + 1))
done
left=$(find /tmp -maxdepth 1 -name "tollgate-run.*" -newer "$log" 2>/dev/null | wc -l || true)
expect_eq "no temp dir of the runs left" "$left" 0

# ---- the socket is the pool's only door ------------------------------------------
python3 - "$sock" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(b"GET / HTTP/1.0\r\n\r\n")
s.settimeout(2)
try:
    print("answered", len(s.recv(4096)))
except Exception:
    print("no answer")
EOF
wait_for 5 grep -q 'malformed request' "$log" || true
expect_eq "a malformed request is refused and logged" "$(grep -c 'malformed request' "$log" || true)" 1
nobody_connects() {
	setpriv --reuid nobody --regid nogroup --clear-groups python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1])
except OSError:
    print("no connection")
    sys.exit(0)
# The pool may close before the request is even sent (EPIPE): no answer too.
try:
    s.send(struct.pack("=4I", 0x54475750, 1, 1, 0))
    s.settimeout(2)
    d, fds, _, _ = socket.recv_fds(s, 256, 16)
    print("answered", len(d), len(fds)) if d or fds else print("no answer")
except OSError:
    print("no answer")' "$1" 2>/dev/null || echo "no python"
}
expect_eq "a non-root process cannot connect to the socket" "$(nobody_connects "$sock")" "no connection"
# Were the socket opened to all, the pool still asks who is calling.
chmod 0666 "$sock"
expect_eq "a non-root peer gets nothing even on an open socket" "$(nobody_connects "$sock")" "no answer"
wait_for 5 grep -q 'from uid 65534 refused' "$log" || true
expect_eq "the pool logged the refusal" "$(grep -c 'from uid 65534 refused' "$log" || true)" 1
# ... and a run does not trust a socket others may open.
sandbox open-socket TOLLGATE_WARM_POOL="$sock"
expect_eq "a run does not use a socket of mode 0666" "$(handed)" 2
chmod 0600 "$sock"
kill -0 "$pool" 2>/dev/null && pass "the pool is still running" || fail "the pool died"
checks=$((checks + 1))
sandbox after-refusals TOLLGATE_WARM_POOL="$sock"
expect_eq "a slot is handed out after the refusals" "$(handed)" 3

# ---- without the pool ---------------------------------------------------------------
kill "$pool"
rc=0
wait "$pool" || rc=$?
expect_eq "the pool exits 0 on SIGTERM" "$rc" 0
[[ -e $sock ]] && fail "the pool left its socket" || pass "the pool removed its socket"
checks=$((checks + 1))
sandbox stopped TOLLGATE_WARM_POOL="$sock"
sandbox stopped-one TOLLGATE_WARM_POOL="$sock" TOLLGATE_PRIVSEP=0
sandbox absent TOLLGATE_WARM_POOL="$TEST_TMP/absent.sock"
for name in stopped stopped-one absent; do
	expect_eq "$name: its own namespace looks as the cold run's" "$(view "$name")" "$(view cold)"
done
finish
