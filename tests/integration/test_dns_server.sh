#!/usr/bin/env bash
# `tollgate proxy --dns-listen`: the DNS server under policy, driven by dig over
# UDP and TCP, with a real DNS server on loopback as the upstream that logs every
# query it gets (to prove what never went upstream), and raw malformed packets.
source "$(dirname "$0")/lib.sh"

command -v dig >/dev/null || skip "dig (bind9-dnsutils) is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

UPLOG=$TEST_TMP/upstream.log
python3 "$TOLLGATE_SRC/tests/integration/dns_upstream.py" --port-file "$TEST_TMP/up.port" \
	--log "$UPLOG" --lifetime 280 --record reload.example.com,A,93.184.216.40,300 &
up_pid=$!
defer "kill $up_pid 2>/dev/null; wait $up_pid 2>/dev/null"
wait_for 10 test -s "$TEST_TMP/up.port" || { echo "upstream did not start" >&2; exit 1; }
UP_PORT=$(cat "$TEST_TMP/up.port")
: >"$UPLOG"

cat >"$TEST_TMP/policy.json" <<'EOF'
{
  "version": 1,
  "allow": ["www.example.com", "alias.example.com", "a.test", "private.example.com",
            "mixed.example.com", "nosuch.example.com", "v4only.example.com",
            "v6only.example.com", "short.example.com", "tcp-only.example.com:8443",
            "pinned.example.com"],
  "deny": ["denied.example.com", "*.evil.test"],
  "ask": ["ask.example.com", "askdeny.example.com", "asktcp.example.com"],
  "clients": [
    { "name": "second", "sources": ["127.0.0.2/32"], "allow": ["client-only.example.com"],
      "deny": ["v6only.example.com"] }
  ]
}
EOF

# start_proxy NAME DNS_PORT FLAGS...: a proxy with a DNS listener, waited for.
start_proxy() {
	local name=$1 dport=$2; shift 2
	local pport
	pport=$(free_port)
	"$TOLLGATE" proxy --listen "127.0.0.1:$pport" --dns-listen "127.0.0.1:$dport" \
		--upstream-dns "127.0.0.1:$UP_PORT" --audit "$TEST_TMP/$name.db" \
		--control "$TEST_TMP/$name.sock" "$@" 2>"$TEST_TMP/$name.log" &
	local pid=$!
	defer "kill $pid 2>/dev/null; wait $pid 2>/dev/null"
	eval "${name}_pid=$pid"
	wait_for 10 dig @127.0.0.1 -p "$dport" +tries=1 +time=1 denied.example.com ||
		{ cat "$TEST_TMP/$name.log" >&2; echo "proxy $name did not start" >&2; exit 1; }
}

# stop_proxy NAME: SIGTERM, and the proxy exits 0 (sanitizers report leaks and errors in the status).
stop_proxy() {
	local pid rc=0
	pid=$(eval echo "\$${1}_pid")
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	expect_eq "proxy $1 exits 0 on SIGTERM" "$rc" 0
	((rc == 0)) || tail -n 30 "$TEST_TMP/$1.log" >&2
}

DNS=$(free_port)
start_proxy main "$DNS" --policy "$TEST_TMP/policy.json" --dns-ask-wait 8s \
	--resolve pinned.example.com:93.184.216.99

