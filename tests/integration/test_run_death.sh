#!/usr/bin/env bash
# Nothing of a sandbox outlives its run: processes that detach (setsid,
# double fork) die with the command, on --timeout, and when tollgate itself
# is killed with SIGKILL; the next tollgate removes what the dead one left.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"
[[ -e /proc/self/ns/pid ]] || skip "PID namespaces"

# A private TMPDIR: any tollgate that starts removes the temporary directories
# of dead runs, so with other tests' runs in parallel the killed run's directory
# could vanish before this test looks for it.
# (Not under TEST_TMP: the sandbox's unprivileged user must be able to reach it.)
TMPDIR=$(mktemp -d /tmp/tollgate-death-tmp.XXXXXX)
chmod 0755 "$TMPDIR"
export TMPDIR
defer "rm -rf '$TMPDIR'"

# Every marker is a sleep with a number no other process uses.
alive() { pgrep -f "^sleep $1\$" >/dev/null; }
gone() { ! alive "$1"; }
tg() { timeout 60 "$TOLLGATE" run --no-network "$@"; }

# A detached process does not outlive the command.
set +e
tg -- sh -c 'setsid sleep 987621 >/dev/null 2>&1 & exit 0'; rc=$?
set -e
expect_eq "setsid child: the run ends with the command" "$rc" 0
checks=$((checks + 1))
if gone 987621; then pass "setsid child does not outlive the run"; else fail "setsid sleep 987621 still runs"; fi

tg -- sh -c '(sh -c "sleep 987622 >/dev/null 2>&1 &" &); exit 0' || true
checks=$((checks + 1))
if gone 987622; then pass "double-forked child does not outlive the run"; else fail "double-forked sleep 987622 still runs"; fi

tg -- python3 -c '
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "987623"])
    os._exit(0)
' || true
checks=$((checks + 1))
if gone 987623; then pass "daemon()-style child does not outlive the run"; else fail "daemonized sleep 987623 still runs"; fi

# The timeout kills every process, detached or not.
set +e
tg --timeout 1 -- sh -c 'setsid sleep 987624 >/dev/null 2>&1 & sleep 987625'; rc=$?
set -e
expect_eq "timeout: 124" "$rc" 124
checks=$((checks + 1))
if gone 987624 && gone 987625; then pass "timeout: nothing left"; else fail "timeout: sleeps left behind"; fi

# kill -9 of tollgate mid-run: the kernel kills the sandbox (PDEATHSIG, PID
# namespace); the temporary directory and cgroup are left for the next run.
"$TOLLGATE" run --no-network -- sh -c 'setsid sleep 987626 >/dev/null 2>&1 & exec sleep 987627' &
tpid=$!
defer "kill -9 $tpid 2>/dev/null"
wait_for 10 alive 987626 && wait_for 10 alive 987627 || fail "the sandbox did not start"
left=$(ls -d "${TMPDIR:-/tmp}"/tollgate-run."$tpid".* 2>/dev/null | head -n1 || true)
cg=$(ls -d /sys/fs/cgroup/*/tollgate-run."$tpid".* /sys/fs/cgroup/*/*/tollgate-run."$tpid".* \
	/sys/fs/cgroup/memory/"$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)"/tollgate-run."$tpid".* \
	2>/dev/null | head -n1 || true)
kill -9 "$tpid"
wait "$tpid" 2>/dev/null || true
checks=$((checks + 1))
if wait_for 5 gone 987626 && wait_for 5 gone 987627; then
	pass "kill -9 of tollgate: every sandbox process died"
else
	fail "kill -9 of tollgate: sandbox processes survived"
	pkill -9 -f '^sleep 98762[67]$' || true
fi
checks=$((checks + 1))
if [[ -n $left && -d $left ]]; then pass "the dead run left its temporary directory"; else fail "no temporary directory found for pid $tpid"; fi
tg -- true
checks=$((checks + 1))
if [[ -n $left && ! -e $left ]]; then pass "the next run removed the stale temporary directory"; else fail "stale $left still there"; fi
if [[ -n $cg ]]; then
	checks=$((checks + 1))
	if [[ ! -e $cg ]]; then pass "the next run removed the stale cgroup"; else fail "stale cgroup $cg still there"; fi
else
	echo "note: no cgroup directory was made for the killed run; the cgroup check did not run"
fi

# SIGTERM to tollgate is forwarded to the command, whose death is the run's.
"$TOLLGATE" run --no-network -- sleep 987628 &
tpid=$!
defer "kill -9 $tpid 2>/dev/null"
wait_for 10 alive 987628 || fail "sleep 987628 did not start"
kill -TERM "$tpid"
set +e
wait "$tpid"; rc=$?
set -e
expect_eq "SIGTERM: the command dies of it, 128+15" "$rc" 143
checks=$((checks + 1))
if gone 987628; then pass "SIGTERM: nothing left"; else fail "sleep 987628 still runs"; fi

finish
