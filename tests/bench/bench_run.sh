#!/usr/bin/env bash
# `tollgate run` benchmarks: start-up cost of a sandbox against bwrap and
# `unshare -n`, where tollgate's time goes, and whether many runs leak anything.
#
#   sudo tests/bench/bench_run.sh [BUILD_DIR]      (default: build; needs root)
#
# 1. Wall time of `tollgate run -- true` (as root, split into the privileged
#    parent and the gate as by default; as root in one process, TOLLGATE_PRIVSEP=0;
#    and rootless as a user the bench creates and removes, through setpriv), `bwrap --unshare-all --ro-bind / /
#    true` and `unshare -n true`, interleaved round by round (build/bench_run_timer),
#    with median, p90 and the ratios against bwrap (goal: median at most 2x).
# 2. Phases of tollgate's time from a few runs under `strace -f --seccomp-bpf`
#    tracing only the marker system calls (tests/bench/run/phases.awk); strace
#    slows every traced call, so the phases add up to more than an untraced run.
# 3. RUN_BENCH_SERIAL runs in a row, then RUN_BENCH_WAVES waves of RUN_BENCH_PARALLEL
#    runs at once, with fds, memory, links, network namespaces, cgroups, mounts and
#    temp dirs counted before and after each, and what those runs left behind
#    (found by their pids). About a minute in all.
# Knobs: RUN_BENCH_ROUNDS (100), RUN_BENCH_SECONDS (120, the timing phase's cap),
# RUN_BENCH_SERIAL (200), RUN_BENCH_PARALLEL (16), RUN_BENCH_WAVES (5),
# RUN_BENCH_TRACES (7), RUN_BENCH_BEFORE=PATH (another build's tollgate, timed in the
# same rounds as a "tollgate-before" row, with the ratio of this build's median to
# its: a change's cost measured before and after in one invocation).
# Ends with `ratio run/bwrap: X` (and `ratio run/run_before: X` with
# RUN_BENCH_BEFORE), section 1's medians, for scripts.
# Not a test: nothing here passes or fails on speed.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
build=$(cd "$build" && pwd)
tollgate=$build/tollgate
timer=$build/bench_run_timer
rounds=${RUN_BENCH_ROUNDS:-100}
seconds=${RUN_BENCH_SECONDS:-120}
serial=${RUN_BENCH_SERIAL:-200}
parallel=${RUN_BENCH_PARALLEL:-16}
waves=${RUN_BENCH_WAVES:-5}
traces=${RUN_BENCH_TRACES:-7}
before=()
if [[ -n ${RUN_BENCH_BEFORE:-} ]]; then
	[[ -x $RUN_BENCH_BEFORE ]] || { echo "bench_run: RUN_BENCH_BEFORE: $RUN_BENCH_BEFORE is not an executable" >&2; exit 1; }
	before=(tollgate-before "$RUN_BENCH_BEFORE" run -- true ::)
fi

[[ $(id -u) == 0 ]] || { echo "bench_run: needs root (tollgate run does)" >&2; exit 1; }
[[ -x $tollgate && -x $timer ]] ||
	{ echo "bench_run: build tollgate and bench_run_timer first ($build)" >&2; exit 1; }
if ! command -v bwrap >/dev/null; then
	"$src/scripts/install-deps" bubblewrap >/dev/null
fi
for tool in strace lsns ip; do
	command -v "$tool" >/dev/null || { echo "bench_run: $tool is missing" >&2; exit 1; }
done

# Not /tmp/tollgate*: those are what the leak check counts.
tmp=$(mktemp -d /tmp/bench-run.XXXXXX)
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

# The rootless row's user (docs/run.md, "Without root"), removed on exit.
rl_user=tgbench$$
rootless=()
if useradd -M -U -s /usr/sbin/nologin "$rl_user" >/dev/null 2>&1; then
	trap 'cleanup; userdel "$rl_user" >/dev/null 2>&1 || true' EXIT
	chmod 0711 "$tmp"
	mkdir -p "$tmp/rootless"
	chown "$rl_user:" "$tmp/rootless"
	rootless=(tollgate-rootless setpriv --reuid "$rl_user" --regid "$(id -g "$rl_user")"
		--init-groups env HOME="$tmp/rootless" TOLLGATE_HOME="$tmp/rootless/home"
		"$tollgate" run -- true ::)
	setpriv --reuid "$rl_user" --regid "$(id -g "$rl_user")" --init-groups \
		env HOME="$tmp/rootless" TOLLGATE_HOME="$tmp/rootless/home" "$tollgate" run -- true \
		</dev/null >/dev/null 2>&1 || { echo "== rootless: tollgate run fails here; no row"; rootless=(); }
