# Helpers for the fleet's integration tests (sourced after lib.sh, not run):
# a real PostgreSQL 15 made by initdb in the test's directory, listening on a
# Unix socket there only (no TCP at all), started and stopped by the test.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

# pg_setup: initdb as the postgres user (initdb refuses root); sets PG_DATA,
# PG_SOCK and FLEET (the connection string). Skips without the binaries.
pg_setup() {
	[[ -x $PG_BIN/initdb && -x $PG_BIN/pg_ctl ]] ||
		skip "PostgreSQL 15 server binaries are missing ($PG_BIN/initdb; Debian's postgresql-15, scripts/install-deps)"
	id postgres >/dev/null 2>&1 || skip "no postgres user (Debian's postgresql package makes it)"
	PG_DIR=$TEST_TMP/pg
	PG_DATA=$PG_DIR/data
	PG_SOCK=$PG_DIR/sock
	mkdir -p "$PG_DATA" "$PG_SOCK"
	chmod 0755 "$TEST_TMP"
	chown -R postgres: "$PG_DIR"
	PG_PORT=$(free_port)
	runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -U tollgate -A trust -E UTF8 \
		--no-sync >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log" >&2; fail "initdb failed"; finish; }
	FLEET="host=$PG_SOCK port=$PG_PORT user=tollgate dbname=postgres"
	pg_start
	defer "pg_stop"
}

# pg_start / pg_stop: the server, waited for (bounded).
pg_start() {
	runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/server.log" -w -t 30 \
		-o "-c listen_addresses='' -c unix_socket_directories='$PG_SOCK' -p $PG_PORT -c fsync=off" \
		start >/dev/null || { cat "$PG_DIR/server.log" >&2; fail "postgres did not start"; finish; }
}
pg_stop() {
	runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >/dev/null 2>&1 || true
}

# psql_q SQL: one value, unaligned.
psql_q() { psql -X -A -t -q "$FLEET" -c "$1"; }

# fleet_with_http_origin: a database with tollgate's schema (pg_setup, fleet init)
# and an HTTP origin on loopback serving hello.txt (proxy_lib.sh's start_http_origin:
# HTTP_PORT).
fleet_with_http_origin() {
	pg_setup
	"$TOLLGATE" fleet init "$FLEET" >/dev/null
	mkdir -p "$TEST_TMP/www"
	echo "hello from the origin" >"$TEST_TMP/www/hello.txt"
	start_http_origin "$TEST_TMP/www"
}

# wait_shipped NODE DB: until the centre holds as many rows of NODE as the local log (bounded).
wait_shipped() {
	local node=$1 db=$2 want got
	for _ in $(seq 1 100); do
		want=$(sqlite3 "$db" "select count(*) from events" 2>/dev/null || echo x)
		got=$(psql_q "select count(*) from tollgate_audit where node = '$node'" 2>/dev/null || echo y)
		[[ "$want" == "$got" ]] && return 0
		sleep 0.1
	done
	return 1
}
