#!/usr/bin/env bash
# --upstream-proxy with Squid as the parent, as a corporate network would have
# it: Squid (on loopback, with a config written here, names from its own hosts
# file) tunnels what tollgate allowed; what tollgate refuses never reaches it,
# and Squid's own refusal is the client's 502 naming Squid's status.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v squid >/dev/null || skip "squid is not installed (scripts/install-deps)"

O=$(free_port)
python3 "$TOLLGATE_SRC/tests/integration/proxy_origin.py" "$O" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$O" || { fail "origin did not start"; finish; }
start_tls_origin

SQ=$(free_port)
SQD=$TEST_TMP/squid
mkdir -p "$SQD"
echo "127.0.0.1 origin.test squid-denied.test" >"$SQD/hosts"
# No DNS server, no ICMP pinger, no cache: Squid talks to loopback only.
cat >"$SQD/squid.conf" <<EOF
http_port 127.0.0.1:$SQ
pid_filename $SQD/squid.pid
cache_log $SQD/cache.log
access_log stdio:$SQD/access.log
cache deny all
cache_mem 8 MB
pinger_enable off
hosts_file $SQD/hosts
dns_nameservers 127.0.0.1
shutdown_lifetime 1 seconds
acl origin dstdomain origin.test
http_access allow CONNECT origin
http_access deny all
EOF
# As root, Squid runs as its own user (proxy), which must write its logs here.
if [[ $(id -u) -eq 0 ]]; then
	chown -R proxy "$SQD" 2>/dev/null || chown -R nobody "$SQD"
	chmod 755 "$TEST_TMP"
fi
squid -N -f "$SQD/squid.conf" >"$SQD/out" 2>&1 &
SQUID_PID=$!
defer "kill -9 $SQUID_PID 2>/dev/null"
wait_for 20 port_open "$SQ" || { cat "$SQD/out" "$SQD/cache.log" >&2; fail "squid did not start"; finish; }

start_proxy child --upstream-proxy "http://127.0.0.1:$SQ" --allow "origin.test:$O" \
	--allow "origin.test:$TLS_PORT" --allow "squid-denied.test:$O"
X=(-sS --max-time 20 -x "http://127.0.0.1:$PROXY_PORT")

out=$($RAW "$PROXY_PORT" "GET http://refused.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_eq "refused by tollgate: its own 403" "$out" "403 denied"
out=$(curl "${X[@]}" "http://origin.test:$O/headers" | tr -d '\r' | head -n1)
expect_eq "absolute-form through Squid: the origin saw the request" "$out" "GET /headers HTTP/1.1"
out=$(curl "${X[@]}" --cacert "$CERT" -o /dev/null -w '%{http_code}' "https://origin.test:$TLS_PORT/" \
	2>&1 || true)
expect_eq "CONNECT through Squid: TLS to the origin" "$out" 200
out=$($RAW --body "$PROXY_PORT" "GET http://squid-denied.test:$O/ HTTP/1.1\r\nHost: x\r\n\r\n")
expect_match "refused by Squid: 502 naming Squid's 403" "$out" \
	"^502 parent-refused.*refused CONNECT squid-denied.test:$O with status 403"

squid_logged() { grep -q "$1" "$SQD/access.log"; }
wait_for 10 squid_logged "CONNECT origin.test:$TLS_PORT" || true
expect_eq "Squid tunnelled both" "$(grep -c 'TCP_TUNNEL/200 .* CONNECT origin.test:' "$SQD/access.log" || true)" 2
expect_eq "Squid never saw the host tollgate refused" "$(grep -c 'refused.test' "$SQD/access.log" || true)" 0

finish
