/*
 * A sandbox's child: everything between clone() and execve() as one
 * straight line of steps (exec_child_main), each failure reported over the
 * CLOEXEC report pipe (exec_child_fail); the tiny init that reaps and
 * forwards signals; the disk watchdog the init runs. The parent's side of
 * the hand-shake is exec/sandbox/sandbox.c.
 */
#include "exec/sandbox/exec.h"
#include "exec/sandbox/workdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/sandbox/diagnose.h"
#include "exec/image/root.h"
#include "exec/sandbox/pty.h"
#include "exec/sandbox/seccomp_bpf.h"
#include "exec/sandbox/userns.h"
#include "gateway/core/log.h"
#include "gateway/core/safepath.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* ---- small helpers shared with the other exec files --------------------- */

int
exec_status_from_wait(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 125;
}

int
exec_status_from_exec_errno(int err)
{
	if (err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG || err == ELOOP)
		return 127;
	return 126;
}

/* ---- the child: everything between clone() and execve() ----------------- */

/*
 * No allocation, no stdio, no locks from here on: the child is a copy of a
 * possibly multi-threaded parent. Identity changes use raw system calls, so
 * glibc does not try to reach threads that exist only in the parent.
 */

static void
child_report(int fd, int kind, int value, const char *step)
{
	struct exec_msg m;
	size_t i;
	ssize_t n;

	memset(&m, 0, sizeof(m));
	m.kind = kind;
	m.value = value;
	for (i = 0; step != NULL && step[i] != '\0' && i + 1 < sizeof(m.step); i++)
		m.step[i] = step[i];
	do {
		n = write(fd, &m, sizeof(m));
	} while (n < 0 && errno == EINTR);
}

__attribute__((noreturn)) void
exec_child_fail(const struct exec_plan *p, const char *step, int err)
{
	child_report(p->report_fd, EXEC_MSG_SETUP_FAILED, err < 0 ? -err : err, step);
	_exit(125);
}

static size_t
str_append(char *dst, size_t cap, size_t at, const char *s)
{
	while (*s != '\0' && at + 1 < cap)
		dst[at++] = *s++;
	dst[at] = '\0';
	return at;
}

static int
child_lo_up(void)
{
	struct ifreq ifr;
	int fd, rc = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	str_append(ifr.ifr_name, sizeof(ifr.ifr_name), 0, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
		rc = -errno;
		goto out;
	}
	/* A warm slot's namespace comes with lo up, and is not ours to set. */
	if (ifr.ifr_flags & IFF_UP)
		goto out;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
		rc = -errno;
out:
	close(fd);
	return rc;
}

#define SANDBOX_NO_PROXY "localhost,127.0.0.1,::1"

/* The proxy variables, written once the hub address is known. */
static void
child_fill_proxy_env(struct exec_plan *p)
{
	static const char *const url_names[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
	                                        "http_proxy", "https_proxy", "all_proxy"};
	size_t i, k = 0, at;

	if (p->hub_addr[0] == '\0') {
		p->envp[p->proxy_env_at] = NULL;
		return;
	}
	for (i = 0; i < sizeof(url_names) / sizeof(url_names[0]); i++, k++) {
		at = str_append(p->proxy_env[k], sizeof(p->proxy_env[k]), 0, url_names[i]);
		at = str_append(p->proxy_env[k], sizeof(p->proxy_env[k]), at, "=http://");
		at = str_append(p->proxy_env[k], sizeof(p->proxy_env[k]), at, p->hub_addr);
		str_append(p->proxy_env[k], sizeof(p->proxy_env[k]), at, ":3128");
		p->envp[p->proxy_env_at + k] = p->proxy_env[k];
	}
	/* The sandbox's own loopback (lo is up) is its own: a server the
	 * command starts there is reached directly, never through the gate. */
	str_append(p->proxy_env[k], sizeof(p->proxy_env[k]), 0, "NO_PROXY=" SANDBOX_NO_PROXY);
	p->envp[p->proxy_env_at + k] = p->proxy_env[k];
	k++;
	str_append(p->proxy_env[k], sizeof(p->proxy_env[k]), 0, "no_proxy=" SANDBOX_NO_PROXY);
	p->envp[p->proxy_env_at + k] = p->proxy_env[k];
	k++;
	str_append(p->proxy_env[k], sizeof(p->proxy_env[k]), 0, "NODE_USE_ENV_PROXY=1");
	p->envp[p->proxy_env_at + k] = p->proxy_env[k];
	k++;
	p->envp[p->proxy_env_at + k] = NULL;
}

