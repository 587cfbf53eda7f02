#!/usr/bin/env bash
# The SNI check of CONNECT tunnels, with openssl s_client -proxy as the
# client: a ClientHello naming the CONNECT host passes; another name, or none
# (unless --allow-no-sni), closes the tunnel before a byte reaches the origin.
# A server_name of bytes that are not UTF-8 is refused and its audit row still parses.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v openssl >/dev/null || skip "openssl is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
openssl s_client -help 2>&1 | grep -q -- '-proxy' || skip "openssl s_client has no -proxy"

start_tls_origin
start_proxy sni --resolve origin.test:127.0.0.1 --allow "origin.test:$TLS_PORT" \
	--allow-cidr 127.0.0.1/32
DB=$TEST_TMP/sni.db

# handshake PROXY_PORT HOST:PORT S_CLIENT-FLAGS...: "ok" when the TLS handshake completed.
handshake() {
	local pport=$1 target=$2; shift 2
	if timeout 10 openssl s_client -proxy "127.0.0.1:$pport" -connect "$target" "$@" \
		-brief </dev/null 2>&1 | grep -q 'CONNECTION ESTABLISHED'; then
		echo ok
	else
		echo refused
	fi
}

expect_eq "SNI equal to the CONNECT host" \
	"$(handshake "$PROXY_PORT" "origin.test:$TLS_PORT" -servername origin.test)" ok
expect_eq "SNI differing only in case and a trailing dot" \
	"$(handshake "$PROXY_PORT" "origin.test:$TLS_PORT" -servername ORIGIN.test.)" ok
expect_eq "SNI naming another host: tunnel closed" \
	"$(handshake "$PROXY_PORT" "origin.test:$TLS_PORT" -servername evil.test)" refused
expect_eq "no SNI to a named host: tunnel closed" \
	"$(handshake "$PROXY_PORT" "origin.test:$TLS_PORT" -noservername)" refused
expect_eq "no SNI to an IP literal: allowed" \
	"$(handshake "$PROXY_PORT" "127.0.0.1:$TLS_PORT" -noservername)" ok
expect_eq "SNI naming a host when CONNECT named an address: closed" \
	"$(handshake "$PROXY_PORT" "127.0.0.1:$TLS_PORT" -servername origin.test)" refused

# A mismatch never reaches the origin: a plain TCP listener sees no byte.
SINK_PORT=$(free_port)
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4)
s.settimeout(30)
out = open(sys.argv[2], "w")
while True:
    c, _ = s.accept(); c.settimeout(5)
    got = b""
    try:
        while True:
            b = c.recv(65536)
            if not b: break
            got += b
    except socket.timeout:
        pass
    out.write("%d\n" % len(got)); out.flush()
' "$SINK_PORT" "$TEST_TMP/sink.bytes" &
defer "kill $! 2>/dev/null"
wait_for 10 port_open "$SINK_PORT" || fail "sink did not start"
sleep 0.2
lines() { wc -l <"$TEST_TMP/sink.bytes"; }
wait_for 10 test "$(lines)" -ge 1 || true # port_open's own connection
base=$(lines)
start_proxy sink --resolve sink.test:127.0.0.1 --allow "sink.test:$SINK_PORT" \
	--allow-cidr 127.0.0.1/32
expect_eq "mismatch to a sink: refused" \
	"$(handshake "$PROXY_PORT" "sink.test:$SINK_PORT" -servername evil.test)" refused
wait_for 10 test "$(lines)" -gt "$base" || true
expect_eq "mismatch: the origin received 0 bytes" "$(sed -n "$((base + 1))p" "$TEST_TMP/sink.bytes")" "0"

# Plain TCP (not TLS) through CONNECT is allowed and reaches the origin.
out=$($RAW "$PROXY_PORT" "CONNECT sink.test:$SINK_PORT HTTP/1.1\r\nHost: x\r\n\r\nplain bytes\n")
expect_eq "non-TLS first bytes: tunnel open" "$out" "200 -"
wait_for 10 test "$(lines)" -gt "$((base + 1))" || true
expect_eq "non-TLS bytes reached the origin" "$(sed -n "$((base + 2))p" "$TEST_TMP/sink.bytes")" "12"

# --allow-no-sni lets a ClientHello without server_name through.
start_proxy nosni --resolve origin.test:127.0.0.1 --allow "origin.test:$TLS_PORT" \
	--allow-cidr 127.0.0.1/32 --allow-no-sni
expect_eq "--allow-no-sni: no SNI allowed" \
	"$(handshake "$PROXY_PORT" "origin.test:$TLS_PORT" -noservername)" ok
expect_eq "--allow-no-sni: a wrong SNI is still refused" \
	"$(handshake "$PROXY_PORT" "origin.test:$TLS_PORT" -servername evil.test)" refused

# A server_name of hostile bytes (invalid UTF-8, a control character, a quote) is
# refused, and its audit row stays JSON every reader parses: the high bytes as '?'.
hostile_hello() { # PROXY_PORT HOST:PORT: CONNECT, then a ClientHello naming b'\xff\x01"evil'
	python3 - "$1" "$2" <<'PY'
import socket, struct, sys
name = b'\xff\x01"evil'
sni = struct.pack("!HBH", len(name) + 3, 0, len(name)) + name
ext = struct.pack("!HH", 0, len(sni)) + sni
body = (b"\x03\x03" + bytes(32) + b"\x00" + struct.pack("!H", 2) + b"\x13\x01"
        + b"\x01\x00" + struct.pack("!H", len(ext)) + ext)
hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
rec = b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2].encode())
got = b""
while b"\r\n\r\n" not in got:
    b = s.recv(4096)
    if not b:
        break
    got += b
s.sendall(rec)
try:
    while s.recv(4096):
        pass
except OSError:
    pass
PY
}
hostile_hello "$PROXY_PORT" "origin.test:$TLS_PORT"
sleep 0.3
sni_of_hostile=$(python3 - "$TEST_TMP/nosni.db" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.text_factory = bytes
for (d,) in db.execute("select detail from events where kind='decision'"):
    try:
        sni = json.loads(d.decode("utf-8")).get("sni", "")
    except ValueError:  # not UTF-8, or not JSON
        sni = "unparsable: %r" % d
    if "evil" in sni and ".test" not in sni:
        print(json.dumps(sni))
PY
)
expect_eq "hostile server_name: the row parses, high bytes as '?'" "$sni_of_hostile" '"?\u0001\"evil"'

sleep 0.3 # audit rows are committed in batches
n=$(audit_count "$DB" "kind='decision' and reason='sni-mismatch' and detail like '%evil.test%'")
expect_match "audit: sni-mismatch decision naming the SNI" "$n" '^[1-9][0-9]*$'
n=$(audit_count "$DB" "kind='connection' and reason='sni-mismatch' and json_extract(detail,'$.bytes_up')=0")
expect_match "audit: the refused tunnel sent 0 bytes up" "$n" '^[1-9][0-9]*$'
finish
