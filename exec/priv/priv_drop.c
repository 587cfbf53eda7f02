/*
 * The gate's loss of privilege (exec/priv/priv.h): what it gives up at the split
 * (inherited by every thread it starts later), and the drop at the end of
 * its set-up: ids, capabilities, and a seccomp filter on every thread.
 */
#include "exec/priv/priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <pwd.h>
#include <sched.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "exec/sandbox/sanitized.h"
#include "exec/sandbox/seccomp_bpf.h"
#include "gateway/core/err.h"
#include "gateway/core/thread.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

int exec_priv_gate_harden(void);

/*
 * LeakSanitizer checks at exit by ptrace-attaching to the process from a
 * helper: a sanitizer build's gate stays dumpable and may ptrace (the gate's
 * filter leaves ptrace out then: exec/sandbox/seccomp/rules.c), or every gate's exit
 * would be LSan's fatal error. Release builds have neither.
 */
#define PRIV_DUMPABLE EXEC_SANITIZED
#define PRIV_DROP_ROUNDS 4

static int
caps_set_all(bool keep_effective)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		d[i].inheritable = 0;
		if (!keep_effective)
			d[i].permitted = d[i].effective = 0;
	}
	if (syscall(SYS_capset, &h, d) != 0)
		return -errno;
	return 0;
}

/*
 * At the split, before any thread exists, so that every thread the gate
 * starts inherits it: nothing gained by execve, no capability beyond those
 * it holds now, no core dump. The effective set stays until the drop: the
 * gate still opens its root-owned files.
 */
int
exec_priv_gate_harden(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	for (int cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL)
			break;
	}
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (prctl(PR_SET_DUMPABLE, PRIV_DUMPABLE, 0, 0, 0) != 0)
		return -errno;
	return caps_set_all(true);
}

/* The securebits of the rootless drop: uid 0 there never regains a
 * capability, by execve or by a change of ids. */
#define PRIV_SECUREBITS                                                                            \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |                           \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED)

static atomic_int threads_dropped, threads_failed;

/* GW_SIGNAL_THREAD_DROP's handler: the receiving thread's own drop. Raw
 * system calls only, so it is async-signal-safe. */
static void
on_thread_drop(int sig)
{
	int saved = errno;

	(void)sig;
	if (prctl(PR_SET_SECUREBITS, PRIV_SECUREBITS, 0, 0, 0) != 0 || caps_set_all(false) != 0)
		atomic_fetch_add(&threads_failed, 1);
	atomic_fetch_add(&threads_dropped, 1);
	errno = saved;
}

/* Whether thread tid of this process still has a permitted or effective
 * capability (or cannot be read: then it is counted as having one). */
static bool
thread_has_caps(pid_t tid)
{
	static const char *const sets[] = {"CapPrm:", "CapEff:"};
	char path[64], buf[4096], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT; /* a thread that has ended has none */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		p = strstr(buf, sets[i]);
		if (p == NULL || strtoull(p + strlen(sets[i]), NULL, 16) != 0)
			return true;
	}
	return false;
}

/*
 * Capabilities are per thread, and no libc call changes them on every
 * thread (as setresuid does): each other thread is asked by a signal its
 * mask leaves open (gateway/core/thread.h) to clear its own, and /proc
 * then says whether every one did. Rounds, in case a thread started
 * another before its own drop.
 */
static int
drop_other_threads(char *err, size_t errlen)
{
	struct sigaction sa, old;
	struct dirent *de;
	pid_t self = (pid_t)syscall(SYS_gettid), tid;
	int pending, rc = 0;
	DIR *d;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_thread_drop;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(GW_SIGNAL_THREAD_DROP, &sa, &old) != 0)
		return -errno;
	for (int round = 0; round < PRIV_DROP_ROUNDS; round++) {
		int sent = 0, before = atomic_load(&threads_dropped);

		d = opendir("/proc/self/task");
		if (d == NULL) {
			rc = -errno;
			gw_set_err(err, errlen, "/proc/self/task: %s", strerror(errno));
			goto out;
		}
		pending = 0;
		while ((de = readdir(d)) != NULL) {
			tid = (pid_t)strtol(de->d_name, NULL, 10);
			if (tid <= 0 || tid == self || !thread_has_caps(tid))
				continue;
			pending++;
			if (syscall(SYS_tgkill, getpid(), tid, GW_SIGNAL_THREAD_DROP) == 0)
				sent++;
		}
		closedir(d);
		if (pending == 0)
			goto out;
		/* Bounded: a thread that never runs its handler fails the drop. */
		for (int i = 0; i < 1000 && atomic_load(&threads_dropped) - before < sent; i++)
			usleep(2000);
	}
	rc = -EPERM;
	gw_set_err(err, errlen, "%d thread%s kept their capabilities", pending,
	           pending == 1 ? "" : "s");