/*
 * Gives up every privilege: the bounding set, supplementary groups, the
 * ids (which clears the permitted and effective sets), then the inheritable
 * and ambient sets.
 */
static int
child_drop_privileges(const struct exec_plan *p, const char **step)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	for (int cap = 0; cap <= p->last_cap; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
			*step = "drop capability bounding set";
			return -errno;
		}
	}
	/* Rootless, setgroups is denied from the entry on (exec/sandbox/userns.c). */
	if (!exec_rootless() && syscall(SYS_setgroups, 0, NULL) != 0) {
		*step = "setgroups";
		return -errno;
	}
	if (syscall(SYS_setresgid, p->gid, p->gid, p->gid) != 0) {
		*step = "setresgid";
		return -errno;
	}
	if (syscall(SYS_setresuid, p->uid, p->uid, p->uid) != 0) {
		*step = "setresuid";
		return -errno;
	}
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) != 0) {
		*step = "capset";
		return -errno;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
		*step = "clear ambient capabilities";
		return -errno;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		*step = "no_new_privs";
		return -errno;
	}
	return 0;
}

static const char *
child_getenv(char **envp, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; envp[i] != NULL; i++) {
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
			return envp[i] + n + 1;
	}
	return NULL;
}

/* execvpe without allocation: the sandbox's own PATH, not tollgate's. */
int
exec_child_execvpe(char *const *argv, char **envp)
{
	char path[PATH_MAX];
	const char *dirs, *d, *end;
	int saw_eacces = 0;
	size_t at;

	if (strchr(argv[0], '/') != NULL) {
		execve(argv[0], argv, envp);
		return errno;
	}
	dirs = child_getenv(envp, "PATH");
	if (dirs == NULL)
		dirs = "/usr/bin:/bin";
	for (d = dirs; *d != '\0'; d = *end == ':' ? end + 1 : end) {
		end = strchr(d, ':');
		if (end == NULL)
			end = d + strlen(d);
		if ((size_t)(end - d) + strlen(argv[0]) + 2 > sizeof(path))
			continue;
		memcpy(path, d, (size_t)(end - d));
		at = (size_t)(end - d);
		if (at == 0)
			path[at++] = '.';
		path[at++] = '/';
		str_append(path, sizeof(path), at, argv[0]);
		execve(path, argv, envp);
		if (errno == EACCES)
			saw_eacces = 1;
		else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP &&
		         errno != ENAMETOOLONG)
			return errno;
	}
	return saw_eacces ? EACCES : ENOENT;
}

static __attribute__((noreturn)) void
command_main(struct exec_plan *p)
{
	struct sigaction sa;
	sigset_t none;
	const char *step = NULL;
	int rc, err;

	/* What tollgate ignores (SIGPIPE) the command must not inherit. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* With a pty: a session led by the command, whose terminal it is. */
	if (p->ctty && (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) != 0))
		exec_child_fail(p, "controlling terminal", errno);
	/* fds a caller forgot to mark close-on-exec do not reach the command. */
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		exec_child_fail(p, "close_range", errno);
	if (chdir(p->cwd[0] != '\0' ? p->cwd : EXEC_WORKDIR) != 0)
		exec_child_fail(p,
		                p->cwd[0] != '\0' ? "chdir to the image's WorkingDir"
		                                   : "chdir " EXEC_WORKDIR,
		           errno);
	rc = exec_limits_apply(p, &step);
	if (rc != 0)
		exec_child_fail(p, step, rc);
	rc = child_drop_privileges(p, &step);
	if (rc != 0)
		exec_child_fail(p, step, rc);
	/*
	 * Under runsc, gVisor's kernel serves the command's system calls:
	 * runsc makes a user namespace of its own, below this one, for what
	 * its gofer and sentry need and tollgate's filter and Landlock refuse
	 * (ptrace, mounts, chroot, namespaces), and filters itself
	 * (exec/sandbox/runsc.h).
	 */
	if (p->runsc_argv == NULL) {
		rc = exec_landlock_apply(p, &step);
		if (rc != 0)
			exec_child_fail(p, step, rc);
		rc = exec_seccomp_apply(p, &step);
		if (rc != 0)
			exec_child_fail(p, step, rc);
	}
	rc = exec_limits_apply_nofile(p, &step);
	if (rc != 0)
		exec_child_fail(p, step, rc);
	if (p->agent_fd >= 0)
		exec_agent_main(p);
	err = exec_child_execvpe(p->argv, p->envp);
	child_report(p->report_fd, EXEC_MSG_EXEC_FAILED, err, "execve");
	_exit(exec_status_from_exec_errno(err));
}

