/*
 * Rootless mode's entry: a user namespace in which this process is root,
 * made before any thread exists, and the one line that says why the kernel
 * refused one. docs/run.md ("Without root") describes the mode.
 */
#include "exec/sandbox/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "exec/sandbox/diagnose.h"
#include "exec/sandbox/exec.h"
#include "gateway/core/err.h"
#include "gateway/core/fdio.h"

static bool rootless;
static uid_t host_uid;
static gid_t host_gid;

bool
exec_rootless(void)
{
	return rootless;
}

uid_t
exec_rootless_host_uid(void)
{
	return rootless ? host_uid : getuid();
}

gid_t
exec_rootless_host_gid(void)
{
	return rootless ? host_gid : getgid();
}

/* Before the entry a normal user's own ids: all it can give a file. */
uid_t
exec_sandbox_host_uid(void)
{
	if (rootless)
		return 0;
	return geteuid() != 0 ? geteuid() : EXEC_HOST_ID_BASE + EXEC_SANDBOX_UID;
}

gid_t
exec_sandbox_host_gid(void)
{
	if (rootless)
		return 0;
	return geteuid() != 0 ? getegid() : EXEC_HOST_ID_BASE + EXEC_SANDBOX_GID;
}

/* One line: what failed, why, and the fix (exec/sandbox/diagnose.c). */
static void
explain_refusal(const char *step, int rc, char *err, size_t errlen)
{
	struct exec_userns_facts f;
	char why[768];

	exec_userns_facts_read(&f, -rc);
	exec_userns_why(&f, step, why, sizeof(why));
	gw_set_err(err, errlen, "rootless mode needs a user namespace: %s", why);
}

int
exec_rootless_enter(char *err, size_t errlen)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	const char *step = "unshare";
	int rc = 0;

	if (rootless)
		return 0;
	/*
	 * main() made the process non-dumpable, which gives its /proc files to
	 * the host's root: the user could then write neither our id maps nor a
	 * sandbox's (a clone inherits the flag), nor open its namespaces. Rootless,
	 * the flag guards nothing: the processes it would keep out run as the
	 * same user, who owns TOLLGATE_HOME's keys anyway (docs/threat-model.md).
	 */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) {
		rc = -errno;
		explain_refusal("dumpable", rc, err, errlen);
		goto out;
	}
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
		rc = -errno;
		/* EINVAL: a thread exists, a bug of the caller's, not the host's. */
		if (rc == -EINVAL) {
			gw_set_err(err, errlen,
			           "rootless mode: cannot enter a user namespace from a threaded "
			           "process");
			goto out;
		}
		explain_refusal(step, rc, err, errlen);
		goto out;
	}
	/* Unprivileged, a gid map may only be written once setgroups is off:
	 * the user's supplementary groups stay as they are (docs/threat-model.md). */
	step = "setgroups";
	rc = gw_write_text("/proc/self/setgroups", "deny");
	if (rc == 0) {
		step = "uid_map";
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
		rc = gw_write_text("/proc/self/uid_map", map);
	}
	if (rc == 0) {
		step = "gid_map";
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
		rc = gw_write_text("/proc/self/gid_map", map);
	}
	if (rc != 0) {
		explain_refusal(step, rc, err, errlen);
		goto out;
	}
	/* Nothing mounted for a sandbox may reach back to the host's tree. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		rc = -errno;
		explain_refusal("private mount propagation", rc, err, errlen);
		goto out;
	}
	host_uid = uid;
	host_gid = gid;
	rootless = true;
out:
	return rc;
}
