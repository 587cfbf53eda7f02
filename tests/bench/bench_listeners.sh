#!/usr/bin/env bash
# The proxy's CPU per request with 1, 100 and 1000 sandboxes on one gateway
# (docs/performance.md, "The speed and scale goals"): starts nginx on 127.0.0.1 as the origin (a
# 612-byte file, access log off), then build/bench_listeners: a gateway per number of
# sandboxes, each with that many sandboxes' gates open, loaded in turn round by round
# through its first sandbox. Its figures are ratios to the smallest number of sandboxes
# in the same rounds.
#
#   tests/bench/bench_listeners.sh [BUILD_DIR]     (default: build; run as root)
#
# Knobs: LEVELS (1,100,1000), ROUNDS (5, the median kept), REQS (4000 new
# tunnels per round, from 4 clients), KA_REQS (4000 kept-alive requests per round),
# TIME_LIMIT (900 s: no round starts after it; the whole run is killed 300 s later),
# BENCH_NICE (-20). A quick look: LEVELS=1,10 ROUNDS=2 REQS=400 KA_REQS=400.
# Everything it makes (the gateways' audit databases, nginx's files) is under one
# temporary directory, removed at the end; the namespaces and veths are the
# program's own and go with it.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
bench=$build/bench_listeners
[[ -x $bench && -x $build/bench_proxy_client ]] || {
	echo "bench_listeners: build bench_listeners and bench_proxy_client first ($build)" >&2
	exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "bench_listeners: run as root (namespaces, veth)" >&2; exit 1; }
command -v nginx >/dev/null || "$src/scripts/install-deps" nginx-light >/dev/null
renice -n "${BENCH_NICE:--20}" -p $$ >/dev/null

tmp=$(mktemp -d /tmp/tollgate-bench-listeners.XXXXXX)
chmod 755 "$tmp" # the nginx worker drops to its own user and reads www here
ngx=""
cleanup() {
	if [[ -n $ngx ]]; then
		kill "$ngx" 2>/dev/null || true
		wait "$ngx" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
op=$("$src/scripts/free-port")
mkdir -p "$tmp/www" "$tmp/nginx"
head -c 612 /dev/zero | tr '\0' 'x' >"$tmp/www/small"
cat >"$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	default_type application/octet-stream;
	keepalive_requests 100000000;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	server {
		listen 127.0.0.1:$op;
		root $tmp/www;
	}
}
CONF
nginx -e "$tmp/nginx/error.log" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" &
ngx=$!
for _ in $(seq 50); do
	curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$op/small" && break
	sleep 0.1
done

limit=${TIME_LIMIT:-900}
echo "bench_listeners: $(nproc) cores, $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"
timeout -k 10 $((limit + 300)) "$bench" -p "$op" -l "${LEVELS:-1,100,1000}" -r "${ROUNDS:-5}" \
	-n "${REQS:-4000}" -k "${KA_REQS:-4000}" -T "$limit" -d "$tmp"
echo "bench_listeners: done $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"
