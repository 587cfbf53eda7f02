/*
 * gVisor (runsc) as a sandbox's runtime (exec/sandbox/runsc.h): finding the binary,
 * binding it into the sandbox, wrapping the command in `runsc do`, and the
 * ids runsc starts with. The sandbox around it is tollgate's as always.
 */
#include "exec/sandbox/runsc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/sandbox/exec.h"
#include "gateway/core/err.h"

int
exec_runsc_find(char *path, size_t len)
{
	const char *env = getenv("PATH");
	char dirs[4096];
	char *d, *next;
	struct stat st;

	if (env == NULL || snprintf(dirs, sizeof(dirs), "%s", env) >= (int)sizeof(dirs))
		goto none;
	for (d = dirs; d != NULL; d = next) {
		next = strchr(d, ':');
		if (next != NULL)
			*next++ = '\0';
		if (d[0] != '/')
			continue; /* a relative PATH entry names no fixed binary */
		if (snprintf(path, len, "%s/runsc", d) >= (int)len)
			continue;
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
			return 0;
	}
none:
	path[0] = '\0';
	return -ENOENT;
}

void
exec_runsc_version(const char *runsc, char *out, size_t len)
{
	char buf[256];
	int fds[2], wstatus;
	ssize_t n, got = 0;
	pid_t pid;

	snprintf(out, len, "unknown");
	if (pipe2(fds, O_CLOEXEC) != 0)
		return;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null < 0 || dup2(fds[1], 1) < 0 || dup2(null, 0) < 0 || dup2(null, 2) < 0)
			_exit(127);
		execl(runsc, "runsc", "--version", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while (pid > 0 && (size_t)got < sizeof(buf) - 1) {
		n = read(fds[0], buf + got, sizeof(buf) - 1 - (size_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(fds[0]);
	while (pid > 0 && waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
		;
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (buf[0] != '\0')
		snprintf(out, len, "%s", buf);
}

/*
 * runsc's own flags, before the command: ptrace, the platform that needs
 * no KVM; the host network, which inside the sandbox is the sandbox's own
 * namespace, whose one route is the veth to the gate; no cgroup of its
 * own, so that its processes stay in the sandbox's; its state on the
 * sandbox's /tmp. `do` serves the sandbox's / (the image's root, /work,
 * /tmp, /etc's files) through its gofer, written in place rather than in
 * an overlay of its memory: the tree tollgate made is read-only where it
 * should be already, and /work's writes must reach /work.
 */
static const char *const runsc_flags[] = {
    EXEC_RUNSC_PATH,
    ("--platform=" EXEC_RUNSC_PLATFORM), /* one string: the flag and its value */
    "--network=host",
    "--ignore-cgroups",
    "--rootless",
    "--root=/tmp/.runsc",
    "do",
    "--force-overlay=false",
    "--quiet",
    "--",
};
#define RUNSC_NFLAGS (sizeof(runsc_flags) / sizeof(runsc_flags[0]))

int
exec_runsc_plan(struct exec_plan *p, const char *runsc, char *err, size_t errlen)
{
	struct exec_plan_bind *b;
	struct mount_attr attr;
	struct stat st;
	size_t argc = 0;
	int fd, rc;

	if (runsc[0] != '/') {
		gw_set_err(err, errlen, "runsc: %s is not an absolute path", runsc);
		return -EINVAL;
	}
	if (p->nbinds >= sizeof(p->binds) / sizeof(p->binds[0])) {
		gw_set_err(err, errlen, "runsc: too many binds");
		return -E2BIG;
	}
	while (p->argv != NULL && p->argv[argc] != NULL)
		argc++;
	if (argc == 0) {
		gw_set_err(err, errlen, "runsc: runs a command; a kept-alive sandbox has none");
		return -EINVAL;
	}
	fd = open(runsc, O_PATH | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "runsc: %s: %s", runsc, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "runsc: %s: not a regular file", runsc);
		goto out;
	}
	b = &p->binds[p->nbinds];
	b->tree_fd = (int)syscall(SYS_open_tree, fd, "",
	                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (b->tree_fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "runsc: open_tree: %s", strerror(errno));
		goto out;
	}
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (syscall(SYS_mount_setattr, b->tree_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "runsc: mount_setattr: %s", strerror(errno));
		close(b->tree_fd);
		b->tree_fd = -1;
		goto out;
	}
	b->writable = false;
	b->is_dir = false;
	snprintf(b->dest, sizeof(b->dest), "%s", EXEC_RUNSC_PATH);
	p->runsc_argv = calloc(RUNSC_NFLAGS + argc + 1, sizeof(char *));
	if (p->runsc_argv == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "runsc: %s", strerror(ENOMEM));
		close(b->tree_fd);
		b->tree_fd = -1;
		goto out;
	}
	p->nbinds++;
	for (size_t i = 0; i < RUNSC_NFLAGS; i++)
		p->runsc_argv[i] = (char *)runsc_flags[i];
	for (size_t i = 0; i < argc; i++)
		p->runsc_argv[RUNSC_NFLAGS + i] = p->argv[i];
	p->argv = p->runsc_argv;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

void
exec_runsc_release(struct exec_plan *p)
{
	free(p->runsc_argv);
	p->runsc_argv = NULL;
}