fi

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
	"$(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== bwrap $(bwrap --version | awk '{print $2}'), $(unshare --version | head -1)"

# ---- 1. wall time, interleaved --------------------------------------------------
echo
echo "== 1. wall time: up to $rounds interleaved rounds, at most ${seconds}s"
"$timer" -n "$rounds" -t "$seconds" -w 3 \
	tollgate "$tollgate" run -- true :: \
	tollgate-one-process env TOLLGATE_PRIVSEP=0 "$tollgate" run -- true :: \
	tollgate-no-network "$tollgate" run --no-network -- true :: \
	"${rootless[@]}" "${before[@]}" \
	bwrap bwrap --unshare-all --ro-bind / / true :: \
	unshare-n unshare -n true >"$tmp/timing.txt" 2>"$tmp/timing.err" </dev/null ||
	{ cat "$tmp/timing.err" >&2; exit 1; }
cat "$tmp/timing.txt"
awk '{
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] }
} END {
	printf "ratio tollgate/bwrap: median %.2f, p90 %.2f (goal: median <= 2)\n",
		v["tollgate", "median_ms"] / v["bwrap", "median_ms"], v["tollgate", "p90_ms"] / v["bwrap", "p90_ms"]
	printf "ratio tollgate (split, the default)/one process (TOLLGATE_PRIVSEP=0): median %.2f, p90 %.2f (goal: median <= 1.2)\n",
		v["tollgate", "median_ms"] / v["tollgate-one-process", "median_ms"],
		v["tollgate", "p90_ms"] / v["tollgate-one-process", "p90_ms"]
	printf "ratio tollgate --no-network/bwrap: median %.2f, p90 %.2f\n",
		v["tollgate-no-network", "median_ms"] / v["bwrap", "median_ms"],
		v["tollgate-no-network", "p90_ms"] / v["bwrap", "p90_ms"]
	if (v["tollgate-rootless", "median_ms"] != "")
		printf "ratio tollgate rootless/bwrap: median %.2f, p90 %.2f; rootless/root: median %.2f (setpriv included)\n",
			v["tollgate-rootless", "median_ms"] / v["bwrap", "median_ms"],
			v["tollgate-rootless", "p90_ms"] / v["bwrap", "p90_ms"],
			v["tollgate-rootless", "median_ms"] / v["tollgate", "median_ms"]
	printf "ratio tollgate/unshare -n: median %.2f\n", v["tollgate", "median_ms"] / v["unshare-n", "median_ms"]
	if (v["tollgate-before", "median_ms"] != "")
		printf "ratio tollgate/before (RUN_BENCH_BEFORE): median %.2f, p90 %.2f\n",
			v["tollgate", "median_ms"] / v["tollgate-before", "median_ms"],
			v["tollgate", "p90_ms"] / v["tollgate-before", "p90_ms"]
}' "$tmp/timing.txt"
# The goal's figure, repeated as the script's last line (see the end).
final_ratios=$(awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] } }
END {
	if (v["tollgate-before", "median_ms"] != "")
		printf "ratio run/run_before: %.2f\n", v["tollgate", "median_ms"] / v["tollgate-before", "median_ms"]
	printf "ratio run/bwrap: %.2f\n", v["tollgate", "median_ms"] / v["bwrap", "median_ms"]
}' "$tmp/timing.txt")
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 2. where the time goes -------------------------------------------------------
echo
echo "== 2. phases of tollgate run -- true (median of $traces traced runs, ms; strace inflates them)"
: >"$tmp/phases.txt"
for i in $(seq 1 "$traces"); do
	strace -f --seccomp-bpf -ttt -T -e signal=none \
		-e trace=clone3,execve,mount,pivot_root,exit_group,wait4,write,unlinkat \
		-o "$tmp/trace.$i" "$tollgate" run -- true </dev/null >/dev/null 2>&1 || true
	awk -f "$src/tests/bench/run/phases.awk" "$tmp/trace.$i" >>"$tmp/phases.txt"
