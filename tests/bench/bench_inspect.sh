#!/usr/bin/env bash
# shellcheck disable=SC2034 # the result arrays are read by row() through a name reference
# TLS inspection benchmark: HTTPS requests through `tollgate proxy --inspect HOST` against
# a blind tunnel through the same tollgate to the same origin, against mitmproxy (mitmdump,
# regular proxy mode) and against Squid with ssl-bump (`ssl_bump bump all`), all in one run
# on loopback (docs/performance.md, "TLS inspection").
#
#   tests/bench/bench_inspect.sh [BUILD_DIR]     (default: build; run as root)
#
# The origin is nginx over TLS with a CA of its own (a leaf for origin.test and
# blind.test); every proxy verifies it against that CA (tollgate --upstream-ca, mitmproxy
# ssl_verify_upstream_trusted_ca, Squid tls_outgoing_options cafile). The client,
# bench_inspect_client, trusts only the CA of the one that ends its TLS: the origin's
# (direct, blind), the gate's ($TOLLGATE_HOME/ca/ca.pem), mitmproxy's own or Squid's.
# Every figure has a warm leaf: each target serves a few requests before it is measured.
# Phases, each target in turn, ROUNDS times, each target's best run kept:
#   rate     CLIENTS kept-alive connections, requests back to back, RATE_SECONDS
#   churn    CLIENTS in parallel, a new tunnel and TLS handshake (client side, and the
#            proxy's own to the origin) per request, CHURN_SECONDS
#   latency  one kept-alive connection, one request at a time, LATENCY_REQS timed after
#            100 untimed; p50 and p99, and what each adds to direct's
# Knobs: RATE_SECONDS (5), CHURN_SECONDS (5), CLIENTS (8), ROUNDS (2), LATENCY_REQS (2000),
# PHASES ("rate churn latency"), BENCH_NICE (-20), BENCH_KEEP=1 (keep the temp dir and its
# logs), BENCH_PERF_DIR=DIR (`perf record -g` of tollgate per phase, inspected target only,
# into DIR/tollgate-PHASE.data; the figures then carry perf's cost).
# Proxy CPU per 1000 requests comes from /proc/PID/stat of each proxy and its children
# (Squid's certificate helpers) before and after each run.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
tollgate=$build/tollgate
client=$build/bench_inspect_client
rate_secs=${RATE_SECONDS:-5}
churn_secs=${CHURN_SECONDS:-5}
clients=${CLIENTS:-8}
rounds=${ROUNDS:-2}
lat_reqs=${LATENCY_REQS:-2000}
phases=" ${PHASES:-rate churn latency} "
phase() { [[ $phases == *" $1 "* ]]; }
[[ -x $tollgate && -x $client ]] || {
	echo "bench_inspect: build tollgate and bench_inspect_client first ($build)" >&2
	exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "bench_inspect: run as root (squid, unshare)" >&2; exit 1; }
# squid-openssl is Debian's Squid with ssl-bump (the plain squid package cannot bump).
if ! command -v mitmdump >/dev/null || ! command -v nginx >/dev/null ||
	! dpkg-query -W -f='${Status}' squid-openssl 2>/dev/null | grep -q 'install ok installed'; then
	"$src/scripts/install-deps" nginx-light squid-openssl mitmproxy >/dev/null
fi
certgen=/usr/lib/squid/security_file_certgen
[[ -x $certgen ]] || { echo "bench_inspect: no $certgen (squid-openssl)" >&2; exit 1; }
renice -n "${BENCH_NICE:--20}" -p $$ >/dev/null
ulimit -n "$(ulimit -Hn)"

