/*
 * Host access done where privilege is (exec/services/host.h): the path walk that
 * follows only root's and the person's symlinks, files opened with the
 * person's file-system ids, and host programs run with the person's ids
 * under a supervisor that enforces the timeout.
 */
#include "exec/services/host.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/sandbox/userns.h"
#include "gateway/core/err.h"
#include "gateway/core/safepath.h"

static struct exec_host_person person;

/* ---- the person ------------------------------------------------------------ */

void
exec_host_person_note(void)
{
	struct exec_host_person p = {0};
	const char *sudo = getenv("SUDO_UID");
	struct passwd pw, *res = NULL;
	char buf[4096];
	int n = EXEC_HOST_GROUPS_MAX;

	p.uid = getuid();
	p.gid = getgid();
	if (p.uid == 0 && sudo != NULL && *sudo != '\0') {
		char *end;
		long v;

		errno = 0;
		v = strtol(sudo, &end, 10);
		if (errno == 0 && *end == '\0' && v > 0 && v < (long)UINT32_MAX)
			p.uid = (uid_t)v;
	}
	if (getpwuid_r(p.uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL) {
		p.gid = pw.pw_gid;
		snprintf(p.name, sizeof(p.name), "%s", pw.pw_name);
		snprintf(p.home, sizeof(p.home), "%s", pw.pw_dir);
		if (getgrouplist(pw.pw_name, pw.pw_gid, p.groups, &n) >= 0 && n >= 0)
			p.ngroups = (size_t)n;
	}
	if (p.ngroups == 0) {
		p.groups[0] = p.gid;
		p.ngroups = 1;
	}
	if (p.name[0] == '\0')
		snprintf(p.name, sizeof(p.name), "uid%u", (unsigned)p.uid);
	if (p.home[0] == '\0')
		snprintf(p.home, sizeof(p.home), "/");
	/* Root serving someone else switches to their ids; rootless, the
	 * user namespace's uid 0 is the person already. */
	p.change_ids = geteuid() == 0 && p.uid != 0;
	p.known = true;
	person = p;
}

const struct exec_host_person *
exec_host_person(void)
{
	return &person;
}

void
exec_host_person_set(const struct exec_host_person *p)
{
	person = *p;
}

/* ---- the walk --------------------------------------------------------------- */

static int
open_path(int dirfd, const char *name, int flags)
{
	int fd;

	do
		fd = openat(dirfd, name, flags | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

static const char *
mode_want(enum exec_host_open mode)
{
	switch (mode) {
	case EXEC_HOST_LIST:
	case EXEC_HOST_DIR:
		return "a directory";
	default:
		return "a regular file";
	}
}

/*
 * The last object of the walk (obj, an O_PATH fd, with st), in dirfd under
 * name (name NULL: reached as a directory, "/" or a link's ".."), opened as
 * mode wants. Reopening by name is checked against obj's identity: a name
 * swapped meanwhile is refused, never used.
 */
static int
finish(int dirfd, const char *name, int obj, const struct stat *st, enum exec_host_open mode,
       const char *shown, char *err, size_t errlen)
{
	bool want_dir = mode == EXEC_HOST_LIST || mode == EXEC_HOST_DIR;
	struct stat now;
	int fd = -1, rc;

	if (mode == EXEC_HOST_RESOLVE)
		return -1;
	if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) {
		gw_set_err(err, errlen, "%s is not %s", shown, mode_want(mode));
		return S_ISDIR(st->st_mode) ? -EISDIR : want_dir ? -ENOTDIR : -EINVAL;
	}
	switch (mode) {
	case EXEC_HOST_EXEC:
	case EXEC_HOST_DIR:
		fd = fcntl(obj, F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? -errno : fd;
	case EXEC_HOST_LIST:
		fd = open_path(obj, ".", O_RDONLY | O_DIRECTORY);
		break;
	case EXEC_HOST_READ:
		fd = name != NULL
		         ? open_path(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
		         : -EINVAL;
		break;
	case EXEC_HOST_WRITE:
		fd = name != NULL
		         ? open_path(dirfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
		         : -EINVAL;
		break;
	default:
		fd = -EINVAL;
	}
	if (fd < 0) {
		gw_set_err(err, errlen, "%s: %s", shown, strerror(-fd));
		return fd;
	}
	if (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		close(fd);
		gw_set_err(err, errlen, "%s changed while it was opened: refused", shown);
		return -EAGAIN;
	}
	if (mode == EXEC_HOST_WRITE && ftruncate(fd, 0) != 0) {
		rc = -errno;
		close(fd);
		gw_set_err(err, errlen, "%s: %s", shown, strerror(-rc));
		return rc;
	}
	/* Regular files only: O_NONBLOCK meant nothing but to avoid a FIFO's wait. */
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* What the walk for host access judges a symlink by. */
struct host_links {
	const char *path;
	uid_t person_uid;
	bool strict;
};

/* Host access's judge of a symlink (gw_safepath_walk): none at all when
 * strict, else root's and the person's only, at most EXEC_HOST_LINKS_MAX. */
static int
host_link_ok(void *arg, const char *shown, const struct stat *st, int links, char *err,
             size_t errlen)
{
	const struct host_links *h = arg;

	if (h->strict) {
		gw_set_err(err, errlen,
		           "%s is a symlink: this path must be walked without one "
		           "(it changed since it was resolved)",
		           shown);
		return -ELOOP;
	}
	if (st->st_uid != 0 && st->st_uid != h->person_uid) {
		gw_set_err(err, errlen,
		           "%s is a symlink owned by uid %u, neither root nor the "
		           "person serve runs for (uid %u): refused (another user "
		           "could point it anywhere)",
		           shown, (unsigned)st->st_uid, (unsigned)h->person_uid);
		return -EPERM;
	}
	if (links > EXEC_HOST_LINKS_MAX) {
		gw_set_err(err, errlen, "%s: too many symlinks", h->path);
		return -ELOOP;
	}
	return 0;
}

/*
 * The last name of a walk that does not exist: made here for
 * EXEC_HOST_WRITE (by the person, never through a link), nothing for
 * EXEC_HOST_RESOLVE, refused for every other mode.
 */
static int
finish_missing(const struct gw_safepath_walk *w, enum exec_host_open mode, char *err,
               size_t errlen)
{
	int fd;

	if (mode == EXEC_HOST_RESOLVE)
		return -1;
	if (mode != EXEC_HOST_WRITE) {
		gw_set_err(err, errlen, "%s: %s", w->shown, strerror(ENOENT));
		return -ENOENT;
	}
	fd = open_path(w->dirfd, w->base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		gw_set_err(err, errlen, "%s: %s", w->shown, strerror(-fd));
		return fd;
	}
	(void)fchmod(fd, 0644);
	return fd;
}

int
exec_host_walk(const char *path, uid_t person_uid, bool strict, enum exec_host_open mode,
               int *fd_out, char *canon_out, size_t canonlen, char *err, size_t errlen)
{
	struct host_links links = {.path = path, .person_uid = person_uid, .strict = strict};
	struct gw_safepath_walk w = {.link_ok = host_link_ok, .arg = &links, .canonical = true};
	int rc;

	*fd_out = -1;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (path == NULL || path[0] != '/') {
		gw_set_err(err, errlen, "'%s' is not an absolute path", path != NULL ? path : "");
		return -EINVAL;
	}
	if (gw_path_has_dotdot(path)) {
		gw_set_err(err, errlen, "'%s': '..' is not allowed in a host path", path);
		return -EINVAL;
	}
	rc = gw_safepath_walk(AT_FDCWD, path, &w, err, errlen);
	if (rc != 0)
		return rc;
	if (w.fd >= 0) {
		rc = finish(w.dirfd, w.base, w.fd, &w.st, mode, w.shown, err, errlen);
	} else if (strcmp(w.base, ".") == 0) {
		/* The walk ends at a directory: "/" or a link's "..". */
		rc = fstat(w.dirfd, &w.st) != 0
		         ? -errno
		         : finish(-1, NULL, w.dirfd, &w.st, mode, w.shown, err, errlen);
	} else {
		rc = finish_missing(&w, mode, err, errlen);
	}
	if (rc < 0 && mode != EXEC_HOST_RESOLVE) {
		if (err != NULL && errlen > 0 && err[0] == '\0')
			gw_set_err(err, errlen, "%s: %s", w.shown, strerror(-rc));
		gw_safepath_walk_done(&w);
		return rc;
	}
	*fd_out = rc;
	gw_safepath_walk_done(&w);
	if (snprintf(canon_out, canonlen, "%s", w.shown) >= (int)canonlen) {
		if (*fd_out >= 0)
			close(*fd_out);
		*fd_out = -1;
		gw_set_err(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

/* ---- files, with the person's file-system ids --------------------------------- */

/*
 * setfsuid, setfsgid and the raw setgroups change this thread's
 * credentials only, so that nothing else the process does at the same time
 * (its audit writer) acts as the person, and they are put back before this
 * returns.
 */
int
exec_host_open_local(const struct exec_host_person *p, const char *path, bool strict,
                     enum exec_host_open mode, int *fd, char *canon, size_t canonlen, char *err,
                     size_t errlen)
{
	gid_t saved_groups[EXEC_HOST_GROUPS_MAX];
	int nsaved = 0, rc;
	uid_t owner = p->known ? p->uid : getuid();

	*fd = -1;
	if (!p->known || !p->change_ids)
		return exec_host_walk(path, exec_rootless() ? 0 : owner, strict, mode, fd, canon,
		                      canonlen, err, errlen);
	nsaved = getgroups(EXEC_HOST_GROUPS_MAX, saved_groups);
	if (nsaved < 0) {
		gw_set_err(err, errlen, "getgroups: %s", strerror(errno));
		return -errno;
	}
	if (syscall(SYS_setgroups, p->ngroups, p->groups) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "cannot take the person's groups: %s", strerror(-rc));
		return rc;
	}
	(void)setfsgid(p->gid);
	(void)setfsuid(p->uid);
	if ((uid_t)setfsuid((uid_t)-1) != p->uid || (gid_t)setfsgid((gid_t)-1) != p->gid) {
		rc = -EPERM;
		gw_set_err(err, errlen, "cannot take the person's ids");
	} else {
		rc = exec_host_walk(path, p->uid, strict, mode, fd, canon, canonlen, err, errlen);
	}
	(void)setfsuid(geteuid());
	(void)setfsgid(getegid());
	if (syscall(SYS_setgroups, (size_t)nsaved, saved_groups) != 0 ||
	    (uid_t)setfsuid((uid_t)-1) != geteuid()) {
		/* Never go on as someone else. */
		fprintf(stderr, "tollgate: host access: cannot restore this process's ids\n");
		_exit(125);
	}
	return rc;
}

/* ---- programs ------------------------------------------------------------------- */

static double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static __attribute__((noreturn)) void
supervisor_fail(int status_fd, int err_no, const char *why)
{
	struct exec_host_status s = {.start_errno = err_no};

	snprintf(s.why, sizeof(s.why), "%s", why);
	write_all(status_fd, &s, sizeof(s));
	_exit(0);
}

/*
 * The supervisor, in its own session with the person's ids: walks the
 * program and the directory again (strictly), starts the program in a
 * process group of its own, kills the group at the deadline or when the
 * status pipe's reader goes, and writes the status. Straight-line, no
 * allocation: it may be the fork of a threaded process.
 */
static __attribute__((noreturn)) void
supervise(const struct exec_host_person *p, const struct exec_host_cmd *cmd, char *const *envp,
          int out_w, int err_w, int status_w, int null_fd)
{
	char canon[PATH_MAX], why[256];
	struct exec_host_status s = {0};
	int prog = -1, cwd = -1, ep[2], rc, pidfd;
	double deadline;
	pid_t pid;

	(void)setsid();
	if (p->change_ids) {
		if (setgroups(p->ngroups, p->groups) != 0 ||
		    setresgid(p->gid, p->gid, p->gid) != 0 ||
		    setresuid(p->uid, p->uid, p->uid) != 0)
			supervisor_fail(status_w, errno, "cannot take the person's ids");
	}
	rc = exec_host_walk(cmd->program, p->uid, true, EXEC_HOST_EXEC, &prog, canon, sizeof(canon),
	                    why, sizeof(why));
	if (rc != 0)
		supervisor_fail(status_w, -rc, why);
	rc = exec_host_walk(cmd->cwd, p->uid, true, EXEC_HOST_DIR, &cwd, canon, sizeof(canon), why,
	                    sizeof(why));
	if (rc != 0)
		supervisor_fail(status_w, -rc, why);
	if (pipe2(ep, O_CLOEXEC) != 0)
		supervisor_fail(status_w, errno, "pipe");
	pid = fork();
	if (pid < 0)
		supervisor_fail(status_w, errno, "fork");
	if (pid == 0) {
		int e;

		(void)setpgid(0, 0);
		if (dup2(null_fd, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0 ||
		    fchdir(cwd) != 0) {
			e = errno;
			write_all(ep[1], &e, sizeof(e));
			_exit(127);
		}
		signal(SIGPIPE, SIG_DFL);
		syscall(SYS_execveat, prog, "", cmd->argv, envp, AT_EMPTY_PATH);
		if (errno == ENOENT) {
			/* A script is read by its interpreter through /dev/fd/N: that
			 * fd must live through the exec. */
			(void)fcntl(prog, F_SETFD, 0);
			syscall(SYS_execveat, prog, "", cmd->argv, envp, AT_EMPTY_PATH);
		}
		e = errno;
		write_all(ep[1], &e, sizeof(e));
		_exit(127);
	}
	(void)setpgid(pid, pid);
	close(ep[1]);
	close(out_w);
	close(err_w);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	deadline = mono_now() + cmd->timeout;
	for (;;) {
		struct pollfd pf[2] = {{.fd = pidfd, .events = POLLIN},
		                       {.fd = status_w, .events = 0}};
		double left = deadline - mono_now();
		int n;

		if (left <= 0) {
			s.timed_out = 1;
			break;
		}
		n = poll(pf, 2, (int)(left * 1000) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (pf[0].revents & POLLIN) || pidfd < 0)
			break;
		if (pf[1].revents & (POLLERR | POLLHUP))
			break; /* nobody waits for it any more */
	}
	if (s.timed_out || waitpid(pid, &s.wstatus, WNOHANG) != pid) {
		(void)kill(-pid, SIGKILL);
		(void)kill(pid, SIGKILL);
		while (waitpid(pid, &s.wstatus, 0) < 0 && errno == EINTR)
			;
	}
	/* What it left behind in its group goes with it. */
	(void)kill(-pid, SIGKILL);
	{
		int e = 0;

		if (read(ep[0], &e, sizeof(e)) == (ssize_t)sizeof(e) && e != 0) {
			s.start_errno = e;
			snprintf(s.why, sizeof(s.why), "cannot start %s", cmd->program);
		}
	}
	write_all(status_w, &s, sizeof(s));
	_exit(0);
}

#define HOST_ENV_MAX 6

int
exec_host_spawn_local(const struct exec_host_person *p, const struct exec_host_cmd *cmd, int fds[3],
                      char *err, size_t errlen)
{
	char env_home[600], env_user[80], env_logname[80];
	char *envp[HOST_ENV_MAX + 1];
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, st[2] = {-1, -1}, null_fd = -1, rc = 0;
	struct exec_host_person self = {0};
	pid_t pid;
	size_t n = 0;

	fds[0] = fds[1] = fds[2] = -1;
	if (cmd->argv == NULL || cmd->argv[0] == NULL || cmd->program == NULL || cmd->cwd == NULL ||
	    cmd->timeout < 1 || cmd->timeout > EXEC_HOST_TIMEOUT_MAX) {
		gw_set_err(err, errlen, "a malformed host command");
		return -EINVAL;
	}
	if (!p->known) {
		self.uid = getuid();
		self.gid = getgid();
		snprintf(self.home, sizeof(self.home), "/");
		snprintf(self.name, sizeof(self.name), "uid%u", (unsigned)self.uid);
		p = &self;
	}
	snprintf(env_home, sizeof(env_home), "HOME=%s", p->home);
	snprintf(env_user, sizeof(env_user), "USER=%s", p->name);
	snprintf(env_logname, sizeof(env_logname), "LOGNAME=%s", p->name);
	envp[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	envp[n++] = env_home;
	envp[n++] = env_user;
	envp[n++] = env_logname;
	envp[n++] = "LANG=C.UTF-8";
	envp[n] = NULL;
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 ||
	    pipe2(st, O_CLOEXEC) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "pipe: %s", strerror(-rc));
		goto out;
	}
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "/dev/null: %s", strerror(-rc));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "fork: %s", strerror(-rc));
		goto out;
	}
	if (pid == 0) {
		/* The supervisor is no child of ours: nothing of ours waits for it. */
		close(out[0]);
		close(errp[0]);
		close(st[0]);
		pid = fork();
		if (pid != 0)
			_exit(pid < 0 ? 1 : 0);
		/* A rootless process's rlimits and signal mask carry over; the
		 * signals the caller ignores should not stay ignored. */
		signal(SIGPIPE, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		supervise(p, cmd, envp, out[1], errp[1], st[1], null_fd);
	}
	{
		int ws = 0;

		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
			rc = -ECHILD;
			gw_set_err(err, errlen, "cannot start the host command's supervisor");
			goto out;
		}
	}
	fds[0] = out[0];
	fds[1] = errp[0];
	fds[2] = st[0];
	out[0] = errp[0] = st[0] = -1;
out:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
		if (st[i] >= 0)
			close(st[i]);
	}
	if (null_fd >= 0)
		close(null_fd);
	return rc;
}

/* ---- the dispatch --------------------------------------------------------------- */

static int
open_here(const char *path, bool strict, enum exec_host_open mode, int *fd, char *canon,
          size_t canonlen, char *err, size_t errlen)
{
	return exec_host_open_local(&person, path, strict, mode, fd, canon, canonlen, err, errlen);
}

static int
spawn_here(const struct exec_host_cmd *cmd, int fds[3], char *err, size_t errlen)
{
	return exec_host_spawn_local(&person, cmd, fds, err, errlen);
}

static const struct exec_host_ops here_ops = {.open = open_here, .spawn = spawn_here};
static const struct exec_host_ops *host_ops = &here_ops;

void
exec_host_ops_install(const struct exec_host_ops *ops)
{
	host_ops = ops;
}

int
exec_host_open(const char *path, bool strict, enum exec_host_open mode, int *fd, char *canon,
               size_t canonlen, char *err, size_t errlen)
{
	return host_ops->open(path, strict, mode, fd, canon, canonlen, err, errlen);
}

int
exec_host_spawn(const struct exec_host_cmd *cmd, int fds[3], char *err, size_t errlen)
{
	return host_ops->spawn(cmd, fds, err, errlen);
}