/*
 * The caller's stdin, stdout and stderr onto 0-2 (spec.set_stdio). Each is
 * first copied above 2, so that a source that is itself one of 0-2 (stdout
 * given as stdin, say) is not overwritten before it is used; the dup2 onto
 * the target then also clears close-on-exec there. Our own pipes move out
 * of 0-2 first: a tollgate started with a closed fd 0-2 gets them there.
 */
int
exec_child_set_stdio(struct exec_plan *p)
{
	int *own[] = {&p->go_fd, &p->report_fd, &p->agent_fd};
	int tmp[3] = {-1, -1, -1}, fd, rc = 0;

	for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
		if (*own[k] < 0 || *own[k] > 2 || p->stdio_fd[*own[k]] < 0)
			continue;
		fd = fcntl(*own[k], F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return -errno;
		*own[k] = fd;
	}
	for (int i = 0; i < 3; i++) {
		if (p->stdio_fd[i] < 0)
			continue;
		tmp[i] = fcntl(p->stdio_fd[i], F_DUPFD_CLOEXEC, 3);
		if (tmp[i] < 0) {
			rc = -errno;
			goto out;
		}
	}
	for (int i = 0; i < 3; i++) {
		if (tmp[i] < 0)
			continue;
		while (dup2(tmp[i], i) < 0) {
			if (errno != EINTR) {
				rc = -errno;
				goto out;
			}
		}
	}
out:
	for (int i = 0; i < 3; i++) {
		if (tmp[i] >= 0)
			close(tmp[i]);
	}
	return rc;
}

/* Whether the parent still holds its end of the "go" pipe. */
static bool
child_parent_alive(const struct exec_plan *p)
{
	struct pollfd pfd = {.fd = p->go_fd, .events = POLLIN};
	int n;

	do {
		n = poll(&pfd, 1, 0);
	} while (n < 0 && errno == EINTR);
	return n == 0 || (n > 0 && !(pfd.revents & (POLLHUP | POLLERR)));
}

/* Closes every fd but the two pipes: init must hold nothing of tollgate's
 * (the hub, other sandboxes' listeners, the audit database). */
static void
child_close_all_but(int a, int b)
{
	unsigned int lo = (unsigned int)(a < b ? a : b), hi = (unsigned int)(a < b ? b : a);

	if (lo > 0)
		syscall(SYS_close_range, 0, lo - 1, 0);
	if (hi > lo + 1)
		syscall(SYS_close_range, lo + 1, hi - 1, 0);
	syscall(SYS_close_range, hi + 1, ~0U, 0);
}

/*
 * init is a copy of tollgate: its command line (tollgate's flags) would show
 * in the sandbox's /proc/1/cmdline. Overwritten in place with its name;
 * arg_start and arg_end are fields 48 and 49 of /proc/self/stat.
 */
static void
child_hide_cmdline(void)
{
	static const char name[] = "tollgate-init";
	char buf[2048];
	unsigned long v[2] = {0, 0};
	const char *p;
	ssize_t n;
	int fd, field;

	prctl(PR_SET_NAME, name, 0, 0, 0);
	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (p == NULL)
		return;
	p++; /* the space before field 3 */
	for (field = 3; field <= 49 && p != NULL; field++) {
		p++;
		if (field >= 48) {
			unsigned long x = 0;

			while (*p >= '0' && *p <= '9')
				x = x * 10 + (unsigned long)(*p++ - '0');
			v[field - 48] = x;
		}
		p = strchr(p, ' ');
	}
	if (v[0] == 0 || v[1] <= v[0] || v[1] - v[0] < sizeof(name) || v[1] - v[0] > (1UL << 20))
		return;
	memset((void *)v[0], 0, v[1] - v[0]);
	memcpy((void *)v[0], name, sizeof(name));
}

static const int forwarded_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/* ---- the disk watchdog --------------------------------------------------- */

