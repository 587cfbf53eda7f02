/*
 * Why the machine refused what a sandbox needs, and what to do about it:
 * user namespaces, a fresh /proc, a cgroup for the limits, Landlock. Each
 * reason is read from /proc and /sys when the failure happens, turned into
 * "<why>; <fix>" by a pure function of those facts (table-tested), and
 * printed after what failed (docs/run.md, "When the machine refuses").
 */
#ifndef TOLLGATE_EXEC_DIAGNOSE_H
#define TOLLGATE_EXEC_DIAGNOSE_H

#include <stdbool.h>
#include <stddef.h>

/* What decides whether a user namespace may be made; -1: unknown or absent. */
struct exec_userns_facts {
	int err;                /* the errno of the refusal (positive) */
	bool privileged;        /* CAP_SYS_ADMIN in the initial user namespace */
	bool seccomp;           /* a seccomp filter is on this process (a container's) */
	int chrooted;           /* / is not its mount namespace's root: 1, 0, -1 */
	long max_user_ns;       /* user.max_user_namespaces */
	int unprivileged_clone; /* kernel.unprivileged_userns_clone (Debian's) */
	int apparmor_restrict;  /* kernel.apparmor_restrict_unprivileged_userns (Ubuntu's) */
};

/* The facts of this process, for a refusal with errno err. */
void exec_userns_facts_read(struct exec_userns_facts *f, int err);
/*
 * "<why>; <fix>" for a user namespace refused with f->err at step (the
 * system call or file that failed). true when a setting or the machine
 * explains it; false with the kernel's own error (and "run tollgate as
 * root" for a user).
 */
bool exec_userns_why(const struct exec_userns_facts *f, const char *step, char *buf, size_t len);

/*
 * A sandbox's set-up step that failed in the child (exec_result's
 * failed_step and failed_errno) as one line's text after "tollgate: CMD: ":
 * "sandbox set-up failed at 'STEP': ERROR", and "; <why>; <fix>" where the
 * machine explains it (a /proc with paths mounted over it refuses a fresh
 * one to a user namespace).
 */
void exec_setup_failure_text(const char *step, int err, char *buf, size_t len);
/*
 * The same as a pure function: covered is a mount point under /proc
 * (from /proc/self/mountinfo), or NULL when there is none.
 */
void exec_setup_failure_why(const char *step, int err, const char *covered, char *buf, size_t len);

/* How the cgroup hierarchies look to this process, for the limits. */
struct exec_cgroup_facts {
	bool rootless;
	unsigned int uid;         /* the user's uid on the host (rootless) */
	bool v2_mounted;          /* a cgroup2 file system is mounted */
	bool v2_controllers;      /* its root offers memory and pids (not a hybrid host's) */
	bool v1_memory;           /* a v1 memory hierarchy is mounted */
	bool memory_disabled;     /* /proc/cgroups: memory's "enabled" is 0 */
	bool read_only;           /* the cgroup file system is mounted read-only */
	bool user_service;        /* user@UID.service exists (systemd's user manager) */
	bool user_service_mine;   /* ... and the user may write to it */
	bool user_delegated;      /* ... and offers memory and pids to its children */
	bool inside_user_service; /* this process runs below user@UID.service */
	char own_cgroup[256];     /* this process's v2 cgroup path ("" unknown) */
};

/* Read in exec/sandbox/cgroup.c, which knows the layout. */
void exec_cgroup_facts_read(struct exec_cgroup_facts *f);
/*
 * "<why>; <fix>" when sandboxes get no memory cgroup here, or NULL when
 * nothing in the facts explains it. buf holds the text.
 */
const char *exec_cgroup_why(const struct exec_cgroup_facts *f, char *buf, size_t len);

/*
 * The one line for a sandbox that asked for limits and got no memory
 * cgroup, or NULL when there is nothing to say (a root start with a
 * cgroup, or nothing explains it). Rootless, the limits are then rlimits,
 * and the line says how they are weaker. exec/sandbox/sandbox.c prints it once.
 */
const char *exec_cgroup_limits_note(char *buf, size_t len);

/*
 * Landlock: err is the errno of landlock_create_ruleset's version query
 * (ENOSYS: not built in; EOPNOTSUPP: built in, off at boot), lsm the
 * kernel's active list (/sys/kernel/security/lsm, or NULL). "<why>; <fix>".
 */
void exec_landlock_why(int err, const char *lsm, char *buf, size_t len);
/*
 * Once a process, when this kernel enforces no Landlock: one line on
 * stderr saying why, the fix, and what still confines the sandbox.
 */
void exec_landlock_note(void);

#endif
