#!/usr/bin/env bash
# 20 runs in a row leave nothing behind: no temporary directory, cgroup,
# mount, network interface or fd; and each sandbox starts with only its
# stdin, stdout and stderr.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"

runs=20
tmpdir=${TMPDIR:-/tmp}
mine() { # this test's own tollgate processes' leftovers: names carry their pids
	local n=0 p
	for p in "${pids[@]}"; do
		n=$((n + $(ls -d "$tmpdir"/tollgate-run."$p".* 2>/dev/null | wc -l)))
		n=$((n + $(find /sys/fs/cgroup -maxdepth 4 -name "tollgate-run.$p.*" 2>/dev/null | wc -l)))
	done
	echo "$n"
}
# Counted by name, so that other tests running at once do not count: a
# sandbox's mounts would name its tollgate-run.* directory, and a gate's veth
# would appear on the host as tg*.
my_mounts() { # this test's own runs' mounts (the work tmpfs), not another test's
	local n=0 p
	for p in "${pids[@]}"; do
		n=$((n + $(grep -c "tollgate-run\.$p\." /proc/self/mountinfo || true)))
	done
	echo "$n"
}
gate_links() { ls /sys/class/net | grep -c '^tg' || true; }
links_before=$(gate_links)
pids=()
fdsets=""
for ((i = 0; i < runs; i++)); do
	# Network on: the hub, veth and listeners are made and must go too.
	# No timeout(1) wrapper: $! must be tollgate's own pid (ctest bounds the test).
	out=$("$TOLLGATE" run -- sh -c 'ls /proc/self/fd | tr "\n" ,' &
		echo "pid:$!" >"$TEST_TMP/pid"; wait)
	pids+=("$(sed 's/^pid://' "$TEST_TMP/pid")")
	fdsets+="$out;"
done
expect_eq "every sandbox saw only fds 0-2 (and ls's own)" "$(tr ';' '\n' <<<"$fdsets" | sort -u | grep -v '^$')" "0,1,2,3,"
expect_eq "no temporary directory or cgroup left by $runs runs" "$(mine)" 0
expect_eq "no mount left on the host" "$(my_mounts)" 0
expect_eq "no gate interface on the host" "$(gate_links)" "$links_before"

# The same with --workdir: the directory stays, nothing else.
work=$TEST_TMP/work
mkdir -p "$work"
chown "$SANDBOX_OWNER" "$work"
pids=()
for ((i = 0; i < 5; i++)); do
	"$TOLLGATE" run --no-network --workdir "$work" -- sh -c 'echo x >>/work/count' &
	pids+=("$!")
	wait "${pids[-1]}"
done
expect_eq "--workdir: the command's writes stay" "$(wc -l <"$work/count")" 5
expect_eq "--workdir: nothing else left" "$(mine)" 0

# Several at once: each its own sandbox (its command is PID 2, after init;
# each tollgate has a hub of its own, so gate addresses may coincide), and
# nothing left after.
pids=()
for ((i = 0; i < 4; i++)); do
	"$TOLLGATE" run -- sh -c 'echo "$(hostname) $$ $HTTP_PROXY"; sleep 1' >"$TEST_TMP/par.$i" 2>&1 &
	pids+=("$!")
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent run failed"; done
par=$(cat "$TEST_TMP"/par.*)
expect_eq "4 concurrent runs: 4 answers" "$(grep -c '^sandbox 2 http://10\.' <<<"$par")" 4
expect_eq "4 concurrent runs: nothing left" "$(mine)" 0
expect_eq "4 concurrent runs: no gate interface on the host" "$(gate_links)" "$links_before"

# tollgate's own fds: one run that lists them from the outside while the command runs.
"$TOLLGATE" run -- sleep 987631 &
tpid=$!
defer "kill -9 $tpid 2>/dev/null"
wait_for 10 pgrep -f '^sleep 987631$' || fail "sleep did not start"
n1=$(ls /proc/"$tpid"/fd | wc -l)
kill -9 "$tpid"; wait "$tpid" 2>/dev/null || true
checks=$((checks + 1))
if ((n1 > 3 && n1 < 64)); then pass "tollgate holds $n1 fds while a sandbox runs"; else fail "tollgate holds $n1 fds"; fi

finish
