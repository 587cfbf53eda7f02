#!/usr/bin/env bash
# Does starting a sandbox get slower as others run? `tollgate run -- true` with 0, 1,
# 10 and 100 sandboxes already running (each a `tollgate run -- sleep`, a gateway and a
# sandbox of its own), against bwrap in the same rounds; the ratio of each level's
# median to the level with one running is the curve (the goal: 100 within 1.5x).
#
#   sudo tests/bench/bench_run_growth.sh [BUILD_DIR]      (default: build; needs root)
#
# Knobs: GROWTH_LEVELS ("0 1 10 100"), GROWTH_ROUNDS (40), GROWTH_SECONDS (60 per level).
# Not a test: nothing here passes or fails on speed.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
tollgate=$build/tollgate
timer=$build/bench_run_timer
levels=${GROWTH_LEVELS:-0 1 10 100}
rounds=${GROWTH_ROUNDS:-40}
seconds=${GROWTH_SECONDS:-60}

[[ $(id -u) == 0 ]] || { echo "bench_run_growth: needs root (tollgate run does)" >&2; exit 1; }
[[ -x $tollgate && -x $timer ]] ||
	{ echo "bench_run_growth: build tollgate and bench_run_timer first ($build)" >&2; exit 1; }
command -v bwrap >/dev/null || "$src/scripts/install-deps" bubblewrap >/dev/null

tmp=$(mktemp -d /tmp/bench-growth.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
export TOLLGATE_HOME=$tmp/home
# Without the warm pool, even if one runs (tests/bench/bench_pool.sh measures it).
export TOLLGATE_WARM_POOL=off
cd "$tmp"

# A background sandbox counts as running once its command (`sleep 900`) is.
start_background() { # N: brings the number of background sandboxes up to N
	while ((${#pids[@]} < $1)); do
		"$tollgate" run --timeout 900s -- sleep 900 </dev/null >/dev/null 2>&1 &
		pids+=("$!")
	done
	local want=$1 running
	for _ in $(seq 600); do
		running=$(pgrep -c -f '^sleep 900$' || true)
		((${running:-0} >= want)) && return 0
		sleep 0.1
	done
	echo "bench_run_growth: only ${running:-0} of $want background sandboxes came up" >&2
}

echo "== machine: $(nproc) cores, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '%-10s %12s %12s %10s %14s\n' running tollgate_ms bwrap_ms "/bwrap" "/1 running"
base=""
for n in $levels; do
	start_background "$n"
	"$timer" -n "$rounds" -t "$seconds" -w 3 \
		tollgate "$tollgate" run -- true :: \
		bwrap bwrap --unshare-all --ro-bind / / true >"$tmp/t.$n" 2>"$tmp/e.$n" </dev/null ||
		{ cat "$tmp/e.$n" >&2; exit 1; }
	tg=$(awk '$1 == "tollgate" { for (i = 2; i <= NF; i++) if ($i ~ /^median_ms=/) print substr($i, 11) }' "$tmp/t.$n")
	bw=$(awk '$1 == "bwrap" { for (i = 2; i <= NF; i++) if ($i ~ /^median_ms=/) print substr($i, 11) }' "$tmp/t.$n")
	[[ $n == 1 || -z $base ]] && [[ $n != 0 ]] && base=$tg
	printf '%-10s %12s %12s %10s %14s\n' "$n" "$tg" "$bw" \
		"$(python3 -c "print(round($tg / $bw, 2))")" \
		"$([[ -n $base ]] && python3 -c "print(round($tg / $base, 2))" || echo -)"
done
echo "goal: the 100 row within 1.5x of the 1 row"
