/*
 * The sandbox's system call filter: what a sandbox has no business with fails
 * with EPERM; everything else is allowed. Its rules are exec/sandbox/seccomp/rules.c,
 * compiled to BPF at build time (exec/sandbox/seccomp_bpf.h); the child loads that.
 * docs/run.md lists the calls and why.
 */
#include "exec/sandbox/exec.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

int
exec_seccomp_apply(const struct exec_plan *p, const char **step)
{
	if (p->seccomp_prog == NULL)
		return 0;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p->seccomp_prog, 0, 0) != 0) {
		*step = "seccomp";
		return -errno;
	}
	return 0;
}
