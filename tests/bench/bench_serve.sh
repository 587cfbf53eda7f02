#!/usr/bin/env bash
# `serve` against `run` (docs/performance.md, "The speed and scale goals"): one
# `tollgate serve` driven by the official MCP SDK client (tests/integration/mcp's
# node_modules), execute_code of print(1) in Python, against `tollgate run --lang
# python --code 'print(1)'` timed by bench_run_timer, interleaved; prints both medians
# and their ratio; with BENCH_SERVE_BWRAP=1 also a bare `python3 -c` under bwrap.
#
#   tests/bench/bench_serve.sh [BUILD_DIR]     (default: build; run as root)
#
# Knobs: ROUNDS (30), BENCH_NICE (-20), BENCH_SERVE_BWRAP (unset). TOLLGATE_HOME and the control directory are a
# temp dir's, deleted at the end; serve and run each write their own audit file there.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
tollgate=$(cd "$build" && pwd)/tollgate
mcp=$src/tests/integration/mcp
timer=$(cd "$build" && pwd)/bench_run_timer
[[ -x $tollgate && -x $timer ]] || {
	echo "bench_serve: build tollgate and bench_run_timer first ($build)" >&2
	exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "bench_serve: run as root (sandboxes)" >&2; exit 1; }
# The tests' node (TOLLGATE_NODE, else the one scripts/install-deps puts in
# tests/integration/node where the machine's is older than 22), else the machine's.
node=${TOLLGATE_NODE:-}
for n in "$src"/tests/integration/node/node_modules/node-linux-*/bin/node; do
	[[ -n $node || ! -x $n ]] || node=$n
done
node=${node:-node}
command -v "$node" >/dev/null || { echo "bench_serve: needs node (Debian package nodejs)" >&2; exit 1; }
[[ -d $mcp/node_modules/@modelcontextprotocol/sdk ]] || {
	echo "bench_serve: the MCP SDK is missing: (cd $mcp && npm ci)" >&2
	exit 1
}
if [[ -n ${BENCH_SERVE_BWRAP:-} ]]; then
	command -v bwrap >/dev/null || "$src/scripts/install-deps" bubblewrap >/dev/null
	BENCH_SERVE_BWRAP=$(command -v bwrap)
	export BENCH_SERVE_BWRAP
fi
renice -n "${BENCH_NICE:--20}" -p $$ >/dev/null
tmp=$(mktemp -d /tmp/tollgate-bench-serve.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TOLLGATE_HOME=$tmp/home TOLLGATE_CONTROL_DIR=$tmp/ctl
export BENCH_SERVE_AUDIT=$tmp/serve.db BENCH_RUN_AUDIT=$tmp/run.db
mkdir -p "$TOLLGATE_HOME" "$TOLLGATE_CONTROL_DIR"
echo "bench_serve: $(nproc) cores, $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"
timeout 1800 "$node" "$src/tests/bench/bench_serve.mjs" "$mcp" "${ROUNDS:-30}" "$tollgate" "$timer"
echo "bench_serve: done $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"
