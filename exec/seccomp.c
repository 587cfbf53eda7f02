/*
 * The sandbox's system call filter (libseccomp): what a sandbox has no
 * business with fails with EPERM; everything else is allowed. Built in the
 * parent (libseccomp allocates) and loaded in the child as plain BPF.
 * docs/run.md lists the calls and why.
 */
#include "exec/exec.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* Denied outright. */
static const char *const denied[] = {
    /* filesystems and mounts */
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    /* other processes' memory and the kernel's inner workings */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "lookup_dcookie",
    "syslog",
    "fanotify_init",
    /* keys */
    "keyctl",
    "add_key",
    "request_key",
    /* kernel modules, kexec, the machine */
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "acct",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "vhangup",
    "uselib",
    "nfsservctl",
    "_sysctl",
    "ustat",
    "sysfs",
    /* namespaces: no joining, no new ones (unshare/clone flags below) */
    "setns",
    /* io_uring bypasses the filter for the calls it performs */
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    NULL,
};

static const unsigned long ns_flags[] = {
    CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
    CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

static int
add_rules(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int nr, rc;

	for (size_t i = 0; denied[i] != NULL; i++) {
		nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		rc = seccomp_rule_add(ctx, eperm, nr, 0);
		if (rc != 0) {
			snprintf(err, errlen, "seccomp rule %s: %s", denied[i], strerror(-rc));
			return rc;
		}
	}
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(unshare), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
		if (rc == 0)
			rc =
			    seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1,
			                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
		if (rc != 0) {
			snprintf(err, errlen, "seccomp rule unshare/clone: %s", strerror(-rc));
			return rc;
		}
	}
	/* clone3 passes its flags in memory a filter cannot read: ENOSYS makes
	 * the C library fall back to clone, whose flags are checked above. */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/*
	 * Sockets: unix, IPv4, IPv6 and netlink only; no raw IP sockets; of
	 * netlink only NETLINK_ROUTE (getifaddrs; changes need CAP_NET_ADMIN).
	 */
	for (int fam = 0; rc == 0 && fam < 17; fam++) {
		if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6 || fam == AF_NETLINK)
			continue;
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, fam, 0));
	}
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
		                      SCMP_A0(SCMP_CMP_GE, AF_NETLINK + 1, 0));
	if (rc == 0)
		rc =
		    seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_INET, 0),
		                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 2,
		                      SCMP_A0(SCMP_CMP_EQ, AF_INET6, 0),
		                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 2,
		                      SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0), SCMP_A2(SCMP_CMP_NE, 0, 0));
	/* Typing into the user's terminal from the sandbox. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
		                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
		                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	if (rc != 0)
		snprintf(err, errlen, "seccomp argument rules: %s", strerror(-rc));
	return rc;
}

int
exec_seccomp_build(void **out, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = NULL;
	struct sock_fprog *prog = NULL;
	off_t size;
	ssize_t n;
	int fd = -1, rc;

	*out = NULL;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL) {
		snprintf(err, errlen, "seccomp_init failed");
		return -ENOMEM;
	}
	rc = add_rules(ctx, err, errlen);
	if (rc != 0)
		goto out;
	fd = memfd_create("tollgate-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "memfd_create: %s", strerror(errno));
		goto out;
	}
	rc = seccomp_export_bpf(ctx, fd);
	if (rc != 0) {
		snprintf(err, errlen, "seccomp_export_bpf: %s", strerror(-rc));
		goto out;
	}
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
	    size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
		rc = -EINVAL;
		snprintf(err, errlen, "seccomp filter has a bad size");
		goto out;
	}
	prog = calloc(1, sizeof(*prog) + (size_t)size);
	if (prog == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	prog->filter = (struct sock_filter *)(prog + 1);
	prog->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
	n = pread(fd, prog->filter, (size_t)size, 0);
	if (n != size) {
		rc = -EIO;
		snprintf(err, errlen, "reading the seccomp filter back failed");
		goto out;
	}
	*out = prog;
	prog = NULL;
	rc = 0;
out:
	free(prog);
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return rc;
}

void
exec_seccomp_free(void *prog)
{
	free(prog);
}

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