tmp=$(mktemp -d /tmp/tollgate-bench-inspect.XXXXXX)
chmod 755 "$tmp" # squid drops to its own user and reads its files here
pids=()
perf_pid=""
perf_stop() {
	[[ -n $perf_pid ]] || return 0
	kill -INT "$perf_pid" 2>/dev/null || true
	wait "$perf_pid" 2>/dev/null || true
	perf_pid=""
}
cleanup() {
	perf_stop
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [[ -n ${BENCH_KEEP:-} ]]; then
		echo "bench_inspect: logs kept in $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
port() { "$src/scripts/free-port"; }
calc() { python3 -c "print($1)"; }
hz=$(getconf CLK_TCK)
# utime + stime of PID and of its children (ticks)
cpu_tree() {
	local sum=0 p
	for p in "$1" $(pgrep -P "$1" || true); do
		[[ -r /proc/$p/stat ]] && sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$sum"
}
perf_dir=${BENCH_PERF_DIR:-}
perf_start() { # TARGET PHASE
	[[ -n $perf_dir && $1 == inspect ]] || return 0
	mkdir -p "$perf_dir"
	perf record -q -g -p "$tg_pid" -o "$perf_dir/tollgate-$2.data" 2>/dev/null &
	perf_pid=$!
	sleep 0.5
}

# --- certificates: the origin's CA and leaf, Squid's CA (mitmproxy and tollgate make
# their own) ---
pki=$tmp/pki
mkdir -p "$pki"
mkca() { # DIR NAME
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=$2" -keyout "$1.key" -out "$1.pem" >/dev/null 2>&1
}
mkca "$pki/oca" "bench origin CA"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=origin.test \
	-keyout "$pki/origin.key" -out "$pki/origin.csr" >/dev/null 2>&1
printf 'subjectAltName=DNS:origin.test,DNS:blind.test\n' >"$pki/origin.ext"
openssl x509 -req -in "$pki/origin.csr" -CA "$pki/oca.pem" -CAkey "$pki/oca.key" \
	-CAcreateserial -days 2 -extfile "$pki/origin.ext" -out "$pki/origin.pem" >/dev/null 2>&1
mkca "$pki/squidca" "bench squid CA"
chmod 644 "$pki"/*

# --- origin: nginx over TLS, a small file, connections kept ---
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
	default_type application/octet-stream;
	keepalive_timeout 600s;
	keepalive_requests 100000000;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	server {
		listen 127.0.0.1:$op ssl;
		server_name origin.test blind.test;
		ssl_certificate $pki/origin.pem;
		ssl_certificate_key $pki/origin.key;
		root $tmp/www;
	}
}
EOF
nginx -e "$tmp/nginx/error.log" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" &
pids+=("$!")
printf '127.0.0.1 origin.test blind.test\n' >"$tmp/hosts"

# --- tollgate: origin.test inspected, blind.test (the same origin) a blind tunnel ---
tp=$(port)
TOLLGATE_HOME=$tmp/home "$tollgate" proxy --listen "127.0.0.1:$tp" \
	--resolve origin.test:127.0.0.1 --resolve blind.test:127.0.0.1 \
	--allow "origin.test:$op" --allow "blind.test:$op" --allow-cidr 127.0.0.0/8 \
	--inspect origin.test --upstream-ca "$pki/oca.pem" \
	--audit "$tmp/audit.db" --control "$tmp/tollgate.ctl" --idle-timeout 600s \
	2>"$tmp/tollgate.log" &
tg_pid=$!
pids+=("$tg_pid")

# --- mitmproxy: mitmdump in regular proxy mode, its CA made in its own confdir; it
# resolves with the system's resolver, so it runs in a mount namespace whose /etc/hosts
# is the temp file ---
mp=$(port)
mkdir -p "$tmp/mitm"
# shellcheck disable=SC2016 # $1.. are the inner shell's
unshare -m sh -c 'mount --bind "$1" /etc/hosts && exec mitmdump -q --listen-host 127.0.0.1 \
	--listen-port "$2" --set confdir="$3" --set ssl_verify_upstream_trusted_ca="$4" \
	--set http2=false' sh "$tmp/hosts" "$mp" "$tmp/mitm" "$pki/oca.pem" \
	>"$tmp/mitm/stdout.log" 2>"$tmp/mitm/stderr.log" &
mt_pid=$!
pids+=("$mt_pid")

# --- Squid with ssl-bump: bump every CONNECT, leaves made by security_file_certgen
# from its own CA, the origin verified against the origin's CA ---
sp=$(port)
mkdir -p "$tmp/squid"
chown proxy:proxy "$tmp/squid"
runuser -u proxy -- "$certgen" -c -s "$tmp/squid/ssl_db" -M 16MB >/dev/null
cat >"$tmp/squid/squid.conf" <<EOF
http_port 127.0.0.1:$sp ssl-bump tls-cert=$pki/squidca.pem tls-key=$pki/squidca.key generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program $certgen -s $tmp/squid/ssl_db -M 16MB
sslcrtd_children 4 startup=1 idle=1
ssl_bump bump all
tls_outgoing_options cafile=$pki/oca.pem
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

# The CA each target's client trusts (tollgate and mitmproxy write theirs at start-up).
gate_ca=$tmp/home/ca/ca.pem
mitm_ca=$tmp/mitm/mitmproxy-ca-cert.pem
for _ in $(seq 100); do
	[[ -s $gate_ca && -s $mitm_ca ]] && break
	sleep 0.1
done
names=(direct blind inspect mitmproxy squid-bump)
declare -A tport=([direct]="" [blind]=$tp [inspect]=$tp [mitmproxy]=$mp [squid-bump]=$sp)
declare -A tpid=([direct]="" [blind]=$tg_pid [inspect]=$tg_pid [mitmproxy]=$mt_pid [squid-bump]=$sq_pid)
declare -A thost=([direct]=origin.test [blind]=blind.test [inspect]=origin.test
	[mitmproxy]=origin.test [squid-bump]=origin.test)
declare -A tca=([direct]=$pki/oca.pem [blind]=$pki/oca.pem [inspect]=$gate_ca
	[mitmproxy]=$mitm_ca [squid-bump]=$pki/squidca.pem)
target_args() { # NAME -> the client's arguments for it
	local a="-h ${thost[$1]}:$op -C ${tca[$1]} -p /small"
	if [[ -n ${tport[$1]} ]]; then a+=" -x 127.0.0.1:${tport[$1]}"; else a+=" -o 127.0.0.1:$op"; fi
	echo "$a"
}

# Each target answers (its leaf made and cached), and one that should not, refuses.
ready() { # NAME
	local args=(--cacert "${tca[$1]}" --max-time 5 -s -o /dev/null -w '%{http_code}')
	local url="https://${thost[$1]}:$op/small"
	if [[ -n ${tport[$1]} ]]; then
		args+=(-x "127.0.0.1:${tport[$1]}")
	else
		args+=(--resolve "${thost[$1]}:$op:127.0.0.1")
	fi
	for _ in $(seq 100); do
		[[ $(curl "${args[@]}" "$url" || true) == 200 ]] && return 0
		sleep 0.2
	done
	echo "bench_inspect: $1 did not come up; logs in $tmp" >&2
	tail -n 5 "$tmp"/*.log "$tmp"/*/*.log >&2 || true
	BENCH_KEEP=1
	exit 1
}
for n in "${names[@]}"; do ready "$n"; done
# The inspected path really is inspected, the blind one really blind: the issuer the
# client sees.
issuer() { # NAME
	sleep 1 | openssl s_client -proxy "127.0.0.1:${tport[$1]}" -connect "${thost[$1]}:$op" \
		-servername "${thost[$1]}" 2>/dev/null | openssl x509 -noout -issuer 2>/dev/null || true
}
[[ $(issuer inspect) != *"bench origin CA"* && $(issuer blind) == *"bench origin CA"* ]] || {
	echo "bench_inspect: the inspected path shows the origin's leaf, or the blind one not" >&2
	exit 1
}

