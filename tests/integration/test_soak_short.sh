#!/usr/bin/env bash
# The soak in brief (tests/soak, docs/reliability.md): the proxy under the kept-alive
# and churn loads for a few minutes and then the idle tunnels the fd limit allows (up
# to 10 000) held under load, with open fds, RSS and the pipe pool bounded, every tunnel
# recorded and the chain intact; then kill -9 of the gate, of the parent and of both,
# mid-request and mid-approval, leaving no process, namespace, cgroup, temporary
# directory or mount behind and a chain that verifies; the audit database locked by
# another process, the disk under TOLLGATE_HOME full, the upstream DNS server down and
# back, and SIGSTOP/SIGCONT of the gate. Asserts behaviour, never speed: the figures are printed for the reader.
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups, the fd limit)"
build=${TOLLGATE_BUILD:-$(dirname "$TOLLGATE")}
[[ -x $build/bench_proxy_client ]] || skip "bench_proxy_client is not built in $build"

checks=$((checks + 1))
if SOAK_MINUTES=${SOAK_MINUTES:-3} WRK_SECONDS=15 CHURN_SECONDS=15 IDLE_LOAD_SECONDS=10 \
	SOAK_ASSERT=1 timeout 900 bash "$TOLLGATE_SRC/tests/soak/soak_proxy.sh" "$build"; then
	pass "proxy soak: fds, RSS and the pipe pool bounded, every tunnel recorded, chain intact"
else
	fail "proxy soak (its FAIL lines above)"
fi

checks=$((checks + 1))
out=$(FAULTS="kill-gate-request kill-parent-request kill-both-request kill-gate-approval
	kill-parent-approval kill-both-approval lock disk-full dns-down stop-cont" LOCK_SECONDS=10 \
	SOAK_ASSERT=1 timeout 900 bash "$TOLLGATE_SRC/tests/soak/soak_faults.sh" "$build") && rc=0 || rc=$?
echo "$out"
if ((rc == 0)); then
	pass "faults: nothing left behind, every chain verifies"
else
	fail "faults (the PROBLEM lines above)"
fi
# Each fault printed its report: a missing one is a fault that did not run.
expect_eq "every fault reported" "$(grep -c '^fault ' <<<"$out")" 10
expect_eq "no run left a process, namespace, cgroup or directory" \
	"$(grep -c 'every process of the run is gone' <<<"$out"),$(grep -c 'held by nothing: freed' <<<"$out"),$(grep -c 'after the next run: no cgroup, no temporary directory, no mount left' <<<"$out")" \
	"6,6,6"
expect_match "the upstream DNS server back: requests pass again" "$(grep -A3 '^fault dns-down' <<<"$out")" "back: 200 x3"
expect_match "SIGCONT: the run ends well, every request answered" "$(grep -A3 '^fault stop-cont' <<<"$out")" "exited 0; the sandbox says: ok=40 of 40"
finish
