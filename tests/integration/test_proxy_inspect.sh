#!/usr/bin/env bash
# TLS inspection on `tollgate proxy --inspect HOST`: the gate ends the
# client's TLS with a leaf from its own CA (made under $TOLLGATE_HOME/ca and
# named on stderr), opens its own TLS to the origin verified against
# --upstream-ca, and forwards each HTTP/1.1 request with an audit row of its
# own; a host not inspected stays a blind tunnel (the client sees the
# origin's own certificate). Real parts: curl and openssl s_client as
# clients, a Python HTTPS origin on loopback with a CA of its own.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/inspect_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"

make_origin_pki
start_echo_origin
P=$ECHO_PORT
start_proxy inspect --resolve origin.test:127.0.0.1 --resolve blind.test:127.0.0.1 \
	--resolve other.test:127.0.0.1 --allow "origin.test:$P" --allow "blind.test:$P" \
	--allow "other.test:$P" --allow-cidr 127.0.0.1/32 \
	--inspect origin.test --inspect other.test --upstream-ca "$ORIGIN_CA"
DB=$TEST_TMP/inspect.db
GATE_CA=$TOLLGATE_HOME/ca/ca.pem
wait_for 10 test -s "$GATE_CA" || fail "no CA under \$TOLLGATE_HOME/ca"
expect_match "the proxy says where its CA is" "$(cat "$PROXY_LOG")" "inspection CA made: $GATE_CA"
expect_eq "the CA's key is 0600" "$(stat -c %a "$TOLLGATE_HOME/ca/ca.key")" "600"
CA_TEXT=$(openssl x509 -in "$GATE_CA" -noout -text)
expect_match "the CA is ECDSA P-256" "$CA_TEXT" "prime256v1"
expect_match "the CA's name constraints permit the inspected names" "$CA_TEXT" \
	"Permitted:[[:space:]]+DNS:origin.test[[:space:]]+DNS:other.test"
expect_match "the CA's name constraints exclude every IP address" "$CA_TEXT" "Excluded:[[:space:]]+IP:0.0.0.0"

X="-x http://127.0.0.1:$PROXY_PORT"
# --- a request through an inspected host, seen by the origin -------------------
out=$(curl -sS --max-time 20 --cacert "$GATE_CA" $X "https://origin.test:$P/repos/acme?token=abc" \
	-H 'X-Probe: one' 2>&1)
expect_match "the origin received the request's path" "$out" '"path": "/repos/acme\?token=abc"'
expect_match "the origin received the request's header" "$out" '"X-Probe": "one"'
# The client trusted only the gate's CA: the origin's own CA is not known to it.
expect_eq "without the gate's CA the client refuses the leaf" \
	"$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$ORIGIN_CA" $X "https://origin.test:$P/x")" "000"

# --- keep-alive, bodies: Content-Length, chunked, Expect: 100-continue ----------
out=$(curl -sS --max-time 20 --cacert "$GATE_CA" $X "https://origin.test:$P/a" "https://origin.test:$P/b" \
	-w '|%{num_connects}' 2>&1)
expect_match "two requests on one inspected connection" "$out" '"path": "/a".*\|1.*"path": "/b".*\|0'
out=$(curl -sS --max-time 20 --cacert "$GATE_CA" $X -X POST -d 'a=1&b=2' "https://origin.test:$P/form")
expect_match "a Content-Length body reaches the origin" "$out" '"body": "a=1&b=2"'
out=$(curl -sS --max-time 20 --cacert "$GATE_CA" $X -H 'Transfer-Encoding: chunked' \
	--data-binary 'chunky body' "https://origin.test:$P/chunked")
expect_match "a chunked body reaches the origin" "$out" '"body": "chunky body"'
head -c 300000 /dev/zero | tr '\0' 'q' >"$TEST_TMP/big.txt"
out=$(curl -sS --max-time 30 --cacert "$GATE_CA" $X -H 'Expect: 100-continue' \
	--data-binary @"$TEST_TMP/big.txt" "https://origin.test:$P/expect" | python3 -c \
	'import json,sys; print(len(json.load(sys.stdin)["body"]))')
