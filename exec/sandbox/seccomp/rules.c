/*
 * The rules of tollgate's two seccomp filters, in libseccomp's terms: the
 * sandbox's (what a sandbox has no business with fails with EPERM; docs/run.md
 * lists the calls and why) and the gate's (what the unprivileged gate never
 * needs: mounts, namespaces, other processes' memory, the kernel's inner
 * workings; docs/threat-model.md). Compiled at build time by gen.c into plain
 * BPF that the binary carries (exec/sandbox/seccomp_bpf.h), so that no start pays for
 * libseccomp's compiler (nor loads the library).
 */
#include "exec/sandbox/seccomp/rules.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "exec/sandbox/sanitized.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* Denied outright. */
static const char *const sandbox_denied[] = {
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

static const unsigned long sandbox_ns_flags[] = {
    CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
    CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

int
exec_seccomp_sandbox_rules(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int nr, rc;

	for (size_t i = 0; sandbox_denied[i] != NULL; i++) {
		nr = seccomp_syscall_resolve_name(sandbox_denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		rc = seccomp_rule_add(ctx, eperm, nr, 0);
		if (rc != 0) {
			snprintf(err, errlen, "seccomp rule %s: %s", sandbox_denied[i], strerror(-rc));
			return rc;
		}
	}
	for (size_t i = 0; i < sizeof(sandbox_ns_flags) / sizeof(sandbox_ns_flags[0]); i++) {
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(unshare), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, sandbox_ns_flags[i], sandbox_ns_flags[i]));
		if (rc == 0)
			rc =
			    seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1,
			                     SCMP_A0(SCMP_CMP_MASKED_EQ, sandbox_ns_flags[i], sandbox_ns_flags[i]));
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
exec_seccomp_gate_rules(scmp_filter_ctx ctx)
{
	static const char *const denied[] = {
	    "mount",
	    "umount2",
	    "pivot_root",
	    "chroot",
	    "setns",
	    "unshare",
	    "ptrace",
	    "process_vm_readv",
	    "process_vm_writev",
	    "bpf",
	    "perf_event_open",
	    "init_module",
	    "finit_module",
	    "delete_module",
	    "kexec_load",
	    "kexec_file_load",
	    "keyctl",
	    "add_key",
	    "request_key",
	    "open_by_handle_at",
	    "fsopen",
	    "fsmount",
	    "fsconfig",
	    "move_mount",
	    "open_tree",
	    "mount_setattr",
	    "userfaultfd",
	    "reboot",
	    "swapon",
	    "swapoff",
	    "acct",
	    "quotactl",
	};
	static const unsigned long ns_flags[] = {
	    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
	    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
	};
	static const int raw_families[] = {AF_INET, AF_INET6};
	uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int rc = 0, nr;

	for (size_t i = 0; rc == 0 && i < sizeof(denied) / sizeof(denied[0]); i++) {
		nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		if (EXEC_SANITIZED && strcmp(denied[i], "ptrace") == 0)
			continue;
		rc = seccomp_rule_add(ctx, eperm, nr, 0);
	}
	for (size_t i = 0; rc == 0 && i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	/* clone3's flags are behind a pointer: ENOSYS sends glibc to clone. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
		                      SCMP_A0(SCMP_CMP_EQ, AF_PACKET, 0));
	for (size_t i = 0; rc == 0 && i < sizeof(raw_families) / sizeof(raw_families[0]); i++)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 2,
		                      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)raw_families[i], 0),
		                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
	return rc;
}