/*
 * Host directories the sandbox writes in place (a --workdir, --out, the
 * home, writable binds) are not a tmpfs of --disk: the sandbox's init
 * bounds them instead. Every DISK_POLL_MS it walks the directories and
 * counts the blocks of every entry changed since the start (ctime, which
 * no one can set back); a walk that took long makes the next wait nine
 * times as long (a tenth of init's time at most), unless a directory's
 * filesystem has lost more than --disk since the start (whoever wrote it).
 * More than --disk there, a directory made in the run that it cannot read,
 * or a walk cut short at DISK_WALK_ENTRIES while the filesystem has lost
 * more than --disk, and init kills the command and tells the parent, which the job
 * records as resource.exceeded. Init walks without allocating (it is a
 * fork of a process that may have threads): getdents64 into its stack.
 */
#define DISK_POLL_MS 200
#define DISK_WALK_DEPTH 48
#define DISK_WALK_ENTRIES 200000

struct disk_watch {
	const char *path[EXEC_BINDS_MAX + 3];
	uint64_t free0[EXEC_BINDS_MAX + 3];
	size_t n;
	time_t since;         /* a second before the command started */
	uint64_t bound;       /* bytes */
	uint64_t used;        /* bytes, as the last walk counted */
	size_t entries;       /* of this walk */
	bool hidden;          /* this walk met a directory of the run it cannot read */
	bool truncated;       /* this walk stopped at DISK_WALK_ENTRIES */
	int64_t next_walk_ms; /* CLOCK_MONOTONIC */
};

struct linux_dirent64_head {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static bool
disk_changed(const struct disk_watch *w, const struct stat *st)
{
	return st->st_ctim.tv_sec >= w->since;
}

static void
disk_walk(struct disk_watch *w, int dir, dev_t dev, int depth)
{
	char buf[2048];
	long n;

	for (;;) {
		n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
		if (n <= 0)
			return;
		for (long at = 0; at < n;) {
			struct linux_dirent64_head *d = (void *)(buf + at);
			const char *name = d->d_name;
			struct stat st;
			int sub;

			at += d->d_reclen;
			if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
				continue;
			if (++w->entries > DISK_WALK_ENTRIES) {
				w->truncated = true;
				return;
			}
			if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != dev)
				continue;
			if (disk_changed(w, &st))
				w->used += (uint64_t)st.st_blocks * 512;
			if (!S_ISDIR(st.st_mode))
				continue;
			sub = depth < DISK_WALK_DEPTH
			          ? openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			          : -1;
			if (sub < 0) {
				if (disk_changed(w, &st))
					w->hidden = true;
				continue;
			}
			disk_walk(w, sub, dev, depth + 1);
			close(sub);
		}
	}
}

static uint64_t
disk_free(const char *path)
{
	struct statvfs v;

	if (statvfs(path, &v) != 0)
		return 0;
	return (uint64_t)v.f_bfree * v.f_frsize;
}

