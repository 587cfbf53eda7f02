#!/usr/bin/env bash
# Start-up cost of a sandbox from an image: `tollgate run --image IMG@sha256:... --
# true` against `tollgate run -- true` (the host's root), against bwrap on the same
# unpacked root, and against `podman run --rm --network none` of the same image,
# interleaved round by round in one invocation (build/bench_run_timer); then where
# the image start's time goes, and the pull against skopeo (bench_image_pull.sh).
#
#   sudo tests/bench/bench_image.sh [BUILD_DIR]     (default: build; needs root)
#
# The image is the image tests' busybox one (tests/integration/oci_layout.py, from
# this machine's busybox-static), or their python3 one with BENCH_IMAGE=python3
# (then every row runs `python3 -c pass`). tollgate imports it into a store of the
# bench's own; podman gets it from the same OCI layout by `skopeo copy` into a
# containers-storage of the bench's own (overlay), and runs it with runc (crun does
# run on hybrid cgroups), cgroupfs and a file for events, and with rlimits of its
# own (nofile 1024, nproc 4096): where root lacks CAP_SYS_RESOURCE, runc cannot set
# podman's default ones.
# Goals: image start <= 1.2 x `run -- true`, <= 0.3 x podman's.
# Knobs: IMAGE_BENCH_ROUNDS (60), IMAGE_BENCH_SECONDS (120, the timing's cap),
# IMAGE_BENCH_TRACES (5), IMAGE_BENCH_PULL (1; 0 leaves the pull out, or run
# tests/bench/bench_image_pull.sh alone; its PULL_BENCH_* knobs, PULL_BENCH_BEFORE
# among them, pass through). Loopback only: no packet leaves the host.
# Each first run of a command is bounded in time (timeout), so one that hangs here
# stops the bench before the timed rounds.
# Not a test: nothing here passes or fails on speed.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
build=$(cd "$build" && pwd)
tollgate=$build/tollgate
timer=$build/bench_run_timer
kind=${BENCH_IMAGE:-busybox}
rounds=${IMAGE_BENCH_ROUNDS:-60}
seconds=${IMAGE_BENCH_SECONDS:-120}
traces=${IMAGE_BENCH_TRACES:-5}
pull=${IMAGE_BENCH_PULL:-1}
case $kind in
busybox) cmd=(true) ;;
python3) cmd=(python3 -c pass) ;;
*) echo "bench_image: BENCH_IMAGE is busybox or python3, not $kind" >&2; exit 1 ;;
esac

[[ $(id -u) == 0 ]] || { echo "bench_image: needs root (tollgate run and podman do)" >&2; exit 1; }
[[ -x $tollgate && -x $timer ]] ||
	{ echo "bench_image: build tollgate and bench_run_timer first ($build)" >&2; exit 1; }
for tool in bwrap podman runc skopeo busybox; do
	command -v "$tool" >/dev/null && continue
	"$src/scripts/install-deps" bubblewrap podman runc >/dev/null
	break
done
command -v strace >/dev/null || { echo "bench_image: strace is missing" >&2; exit 1; }

tmp=$(mktemp -d /tmp/bench-image.XXXXXX)
# podman's storage, run and state directories are the bench's own: nothing of it is
# left on the machine.
podman_cmd=(podman --root "$tmp/podman/root" --runroot "$tmp/podman/run" --tmpdir "$tmp/podman/tmp"
	--storage-driver overlay --runtime runc --cgroup-manager cgroupfs --events-backend file)
cleanup() {
	"${podman_cmd[@]}" rm -a -f >/dev/null 2>&1 || true
	# containers-storage bind-mounts its overlay directory on itself.
	awk -v t="$tmp/" 'index($5, t) == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
export TOLLGATE_HOME=$tmp/home
# Without the warm pool, even if one runs (tests/bench/bench_pool.sh measures it).
export TOLLGATE_WARM_POOL=off
cd "$tmp"

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
	"$(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== bwrap $(bwrap --version | awk '{print $2}'), podman $(podman --version | awk '{print $3}')," \
	"runc $(runc --version | awk 'NR == 1 {print $3}'), skopeo $(skopeo --version | awk '{print $3}')"

# ---- the image -----------------------------------------------------------------------
digest=$(python3 "$src/tests/integration/oci_layout.py" "$tmp/layout" "$kind")
"$tollgate" image import "oci:$tmp/layout" --name "bench-$kind:1" >/dev/null
img="bench-$kind:1@$digest"
root=$TOLLGATE_HOME/images/roots/${digest#sha256:}
[[ -d $root ]] || { echo "bench_image: no unpacked root at $root" >&2; exit 1; }
echo "== image $img: $(du -sh "$root" | cut -f1) unpacked, $(find "$root" | wc -l) entries"

podman_store=ok
timeout 300 skopeo copy --quiet "oci:$tmp/layout:latest" \
	"containers-storage:[overlay@$tmp/podman/root+$tmp/podman/run]localhost/bench-$kind:1" \
	>"$tmp/skopeo.err" 2>&1 || podman_store=$(tail -1 "$tmp/skopeo.err")
podman_run=("${podman_cmd[@]}" run --rm --network none
	--ulimit "nofile=1024:1024" --ulimit "nproc=4096:4096"
	"localhost/bench-$kind:1")
podman_row=(podman "${podman_run[@]}" "${cmd[@]}" ::)
if [[ $podman_store != ok ]]; then
	echo "== podman: skopeo cannot store the image ($podman_store); no row"
	podman_row=()
elif ! out=$(timeout 120 "${podman_run[@]}" "${cmd[@]}" </dev/null 2>&1); then
	echo "== podman: does not run here ($(tail -1 <<<"$out")); no row"
	podman_row=()
fi
# bwrap on the same root: the root has no /proc to mount on and bwrap 0.8 has no
# overlay, so each of its top-level entries is bound read-only onto a tmpfs made / (a
# symlink made again: binding one would follow it on the host), then / is made read-only.
bwrap_run=(bwrap --unshare-all --tmpfs /)
for entry in "$root"/*; do
	name=${entry##*/}
	case $name in proc | dev | tmp) continue ;; esac
	if [[ -L $entry ]]; then
		bwrap_run+=(--symlink "$(readlink "$entry")" "/$name")
	else
		bwrap_run+=(--ro-bind "$entry" "/$name")
	fi
