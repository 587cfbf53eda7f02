#!/usr/bin/env bash
# Fleet benchmarks on a real PostgreSQL 15 (initdb in a temporary directory, a Unix
# socket only) and `tollgate proxy --fleet` gateways, all on this machine
# (docs/performance.md, "Fleet"; docs/fleet.md, "Sizing").
#
#   tests/bench/bench_fleet.sh [BUILD_DIR]     (default: build; run as root)
#
# Phases:
#   baseline the same rows in one INSERT ... SELECT from a temporary table (psql, timed
#           by the server): the database's own ceiling for them, in the same run.
#   ingest  rows per second one PostgreSQL takes from N gateways (N in NODES): each
#           gateway starts on a local log already holding ROWS/N chained rows
#           (bench_fleet_fill) and ships its backlog; the rate is the rows of the
#           batches begun before the last one over the span of their shipped_at (the
#           start of each batch's storing at the centre), and,
#           for the record, over the wall time from the gateways' start to the last
#           row at the centre. A VACUUM and a CHECKPOINT after each N, so that the
#           next phase does not pay for this one's rows.
#   proxy   a new CONNECT tunnel per request from 16 clients (bench_proxy_client churn,
#           as in bench_proxy.sh) to an nginx origin on loopback, through a proxy
#           without --fleet and one with it, ROUNDS times each in turn, best of each;
#           then the shipping lag of the --fleet proxy's rows (p50, p99 of shipped_at
#           - ts: from the row's local write to its storing at the centre), rows per
#           request and bytes per row at the centre, and side by side the rows per
#           second the --fleet proxy wrote during its runs and those its shipper
#           stored in the same seconds; then the lag again under one client (one new
#           tunnel at a time), a load that leaves the machine room. Over each side's
#           rounds, CPU µs per request: the proxy's event loops, its other threads
#           (the audit writer; with --fleet the shipper too), the server's processes
#           and the machine's busy time on both cores (/proc/stat), so that the
#           rate's difference can be put down to its parts: with the client, the
#           origin, both proxies and the server on two cores, the rate follows the
#           busy time per request.
# Knobs: NODES ("1 4 16"), ROWS (400000 in all per N), CHURN_SECONDS (5), ROUNDS (3),
# PG_FSYNC (on: the server as it would run; off for a figure without the disk),
# SHIP_LOGIN (owner: every gateway ships as the tables' owner; rls: each as a login of
# its own under docs/fleet.md's row-level security, which ships through the staging
# table),
# BENCH_NICE (-20), BENCH_KEEP=1 (keep the temp dir and its logs), PG_BIN.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
tollgate=$build/tollgate
client=$build/bench_proxy_client
fill=$build/bench_fleet_fill
nodes_list=${NODES:-1 4 16}
rows_total=${ROWS:-400000}
churn_secs=${CHURN_SECONDS:-5}
rounds=${ROUNDS:-3}
pg_fsync=${PG_FSYNC:-on}
ship_login=${SHIP_LOGIN:-owner}
[[ $ship_login == owner || $ship_login == rls ]] || { echo "bench_fleet: SHIP_LOGIN is owner or rls" >&2; exit 1; }
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
[[ -x $tollgate && -x $client && -x $fill ]] || {
	echo "bench_fleet: build tollgate, bench_proxy_client and bench_fleet_fill first ($build)" >&2
	exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "bench_fleet: run as root (initdb runs as the postgres user)" >&2; exit 1; }
for tool in nginx psql sqlite3 "$PG_BIN/initdb"; do
	command -v "$tool" >/dev/null || {
		"$src/scripts/install-deps" nginx-light postgresql >/dev/null
		break
	}
done
renice -n "${BENCH_NICE:--20}" -p $$ >/dev/null
ulimit -n "$(ulimit -Hn)"

