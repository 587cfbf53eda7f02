#!/usr/bin/env bash
# A fleet on a real PostgreSQL 15 (initdb in the test's directory, a Unix
# socket only): `fleet init` makes schema version 4 (the key and one BRIN
# index) and migrates version 1; three `tollgate proxy` gateways ship their
# audit rows and `audit verify --fleet` passes; `audit --fleet --limit` finds
# the newest rows through its time windows, a node's far-future row
# notwithstanding; rows with UTF-8 in them arrive byte for byte (libpq's
# environment asking for LATIN1 notwithstanding); a tampered local row with a
# NUL byte or bytes that are not UTF-8 is named and the rows before it ship;
# an altered, a deleted and a forked central row are each named; the
# database stopped while requests flow loses and doubles nothing; a gateway
# restarted resumes where it stopped; a crash of the database (no shutdown)
# loses nothing either; and the roles docs/fleet.md gives a DBA hold (a
# node's login inserts its own rows only, and rewrites none). Every request
# is a curl through a proxy on 127.0.0.1 to a name the policy refuses: no
# packet leaves the machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
source "$(dirname "$0")/fleet_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v psql >/dev/null || skip "psql is missing (Debian's postgresql-client)"

pg_setup
# json_field KEY: KEY of each JSON line on stdin.
json_field() { python3 -c 'import json,sys; [print(json.loads(l)[sys.argv[1]]) for l in sys.stdin]' "$1"; }

# -- the URL: a password is refused, and says where it goes instead ------------
set +e
out=$("$TOLLGATE" fleet init 'postgresql://ship:hunter2@localhost/fleet' 2>&1)
rc=$?
set -e
expect_eq "a URL with a password: exit 125" "$rc" 125
checks=$((checks + 1))
if [[ $out == *PGPASSFILE* && $out != *hunter2* ]]; then pass "the refusal names PGPASSFILE and not the password"; else fail "refusal: $out"; fi
set +e
"$TOLLGATE" proxy --listen 127.0.0.1:1 --fleet 'host=x password=hunter2' 2>"$TEST_TMP/pw.err"
rc=$?
set -e
expect_eq "proxy --fleet with a password: exit 125" "$rc" 125
printf '{"listen": "127.0.0.1:1", "fleet": "host=x password=hunter2", "node": "n1"}\n' >"$TEST_TMP/cfg.json"
set +e
out=$("$TOLLGATE" proxy --config "$TEST_TMP/cfg.json" --check-config 2>&1)
rc=$?
set -e
expect_eq "config key fleet with a password: not valid" "$rc" 1
expect_match "the error is at the key, without the password" "$out" "cfg.json:1:[0-9]+: --fleet: the connection string holds a password[^2]*$"

# -- the schema ----------------------------------------------------------------
set +e
"$TOLLGATE" audit --fleet "$FLEET" >/dev/null 2>"$TEST_TMP/noschema.err"
rc=$?
set -e
expect_eq "audit --fleet before fleet init: exit 1" "$rc" 1
checks=$((checks + 1))
if grep -q "fleet init" "$TEST_TMP/noschema.err"; then pass "it names 'fleet init'"; else fail "$(cat "$TEST_TMP/noschema.err")"; fi
expect_eq "fleet init creates the schema" "$("$TOLLGATE" fleet init "$FLEET")" "fleet schema: version 4 created"
expect_eq "fleet init again: nothing to do" "$("$TOLLGATE" fleet init "$FLEET")" "fleet schema: version 4, up to date"
expect_eq "schema version recorded" "$(psql_q 'select version from tollgate_schema')" 4
audit_indexes() { psql_q "select indexname || ' ' || split_part(indexdef, ' USING ', 2) from pg_indexes
	where tablename = 'tollgate_audit' order by 1" | cut -d' ' -f1-2 | tr '\n' ' '; }
expect_eq "version 4: the key and one BRIN index" "$(audit_indexes)" "tollgate_audit_find brin tollgate_audit_pkey btree "

# Version 1 differed from 4 in shipped_at's default (the transaction's start)
# and in three B-trees where 4 has one BRIN index: made so again, `fleet init`
# migrates it, and a gateway refuses it before.
shipped_default() {
	psql_q "select pg_get_expr(adbin, adrelid) from pg_attrdef d join pg_attribute a
		on a.attrelid = d.adrelid and a.attnum = d.adnum
		where d.adrelid = 'tollgate_audit'::regclass and a.attname = 'shipped_at'"
}
expect_eq "version 4: shipped_at is its storing statement's start" "$(shipped_default)" "statement_timestamp()"
# Its Bloom filters stay under the size PostgreSQL would compress (510 bytes).
expect_match "version 4: filters for 400 names a range" \
	"$(psql_q "select pg_get_indexdef('tollgate_audit_find'::regclass)")" "n_distinct_per_range='?400'?.*n_distinct_per_range='?400'?"
psql_q "alter table tollgate_audit alter column shipped_at set default now();
	drop index tollgate_audit_find;
	create index tollgate_audit_ts on tollgate_audit (ts);
	create index tollgate_audit_host on tollgate_audit (host, ts);
	create index tollgate_audit_sandbox on tollgate_audit (sandbox, ts);
	update tollgate_schema set version = 1" >/dev/null
set +e
"$TOLLGATE" audit --fleet "$FLEET" >/dev/null 2>"$TEST_TMP/v1.err"
rc=$?
set -e
expect_eq "audit --fleet on a version-1 schema: exit 1" "$rc" 1
expect_match "it asks for fleet init" "$(cat "$TEST_TMP/v1.err")" "older than this tollgate: run 'tollgate fleet init URL'"
expect_eq "fleet init migrates version 1" "$("$TOLLGATE" fleet init "$FLEET")" "fleet schema: migrated from version 1 to 4"
expect_eq "migrated: shipped_at is its storing statement's start" "$(shipped_default)" "statement_timestamp()"
expect_eq "migrated: the B-trees gave way to the BRIN index" "$(audit_indexes)" "tollgate_audit_find brin tollgate_audit_pkey btree "
expect_eq "migrated: version recorded" "$(psql_q 'select version from tollgate_schema')" 4

# -- three gateways ------------------------------------------------------------
declare -A PORT PID
start_node() {
	start_proxy "$1" --fleet "$FLEET" --node "$1"
	PORT[$1]=$PROXY_PORT
	PID[$1]=$PROXY_PID
}
# requests NODE N: N refused requests through NODE's proxy (each one audit row or more).
requests() {
	local code
	for i in $(seq 1 "$2"); do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:${PORT[$1]}" "http://refused-$i.test/")
		[[ $code == 403 ]] || fail "$1: request $i answered $code, want 403"
	done
}
# host_row NODE HOST: NODE's local log holds a row for HOST (the 403 goes out
# before the writer's commit).
host_row() { [[ $(sqlite3 -cmd '.timeout 5000' "$TEST_TMP/$1.db" "select count(*) from events where host = '$2'") -ge 1 ]]; }
for n in gw-a gw-b gw-c; do start_node "$n"; done
for n in gw-a gw-b gw-c; do requests "$n" 5; done
for n in gw-a gw-b gw-c; do
	checks=$((checks + 1))
	if wait_shipped "$n" "$TEST_TMP/$n.db"; then pass "$n: every row shipped"; else fail "$n: local $(sqlite3 "$TEST_TMP/$n.db" 'select count(*) from events'), centre $(psql_q "select count(*) from tollgate_audit where node='$n'")"; fi
done
out=$("$TOLLGATE" audit verify --fleet "$FLEET")
expect_eq "audit verify --fleet: three nodes intact" "$(grep -c 'chain intact' <<<"$out")" 3
out=$("$TOLLGATE" audit --fleet "$FLEET" --node gw-b --kind decision --json)
expect_eq "audit --fleet --node gw-b: only gw-b's decisions" \
	"$(json_field node <<<"$out" | sort -u)" gw-b
expect_eq "audit --fleet --node gw-b: as many as its local log" \
	"$(wc -l <<<"$out")" "$(sqlite3 "$TEST_TMP/gw-b.db" "select count(*) from events where kind='decision'")"
expect_eq "audit --fleet --host: one name across the fleet" \
	"$("$TOLLGATE" audit --fleet "$FLEET" --host refused-2.test --json | json_field node | sort | tr '\n' ' ')" "gw-a gw-b gw-c "

# -- the newest rows through time windows: rows of a node gw-t put straight into
# the table (as its owner) 40 days, 2 days, an hour and a minute ago; each
# --limit reaches back as far as it must, and no further than --since --------
ago() { echo "to_char((now() - interval '$1') at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"; }
psql_q "insert into tollgate_audit (node, seq, ts, kind, host, decision, prev_hash, hash) values
	('gw-t', 1, $(ago '40 days'), 'decision', 'window.test', 'deny', 'x', 'x'),
	('gw-t', 2, $(ago '2 days'), 'decision', 'window.test', 'deny', 'x', 'x'),
	('gw-t', 3, $(ago '1 hour'), 'decision', 'window.test', 'deny', 'x', 'x'),
	('gw-t', 4, $(ago '1 minute'), 'decision', 'window.test', 'deny', 'x', 'x')" >/dev/null
newest() { "$TOLLGATE" audit --fleet "$FLEET" --json "$@" | json_field seq | tr '\n' ' '; }
expect_eq "--node gw-t --limit 1: the last ten minutes hold it" "$(newest --node gw-t --limit 1)" "4 "
expect_eq "--limit 2: the last day" "$(newest --node gw-t --limit 2)" "3 4 "
expect_eq "--limit 3: the last thirty days" "$(newest --node gw-t --limit 3)" "2 3 4 "
expect_eq "--limit 4: all of it" "$(newest --node gw-t --limit 4)" "1 2 3 4 "
expect_eq "--limit 9: no more than there is" "$(newest --node gw-t --limit 9)" "1 2 3 4 "
expect_eq "every node, --host window.test --limit 2" "$(newest --host window.test --limit 2)" "3 4 "
expect_eq "--since 3d --limit 9: the bound asked holds" "$(newest --host window.test --since 3d --limit 9)" "2 3 4 "
expect_eq "--host window.test, no --limit: every row" "$(newest --host window.test)" "1 2 3 4 "
# A node whose row claims the year 2999 moves every window past the others' rows:
# the search reads everything and still answers the same.
psql_q "insert into tollgate_audit (node, seq, ts, kind, host, prev_hash, hash) values
	('gw-f', 1, '2999-01-01T00:00:00.000Z', 'decision', 'future.test', 'x', 'x')" >/dev/null
expect_eq "a head in 2999: --host window.test --limit 2 still the newest two" "$(newest --host window.test --limit 2)" "3 4 "
psql_q "delete from tollgate_audit where node in ('gw-t', 'gw-f')" >/dev/null

# -- rows with UTF-8 in them, from a gateway whose environment asks libpq for
# LATIN1: the centre stores the local log's bytes and the chain verifies ------
mkdir -p "$TEST_TMP/políticas"
printf '{"version": 1, "deny": ["refused-1.test"]}\n' >"$TEST_TMP/políticas/p.json"
PGCLIENTENCODING=LATIN1 start_proxy gw-u --fleet "$FLEET" --node gw-u --policy "$TEST_TMP/políticas/p.json"
PORT[gw-u]=$PROXY_PORT
requests gw-u 1
wait_for 10 host_row gw-u refused-1.test || fail "gw-u wrote no row for its request: $(sqlite3 "$TEST_TMP/gw-u.db" 'select * from events' 2>&1)"
checks=$((checks + 1))
if wait_shipped gw-u "$TEST_TMP/gw-u.db"; then pass "gw-u: its rows shipped"; else fail "gw-u: local $(sqlite3 "$TEST_TMP/gw-u.db" 'select count(*) from events'), centre $(psql_q "select count(*) from tollgate_audit where node='gw-u'")"; fi
local_detail=$(sqlite3 -cmd '.timeout 5000' "$TEST_TMP/gw-u.db" "select detail from events where kind = 'decision' and host = 'refused-1.test'")
expect_match "the local row names the policy file, UTF-8 and all" "$local_detail" "políticas/p.json"
expect_eq "the centre holds the same bytes" \
	"$(PGCLIENTENCODING=UTF8 psql_q "select detail from tollgate_audit where node = 'gw-u' and kind = 'decision' and host = 'refused-1.test'")" "$local_detail"
set +e
out=$("$TOLLGATE" audit verify --fleet "$FLEET" --node gw-u)
rc=$?
set -e
expect_eq "audit verify --fleet --node gw-u: intact" "$rc" 0
expect_eq "gw-u: chain intact" "$(grep -c 'chain intact' <<<"$out")" 1
stop_proxy "$PROXY_PID"

# -- a tampered local log, a NUL byte in a row and then bytes that are not UTF-8
# in another: the rows before each ship, it is named, nothing after it goes out
# of order, and the gateway keeps serving ------------------------------------
start_proxy gw-n
PORT[gw-n]=$PROXY_PORT
requests gw-n 3
wait_for 10 host_row gw-n refused-3.test || fail "gw-n wrote no rows"
stop_proxy "$PROXY_PID"
bad=$(sqlite3 "$TEST_TMP/gw-n.db" "select min(id) from events where host = 'refused-2.test'")
orig=$(sqlite3 "$TEST_TMP/gw-n.db" "select hex(detail) from events where id = $bad")
sqlite3 "$TEST_TMP/gw-n.db" "update events set detail = 'a' || char(0) || 'b' where id = $bad"
start_proxy gw-n --fleet "$FLEET" --node gw-n
PORT[gw-n]=$PROXY_PORT
bad_named() { grep -q "row $1 of the local log cannot be shipped (a NUL byte or bytes that are not UTF-8)" "$TEST_TMP/gw-n.log"; }
checks=$((checks + 1))
if wait_for 15 bad_named "$bad"; then pass "gw-n names row $bad"; else fail "gw-n: $(tail -3 "$TEST_TMP/gw-n.log")"; fi
expect_eq "gw-n: the rows before it at the centre, none after" \
	"$(psql_q "select count(*) || ' ' || max(seq) from tollgate_audit where node = 'gw-n'")" "$((bad - 1)) $((bad - 1))"
# The row mended, and a later one given a byte that is not UTF-8: the shipper,
# retrying, ships the mended row and the ones after it, and names that one.
bad2=$(sqlite3 "$TEST_TMP/gw-n.db" "select min(id) from events where host = 'refused-3.test'")
sqlite3 -cmd '.timeout 5000' "$TEST_TMP/gw-n.db" "update events set detail = cast(x'$orig' as text) where id = $bad;
	update events set detail = 'a' || cast(x'ff' as text) || 'b' where id = $bad2"
checks=$((checks + 1))
if wait_for 20 bad_named "$bad2"; then pass "gw-n names row $bad2"; else fail "gw-n: $(tail -3 "$TEST_TMP/gw-n.log")"; fi
expect_eq "gw-n: the rows before that one at the centre, none after" \
	"$(psql_q "select count(*) || ' ' || max(seq) from tollgate_audit where node = 'gw-n'")" "$((bad2 - 1)) $((bad2 - 1))"
set +e
"$TOLLGATE" audit verify --fleet "$FLEET" --node gw-n >/dev/null
rc=$?
set -e
expect_eq "gw-n: the chain at the centre is intact up to there" "$rc" 0
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:${PORT[gw-n]}" "http://refused-9.test/" || true)
expect_eq "gw-n still answers" "$code" 403
stop_proxy "$PROXY_PID"

# -- the database stops while requests flow, then comes back ------------------
pg_stop
for n in gw-a gw-b gw-c; do requests "$n" 4; done
# The shipper finds the database gone at its next batch, a moment after the
# requests (longer under a sanitizer): bounded wait.
shipping_paused() { grep -q "shipping paused" "$TEST_TMP/gw-a.log"; }
checks=$((checks + 1))
if wait_for 15 shipping_paused; then pass "gw-a says shipping paused"; else fail "no pause in gw-a's log"; fi
pg_start
for n in gw-a gw-b gw-c; do requests "$n" 2; done
for n in gw-a gw-b gw-c; do
	checks=$((checks + 1))
	if wait_shipped "$n" "$TEST_TMP/$n.db"; then pass "$n: shipped after the database came back"; else fail "$n: rows missing after the restart"; fi
	expect_eq "$n: each seq once, 1..max" \
		"$(psql_q "select count(distinct seq) = max(seq) and count(*) = max(seq) from tollgate_audit where node = '$n'")" t
done

# -- a gateway restarts: shipping resumes from the centre's newest seq --------
stop_proxy "${PID[gw-a]}"
expect_eq "gw-a stopped cleanly" "$STOP_RC" 0
start_node gw-a
requests gw-a 3
checks=$((checks + 1))
if wait_shipped gw-a "$TEST_TMP/gw-a.db"; then pass "gw-a resumed after its restart"; else fail "gw-a did not resume"; fi
set +e
"$TOLLGATE" audit verify --fleet "$FLEET" >/dev/null
rc=$?
set -e
expect_eq "audit verify --fleet after the restarts" "$rc" 0

# -- the database crashes (no shutdown) just after a batch ---------------------
# The shipper commits without waiting for the server's disk: what a crash
# takes back is shipped again after the reconnection, once.
requests gw-b 3
checks=$((checks + 1))
if wait_shipped gw-b "$TEST_TMP/gw-b.db"; then pass "gw-b shipped before the crash"; else fail "gw-b did not ship"; fi
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w -t 30 stop >/dev/null
pg_start
requests gw-b 2
checks=$((checks + 1))
if wait_shipped gw-b "$TEST_TMP/gw-b.db"; then pass "gw-b: every row at the centre after the crash"; else fail "gw-b: rows missing after the crash"; fi
expect_eq "gw-b: each seq once after the crash" \
	"$(psql_q "select count(distinct seq) = max(seq) and count(*) = max(seq) from tollgate_audit where node = 'gw-b'")" t
# shipped_at is when the batch's storing began, after its rows were read: never before a row's own time.
expect_eq "no row shipped before it was written" \
	"$(psql_q "select count(*) from tollgate_audit where shipped_at < ts::timestamptz")" 0

# -- a row at the centre ahead of the shipper (say a commit an old connection
# made late): the batch that meets it still lands, each row once ---------------
# A session holds the table (SHARE: no other writer) while gw-c writes rows and
# its shipper's COPY waits; the session stores a copy of one of them, commits,
# and the COPY then meets it. (The first of the new rows: a real shipper's rows
# at the centre never skip one, and shipping resumes after the newest.)
# gw-c's connection died with the crash above: one row shipped makes a new one.
reconnects_c() { grep -c "shipping again" "$TEST_TMP/gw-c.log" || true; }
again_c=$(reconnects_c)
requests gw-c 1
reconnected_c() { (($(reconnects_c) > again_c)); }
wait_for 15 reconnected_c || fail "gw-c did not reconnect: $(tail -3 "$TEST_TMP/gw-c.log")"
wait_shipped gw-c "$TEST_TMP/gw-c.db" || fail "gw-c did not ship after reconnecting"
mkfifo "$TEST_TMP/lock.fifo"
psql -X -q "$FLEET" -v ON_ERROR_STOP=1 <"$TEST_TMP/lock.fifo" >"$TEST_TMP/lock.out" 2>&1 &
lock_pid=$!
exec 3>"$TEST_TMP/lock.fifo"
echo "BEGIN; LOCK TABLE tollgate_audit IN SHARE MODE;" >&3
copy_waits() { # a gateway's backend (not autovacuum) waits for a lock on tollgate_audit
	[[ $(psql_q "select count(*) from pg_locks l join pg_stat_activity a using (pid)
		where l.relation = 'tollgate_audit'::regclass and not l.granted
		and a.application_name = 'tollgate'") -ge 1 ]]
}
lock_held() {
	[[ $(psql_q "select count(*) from pg_locks where relation = 'tollgate_audit'::regclass and mode = 'ShareLock' and granted") -ge 1 ]]
}
checks=$((checks + 1))
if wait_for 10 lock_held; then pass "the table is held"; else fail "no SHARE lock: $(cat "$TEST_TMP/lock.out")"; fi
head_c=$(psql_q "select max(seq) from tollgate_audit where node = 'gw-c'")
pauses_c=$(grep -c "shipping paused" "$TEST_TMP/gw-c.log" || true)
requests gw-c 3
checks=$((checks + 1))
if wait_for 10 copy_waits; then pass "gw-c's shipper waits for the table"; else fail "gw-c's shipper did not come"; fi
local_has() { [[ $(sqlite3 "$TEST_TMP/gw-c.db" "select count(*) from events where id = $1") == 1 ]]; }
wait_for 10 local_has $((head_c + 1)) || fail "gw-c did not write row $((head_c + 1))"
sqlite3 -cmd '.timeout 5000' -separator $'\t' -nullvalue '\N' "$TEST_TMP/gw-c.db" "select 'gw-c', id, ts, kind, sandbox, host,
	port, decision, reason, detail, prev_hash, hash from events where id = $((head_c + 1))" >"$TEST_TMP/ahead.tsv"
echo "\\copy tollgate_audit (node, seq, ts, kind, sandbox, host, port, decision, reason, detail, prev_hash, hash) from '$TEST_TMP/ahead.tsv'" >&3
expect_eq "the row to store ahead was read from gw-c's log" "$(wc -l <"$TEST_TMP/ahead.tsv")" 1
echo "COMMIT;" >&3
exec 3>&-
wait "$lock_pid" || fail "the locking session failed: $(cat "$TEST_TMP/lock.out")"
checks=$((checks + 1))
if wait_shipped gw-c "$TEST_TMP/gw-c.db"; then pass "gw-c: the batch that met a row already there landed"; else fail "gw-c: rows missing after the conflict: $(tail -3 "$TEST_TMP/gw-c.log")"; fi
expect_eq "gw-c: each seq once" \
	"$(psql_q "select count(distinct seq) = max(seq) and count(*) = max(seq) from tollgate_audit where node = 'gw-c'")" t
checks=$((checks + 1))
if grep -q 'duplicate key value violates unique constraint "tollgate_audit_pkey"' "$PG_DIR/server.log"; then
	pass "the COPY straight into the table met the row (and the batch went again, staged)"
else
	fail "no conflict in the server's log: the batch did not go straight in ($(grep -E 'ERROR|STATEMENT' "$PG_DIR/server.log" | tail -4); $(tail -3 "$TEST_TMP/gw-c.log"))"
fi
expect_eq "gw-c kept its connection (the batch went again, no reconnection)" \
	"$(grep -c "shipping paused" "$TEST_TMP/gw-c.log" || true)" "$pauses_c"
out=$("$TOLLGATE" audit verify --fleet "$FLEET" --node gw-c)
expect_eq "gw-c's chain intact after the conflict" "$(grep -c 'chain intact' <<<"$out")" 1

# -- two processes write one local log: gw-d ships, gw-d2 (no --fleet) writes
# to the same file. gw-d's shipper takes its own process's rows as they are
# written and reads gw-d2's from the log: every row arrives once, one chain --
start_node gw-d
PORT[gw-d2]=$(free_port)
"$TOLLGATE" proxy --listen "127.0.0.1:${PORT[gw-d2]}" --upstream-dns "127.0.0.1:$DEAD_DNS_PORT" \
	--audit "$TEST_TMP/gw-d.db" --control "$TEST_TMP/gw-d2.sock" 2>"$TEST_TMP/gw-d2.log" &
PID[gw-d2]=$!
defer "kill ${PID[gw-d2]} 2>/dev/null"
wait_for 10 port_open "${PORT[gw-d2]}" || fail "gw-d2 did not start: $(cat "$TEST_TMP/gw-d2.log")"
for _ in 1 2 3 4 5 6; do
	requests gw-d 2
	requests gw-d2 1
done
checks=$((checks + 1))
if wait_shipped gw-d "$TEST_TMP/gw-d.db"; then pass "gw-d: every row of the shared log shipped"; else fail "gw-d: local $(sqlite3 "$TEST_TMP/gw-d.db" 'select count(*) from events'), centre $(psql_q "select count(*) from tollgate_audit where node='gw-d'")"; fi
expect_eq "gw-d: each seq once" \
	"$(psql_q "select count(distinct seq) = max(seq) and count(*) = max(seq) from tollgate_audit where node = 'gw-d'")" t
expect_eq "gw-d: gw-d2's rows are there too" \
	"$(psql_q "select count(*) from tollgate_audit where node = 'gw-d' and host like 'refused-%'")" \
	"$(sqlite3 "$TEST_TMP/gw-d.db" "select count(*) from events where host like 'refused-%'")"
out=$("$TOLLGATE" audit verify --fleet "$FLEET" --node gw-d)
expect_eq "gw-d's chain intact at the centre" "$(grep -c 'chain intact' <<<"$out")" 1
stop_proxy "${PID[gw-d2]}"
stop_proxy "${PID[gw-d]}"

# -- tampering at the centre is named -----------------------------------------
for n in gw-a gw-b gw-c; do stop_proxy "${PID[$n]}"; done
psql_q "update tollgate_audit set host = 'allowed.test' where node = 'gw-b' and seq = 3" >/dev/null
psql_q "delete from tollgate_audit where node = 'gw-c' and seq = 2" >/dev/null
psql_q "update tollgate_audit set prev_hash = repeat('a', 64) where node = 'gw-a' and seq = 4" >/dev/null
set +e
out=$("$TOLLGATE" audit verify --fleet "$FLEET" 2>&1)
rc=$?
set -e
expect_eq "audit verify --fleet on a tampered centre: exit 1" "$rc" 1
checks=$((checks + 1))
if grep -q "node gw-b: altered: row 3" <<<"$out"; then pass "the altered row is named"; else fail "altered: $out"; fi
checks=$((checks + 1))
if grep -q "node gw-c: gap: row 2 is missing" <<<"$out"; then pass "the gap is named"; else fail "gap: $out"; fi
checks=$((checks + 1))
if grep -q "node gw-a: fork: row 4" <<<"$out"; then pass "the fork is named"; else fail "fork: $out"; fi
json=$("$TOLLGATE" audit verify --fleet "$FLEET" --node gw-b --json 2>/dev/null || true)
expect_eq "verify --json --node gw-b: problem" "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"][0]["problem"])' <<<"$json")" altered

# -- the roles docs/fleet.md gives a DBA: a node inserts only its own rows -----
psql -X -q "$FLEET" -v ON_ERROR_STOP=1 -f "$(dirname "$0")/fleet_ship_role.sql" >/dev/null
psql -X -q "$FLEET" -v ON_ERROR_STOP=1 -c "CREATE ROLE ship_gwr LOGIN IN ROLE tollgate_ship" >/dev/null
SHIP="host=$PG_SOCK port=$PG_PORT user=ship_gwr dbname=postgres"
start_proxy gwr --fleet "$SHIP" --node gwr
PORT[gwr]=$PROXY_PORT
requests gwr 3
checks=$((checks + 1))
if wait_shipped gwr "$TEST_TMP/gwr.db"; then pass "the shipping role ships its node's rows"; else fail "gwr did not ship: $(grep fleet "$TEST_TMP/gwr.log" | tail -2)"; fi
stop_proxy "$PROXY_PID"
start_proxy gwr-as-other --fleet "$SHIP" --node gw-x
requests_port() { curl -s -o /dev/null --max-time 10 -x "http://127.0.0.1:$PROXY_PORT" "http://refused.test/" || true; }
requests_port
checks=$((checks + 1))
if wait_for 10 grep -q "row-level security" "$TEST_TMP/gwr-as-other.log"; then pass "another node's name under the shipping role is refused by the database"; else fail "no refusal in $(tail -3 "$TEST_TMP/gwr-as-other.log")"; fi
expect_eq "no row of gw-x arrived" "$(psql_q "select count(*) from tollgate_audit where node = 'gw-x'")" 0
stop_proxy "$PROXY_PID"
set +e
psql -X -q "$SHIP" -c "update tollgate_audit set host = 'x' where node = 'gwr'" >/dev/null 2>&1
rc=$?
set -e
expect_eq "the shipping role cannot rewrite its own shipped rows" "$rc" 1

finish
