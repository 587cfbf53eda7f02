# Splits one `tollgate run -- true` traced by tests/bench/bench_run.sh
# (strace -f --seccomp-bpf -ttt -T, a few system calls only) into phases and
# prints "phase milliseconds" lines; the script takes the median over runs.
#
# Markers: the sandbox's clone3 (CLONE_NEWUSER), the child's first mount, its
# pivot_root, the command's successful execve, the command's exit, the parent's
# wait4 of init, the removal of the run's temp dir, the process's exit. The
# cgroup move is the time spent in write()s of a bare pid (to cgroup.procs).
{
	t = $2 + 0
	if (NR == 1) {
		t0 = t
		tgpid = $1
	}
	last = t
	if (!clone && $3 ~ /^clone3\(/ && /CLONE_NEWUSER/)
		clone = t
	if (clone && !mount1 && $1 != tgpid && $3 ~ /^mount\(/)
		mount1 = t
	if (!pivot && $3 ~ /^pivot_root\(/)
		pivot = t
	if ($1 != tgpid && $3 ~ /^execve\(/ && / = 0 </)
		exec_ok = t
	if (exec_ok && !cmd_exit && $3 ~ /^exit_group\(/)
		cmd_exit = t
	if ($1 == tgpid && $3 ~ /^wait4\(/ && clone && !reaped)
		reaped = t
	if ($1 == tgpid && /unlinkat\(AT_FDCWD, "\/tmp\/tollgate-run[^"]*", AT_REMOVEDIR\)/)
		tmp_gone = t
	if ($1 == tgpid && $0 ~ /write\([0-9]+, "[0-9]+", [0-9]+\) = / && match($0, /<[0-9.]+>$/))
		cg_move += substr($0, RSTART + 1, RLENGTH - 2)
}
END {
	if (!clone || !mount1 || !exec_ok || !cmd_exit || !reaped) {
		print "incomplete 1"
		exit
	}
	if (!pivot)
		pivot = mount1
	if (!tmp_gone)
		tmp_gone = reaped
	ms = 1000
	printf "start_to_clone %.3f\n", (clone - t0) * ms
	printf "clone_to_child_mounts %.3f\n", (mount1 - clone) * ms
	printf "cgroup_move %.3f\n", cg_move * ms
	printf "mounts_to_pivot %.3f\n", (pivot - mount1) * ms
	printf "pivot_to_exec %.3f\n", (exec_ok - pivot) * ms
	printf "command %.3f\n", (cmd_exit - exec_ok) * ms
	printf "exit_to_reaped %.3f\n", (reaped - cmd_exit) * ms
	printf "teardown %.3f\n", (tmp_gone - reaped) * ms
	printf "audit_and_exit %.3f\n", (last - tmp_gone) * ms
	printf "total %.3f\n", (last - t0) * ms
}
