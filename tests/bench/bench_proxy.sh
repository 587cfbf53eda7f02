#!/usr/bin/env bash
# Proxy benchmarks: `tollgate proxy` against direct, Squid and tinyproxy, all in one run
# on loopback, printing every figure as a ratio (docs/performance.md, "Proxy").
#
#   tests/bench/bench_proxy.sh [BUILD_DIR]     (default: build; run as root)
#
# Phases: 1 GiB through one CONNECT tunnel (also the total CPU per GiB of client, origin
# and proxy, against direct's: the median of each round's ratio); absolute-form HTTP
# under wrk -c16; a new CONNECT tunnel per request from 16 clients; latency of one request at a time (kept-alive
# absolute form, and a new tunnel each), p50 and p99, less direct's; RSS per idle tunnel. CPU seconds per GiB and
# per 1000 requests come from /proc/PID/stat of each proxy before and after each phase.
# Knobs: WRK_SECONDS (10), CHURN_SECONDS (5), ROUNDS (2: wrk and churn runs per target),
# FETCH_RUNS (3), IDLE_TUNNELS (10000, capped by the fd limit), PHASES ("fetch wrk churn
# idle": a subset runs only those; "loops", not in the default set: kept-alive wrk load on
# tollgate --loops 1 pinned to core 0 and --loops 2 on cores 0-1, and on Squid with
# workers 1 and workers 2 pinned alike, the clients and origin unpinned), BENCH_NICE (-20), BENCH_KEEP=1 (keep the temp dir and
# its logs), LATENCY_REQS (2000 per target and round), BENCH_PERF_DIR=DIR (`perf record -g`
# of tollgate per phase into DIR/tollgate-PHASE.data; the figures then carry perf's cost),
# TOLLGATE_BENCH_EXTRA_FLAGS="FLAGS" (added to tollgate proxy's command line, split at
# spaces: a knob's cost is a run with it against a run without, e.g.
# TOLLGATE_BENCH_EXTRA_FLAGS="--access-log /tmp/access.log"), PROXY_BENCH_BEFORE=DIR (another
# build's tollgate, e.g. the tree before a change, measured as one more target "before" in the
# same rounds; the ratios tollgate/before end the output).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
tollgate=$build/tollgate
client=$build/bench_proxy_client
wrk_secs=${WRK_SECONDS:-10}
churn_secs=${CHURN_SECONDS:-5}
fetch_runs=${FETCH_RUNS:-3}
rounds=${ROUNDS:-2}
phases=" ${PHASES:-fetch wrk churn latency idle} "
lat_reqs=${LATENCY_REQS:-2000}
phase() { [[ $phases == *" $1 "* ]]; }
[[ -x $tollgate && -x $client ]] || {
	echo "bench_proxy: build tollgate and bench_proxy_client first ($build)" >&2
	exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "bench_proxy: run as root (squid, tinyproxy, unshare)" >&2; exit 1; }
# Only when one is missing: install-deps also checks the whole build list.
for tool in nginx squid tinyproxy wrk curl unshare; do
	command -v "$tool" >/dev/null || {
		"$src/scripts/install-deps" nginx-light squid tinyproxy wrk >/dev/null
		break
	}
done
# Everything started from here (client, origin, proxies) runs ahead of other work on a
# shared machine, alike for every target: figures then vary far less between runs.
renice -n "${BENCH_NICE:--20}" -p $$ >/dev/null

# Every process gets as many fds as the hard limit allows; idle tunnels need two each
# in a proxy, so the tunnel count is capped to fit.
ulimit -n "$(ulimit -Hn)"
nofile=$(ulimit -n)
idle_max=$(((nofile - 200) / 2))
idle_n=${IDLE_TUNNELS:-10000}
((idle_n > idle_max)) && idle_n=$idle_max

tmp=$(mktemp -d /tmp/tollgate-bench-proxy.XXXXXX)
chmod 755 "$tmp" # squid and tinyproxy drop to their own users and read their files here
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	perf_stop
	rm -f "$tmp/www/big"
	if [[ -n ${BENCH_KEEP:-} ]]; then
		echo "bench_proxy: logs kept in $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
