/*
 * rlimits for the command: the per-process back-stop behind the cgroup.
 * Planned in the parent from the flags, applied in the child before the
 * command's privileges go (raising RLIMIT_NOFILE may need them).
 */
#include "exec/sandbox/exec.h"
#include "exec/sandbox/userns.h"
#include "exec/sandbox/workdir.h"

#include <errno.h>
#include <sys/resource.h>

int
exec_limits_plan(const struct exec_limits *l, bool have_memcg, struct exec_plan *p)
{
	if (l->ram_mb > 0) {
		rlim_t bytes = (rlim_t)l->ram_mb * 1024 * 1024;

		/*
		 * RLIMIT_DATA counts what a process actually made writable, so
		 * runtimes that reserve large address ranges (V8, Go, the JVM)
		 * still start. Without a memory cgroup, RLIMIT_AS is the only
		 * cap left and is set as well.
		 */
		p->rlim_data.rlim_cur = p->rlim_data.rlim_max = bytes;
		p->set_data = true;
		/* tmpfs pages are memory too: without a memory cgroup to charge
		 * them to, only their size bounds them. */
		p->tmpfs_mb = l->ram_mb;
		/* Rootless, though, it is left out: it would stop those runtimes
		 * (V8 cannot reserve its code range), and RLIMIT_DATA still
		 * counts every private writable mapping (docs/run.md). */
		if (!have_memcg && !exec_rootless()) {
			p->rlim_as.rlim_cur = p->rlim_as.rlim_max = bytes;
			p->set_as = true;
		}
	}
	if (l->pids > 0) {
		/* The sandbox's init runs as the same user: one more. */
		p->rlim_nproc.rlim_cur = p->rlim_nproc.rlim_max = (rlim_t)l->pids + 1;
		p->set_nproc = true;
	}
	if (l->cpu_seconds > 0) {
		/* SIGXCPU at the limit, SIGKILL a second later if it is caught. */
		p->rlim_cpu.rlim_cur = (rlim_t)l->cpu_seconds;
		p->rlim_cpu.rlim_max = (rlim_t)l->cpu_seconds + 1;
		p->set_cpu = true;
	}
	if (l->nofile > 0) {
		p->rlim_nofile.rlim_cur = p->rlim_nofile.rlim_max = (rlim_t)l->nofile;
		p->set_nofile = true;
	}
	/* No one file may outgrow --disk (EFBIG, SIGXFSZ): what the init's
	 * watchdog, which polls, would see too late. One MiB more, so that a
	 * fresh /work's tmpfs still says ENOSPC first. */
	p->disk_mb = exec_disk_mb(l->disk_mb);
	p->rlim_fsize.rlim_cur = p->rlim_fsize.rlim_max = ((rlim_t)p->disk_mb + 1) << 20;
	p->set_fsize = true;
	return 0;
}

int
exec_limits_apply(const struct exec_plan *p, const char **step)
{
	static const struct rlimit no_core = {0, 0};

	if (setrlimit(RLIMIT_CORE, &no_core) != 0) {
		*step = "setrlimit RLIMIT_CORE";
		return -errno;
	}
	if (p->set_data && setrlimit(RLIMIT_DATA, &p->rlim_data) != 0) {
		*step = "setrlimit RLIMIT_DATA";
		return -errno;
	}
	if (p->set_as && setrlimit(RLIMIT_AS, &p->rlim_as) != 0) {
		*step = "setrlimit RLIMIT_AS";
		return -errno;
	}
	if (p->set_nproc && setrlimit(RLIMIT_NPROC, &p->rlim_nproc) != 0) {
		*step = "setrlimit RLIMIT_NPROC";
		return -errno;
	}
	if (p->set_cpu && setrlimit(RLIMIT_CPU, &p->rlim_cpu) != 0) {
		*step = "setrlimit RLIMIT_CPU";
		return -errno;
	}
	if (p->set_fsize && setrlimit(RLIMIT_FSIZE, &p->rlim_fsize) != 0) {
		*step = "setrlimit RLIMIT_FSIZE";
		return -errno;
	}
	return 0;
}

/*
 * Raising a hard limit needs CAP_SYS_RESOURCE in the initial user
 * namespace, which only the parent has: it raises the child's (prlimit)
 * before letting it go, and the child lowers it to the exact value last.
 */
int
exec_limits_raise_nofile(const struct exec_plan *p, pid_t pid)
{
	struct rlimit cur;

	if (!p->set_nofile)
		return 0;
	if (prlimit(pid, RLIMIT_NOFILE, NULL, &cur) != 0)
		return -errno;
	if (cur.rlim_max == RLIM_INFINITY || cur.rlim_max >= p->rlim_nofile.rlim_max)
		return 0;
	cur.rlim_max = p->rlim_nofile.rlim_max;
	if (prlimit(pid, RLIMIT_NOFILE, &cur, NULL) != 0)
		return -errno;
	return 0;
}

int
exec_limits_apply_nofile(const struct exec_plan *p, const char **step)
{
	if (p->set_nofile && setrlimit(RLIMIT_NOFILE, &p->rlim_nofile) != 0) {
		*step = "setrlimit RLIMIT_NOFILE";
		return -errno;
	}
	return 0;
}
