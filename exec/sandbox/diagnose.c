/*
 * Why the machine refused (diagnose.h): small readers of /proc and /sys,
 * and pure functions from what they read to "<why>; <fix>". Nothing here
 * runs on a path that succeeds, except Landlock's version query, once.
 */
#include "exec/sandbox/diagnose.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gateway/core/fdio.h"
#include "gateway/core/log.h"

#define CAP_SYS_ADMIN_BIT 21

/* A sysctl's number, or -1 when it does not exist here. */
static long
sysctl_long(const char *path)
{
	char buf[32], *end;
	long v;

	if (gw_read_text(path, buf, sizeof(buf)) != 0)
		return -1;
	errno = 0;
	v = strtol(buf, &end, 10);
	return end == buf || errno != 0 ? -1 : v;
}

/* The value after "Name:\t" in /proc/self/status, or NULL. */
static const char *
status_field(const char *status, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = status; p != NULL && *p != '\0';) {
		if (strncmp(p, name, n) == 0 && p[n] == ':')
			return p + n + 1 + strspn(p + n + 1, " \t");
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* The mount's id and the inode of path: a root is both. */
static int
root_id(const char *path, unsigned long long *mnt, dev_t *dev, ino_t *ino)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, 0, STATX_INO | STATX_MNT_ID, &stx) != 0)
		return -errno;
	*mnt = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0;
	*dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	*ino = stx.stx_ino;
	return 0;
}

/*
 * Whether / is not the root of the mount namespace (the kernel's
 * "chrooted", which refuses user namespaces). Mountinfo lists only mounts
 * reachable from our root, so a chroot into a plain directory has no mount
 * at "/"; a chroot into a mount (a bind of the host's /) is told apart
 * from init's root, when init shares our mount namespace and may be read.
 */
static int
chrooted(void)
{
	char line[4096], mnt[PATH_MAX], ours[64], init[64];
	unsigned long long m1, m2;
	bool root_listed = false;
	dev_t d1, d2;
	ino_t i1, i2;
	ssize_t n1, n2;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return -1;
	while (!root_listed && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 && strcmp(mnt, "/") == 0)
			root_listed = true;
	}
	fclose(f);
	if (!root_listed)
		return 1;
	n1 = readlink("/proc/self/ns/mnt", ours, sizeof(ours) - 1);
	n2 = readlink("/proc/1/ns/mnt", init, sizeof(init) - 1);
	if (n1 <= 0 || n2 != n1 || memcmp(ours, init, (size_t)n1) != 0)
		return -1;
	if (root_id("/", &m1, &d1, &i1) != 0 || root_id("/proc/1/root/", &m2, &d2, &i2) != 0)
		return -1;
	return m1 != m2 || d1 != d2 || i1 != i2;
}

void
exec_userns_facts_read(struct exec_userns_facts *f, int err)
{
	char status[4096], map[128];
	const char *v;

	memset(f, 0, sizeof(*f));
	f->err = err;
	if (gw_read_text("/proc/self/status", status, sizeof(status)) == 0) {
		v = status_field(status, "CapEff");
		f->privileged = v != NULL && ((strtoull(v, NULL, 16) >> CAP_SYS_ADMIN_BIT) & 1);
		v = status_field(status, "Seccomp");
		f->seccomp = v != NULL && *v == '2';
	}
	/* Capabilities count as privilege for these settings in the initial
	 * user namespace only: its map is the whole range. */
	if (f->privileged && (gw_read_text("/proc/self/uid_map", map, sizeof(map)) != 0 ||
	                      strstr(map, "4294967295") == NULL))
		f->privileged = false;
	f->chrooted = err == EPERM ? chrooted() : -1;
	f->max_user_ns = sysctl_long("/proc/sys/user/max_user_namespaces");
	f->unprivileged_clone = (int)sysctl_long("/proc/sys/kernel/unprivileged_userns_clone");
	f->apparmor_restrict =
	    (int)sysctl_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
}

#define CONTAINER_FIX                                                                              \
	"run the container with a seccomp profile that allows clone3 and new user namespaces "     \
	"(docker and podman: --security-opt seccomp=unconfined), or run tollgate outside it"