done
awk '{ v[$1] = v[$1] " " $2; if (!($1 in seen)) { order[++n] = $1; seen[$1] = 1 } }
END {
	for (k = 1; k <= n; k++) {
		m = split(substr(v[order[k]], 2), a, " ")
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		printf "  %-24s %8.2f   (min %.2f, max %.2f)\n", order[k], a[int((m + 1) / 2)], a[1], a[m]
	}
}' "$tmp/phases.txt"

# ---- 3. leaks ---------------------------------------------------------------------
# One line per quantity: name, value, and how much growth is read as noise. The
# machine is shared (other engineers' builds and tests make namespaces, cgroups and
# files too, and the kernel frees a dead namespace's objects a while later), so
# machine-wide counts ("_all") get a tolerance of a quarter of the runs made (at least
# 16; a leak of one object per run would show as the run count), the system's open
# files 512, memory 2 %; tollgate-named ones must not grow at all. residue() below is
# the exact check: what the benchmark's own runs left behind, found by pid.
snapshot() {
	local cg_total=0 cg_tollgate=0 mp tol=$(($1 / 4))
	((tol >= 16)) || tol=16
	while read -r mp; do
		cg_total=$((cg_total + $(find "$mp" -mindepth 1 -type d 2>/dev/null | wc -l)))
		cg_tollgate=$((cg_tollgate + $(find "$mp" -mindepth 1 -type d -name 'tollgate*' 2>/dev/null | wc -l)))
	done < <(awk '$9 == "cgroup" || $9 == "cgroup2" {print $5}' /proc/self/mountinfo)
	echo "file_handles_all $(cut -f1 /proc/sys/fs/file-nr) 512"
	awk '/^MemAvailable:/ {print "mem_available_kb", $2, int($2 * 0.02)}
		/^Slab:/ {print "slab_kb", $2, int($2 * 0.02)}
		/^SUnreclaim:/ {print "slab_unreclaimable_kb", $2, int($2 * 0.02)}' /proc/meminfo
	awk -v t="$tol" '$1 == "net_namespace" {print "net_namespace_objs_all", $2, t}' /proc/slabinfo 2>/dev/null || true
	echo "host_links_all $(ip -o link | wc -l) $tol"
	echo "host_links_tollgate $(ip -o link | grep -c ': tg[0-9]' || true) 0"
	echo "net_namespaces_all $(lsns -n -t net | wc -l) $tol"
	echo "net_namespaces_tollgate $(lsns -n -t net -o COMMAND | grep -c tollgate || true) 0"
	echo "cgroup_dirs_all $cg_total $tol"
	echo "cgroup_dirs_tollgate $cg_tollgate 0"
	echo "mountinfo_lines $(wc -l </proc/self/mountinfo) 0"
	echo "tmp_tollgate_all $(find /tmp -maxdepth 1 -name 'tollgate*' | wc -l) $tol"
	echo "tmp_tollgate_run $(find /tmp -maxdepth 1 -name 'tollgate-run.*' | wc -l) 0"
	echo "run_tollgate_sockets $(find /run/tollgate -maxdepth 1 -name '*.sock' 2>/dev/null | wc -l) $tol"
	echo "tollgate_fds $(fds_of_a_run) 0"
}
# fds of a tollgate process while its sandbox runs (`sleep 1`).
fds_of_a_run() {
	local p n=-1
	"$tollgate" run -- sleep 1 </dev/null >/dev/null 2>&1 &
	p=$!
	sleep 0.5
	[[ -d /proc/$p/fd ]] && n=$(find "/proc/$p/fd" -mindepth 1 | wc -l)
	wait "$p" || true
	echo "$n"
}
compare() {
	awk 'NR == FNR { before[$1] = $2; next }
	{
		d = $2 - before[$1]
		grew = ($1 == "mem_available_kb") ? (-d > $3) : (d > $3)
		wide = ($1 ~ /_all$|_kb$/)
		printf "  %-24s %12s -> %-12s %s\n", $1, before[$1], $2,
			!grew ? "ok" : wide ? "moved (" d ", noise <= " $3 "; machine-wide)" : "GREW (" d ")"
		if (grew && wide) moved = moved " " $1
		else if (grew) bad = bad " " $1
	} END {
		print bad == "" ? "  => no growth" : "  => grew:" bad
		if (moved != "") print "  => machine-wide figures moved beyond the noise allowance:" moved
	}' "$1" "$2"
}
# A dead network namespace, its veth and its slab objects are freed by a kernel
# worker some time after the last process leaves: snapshot again (every 3 s, up to
# 5 times) until nothing grew, and say how long that took.
settle_and_compare() {
	local runs=$1 before=$2 after=$3 try
	for try in 1 2 3 4 5; do
		sleep 3
		snapshot "$runs" >"$after"
		compare "$before" "$after" >"$after.cmp"
		grep -q '=> no growth' "$after.cmp" && ! grep -q 'machine-wide figures' "$after.cmp" && break
	done
	echo "  (after $((try * 3)) s)"
	cat "$after.cmp"
}
settle() { sleep 3; }
# What the runs listed in $1 (one tollgate pid a line) left behind, found by the pid
# in the names tollgate gives them: tollgate-run.PID.* (temp dir, cgroups) and
# /run/tollgate/PID.sock. Other users' runs on the machine do not count here.
residue() {
	local names
	names=$({
		find /tmp -maxdepth 1 -name 'tollgate-run.*' -printf '%f\n' || true
		awk '$9 == "cgroup" || $9 == "cgroup2" {print $5}' /proc/self/mountinfo |
			xargs -I{} find {} -mindepth 1 -type d -name 'tollgate-run.*' -printf '%f\n' 2>/dev/null || true
		find /run/tollgate -maxdepth 1 -name '*.sock' -printf 'sock.%f\n' 2>/dev/null || true
	} | sed -E 's/^(tollgate-run|sock)\.([0-9]+).*/\2 &/')
	local left
	left=$(awk 'NR == FNR { ours[$1] = 1; next } ($1 in ours) { print $2 }' "$1" - <<<"$names")
	if [[ -z $left ]]; then
		echo "  residue of these $(wc -l <"$1") runs (temp dirs, cgroups, sockets by pid): none"
	else
		echo "  residue of these runs: $(wc -l <<<"$left") items:"
		head -5 <<<"$left" | sed 's/^/    /'
	fi
}

