/*
 * What a run leaves on disk is named after the tollgate process that made
 * it (pid and start time): the next tollgate removes the temporary
 * directories and cgroups of processes that died without cleaning up.
 */
#include "exec/sandbox/workdir.h"
#include "exec/sandbox/exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REMOVE_MAX_DEPTH 256

const char *
exec_tmp_dir(void)
{
	const char *t = getenv("TMPDIR");

	if (t != NULL && t[0] == '/' && strlen(t) < 512)
		return t;
	return "/tmp";
}

/* Field 22 of /proc/PID/stat: start time in clock ticks since boot. */
static int
start_time(pid_t pid, unsigned long long *out)
{
	char path[64], buf[1024];
	const char *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: skip to the last ')'. */
	p = strrchr(buf, ')');
	if (p == NULL)
		return -EIO;
	p++; /* the space before field 3 */
	for (field = 3; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return -EIO;
	*out = strtoull(p + 1, NULL, 10);
	return 0;
}

int
exec_instance_tag(char *buf, size_t len)
{
	unsigned long long st;
	int rc, n;

	rc = start_time(getpid(), &st);
	if (rc != 0)
		return rc;
	n = snprintf(buf, len, EXEC_TAG_PREFIX "%d.%llu", (int)getpid(), st);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

bool
exec_tag_is_stale(const char *name, const char *prefix)
{
	unsigned long long st, now;
	size_t plen = strlen(prefix);
	const char *p;
	char *end;
	long pid;

	if (strncmp(name, prefix, plen) != 0)
		return false;
	p = name + plen;
	pid = strtol(p, &end, 10);
	if (end == p || *end != '.' || pid <= 0 || pid > 0x400000)
		return false;
	p = end + 1;
	st = strtoull(p, &end, 10);
	if (end == p || (*end != '.' && *end != '\0'))
		return false;
	if (start_time((pid_t)pid, &now) != 0)
		return true; /* no such process */
	return now != st;    /* the pid was reused by another process */
}

static int
remove_at(int dirfd, const char *name, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth > REMOVE_MAX_DEPTH)
		return -ELOOP;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (d == NULL) {
		rc = -errno;
		close(fd);
		return rc;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (de == NULL)
			break;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (remove_at(fd, de->d_name, depth + 1) != 0)
			rc = -EIO;
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

int
exec_remove_tree(const char *path)
{
	return remove_at(AT_FDCWD, path, 0);
}

static void
kill_and_rmdir_cgroup(const char *dir)
{
	exec_cgroup_kill_listed(dir);
	for (int i = 0; i < 50; i++) {
		if (rmdir(dir) == 0 || errno != EBUSY)
			return;
		usleep(10000);
	}
}

void
exec_cleanup_stale(void)
{
	char dirs[5][PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	int n;
	DIR *d;

	d = opendir(exec_tmp_dir());
	if (d != NULL) {
		for (;;) {
			de = readdir(d);
			if (de == NULL)
				break;
			if (!exec_tag_is_stale(de->d_name, EXEC_TAG_PREFIX))
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", exec_tmp_dir(), de->d_name) >=
			    (int)sizeof(path))
				continue;
			/* A bounded work directory: a sandbox's (NAME/work) or
			 * serve's (NAME itself), detached before its removal. */
			exec_disk_release(path);
			{
				char work[PATH_MAX + 8];

				if (snprintf(work, sizeof(work), "%s/work", path) <
				    (int)sizeof(work))
					exec_disk_release(work);
			}
			exec_remove_tree(path);
		}
		closedir(d);
	}
	n = exec_cgroup_dirs(dirs, 5);
	for (int i = 0; i < n; i++) {
		d = opendir(dirs[i]);
		if (d == NULL)
			continue;
		for (;;) {
			de = readdir(d);
			if (de == NULL)
				break;
			if (!exec_tag_is_stale(de->d_name, EXEC_TAG_PREFIX))
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", dirs[i], de->d_name) <
			    (int)sizeof(path))
				kill_and_rmdir_cgroup(path);
		}
		closedir(d);
	}
}