done
bwrap_run+=(--proc /proc --dev /dev --tmpfs /tmp --remount-ro /)
timeout 60 "${bwrap_run[@]}" "${cmd[@]}" </dev/null ||
	{ echo "bench_image: bwrap on the image's root fails" >&2; exit 1; }
timeout 60 "$tollgate" run --image "$img" -- "${cmd[@]}" </dev/null ||
	{ echo "bench_image: tollgate run --image fails" >&2; exit 1; }

# ---- 1. wall time, interleaved ----------------------------------------------------------
echo
echo "== 1. wall time of ${cmd[*]}: up to $rounds interleaved rounds, at most ${seconds}s"
"$timer" -n "$rounds" -t "$seconds" -w 3 \
	tollgate-image "$tollgate" run --image "$img" -- "${cmd[@]}" :: \
	tollgate "$tollgate" run -- "${cmd[@]}" :: \
	bwrap-image-root "${bwrap_run[@]}" "${cmd[@]}" :: \
	"${podman_row[@]}" >"$tmp/timing.txt" 2>"$tmp/timing.err" </dev/null ||
	{ cat "$tmp/timing.err" >&2; exit 1; }
cat "$tmp/timing.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 2. where the image start's time goes -------------------------------------------------
# The phases of tests/bench/run/phases.awk, median of a few traced runs of each
# (strace slows every traced call: the phases add up to more than an untraced run).
echo
echo "== 2. phases, median of $traces traced runs each (ms; strace inflates them)"
phases() {
	local name=$1 i
	shift
	: >"$tmp/phases.$name"
	for ((i = 1; i <= traces; i++)); do
		timeout 60 strace -f --seccomp-bpf -ttt -T -e signal=none \
			-e trace=clone3,execve,mount,pivot_root,exit_group,wait4,write,unlinkat \
			-o "$tmp/trace" "$@" </dev/null >/dev/null 2>&1 || true
		awk -f "$src/tests/bench/run/phases.awk" "$tmp/trace" >>"$tmp/phases.$name"
	done
}
phases image "$tollgate" run --image "$img" -- "${cmd[@]}"
phases host "$tollgate" run -- "${cmd[@]}"
awk 'function med(s,   a, m, i, j, t) {
	m = split(substr(s, 2), a, " ")
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return a[int((m + 1) / 2)]
}
{ v[FILENAME ~ /image$/, $1] = v[FILENAME ~ /image$/, $1] " " $2; if (!($1 in seen)) { order[++n] = $1; seen[$1] = 1 } }
END {
	printf "  %-24s %10s %10s\n", "phase", "--image", "host root"
	for (k = 1; k <= n; k++)
		printf "  %-24s %10.2f %10.2f\n", order[k], med(v[1, order[k]]), med(v[0, order[k]])
}' "$tmp/phases.image" "$tmp/phases.host"

# ---- 3. pull against skopeo -------------------------------------------------------------
echo
if [[ $pull == 1 ]]; then
	echo "== 3. pull against skopeo (tests/bench/bench_image_pull.sh)"
	"$src/tests/bench/bench_image_pull.sh" "$build" | tee "$tmp/pull.txt"
else
	echo "== 3. pull: left out (IMAGE_BENCH_PULL=0); tests/bench/bench_image_pull.sh measures it"
	: >"$tmp/pull.txt"
fi

echo
echo "== done: $(date -u '+%H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
awk '{
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] }
} END {
	img = v["tollgate-image", "median_ms"]
	printf "medians (ms): tollgate run --image %.2f, tollgate run %.2f, bwrap on the root %.2f, podman %s\n",
		img, v["tollgate", "median_ms"], v["bwrap-image-root", "median_ms"],
		v["podman", "median_ms"] == "" ? "(no row)" : sprintf("%.2f", v["podman", "median_ms"])
	printf "ratio image_start_vs_run: %.2f (goal <= 1.2)\n", img / v["tollgate", "median_ms"]
	if (v["podman", "median_ms"] != "")
		printf "ratio image_start_vs_podman: %.2f (goal <= 0.3)\n", img / v["podman", "median_ms"]
	printf "ratio image_start_vs_bwrap: %.2f\n", img / v["bwrap-image-root", "median_ms"]
}' "$tmp/timing.txt"
grep '^ratio ' "$tmp/pull.txt" || true
