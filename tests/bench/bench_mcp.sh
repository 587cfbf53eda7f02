#!/usr/bin/env bash
# What MCP pays for tollgate, in one run (docs/performance.md, "What an MCP tool call
# pays"):
#
# 1. stdio: server-everything's `echo` tool with a 100 B and a 100 KiB message,
#    called by the official MCP SDK client on the server directly and on the same
#    server under `tollgate wrap`, calls interleaved (tests/bench/bench_mcp.mjs);
#    medians, p90, p99.
# 2. Streamable HTTP: the same calls on server-everything's own HTTP transport and
#    through `tollgate wrap --listen` around its stdio server. Skipped, saying so,
#    when this tollgate's `wrap --help` lists no --listen.
# 3. `serve`'s execute_code of print(1) against `run --lang python --code 'print(1)'`
#    and a bare `python3 -c 'print(1)'` under `bwrap --unshare-all`
#    (tests/bench/bench_serve.sh with BENCH_SERVE_BWRAP=1).
#
#   tests/bench/bench_mcp.sh [BUILD_DIR]     (default: build; run as root)
#   MCP_BEFORE=build-before tests/bench/bench_mcp.sh build
#
# With MCP_BEFORE (a build of an earlier commit), phases 1 and 2 run a third path,
# the wrap of that build, interleaved with the other two, and print
# `ratio wrap-before/direct SIZE`, `ratio added_us wrap-before SIZE` and
# `ratio wrap/wrap-before SIZE` besides.
#
# Ends with the `ratio NAME: VALUE` lines of all three (`ratio added_us wrap SIZE: U` is
# the median microseconds wrap adds to a call). Goals: wrap/direct <= 1.1, at most
# 200 us added at 100 B; serve/run <= 1.3. Knobs: MCP_CALLS (2000 calls of each size
# on each path), MCP_SECONDS (60, the cap of each size's loop), ROUNDS (30, phase 3),
# PHASES ("stdio http serve"), MCP_SIZES ("100B 100KiB"), BENCH_NICE (-20). Everything listens on 127.0.0.1
# only. Not a test: nothing here passes or fails on speed.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
tollgate=$build/tollgate
mcp=$src/tests/integration/mcp
calls=${MCP_CALLS:-2000}
seconds=${MCP_SECONDS:-60}
phases=${PHASES:-stdio http serve}
before=
if [[ -n ${MCP_BEFORE:-} ]]; then
	before=$(cd "$MCP_BEFORE" && pwd)/tollgate
	[[ -x $before ]] || { echo "bench_mcp: no tollgate in MCP_BEFORE ($MCP_BEFORE)" >&2; exit 1; }
fi

[[ -x $tollgate && -x $build/bench_run_timer ]] || {
	echo "bench_mcp: build tollgate and bench_run_timer first ($build)" >&2
	exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "bench_mcp: run as root (sandboxes)" >&2; exit 1; }
command -v node >/dev/null || { echo "bench_mcp: needs node (scripts/install-deps)" >&2; exit 1; }
[[ -d $mcp/node_modules/@modelcontextprotocol/sdk && -d $mcp/node_modules/@modelcontextprotocol/server-everything ]] || {
	echo "bench_mcp: the MCP SDK or server-everything is missing: (cd $mcp && npm ci)" >&2
	exit 1
}
command -v bwrap >/dev/null || "$src/scripts/install-deps" bubblewrap >/dev/null
command -v curl >/dev/null || { echo "bench_mcp: needs curl (scripts/install-deps)" >&2; exit 1; }

