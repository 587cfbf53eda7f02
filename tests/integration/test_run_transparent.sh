#!/usr/bin/env bash
# `tollgate run --transparent`: a client that ignores the proxy variables
# (curl --noproxy '*') reaches an allowed name over HTTP and HTTPS through
# the gate's 80/443 listeners, and is refused for a denied one (403 on 80,
# a closed connection on 443), with audit rows.
#
# The transparent listeners connect to port 80/443 of the resolved address,
# so the origins must listen on 127.0.0.1:80 and :443. To take those ports
# without touching the host's, the whole test re-runs itself inside a
# network namespace of its own (unshare -n), where tollgate runs too: its
# hub and the sandbox's veth are made from there, and its loopback is the
# test's.
if [[ -z ${TOLLGATE_TRANSPARENT_NETNS:-} ]]; then
	if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (namespaces)" >&2; exit 77; fi
	command -v unshare >/dev/null || { echo "SKIP: unshare(1)" >&2; exit 77; }
	exec unshare -n env TOLLGATE_TRANSPARENT_NETNS=1 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"

[[ -e /proc/self/ns/user && -e /proc/self/ns/pid ]] || skip "user and PID namespaces"
command -v curl >/dev/null || skip "curl"
command -v openssl >/dev/null || skip "openssl"
command -v sqlite3 >/dev/null || skip "sqlite3"
command -v ip >/dev/null || skip "ip(8) to bring up the test namespace's loopback"
ip link set lo up

port_open() { bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# The origins, on this namespace's loopback only.
mkdir -p "$TEST_TMP/www"
echo "hello from origin" >"$TEST_TMP/www/hello.txt"
python3 -m http.server --bind 127.0.0.1 --directory "$TEST_TMP/www" 80 >/dev/null 2>&1 &
defer "kill $! 2>/dev/null"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj /CN=origin.test -addext subjectAltName=DNS:origin.test \
	-keyout "$TEST_TMP/origin.key" -out "$TEST_TMP/origin.pem" >/dev/null 2>&1
openssl s_server -accept 127.0.0.1:443 -cert "$TEST_TMP/origin.pem" -key "$TEST_TMP/origin.key" \
	-www -quiet >/dev/null 2>&1 </dev/null &
defer "kill $! 2>/dev/null"
wait_for 10 port_open 80 || { fail "http origin did not start"; finish; }
wait_for 10 port_open 443 || { fail "tls origin did not start"; finish; }

DB=$TEST_TMP/audit.db
# The sandbox's script (fed on stdin: its /tmp is its own): each attempt prints "NAME RESULT" on a line.
cat >"$TEST_TMP/client.sh" <<'SH'
hub=$(awk '/^nameserver/ { print $2; exit }' /etc/resolv.conf)
c() { curl -sS --noproxy '*' --max-time 10 "$@"; }
echo "http-allowed $(c http://origin.test/hello.txt 2>&1)"
echo "https-allowed $(c -k -o /dev/null -w '%{http_code}' https://origin.test/ 2>/dev/null; echo " rc=$?")"
echo "http-host-denied $(c -o /dev/null -w '%{http_code}' -H 'Host: denied.test' http://origin.test/)"
echo "http-denied $(c -o /dev/null -D - --resolve denied.test:80:$hub http://denied.test/ | tr -d '\r' | awk '/^HTTP|^X-Tollgate/' | tr '\n' ' ')"
echo "https-denied $(c -k -o /dev/null --resolve denied.test:443:$hub https://denied.test/ 2>/dev/null; echo "rc=$?")"
echo "https-sni-mismatch $(c -k -o /dev/null --resolve denied.test:443:$hub --connect-to denied.test:443:origin.test:443 https://denied.test/ 2>/dev/null; echo "rc=$?")"
echo "dns-denied $(c http://denied.test/ 2>/dev/null; echo "rc=$?")"
echo "dns-a $(getent ahostsv4 origin.test | awk '{ print $1; exit }')"
echo "hub $hub"
SH

set +e
out=$(timeout 90 "$TOLLGATE" run --transparent --allow origin.test --resolve origin.test:127.0.0.1 \
	--allow-cidr 127.0.0.1/32 --audit "$DB" -- sh -s <"$TEST_TMP/client.sh" \
	2>"$TEST_TMP/err")
rc=$?
set -e
expect_eq "tollgate run --transparent exits with the script's status" "$rc" 0
[[ $rc -eq 0 ]] || cat "$TEST_TMP/err" >&2
echo "$out"

result() { awk -v n="$1" '$1 == n { $1 = ""; sub(/^ /, ""); print; exit }' <<<"$out"; }
hub=$(result hub)
expect_match "the sandbox has a hub address" "$hub" '^10\.77\.[0-9]+\.[0-9]+$'
expect_eq "DNS steers the allowed name to the hub address" "$(result dns-a)" "${hub:-no hub}"
expect_eq "HTTP to the allowed name, no proxy variables used" "$(result http-allowed)" \
	"hello from origin"
expect_eq "HTTPS to the allowed name, no proxy variables used" "$(result https-allowed)" "200 rc=0"
expect_eq "HTTP with a denied Host is refused (routing is by Host)" \
	"$(result http-host-denied)" "403"
expect_match "HTTP to a denied name at the hub: 403 with the reason" "$(result http-denied)" \
	'^HTTP/1.1 403 Forbidden X-Tollgate-Reason: denied'
expect_match "HTTPS to a denied name at the hub: connection closed" "$(result https-denied)" \
	'^rc=(35|56)$'
expect_match "HTTPS with SNI denied.test to the allowed name's address: closed" \
	"$(result https-sni-mismatch)" '^rc=(35|56)$'
expect_eq "a denied name does not resolve" "$(result dns-denied)" "rc=6"

# Audit rows: the decisions, marked transparent, and the connections.
q() { sqlite3 "$DB" "select count(*) from events where $1" 2>/dev/null || echo "?"; }
expect_eq "allowed decision rows for origin.test:80 and :443 say transparent" \
	"$(q "kind='decision' and host='origin.test' and decision='allow' and detail like '%transparent%' and port in (80,443)" | awk '{print ($1 >= 2) ? "yes" : $1}')" yes
expect_eq "connection rows for origin.test:443" \
	"$(q "kind='connection' and host='origin.test' and port=443" | awk '{print ($1 >= 1) ? "yes" : $1}')" yes
expect_eq "deny rows for denied.test on 80 and 443" \
	"$(q "kind='decision' and host='denied.test' and decision='deny' and reason='denied' and port in (80,443)" | awk '{print ($1 >= 3) ? "yes" : $1}')" yes
finish
