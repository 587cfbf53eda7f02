# Helpers for the proxy's integration tests (sourced after lib.sh, not run).
# Origins and the proxy listen on 127.0.0.1 only; names are pinned with
# --resolve and the upstream resolver is a closed loopback port, so no
# packet ever leaves the machine.

# RAW PORT BYTES...: proxy_raw.py. A script of one word in the test's directory,
# so that $RAW may stay unquoted (and go into bash -c) where the source tree's
# path has a space.
RAW=$TEST_TMP/proxy_raw
printf '#!/bin/bash\nexec python3 %q "$@"\n' "$TOLLGATE_SRC/tests/integration/proxy_raw.py" >"$RAW"
chmod 0755 "$RAW"

port_open() { bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# start_http_origin DIR: python3 http.server on a free port; sets HTTP_PORT.
start_http_origin() {
	HTTP_PORT=$(free_port)
	python3 -m http.server --bind 127.0.0.1 --directory "$1" "$HTTP_PORT" >/dev/null 2>&1 &
	defer "kill $! 2>/dev/null"
	wait_for 10 port_open "$HTTP_PORT" || { fail "http origin did not start"; finish; }
}

# start_tls_origin: openssl s_server -www for origin.test; sets TLS_PORT, CERT.
start_tls_origin() {
	CERT=$TEST_TMP/origin.pem
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj /CN=origin.test -addext subjectAltName=DNS:origin.test \
		-keyout "$TEST_TMP/origin.key" -out "$CERT" >/dev/null 2>&1
	TLS_PORT=$(free_port)
	openssl s_server -accept "127.0.0.1:$TLS_PORT" -cert "$CERT" -key "$TEST_TMP/origin.key" \
		-www -quiet >/dev/null 2>&1 </dev/null &
	defer "kill $! 2>/dev/null"
	wait_for 10 port_open "$TLS_PORT" || { fail "tls origin did not start"; finish; }
}

# start_proxy NAME FLAGS...: tollgate proxy on a free port; sets PROXY_PORT,
# PROXY_PID, PROXY_LOG. Audit goes to $TEST_TMP/NAME.db.
start_proxy() {
	local name=$1; shift
	PROXY_PORT=$(free_port)
	DEAD_DNS_PORT=${DEAD_DNS_PORT:-$(free_port)}
	PROXY_LOG=$TEST_TMP/$name.log
	"$TOLLGATE" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
		--audit "$TEST_TMP/$name.db" --control "$TEST_TMP/$name.sock" "$@" 2>"$PROXY_LOG" &
	PROXY_PID=$!
	defer "kill $PROXY_PID 2>/dev/null"
	wait_for 10 port_open "$PROXY_PORT" || { cat "$PROXY_LOG" >&2; fail "proxy did not start"; finish; }
}

# stop_proxy PID: SIGTERM and wait (bounded); sets STOP_RC to the exit status.
stop_proxy() {
	local pid=$1
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	set +e; wait "$pid"; STOP_RC=$?; set -e
}

# audit_rows DB SQL-WHERE: count of rows.
audit_count() { sqlite3 "$1" "select count(*) from events where $2" 2>/dev/null || echo "?"; }