renice -n "${BENCH_NICE:--20}" -p $$ >/dev/null
tmp=$(mktemp -d /tmp/bench-mcp.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
export TOLLGATE_HOME=$tmp/home TOLLGATE_CONTROL_DIR=$tmp/ctl
mkdir -p "$TOLLGATE_HOME" "$TOLLGATE_CONTROL_DIR"
log=$tmp/log
: >"$log"

# A TCP port nothing holds, below the kernel's ephemeral range (scripts/free-port).
free_port() { "$src/scripts/free-port"; }
# wait_up URL: until something answers HTTP there, at most 20 s.
wait_up() {
	local i
	for ((i = 0; i < 100; i++)); do
		curl -s -o /dev/null --max-time 1 "$1" && return 0
		sleep 0.2
	done
	return 1
}
has_phase() { [[ " $phases " == *" $1 "* ]]; }

echo "bench_mcp: $(nproc) cores, $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"
echo "bench_mcp: $calls calls of each size on each path (at most ${seconds}s per size), node $(node --version)"
[[ -z $before ]] || echo "bench_mcp: before build: $before"

if has_phase stdio; then
	echo "== stdio: echo directly against through tollgate wrap"
	timeout $((seconds * 2 + 300)) node "$src/tests/bench/bench_mcp.mjs" "$mcp" "$calls" "$seconds" \
		stdio "$tollgate" "$tmp/wrap.db" ${before:+"$before" "$tmp/wrap-before.db"} | tee -a "$log"
fi

if has_phase http; then
	echo "== Streamable HTTP: echo on server-everything's own HTTP server against through tollgate wrap --listen"
	# The help whole first: grep -q stops reading, and under pipefail the
	# writer's SIGPIPE would read as "no --listen".
	if [[ $("$tollgate" wrap --help 2>&1) != *--listen* ]]; then
		echo "bench_mcp: skipped: this tollgate's wrap has no --listen (tollgate wrap --help does not list it)"
	else
		dport=$(free_port)
		PORT=$dport node --import "$src/tests/bench/bench_mcp_loopback.mjs" \
			"$mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js" streamableHttp \
			>/dev/null 2>"$tmp/direct-http.err" </dev/null &
		pids+=($!)
		wport=$(free_port)
		"$tollgate" wrap --listen "127.0.0.1:$wport" --token-file "$tmp/token" --audit "$tmp/wrap-http.db" \
			--workdir "$mcp" -- node /work/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio \
			>/dev/null 2>"$tmp/wrap-http.err" </dev/null &
		pids+=($!)
		bargs=()
		if [[ -n $before && $("$before" wrap --help 2>&1) == *--listen* ]]; then
			bport=$(free_port)
			"$before" wrap --listen "127.0.0.1:$bport" --token-file "$tmp/token-before" \
				--audit "$tmp/wrap-http-before.db" --workdir "$mcp" \
				-- node /work/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio \
				>/dev/null 2>"$tmp/wrap-http-before.err" </dev/null &
			pids+=($!)
			wait_up "http://127.0.0.1:$bport/mcp" || { echo "bench_mcp: the before build's wrap --listen did not start: $(tail -3 "$tmp/wrap-http-before.err")" >&2; exit 1; }
			bargs=("http://127.0.0.1:$bport/mcp" "$tmp/token-before")
		elif [[ -n $before ]]; then
			echo "bench_mcp: the before build's wrap has no --listen: no wrap-before path over HTTP"
		fi
		wait_up "http://127.0.0.1:$dport/mcp" || { echo "bench_mcp: the direct HTTP server did not start: $(tail -3 "$tmp/direct-http.err")" >&2; exit 1; }
		wait_up "http://127.0.0.1:$wport/mcp" || { echo "bench_mcp: wrap --listen did not start: $(tail -3 "$tmp/wrap-http.err")" >&2; exit 1; }
		timeout $((seconds * 2 + 300)) node "$src/tests/bench/bench_mcp.mjs" "$mcp" "$calls" "$seconds" \
			http "http://127.0.0.1:$dport/mcp" "http://127.0.0.1:$wport/mcp" "$tmp/token" "${bargs[@]}" | tee -a "$log"
	fi
fi

if has_phase serve; then
	echo "== serve's execute_code against run --lang python and bwrap python3 -c"
	BENCH_SERVE_BWRAP=1 "$src/tests/bench/bench_serve.sh" "$build" | tee -a "$log"
fi

echo "== summary (wrap/direct: medians; goals: wrap/direct <= 1.1, ratio added_us wrap 100B <= 200, serve/run <= 1.3)"
grep -E '^ratio ' "$log" || true
echo "bench_mcp: done $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"
