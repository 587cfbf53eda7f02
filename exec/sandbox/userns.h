/*
 * Rootless mode: started as a normal user, tollgate enters a user namespace
 * of its own in which it is root, so that the hub, the sandboxes' namespaces
 * and their mounts can be made without privilege on the host (docs/run.md).
 */
#ifndef TOLLGATE_EXEC_USERNS_H
#define TOLLGATE_EXEC_USERNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Enters rootless mode: a new user and mount namespace (the network
 * namespace stays the caller's, so outbound sockets work as before), the
 * caller's uid and gid mapped to 0 and nothing else, setgroups denied,
 * mount propagation private. Must be called while the process has one
 * thread (the kernel refuses a user namespace to a threaded process), and
 * before anything caches its uid. 0, or negative errno with one line in err
 * that names what refused and its fix when the kernel says no (exec/sandbox/diagnose.h:
 * user.max_user_namespaces, kernel.unprivileged_userns_clone,
 * kernel.apparmor_restrict_unprivileged_userns, a chroot, a seccomp filter).
 */
int exec_rootless_enter(char *err, size_t errlen);

/* True once exec_rootless_enter succeeded in this process. */
bool exec_rootless(void);

/* The uid and gid the process had on the host before the entry (getuid()
 * and getgid() when not rootless). */
uid_t exec_rootless_host_uid(void);
gid_t exec_rootless_host_gid(void);

/*
 * Who the sandbox's user (EXEC_SANDBOX_UID/GID inside) is in this
 * process's namespace: EXEC_HOST_ID_BASE + 1000 as root, 0 (the user who
 * started tollgate) rootless, where no other id is mapped, and the user's
 * own ids before the entry (what a file made then can be given).
 */
uid_t exec_sandbox_host_uid(void);
gid_t exec_sandbox_host_gid(void);

#endif
