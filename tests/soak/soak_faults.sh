#!/usr/bin/env bash
# Faults a host really has, each against a real gateway on loopback and in namespaces
# the gateway makes: kill -9 of the gate, of the parent and of both (mid-request and
# mid-approval), the audit database locked by another process, the disk under
# TOLLGATE_HOME full, the upstream DNS server down and back, SIGSTOP/SIGCONT of the gate,
# the wall clock stepped an hour back and forth. Each fault prints one `fault NAME:` line
# saying what survived, what was lost and what was left behind (docs/reliability.md).
# Not part of ctest's default run; test_soak_short runs a subset with SOAK_ASSERT=1.
#
#   tests/soak/soak_faults.sh [BUILD_DIR]     (default: build; run as root)
#
# Knobs: FAULTS (all of: kill-gate-request kill-parent-request kill-both-request
# kill-gate-approval kill-parent-approval kill-both-approval lock disk-full dns-down
# stop-cont clock-step), LOCK_SECONDS (30), STOP_SECONDS (10), SOAK_KEEP=1 (keep the temp
# dir), SOAK_ASSERT=1 (exit 1 when something was left behind, a chain does not verify,
# or a request reached the origin with no row and no gap counted for it),
# SOAK_INFLIGHT_LOSS_OK=1 (one such request per fault, the one in flight, is a note: the
# proxy holds an allow row until the answer comes, so a kill in between loses it uncounted).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
tollgate=$build/tollgate
# shellcheck disable=SC2086 # split at any white space, newlines too
faults=" $(echo ${FAULTS:-kill-gate-request kill-parent-request kill-both-request kill-gate-approval kill-parent-approval kill-both-approval lock disk-full dns-down stop-cont clock-step}) "
lock_secs=${LOCK_SECONDS:-30}
stop_secs=${STOP_SECONDS:-10}
[[ -x $tollgate ]] || { echo "soak_faults: build tollgate first ($build)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "soak_faults: run as root (namespaces, mounts)" >&2; exit 1; }
for tool in sqlite3 curl python3; do
	command -v "$tool" >/dev/null || { echo "soak_faults: $tool is missing (scripts/install-deps)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/tollgate-soak-faults.XXXXXX)
chmod 755 "$tmp"
pids=()
mounts=()
bad=0
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
	if [[ -n ${SOAK_KEEP:-} ]]; then echo "soak_faults: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
note() { echo "  $*"; }
problem() { echo "  PROBLEM: $*"; bad=1; }
wait_for() { # SECONDS COMMAND...: polls every 0.1 s, bounded
	local limit=$(($1 * 10)) i
	shift
	for ((i = 0; i < limit; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
port() { "$src/scripts/free-port"; }

# --- an origin on loopback that logs every request as it arrives (before answering):
# /fast answers at once, /slow after 4 s, so a kill can land mid-request ---
cat >"$tmp/origin.py" <<'EOF'
import http.server, sys, time
log = open(sys.argv[2], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        log.write(self.path + "\n")
        if self.path.startswith("/slow"):
            time.sleep(4)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
op=$(port)
python3 "$tmp/origin.py" "$op" "$tmp/origin.log" 2>/dev/null &
pids+=("$!")
wait_for 10 curl -sf "http://127.0.0.1:$op/ready" || { echo "soak_faults: the origin did not start" >&2; exit 1; }
origin_count() { grep -c "^$1" "$tmp/origin.log" || true; }

# What the audit database holds and whether its chain verifies: sets rows, allowed,
# verify_out, verify_ok, gaps (rows of kind audit.gap, where the writer counts lost rows).
audit_state() { # DB
	rows=$(sqlite3 "file:$1?mode=ro" "SELECT count(*) FROM events" 2>/dev/null || echo "?")
	allowed=$(sqlite3 "file:$1?mode=ro" "SELECT count(*) FROM events WHERE kind = 'decision'
		AND decision = 'allow' AND host = 'origin.test'" 2>/dev/null || echo "?")
	gaps=$(sqlite3 "file:$1?mode=ro" "SELECT count(*) FROM events WHERE kind = 'audit.gap'" 2>/dev/null || echo 0)
	if verify_out=$("$tollgate" audit verify --db "$1" 2>&1); then verify_ok=1; else verify_ok=0; fi
	verify_out=$(tr '\n' ' ' <<<"$verify_out")
}
# Does this build count rows lost at a crash (audit.gap rows, reported by verify)?
counts_gaps=0
grep -q 'audit\.gap' "$tollgate" && counts_gaps=1
# A request that reached the origin with no allow row is lost from the record, unless
# the writer counted it as a gap (verify says so): the figure each fault reports.
report_record() { # DB ORIGIN_REQUESTS
	audit_state "$1"
	note "audit: $rows rows, $allowed allowed requests to the origin for $2 that reached it;" \
		"audit.gap rows: $gaps; verify: $verify_out"
	((verify_ok == 1)) || problem "the chain does not verify"
	if [[ $allowed != "?" ]] && ((allowed < $2)); then
		if ((gaps > 0)) || [[ $verify_out == *gap* ]]; then
			note "lost: $(($2 - allowed)) requests without a row, counted as a gap"
		elif ((counts_gaps)) && [[ -n ${SOAK_INFLIGHT_LOSS_OK:-} ]] && (($2 - allowed <= 1)); then
			note "lost: $(($2 - allowed)) request reached the origin without a row and no gap was counted" \
				"(the one in flight, whose row is held until its answer: SOAK_INFLIGHT_LOSS_OK)"
		elif ((counts_gaps)); then
			problem "lost: $(($2 - allowed)) requests reached the origin without a row and no gap was counted"
		else
			# A build whose writer counts no lost rows (no audit.gap): the loss is
			# reported, not failed; with gap counting it must show as a gap above.
			note "lost: $(($2 - allowed)) requests reached the origin without a row;" \
				"this build counts no gaps, so verify cannot tell"
		fi
	else
		note "lost: nothing (every request that reached the origin has its row)"
	fi
}

# ---------------------------------------------------------------------------------
# kill -9 of the gate, the parent or both, mid-request or mid-approval
# ---------------------------------------------------------------------------------
# Everything of a run that could be left behind: its processes, the network namespaces
# its processes held (the hub, whose veths die with it, and the sandbox's), its mount
# namespace, its cgroups, its temporary directory, and init's mounts and links.
ns_held() { # NS-LINK (e.g. net:[4026532xxx]): is any process or fd holding it?
	local p
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/ns/net" 2>/dev/null) == "$1" || $(readlink "$p/ns/mnt" 2>/dev/null) == "$1" ]] && return 0
	done
	{ find /proc/[0-9]*/fd -lname "$1" 2>/dev/null || true; } | grep -q . && return 0
	grep -q "${1//[\[\]]/.}" /proc/self/mountinfo && return 0
	return 1
}
ns_free() { ! ns_held "$1"; }
# The host's links and mounts that could be a run's: a tollgate veth end (tgN) in the
# host's namespace, a mount on a path of this script's (a namespace of the run's
# mounted anywhere is caught by ns_held). Other programs on a shared machine, and tests
# running beside this one, add their own; those are not compared.
init_links() { ip -o link | awk -F': ' '{print $2}' | grep -E '^tg[0-9]' | sort || true; }
init_mounts() { awk '{print $5, $9}' /proc/self/mountinfo | grep -E "^$tmp" | sort || true; }
run_cgroups() { find /sys/fs/cgroup -maxdepth 3 -name "tollgate-run.$1.*" 2>/dev/null | wc -l; }

fault_kill() { # NAME gate|parent|both request|approval
	local name=$1 target=$2 when=$3
	local d=$tmp/$name
	mkdir -p "$d/tmpdir" "$d/ctl"
	chmod 755 "$d" "$d/tmpdir"
	local links0 mounts0 netns0
	links0=$(init_links)
	mounts0=$(init_mounts)
	netns0=$(ip netns list 2>/dev/null | sort)
	local o0s o0f
	o0s=$(origin_count /slow)
	o0f=$(origin_count /fast)
	local rule=(--allow "origin.test:$op")
	[[ $when == approval ]] && rule=(--ask "origin.test:$op" --ask-timeout 300s)
	# The sandbox asks for /fast and /slow in turn (bounded: 200 rounds, 120 s). A
	# subshell starts it and waits, so that its death by SIGKILL is no job notice here.
	(
		TOLLGATE_HOME=$d/home TMPDIR=$d/tmpdir TOLLGATE_CONTROL_DIR=$d/ctl \
			"$tollgate" run "${rule[@]}" --resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 \
			--timeout 120 -- sh -c "i=0; while [ \$i -lt 200 ]; do
				curl -s -m 10 -o /dev/null http://origin.test:$op/fast
				curl -s -m 10 -o /dev/null http://origin.test:$op/slow
				i=\$((i + 1)); done" >"$d/run.out" 2>"$d/run.err" &
		echo $! >"$d/parent.pid"
		wait
	) 2>/dev/null &
	local waiter=$!
	wait_for 10 test -s "$d/parent.pid" || true
	local parent
	parent=$(cat "$d/parent.pid")
	pids+=("$parent" "$waiter")
	local gate="" init=""
	kids() { ps -o pid=,comm= --ppid "$parent" 2>/dev/null || true; }
	wait_for 20 sh -c "ps -o comm= --ppid $parent | grep -qx tollgate-init" || true
	gate=$(kids | awk '$2 == "tollgate" {print $1; exit}')
	init=$(kids | awk '$2 == "tollgate-init" {print $1; exit}')
	if [[ -z $init ]]; then
		echo "fault $name: the run did not start: $(tail -n 3 "$d/run.err" | tr '\n' ' ')"
		bad=1
		kill -9 "$parent" 2>/dev/null || true
		return
	fi
	[[ -n $gate ]] || note "no separate gate process (TOLLGATE_PRIVSEP=0?): the parent serves"
	# The namespaces this run holds, other than the host's own.
	local self_net self_mnt held=() p l
	self_net=$(readlink /proc/self/ns/net)
	self_mnt=$(readlink /proc/self/ns/mnt)
	for p in $parent $gate $init; do
		for l in $(readlink "/proc/$p/ns/net" "/proc/$p/ns/mnt" /proc/"$p"/fd/* 2>/dev/null |
			grep -E '^(net|mnt):\[' | sort -u); do
			[[ $l == "$self_net" || $l == "$self_mnt" ]] || held+=("$l")
		done
	done
	mapfile -t held < <(printf '%s\n' "${held[@]}" | sort -u)
	local sandbox_pids
	sandbox_pids=$(pgrep -s "$(ps -o sid= -p "$init" | tr -d ' ')" 2>/dev/null | tr '\n' ' ' || true)
	local cg_during tmp_during
	cg_during=$(run_cgroups "$parent")
	# Wait for the moment: a /slow request in flight at the origin, or an approval pending.
	if [[ $when == request ]]; then
		in_flight() { (($(origin_count /slow) > o0s + 1)) && [[ $(tail -n 1 "$tmp/origin.log") == /slow ]]; }
		wait_for 60 in_flight || note "no /slow request seen in flight; killing anyway"
		sleep 1 # the answer takes 4 s: the kill lands inside it
	else
		has_pending() { TOLLGATE_CONTROL_DIR=$d/ctl "$tollgate" pending --json 2>/dev/null | grep -q origin.test; }
		wait_for 30 has_pending || note "no approval seen pending; killing anyway"
	fi
	tmp_during=$(find "$d/tmpdir" -maxdepth 1 -name "tollgate-run.$parent.*" | wc -l)
	case $target in
	gate) kill -9 "${gate:-$parent}" ;;
	parent) kill -9 "$parent" ;;
	both) kill -9 "$parent" ${gate:+"$gate"} ;;
	esac
	local t0=$SECONDS
	# Every process of the run must be gone, the survivors' too, within 20 s.
	all_gone() { for p in $parent $gate $init $sandbox_pids; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
	wait_for 20 all_gone || true
	local gone_after=$((SECONDS - t0))
	wait "$waiter" 2>/dev/null || true
	local survivors=""
	for p in $parent $gate $init $sandbox_pids; do kill -0 "$p" 2>/dev/null && survivors+=" $p($(ps -o comm= -p "$p"))"; done
	local who=$target
	[[ $target == both ]] && who="parent and the gate"
	echo "fault $name: kill -9 of the $who mid-$when (parent $parent, gate ${gate:-none}, sandbox init $init)"
	if [[ -n $survivors ]]; then
		problem "processes still alive ${gone_after}s later:$survivors"
		for p in $parent $gate $init $sandbox_pids; do kill -9 "$p" 2>/dev/null || true; done
	else
		note "every process of the run is gone (within ${gone_after}s): parent, gate, sandbox init and its $(wc -w <<<"$sandbox_pids") processes"
	fi
	# Namespaces: held by nothing once the processes are gone (the kernel frees them).
	local left_ns=()
	for l in "${held[@]}"; do
		wait_for 5 ns_free "$l" || left_ns+=("$l")
	done
	if ((${#left_ns[@]} > 0)); then problem "namespaces still held: ${left_ns[*]}"; else
		note "the run's ${#held[@]} namespaces (hub, sandbox network and mount) are held by nothing: freed"
	fi
	[[ $(init_links) == "$links0" ]] || problem "the host's links changed: $(diff <(echo "$links0") <(init_links) | tr '\n' ' ')"
	# A mount the parent made in the host's namespace (a tmpfs /work) outlives a
	# parent killed with -9 until the next start: counted here, checked after it.
	local mounts_left
	mounts_left=$(comm -13 <(echo "$mounts0") <(init_mounts) | grep -c . || true)
	[[ $(ip netns list 2>/dev/null | sort) == "$netns0" ]] ||
		note "ip netns changed (another program's: none of the run's namespaces is mounted)"
	note "no tollgate link in the host's namespace"
	local cg_left tmp_left
	cg_left=$(run_cgroups "$parent")
	tmp_left=$(find "$d/tmpdir" -maxdepth 1 -name "tollgate-run.$parent.*" | wc -l)
	note "left for the next start: $cg_left of $cg_during cgroup directories, $tmp_left of $tmp_during temporary directories, $mounts_left mounts in the host's namespace"
	# The next start removes what a dead run left.
	TOLLGATE_HOME=$d/home TMPDIR=$d/tmpdir timeout 60 "$tollgate" run --no-network -- true || \
		problem "the next run failed"
	cg_left=$(run_cgroups "$parent")
	tmp_left=$(find "$d/tmpdir" -maxdepth 1 -name "tollgate-run.$parent.*" | wc -l)
	mounts_left=$(comm -13 <(echo "$mounts0") <(init_mounts) | grep -c . || true)
	if ((cg_left + tmp_left + mounts_left > 0)); then
		problem "after the next run: $cg_left cgroups, $tmp_left temporary directories, $mounts_left mounts left: $(comm -13 <(echo "$mounts0") <(init_mounts) | tr '\n' ' ')"
	else
		note "after the next run: no cgroup, no temporary directory, no mount left"
	fi
	local reached=$(($(origin_count /slow) - o0s + $(origin_count /fast) - o0f))
	report_record "$d/home/audit.db" "$reached"
}

# ---------------------------------------------------------------------------------
# A proxy of its own for the faults below: start_proxy NAME [FLAGS...] sets $pp (port),
# $ppid_ and $pdb; requests(N, PATH) sends N requests, one at a time, and prints their codes.
# ---------------------------------------------------------------------------------
start_proxy() {
	local name=$1
	shift
	pp=$(port)
	pdb=${PDB:-$tmp/$name/audit.db}
	mkdir -p "$tmp/$name"
	TOLLGATE_HOME=${PHOME:-$tmp/$name/home} "${PWRAP[@]}" "$tollgate" proxy --listen "127.0.0.1:$pp" \
		--allow "origin.test:$op" --allow-cidr 127.0.0.1/32 --audit "$pdb" \
		--control "$tmp/$name/ctl" "$@" 2>"$tmp/$name/proxy.log" &
	ppid_=$!
	pids+=("$ppid_")
	wait_for 20 grep -q ready "$tmp/$name/proxy.log" || { echo "fault $name: the proxy did not start: $(tail -n 3 "$tmp/$name/proxy.log")"; bad=1; return 1; }
}
codes() { # N PATH [SLEEP]: one request at a time through the proxy, codes counted
	local i c out=()
	for ((i = 0; i < $1; i++)); do
		c=$(curl -s -o /dev/null -w '%{http_code}' -m 15 -x "127.0.0.1:$pp" "http://origin.test:$op$2" || true)
		out+=("$c")
		[[ -z ${3:-} ]] || sleep "$3"
	done
	printf '%s\n' "${out[@]}" | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}'
}
stop_proxy() {
	kill -TERM "$ppid_" 2>/dev/null || true
	wait_for 20 sh -c "! kill -0 $ppid_" || kill -9 "$ppid_" 2>/dev/null || true
	wait "$ppid_" 2>/dev/null || true
}
PWRAP=()

fault_lock() {
	local name=lock
	start_proxy "$name" --resolve origin.test:127.0.0.1 || return
	local n0
	n0=$(origin_count /fast)
	echo "fault lock: the audit database locked by another process (sqlite3, BEGIN EXCLUSIVE) for ${lock_secs}s"
	note "before: $(codes 3 /fast)"
	# The other process: takes the lock, says so, holds it, lets go.
	(
		echo ".timeout 10000"
		echo "BEGIN EXCLUSIVE;"
		echo "SELECT 'locked';"
		sleep "$lock_secs"
		echo "COMMIT;"
	) | sqlite3 "$pdb" >"$tmp/$name/locker.out" 2>&1 &
	local locker=$!
	pids+=("$locker")
	wait_for 15 grep -q locked "$tmp/$name/locker.out" || note "the lock was not taken: $(cat "$tmp/$name/locker.out")"
	local t0=$SECONDS
	note "while locked: $(codes $((lock_secs / 2 > 0 ? lock_secs / 2 : 1)) /fast 1) (one a second for about ${lock_secs}s)"
	wait "$locker" || true
	note "lock held for $((SECONDS - t0))s by the other process; the proxy said: $(grep -iE 'audit|lock|busy' "$tmp/$name/proxy.log" | head -n 3 | tr '\n' ' ')"
	sleep 2
	note "after: $(codes 3 /fast)"
	stop_proxy
	report_record "$pdb" $(($(origin_count /fast) - n0))
}

fault_disk_full() {
	local name=disk-full
	mkdir -p "$tmp/$name/fs"
	mount -t tmpfs -o size=4m,mode=0755 tollgate-soak "$tmp/$name/fs"
	mounts+=("$tmp/$name/fs")
	PHOME=$tmp/$name/fs/home PDB=$tmp/$name/fs/audit.db start_proxy "$name" --resolve origin.test:127.0.0.1 || return
	local n0
	n0=$(origin_count /fast)
	echo "fault disk-full: TOLLGATE_HOME and the audit database on a 4 MiB tmpfs, filled to ENOSPC"
	note "before: $(codes 3 /fast)"
	dd if=/dev/zero of="$tmp/$name/fs/filler" bs=64k 2>/dev/null || true
	note "filled: $(df -k "$tmp/$name/fs" | awk 'NR == 2 {print $4}') KiB free"
	note "while full: $(codes 10 /fast 0.3)"
	local during=$(($(origin_count /fast) - n0 - 3))
	note "requests that reached the origin while the disk was full: $during"
	rm -f "$tmp/$name/fs/filler"
	sleep 3
	note "after freeing: $(codes 3 /fast)"
	note "the proxy said: $(grep -iE 'audit|disk|full|lost' "$tmp/$name/proxy.log" | head -n 4 | tr '\n' ' ')"
	stop_proxy
	report_record "$pdb" $(($(origin_count /fast) - n0))
	umount "$tmp/$name/fs" && mounts=("${mounts[@]/$tmp\/$name\/fs/}")
}

fault_dns_down() {
	local name=dns-down
	mkdir -p "$tmp/$name"
	dns_start() { # [PORT]
		python3 "$src/tests/integration/dns_upstream.py" --port-file "$tmp/$name/dns.port" \
			--log "$tmp/$name/dns.log" --record "origin.test,A,127.0.0.1,1" --lifetime 600 \
			${1:+--port "$1"} 2>>"$tmp/$name/dns.err" &
		dns_pid=$!
		pids+=("$dns_pid")
	}
	rm -f "$tmp/$name/dns.port"
	dns_start
	wait_for 10 test -s "$tmp/$name/dns.port" || { echo "fault dns-down: the DNS server did not start"; bad=1; return; }
	local dport
	dport=$(cat "$tmp/$name/dns.port")
	start_proxy "$name" --upstream-dns "127.0.0.1:$dport" || return
	local n0
	n0=$(origin_count /fast)
	echo "fault dns-down: the upstream DNS server (127.0.0.1:$dport, TTL 1 s) stopped, then started again on its port"
	note "up: $(codes 3 /fast)"
	kill "$dns_pid"
	wait "$dns_pid" 2>/dev/null || true
	sleep 2 # past the TTL
	local t0=$SECONDS
	note "down: $(codes 3 /fast) in $((SECONDS - t0))s"
	rm -f "$tmp/$name/dns.port"
	dns_start "$dport"
	wait_for 10 test -s "$tmp/$name/dns.port" || note "the DNS server did not come back on port $dport"
	sleep 1
	note "back: $(codes 3 /fast)"
	note "the proxy is $(kill -0 "$ppid_" 2>/dev/null && echo alive || echo dead); it said: $(grep -iE 'dns|resolv' "$tmp/$name/proxy.log" | head -n 2 | tr '\n' ' ')"
	kill "$dns_pid" 2>/dev/null || true
	stop_proxy
	report_record "$pdb" $(($(origin_count /fast) - n0))
}

fault_stop_cont() {
	local name=stop-cont
	local d=$tmp/$name
	mkdir -p "$d/tmpdir"
	chmod 755 "$d" "$d/tmpdir"
	local n0
	n0=$(origin_count /fast)
	# 40 requests, 0.25 s apart; the gate is stopped for STOP_SECONDS in the middle.
	TOLLGATE_HOME=$d/home TMPDIR=$d/tmpdir "$tollgate" run --allow "origin.test:$op" \
		--resolve origin.test:127.0.0.1 --allow-cidr 127.0.0.1/32 --timeout 120 -- sh -c "
		ok=0; i=0; while [ \$i -lt 40 ]; do
			c=\$(curl -s -m 60 -o /dev/null -w '%{http_code}' http://origin.test:$op/fast)
			[ \"\$c\" = 200 ] && ok=\$((ok + 1)); i=\$((i + 1)); sleep 0.25; done
		echo ok=\$ok" >"$d/run.out" 2>"$d/run.err" &
	local parent=$!
	pids+=("$parent")
	wait_for 20 sh -c "ps -o comm= --ppid $parent | grep -qx tollgate-init" || true
	local gate
	gate=$(ps -o pid=,comm= --ppid "$parent" | awk '$2 == "tollgate" {print $1; exit}')
	gate=${gate:-$parent}
	echo "fault stop-cont: SIGSTOP of the gate ($gate) for ${stop_secs}s while the sandbox makes 40 requests, then SIGCONT"
	wait_for 20 sh -c "[ \$(grep -c ^/fast '$tmp/origin.log') -ge $((n0 + 5)) ]" || true
	kill -STOP "$gate"
	local at_stop
	at_stop=$(($(origin_count /fast) - n0))
	sleep "$stop_secs"
	local during=$(($(origin_count /fast) - n0 - at_stop))
	kill -CONT "$gate"
	local rc=0
	wait "$parent" || rc=$?
	note "requests reaching the origin while the gate was stopped: $during (after $at_stop before it)"
	note "the run exited $rc; the sandbox says: $(cat "$d/run.out") of 40"
	[[ $rc == 0 ]] || problem "the run failed after SIGCONT: $(tail -n 2 "$d/run.err" | tr '\n' ' ')"
	report_record "$d/home/audit.db" $(($(origin_count /fast) - n0))
}

# The wall clock stepped an hour back, then an hour forth, for the proxy only (libfaketime
# with DONT_FAKE_MONOTONIC: CLOCK_REALTIME steps, CLOCK_MONOTONIC runs on, as when a host's
# clock is set). The machine's own clock is never touched: it is shared.
fault_clock_step() {
	local name=clock-step
	local lib
	lib=$(find /usr/lib -name 'libfaketime.so.1' -path '*faketime*' 2>/dev/null | grep -v MT | head -n 1 || true)
	if [[ -z $lib ]]; then
		"$src/scripts/install-deps" faketime >/dev/null 2>&1 || true
		lib=$(find /usr/lib -name 'libfaketime.so.1' -path '*faketime*' 2>/dev/null | grep -v MT | head -n 1 || true)
	fi
	if [[ -z $lib ]]; then
		echo "fault clock-step: skipped: libfaketime is not installed (Debian's faketime)"
		return
	fi
	mkdir -p "$tmp/$name"
	echo "+0" >"$tmp/$name/offset"
	PWRAP=(env LD_PRELOAD="$lib" FAKETIME_TIMESTAMP_FILE="$tmp/$name/offset" FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1)
	start_proxy "$name" --resolve origin.test:127.0.0.1 --idle-timeout 5s || { PWRAP=(); return; }
	PWRAP=()
	local n0
	n0=$(origin_count /fast)
	echo "fault clock-step: the proxy's wall clock stepped -1 h, then +1 h (libfaketime; CLOCK_MONOTONIC untouched)"
	note "now: $(codes 2 /fast)"
	echo "-3600" >"$tmp/$name/offset"
	note "an hour back: $(codes 2 /fast)"
	# The idle timeout (5 s) still fires: a tunnel held idle is closed within bounds.
	local t0=$SECONDS
	timeout 30 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"CONNECT origin.test:%s HTTP/1.1\r\nHost: origin.test\r\n\r\n" % sys.argv[2].encode())
s.settimeout(25)
data = b""
try:
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
except socket.timeout:
    sys.exit(1)
' "$pp" "$op" && note "an idle tunnel closed after $((SECONDS - t0))s (--idle-timeout 5s)" ||
		problem "an idle tunnel was not closed within 25 s with the clock stepped back"
	echo "+0" >"$tmp/$name/offset"
	note "stepped forth again: $(codes 2 /fast)"
	stop_proxy
	local ts
	ts=$(sqlite3 "file:$pdb?mode=ro" "SELECT group_concat(substr(ts, 12, 8), ' ') FROM events WHERE kind = 'decision'" 2>/dev/null || true)
	note "decision times in the log, in order: $ts (real time now $(date -u +%T))"
	report_record "$pdb" $(($(origin_count /fast) - n0))
}

echo "soak_faults: $(date -u +%FT%TZ), $(nproc) cores, load $(cat /proc/loadavg)"
for f in kill-gate-request kill-parent-request kill-both-request kill-gate-approval \
	kill-parent-approval kill-both-approval; do
	[[ $faults == *" $f "* ]] || continue
	IFS=- read -r _ target when <<<"$f"
	fault_kill "$f" "$target" "$when"
done
[[ $faults != *" lock "* ]] || fault_lock
[[ $faults != *" disk-full "* ]] || fault_disk_full
[[ $faults != *" dns-down "* ]] || fault_dns_down
[[ $faults != *" stop-cont "* ]] || fault_stop_cont
[[ $faults != *" clock-step "* ]] || fault_clock_step
echo "soak_faults: done $(date -u +%FT%TZ), load $(cat /proc/loadavg)"
[[ -n ${SOAK_ASSERT:-} ]] || exit 0
exit "$bad"