port() { "$src/scripts/free-port"; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime of all threads, ticks
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)
calc() { python3 -c "print($1)"; }
perf_dir=${BENCH_PERF_DIR:-}
perf_pid=""
perf_start() { # NAME PHASE
	[[ -n $perf_dir && $1 == tollgate ]] || return 0
	mkdir -p "$perf_dir"
	perf record -q -g -p "$tg_pid" -o "$perf_dir/tollgate-$2.data" 2>/dev/null &
	perf_pid=$!
	sleep 0.5
}
perf_stop() {
	[[ -n $perf_pid ]] || return 0
	kill -INT "$perf_pid" 2>/dev/null || true
	wait "$perf_pid" 2>/dev/null || true
	perf_pid=""
}

# --- origin: nginx with a sparse 1 GiB file and a small one ---
op=$(port)
mkdir -p "$tmp/www" "$tmp/nginx"
truncate -s 1G "$tmp/www/big"
cat "$tmp/www/big" >/dev/null # in the page cache before the first run, for every run alike
head -c 612 /dev/zero | tr '\0' 'x' >"$tmp/www/small"
cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $nofile;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections $((nofile - 100)); }
http {
	access_log off;
	default_type application/octet-stream;
	sendfile on;
	tcp_nopush on;
	keepalive_timeout 600s;
	keepalive_requests 100000000;
	client_header_timeout 600s;
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

# The allowlist each proxy gets: the origin's name on its port, nothing else.
printf '127.0.0.1 origin.test\n' >"$tmp/hosts"

# --- tollgate ---
# The per-client cap is at most a quarter of --max-conns: the idle tunnels come
# from eight loopback addresses (bench_proxy_client idle), so each holds an eighth.
read -r -a tg_extra <<<"${TOLLGATE_BENCH_EXTRA_FLAGS:-}"
tp=$(port)
TOLLGATE_HOME=$tmp/home "$tollgate" proxy --loops 1 --listen "127.0.0.1:$tp" \
	--resolve origin.test:127.0.0.1 --allow "origin.test:$op" --allow-cidr 127.0.0.0/8 \
	--audit "$tmp/audit.db" --control "$tmp/tollgate.ctl" \
	--max-conns $((idle_n + 1000)) --max-conns-per-client $((idle_n + 1000)) \
	--idle-timeout 600s "${tg_extra[@]}" 2>"$tmp/tollgate.log" &
tg_pid=$!
pids+=("$tg_pid")
before=${PROXY_BENCH_BEFORE:+$PROXY_BENCH_BEFORE/tollgate}
if [[ -n $before ]]; then
	bp=$(port)
	TOLLGATE_HOME=$tmp/home-before "$before" proxy --listen "127.0.0.1:$bp" \
		--resolve origin.test:127.0.0.1 --allow "origin.test:$op" --allow-cidr 127.0.0.0/8 \
		--audit "$tmp/audit-before.db" --control "$tmp/before.ctl" \
		--max-conns $((idle_n + 1000)) --max-conns-per-client $((idle_n + 1000)) \
		--idle-timeout 600s "${tg_extra[@]}" 2>"$tmp/before.log" &
	bf_pid=$!
	pids+=("$bf_pid")
fi

# --- squid: foreground, no cache, hosts from the temp file, the same ACL ---
sp=$(port)
mkdir -p "$tmp/squid"
chown proxy:proxy "$tmp/squid"
cat >"$tmp/squid/squid.conf" <<EOF
http_port 127.0.0.1:$sp
visible_hostname bench.test
pid_filename $tmp/squid/squid.pid
cache_log $tmp/squid/cache.log
access_log none
cache_store_log none
coredump_dir $tmp/squid
netdb_filename none
cache deny all
cache_mem 8 MB
hosts_file $tmp/hosts
dns_nameservers 127.0.0.1
debug_options ALL,1
max_filedescriptors $nofile
shutdown_lifetime 1 seconds
icp_port 0
htcp_port 0
acl origin dstdomain origin.test
acl origin_port port $op
http_access allow origin origin_port
http_access deny all
EOF
squid -f "$tmp/squid/squid.conf" -N 2>"$tmp/squid/stderr.log" &
sq_pid=$!
pids+=("$sq_pid")

# --- tinyproxy: foreground; it resolves with the system's resolver, so it runs in its
# own mount namespace where /etc/hosts is the temp file ---
yp=$(port)
mkdir -p "$tmp/tinyproxy"
chown nobody:nogroup "$tmp/tinyproxy"
printf '^origin\\.test$\n' >"$tmp/tinyproxy/filter"
cat >"$tmp/tinyproxy/tinyproxy.conf" <<EOF
User nobody
Group nogroup
Port $yp
Listen 127.0.0.1
Timeout 600
LogFile "$tmp/tinyproxy/tinyproxy.log"
LogLevel Warning
PidFile "$tmp/tinyproxy/tinyproxy.pid"
MaxClients 1000
Allow 127.0.0.1
Filter "$tmp/tinyproxy/filter"
FilterType ere
FilterDefaultDeny Yes
ConnectPort $op
DisableViaHeader Yes
EOF
# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
unshare -m sh -c 'mount --bind "$1" /etc/hosts && exec tinyproxy -d -c "$2"' sh \
	"$tmp/hosts" "$tmp/tinyproxy/tinyproxy.conf" 2>"$tmp/tinyproxy/stderr.log" &
ty_pid=$!
pids+=("$ty_pid")

ready() { # PROXY_PORT|"" -> waits for a 200 of /small
	local args=()
	[[ -n $1 ]] && args=(-x "127.0.0.1:$1")
	for _ in $(seq 100); do
		if [[ $(curl -s -o /dev/null -w '%{http_code}' "${args[@]}" --max-time 2 \
			"http://origin.test:$op/small" --resolve "origin.test:$op:127.0.0.1") == 200 ]]; then
			return 0
		fi
		sleep 0.1
	done
	echo "bench_proxy: ${1:-origin} did not come up; logs in $tmp" >&2
	tail -n 5 "$tmp"/*.log "$tmp"/*/*.log >&2 || true
	exit 1
}
# The same allowlist: another name on the same origin is refused by each proxy.
refused() { # PROXY_PORT
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' -x "127.0.0.1:$1" --max-time 5 \
		"http://other.test:$op/small" || true)
	[[ $code == 403 ]] || { echo "bench_proxy: port $1 let other.test through ($code)" >&2; exit 1; }
}
ready ""
ngx_worker=$(pgrep -P "${pids[0]}" nginx | head -n 1)
for p in "$tp" "$sp" "$yp" ${bp:-}; do
	ready "$p"
	refused "$p"
done

names=(direct tollgate squid tinyproxy)
declare -A pport=([direct]="" [tollgate]=$tp [squid]=$sp [tinyproxy]=$yp)
declare -A ppid=([direct]="" [tollgate]=$tg_pid [squid]=$sq_pid [tinyproxy]=$ty_pid)
if [[ -n $before ]]; then
	names+=(before)
	pport[before]=$bp
	ppid[before]=$bf_pid
fi
via() { if [[ -n ${pport[$1]} ]]; then echo "-x 127.0.0.1:${pport[$1]}"; fi; }
kv() { tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }

declare -A r_fetch r_fetch_cpu r_fetch_all r_wrk r_wrk_cpu r_churn r_churn_cpu r_idle
declare -A r_lka50 r_lka99 r_lnew50 r_lnew99
echo "bench_proxy: $(nproc) cores, $(date -u +%FT%TZ), idle tunnels: $idle_n" >&2

# Each phase runs the four targets in turn, ROUNDS times over, and keeps each target's
# best run (with that run's CPU figure): on a shared machine a run is only ever slowed
# down by others, and interleaving spreads that over all four alike.
better() { [[ -z ${2:-} || $(calc "int($1 > $2)") == 1 ]]; }
cpu_of() { [[ -n ${ppid[$1]} ]] && cpu "${ppid[$1]}" || echo 0; }

# --- 1 GiB through one CONNECT tunnel (direct: the same GET without a proxy) ---
# Each run's client + origin + proxy CPU per GiB is kept too (fetch_all_runs), for the
# bulk goal: the median over rounds of (a target's total / direct's total in that round).
# Softirq work that ksoftirqd does instead of the process that raised it is in no
# process's figure: it is printed beside each run (machine-wide, so others' too).
declare -A fetch_all_runs
ksoftirqd_cpu() {
	local sum=0 p
	for p in $(pgrep -x 'ksoftirqd/[0-9]+'); do sum=$((sum + $(cpu "$p"))); done
	echo "$sum"
}
phase fetch || fetch_runs=0
for _ in $(seq "$fetch_runs"); do
	for n in "${names[@]}"; do
		perf_start "$n" fetch
		c0=$(cpu_of "$n")
		g0=$(cpu "$ngx_worker")
		k0=$(ksoftirqd_cpu)
		# shellcheck disable=SC2046
		out=$("$client" fetch -o "127.0.0.1:$op" -h "origin.test:$op" -p /big $(via "$n"))
		c1=$(cpu_of "$n")
		g1=$(cpu "$ngx_worker")
		perf_stop
		mibs=$(kv mib_per_s <<<"$out")
		gib=$(calc "$(kv bytes <<<"$out") / 2**30")
		percpu=$(calc "round(($c1 - $c0) / $hz / $gib, 3)")
		# Client, origin and proxy together: on 2 cores this is what bounds a path.
		allcpu=$(calc "round((($c1 - $c0 + $g1 - $g0) / $hz + $(kv cpu_s <<<"$out")) / $gib, 3)")
		k1=$(ksoftirqd_cpu)
		echo "fetch $n: $mibs MiB/s, proxy $percpu cpu-s/GiB, all $allcpu cpu-s/GiB" \
			"(ksoftirqd, not counted: $(calc "round(($k1 - $k0) / $hz / $gib, 3)"))" >&2
		fetch_all_runs[$n]+=" $allcpu"
		if better "$mibs" "${r_fetch[$n]:-}"; then
			r_fetch[$n]=$mibs
			r_fetch_cpu[$n]=$percpu
			r_fetch_all[$n]=$allcpu
		fi
	done
done

# --- absolute-form HTTP, keep-alive, wrk -c16 -t2 (direct: origin-form to nginx) ---
for n in "${names[@]}"; do
	if [[ $n == direct ]]; then
		line="GET /small HTTP/1.1"
	else
		line="GET http://origin.test:$op/small HTTP/1.1"
	fi
	cat >"$tmp/wrk-$n.lua" <<EOF
local req = "$line\r\nHost: origin.test:$op\r\n\r\n"
request = function() return req end
EOF
done
wrk_rounds=$rounds
phase wrk || wrk_rounds=0
for _ in $(seq "$wrk_rounds"); do
	for n in "${names[@]}"; do
		target=${pport[$n]:-$op}
		perf_start "$n" wrk
		c0=$(cpu_of "$n")
		out=$(wrk -c16 -t2 -d"${wrk_secs}s" --timeout 5s -s "$tmp/wrk-$n.lua" \
			"http://127.0.0.1:$target/" 2>&1)
		c1=$(cpu_of "$n")
		perf_stop
		reqs=$(awk '/requests in/ {print $1}' <<<"$out")
		rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
		percpu=$(calc "round(($c1 - $c0) / $hz / max($reqs, 1) * 1000, 4)")
		errs=$(awk '/Socket errors|Non-2xx/ {printf "%s; ", $0}' <<<"$out")
		echo "wrk $n: $rps req/s ($reqs), $percpu cpu-s/1000 ${errs}" >&2
		if better "$rps" "${r_wrk[$n]:-}"; then
			r_wrk[$n]=$rps
			r_wrk_cpu[$n]=$percpu
		fi
	done
done

# --- a new CONNECT tunnel per request, 16 clients (direct: a new connection) ---
churn_rounds=$rounds
phase churn || churn_rounds=0
for _ in $(seq "$churn_rounds"); do
	for n in "${names[@]}"; do
		perf_start "$n" churn
		c0=$(cpu_of "$n")
		# shellcheck disable=SC2046
		out=$("$client" churn -o "127.0.0.1:$op" -h "origin.test:$op" -p /small \
			$(via "$n") -c 16 -n 100000 -t "$churn_secs")
		c1=$(cpu_of "$n")
		perf_stop
		reqs=$(kv requests <<<"$out")
		failed=$(kv failed <<<"$out")
		rps=$(kv rps <<<"$out")
		percpu=$(calc "round(($c1 - $c0) / $hz / max($reqs, 1) * 1000, 4)")
		echo "churn $n: $rps req/s ($reqs, $failed failed), $percpu cpu-s/1000" >&2
		if better "$rps" "${r_churn[$n]:-}"; then
			r_churn[$n]=$rps
			r_churn_cpu[$n]=$percpu
		fi
		sleep 1 # let the closing sockets drain before the next target
	done
done

# --- latency: one request at a time, each timed; kept-alive absolute form (direct:
# origin form on a kept-alive connection) and a new tunnel per request (direct: a new
# connection). Each target's run with the lowest p50 is kept. ---
lat_rounds=$rounds
phase latency || lat_rounds=0
for _ in $(seq "$lat_rounds"); do
	for n in "${names[@]}"; do
		# shellcheck disable=SC2046
		out=$("$client" latency -a -o "127.0.0.1:$op" -h "origin.test:$op" -p /small \
			$(via "$n") -n "$lat_reqs") || out="" # tinyproxy closes after each request
		p50=$(kv p50_us <<<"$out")
		echo "latency kept-alive $n: ${out:-failed}" >&2
		if [[ -n $p50 ]] && { [[ -z ${r_lka50[$n]:-} ]] || better "${r_lka50[$n]}" "$p50"; }; then
			r_lka50[$n]=$p50
			r_lka99[$n]=$(kv p99_us <<<"$out")
		fi
		# shellcheck disable=SC2046
		out=$("$client" latency -o "127.0.0.1:$op" -h "origin.test:$op" -p /small \
			$(via "$n") -n "$lat_reqs") || out=""
		p50=$(kv p50_us <<<"$out")
		echo "latency new tunnel $n: ${out:-failed}" >&2
		if [[ -n $p50 ]] && { [[ -z ${r_lnew50[$n]:-} ]] || better "${r_lnew50[$n]}" "$p50"; }; then
			r_lnew50[$n]=$p50
			r_lnew99[$n]=$(kv p99_us <<<"$out")
		fi
	done
done

# --- loops: kept-alive wrk load (as the wrk phase) on one event loop pinned to core 0
# against two loops on cores 0 and 1, and on Squid's workers 1 against workers 2, pinned
# alike. The client (wrk) and the origin run wherever they can: on a two-core machine
# they share the proxies' cores. ---
declare -A r_loops
if phase loops; then
	for w in 1 2; do
		cpus=0
		((w == 2)) && cpus=0,1
		lp=$(port)
		TOLLGATE_HOME=$tmp/home-loops$w taskset -c "$cpus" "$tollgate" proxy --loops "$w" \
			--listen "127.0.0.1:$lp" --resolve origin.test:127.0.0.1 --allow "origin.test:$op" \
			--allow-cidr 127.0.0.0/8 --audit "$tmp/audit-loops$w.db" --control "$tmp/loops$w.ctl" \
			--idle-timeout 600s "${tg_extra[@]}" 2>"$tmp/loops$w.log" &
		pids+=("$!")
		pport[loops$w]=$lp
		# Squid's SMP mode needs its daemon mode (not -N) and its IPC directory,
		# /run/squid: a private /run in a mount namespace of its own, so the
		# machine's is left alone. The pid file names the master; its kids follow.
		qp=$(port)
		mkdir -p "$tmp/squid$w"
		chown proxy:proxy "$tmp/squid$w"
		sed -e "s|^http_port .*|http_port 127.0.0.1:$qp|" \
			-e "s|$tmp/squid/|$tmp/squid$w/|g" -e "s|^coredump_dir .*|coredump_dir $tmp/squid$w|" \
			"$tmp/squid/squid.conf" >"$tmp/squid$w/squid.conf"
		printf 'workers %s\npinger_enable off\n' "$w" >>"$tmp/squid$w/squid.conf"
		# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
		unshare -m sh -c 'mount -t tmpfs -o mode=755 tmpfs /run && mkdir /run/squid &&
			chown proxy:proxy /run/squid && exec taskset -c "$1" squid -f "$2"' sh \
			"$cpus" "$tmp/squid$w/squid.conf" 2>"$tmp/squid$w/stderr.log"
		for _ in $(seq 100); do [[ -s $tmp/squid$w/squid.pid ]] && break; sleep 0.1; done
		mpid=$(cat "$tmp/squid$w/squid.pid" 2>/dev/null || true)
		[[ -n $mpid ]] || { echo "bench_proxy: squid workers $w did not start" >&2; exit 1; }
		pids+=("$mpid")
		pport[squid_workers$w]=$qp
	done
	for n in loops1 loops2 squid_workers1 squid_workers2; do
		ready "${pport[$n]}"
		refused "${pport[$n]}"
	done
	for m in $(pgrep -P "$(cat "$tmp/squid1/squid.pid")") $(pgrep -P "$(cat "$tmp/squid2/squid.pid")"); do
		pids+=("$m")
	done
	cat >"$tmp/wrk-loops.lua" <<EOF
local req = "GET http://origin.test:$op/small HTTP/1.1\r\nHost: origin.test:$op\r\n\r\n"
request = function() return req end
EOF
	for _ in $(seq "$rounds"); do
		for n in loops1 loops2 squid_workers1 squid_workers2; do
			out=$(wrk -c16 -t2 -d"${wrk_secs}s" --timeout 5s -s "$tmp/wrk-loops.lua" \
				"http://127.0.0.1:${pport[$n]}/" 2>&1)
			rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
			errs=$(awk '/Socket errors|Non-2xx/ {printf "%s; ", $0}' <<<"$out")
			echo "loops $n: $rps req/s ${errs}" >&2
			if better "$rps" "${r_loops[$n]:-}"; then r_loops[$n]=$rps; fi
		done
	done
fi

# --- idle tunnels: RSS before and after, per tunnel (tinyproxy: a thread per
# client and MaxClients-bound, so it is left out) ---
idle_names=(tollgate squid)
phase idle || idle_names=()
for n in "${idle_names[@]}"; do
	pid=${ppid[$n]}
	before=$(rss_kib "$pid")
	word=""
	coproc idle { "$client" idle -h "origin.test:$op" -x "127.0.0.1:${pport[$n]}" \
		-k "$idle_n" -t 120; }
	pids+=("$idle_PID") # killed by cleanup if the script stops early
	read -r -t 120 word opened <&"${idle[0]}" || opened=0
	sleep 1
	after=$(rss_kib "$pid")
	eval "exec ${idle[1]}>&-" # the client closes its tunnels when its stdin closes
	# shellcheck disable=SC2154 # idle_PID is set by coproc
	wait "$idle_PID" || true
	if ((opened > 0)); then
		r_idle[$n]=$(calc "round(($after - $before) / $opened, 2)")
	else
		r_idle[$n]=-
	fi
	echo "idle $n: $opened tunnels, RSS $before -> $after KiB, ${r_idle[$n]} KiB each" >&2
	[[ $word == ready && $opened == "$idle_n" ]] || echo "idle $n: only $opened of $idle_n opened" >&2
	sleep 2
done

# --- the table ---
ratio() { calc "round($1 / $2, 2)" 2>/dev/null || echo -; }
echo
printf '%-34s %12s %12s %12s %12s\n' "" direct tollgate squid tinyproxy
printf '%-34s %12s %12s %12s %12s\n' "1 GiB via CONNECT, MiB/s" \
	"${r_fetch[direct]:--}" "${r_fetch[tollgate]:--}" "${r_fetch[squid]:--}" "${r_fetch[tinyproxy]:--}"
printf '%-34s %12s %12s %12s %12s\n' "  ratio to direct (goal >= 0.95)" 1 \
	"$(ratio "${r_fetch[tollgate]:--}" "${r_fetch[direct]:--}")" \
	"$(ratio "${r_fetch[squid]:--}" "${r_fetch[direct]:--}")" \
	"$(ratio "${r_fetch[tinyproxy]:--}" "${r_fetch[direct]:--}")"
printf '%-34s %12s %12s %12s %12s\n' "  proxy CPU s per GiB" - \
	"${r_fetch_cpu[tollgate]:--}" "${r_fetch_cpu[squid]:--}" "${r_fetch_cpu[tinyproxy]:--}"
printf '%-34s %12s %12s %12s %12s\n' "  client+origin+proxy CPU s per GiB" \
	"${r_fetch_all[direct]:--}" "${r_fetch_all[tollgate]:--}" "${r_fetch_all[squid]:--}" "${r_fetch_all[tinyproxy]:--}"
# Bulk: per round, a target's total CPU per GiB over direct's in the same round; the median.
bulk_ratio() { # NAME
	[[ -n ${fetch_all_runs[direct]:-} && -n ${fetch_all_runs[$1]:-} ]] || { echo -; return; }
	python3 -c 'import statistics, sys
d = [float(x) for x in sys.argv[1].split()]
t = [float(x) for x in sys.argv[2].split()]
print(round(statistics.median(b / a for a, b in zip(d, t)), 2))' \
		"${fetch_all_runs[direct]}" "${fetch_all_runs[$1]}"
}
printf '%-34s %12s %12s %12s %12s\n' "  total CPU / direct's (goal <= 2.1)" 1 \
	"$(bulk_ratio tollgate)" "$(bulk_ratio squid)" "$(bulk_ratio tinyproxy)"
printf '%-34s %12s %12s %12s %12s\n' "absolute-form keep-alive, req/s" \
	"${r_wrk[direct]:--}" "${r_wrk[tollgate]:--}" "${r_wrk[squid]:--}" "${r_wrk[tinyproxy]:--}"
printf '%-34s %12s %12s %12s %12s\n' "  tollgate / this (goal >= 2.5 Squid)" - 1 \
	"$(ratio "${r_wrk[tollgate]:--}" "${r_wrk[squid]:--}")" \
	"$(ratio "${r_wrk[tollgate]:--}" "${r_wrk[tinyproxy]:--}")"
printf '%-34s %12s %12s %12s %12s\n' "  proxy CPU s per 1000 requests" - \
	"${r_wrk_cpu[tollgate]:--}" "${r_wrk_cpu[squid]:--}" "${r_wrk_cpu[tinyproxy]:--}"
printf '%-34s %12s %12s %12s %12s\n' "new CONNECT per request, req/s" \
	"${r_churn[direct]:--}" "${r_churn[tollgate]:--}" "${r_churn[squid]:--}" "${r_churn[tinyproxy]:--}"
printf '%-34s %12s %12s %12s %12s\n' "  tollgate / this (goal >= 2 Squid)" - 1 \
	"$(ratio "${r_churn[tollgate]:--}" "${r_churn[squid]:--}")" \
	"$(ratio "${r_churn[tollgate]:--}" "${r_churn[tinyproxy]:--}")"
printf '%-34s %12s %12s %12s %12s\n' "  proxy CPU s per 1000 requests" - \
	"${r_churn_cpu[tollgate]:--}" "${r_churn_cpu[squid]:--}" "${r_churn_cpu[tinyproxy]:--}"
added() { [[ $1 != - && $2 != - ]] && calc "round($1 - $2, 1)" 2>/dev/null || echo -; }
printf '%-34s %12s %12s %12s %12s\n' "latency kept-alive, p50 us" \
	"${r_lka50[direct]:--}" "${r_lka50[tollgate]:--}" "${r_lka50[squid]:--}" "${r_lka50[tinyproxy]:--}"
printf '%-34s %12s %12s %12s %12s\n' "  added p50 us (goal <= 50)" - \
	"$(added "${r_lka50[tollgate]:--}" "${r_lka50[direct]:--}")" \
	"$(added "${r_lka50[squid]:--}" "${r_lka50[direct]:--}")" \
	"$(added "${r_lka50[tinyproxy]:--}" "${r_lka50[direct]:--}")"
printf '%-34s %12s %12s %12s %12s\n' "  added p99 us" - \
	"$(added "${r_lka99[tollgate]:--}" "${r_lka99[direct]:--}")" \
	"$(added "${r_lka99[squid]:--}" "${r_lka99[direct]:--}")" \
	"$(added "${r_lka99[tinyproxy]:--}" "${r_lka99[direct]:--}")"
printf '%-34s %12s %12s %12s %12s\n' "latency new tunnel, p50 us" \
	"${r_lnew50[direct]:--}" "${r_lnew50[tollgate]:--}" "${r_lnew50[squid]:--}" "${r_lnew50[tinyproxy]:--}"
printf '%-34s %12s %12s %12s %12s\n' "  added p50 us" - \
	"$(added "${r_lnew50[tollgate]:--}" "${r_lnew50[direct]:--}")" \
	"$(added "${r_lnew50[squid]:--}" "${r_lnew50[direct]:--}")" \
	"$(added "${r_lnew50[tinyproxy]:--}" "${r_lnew50[direct]:--}")"
printf '%-34s %12s %12s %12s %12s\n' "  added p99 us" - \
	"$(added "${r_lnew99[tollgate]:--}" "${r_lnew99[direct]:--}")" \
	"$(added "${r_lnew99[squid]:--}" "${r_lnew99[direct]:--}")" \
	"$(added "${r_lnew99[tinyproxy]:--}" "${r_lnew99[direct]:--}")"
printf '%-34s %12s %12s %12s %12s\n' "$idle_n idle tunnels, KiB RSS each" - \
	"${r_idle[tollgate]:--}" "${r_idle[squid]:--}" -

# One line per goal, for scripts to read ("-" when its phase did not run).
echo "ratio keepalive/squid: $(ratio "${r_wrk[tollgate]:--}" "${r_wrk[squid]:--}")"
echo "ratio keepalive_cpu/squid: $(ratio "${r_wrk_cpu[tollgate]:--}" "${r_wrk_cpu[squid]:--}")"
echo "ratio tunnel/squid: $(ratio "${r_churn[tollgate]:--}" "${r_churn[squid]:--}")"
echo "ratio added_p50_us: $(added "${r_lka50[tollgate]:--}" "${r_lka50[direct]:--}")"
if phase loops; then
	echo "loops: tollgate --loops 1 ${r_loops[loops1]:--}, --loops 2 ${r_loops[loops2]:--}, squid workers 1 ${r_loops[squid_workers1]:--}, workers 2 ${r_loops[squid_workers2]:--} req/s (load $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "ratio loops2/loops1: $(ratio "${r_loops[loops2]:--}" "${r_loops[loops1]:--}")"
	echo "ratio squid_workers2/workers1: $(ratio "${r_loops[squid_workers2]:--}" "${r_loops[squid_workers1]:--}")"
	echo "ratio keepalive_loops2/squid_workers2: $(ratio "${r_loops[loops2]:--}" "${r_loops[squid_workers2]:--}")"
fi
if [[ -n $before ]]; then
	echo "ratio keepalive/before: $(ratio "${r_wrk[tollgate]:--}" "${r_wrk[before]:--}")"
	echo "ratio keepalive_cpu/before: $(ratio "${r_wrk_cpu[tollgate]:--}" "${r_wrk_cpu[before]:--}")"
	echo "ratio tunnel/before: $(ratio "${r_churn[tollgate]:--}" "${r_churn[before]:--}")"
	echo "ratio tunnel_cpu/before: $(ratio "${r_churn_cpu[tollgate]:--}" "${r_churn_cpu[before]:--}")"
	echo "ratio added_p50_us_before: $(added "${r_lka50[before]:--}" "${r_lka50[direct]:--}")"
fi