bool
exec_userns_why(const struct exec_userns_facts *f, const char *step, char *buf, size_t len)
{
	const char *as_root = f->privileged ? "" : " as root";

	if (f->max_user_ns == 0)
		snprintf(
		    buf, len,
		    "user.max_user_namespaces is 0, which turns them off; "
		    "sysctl -w user.max_user_namespaces=15000%s (and in /etc/sysctl.d to keep it)",
		    as_root);
	else if (f->err == ENOSPC)
		snprintf(
		    buf, len,
		    "the limit of user namespaces is reached (user.max_user_namespaces=%ld, or a "
		    "parent namespace's, or the user's count); raise it (sysctl -w "
		    "user.max_user_namespaces=N%s) or end what holds them",
		    f->max_user_ns, as_root);
	else if (f->err == EUSERS)
		snprintf(buf, len,
		         "32 user namespaces are nested already, the kernel's limit; run tollgate "
		         "from a less nested one");
	else if (f->err == EPERM && f->chrooted == 1)
		snprintf(buf, len,
		         "the kernel refuses them inside a chroot (/ is not the root of this mount "
		         "namespace); run tollgate outside the chroot, or enter that root with a "
		         "mount namespace and pivot_root instead of chroot (unshare -m, then "
		         "pivot_root, as container runtimes do)");
	else if (f->err == ENOSYS && f->seccomp)
		snprintf(buf, len,
		         "a seccomp filter on this process answers %s with ENOSYS (a container "
		         "runtime's default profile does); " CONTAINER_FIX,
		         step);
	else if (f->err == ENOSYS)
		snprintf(buf, len, "this kernel has no %s (Linux 5.3 or later has); a newer kernel",
		         step);
	else if (f->err == EPERM && !f->privileged && f->unprivileged_clone == 0)
		snprintf(buf, len,
		         "kernel.unprivileged_userns_clone is 0, which refuses them to users; "
		         "sysctl -w kernel.unprivileged_userns_clone=1 as root, or run tollgate as "
		         "root");
	/* AppArmor lets the namespace be made but takes its capabilities away:
	 * the id map's write is what fails, EPERM too. */
	else if (f->err == EPERM && !f->privileged && f->apparmor_restrict == 1)
		snprintf(
		    buf, len,
		    "AppArmor restricts them for users "
		    "(kernel.apparmor_restrict_unprivileged_userns=1); an AppArmor profile for "
		    "tollgate with the 'userns,' rule, or sysctl -w "
		    "kernel.apparmor_restrict_unprivileged_userns=0, or run tollgate as root");
	else if (f->err == EPERM && f->seccomp)
		snprintf(buf, len,
		         "a seccomp filter on this process refuses them (a container runtime's "
		         "default profile does); " CONTAINER_FIX);
	else {
		snprintf(buf, len, "the kernel refused one (%s: %s)%s", step, strerror(f->err),
		         f->privileged ? "" : "; run tollgate as root");
		return false;
	}
	return true;
}

/* The first mount point below /proc that covers part of it, or false. */
static bool
proc_covered(char *out, size_t len)
{
	char line[4096], mnt[PATH_MAX], fstype[64];
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		const char *dash = strstr(line, " - ");

		if (dash == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%63s", fstype) != 1)
			continue;
		/* binfmt_misc sits on an empty directory, which the kernel allows. */
		if (strncmp(mnt, "/proc/", 6) == 0 && strcmp(fstype, "binfmt_misc") != 0 &&
		    strcmp(fstype, "autofs") != 0) {
			snprintf(out, len, "%s", mnt);
			found = true;
		}
	}
	fclose(f);
	return found;
}

void
exec_setup_failure_why(const char *step, int err, const char *covered, char *buf, size_t len)
{
	if (strcmp(step, "mount /proc") == 0 && err == EPERM && covered != NULL)
		snprintf(buf, len,
		         "sandbox set-up failed at '%s': %s; %s is mounted over (container "
		         "runtimes mask such paths), and the kernel then refuses a fresh /proc to "
		         "a user namespace; run the container with /proc unmasked (docker: "
		         "--security-opt systempaths=unconfined; podman: --security-opt "
		         "unmask=ALL), or run tollgate outside it",
		         step, strerror(err), covered);
	else
		snprintf(buf, len, "sandbox set-up failed at '%s': %s", step, strerror(err));
}

void
exec_setup_failure_text(const char *step, int err, char *buf, size_t len)
{
	char covered[PATH_MAX];
	bool have = strcmp(step, "mount /proc") == 0 && err == EPERM &&
	            proc_covered(covered, sizeof(covered));

	exec_setup_failure_why(step, err, have ? covered : NULL, buf, len);
}

