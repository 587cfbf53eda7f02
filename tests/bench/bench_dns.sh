#!/usr/bin/env bash
# DNS server throughput: dnsperf's queries per second against `tollgate proxy
# --dns-listen` and against dnsmasq as a caching forwarder, for the same cached
# allowed names and the same denied names, in one run; prints the ratios.
#
#   tests/bench/bench_dns.sh [BUILD_DIR]     (default: build)
#
# Everything runs on 127.0.0.1: the upstream is tests/integration/dns_upstream.py.
# DNS_BENCH_SECONDS (default 10) is the length of each dnsperf run.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
tollgate=$build/tollgate
secs=${DNS_BENCH_SECONDS:-10}
[[ -x $tollgate ]] || { echo "bench_dns: build tollgate first ($tollgate)" >&2; exit 1; }
if ! command -v dnsperf >/dev/null || ! command -v dnsmasq >/dev/null; then
	"$src/scripts/install-deps" dnsperf dnsmasq-base >/dev/null
fi

tmp=$(mktemp -d /tmp/tollgate-bench-dns.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
port() { "$src/scripts/free-port"; }

# 50 allowed names with public addresses, 50 denied names under one domain.
records=()
: >"$tmp/allowed.txt"
: >"$tmp/denied.txt"
for i in $(seq 1 50); do
	records+=(--record "host$i.bench.example,A,93.184.$((i / 250)).$((i % 250 + 1)),3600")
	echo "host$i.bench.example A" >>"$tmp/allowed.txt"
	echo "name$i.blocked.example A" >>"$tmp/denied.txt"
done

python3 "$src/tests/integration/dns_upstream.py" --port-file "$tmp/up.port" \
	--log /dev/null --lifetime 600 "${records[@]}" &
pids+=($!)
for _ in $(seq 100); do [[ -s $tmp/up.port ]] && break; sleep 0.1; done
up=$(cat "$tmp/up.port")

tg_port=$(port)
TOLLGATE_HOME=$tmp/home "$tollgate" proxy --listen "127.0.0.1:$(port)" \
	--dns-listen "127.0.0.1:$tg_port" --upstream-dns "127.0.0.1:$up" \
	--allow '*.bench.example' --deny '*.blocked.example' --audit "$tmp/audit.db" \
	--control "$tmp/ctl" 2>"$tmp/tollgate.log" &
pids+=($!)

dm_port=$(port)
# The same policy in dnsmasq's terms: forward and cache, NXDOMAIN for the denied domain.
dnsmasq --keep-in-foreground --no-resolv --no-hosts --no-poll --bind-interfaces \
	--listen-address=127.0.0.1 --port="$dm_port" --server="127.0.0.1#$up" \
	--address=/blocked.example/ --cache-size=10000 --user="$(id -un)" \
	--pid-file="$tmp/dnsmasq.pid" 2>"$tmp/dnsmasq.log" &
pids+=($!)

for p in "$tg_port" "$dm_port"; do
	for _ in $(seq 100); do
		dig @127.0.0.1 -p "$p" +tries=1 +time=1 host1.bench.example >/dev/null 2>&1 && break
		sleep 0.1
	done
	# Warm both caches.
	while read -r name type; do
		dig @127.0.0.1 -p "$p" +tries=1 +time=2 +short "$name" "$type" >/dev/null
	done <"$tmp/allowed.txt"
done

qps() { # PORT FILE
	dnsperf -s 127.0.0.1 -p "$1" -d "$2" -l "$secs" -c 4 -q 256 2>&1 |
		awk '/Queries per second/ {print $4}'
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, clock ticks

tg_pid=${pids[1]}
dm_pid=${pids[2]}
printf '%-22s %14s %14s %8s\n' "names" "tollgate q/s" "dnsmasq q/s" "ratio"
for kind in allowed denied; do
	tg=$(qps "$tg_port" "$tmp/$kind.txt")
	dm=$(qps "$dm_port" "$tmp/$kind.txt")
	ratio=$(awk -v a="$tg" -v b="$dm" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	printf '%-22s %14.0f %14.0f %8s\n' "$kind (cached)" "$tg" "$dm" "$ratio"
done
tck=$(getconf CLK_TCK)
echo "cpu seconds: tollgate $(awk -v t="$(cpu "$tg_pid")" -v h="$tck" 'BEGIN{printf "%.1f", t/h}')," \
	"dnsmasq $(awk -v t="$(cpu "$dm_pid")" -v h="$tck" 'BEGIN{printf "%.1f", t/h}')" \
	"(each ran ${secs}s x2 under dnsperf -c 4 -q 256)"
