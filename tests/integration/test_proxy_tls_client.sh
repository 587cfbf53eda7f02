#!/usr/bin/env bash
# Client certificates on `tollgate proxy --listen-tls`: the
# certificate's subject picks the client section; no certificate, one of
# another CA, or one no section names gets nothing through. Real parts: a
# PKI made with the openssl command line, curl and openssl s_client as
# clients, Python origins on loopback (plain HTTP and HTTPS).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
curl --help all 2>/dev/null | grep -q -- --proxy-cert || skip "curl has no --proxy-cert (HTTPS proxy support)"

# --- a PKI: our CA, a server certificate, two clients, a stranger, a rogue CA --
PKI=$TEST_TMP/pki
mkdir -p "$PKI"
ossl() { openssl "$@" >/dev/null 2>&1 || { fail "openssl $1 failed"; finish; }; }
make_ca() { # NAME
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj "/CN=$1 CA/O=example" -keyout "$PKI/$1.key" -out "$PKI/$1.pem"
}
make_cert() { # NAME CA SUBJECT EXT
	ossl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-subj "$3" -keyout "$PKI/$1.key" -out "$PKI/$1.csr"
	printf '%s\n' "$4" >"$PKI/$1.ext"
	ossl x509 -req -in "$PKI/$1.csr" -CA "$PKI/$2.pem" -CAkey "$PKI/$2.key" \
		-CAcreateserial -days 1 -extfile "$PKI/$1.ext" -out "$PKI/$1.pem"
}
make_ca ca
make_ca rogue
make_cert server ca "/CN=tollgate proxy" "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth"
make_cert a ca "/O=example/CN=runner-a" "extendedKeyUsage=clientAuth"
make_cert b ca "/O=example/CN=runner-b" "extendedKeyUsage=clientAuth"
make_cert stranger ca "/O=example/CN=stranger" "extendedKeyUsage=clientAuth"
make_cert fake rogue "/O=example/CN=runner-a" "extendedKeyUsage=clientAuth"
chmod 600 "$PKI"/*.key
SUBJECT_A=$(openssl x509 -in "$PKI/a.pem" -noout -subject -nameopt RFC2253)
SUBJECT_A=${SUBJECT_A#subject=}
expect_eq "openssl prints client A's subject in RFC 2253 order" "$SUBJECT_A" "CN=runner-a,O=example"

# --- origins: plain HTTP (request log kept) and HTTPS with a known body ------
mkdir -p "$TEST_TMP/www"
echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
head -c 3000000 /dev/urandom >"$TEST_TMP/www/big.bin"
BIG_SHA=$(sha256sum <"$TEST_TMP/www/big.bin" | cut -d' ' -f1)
HTTP_PORT=$(free_port)
ORIGIN_LOG=$TEST_TMP/origin.log
python3 -m http.server --bind 127.0.0.1 --directory "$TEST_TMP/www" "$HTTP_PORT" \
	>/dev/null 2>"$ORIGIN_LOG" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$HTTP_PORT" || { fail "http origin did not start"; finish; }
origin_hits() { grep -c '"GET ' "$ORIGIN_LOG" || true; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj /CN=secure.test -addext subjectAltName=DNS:secure.test \
	-keyout "$TEST_TMP/origin.key" -out "$TEST_TMP/origin.pem" >/dev/null 2>&1
HTTPS_PORT=$(free_port)
python3 -c '
import http.server, ssl, sys, functools
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), h)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
' "$HTTPS_PORT" "$TEST_TMP/www" "$TEST_TMP/origin.pem" "$TEST_TMP/origin.key" \
	>/dev/null 2>&1 &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$HTTPS_PORT" || { fail "https origin did not start"; finish; }

# --- the proxy ---------------------------------------------------------------
POLICY=$TEST_TMP/policy.json
cat >"$POLICY" <<JSON
{"version": 1, "allow_cidr": ["127.0.0.1/32"], "allow": ["open.test:$HTTP_PORT"],
 "clients": [
  {"name": "ci-a", "tls_subject": "$SUBJECT_A",
   "allow": ["a.test:$HTTP_PORT", "secure.test:$HTTPS_PORT"]},
  {"name": "ci-b", "tls_cn": "runner-b", "allow": ["b.test:$HTTP_PORT"]}]}
JSON
pins=(--resolve a.test:127.0.0.1 --resolve b.test:127.0.0.1 --resolve secure.test:127.0.0.1
	--resolve open.test:127.0.0.1)
tls_flags=(--tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key" --tls-client-ca "$PKI/ca.pem")

# A key others can read is refused before anything listens.
chmod 644 "$PKI/server.key"
set +e
out=$("$TOLLGATE" proxy --listen-tls "127.0.0.1:$(free_port)" "${tls_flags[@]}" \
	--policy "$POLICY" --audit "$TEST_TMP/refused.db" --control "$TEST_TMP/refused.sock" 2>&1)
rc=$?
set -e
expect_eq "a group/other-readable key: exit 125" "$rc" 125
expect_match "a group/other-readable key: says why" "$out" "mode 0644.*chmod 600"
chmod 600 "$PKI/server.key"

TP=$(free_port)
start_proxy main --listen-tls "127.0.0.1:$TP" "${tls_flags[@]}" --policy "$POLICY" "${pins[@]}"
wait_for 10 port_open "$TP" || fail "the TLS listener is not up"
DB=$TEST_TMP/main.db

# tproxy CERT ARGS...: curl through the TLS listener as client CERT ("" for none).
tproxy() {
	local cert=$1; shift
	local id=()
	[[ -n $cert ]] && id=(--proxy-cert "$PKI/$cert.pem" --proxy-key "$PKI/$cert.key")
	curl -sS --max-time 10 --proxy "https://127.0.0.1:$TP" --proxy-cacert "$PKI/ca.pem" \
		"${id[@]}" "$@"
}

# --- section A ---------------------------------------------------------------
out=$(tproxy a "http://a.test:$HTTP_PORT/hello.txt")
expect_eq "cert A, absolute-form: a.test (section A) reached" "$out" "hello from the origin"
out=$(tproxy a -p "http://a.test:$HTTP_PORT/hello.txt")
expect_eq "cert A, CONNECT inside TLS: a.test reached" "$out" "hello from the origin"
out=$(tproxy a -o /dev/null -w '%{http_code}' "http://b.test:$HTTP_PORT/hello.txt" || true)
expect_eq "cert A: b.test (section B only) refused" "$out" "403"
out=$(tproxy a -o /dev/null -w '%{http_connect}' -p "http://b.test:$HTTP_PORT/hello.txt" || true)
expect_eq "cert A, CONNECT: b.test refused" "$out" "403"

# --- section B ---------------------------------------------------------------
out=$(tproxy b "http://b.test:$HTTP_PORT/hello.txt")
expect_eq "cert B: b.test (section B) reached" "$out" "hello from the origin"
out=$(tproxy b -o /dev/null -w '%{http_code}' "http://a.test:$HTTP_PORT/hello.txt" || true)
expect_eq "cert B: a.test (section A only) refused" "$out" "403"

# --- end-to-end TLS inside our TLS --------------------------------------------
got=$(tproxy a --cacert "$TEST_TMP/origin.pem" "https://secure.test:$HTTPS_PORT/big.bin" |
	sha256sum | cut -d' ' -f1)
expect_eq "cert A: 3 MB over HTTPS through a CONNECT tunnel inside TLS, bytes intact" "$got" "$BIG_SHA"
out=$(tproxy b --cacert "$TEST_TMP/origin.pem" -o /dev/null -w '%{http_connect}' \
	"https://secure.test:$HTTPS_PORT/big.bin" || true)
expect_eq "cert B: the HTTPS origin is section A's only" "$out" "403"

# --- no certificate, another CA, a certificate no section names -------------------
hits=$(origin_hits)
set +e
tproxy "" -o /dev/null "http://a.test:$HTTP_PORT/hello.txt" 2>"$TEST_TMP/nocert.err"
rc=$?
set -e
expect_match "no client certificate: curl fails (TLS error)" "$rc" "^(35|55|56)$"
tproxy fake -o /dev/null "http://a.test:$HTTP_PORT/hello.txt" 2>/dev/null && rc=0 || rc=$?
expect_match "a certificate from another CA (same CN): curl fails" "$rc" "^(35|55|56)$"
expect_eq "neither reached the origin" "$(origin_hits)" "$hits"
out=$(tproxy stranger -o /dev/null -w '%{http_code}' "http://open.test:$HTTP_PORT/hello.txt" || true)
expect_eq "a valid certificate no section names: 403, not the top level" "$out" "403"
expect_eq "... and it did not reach the origin" "$(origin_hits)" "$hits"
out=$(tproxy stranger -s -D - -o /dev/null "http://open.test:$HTTP_PORT/hello.txt" | tr -d '\r' |
	sed -n 's/^X-Tollgate-Reason: //p')
expect_eq "... with reason unknown-client" "$out" "unknown-client"

# --- openssl s_client as a second client ----------------------------------------
req="GET http://a.test:$HTTP_PORT/hello.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"
out=$(printf "$req" | timeout 10 openssl s_client -connect "127.0.0.1:$TP" -CAfile "$PKI/ca.pem" \
	-cert "$PKI/a.pem" -key "$PKI/a.key" -verify_return_error -ign_eof 2>&1 || true)
expect_match "s_client, cert A: the proxy's certificate verifies" "$out" "Verify return code: 0 \(ok\)"
expect_match "s_client, cert A: the request is answered inside the session" "$out" "hello from the origin"
out=$(printf "$req" | timeout 10 openssl s_client -tls1_2 -connect "127.0.0.1:$TP" \
	-CAfile "$PKI/ca.pem" -cert "$PKI/b.pem" -key "$PKI/b.key" -ign_eof 2>&1 || true)
expect_match "s_client -tls1_2, cert B: handshake, then a.test refused" "$out" "HTTP/1.1 403"
out=$(printf "$req" | timeout 10 openssl s_client -connect "127.0.0.1:$TP" -CAfile "$PKI/ca.pem" \
	-ign_eof 2>&1 || true)
expect_match "s_client without a certificate: the proxy asks for one and alerts" "$out" \
	"certificate required|handshake failure"
if grep -q "hello from the origin" <<<"$out"; then
	fail "s_client without a certificate got an answer"
else
	pass "s_client without a certificate got no HTTP"
fi
out=$(timeout 10 openssl s_client -tls1_1 -connect "127.0.0.1:$TP" -CAfile "$PKI/ca.pem" \
	-cert "$PKI/a.pem" -key "$PKI/a.key" </dev/null 2>&1 || true)
expect_match "TLS 1.1 is refused" "$out" "alert protocol version|no protocols available"
if grep -q "Cipher is (NONE)" <<<"$out"; then
	pass "TLS 1.1: no cipher was agreed"
else
	fail "TLS 1.1: a session was made"
fi

# --- a flood of refused handshakes is not a flood of rows ---------------------------
# 130 handshakes without a certificate; with the 4 refused above, no split of
# them into two minutes gets every one its own row (60 a minute, then one folded).
python3 -c '
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
ctx.check_hostname = False
for _ in range(130):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    try:
        t = ctx.wrap_socket(s)
        t.sendall(b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n")
        t.recv(100)
    except (ssl.SSLError, OSError):
        pass
    s.close()
' "$TP" "$PKI/ca.pem"
refusals="reason in ('client-cert-missing','client-cert-refused','tls-handshake-failed')"
n=$(audit_count "$DB" "kind='decision' and $refusals")
expect_match "a flood of refused handshakes: rows are capped ($n for 134)" "$n" \
	"^([6-9][0-9]|1[01][0-9]|12[01])$"
n=$(grep -c "TLS handshake refused" "$PROXY_LOG" || true)
expect_match "a flood of refused handshakes: warnings are capped ($n for 134)" "$n" \
	"^([6-9][0-9]|1[01][0-9]|12[01])$"
out=$(tproxy a "http://a.test:$HTTP_PORT/hello.txt")
expect_eq "after the flood, cert A still gets through" "$out" "hello from the origin"

# --- what the log and the audit say ----------------------------------------------
stop_proxy "$PROXY_PID"
expect_eq "SIGTERM: the proxy exits 0 (under ASan: no leak, no error)" "$STOP_RC" 0
n=$(audit_count "$DB" "kind='decision' and sandbox='ci-a' and host='a.test' and decision='allow'")
expect_match "audit: section A's allowed requests name ci-a" "$n" "^[1-9]"
n=$(audit_count "$DB" "kind='decision' and sandbox='ci-a' and host='b.test' and decision='deny'")
expect_match "audit: section A's refusal of b.test names ci-a" "$n" "^[1-9]"
n=$(audit_count "$DB" "kind='decision' and sandbox='ci-b' and host='b.test' and decision='allow'")
expect_match "audit: section B's allowed request names ci-b" "$n" "^[1-9]"
n=$(audit_count "$DB" "kind='connection' and sandbox='ci-a' and host='secure.test' and json_extract(detail,'$.bytes_down') > 3000000")
expect_eq "audit: the HTTPS tunnel's bytes under ci-a" "$n" 1
n=$(audit_count "$DB" "kind='decision' and reason='client-cert-missing' and decision='deny'")
expect_match "audit: a refused handshake without a certificate" "$n" "^[1-9]"
n=$(audit_count "$DB" "kind='decision' and reason='client-cert-refused' and json_extract(detail,'$.why') like '%CN=runner-a,O=example%'")
expect_match "audit: the rogue CA's certificate refused, naming it" "$n" "^[1-9]"
n=$(audit_count "$DB" "kind='decision' and reason='unknown-client' and sandbox='127.0.0.1' and json_extract(detail,'$.rule') like '%CN=stranger,O=example%'")
expect_match "audit: the stranger's refusal" "$n" "^[1-9]"
expect_match "log: the refused handshake says why" "$(cat "$PROXY_LOG")" \
	"TLS handshake refused: client-cert-refused: unable to get local issuer certificate"
expect_match "log: a certificate without a section says whose" "$(cat "$PROXY_LOG")" \
	"refused: no client section for certificate CN=stranger,O=example"

# Handshakes held open cost their client's slots only: --max-conns 16 allows 8
# TLS sessions (a TLS client holds twice a plain one's fds), 4 per client.
TP2=$(free_port)
start_proxy caps --listen-tls "127.0.0.1:$TP2" "${tls_flags[@]}" --policy "$POLICY" \
	--max-conns 16 --max-conns-per-client 100
out=$(timeout 30 python3 - "$TP2" <<'EOF'
import select, socket, sys, time
port = int(sys.argv[1])
def opened(src, n):
    out = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(5)
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        out.append(s)
    return out
def held(conns):
    time.sleep(1)
    r, _, _ = select.select(conns, [], [], 0)
    return len(conns) - len(r)
a = opened("127.0.0.2", 6)
b = opened("127.0.0.3", 6)
print(held(a), held(b))
EOF
)
expect_eq "TLS: 6 silent handshakes from each of two clients: 4 held each" "$out" "4 4"
expect_match "TLS: the log names the per-client limit" "$(cat "$PROXY_LOG")" \
	'TLS: over the limit of 4 connections per client'
finish