out:
	sigaction(GW_SIGNAL_THREAD_DROP, &old, NULL);
	if (rc == 0 && atomic_load(&threads_failed) != 0) {
		rc = -EPERM;
		gw_set_err(err, errlen, "a thread could not clear its capabilities");
	}
	return rc;
}

/* Whether this process lives in a user namespace other than the initial one. */
static bool
in_own_userns(void)
{
	char buf[128];
	unsigned long a = 0, b = 0, c = 0;
	ssize_t n;
	int fd;

	fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (sscanf(buf, "%lu %lu %lu", &a, &b, &c) != 3)
		return true;
	return !(a == 0 && b == 0 && c == 4294967295ul);
}

int
exec_priv_gate_filter_load(void)
{
	/* Threads exist by now (the audit writer, the policy file writer):
	 * TSYNC puts the filter on each, or fails (a positive thread id). */
	long rc;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
	             &exec_seccomp_gate_bpf);
	if (rc < 0)
		return -errno;
	return rc == 0 ? 0 : -EBUSY;
}

/*
 * The `tollgate` system user, read from /etc/passwd itself: `useradd
 * --system` puts it there, and getpwnam's NSS modules (systemd's userdb,
 * a directory service) cost milliseconds of every sandbox's start for an
 * answer that is local. 0: found.
 */
static int
system_user(uid_t *uid, gid_t *gid)
{
	struct passwd *pw;
	FILE *f = fopen("/etc/passwd", "re");
	int rc = -ENOENT;

	if (f == NULL)
		return -errno;
	while ((pw = fgetpwent(f)) != NULL) {
		if (strcmp(pw->pw_name, "tollgate") == 0) {
			if (pw->pw_uid != 0 && pw->pw_gid != 0) {
				*uid = pw->pw_uid;
				*gid = pw->pw_gid;
				rc = 0;
			}
			break;
		}
	}
	fclose(f);
	return rc;
}

void
exec_priv_gate_ids(uid_t *uid, gid_t *gid)
{
	*uid = *gid = EXEC_PRIV_FALLBACK_ID;
	if (in_own_userns()) {
		*uid = geteuid(); /* uid 0 of its own namespace stays (below) */
		*gid = getegid();
	} else {
		(void)system_user(uid, gid);
	}
}

int
exec_priv_drop(char *err, size_t errlen)
{
	uid_t uid, ru, eu, su;
	gid_t gid;
	int rc;

	exec_priv_gate_ids(&uid, &gid);
	if (in_own_userns()) {
		/*
		 * uid 0 of a namespace this process made (rootless mode): no
		 * other id is mapped, so it stays 0 there and loses every
		 * capability for good instead, on every thread: the threads
		 * started since the split (the audit writer) first, each by
		 * itself, then this one.
		 */
		rc = drop_other_threads(err, errlen);
		if (rc != 0)
			return rc;
		if (prctl(PR_SET_SECUREBITS, PRIV_SECUREBITS, 0, 0, 0) != 0) {
			rc = -errno;
			gw_set_err(err, errlen, "securebits: %s", strerror(errno));
			return rc;
		}
		rc = caps_set_all(false);
		if (rc != 0) {
			gw_set_err(err, errlen, "capset: %s", strerror(-rc));
			return rc;
		}
	} else {
		/* glibc applies each of these to every thread of the process. */
		if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
		    setresuid(uid, uid, uid) != 0) {
			rc = -errno;
			gw_set_err(err, errlen, "cannot become uid %u: %s", (unsigned)uid,
			           strerror(errno));
			return rc;
		}
		if (getresuid(&ru, &eu, &su) != 0 || ru != uid || eu != uid || su != uid) {
			gw_set_err(err, errlen, "still uid %u after the drop", (unsigned)eu);
			return -EPERM;
		}
		/* The kernel cleared permitted and effective with the uids. */
		rc = caps_set_all(false);
		if (rc != 0) {
			gw_set_err(err, errlen, "capset: %s", strerror(-rc));
			return rc;
		}
	}
	/* A change of credentials resets both. */
	if (prctl(PR_SET_DUMPABLE, PRIV_DUMPABLE, 0, 0, 0) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "prctl: %s", strerror(errno));
		return rc;
	}
	rc = exec_priv_gate_filter_load();
	if (rc != 0) {
		gw_set_err(err, errlen, "the gate's seccomp filter: %s", strerror(-rc));
		return rc;
	}
	return 0;
}