kv() { tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
better() { [[ -z ${2:-} || $(calc "int($1 > $2)") == 1 ]]; }
cpu_of() { [[ -n ${tpid[$1]} ]] && cpu_tree "${tpid[$1]}" || echo 0; }
declare -A r_rate r_rate_cpu r_churn r_churn_cpu r_l50 r_l99
echo "bench_inspect: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)" >&2

run_load() { # PHASE: rate or churn
	local secs=$rate_secs flag="" n out c0 c1 reqs rps percpu
	[[ $1 == churn ]] && { secs=$churn_secs; flag=-r; }
	for _ in $(seq "$rounds"); do
		for n in "${names[@]}"; do
			perf_start "$n" "$1"
			c0=$(cpu_of "$n")
			# shellcheck disable=SC2046
			out=$("$client" rate $(target_args "$n") $flag -c "$clients" -n 10000000 \
				-t "$secs") || true
			c1=$(cpu_of "$n")
			perf_stop
			reqs=$(kv requests <<<"$out")
			rps=$(kv rps <<<"$out")
			[[ -n $rps ]] || { echo "$1 $n: failed" >&2; continue; }
			percpu=-
			[[ -n ${tpid[$n]} ]] &&
				percpu=$(calc "round(($c1 - $c0) / $hz / max(${reqs:-0}, 1) * 1000, 3)")
			echo "$1 $n: $rps req/s ($reqs, $(kv failed <<<"$out") failed)," \
				"proxy $percpu cpu-s/1000" >&2
			if [[ $1 == rate ]] && better "$rps" "${r_rate[$n]:-}"; then
				r_rate[$n]=$rps
				r_rate_cpu[$n]=$percpu
			elif [[ $1 == churn ]] && better "$rps" "${r_churn[$n]:-}"; then
				r_churn[$n]=$rps
				r_churn_cpu[$n]=$percpu
			fi
			sleep 1 # closing sockets drain before the next target
		done
	done
}
phase rate && run_load rate
phase churn && run_load churn
if phase latency; then
	for _ in $(seq "$rounds"); do
		for n in "${names[@]}"; do
			perf_start "$n" latency
			# shellcheck disable=SC2046
			out=$("$client" latency $(target_args "$n") -n "$lat_reqs" -w 100) || out=""
			perf_stop
			echo "latency $n: ${out:-failed}" >&2
			p50=$(kv p50_us <<<"$out")
			if [[ -n $p50 ]] && { [[ -z ${r_l50[$n]:-} ]] || better "${r_l50[$n]}" "$p50"; }; then
				r_l50[$n]=$p50
				r_l99[$n]=$(kv p99_us <<<"$out")
			fi
		done
	done
fi

# --- the table, then the ratios ---
ratio() { calc "round($1 / $2, 2)" 2>/dev/null || echo -; }
added() { [[ $1 != - && $2 != - ]] && calc "round($1 - $2, 1)" 2>/dev/null || echo -; }
row() { # LABEL ARRAY
	local -n a=$2
	printf '%-36s' "$1"
	for n in "${names[@]}"; do printf ' %11s' "${a[$n]:--}"; done
	echo
}
echo
printf '%-36s' ""
for n in "${names[@]}"; do printf ' %11s' "$n"; done
echo
row "kept-alive, req/s ($clients conns)" r_rate
row "  proxy CPU s per 1000 requests" r_rate_cpu
row "new tunnel+TLS per request, req/s" r_churn
row "  proxy CPU s per 1000 requests" r_churn_cpu
row "latency kept-alive, p50 us" r_l50
row "latency kept-alive, p99 us" r_l99
declare -A r_a50 r_a99
for n in "${names[@]}"; do
	r_a50[$n]=$(added "${r_l50[$n]:--}" "${r_l50[direct]:--}")
	r_a99[$n]=$(added "${r_l99[$n]:--}" "${r_l99[direct]:--}")
done
row "  added p50 us (to direct)" r_a50
row "  added p99 us (to direct)" r_a99
echo
echo "ratio inspect/mitmproxy rate: $(ratio "${r_rate[inspect]:--}" "${r_rate[mitmproxy]:--}") (goal >= 3)"
echo "ratio inspect/squid-bump rate: $(ratio "${r_rate[inspect]:--}" "${r_rate[squid-bump]:--}") (goal >= 1.5)"
echo "ratio inspect/blind rate: $(ratio "${r_rate[inspect]:--}" "${r_rate[blind]:--}")"
echo "ratio inspect/mitmproxy new-tunnel rate: $(ratio "${r_churn[inspect]:--}" "${r_churn[mitmproxy]:--}")"
echo "ratio inspect/squid-bump new-tunnel rate: $(ratio "${r_churn[inspect]:--}" "${r_churn[squid-bump]:--}")"
echo "ratio inspect/blind new-tunnel rate: $(ratio "${r_churn[inspect]:--}" "${r_churn[blind]:--}")"
echo "ratio inspect added p50 us: ${r_a50[inspect]} (goal <= 1000)"
echo "ratio inspect added p99 us: ${r_a99[inspect]}"
echo "ratio inspect added p50 us over blind: $(added "${r_l50[inspect]:--}" "${r_l50[blind]:--}")"
echo "ratio mitmproxy added p50 us: ${r_a50[mitmproxy]}; squid-bump: ${r_a50[squid-bump]}"
