#!/usr/bin/env bash
# The review page over HTTPS (--cert/--key): the certificate is the one
# given, the login works over TLS and gives a session key, plain HTTP on the
# same port gets no page, --cert and --key go together and must match, and a
# non-loopback address warns without a certificate and not with one (in a
# namespace of the test's own, so nothing listens outside it).
source "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"

# A self-signed certificate for 127.0.0.1 and 10.77.0.1, and an unrelated key.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=tollgate-ui-test" \
	-addext "subjectAltName=IP:127.0.0.1,IP:10.77.0.1" \
	-keyout "$TEST_TMP/key.pem" -out "$TEST_TMP/cert.pem" 2>/dev/null ||
	skip "openssl cannot make a certificate with -addext"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$TEST_TMP/other.pem" 2>/dev/null

# --- wrong pairs are refused at start -------------------------------------------
rc=0
out=$("$TOLLGATE" ui --listen 127.0.0.1:1 --cert "$TEST_TMP/cert.pem" 2>&1 </dev/null) || rc=$?
expect_eq "--cert without --key: tollgate's own failure (125)" "$rc" "125"
expect_match "--cert without --key says they go together" "$out" "--cert and --key go together"
rc=0
out=$("$TOLLGATE" ui --listen 127.0.0.1:1 --cert "$TEST_TMP/cert.pem" --key "$TEST_TMP/other.pem" 2>&1 </dev/null) || rc=$?
expect_eq "a key of another certificate: refused (125)" "$rc" "125"
expect_match "a key of another certificate: named" "$out" "not the certificate's PEM private key"

# --- HTTPS on loopback -------------------------------------------------------------
PORT=$(free_port)
"$TOLLGATE" ui --listen "127.0.0.1:$PORT" --audit "$TEST_TMP/main.db" \
	--cert "$TEST_TMP/cert.pem" --key "$TEST_TMP/key.pem" \
	>"$TEST_TMP/ui.out" 2>"$TEST_TMP/ui.log" &
UI_PID=$!
defer "kill $UI_PID 2>/dev/null"
wait_for 10 grep -q token= "$TEST_TMP/ui.out" || { cat "$TEST_TMP/ui.log" >&2; fail "the page did not start"; finish; exit; }
URL=$(head -n 1 "$TEST_TMP/ui.out")
expect_match "the page announces an https address" "$URL" "^https://127\.0\.0\.1:$PORT/\?token=[0-9a-f]{64}$"
expect_eq "no warning on loopback" "$(grep -c WARNING "$TEST_TMP/ui.log" || true)" "0"

subject=$(openssl s_client -connect "127.0.0.1:$PORT" -servername localhost </dev/null 2>/dev/null |
	openssl x509 -noout -subject 2>/dev/null)
expect_match "openssl s_client sees the given certificate" "$subject" "CN ?= ?tollgate-ui-test"

body=$(curl -s --max-time 10 --cacert "$TEST_TMP/cert.pem" -X POST -H "Origin: https://127.0.0.1:$PORT" \
	-H "X-Tollgate-Token: ${URL##*token=}" "https://127.0.0.1:$PORT/api/login")
key=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("key", ""))' "$body" 2>/dev/null || true)
expect_match "login over TLS: a session key" "$key" '^[0-9a-f]{64}$'
code=$(curl -s --max-time 10 --cacert "$TEST_TMP/cert.pem" -o /dev/null -w '%{http_code}' \
	-H "X-Tollgate-Session: $key" "https://127.0.0.1:$PORT/api/session")
expect_eq "the session's API over TLS: 200" "$code" "200"
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$URL" 2>/dev/null || true)
expect_eq "a client that does not trust the certificate gets nothing" "$code" "000"
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/?token=${URL##*token=}" || true)
expect_match "plain HTTP on the TLS port gets no page" "$code" "^(000|400)$"
kill "$UI_PID" 2>/dev/null
wait "$UI_PID" 2>/dev/null

# --- a non-loopback address, in a namespace of the test's own -----------------------
NS=tg-uitls-$$
ip netns add "$NS" || skip "cannot create a network namespace"
defer "ip netns del $NS 2>/dev/null"
ip -n "$NS" link set lo up
# A veth pair with both ends in the namespace: an address that is not loopback
# and reaches nothing outside.
ip -n "$NS" link add tgu0 type veth peer name tgu1 || skip "no veth pairs in this kernel"
ip -n "$NS" link set tgu0 up
ip -n "$NS" link set tgu1 up
ip -n "$NS" addr add 10.77.0.1/24 dev tgu0

# start_in_ns NAME FLAGS...: the page on 10.77.0.1 inside the namespace.
start_in_ns() {
	local name=$1; shift
	ip netns exec "$NS" "$TOLLGATE" ui --listen "10.77.0.1:8443" --audit "$TEST_TMP/main.db" "$@" \
		>"$TEST_TMP/$name.out" 2>"$TEST_TMP/$name.log" &
	NS_PID=$!
	defer "kill $NS_PID 2>/dev/null"
	wait_for 10 grep -q token= "$TEST_TMP/$name.out" || { cat "$TEST_TMP/$name.log" >&2; fail "$name: the page did not start"; }
}
start_in_ns clear
expect_match "not loopback without --cert: a loud warning" "$(cat "$TEST_TMP/clear.log")" \
	"WARNING: 10\.77\.0\.1:8443 is not loopback and there is no --cert"
expect_match "not loopback without --cert: announced as http" "$(head -n 1 "$TEST_TMP/clear.out")" "^http://10\.77\.0\.1:8443/"
kill "$NS_PID" 2>/dev/null
wait "$NS_PID" 2>/dev/null

start_in_ns tls --cert "$TEST_TMP/cert.pem" --key "$TEST_TMP/key.pem"
expect_eq "not loopback with --cert: no warning" "$(grep -c WARNING "$TEST_TMP/tls.log" || true)" "0"
url=$(head -n 1 "$TEST_TMP/tls.out")
expect_match "not loopback with --cert: announced as https" "$url" "^https://10\.77\.0\.1:8443/"
code=$(ip netns exec "$NS" curl -s --max-time 10 --cacert "$TEST_TMP/cert.pem" -o /dev/null -w '%{http_code}' \
	-X POST -H "Origin: https://10.77.0.1:8443" -H "X-Tollgate-Token: ${url##*token=}" \
	"https://10.77.0.1:8443/api/login")
expect_eq "login over TLS on the namespace's address: 200" "$code" "200"
kill "$NS_PID" 2>/dev/null
wait "$NS_PID" 2>/dev/null
finish
