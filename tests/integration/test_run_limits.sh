#!/usr/bin/env bash
# Resource limits of `tollgate run`: --pids stops a fork bomb, --ram a memory
# hog (per process and for the whole sandbox, with the cgroup's OOM kills in
# --json-status and a resource.exceeded audit row), --cpu a CPU hog (per
# process and summed over processes), --nofile the open files.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups)"
[[ -x /usr/bin/python3 ]] || skip "python3 at /usr/bin/python3 (the hogs run inside the sandbox)"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed (the audit rows are read with it)"

have_cgroup() { # have_cgroup CONTROLLER: v1 hierarchy or v2 controller
	grep -qE "^[0-9]+:([^:]*,)?$1(,[^:]*)?:" /proc/self/cgroup ||
		grep -qw "$1" /sys/fs/cgroup/cgroup.controllers 2>/dev/null
}

tg() { timeout 60 "$TOLLGATE" run --no-network "$@"; }

# --pids: forks fail with EAGAIN once N processes exist.
set +e
out=$(tg --pids 20 -- python3 -c '
import os, errno, time
n, pids = 0, []
try:
    for i in range(500):
        p = os.fork()
        if p == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(p)
        n += 1
    print("forks", n, "none-failed")
except OSError as e:
    print("forks", n, errno.errorcode[e.errno])
for p in pids:
    os.kill(p, 9)
')
set -e
read -r _ n why <<<"$out"
expect_eq "--pids: fork fails with EAGAIN" "$why" EAGAIN
checks=$((checks + 1))
if ((n >= 10 && n <= 20)); then pass "--pids 20: $n forks before the limit"; else fail "--pids 20: $n forks"; fi

# A real fork bomb is contained, and nothing of it is left.
set +e
tg --pids 64 --timeout 3 -- sh -c 'b() { b | b & }; b; sleep 30 # bomb-987612' >/dev/null 2>&1
rc=$?
set -e
# The timeout ends it (124), or the bomb's own shell gives up when it cannot fork.
checks=$((checks + 1))
if ((rc == 124 || (rc > 0 && rc < 124))); then pass "fork bomb: contained (status $rc)"; else fail "fork bomb: status $rc"; fi
expect_eq "fork bomb: no process left" "$(pgrep -c -f bomb-987612 || true)" 0

# --ram: one process cannot allocate past it (RLIMIT_DATA).
set +e
tg --ram 64 -- python3 -c 'b = bytearray(256 * 1024 * 1024)' 2>/dev/null
rc=$?
set -e
expect_eq "--ram: a 256 MB allocation fails (MemoryError)" "$rc" 1

# --ram: processes that stay under it each are stopped together (cgroup).
if have_cgroup memory; then
	set +e
	out=$(tg --ram 64 --audit "$TEST_TMP/mem.db" --json-status "$TEST_TMP/mem.json" -- python3 -c '
import os, time
kids = []
for i in range(4):
    p = os.fork()
    if p == 0:
        b = bytearray(40 * 1024 * 1024)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(1)
        os._exit(0)
    kids.append(p)
st = [os.waitpid(p, 0)[1] for p in kids]
print(sum(1 for s in st if os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9))
')
	set -e
	checks=$((checks + 1))
	if [[ $out =~ ^[1-4]$ ]]; then pass "--ram: the cgroup OOM-killed $out of 4 children"; else fail "--ram: cgroup killed '$out' children"; fi
	peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_memory_bytes"])' "$TEST_TMP/mem.json")
	checks=$((checks + 1))
	if ((peak > 0 && peak <= 64 * 1024 * 1024)); then pass "--ram: peak memory $peak within 64 MB"; else fail "--ram: peak memory $peak"; fi
	# The cgroup's own oom_kill count: as many kills as the children saw,
	# though the command itself exited 0 (no SIGKILL for a guess to go by).
	expect_eq "--ram: json-status oom_killed and oom_kills" \
		"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["exit_status"], d["oom_killed"], d["oom_kills"])' "$TEST_TMP/mem.json")" \
		"0 True $out"
	expect_eq "--ram: resource.exceeded audited with the kill count" \
		"$(sqlite3 "$TEST_TMP/mem.db" "select count(*), json_extract(detail, '\$.limit'), json_extract(detail, '\$.value'), json_extract(detail, '\$.oom_kills') from events where kind = 'resource.exceeded'")" \
		"1|memory|64|$out"

	# One memory hog in a shell: the shell reports 137, the row names memory.
	set +e
	tg --ram 64 --audit "$TEST_TMP/mem2.db" --json-status "$TEST_TMP/mem2.json" -- \
		sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=128 2>/dev/null' 2>/dev/null
	rc=$?
	set -e
	expect_eq "--ram: a writer to /tmp is OOM-killed (137)" "$rc" 137
	expect_eq "--ram: json-status says oom_killed" \
		"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["oom_killed"], d["oom_kills"] >= 1)' "$TEST_TMP/mem2.json")" \
		"True True"
	expect_eq "--ram: one resource.exceeded row, limit memory, for this sandbox" \
		"$(sqlite3 "$TEST_TMP/mem2.db" "select count(*), json_extract(detail, '\$.limit'), json_extract(detail, '\$.oom_kills') >= 1 from events where kind = 'resource.exceeded' and sandbox = (select sandbox from events where kind = 'sandbox.start')")" \
		"1|memory|1"

	# Within the limit: no kill, no row.
	tg --ram 64 --audit "$TEST_TMP/mem3.db" --json-status "$TEST_TMP/mem3.json" -- true
	expect_eq "--ram, within it: oom_killed false, 0 kills" \
		"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["oom_killed"], d["oom_kills"])' "$TEST_TMP/mem3.json")" \
		"False 0"
	expect_eq "--ram, within it: no resource.exceeded row" \
		"$(sqlite3 "$TEST_TMP/mem3.db" "select count(*) from events where kind = 'resource.exceeded'")" 0
else
	echo "note: no memory cgroup controller; the cgroup memory check did not run"
fi

# --ram: /tmp is memory too.
set +e
tg --ram 64 -- sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=128 2>/dev/null' 2>/dev/null
rc=$?
set -e
checks=$((checks + 1))
if ((rc != 0)); then pass "--ram: 128 MB in /tmp fails (status $rc)"; else fail "--ram 64: 128 MB fit in /tmp"; fi

# --cpu: a single hog gets SIGXCPU (RLIMIT_CPU).
set +e
tg --cpu 1 -- python3 -c 'while True: pass'
rc=$?
set -e
expect_eq "--cpu: a CPU hog is killed by SIGXCPU" "$rc" $((128 + 24))

# --cpu: four hogs, each under the per-process limit, are stopped by the total.
if have_cgroup cpuacct || [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
	set +e
	tg --cpu 1 --json-status "$TEST_TMP/cpu.json" -- sh -c \
		'for i in 1 2 3 4; do python3 -c "while True: pass" & done; wait'
	rc=$?
	set -e
	expect_eq "--cpu: forked hogs are killed together" "$rc" 137
	out=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["cpu_exceeded"], d["cpu_seconds"] >= 1)' "$TEST_TMP/cpu.json")
	expect_eq "--cpu: json-status says cpu_exceeded" "$out" "True True"
else
	echo "note: no CPU accounting cgroup; the total CPU check did not run"
fi

# --nofile.
set +e
out=$(tg --nofile 16 -- python3 -c '
fs = []
try:
    while len(fs) < 1000:
        fs.append(open("/dev/null"))
except OSError as e:
    print(len(fs), e.errno)
')
set -e
expect_eq "--nofile 16: the 14th open fails with EMFILE" "$out" "13 24"
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard > 64)); then
	out=$(tg --nofile "$hard" -- sh -c 'ulimit -n')
	expect_eq "--nofile up to the hard limit ($hard)" "$out" "$hard"
fi

finish
