/*
 * Host access for `tollgate serve --host-access` (docs/mcp.md): host paths
 * resolved one component at a time, following only the symlinks of root and
 * of the person serve runs for, and host programs run and host files opened
 * with that person's credentials. The privileged parent does it for a gate
 * (exec/priv/priv.h: HOST_EXEC, HOST_OPEN); a single process does it itself.
 */
#ifndef TOLLGATE_EXEC_HOST_H
#define TOLLGATE_EXEC_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec/common/priv_checks.h" /* exec_host_path_ok */

#define EXEC_HOST_LINKS_MAX 40 /* symlinks followed in one walk, as the kernel's bound */
#define EXEC_HOST_GROUPS_MAX 64
#define EXEC_HOST_ARGV_MAX 256
#define EXEC_HOST_TIMEOUT_MAX 600 /* seconds */

/*
 * Whose host this is: the person who started serve (getuid(), or SUDO_UID
 * when that is root; docs/mcp.md), noted before the split or a user
 * namespace changes what getuid() says. change_ids: whether work done for
 * them must switch to their ids (a root process serving someone else).
 */
struct exec_host_person {
	uid_t uid;
	gid_t gid;
	gid_t groups[EXEC_HOST_GROUPS_MAX];
	size_t ngroups;
	char name[64];
	char home[512];
	bool change_ids;
	bool known;
};

/* Notes the person (before any thread exists, while getuid() is still theirs). */
void exec_host_person_note(void);
/* The person noted (known false before exec_host_person_note). */
const struct exec_host_person *exec_host_person(void);
/* Sets the person (the parent's copy from the gate's ceiling; tests). */
void exec_host_person_set(const struct exec_host_person *p);

/* What a walk may do with the last component. */
enum exec_host_open {
	EXEC_HOST_RESOLVE, /* no fd: the canonical path only; the last name may not exist */
	EXEC_HOST_READ,    /* a regular file, read-only */
	EXEC_HOST_WRITE,   /* a regular file, created (0644) or cut to nothing */
	EXEC_HOST_LIST,    /* a directory, read-only */
	EXEC_HOST_EXEC,    /* a regular file to execute: O_PATH */
	EXEC_HOST_DIR,     /* a directory to work in: O_PATH */
};

/*
 * Walks path (absolute, no "..", see policy_host_path_normalise) from "/"
 * as the calling process's credentials allow, one component at a time with
 * O_PATH|O_NOFOLLOW. A symlink is followed only when owner_ok (root or
 * person_uid) owns it and !strict; its target's ".." steps back one
 * component of the walk. Another user's symlink is -EPERM with err naming
 * it and its owner; with strict, any symlink is -ELOOP (the path must be
 * canonical already: an approved one is walked again that way, so what was
 * approved is what is used).
 *
 * canon (canonlen bytes) gets the path walked, every link resolved. For
 * RESOLVE, *fd is -1 and the last component may be missing; else *fd is
 * the object opened as mode says (close-on-exec, the caller's), checked to
 * be of the kind mode wants (never a FIFO or a device). 0 or -errno, err set.
 */
int exec_host_walk(const char *path, uid_t person_uid, bool strict, enum exec_host_open mode,
                   int *fd, char *canon, size_t canonlen, char *err, size_t errlen);

/*
 * exec_host_walk for the person: in a child with their ids when
 * person->change_ids (its fd comes back over a socketpair), else here. The
 * entry point of both the parent (HOST_OPEN) and a single process.
 */
int exec_host_open_local(const struct exec_host_person *person, const char *path, bool strict,
                         enum exec_host_open mode, int *fd, char *canon, size_t canonlen, char *err,
                         size_t errlen);

/*
 * A host command: program (canonical, walked strictly again), argv as the
 * program sees it (argv[0] as the caller named it), cwd (canonical, walked
 * strictly), timeout in seconds (1 to EXEC_HOST_TIMEOUT_MAX).
 */
struct exec_host_cmd {
	const char *program;
	const char *const *argv; /* NULL-terminated, 1 to EXEC_HOST_ARGV_MAX */
	const char *cwd;
	int timeout;
};

/*
 * The result a host command's supervisor writes on its status pipe once
 * the program ended or was killed: wait status, whether the timeout killed
 * it, and errno when it could not be started (0: it ran).
 */
struct exec_host_status {
	int32_t wstatus;
	int32_t timed_out;
	int32_t start_errno;
	char why[256]; /* for start_errno */
};

/*
 * Starts cmd for the person, with their ids (when change_ids), a minimal
 * environment (PATH=/usr/local/bin:/usr/bin:/bin, HOME, USER, LOGNAME,
 * LANG=C.UTF-8), stdin /dev/null, in a session of its own, under a
 * supervisor that kills its process group at the timeout or when the
 * status pipe's reader goes. fds: the read ends of stdout, stderr and the
 * status pipe (struct exec_host_status once it ends), the caller's. Nothing
 * waits here: the supervisor is no child of the caller's. 0 or -errno, err.
 */
int exec_host_spawn_local(const struct exec_host_person *person, const struct exec_host_cmd *cmd,
                          int fds[3], char *err, size_t errlen);

/*
 * The operations the tools use: here, as the noted person, in a single
 * process; through the privileged parent in a gate, once the split
 * installed its ops. The same contracts as the _local ones.
 */
int exec_host_open(const char *path, bool strict, enum exec_host_open mode, int *fd, char *canon,
                   size_t canonlen, char *err, size_t errlen);
int exec_host_spawn(const struct exec_host_cmd *cmd, int fds[3], char *err, size_t errlen);
struct exec_host_ops {
	int (*open)(const char *path, bool strict, enum exec_host_open mode, int *fd, char *canon,
	            size_t canonlen, char *err, size_t errlen);
	int (*spawn)(const struct exec_host_cmd *cmd, int fds[3], char *err, size_t errlen);
};
/* Installed once, at the split, in the gate; ops outlives every call. */
void exec_host_ops_install(const struct exec_host_ops *ops);

#endif