echo
echo "== 3a. $serial runs in a row"
settle
snapshot "$serial" >"$tmp/before_serial"
fail=0
start=$(date +%s%N)
for i in $(seq 1 "$serial"); do
	"$tollgate" run -- true </dev/null >/dev/null 2>>"$tmp/serial.err" &
	echo $! >>"$tmp/serial.pids"
	wait $! || fail=$((fail + 1))
done
echo "  $serial runs in $(( ($(date +%s%N) - start) / 1000000 )) ms, $fail failed"
settle_and_compare "$serial" "$tmp/before_serial" "$tmp/after_serial"
residue "$tmp/serial.pids"
[[ $fail == 0 ]] || sort "$tmp/serial.err" | uniq -c | head -5

echo
echo "== 3b. $waves waves of $parallel runs at once"
snapshot "$((waves * parallel))" >"$tmp/before_parallel"
fail=0
start=$(date +%s%N)
for _ in $(seq 1 "$waves"); do
	pids=()
	for i in $(seq 1 "$parallel"); do
		"$tollgate" run -- true </dev/null >/dev/null 2>>"$tmp/parallel.err" &
		pids+=($!)
		echo $! >>"$tmp/parallel.pids"
	done
	for p in "${pids[@]}"; do wait "$p" || fail=$((fail + 1)); done
	pids=()
done
echo "  $((waves * parallel)) runs in $(( ($(date +%s%N) - start) / 1000000 )) ms, $fail failed"
settle_and_compare "$((waves * parallel))" "$tmp/before_parallel" "$tmp/after_parallel"
residue "$tmp/parallel.pids"
[[ $fail == 0 ]] || sort "$tmp/parallel.err" | uniq -c | head -5
echo
echo "== done: $(date -u '+%H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# One line per goal, last, for scripts: the median of section 1's rounds
# (goal: run/bwrap <= 2); with RUN_BENCH_BEFORE, this build against that one.
echo "$final_ratios"