tmp=$(mktemp -d /tmp/tollgate-bench-fleet.XXXXXX)
chmod 755 "$tmp" # the postgres user reaches its directory through it
pids=()
stop_pids() { # PID...: TERM, up to 10 s each, then KILL
	local p
	for p in "$@"; do kill "$p" 2>/dev/null || true; done
	for p in "$@"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
pg_dir=$tmp/pg
cleanup() {
	stop_pids "${pids[@]}"
	[[ -f $pg_dir/data/postmaster.pid ]] &&
		runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$pg_dir/data" -m fast -w -t 30 stop >/dev/null 2>&1
	if [[ -n ${BENCH_KEEP:-} ]]; then
		echo "bench_fleet: logs kept in $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
port() { "$src/scripts/free-port"; }
calc() { python3 -c "print($1)"; }
kv() { tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
now() { date +%s.%N; }
hz=$(getconf CLK_TCK)
cpu_ticks() { # PID...: utime + stime of each (all threads), summed; gone ones count 0
	local p t=0
	for p in "$@"; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
# A proxy's threads: its event loops (the main thread and tollgate-loopN) apart from
# the rest (the audit writer, and the shipper with --fleet). PID [others]: ticks.
proxy_ticks() {
	local t=0 d c
	for d in /proc/$1/task/*; do
		c=$(cat "$d/comm" 2>/dev/null) || continue
		if [[ ${d##*/} == "$1" || $c == tollgate-loop* ]]; then
			[[ -z ${2:-} ]] || continue
		else
			[[ -n ${2:-} ]] || continue
		fi
		t=$((t + $(awk '{print $14 + $15}' "$d/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
# The machine's busy ticks, both cores (/proc/stat: all but idle and iowait).
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# The server's processes: the postmaster, its children, and (cutime + cstime) the
# children it has reaped: autovacuum's workers and backends that have exited.
pg_cpu() {
	local pm
	pm=$(head -n 1 "$pg_dir/data/postmaster.pid")
	echo $(($(cpu_ticks "$pm" $(pgrep -P "$pm")) + $(awk '{print $16 + $17}' "/proc/$pm/stat")))
}

# --- PostgreSQL 15: its own cluster, a Unix socket in the temp dir, no TCP ---
mkdir -p "$pg_dir/data" "$pg_dir/sock"
chown -R postgres: "$pg_dir"
pg_port=$(port) # names the socket file only
runuser -u postgres -- "$PG_BIN/initdb" -D "$pg_dir/data" -U tollgate -A trust -E UTF8 \
	--no-sync >"$pg_dir/initdb.log" 2>&1 || { cat "$pg_dir/initdb.log" >&2; exit 1; }
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
	-o "-c listen_addresses='' -c unix_socket_directories='$pg_dir/sock' -p $pg_port -c fsync=$pg_fsync -c max_connections=100" \
	start >/dev/null || { cat "$pg_dir/server.log" >&2; exit 1; }
FLEET="host=$pg_dir/sock port=$pg_port user=tollgate dbname=postgres"
psql_q() { psql -X -A -t -q "$FLEET" -c "$1"; }
"$tollgate" fleet init "$FLEET" >/dev/null
echo "bench_fleet: $(nproc) cores, $(date -u +%FT%TZ), PostgreSQL $(psql_q 'show server_version'), fsync=$pg_fsync, shipping as $ship_login" >&2
# SHIP_LOGIN=rls: the shipping role and row-level security of docs/fleet.md, "Roles"
# (tests/integration/fleet_ship_role.sql, as test_fleet_audit applies them).
if [[ $ship_login == rls ]]; then
	psql -X -q -v ON_ERROR_STOP=1 "$FLEET" -f "$src/tests/integration/fleet_ship_role.sql" >/dev/null
fi
# node_url NODE: the URL the gateway named NODE ships with: the owner's, or with
# SHIP_LOGIN=rls a login of its own, ship_NODE, in the shipping role.
node_url() {
	if [[ $ship_login == owner ]]; then
		echo "$FLEET"
		return
	fi
	psql_q "CREATE ROLE \"ship_$1\" LOGIN IN ROLE tollgate_ship" >/dev/null
	echo "host=$pg_dir/sock port=$pg_port user=ship_$1 dbname=postgres"
}

# start_gateway NAME [FLAGS...]: a `tollgate proxy` with its own home, log and control
# socket on a loopback port; sets GW_PID and GW_PORT.
start_gateway() {
	local name=$1 home=$tmp/gw/$1
	shift
	mkdir -p "$home"
	GW_PORT=$(port)
	TOLLGATE_HOME=$home "$tollgate" proxy --listen "127.0.0.1:$GW_PORT" \
		--audit "$home/audit.db" --control "$home/tollgate.ctl" "$@" 2>"$home/stderr.log" &
	GW_PID=$!
	pids+=("$GW_PID")
}
# node_heads NODE...: the sum of each node's newest seq at the centre (index lookups only).
node_heads() {
	local list
	list=$(printf "'%s'," "$@")
	psql_q "select coalesce(sum((select max(seq) from tollgate_audit a where a.node = n)), 0)
		from unnest(array[${list%,}]) n"
}

# --- the baseline: the same rows in one INSERT ... SELECT from a temporary table
# (what each shipped batch does, in one statement), timed by the server: this
# database's own ceiling for these rows on this machine at this moment ---
"$fill" "$tmp/bulk.db" "$rows_total"
sqlite3 -separator $'\t' "$tmp/bulk.db" "select id, ts, kind, sandbox, host, port, decision,
	reason, detail, prev_hash, hash from events" >"$tmp/bulk.tsv"
bulk_ms=$(psql -X -q "$FLEET" 2>&1 <<EOF | awk '/^Time:/ {print $2}' | tail -n 1
create temp table bulk_in (seq bigint, ts text, kind text, sandbox text, host text, port bigint,
	decision text, reason text, detail text, prev_hash text, hash text);
\copy bulk_in from '$tmp/bulk.tsv'
\timing on
insert into tollgate_audit (node, seq, ts, kind, sandbox, host, port, decision, reason, detail,
	prev_hash, hash) select 'bulk', seq, ts, kind, sandbox, host, port, decision, reason, detail,
	prev_hash, hash from bulk_in on conflict (node, seq) do nothing;
EOF
)
[[ $(node_heads bulk) == "$rows_total" ]] || { echo "bench_fleet: the baseline's rows are not all in" >&2; exit 1; }
r_bulk=$(calc "round($rows_total / ($bulk_ms / 1000))")
rm -f "$tmp/bulk.db" "$tmp/bulk.db"-* "$tmp/bulk.tsv"
echo "baseline: $rows_total rows in one INSERT ... SELECT: $r_bulk rows/s" >&2

# --- ingest: N gateways ship their backlogs to one PostgreSQL ---
declare -A r_ingest r_ingest_wall r_pg_cpu r_gw_cpu
for n in $nodes_list; do
	per=$((rows_total / n))
	tmpl=$tmp/fill-$n.db
	"$fill" "$tmpl" "$per"
	# Everything in the main file (a copy without the -wal would miss rows).
	sqlite3 "$tmpl" 'pragma wal_checkpoint(TRUNCATE)' >/dev/null
	names=()
	urls=()
	gw_pids=()
	for i in $(seq "$n"); do
		name=in$n-$i
		names+=("$name")
		mkdir -p "$tmp/gw/$name"
		cp "$tmpl" "$tmp/gw/$name/audit.db"
		# Before the clock and the server's CPU start: a login made here is not ingest.
		urls+=("$(node_url "$name")")
	done
	pg0=$(pg_cpu)
	t0=$(now)
	for i in "${!names[@]}"; do
		start_gateway "${names[$i]}" --fleet "${urls[$i]}" --node "${names[$i]}"
		gw_pids+=("$GW_PID")
	done
	want=$((per * n))
	got=0
	# Bounded: 1800 polls of 0.1 s (and their queries) at most.
	for _ in $(seq 1800); do
		got=$(node_heads "${names[@]}")
		((got >= want)) && break
		sleep 0.1
	done
	t1=$(now)
	# CPU seconds per 100 000 rows: the server's (its backends are still connected)
	# and the gateways' (their shippers; nothing else runs in them here).
	r_pg_cpu[$n]=$(calc "round(($(pg_cpu) - $pg0) / $hz / $want * 100000, 2)")
	r_gw_cpu[$n]=$(calc "round($(cpu_ticks "${gw_pids[@]}") / $hz / $want * 100000, 2)")
	((got >= want)) || { echo "bench_fleet: N=$n: $got of $want rows at the centre after 180 s or more; logs in $tmp/gw" >&2; exit 1; }
	# A batch's rows share its shipped_at, the start of its COPY: the rows of the
	# batches begun before the last began, over the span from the first batch's start
	# to the last's. The centre's own clock, no start-up or polling in it.
	list=$(printf "'%s'," "${names[@]}")
	read -r span early < <(psql_q "with r as (select shipped_at from tollgate_audit where node in (${list%,}))
		select extract(epoch from max(shipped_at) - min(shipped_at)),
		count(*) filter (where shipped_at < (select max(shipped_at) from r)) from r" | tr '|' ' ')
	r_ingest[$n]=$(calc "round($early / max($span, 1e-3))")
	r_ingest_wall[$n]=$(calc "round($want / ($t1 - $t0))")
	echo "ingest N=$n: $want rows ($per per gateway): ${r_ingest[$n]} rows/s between batches, ${r_ingest_wall[$n]} rows/s from start; CPU s per 100k rows: server ${r_pg_cpu[$n]}, gateways ${r_gw_cpu[$n]}" >&2
	stop_pids "${gw_pids[@]}"
	rm -f "$tmpl" "$tmpl"-*
	psql_q "vacuum tollgate_audit" >/dev/null
	psql_q "checkpoint" >/dev/null
done
rows_in_table=$(psql_q "select count(*) from tollgate_audit")
table_bytes=$(psql_q "select pg_table_size('tollgate_audit')")
total_bytes=$(psql_q "select pg_total_relation_size('tollgate_audit')")

# --- proxy: the same churn through a proxy without --fleet and one with it ---
op=$(port)
mkdir -p "$tmp/www" "$tmp/nginx"
head -c 612 /dev/zero | tr '\0' 'x' >"$tmp/www/small"
cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_timeout 60s;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	server {
		listen 127.0.0.1:$op;
		server_name origin.test;
		root $tmp/www;
	}
}
EOF
nginx -e "$tmp/nginx/error.log" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" &
pids+=("$!")
proxy_flags=(--resolve origin.test:127.0.0.1 --allow "origin.test:$op" --allow-cidr 127.0.0.0/8)
start_gateway plain "${proxy_flags[@]}"
plain_port=$GW_PORT
plain_pid=$GW_PID
start_gateway load "${proxy_flags[@]}" --fleet "$(node_url load)" --node load
fleet_port=$GW_PORT
fleet_pid=$GW_PID
ready() { # PROXY_PORT: waits for a 200 of /small through it (bounded)
	for _ in $(seq 100); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' -x "127.0.0.1:$1" --max-time 2 \
			"http://origin.test:$op/small") == 200 ]] && return 0
		sleep 0.1
	done
	echo "bench_fleet: the proxy on $1 did not come up; logs in $tmp/gw" >&2
	exit 1
}
ready "$plain_port"
ready "$fleet_port"
# The load node's rows before the runs (wait until its start-up rows are shipped).
for _ in $(seq 50); do
	[[ $(node_heads load) == "$(sqlite3 "$tmp/gw/load/audit.db" 'select max(id) from events')" ]] && break
	sleep 0.1
done
seq0=$(node_heads load)
declare -A r_churn cpu_loops cpu_others cpu_pg cpu_busy cpu_reqs
reqs_fleet=0
windows=() # each --fleet run's start and end (epoch seconds) and its local head at each
psql_q "checkpoint" >/dev/null
for round in $(seq "$rounds"); do
	# Alternate which goes first, so neither always meets the other's leftovers.
	order=(plain fleet)
	((round % 2)) || order=(fleet plain)
	for which in "${order[@]}"; do
		if [[ $which == plain ]]; then p=$plain_port gp=$plain_pid; else p=$fleet_port gp=$fleet_pid; fi
		c0="$(proxy_ticks "$gp") $(proxy_ticks "$gp" others) $(pg_cpu) $(busy_ticks)"
		w0=$(now)
		h0=$(sqlite3 "$tmp/gw/load/audit.db" 'select max(id) from events')
		out=$("$client" churn -o "127.0.0.1:$op" -h "origin.test:$op" -p /small \
			-x "127.0.0.1:$p" -c 16 -n 1000000 -t "$churn_secs")
		[[ $which == fleet ]] && windows+=("$w0 $(now) $h0 $(sqlite3 "$tmp/gw/load/audit.db" 'select max(id) from events')")
		read -r l0 o0 g0 b0 <<<"$c0"
		read -r l1 o1 g1 b1 <<<"$(proxy_ticks "$gp") $(proxy_ticks "$gp" others) $(pg_cpu) $(busy_ticks)"
		rps=$(kv rps <<<"$out")
		reqs=$(kv requests <<<"$out")
		cpu_loops[$which]=$((${cpu_loops[$which]:-0} + l1 - l0))
		cpu_others[$which]=$((${cpu_others[$which]:-0} + o1 - o0))
		cpu_pg[$which]=$((${cpu_pg[$which]:-0} + g1 - g0))
		cpu_busy[$which]=$((${cpu_busy[$which]:-0} + b1 - b0))
		cpu_reqs[$which]=$((${cpu_reqs[$which]:-0} + reqs))
		failed=$(kv failed <<<"$out")
		[[ $which == fleet ]] && reqs_fleet=$((reqs_fleet + reqs))
		echo "churn round $round $which: $rps req/s ($reqs, $failed failed)" >&2
		if [[ -z ${r_churn[$which]:-} || $(calc "int($rps > ${r_churn[$which]})") == 1 ]]; then
			r_churn[$which]=$rps
		fi
		sleep 1 # let the closing sockets drain before the next run
	done
done
# caught_up: every row of the load node at the centre (bounded: 30 s); sets local_head.
caught_up() {
	local_head=0
	for _ in $(seq 300); do
		local_head=$(sqlite3 "$tmp/gw/load/audit.db" 'select max(id) from events')
		[[ $(node_heads load) == "$local_head" ]] && return 0
		sleep 0.1
	done
	echo "bench_fleet: the load node's rows did not all arrive in 30 s" >&2
	exit 1
}
# lag FROM TO: p50, p99 and max of shipped_at - ts in ms, for the load node's rows FROM < seq <= TO.
lag() {
	psql_q "select
	round(percentile_cont(0.5) within group (order by l)::numeric * 1000, 1),
	round(percentile_cont(0.99) within group (order by l)::numeric * 1000, 1),
	round(max(l)::numeric * 1000, 1)
	from (select extract(epoch from shipped_at - ts::timestamptz) l from tollgate_audit
	      where node = 'load' and seq > $1 and seq <= $2) x" | tr '|' ' '
}
caught_up
read -r lag50 lag99 lagmax < <(lag "$seq0" "$local_head")
seq1=$local_head
# Side by side, over the --fleet runs' seconds: the rows the proxy wrote to its log and
# the rows its shipper stored at the centre (the centre's clock: the same machine's).
written=0
stored=0
secs=0
for w in "${windows[@]}"; do
	read -r w0 w1 h0 h1 <<<"$w"
	written=$((written + h1 - h0))
	stored=$((stored + $(psql_q "select count(*) from tollgate_audit where node = 'load'
		and shipped_at >= to_timestamp($w0) and shipped_at < to_timestamp($w1)")))
	secs=$(calc "$secs + $w1 - $w0")
done
r_written=$(calc "round($written / $secs)")
r_stored=$(calc "round($stored / $secs)")
# The lag again at a load that leaves the machine room: one client, one new tunnel at a
# time (the 16 clients above keep both cores busy, the shipper's thread and the server
# among them).
out=$("$client" churn -o "127.0.0.1:$op" -h "origin.test:$op" -p /small \
	-x "127.0.0.1:$fleet_port" -c 1 -n 1000000 -t "$churn_secs")
rps1=$(kv rps <<<"$out")
echo "churn 1 client fleet: $rps1 req/s" >&2
caught_up
read -r lag1_50 lag1_99 lag1_max < <(lag "$seq1" "$local_head")
rows_per_req=$(calc "round(($seq1 - $seq0) / max($reqs_fleet, 1), 2)")
row_bytes=$(psql_q "select round(avg(pg_column_size(t.*))) from tollgate_audit t where node = 'load' and seq > $seq0 and seq <= $seq1")
# A batch is one transaction: its rows share their xmin.
batch_rows=$(psql_q "select round(avg(c)) from (select count(*) c from tollgate_audit
	where node = 'load' and seq > $seq0 and seq <= $seq1 group by xmin::text) x")

echo
echo "bench_fleet: $(nproc) cores, PostgreSQL $(psql_q 'show server_version'), fsync=$pg_fsync"
echo "ingest, rows per second at one PostgreSQL (backlogs of $rows_total rows in all):"
echo "  baseline $r_bulk rows/s   (the same rows in one INSERT ... SELECT, no gateway)"
for n in $nodes_list; do
	printf '  N=%-3s %8s rows/s   (%s from the gateways'"'"' start); CPU s per 100k rows: server %s, gateways %s; rows per server CPU second %s\n' \
		"$n" "${r_ingest[$n]}" "${r_ingest_wall[$n]}" "${r_pg_cpu[$n]}" "${r_gw_cpu[$n]}" \
		"$(calc "round(100000 / max(${r_pg_cpu[$n]}, 0.01))")"
done
echo "table: $rows_in_table rows, $(calc "round($table_bytes / $rows_in_table)") bytes per row (heap), $(calc "round($total_bytes / $rows_in_table)") with indexes"
echo "proxy churn (new tunnel per request, 16 clients), best of $rounds:"
echo "  without --fleet: ${r_churn[plain]} req/s"
echo "  with --fleet:    ${r_churn[fleet]} req/s"
# CPU µs per request over all rounds of SIDE: the proxy's loops, its other threads,
# the server's processes and the machine's busy time on both cores.
us_per_req() { local -n a=$1; calc "round(${a[$2]} * 1e6 / $hz / max(${cpu_reqs[$2]}, 1), 1)"; }
cpu_line() {
	echo "loops $(us_per_req cpu_loops "$1"), other threads $(us_per_req cpu_others "$1"), server $(us_per_req cpu_pg "$1"), the machine's two cores $(us_per_req cpu_busy "$1")"
}
echo "  CPU µs per request over those rounds, without --fleet: $(cpu_line plain)"
echo "                                         with --fleet:    $(cpu_line fleet)"
echo "shipping under that load: lag p50 $lag50 ms, p99 $lag99 ms, max $lagmax ms; $rows_per_req rows per request; $row_bytes bytes per row (tuple); $batch_rows rows per batch"
echo "  during the --fleet runs: the proxy wrote $r_written rows/s, its shipper stored $r_stored rows/s"
echo "shipping under one client ($rps1 req/s): lag p50 $lag1_50 ms, p99 $lag1_99 ms, max $lag1_max ms"
last_n=${nodes_list##* }
first_n=${nodes_list%% *}
for n in $nodes_list; do
	echo "ingest_rows_per_s_N$n: ${r_ingest[$n]}"
done
echo "ingest_rows_per_server_cpu_s_N$first_n: $(calc "round(100000 / max(${r_pg_cpu[$first_n]}, 0.01))")"
echo "load_rows_written_per_s: $r_written"
echo "load_rows_shipped_per_s: $r_stored"
echo "lag_p50_ms: $lag50"
echo "lag_p99_ms: $lag99"
echo "lag_one_client_p50_ms: $lag1_50"
echo "lag_one_client_p99_ms: $lag1_99"
echo "ratio fleet_vs_plain_proxy_rps: $(calc "round(${r_churn[fleet]} / ${r_churn[plain]}, 3)")"
# The gateway's own CPU per request (its loops and other threads) with --fleet against
# without, and the share of the machine's busy time per request that the server took:
# where the rate's difference goes when the database shares the gateway's cores.
gw_plain=$(calc "(${cpu_loops[plain]} + ${cpu_others[plain]}) / max(${cpu_reqs[plain]}, 1)")
gw_fleet=$(calc "(${cpu_loops[fleet]} + ${cpu_others[fleet]}) / max(${cpu_reqs[fleet]}, 1)")
echo "ratio fleet_vs_plain_gateway_cpu_per_req: $(calc "round($gw_fleet / max($gw_plain, 1e-9), 3)")"
echo "ratio server_vs_machine_busy_per_req: $(calc "round(${cpu_pg[fleet]} / max(${cpu_busy[fleet]}, 1), 3)")"
for n in $nodes_list; do
	echo "ratio ingest_N${n}_vs_one_insert: $(calc "round(${r_ingest[$n]} / $r_bulk, 3)")"
done
echo "ratio ingest_N${last_n}_vs_N${first_n}: $(calc "round(${r_ingest[$last_n]} / ${r_ingest[$first_n]}, 3)")"
for n in $nodes_list; do
	echo "ratio ingest_rows_per_s_N${n}_vs_goal_50000: $(calc "round(${r_ingest[$n]} / 50000, 3)")"
done
echo "ratio load_shipped_vs_written: $(calc "round($r_stored / max($r_written, 1), 3)")"
echo "ratio lag_p99_vs_goal_1s: $(calc "round($lag99 / 1000, 3)")"
echo "ratio lag_one_client_p99_vs_goal_1s: $(calc "round($lag1_99 / 1000, 3)")"