/* Which directories init watches, and their filesystems' free space now. */
static void
disk_watch_init(const struct exec_plan *p, struct disk_watch *w)
{
	memset(w, 0, sizeof(*w));
	if (p->disk_mb <= 0)
		return;
	if (p->work_host)
		w->path[w->n++] = EXEC_WORKDIR;
	if (p->outdir[0] != '\0')
		w->path[w->n++] = EXEC_OUTDIR;
	for (size_t i = 0; i < p->nbinds && w->n < sizeof(w->path) / sizeof(w->path[0]); i++) {
		if (p->binds[i].writable && p->binds[i].is_dir)
			w->path[w->n++] = p->binds[i].dest;
	}
	for (size_t i = 0; i < w->n; i++)
		w->free0[i] = disk_free(w->path[i]);
	w->bound = (uint64_t)p->disk_mb << 20;
	w->since = time(NULL) - 1;
}

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* True when the run has added more than the bound. */
static bool
disk_watch_over(struct disk_watch *w)
{
	int64_t now, end;
	bool lost = false;

	for (size_t i = 0; i < w->n && !lost; i++) {
		uint64_t fr = disk_free(w->path[i]);

		lost = fr < w->free0[i] && w->free0[i] - fr > w->bound;
	}
	now = mono_ms();
	if (!lost && now < w->next_walk_ms)
		return false;
	w->used = 0;
	w->hidden = false;
	w->truncated = false;
	for (size_t i = 0; i < w->n; i++) {
		struct stat st;
		int fd = open(w->path[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0)
			continue;
		w->entries = 0;
		if (fstat(fd, &st) == 0)
			disk_walk(w, fd, st.st_dev, 0);
		close(fd);
	}
	/* A walk that took long waits nine times as long before the next. */
	end = mono_ms();
	w->next_walk_ms = end + 9 * (end - now);
	/* A walk cut short cannot clear a filesystem that lost the bound. */
	return w->used > w->bound || w->hidden || (w->truncated && lost);
}

/*
 * PID 1 of the sandbox: builds the root, starts the command, then reaps and
 * forwards signals. When it exits the kernel kills every other process of
 * the PID namespace, however they detached.
 */
__attribute__((noreturn)) void
exec_child_main(struct exec_plan *p)
{
	const char *step = NULL;
	sigset_t set;
	siginfo_t info;
	size_t got = 0;
	ssize_t n;
	struct disk_watch watch;
	const struct timespec poll = {0, DISK_POLL_MS * 1000000L};
	pid_t cmd, dead;
	int rc, wstatus, sig;

	/* Dies with the parent; a parent already gone shows as EOF below. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/*
	 * A session of its own: the sandbox never shares the caller's terminal
	 * (no controlling terminal, so /dev/tty fails with ENXIO, TIOCSTI and
	 * tcsetpgrp have nothing to act on) nor its process group's signals.
	 */
	if (setsid() < 0)
		exec_child_fail(p, "setsid", errno);
	while (got < sizeof(p->hub_addr)) {
		n = read(p->go_fd, p->hub_addr + got, sizeof(p->hub_addr) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(125);
		got += (size_t)n;
	}
	p->hub_addr[sizeof(p->hub_addr) - 1] = '\0';
	/*
	 * Rootless, the gateway stays dumpable so that it can write our id maps
	 * (exec/sandbox/userns.c); the parent is done with us now. Without this the
	 * command, the same uid as this init, could read init's /proc files.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		exec_child_fail(p, "not dumpable", errno);

	/* Now that the parent placed us in our cgroup, it becomes our root. */
	if (unshare(CLONE_NEWCGROUP) != 0)
		exec_child_fail(p, "unshare cgroup namespace", errno);
	rc = exec_mounts_build(p, &step);
	if (rc != 0)
		exec_child_fail(p, step, rc);
	if (sethostname(EXEC_HOSTNAME, strlen(EXEC_HOSTNAME)) != 0)
		exec_child_fail(p, "sethostname", errno);
	rc = child_lo_up();
	if (rc != 0)
		exec_child_fail(p, "loopback up", rc);
	child_fill_proxy_env(p);

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
		sigaddset(&set, forwarded_signals[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);

	disk_watch_init(p, &watch);
	cmd = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (cmd < 0)
		exec_child_fail(p, "fork the command", errno);
	if (cmd == 0)
		command_main(p);

	/* init keeps nothing the command could use, then re-arms PDEATHSIG,
	 * which changing ids cleared. */
	rc = child_drop_privileges(p, &step);
	if (rc != 0) {
		kill(cmd, SIGKILL);
		exec_child_fail(p, step, rc);
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (!child_parent_alive(p))
		_exit(125);
	child_close_all_but(p->go_fd, p->report_fd);
	child_hide_cmdline();

	for (;;) {
		sig = watch.n > 0 ? sigtimedwait(&set, &info, &poll) : sigwaitinfo(&set, &info);
		if (sig < 0 && watch.n > 0 && errno == EAGAIN && disk_watch_over(&watch)) {
			uint64_t mib = watch.used >> 20;

			/* Every process of the sandbox but init, then the
			 * command's status as it died. */
			child_report(p->report_fd, EXEC_MSG_DISK_EXCEEDED,
			             mib > INT32_MAX ? INT32_MAX : (int)mib, NULL);
			kill(-1, SIGKILL);
			do {
				dead = waitpid(cmd, &wstatus, 0);
			} while (dead < 0 && errno == EINTR);
			if (dead != cmd)
				wstatus = SIGKILL; /* as waitpid says "killed by SIGKILL" */
			child_report(p->report_fd, EXEC_MSG_STATUS, wstatus, NULL);
			_exit(0);
		}
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(cmd, sig);
			continue;
		}
		for (;;) {
			pid_t w = waitpid(-1, &wstatus, WNOHANG);

			if (w <= 0)
				break;
			if (w == cmd) {
				child_report(p->report_fd, EXEC_MSG_STATUS, wstatus, NULL);
				_exit(0);
			}
		}
	}
}