expect_eq "an Expect: 100-continue body of 300000 bytes arrives whole" "$out" "300000"
n=$(curl -sS --max-time 30 --cacert "$GATE_CA" $X "https://origin.test:$P/big/3000000" | wc -c)
expect_eq "a chunked response of 3000000 bytes arrives whole" "$n" "3000000"

# --- the request may not turn the tunnel toward another host ------------------
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$GATE_CA" $X \
	-H 'Host: blind.test' "https://origin.test:$P/")
expect_eq "a Host other than the tunnel's is refused" "$code" "400"

# --- h2 only: a clear failure ---------------------------------------------------
err=$(echo | openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -connect "origin.test:$P" \
	-servername origin.test -alpn h2 2>&1 || true)
expect_match "a client that offers only h2 fails the handshake" "$err" "no application protocol"
out=$(curl -sS --max-time 20 --cacert "$GATE_CA" $X --http2 "https://origin.test:$P/h" -w '|%{http_version}')
expect_match "a client that offers h2 and http/1.1 gets http/1.1" "$out" '\|1.1$'

# --- the leaf: minted for the name, by the gate's CA -------------------------------
# seen_cert HOST: the certificate (PEM) openssl s_client saw through the
# proxy; tried up to 3 times (a loaded machine may cut a first handshake).
seen_cert() {
	local pem
	for _ in 1 2 3; do
		pem=$(sleep 1 | openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -connect "$1:$P" \
			-servername "$1" 2>/dev/null | sed -n '/BEGIN CERT/,/END CERT/p' || true)
		[[ -n $pem ]] && break
	done
	printf '%s\n' "$pem"
}
leaf=$(seen_cert origin.test | openssl x509 -noout -issuer -ext subjectAltName 2>/dev/null || true)
expect_match "the inspected leaf is issued by the gate's CA" "$leaf" "issuer=.*tollgate inspection CA"
expect_match "the inspected leaf names the host" "$leaf" "DNS:origin.test"

# --- a host not inspected stays a blind tunnel -------------------------------------
seen=$(seen_cert blind.test | cert_fingerprint || true)
expect_eq "through a blind tunnel the client sees the origin's own certificate" \
	"$seen" "$(cert_fingerprint <"$ORIGIN_CERT")"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$ORIGIN_CA" $X "https://blind.test:$P/x")
expect_eq "a blind tunnel works with the origin's CA" "$code" "200"

# --- an origin whose certificate fails verification ----------------------------
stop_proxy "$PROXY_PID"
start_proxy noca --resolve origin.test:127.0.0.1 --allow "origin.test:$P" --allow-cidr 127.0.0.1/32 \
	--inspect origin.test
out=$(curl -s -D - -o /dev/null --max-time 20 --cacert "$GATE_CA" -x "http://127.0.0.1:$PROXY_PORT" \
	"https://origin.test:$P/x" | tr -d '\r')
expect_match "an origin not trusted is a 502" "$out" "HTTP/1.1 502"
expect_match "... said as upstream-cert-refused" "$out" "X-Tollgate-Reason: upstream-cert-refused"
stop_proxy "$PROXY_PID"

# --- the audit rows: one per request, method and path without the query ----------
rows=$(sqlite3 "$DB" "select json_extract(detail,'\$.method')||' '||json_extract(detail,'\$.path')||' '||json_extract(detail,'\$.status')
	from events where kind='connection' and json_extract(detail,'\$.mode')='inspect' order by id")
expect_match "each inspected request has its own row" "$rows" "GET /repos/acme 200"
expect_match "... with its method" "$rows" "POST /form 200"
expect_match "... keep-alive requests each their own" "$rows" "GET /a 200.*GET /b 200"
expect_eq "no row holds the query" "$(audit_count "$DB" "detail like '%token=abc%'")" "0"
bytes=$(sqlite3 "$DB" "select json_extract(detail,'\$.bytes_up') from events where kind='connection' and json_extract(detail,'\$.path')='/expect'")
expect_match "the row counts the bytes up" "$bytes" "^3[0-9]{5}$"
finish
