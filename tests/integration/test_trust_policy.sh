#!/usr/bin/env bash
# The trust boundary (docs/threat-model.md), "policy semantics that surprise no one", as an attacker tries
# them through `tollgate proxy`: a port a deny rule did not name, a name
# pinned to an IPv6 form that reaches a refused IPv4 address, and a request
# whose Connection field makes its framing hop-by-hop (smuggling).
#
# The whole test re-runs itself in a network namespace of its own with only
# loopback: a refused address must never be tried, and if it were, no packet
# could leave this namespace.
if [[ -z ${TOLLGATE_TRUST_NETNS:-} ]]; then
	if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (a network namespace)" >&2; exit 77; fi
	command -v unshare >/dev/null || { echo "SKIP: unshare(1)" >&2; exit 77; }
	exec unshare -n env TOLLGATE_TRUST_NETNS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v sqlite3 >/dev/null || skip "sqlite3"
command -v ip >/dev/null || skip "ip(8) to bring up the test namespace's loopback"
ip link set lo up

# An origin that logs every request line it gets, to see what was smuggled.
mkdir -p "$TEST_TMP/www"
echo "hello" >"$TEST_TMP/www/hello.txt"
O=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$TEST_TMP/www" "$O" \
	>/dev/null 2>"$TEST_TMP/origin.log" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$O" || { fail "origin did not start"; finish; }

start_proxy trust \
	--resolve origin.test:127.0.0.1 --resolve blocked.test:127.0.0.1 \
	--resolve compat.test:::127.0.0.9 --resolve compat-meta.test:::169.254.169.254 \
	--resolve nat64.test:64:ff9b::127.0.0.9 --resolve nat64-local.test:64:ff9b:1::8.8.8.8 \
	--resolve meta64.test:64:ff9b::169.254.169.254 \
	--allow "origin.test:*" --allow "blocked.test:*" --deny blocked.test \
	--allow "compat.test:*" --allow "compat-meta.test:*" --allow "nat64.test:*" \
	--allow "nat64-local.test:*" --allow "meta64.test:*" \
	--allow-cidr 127.0.0.1/32 --allow-cidr ::/96 --allow-cidr 64:ff9b::/96 \
	--deny-cidr 169.254.0.0/16 --deny-cidr 127.0.0.8/29
P=$PROXY_PORT

connect() { $RAW "$P" "CONNECT $1 HTTP/1.1\r\nHost: $1\r\n\r\n"; }

# --- a deny rule without a port covers every port ----------------------------
# `--allow origin.test:*` is the control: the same origin is reachable.
expect_eq "control: an allowed name reaches the origin" "$(connect "origin.test:$O")" "200 -"
expect_eq "deny blocked.test (no port) refuses port $O under allow blocked.test:*" \
	"$(connect "blocked.test:$O")" "403 denied"
expect_eq "deny blocked.test (no port) refuses port 22" "$(connect "blocked.test:22")" \
	"403 denied"

# --- IPv6 forms of an IPv4 address are that address ---------------------------
# A deny of 127.0.0.8/29 and 169.254.0.0/16 holds against the IPv4-compatible and
# NAT64 spellings, even where an IPv6 allow-cidr covers the spelling itself.
expect_eq "::127.0.0.9 (IPv4-compatible) meets the deny of 127.0.0.8/29" \
	"$(connect "compat.test:$O")" "403 denied"
expect_eq "::169.254.169.254 meets the deny of 169.254.0.0/16" \
	"$(connect "compat-meta.test:80")" "403 denied"
expect_eq "64:ff9b::127.0.0.9 (NAT64) meets the deny of 127.0.0.8/29" \
	"$(connect "nat64.test:$O")" "403 denied"
expect_eq "64:ff9b::169.254.169.254 (NAT64 metadata) meets the deny of 169.254.0.0/16" \
	"$(connect "meta64.test:80")" "403 denied"
expect_eq "64:ff9b:1::/48 (local NAT64) is non-public" "$(connect "nat64-local.test:443")" \
	"403 non-public-address"
stop_proxy "$PROXY_PID"
expect_eq "the proxy exits 0 (no sanitizer report)" "$STOP_RC" 0

# The same forms without any address rule: the non-public check alone.
start_proxy plain \
	--resolve compat.test:::127.0.0.1 --resolve nat64.test:64:ff9b::169.254.169.254 \
	--allow "compat.test:*" --allow "nat64.test:*"
P=$PROXY_PORT
expect_eq "::127.0.0.1 is non-public" "$(connect "compat.test:$O")" "403 non-public-address"
expect_eq "64:ff9b::169.254.169.254 is non-public" "$(connect "nat64.test:80")" \
	"403 non-public-address"
stop_proxy "$PROXY_PID"
expect_eq "the proxy exits 0 (no sanitizer report)" "$STOP_RC" 0

# --- Connection naming a framing or routing field: 400, nothing forwarded ------
start_proxy smuggle --resolve origin.test:127.0.0.1 --allow "origin.test:$O" \
	--allow-cidr 127.0.0.1/32
P=$PROXY_PORT
# The body is itself a request: a proxy that dropped Content-Length on the way
# would hand the origin a second, smuggled request.
inner="GET /smuggled HTTP/1.1\r\nHost: origin.test\r\n\r\n"
len=$(printf "$inner" | wc -c)
for field in Content-Length "close, Transfer-Encoding" Host; do
	out=$($RAW "$P" "POST http://origin.test:$O/hello.txt HTTP/1.1\r\nHost: origin.test:$O\r\nContent-Length: $len\r\nConnection: $field\r\n\r\n$inner")
	expect_eq "Connection: $field: 400" "$out" "400 malformed-request"
done
out=$($RAW "$P" "GET http://origin.test:$O/hello.txt HTTP/1.1\r\nHost: origin.test:$O\r\nConnection: keep-alive, X-Other\r\n\r\n")
expect_eq "control: Connection naming another field is forwarded" "$out" "200 -"
stop_proxy "$PROXY_PID"
expect_eq "the proxy exits 0 (no sanitizer report)" "$STOP_RC" 0
if grep -q smuggled "$TEST_TMP/origin.log"; then
	fail "the origin got the smuggled request: $(grep smuggled "$TEST_TMP/origin.log")"
else
	pass "the origin never saw the smuggled request"
fi
n=$(grep -c '"POST' "$TEST_TMP/origin.log" || true)
expect_eq "no refused POST reached the origin" "$n" 0
finish
