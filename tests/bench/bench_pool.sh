#!/usr/bin/env bash
# The warm pool: `tollgate run -- true` with a warm slot from
# `tollgate pool`, and without one, against bwrap in the same interleaved rounds.
#
#   sudo tests/bench/bench_pool.sh [BUILD_DIR]      (default: build; needs root)
#
# Starts `tollgate pool` on a socket of its own (POOL_BENCH_SIZE slots), then times,
# round by round (build/bench_run_timer, the order rotating): run through the pool,
# split (the default) and in one process (TOLLGATE_PRIVSEP=0); run without it
# (TOLLGATE_WARM_POOL=off), split and one process; `run --no-network` (no network
# at all: the floor the pool can approach); and `bwrap --unshare-all --ro-bind / / true`. Prints each median and p90 and the ratios against bwrap (goals: with the
# pool at most 1.5, without at most 2), then how many slots the pool handed out
# against the pool rows' runs: fewer means some runs found the pool empty and made
# their own network (the figures then mix both). The pool refills while the other
# rows run: its CPU is part of the machine's load in those rounds, as it would be
# in use. Ends with `ratio run/bwrap: X` and `ratio run_pool/bwrap: X`
# (medians), for scripts. Knobs: POOL_BENCH_ROUNDS (60), POOL_BENCH_SECONDS (120), POOL_BENCH_SIZE (8).
# Only loopback and the namespaces tollgate makes are touched; the pool, its socket
# and the temporary directory go at exit. Not a test: nothing passes or fails here.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
build=$(cd "$build" && pwd)
tollgate=$build/tollgate
timer=$build/bench_run_timer
rounds=${POOL_BENCH_ROUNDS:-60}
seconds=${POOL_BENCH_SECONDS:-120}
size=${POOL_BENCH_SIZE:-8}

[[ $(id -u) == 0 ]] || { echo "bench_pool: needs root (tollgate pool does)" >&2; exit 1; }
[[ -x $tollgate && -x $timer ]] ||
	{ echo "bench_pool: build tollgate and bench_run_timer first ($build)" >&2; exit 1; }
command -v bwrap >/dev/null || "$src/scripts/install-deps" bubblewrap >/dev/null

tmp=$(mktemp -d /tmp/bench-pool.XXXXXX)
pool=
cleanup() {
	if [[ -n $pool ]]; then
		kill "$pool" 2>/dev/null || true
		wait "$pool" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
export TOLLGATE_HOME=$tmp/home
cd "$tmp"
sock=$tmp/pool.sock

"$tollgate" pool --size "$size" --socket "$sock" 2>"$tmp/pool.log" &
pool=$!
for ((i = 0; i < 300; i++)); do # 30 s at most
	grep -q 'slots ready' "$tmp/pool.log" && break
	kill -0 "$pool" 2>/dev/null || break
	sleep 0.1
done
grep -q 'slots ready' "$tmp/pool.log" || { cat "$tmp/pool.log" >&2; echo "bench_pool: the pool did not fill" >&2; exit 1; }

echo "== machine: $(nproc) cores, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "== uptime: $(uptime)"
echo "== bwrap $(bwrap --version | awk '{print $2}'); pool of $size slots at $sock"
echo
echo "== wall time of run -- true: up to $rounds interleaved rounds, at most ${seconds}s"
"$timer" -n "$rounds" -t "$seconds" -w 3 \
	pool env TOLLGATE_WARM_POOL="$sock" "$tollgate" run -- true :: \
	pool-one-process env TOLLGATE_WARM_POOL="$sock" TOLLGATE_PRIVSEP=0 "$tollgate" run -- true :: \
	no-pool env TOLLGATE_WARM_POOL=off "$tollgate" run -- true :: \
	no-pool-one-process env TOLLGATE_WARM_POOL=off TOLLGATE_PRIVSEP=0 "$tollgate" run -- true :: \
	no-network env TOLLGATE_WARM_POOL=off "$tollgate" run --no-network -- true :: \
	bwrap bwrap --unshare-all --ro-bind / / true >"$tmp/timing.txt" 2>"$tmp/timing.err" </dev/null ||
	{ cat "$tmp/timing.err" >&2; exit 1; }
cat "$tmp/timing.txt"
awk '{
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] }
} END {
	b = v["bwrap", "median_ms"]; b90 = v["bwrap", "p90_ms"]
	printf "ratio pool/bwrap: median %.2f, p90 %.2f (goal: median <= 1.5)\n",
		v["pool", "median_ms"] / b, v["pool", "p90_ms"] / b90
	printf "ratio no-pool/bwrap: median %.2f, p90 %.2f (goal: median <= 2)\n",
		v["no-pool", "median_ms"] / b, v["no-pool", "p90_ms"] / b90
	printf "ratio pool-one-process/bwrap: median %.2f; no-pool-one-process/bwrap: median %.2f\n",
		v["pool-one-process", "median_ms"] / b, v["no-pool-one-process", "median_ms"] / b
	printf "ratio pool/no-pool: median %.2f; one process: %.2f\n",
		v["pool", "median_ms"] / v["no-pool", "median_ms"],
		v["pool-one-process", "median_ms"] / v["no-pool-one-process", "median_ms"]
	printf "ratio pool/no-network (the network'"'"'s share left with the pool): median %.2f; no-network/bwrap: %.2f\n",
		v["pool", "median_ms"] / v["no-network", "median_ms"], v["no-network", "median_ms"] / b
	pool_runs = v["pool", "runs"] + v["pool", "failed"] + v["pool-one-process", "runs"] + v["pool-one-process", "failed"]
	printf "pool rows ran %d times (warm-up included: +6)\n", pool_runs
}' "$tmp/timing.txt"
echo "slots handed out: $(grep -c 'handed out' "$tmp/pool.log" || true)"
echo "== uptime after: $(uptime)"
# One line per goal, last, for scripts (medians; goals: run_pool/bwrap <= 1.5,
# run/bwrap <= 2, the split tollgate as by default).
awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] } }
END {
	printf "ratio run/bwrap: %.2f\n", v["no-pool", "median_ms"] / v["bwrap", "median_ms"]
	printf "ratio run_pool/bwrap: %.2f\n", v["pool", "median_ms"] / v["bwrap", "median_ms"]
}' "$tmp/timing.txt"