# q [dig args...]: the answer section as "name ttl type data" lines, plus "status: X".
q() {
	local out
	out=$(dig @127.0.0.1 -p "$DNS" +tries=1 +time=12 +noall +comments +answer "$@" || true)
	sed -n 's/.*status: \([A-Z]*\),.*/status: \1/p' <<<"$out"
	awk '!/^;/ && NF >= 5 {print $1, $2, $4, $5}' <<<"$out"
}
status() { q "$@" | sed -n 's/^status: //p' | head -n 1; }
answers() { q "$@" | grep -v '^status:' | awk '{print $4}' | sort | tr '\n' ' ' | sed 's/ $//'; }
ttls() { q "$@" | grep -v '^status:' | awk '{print $2}' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
upstream_count() { grep -c "^$1 $2\$" "$UPLOG" || true; }
# auth [dig args...]: the authority section as "name ttl type data..." lines.
auth() {
	dig @127.0.0.1 -p "$DNS" +tries=1 +time=5 +noall +authority "$@" |
		awk '!/^;/ && NF >= 5 {$3 = ""; print}' | tr -s ' ' || true
}
# The SOA of tollgate's negative answers (RFC 2308) for a question: ZONE
# (the question's parent) with TTL.
soa() { echo "$1. $2 SOA tollgate.invalid. hostmaster.tollgate.invalid. 1 3600 600 86400 $2"; }

for proto in "" "+tcp"; do
	t=${proto:-+udp}
	# Allowed names: resolved upstream, TTL capped at 60 s.
	expect_eq "$t allowed A" "$(answers $proto www.example.com A)" "93.184.216.34"
	expect_eq "$t allowed AAAA" "$(answers $proto www.example.com AAAA)" \
		"2606:2800:220:1:248:1893:25c8:1946"
	expect_eq "$t TTL 3600 capped to 60" "$(ttls $proto www.example.com A)" "60"
	# 5 s from upstream, counting down in the cache.
	expect_match "$t TTL under the cap kept" "$(ttls $proto short.example.com A)" '^[1-5]$'
	# A CNAME chain is flattened: the asked name gets the address.
	expect_eq "$t CNAME flattened" "$(q $proto alias.example.com A | grep -v status | awk '{print $1, $3, $4}')" \
		"alias.example.com. A 93.184.216.34"
	# Denied names: NXDOMAIN, and nothing upstream.
	expect_eq "$t denied name NXDOMAIN" "$(status $proto denied.example.com A)" NXDOMAIN
	expect_eq "$t denied wildcard NXDOMAIN" "$(status $proto x.evil.test AAAA)" NXDOMAIN
	expect_eq "$t default deny NXDOMAIN" "$(status $proto unlisted.example.org A)" NXDOMAIN
	# Upstream's own answers: NXDOMAIN, no data.
	expect_eq "$t upstream NXDOMAIN" "$(status $proto nosuch.example.com A)" NXDOMAIN
	expect_eq "$t no AAAA: NOERROR" "$(status $proto v4only.example.com AAAA)" NOERROR
	expect_eq "$t no AAAA: no answer" "$(answers $proto v4only.example.com AAAA)" ""
	# Rebinding defence: non-public addresses are dropped.
	expect_eq "$t private-only name: NOERROR" "$(status $proto private.example.com A)" NOERROR
	expect_eq "$t private-only name: no answer" "$(answers $proto private.example.com A)" ""
	expect_eq "$t mixed name: only the public address" "$(answers $proto mixed.example.com A)" \
		"93.184.216.36"
	# Other types: answered here, never upstream (no tunnelling through DNS).
	for type in TXT MX ANY SRV NULL CAA HTTPS SVCB; do
		expect_eq "$t $type for an allowed name: NOERROR" "$(status $proto www.example.com $type)" NOERROR
		expect_eq "$t $type: no records" "$(answers $proto www.example.com $type)" ""
	done
	expect_eq "$t TXT for a denied name" "$(status $proto denied.example.com TXT)" NXDOMAIN
	# An allow rule for another port still lets the name resolve.
	expect_eq "$t allow rule on port 8443" "$(status $proto tcp-only.example.com A)" NXDOMAIN
	# Names that are not host names.
	expect_eq "$t underscore name refused as malformed" "$(status $proto _dmarc.www.example.com A)" NXDOMAIN
	expect_eq "$t class CH refused" "$(status $proto -c CH www.example.com TXT)" REFUSED
	# EDNS0: version 0 understood, a later version BADVERS (RFC 6891).
	expect_eq "$t EDNS0 with a 4096-byte buffer" "$(answers $proto +bufsize=4096 www.example.com A)" "93.184.216.34"
	expect_eq "$t EDNS version 1: BADVERS" "$(status $proto +edns=1 +noednsnegotiation www.example.com A)" BADVERS
	# Negative answers carry an SOA so that resolvers in front cache them
	# (RFC 2308): its TTL and MINIMUM are the negative TTL (30 s).
	expect_eq "$t denied name: SOA in authority" "$(auth $proto denied.example.com A)" \
		"$(soa example.com 30)"
	expect_eq "$t denied name with EDNS0: SOA" "$(auth $proto +edns=0 x.evil.test AAAA)" \
		"$(soa evil.test 30)"
	expect_eq "$t no data (TXT): SOA" "$(auth $proto www.example.com TXT)" "$(soa example.com 30)"
	expect_eq "$t no data (non-public): SOA" "$(auth $proto private.example.com A)" \
		"$(soa example.com 30)"
	# Upstream's negative answers are relayed with the same SOA, its TTL
	# counting down with the cached answer.
	expect_match "$t upstream NXDOMAIN: SOA" "$(auth $proto nosuch.example.com A)" \
		'^example\.com\. ([1-9]|[12][0-9]|30) SOA tollgate\.invalid\. hostmaster\.tollgate\.invalid\. 1 3600 600 86400 ([1-9]|[12][0-9]|30)$'
	expect_match "$t upstream no data: SOA" "$(auth $proto v4only.example.com AAAA)" \
		'^example\.com\. ([1-9]|[12][0-9]|30) SOA tollgate\.invalid\.'
	expect_eq "$t an answer has no authority" "$(auth $proto www.example.com A)" ""
	expect_eq "$t REFUSED has no SOA" "$(auth $proto -c CH www.example.com TXT)" ""
done

for name in denied.example.com x.evil.test unlisted.example.org _dmarc.www.example.com; do
	expect_eq "$name never went upstream" "$(grep -c "^$name " "$UPLOG" || true)" 0
done
for type in TXT MX ANY SRV NULL CAA HTTPS SVCB; do
	expect_eq "$type never went upstream" "$(grep -c " $type\$" "$UPLOG" || true)" 0
done
expect_eq "tcp-only.example.com went upstream" "$(upstream_count tcp-only.example.com A)" 1
# The cache: asked over UDP and TCP (and twice for the TTL), sent upstream once.
expect_eq "www.example.com A asked upstream once" "$(upstream_count www.example.com A)" 1
expect_eq "alias.example.com A asked upstream once" "$(upstream_count alias.example.com A)" 1
# Negative answers are cached too: asked again at once, nothing more goes upstream
# (the loop above may outlast the 30 s negative TTL on a busy machine).
before=$(upstream_count nosuch.example.com A)
status nosuch.example.com A >/dev/null
expect_eq "nosuch.example.com cached negatively" "$(upstream_count nosuch.example.com A)" "$before"

# Per-client sections by source address: 127.0.0.2 is the "second" client.
expect_eq "client section allows its own name" \
	"$(answers -b 127.0.0.2 client-only.example.com A)" ""
expect_eq "client section: name resolves (upstream NXDOMAIN)" \
	"$(status -b 127.0.0.2 client-only.example.com A)" NXDOMAIN
expect_eq "client section's name denied to others" "$(status client-only.example.com A)" NXDOMAIN
expect_eq "client-only went upstream once (for the section)" \
	"$(upstream_count client-only.example.com A)" 1
expect_eq "client section denies v6only" "$(status -b 127.0.0.2 v6only.example.com AAAA)" NXDOMAIN
expect_eq "others get v6only" "$(answers v6only.example.com AAAA)" "2606:2800:220:1:248:1893:25c8:1947"
# 198.51.100.0/24 is a documentation range: not public, so a.test answers nothing.
expect_eq "a.test (TEST-NET-2) dropped" "$(answers a.test A)" ""

# Malformed input never stops the server; FORMERR where it can be answered.
python3 - "$DNS" >"$TEST_TMP/raw.out" <<'EOF'
import socket, struct, sys
port = int(sys.argv[1])
def q(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
hdr = lambda qd, an=0, ar=0, flags=0x0100: struct.pack(">HHHHHH", 0x1234, flags, qd, an, 0, ar)
good = q("www.example.com") + struct.pack(">HH", 1, 1)
cases = {
    "truncated header": b"\x12\x34\x01",
    "truncated question": hdr(1) + good[:7],
    "two questions": hdr(2) + good + good,
    "pointer loop": hdr(1) + b"\xc0\x0c" + struct.pack(">HH", 1, 1),
    "pointer forward": hdr(1) + b"\xc0\x20" + struct.pack(">HH", 1, 1) + b"\0" * 20,
    "label too long": hdr(1) + b"\x7f" + b"a" * 127 + b"\0" + struct.pack(">HH", 1, 1),
    "label past the end": hdr(1) + b"\x3f" + b"a" * 10,
    "huge counts": struct.pack(">HHHHHH", 0x1234, 0x0100, 65535, 65535, 65535, 65535) + good,
    "answer in a query": hdr(1, an=1) + good,
    "trailing bytes": hdr(1) + good + b"junk",
    "response bit": hdr(1, flags=0x8100) + good,
    "zero questions": hdr(0),
    "garbage": bytes(range(256)) * 4,
}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
for what, pkt in cases.items():
    s.sendto(pkt, ("127.0.0.1", port))
    try:
        data, _ = s.recvfrom(4096)
        print("%s: rcode %d" % (what, data[3] & 0x0F))
    except socket.timeout:
        print("%s: no answer" % what)
# TCP: a zero length closes; a length bigger than what follows waits; then a good query.
t = socket.create_connection(("127.0.0.1", port), timeout=3)
t.sendall(b"\x00\x00")
try:
    print("tcp zero length: %s" % ("closed" if t.recv(10) == b"" else "data"))
except OSError:
    print("tcp zero length: closed")
t.close()
t = socket.create_connection(("127.0.0.1", port), timeout=3)
t.sendall(struct.pack(">H", 40) + hdr(1) + b"\x03www")
t.close()
# Two questions in one TCP write, answered in turn.
t = socket.create_connection(("127.0.0.1", port), timeout=3)
m = hdr(1) + good
t.sendall(struct.pack(">H", len(m)) + m + struct.pack(">H", len(m)) + m)
got = b""
while got.count(b"\x12\x34") < 2 and len(got) < 4096:
    chunk = t.recv(4096)
    if not chunk:
        break
    got += chunk
print("tcp pipelined: %d bytes" % len(got))
t.close()
EOF
raw=$(cat "$TEST_TMP/raw.out")
expect_match "truncated header: dropped" "$raw" "truncated header: no answer"
expect_match "truncated question: FORMERR" "$raw" "truncated question: rcode 1"
expect_match "two questions: FORMERR" "$raw" "two questions: rcode 1"
expect_match "pointer loop: FORMERR" "$raw" "pointer loop: rcode 1"
expect_match "forward pointer: FORMERR" "$raw" "pointer forward: rcode 1"
expect_match "label too long: FORMERR" "$raw" "label too long: rcode 1"
expect_match "label past the end: FORMERR" "$raw" "label past the end: rcode 1"
expect_match "huge counts: FORMERR" "$raw" "huge counts: rcode 1"
expect_match "answer in a query: FORMERR" "$raw" "answer in a query: rcode 1"
expect_match "trailing bytes: FORMERR" "$raw" "trailing bytes: rcode 1"
expect_match "a response is never answered" "$raw" "response bit: no answer"
expect_match "zero questions: FORMERR" "$raw" "zero questions: rcode 1"
expect_match "TCP zero length closes" "$raw" "tcp zero length: closed"
expect_match "TCP pipelined questions both answered" "$raw" "tcp pipelined: [0-9]+ bytes"
expect_eq "after malformed input, UDP still answers" "$(answers www.example.com A)" "93.184.216.34"
expect_eq "after malformed input, TCP still answers" "$(answers +tcp www.example.com A)" "93.184.216.34"

# An ask name: a pending approval (port 0 = any), REFUSED after --dns-ask-wait;
# once approved (scope client), the name resolves.
expect_eq "ask name refused while pending" "$(status ask.example.com A)" REFUSED
pending=$("$TOLLGATE" pending --control "$TEST_TMP/main.sock" --json)
expect_match "the approval stays pending" "$pending" '"host": ?"ask.example.com"'
expect_match "the approval is for any port" "$pending" '"port": ?0'
id=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["id"])' <<<"$pending")
"$TOLLGATE" approve "$id" --scope client --control "$TEST_TMP/main.sock" >/dev/null
expect_eq "approved ask name resolves (upstream NXDOMAIN)" "$(status ask.example.com A)" NXDOMAIN
expect_eq "approved ask name went upstream" "$(upstream_count ask.example.com A)" 1
# A question that waits while the person decides gets the answer.
( sleep 0.3
  id=$("$TOLLGATE" pending --control "$TEST_TMP/main.sock" --json |
	python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["id"])')
  "$TOLLGATE" deny "$id" --control "$TEST_TMP/main.sock" >/dev/null ) &
decider=$!
expect_eq "ask name denied while waiting: NXDOMAIN" "$(status askdeny.example.com A)" NXDOMAIN
wait $decider || true
expect_eq "denied ask name never went upstream" "$(upstream_count askdeny.example.com A)" 0
expect_eq "ask name over TCP refused while pending" "$(status +tcp asktcp.example.com AAAA)" REFUSED
expect_match "ask over TCP left its approval pending" \
	"$("$TOLLGATE" pending --control "$TEST_TMP/main.sock" --json)" '"host": ?"asktcp.example.com"'
expect_eq "ask name: TXT answered at once, no approval" "$(status ask.example.com TXT)" NOERROR

# A real caching resolver in front (dnsmasq caches a negative answer only
# when it carries an SOA): three questions for a denied name reach tollgate once.
MASQ_RAN=0
if command -v dnsmasq >/dev/null; then
	MASQ=$(free_port)
	dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --no-poll \
		--listen-address=127.0.0.1 --bind-interfaces --port="$MASQ" --pid-file= \
		--user="$(id -un)" --cache-size=100 --server="127.0.0.1#$DNS" 2>"$TEST_TMP/dnsmasq.log" &
	masq_pid=$!
	defer "kill $masq_pid 2>/dev/null; wait $masq_pid 2>/dev/null"
	if wait_for 10 dig @127.0.0.1 -p "$MASQ" +tries=1 +time=1 www.example.com A; then
		for i in 1 2 3; do
			expect_eq "via dnsmasq ($i): denied name NXDOMAIN" \
				"$(dig @127.0.0.1 -p "$MASQ" +tries=1 +time=5 cached.evil.test A | sed -n 's/.*status: \([A-Z]*\),.*/\1/p')" \
				NXDOMAIN
		done
		MASQ_RAN=1 # how often tollgate answered is read from its audit rows below
	else
		cat "$TEST_TMP/dnsmasq.log" >&2
		fail "dnsmasq did not start"
	fi
fi

# --resolve pins answer without asking upstream.
expect_eq "pinned name answered from the pin" "$(answers pinned.example.com A)" "93.184.216.99"
expect_eq "pinned name never went upstream" "$(grep -c '^pinned.example.com ' "$UPLOG" || true)" 0

# SIGHUP reloads the policy file; the next question is judged by the new one.
expect_eq "reload.example.com denied before the reload" "$(status reload.example.com A)" NXDOMAIN
sed -i 's/"pinned.example.com"\]/"pinned.example.com", "reload.example.com"]/' "$TEST_TMP/policy.json"
kill -HUP "$main_pid"
wait_for 5 bash -c "dig @127.0.0.1 -p $DNS +short reload.example.com | grep -q 93.184.216.40" || true
expect_eq "reload.example.com allowed after SIGHUP" "$(answers reload.example.com A)" "93.184.216.40"

# Audit: one row per name, type and decision; repeats counted in it.
for i in 1 2 3 4 5; do dig @127.0.0.1 -p "$DNS" +tries=1 +time=2 +short burst.evil.test >/dev/null; done
stop_proxy main
"$TOLLGATE" audit --audit "$TEST_TMP/main.db" --kind dns --json >"$TEST_TMP/rows.json" 2>/dev/null || true
# summary HOST TYPE DECISION: "ROWS SUM-OF-COUNTS" of the matching dns rows.
summary() {
	python3 - "$TEST_TMP/rows.json" "$@" <<'PY'
import json, sys
path, host, qtype, decision = sys.argv[1:5]
rows = [json.loads(l) for l in open(path) if l.strip()]
m = [r for r in rows if r["host"] == host and r["detail"]["type"] == qtype and r["decision"] == decision]
print(len(m), sum(r["detail"]["count"] for r in m))
PY
}
read -r nrows total < <(summary burst.evil.test A deny)
expect_eq "audit: every repeat of the burst counted" "$total" 5
expect_match "audit: the burst of 5 in at most two rows (one window may end inside it)" "$nrows" '^[12]$'
read -r nrows total < <(summary denied.example.com A deny)
expect_match "audit: the denied name's rows" "$nrows" '^[1-9]'
read -r nrows total < <(summary www.example.com A allow)
expect_match "audit: the allowed name's rows" "$nrows" '^[1-9]'
read -r nrows total < <(summary client-only.example.com A allow)
expect_match "audit: the second client's name allowed" "$nrows" '^[1-9]'
expect_match "audit: the second client by its section's name" \
	"$(grep client-only "$TEST_TMP/rows.json" | grep -c '"sandbox":"second"')" '^[1-9]'
read -r nrows total < <(summary ask.example.com A ask)
expect_eq "audit: the pending ask" "$nrows $total" "1 1"
if ((MASQ_RAN)); then
	read -r nrows total < <(summary cached.evil.test A deny)
	expect_eq "dnsmasq in front cached the NXDOMAIN: tollgate answered it once" "$total" 1
fi
read -r nrows total < <(summary askdeny.example.com A deny)
expect_eq "audit: the denied ask" "$nrows $total" "1 1"
"$TOLLGATE" audit verify --audit "$TEST_TMP/main.db" >/dev/null 2>&1 && v=ok || v=bad
expect_eq "audit chain holds" "$v" ok

# Second server: REFUSED for denied names, a 10 s TTL cap, steering, CIDR rule.
DNS=$(free_port)
start_proxy steer "$DNS" --allow www.example.com --allow private.example.com \
	--allow-cidr 10.0.0.0/8 --dns-deny-rcode refused --dns-ttl-cap 10s --dns-steer 127.0.0.1
expect_eq "--dns-deny-rcode refused" "$(status denied.example.com A)" REFUSED
expect_eq "steered A" "$(answers www.example.com A)" "127.0.0.1"
expect_eq "steered A over TCP" "$(answers +tcp www.example.com A)" "127.0.0.1"
expect_eq "steered TTL is the cap" "$(ttls www.example.com A)" "10"
expect_eq "steered AAAA: no answer" "$(answers www.example.com AAAA)" ""
expect_eq "steered AAAA: NOERROR" "$(status www.example.com AAAA)" NOERROR
expect_eq "steered AAAA: SOA with the TTL cap (10 s) under 30 s" \
	"$(auth www.example.com AAAA)" "$(soa example.com 10)"
expect_eq "REFUSED for a denied name: no SOA" "$(auth denied.example.com A)" ""
stop_proxy steer

# --dns-negative-ttl sets the SOA's TTL and MINIMUM.
DNS=$(free_port)
start_proxy negttl "$DNS" --allow www.example.com --dns-negative-ttl 7s
expect_eq "--dns-negative-ttl 7s: the SOA says 7" "$(auth denied.example.com A)" "$(soa example.com 7)"
stop_proxy negttl

DNS=$(free_port)
start_proxy cidr "$DNS" --allow private.example.com --allow www.example.com \
	--allow-cidr 10.0.0.0/8 --dns-ttl-cap 10s
expect_eq "a CIDR rule lets a private address through" "$(answers private.example.com A)" "10.1.2.3"
expect_eq "--dns-ttl-cap 10s" "$(ttls www.example.com A)" "10"
stop_proxy cidr

# Bad flags: one line, exit 125.
for bad in "--dns-listen nonsense" "--dns-deny-rcode servfail" "--dns-steer example.com" \
	"--dns-ttl-cap forever" "--dns-ask-wait x"; do
	set +e
	err=$("$TOLLGATE" proxy --listen 127.0.0.1:0 --dns-listen 127.0.0.1:0 $bad 2>&1 >/dev/null); rc=$?
	set -e
	expect_eq "$bad exits 125" "$rc" 125
	expect_eq "$bad: one line" "$(wc -l <<<"$err")" 1
done
finish
