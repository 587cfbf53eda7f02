# Helpers for the TLS inspection tests (sourced after lib.sh and proxy_lib.sh).
# An HTTPS origin on loopback with a CA of its own that the gate is given by
# --upstream-ca; it echoes what it received (inspect_origin.py).

# make_origin_pki: ORIGIN_CA (the origin's own CA) and a leaf for
# origin.test, other.test and blind.test in $TEST_TMP/pki.
make_origin_pki() {
	local d=$TEST_TMP/pki
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj "/CN=origin test CA" -keyout "$d/oca.key" -out "$d/oca.pem" >/dev/null 2>&1 &&
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=origin.test \
		-keyout "$d/origin.key" -out "$d/origin.csr" >/dev/null 2>&1 &&
	printf 'subjectAltName=DNS:origin.test,DNS:other.test,DNS:blind.test\n' >"$d/origin.ext" &&
	openssl x509 -req -in "$d/origin.csr" -CA "$d/oca.pem" -CAkey "$d/oca.key" -CAcreateserial \
		-days 1 -extfile "$d/origin.ext" -out "$d/origin.pem" >/dev/null 2>&1 ||
		{ fail "cannot make the origin's certificates"; finish; }
	ORIGIN_CA=$d/oca.pem
	ORIGIN_CERT=$d/origin.pem
	ORIGIN_KEY=$d/origin.key
}

# start_echo_origin [BIND]: the echo origin on a free port; sets ECHO_PORT.
start_echo_origin() {
	ECHO_PORT=$(free_port)
	python3 "$TOLLGATE_SRC/tests/integration/inspect_origin.py" "$ECHO_PORT" "$ORIGIN_CERT" \
		"$ORIGIN_KEY" "${1:-127.0.0.1}" >"$TEST_TMP/origin.log" 2>&1 &
	defer "kill $! 2>/dev/null"
	wait_for 10 port_open "$ECHO_PORT" || { fail "echo origin did not start"; finish; }
}

# cert_fingerprint: the SHA-256 fingerprint of the first certificate on stdin.
cert_fingerprint() { openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2; }
