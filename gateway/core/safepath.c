/*
 * The path walk of gateway/core/safepath.h: one component at a time, every
 * symlink judged by its owner before it is followed, and the result an fd,
 * so nothing is looked up by name twice.
 */
#include "gateway/core/safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gateway/core/err.h"
#include "gateway/core/fdio.h"

bool
gw_safepath_owner_ok(uid_t uid)
{
	const char *sudo = getenv("SUDO_UID");
	char *end;
	long v;

	if (uid == 0 || uid == getuid())
		return true;
	if (getuid() != 0 || sudo == NULL || *sudo == '\0')
		return false;
	errno = 0;
	v = strtol(sudo, &end, 10);
	return errno == 0 && *end == '\0' && v > 0 && (uid_t)v == uid;
}

/* One component, never followed: a symlink comes back as itself. */
static int
open_component(int dirfd, const char *name)
{
	struct open_how how = {
	    .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
	    .resolve = RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	do
		fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	while (fd < 0 && errno == EINTR);
	if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
		/* Before Linux 5.6, or a seccomp filter that does not know it. */
		do
			fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		while (fd < 0 && errno == EINTR);
	}
	return fd < 0 ? -errno : fd;
}

/* Where the walk starts: "/" for an absolute path, else atfd (AT_FDCWD: ".") itself. */
static int
open_root(int atfd, const char *path)
{
	int fd;

	if (path[0] == '/')
		fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	else
		fd = openat(atfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * A symlink at fd: refused unless its owner is allowed, else its target
 * with what was left of the path after it, in rest.
 */
static int
follow(int fd, const char *shown, const char *left, char *rest, size_t restlen, char *err,
       size_t errlen)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int len;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (!gw_safepath_owner_ok(st.st_uid)) {
		gw_set_err(
		    err, errlen,
		    "%s is a symlink owned by uid %u, neither root nor you: refused (another "
		    "user could point it anywhere)",
		    shown, (unsigned int)st.st_uid);
		return -EPERM;
	}
	n = readlinkat(fd, "", target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ENOENT;
	target[n] = '\0';
	len = snprintf(rest, restlen, "%s%s%s", target, *left != '\0' ? "/" : "", left);
	if (len < 0 || (size_t)len >= restlen)
		return -ENAMETOOLONG;
	return 0;
}

int
gw_safepath_resolve(const char *path, int *dirfd_out, char *base, size_t baselen, char *err,
                    size_t errlen)
{
	return gw_safepath_resolve_at(AT_FDCWD, path, dirfd_out, base, baselen, err, errlen);
}

int
gw_safepath_resolve_at(int atfd, const char *path, int *dirfd_out, char *base, size_t baselen,
                       char *err, size_t errlen)
{
	char rest[PATH_MAX], next[PATH_MAX], comp[NAME_MAX + 1], shown[PATH_MAX];
	size_t shown_len = 0;
	int dirfd = -1, fd = -1, links = 0, rc;

	*dirfd_out = -1;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (path == NULL || *path == '\0') {
		gw_set_err(err, errlen, "empty path");
		return -EINVAL;
	}
	if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest)) {
		gw_set_err(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	dirfd = open_root(atfd, rest);
	if (dirfd < 0) {
		rc = dirfd;
		dirfd = -1;
		goto fail;
	}
	shown[0] = '\0';
	for (;;) {
		const char *p = rest, *end;
		size_t clen;

		while (*p == '/')
			p++;
		if (*p == '\0') {
			/* "/" or "dir/": the directory itself is what was named. */
			rc = snprintf(base, baselen, ".");
			goto done;
		}
		end = strchr(p, '/');
		clen = end != NULL ? (size_t)(end - p) : strlen(p);
		if (clen > NAME_MAX) {
			rc = -ENAMETOOLONG;
			goto fail;
		}
		memcpy(comp, p, clen);
		comp[clen] = '\0';
		p += clen;
		while (*p == '/')
			p++;
		shown_len += (size_t)snprintf(shown + shown_len, sizeof(shown) - shown_len, "%s%s",
		                              shown_len > 0 || path[0] == '/' ? "/" : "", comp);
		if (shown_len >= sizeof(shown))
			shown_len = sizeof(shown) - 1;
		fd = open_component(dirfd, comp);
		if (fd == -ENOENT && *p == '\0') {
			/* The last name, not made yet: the caller creates it. */
			fd = -1;
			rc = snprintf(base, baselen, "%s", comp);
			goto done;
		}
		if (fd < 0) {
			rc = fd;
			fd = -1;
			goto fail;
		}
		struct stat st;

		if (fstat(fd, &st) != 0) {
			rc = -errno;
			goto fail;
		}
		if (S_ISLNK(st.st_mode)) {
			if (++links > GW_SAFEPATH_MAX_LINKS) {
				rc = -ELOOP;
				goto fail;
			}
			rc = follow(fd, shown, p, next, sizeof(next), err, errlen);
			if (rc != 0)
				goto fail;
			close(fd);
			fd = -1;
			memcpy(rest, next, sizeof(rest));
			if (rest[0] == '/') {
				close(dirfd);
				dirfd = open_root(AT_FDCWD, rest);
				if (dirfd < 0) {
					rc = dirfd;
					dirfd = -1;
					goto fail;
				}
			}
			continue;
		}
		if (*p == '\0') {
			/* The last name: its directory and its name. */
			close(fd);
			fd = -1;
			rc = snprintf(base, baselen, "%s", comp);
			goto done;
		}
		if (!S_ISDIR(st.st_mode)) {
			rc = -ENOTDIR;
			goto fail;
		}
		close(dirfd);
		dirfd = fd;
		fd = -1;
		memmove(rest, p, strlen(p) + 1);
	}
done:
	if (rc < 0 || (size_t)rc >= baselen) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	*dirfd_out = dirfd;
	return 0;
fail:
	if (err != NULL && errlen > 0 && err[0] == '\0')
		gw_set_err(err, errlen, "%s: %s", shown[0] != '\0' ? shown : path, strerror(-rc));
	if (fd >= 0)
		close(fd);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

int
gw_safepath_open(const char *path, int flags, mode_t mode, char *err, size_t errlen)
{
	return gw_safepath_open_at(AT_FDCWD, path, flags, mode, err, errlen);
}

/* gw_safepath_mkdirs for path's first len bytes; depth bounds the recursion. */
static int
mkdirs_n(const char *path, size_t len, mode_t mode, int depth, char *err, size_t errlen)
{
	char sub[PATH_MAX], base[NAME_MAX + 1];
	int dirfd = -1, rc;

	if (len == 0 || len >= sizeof(sub))
		return -ENAMETOOLONG;
	if (depth > PATH_MAX / 2) {
		gw_set_err(err, errlen, "%s: too many components", path);
		return -ELOOP;
	}
	memcpy(sub, path, len);
	sub[len] = '\0';
	rc = gw_safepath_resolve(sub, &dirfd, base, sizeof(base), err, errlen);
	if (rc == -ENOENT) {
		/* The parent is missing too: make it first (trailing slashes skipped). */
		size_t cut = len;

		while (cut > 0 && sub[cut - 1] == '/')
			cut--;
		while (cut > 0 && sub[cut - 1] != '/')
			cut--;
		while (cut > 1 && sub[cut - 1] == '/')
			cut--;
		if (cut == 0 || (cut == 1 && sub[0] == '/'))
			return rc;
		rc = mkdirs_n(path, cut, 0755, depth + 1, err, errlen);
		if (rc == 0)
			rc = gw_safepath_resolve(sub, &dirfd, base, sizeof(base), err, errlen);
	}
	if (rc != 0)
		return rc;
	if (strcmp(base, ".") != 0 && mkdirat(dirfd, base, mode) != 0 && errno != EEXIST) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", sub, strerror(errno));
	}
	close(dirfd);
	if (rc == 0) {
		/* What stands there now, walked again: a link raced in is judged. */
		int fd = gw_safepath_open(sub, O_PATH | O_DIRECTORY, 0, err, errlen);

		if (fd < 0)
			return fd;
		close(fd);
	}
	return rc;
}

int
gw_safepath_mkdirs(const char *path, mode_t mode, char *err, size_t errlen)
{
	return mkdirs_n(path, strlen(path), mode, 0, err, errlen);
}

int
gw_safepath_open_output(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	fd = gw_safepath_open(path, O_WRONLY | O_CREAT | O_NOCTTY, mode, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0)) {
		int rc = -errno;

		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

int
gw_safepath_open_at(int atfd, const char *path, int flags, mode_t mode, char *err, size_t errlen)
{
	char base[NAME_MAX + 1];
	int dirfd, fd, rc;

	rc = gw_safepath_resolve_at(atfd, path, &dirfd, base, sizeof(base), err, errlen);
	if (rc != 0)
		return rc;
	/* O_NOFOLLOW: a link made after the walk is refused, never written through. */
	do
		fd = openat(dirfd, base, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	rc = fd < 0 ? -errno : fd;
	if (rc < 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-rc));
	close(dirfd);
	return rc;
}

int
gw_safepath_open_in(int dirfd, const char *name, int flags, mode_t mode, const char *shown,
                    char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	do
		fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	if (fd >= 0)
		return fd;
	rc = -errno;
	/* O_NOFOLLOW says ELOOP (ENOTDIR with O_DIRECTORY, EEXIST with O_EXCL): say whose link
	 * it is. */
	if ((rc == -ELOOP || rc == -ENOTDIR || rc == -EEXIST) &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
		gw_set_err(
		    err, errlen,
		    "%s is a symbolic link (owned by uid %u): refused, tollgate never reads or "
		    "writes its own files through a link",
		    shown, (unsigned int)st.st_uid);
		return -ELOOP;
	}
	gw_set_err(err, errlen, "%s: %s", shown, strerror(-rc));
	return rc;
}

int
gw_safepath_check_private(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		gw_set_err(err, errlen, "%s: not a regular file", path);
		return -EACCES;
	}
	if (st.st_uid != geteuid()) {
		gw_set_err(err, errlen, "%s: owned by uid %u, not by this user; refused", path,
		           (unsigned int)st.st_uid);
		return -EACCES;
	}
	if ((st.st_mode & 077) != 0) {
		gw_set_err(err, errlen,
		           "%s: group or others have access (mode %04o); refused, chmod 600 it",
		           path, (unsigned int)(st.st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

int
gw_safepath_open_file(const char *path, size_t max, struct stat *st, char *err, size_t errlen)
{
	char why[PATH_MAX + 128];
	int fd, rc;

	fd = gw_safepath_open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, why, sizeof(why));
	/* A refused link is named with its owner; any other failure names the
	 * whole path, as open(2)'s callers always said it. */
	if (fd == -EPERM || fd == -ELOOP)
		gw_set_err(err, errlen, "%s", why);
	else if (fd < 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-fd));
	if (fd < 0)
		return fd;
	if (fstat(fd, st) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st->st_mode)) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if ((unsigned long long)st->st_size > (unsigned long long)max) {
		rc = -EFBIG;
		gw_set_err(err, errlen, "%s: larger than %zu bytes, the limit for this file", path,
		           max);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

int
gw_safepath_read_file(const char *path, size_t max, char **out, size_t *len, char *err,
                      size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	int fd, rc;

	*out = NULL;
	*len = 0;
	fd = gw_safepath_open_file(path, max, &st, err, errlen);
	if (fd < 0)
		return fd;
	buf = malloc(max + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* The size may change after fstat: the cap holds on the read too. */
	rc = gw_read_capped(fd, buf, max + 1, len);
	if (rc == 0 && *len > max)
		rc = -EFBIG;
	if (rc == -EFBIG)
		gw_set_err(err, errlen, "%s: larger than %zu bytes, the limit for this file", path,
		           max);
	else if (rc != 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-rc));
out:
	close(fd);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	buf[*len] = '\0';
	*out = buf;
	return 0;
}