const char *
exec_cgroup_why(const struct exec_cgroup_facts *f, char *buf, size_t len)
{
	const char *own = f->own_cgroup[0] != '\0' ? f->own_cgroup : "?";

	if (f->memory_disabled)
		snprintf(
		    buf, len,
		    "the memory controller is off (cgroup_disable=memory on the kernel command "
		    "line); boot without it");
	else if (f->read_only)
		snprintf(buf, len,
		         "the cgroup file system is mounted read-only (a container's); give the "
		         "container a writable cgroup of its own (docker: --cgroupns=private on a "
		         "cgroup v2 host)");
	else if (!f->rootless && !f->v1_memory && !f->v2_controllers)
		snprintf(buf, len,
		         "no cgroup hierarchy here offers the memory controller; mount cgroup2 (or "
		         "v1's memory) at /sys/fs/cgroup");
	else if (!f->rootless)
		return NULL;
	else if (!f->v2_mounted || !f->v2_controllers)
		snprintf(
		    buf, len,
		    "a user gets a cgroup only from cgroup v2, and here memory and pids are "
		    "cgroup v1's (%s); boot with systemd.unified_cgroup_hierarchy=1, or run as "
		    "root",
		    f->v2_mounted ? "a hybrid host" : "no cgroup2 is mounted");
	else if (!f->user_service)
		snprintf(buf, len,
		         "no systemd user manager runs for uid %u (no user@%u.service: a login "
		         "through su or sudo, or a container); log in through a logind session, or "
		         "loginctl enable-linger USER, or run as root",
		         f->uid, f->uid);
	else if (!f->user_service_mine || !f->user_delegated)
		snprintf(buf, len,
		         "systemd delegates no memory and pids to user@%u.service; a drop-in "
		         "/etc/systemd/system/user@.service.d/delegate.conf with [Service] "
		         "Delegate=cpu cpuset io memory pids, then systemctl daemon-reload and a "
		         "new login",
		         f->uid);
	else if (!f->inside_user_service)
		snprintf(buf, len,
		         "tollgate runs in %s, outside user@%u.service, and a user moves processes "
		         "only within a subtree it owns; start it inside: systemd-run --user "
		         "--scope tollgate ...",
		         own, f->uid);
	else
		return NULL;
	return buf;
}

const char *
exec_cgroup_limits_note(char *buf, size_t len)
{
	struct exec_cgroup_facts f;
	char why[768] = "";

	exec_cgroup_facts_read(&f);
	if (exec_cgroup_why(&f, why, sizeof(why)) == NULL && !f.rootless) {
		snprintf(buf, len, "run: no memory cgroup here: --ram limits each process only");
		return buf;
	} else if (why[0] == '\0' || exec_cgroup_why(&f, why, sizeof(why)) == NULL) {
		snprintf(why, sizeof(why),
		         "no cgroup v2 subtree of the user's offers memory and pids");
	}
	if (f.rootless)
		snprintf(buf, len,
		         "rootless: no cgroup for the limits, so they are rlimits (--ram caps each "
		         "process's writable memory, RLIMIT_DATA, not the sandbox's; --cpu each "
		         "process's CPU time; --pids counts the sandbox user's processes, "
		         "RLIMIT_NPROC, per uid): %s",
		         why);
	else
		snprintf(buf, len, "run: no memory cgroup, so --ram limits each process only: %s",
		         why);
	return buf;
}

void
exec_landlock_why(int err, const char *lsm, char *buf, size_t len)
{
	bool known = lsm != NULL && lsm[0] != '\0';

	if (err == EOPNOTSUPP)
		snprintf(
		    buf, len,
		    "the kernel has Landlock but was booted without it in its list of security "
		    "modules (active: %s); add landlock to the lsm= kernel parameter "
		    "(lsm=landlock,%s) "
		    "and reboot",
		    known ? lsm : "unknown", known ? lsm : "lockdown,yama,apparmor,bpf");
	else if (err == ENOSYS)
		snprintf(buf, len,
		         "this kernel is built without Landlock; boot one built with "
		         "CONFIG_SECURITY_LANDLOCK=y (Linux 5.13 or later)");
	else
		snprintf(buf, len, "the kernel refused its version query (%s)", strerror(err));
}

void
exec_landlock_note(void)
{
	static bool noted;
	char lsm[256], why[768];
	long abi;
	int err;

	if (noted)
		return;
	noted = true;
	abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi >= 1)
		return;
	err = errno;
	if (gw_read_text("/sys/kernel/security/lsm", lsm, sizeof(lsm)) != 0)
		lsm[0] = '\0';
	lsm[strcspn(lsm, "\n")] = '\0';
	exec_landlock_why(err, lsm, why, sizeof(why));
	log_warnx("no Landlock for the sandbox (its read-only mounts, seccomp and namespaces "
	          "still hold): %s",
	          why);
}
